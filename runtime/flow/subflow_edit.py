"""Edits of a flow's subflows, as pure transforms: each takes a Flow and
returns a new one (the one given is left as it was), or raises ValueError
with a sentence a user can read. The designer wraps each in one undo step;
nothing here knows Qt.

- ``convert_selection``: some nodes become a new definition kept in the
  flow file, and one instance of it takes their place. Every wire that
  entered the selection becomes a ``subflow.in`` (one per inner port it
  reached), every wire that left it a ``subflow.out`` (one per inner port
  it left from), so the flow runs as before.
- ``expand_instance``: the inverse. The definition's nodes take the
  instance's place, with the instance's param values in place of the
  definition's params, and the wires that went through ``subflow.in`` and
  ``subflow.out`` go straight to what those connect. The definition stays
  in the file (as in Node-RED): other instances may use it, and if none
  does it is still in the palette, to place again or to delete.
- ``move_to_library``: an in-flow definition goes to a library file
  (NAME.subflow.json) and the flow's instances of it pin that version.

Each works on the top-level flow or, with ``within=NAME``, on the nodes of
the in-flow definition NAME (the designer's definition tab); a definition a
transform makes is always one of the flow file's own (``Flow.subflows``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..spec import ParamValue, Scope
from .model import (
    HOOK_PORTS,
    SEMVER_RE,
    SUBFLOW_NAME_RE,
    Flow,
    FlowError,
    FlowNode,
    SubflowDef,
    SubflowPin,
    Wire,
    fresh_id,
)
from .subflows import (
    IN_TYPE,
    OUT_TYPE,
    TYPE_PREFIX,
    find_library,
    is_instance_type,
    library_dirs,
    port_names,
    save_to_library,
    subflow_name,
    version_key,
)

if TYPE_CHECKING:
    from ..registry import Registry

#: Where a converted definition's inner nodes start: one column to the
#: right of its inputs (a node is 168 px wide in the designer).
COLUMN = 240.0
#: Vertical distance between two inputs (or outputs) placed in one column.
ROW = 80.0


# -- where the nodes being edited are ---------------------------------------------
def _container(flow: Flow, within: str | None) -> tuple[list[FlowNode], list[Wire]]:
    """The nodes and wires a transform edits: the flow's, or (``within``)
    those of one of its own definitions."""
    if within is None:
        return flow.nodes, flow.wires
    defn = flow.subflow(within)
    if defn is None:
        raise ValueError(f"the flow has no subflow named '{within}'")
    return defn.nodes, defn.wires


def _set_container(flow: Flow, within: str | None, nodes: list[FlowNode],
                   wires: list[Wire]) -> None:
    if within is None:
        flow.nodes, flow.wires = nodes, wires
    else:
        defn = flow.subflow(within)
        assert defn is not None
        defn.nodes, defn.wires = nodes, wires


def _copy(flow: Flow) -> Flow:
    return flow.model_copy(deep=True)


def _label(n: FlowNode) -> str:
    return f"'{n.name}' ({n.id})" if n.name and n.name != n.id else f"'{n.id}'"


def _special_kind(port: str, node: FlowNode | None, registry: Registry | None) -> str:
    """"tools" or "hook" for an agent's tools or hook output, else ""."""
    spec = registry.spec(node.type) if registry is not None and node is not None else None
    if spec is not None:
        for p in spec.outputs:
            if p.name == port:
                return p.kind if p.kind in ("tools", "hook") else ""
        return ""
    if port == "tools":
        return "tools"
    return "hook" if port in HOOK_PORTS else ""


def _port_word(text: str) -> str:
    """A node id or port made into a port name: letters, digits and _."""
    word = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    return word or "port"


def _check_name(flow: Flow, name: str, taken: Iterable[str]) -> None:
    if not isinstance(name, str) or not re.match(SUBFLOW_NAME_RE, name):
        raise ValueError(f"'{name}' cannot name a subflow: use letters, digits and _, "
                         "starting with a letter or _, at most 64 characters (e.g. check_stock)")
    if flow.subflow(name) is not None:
        raise ValueError(f"this flow already has a subflow named '{name}'")
    if name in set(taken):
        raise ValueError(f"the subflow library already has a subflow named '{name}'")


# -- convert a selection ------------------------------------------------------------
def convert_selection(flow: Flow, node_ids: Iterable[str], name: str, label: str = "", *,
                      within: str | None = None, registry: Registry | None = None,
                      taken: Iterable[str] = ()) -> Flow:
    """The flow with the nodes ``node_ids`` (of the flow, or of its
    definition ``within``) moved into a new definition ``name`` kept in the
    flow file, and an instance of it, placed at the selection's centre, wired
    where they were.

    Inside the definition the nodes keep their ids and their places
    relative to each other; a ``subflow.in`` is placed on the left for each
    inner port that a wire from outside reached, a ``subflow.out`` on the
    right for each inner port that a wire to outside left from. One input
    or output is named ``in``/``out``; several are named after the node
    (and port, if not the usual one) they lead to or come from.

    Refused (ValueError, saying why): an empty selection, an unknown node,
    a name that is not a subflow name or is taken (in the flow, or in
    ``taken``: the library's names), a ``subflow.in``/``subflow.out`` node
    in the selection, a node a flow hook starts at, and a wire from an
    agent's tools or hook port that crosses the selection's edge (an agent
    and its tools, or its hook flow, go together or not at all).
    ``registry`` tells which ports are an agent's tools and hooks; without
    it the port names ``tools`` and ``on_*`` do."""
    ids = list(dict.fromkeys(node_ids))
    if not ids:
        raise ValueError("select the nodes to turn into a subflow first")
    _check_name(flow, name, taken)
    if label is not None and len(label) > 200:
        raise ValueError("a subflow's label has at most 200 characters")
    out = _copy(flow)
    nodes, wires = _container(out, within)
    by_id = {n.id: n for n in nodes}
    chosen = set(ids)
    for nid in ids:
        n = by_id.get(nid)
        if n is None:
            raise ValueError(f"there is no node '{nid}' to put in the subflow")
        if n.type in (IN_TYPE, OUT_TYPE):
            what = "input" if n.type == IN_TYPE else "output"
            raise ValueError(f"{_label(n)} is an {what} of the subflow being edited; it cannot "
                             "go into a new subflow (leave it out of the selection)")
        if is_instance_type(n.type) and within is not None and subflow_name(n.type) == within:
            raise ValueError(f"{_label(n)} is an instance of '{within}' itself")
    if within is None:
        for hook in out.settings.hooks:
            if hook.node in chosen:
                raise ValueError(f"{_label(by_id[hook.node])} starts the flow's {hook.port} "
                                 "hook (flow settings): a hook flow cannot move into a subflow")
    for w in wires:
        inside_src, inside_dst = w.source[0] in chosen, w.target[0] in chosen
        if inside_src == inside_dst:
            continue
        kind = _special_kind(w.source[1], by_id.get(w.source[0]), registry)
        if kind:
            src, dst = by_id.get(w.source[0]), by_id.get(w.target[0])
            what = "tool" if kind == "tools" else f"{w.source[1]} hook"
            raise ValueError(
                f"the wire from {_label(src) if src else w.source[0]}'s {w.source[1]} port to "
                f"its {what} {_label(dst) if dst else w.target[0]} crosses the selection's "
                "edge: select the agent and what is wired to its "
                f"{'tools' if kind == 'tools' else 'hook'} port together, or neither")

    inner = [n for n in nodes if n.id in chosen]
    # Inputs: one per distinct inner (node, port) that a wire from outside
    # reaches; outputs: one per distinct inner (node, port) a wire leaves.
    entering = [w for w in wires if w.target[0] in chosen and w.source[0] not in chosen]
    leaving = [w for w in wires if w.source[0] in chosen and w.target[0] not in chosen]
    order = {n.id: i for i, n in enumerate(nodes)}

    def place_key(end: tuple[str, str]) -> tuple:
        n = by_id[end[0]]
        return (n.position[1], n.position[0], order[end[0]], end[1])

    in_ends = sorted(dict.fromkeys(w.target for w in entering), key=place_key)
    out_ends = sorted(dict.fromkeys(w.source for w in leaving), key=place_key)
    in_names = _port_names(in_ends, "in")
    out_names = _port_names(out_ends, "out")

    # Placement: the inner nodes keep their relative places, moved so that
    # the leftmost is one column in; inputs left of them, outputs right.
    xs = [n.position[0] for n in inner]
    ys = [n.position[1] for n in inner]
    minx, miny = min(xs), min(ys)
    dx, dy = COLUMN - minx, ROW - miny
    right = max(xs) + dx + COLUMN
    inner_copies = []
    for n in inner:
        c = n.model_copy(deep=True)
        c.position = (n.position[0] + dx, n.position[1] + dy)
        inner_copies.append(c)
    taken_ids = set(chosen)
    port_nodes_in: dict[tuple[str, str], FlowNode] = {}
    port_nodes_out: dict[tuple[str, str], FlowNode] = {}
    for ends, names, ptype, x, store in ((in_ends, in_names, IN_TYPE, 0.0, port_nodes_in),
                                         (out_ends, out_names, OUT_TYPE, right, port_nodes_out)):
        last_y = None
        for end in ends:
            pname = names[end]
            word = "in" if ptype == IN_TYPE else "out"
            pid = fresh_id(f"{word}put" if len(ends) == 1 else f"{word}_{pname}", taken_ids)
            taken_ids.add(pid)
            y = by_id[end[0]].position[1] + dy
            if last_y is not None and y < last_y + ROW:
                y = last_y + ROW
            last_y = y
            store[end] = FlowNode(id=pid, type=ptype, position=(x, y),
                                  params={"name": ParamValue(scope=Scope.CUSTOM, value=pname)})

    inner_wires: list[Wire] = []
    made_in: set[tuple[str, str]] = set()
    made_out: set[tuple[str, str]] = set()
    for w in wires:
        src_in, dst_in = w.source[0] in chosen, w.target[0] in chosen
        if src_in and dst_in:
            inner_wires.append(w.model_copy())
        elif dst_in and w.target not in made_in:
            made_in.add(w.target)
            inner_wires.append(Wire(source=(port_nodes_in[w.target].id, "out"), target=w.target))
        elif src_in and w.source not in made_out:
            made_out.add(w.source)
            inner_wires.append(Wire(source=w.source, target=(port_nodes_out[w.source].id, "in")))
    defn = SubflowDef(name=name, label=label or "",
                      nodes=[*(port_nodes_in[e] for e in in_ends), *inner_copies,
                             *(port_nodes_out[e] for e in out_ends)],
                      wires=inner_wires)

    # The instance: at the centre of the selection, wired in its place.
    container_ids = {n.id for n in nodes}
    inst_id = fresh_id(name, container_ids - chosen)
    centre = ((minx + max(xs)) / 2, (miny + max(ys)) / 2)
    instance = FlowNode(id=inst_id, type=TYPE_PREFIX + name, position=centre)
    new_nodes: list[FlowNode] = []
    for n in nodes:  # the instance where the first of the selection was
        if n.id not in chosen:
            new_nodes.append(n)
        elif not any(m is instance for m in new_nodes):
            new_nodes.append(instance)
    new_wires: list[Wire] = []
    for w in wires:
        src_in, dst_in = w.source[0] in chosen, w.target[0] in chosen
        if src_in and dst_in:
            continue
        if dst_in:
            new_wires.append(Wire(source=w.source, target=(inst_id, in_names[w.target])))
        elif src_in:
            new_wires.append(Wire(source=(inst_id, out_names[w.source]), target=w.target))
        else:
            new_wires.append(w)
    _set_container(out, within, new_nodes, new_wires)
    out.subflows = [*out.subflows, defn]
    return out


def _port_names(ends: list[tuple[str, str]], base: str) -> dict[tuple[str, str], str]:
    """Port names for the inner ends of crossing wires: ``base`` for one,
    else the node id (and port, unless the usual one), made unique."""
    if len(ends) == 1:
        return {ends[0]: base}
    names: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for node_id, port in ends:
        word = _port_word(node_id if port == base else f"{node_id}_{port}")
        word = fresh_id(word, used)
        used.add(word)
        names[(node_id, port)] = word
    return names


# -- expand an instance ---------------------------------------------------------------
def expand_instance(flow: Flow, instance_id: str, *, within: str | None = None,
                    flow_file: str = "") -> Flow:
    """The flow with the instance ``instance_id`` (of the flow, or of its
    definition ``within``) replaced by its definition's nodes: fresh ids
    (an inner node keeps its own id where it is free), placed around the
    instance, with every param that read a subflow param (scope subflow, or
    ``{{ subflow.NAME }}`` in a template) set to what the instance gives
    that param (its default where the instance sets none), and the wires
    that went through the definition's ``subflow.in``/``subflow.out`` going
    straight to what those connect. The definition stays in the flow file
    (Node-RED keeps it too); a library definition is read from the library
    (the version the instance pins; ``flow_file`` says where to look).

    Refused: a node that is no instance, a definition that cannot be found,
    a library file that is not what the instance pinned, an instance wired
    as an agent's tool (a subflow is one tool; its nodes would be several),
    one with pinned data, and a template that reads the subflow's params in
    a way that cannot be written out (``subflow[name]``)."""
    out = _copy(flow)
    nodes, wires = _container(out, within)
    inst = next((n for n in nodes if n.id == instance_id), None)
    if inst is None:
        raise ValueError(f"there is no node '{instance_id}' to expand")
    if not is_instance_type(inst.type):
        raise ValueError(f"{_label(inst)} is not a subflow instance; only those expand")
    name = subflow_name(inst.type)
    defn = _definition_of(out, inst, flow_file)
    for w in wires:
        if w.target[0] == inst.id and _special_kind(w.source[1], None, None) == "tools":
            raise ValueError(f"{_label(inst)} is an agent's tool (wired from '{w.source[0]}'): "
                             "as a subflow it is one tool, expanded it would be several nodes; "
                             "unwire it from the agent first")
    if inst.pin is not None:
        raise ValueError(f"{_label(inst)} has pinned data; unpin it before expanding it")

    ports_in = dict(zip([n.id for n in defn.nodes if n.type == IN_TYPE],
                        port_names(defn, IN_TYPE), strict=True))
    ports_out = dict(zip([n.id for n in defn.nodes if n.type == OUT_TYPE],
                         port_names(defn, OUT_TYPE), strict=True))
    inner = [n for n in defn.nodes if n.type not in (IN_TYPE, OUT_TYPE)]

    # Ids: an inner node keeps its id where the flow does not use it.
    taken = {n.id for n in nodes if n.id != inst.id}
    rename: dict[str, str] = {}
    for n in inner:
        new = fresh_id(n.id, taken)
        if new != n.id and f"{inst.id}_{n.id}" not in taken:
            new = f"{inst.id}_{n.id}"
        taken.add(new)
        rename[n.id] = new

    # Places: the inner nodes' box centred on the instance.
    if inner:
        xs = [n.position[0] for n in inner]
        ys = [n.position[1] for n in inner]
        cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    else:
        cx = cy = 0.0
    values = _instance_values(defn, inst, within)
    expanded: list[FlowNode] = []
    for n in inner:
        c = n.model_copy(deep=True)
        c.id = rename[n.id]
        c.position = (inst.position[0] + n.position[0] - cx, inst.position[1] + n.position[1] - cy)
        c.params = {k: v for k, v in ((k, _substituted(c, k, v, values, name))
                                      for k, v in c.params.items()) if v is not None}
        if inst.disabled:
            c.disabled = True
        expanded.append(c)

    # Wires. Inside, from each subflow.in the inner ends it feeds; into each
    # subflow.out, the inner ends that feed it (passing through: in -> out).
    feeds: dict[str, list[tuple[str, str]]] = {}
    outer_targets: dict[str, list[tuple[str, str]]] = {}
    for w in wires:
        if w.source[0] == inst.id:
            outer_targets.setdefault(w.source[1], []).append(w.target)

    def inner_end(end: tuple[str, str]) -> list[tuple[str, str]]:
        """Where a message reaching ``end`` (a node of the definition) goes,
        in flow terms: an inner node's port, or what the instance's output
        port of a subflow.out is wired to."""
        if end[0] in ports_out:
            return list(outer_targets.get(ports_out[end[0]], []))
        if end[0] in ports_in:  # a wire into a subflow.in: not a thing
            return []
        return [(rename[end[0]], end[1])]

    for w in defn.wires:
        if w.source[0] in ports_in:
            feeds.setdefault(ports_in[w.source[0]], []).extend(inner_end(w.target))
    new_wires: list[Wire] = []
    seen: set[tuple] = set()

    def add(src: tuple[str, str], dst: tuple[str, str]) -> None:
        if (src, dst) not in seen:
            seen.add((src, dst))
            new_wires.append(Wire(source=src, target=dst))

    for w in wires:
        if w.target[0] == inst.id:
            for dst in feeds.get(w.target[1], []):
                add(w.source, dst)
        elif w.source[0] == inst.id:
            continue  # made from the inner wires below
        else:
            add(w.source, w.target)
    for w in defn.wires:
        if w.source[0] in ports_in or w.source[0] in ports_out:
            continue
        for dst in inner_end(w.target):
            add((rename[w.source[0]], w.source[1]), dst)

    new_nodes: list[FlowNode] = []
    for n in nodes:
        if n.id == inst.id:
            new_nodes.extend(expanded)
        else:
            new_nodes.append(n)
    _set_container(out, within, new_nodes, new_wires)
    return out


def _definition_of(flow: Flow, inst: FlowNode, flow_file: str) -> SubflowDef:
    name = subflow_name(inst.type)
    defn = flow.subflow(name)
    if defn is not None:
        return defn
    version = inst.subflow.version if inst.subflow else None
    try:
        entry = find_library(name, flow_file, version)
    except FlowError as exc:
        raise ValueError(f"cannot read subflow '{name}': {exc}") from None
    if entry is None:
        where = ", ".join(str(d) for d in library_dirs(flow_file))
        wanted = f" version {version}" if version else ""
        raise ValueError(f"subflow '{name}'{wanted} is neither in this flow nor in the "
                         f"library ({where})")
    if inst.subflow is not None and entry.definition.content_hash() != inst.subflow.hash:
        raise ValueError(f"{entry.path} is not the '{name}' {version} that '{inst.id}' pins "
                         "(its content changed without a new version)")
    return entry.definition


def _instance_values(defn: SubflowDef, inst: FlowNode,
                     within: str | None) -> dict[str, ParamValue | None]:
    """What each of the definition's params is on this instance: its
    setting, else the param's default as a fixed value, else None (the
    inner node's own default)."""
    values: dict[str, ParamValue | None] = {}
    for p in defn.params:
        setting = inst.params.get(p.name)
        if setting is not None and setting.scope is Scope.AI:
            # Outside a tool call an AI param reads the message at its name.
            setting = ParamValue(scope=Scope.MESSAGE, path=p.name)
        if setting is not None and setting.scope is Scope.SUBFLOW and within is None:
            setting = None  # not meaningful at the top level
        if setting is None and p.default is not None:
            setting = ParamValue(scope=Scope.CUSTOM, value=p.default)
        values[p.name] = setting
    return values


_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def _substituted(node: FlowNode, key: str, value: ParamValue,
                 values: dict[str, ParamValue | None], subflow: str) -> ParamValue | None:
    """A param of an expanded node: a subflow-scoped one becomes the
    instance's setting; a template's ``subflow.NAME`` becomes that setting
    written as an expression."""
    if value.scope is Scope.SUBFLOW:
        if value.param not in values:
            raise ValueError(f"node '{node.id}', param '{key}' reads '{value.param}', which "
                             f"subflow '{subflow}' does not declare")
        setting = values[value.param]
        return setting.model_copy(deep=True) if setting is not None else None
    text = value.value
    if value.scope not in (Scope.EXPRESSION, Scope.CUSTOM) or not isinstance(text, str) \
            or "subflow" not in text:
        return value
    if not any("subflow" in m.group(0) for m in _TAG.finditer(text)):
        return value
    if value.scope is Scope.EXPRESSION:
        from ..expressions import ExpressionError
        from ..expressions.compiling import compile_template

        try:
            names = compile_template(text).subflow_names
        except ExpressionError:
            names = frozenset()
        if names is None:
            raise ValueError(f"node '{node.id}', param '{key}' reads the subflow's params "
                             "by a computed name; write subflow.NAME to expand it")

    def write(m: re.Match) -> str:
        return re.sub(r"\bsubflow\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['\"])([A-Za-z_]\w*)\2\s*\])",
                      lambda r: _as_expression(node, key, r.group(1) or r.group(3), values,
                                               subflow), m.group(0))

    return value.model_copy(update={"value": _TAG.sub(write, text)})


def _as_expression(node: FlowNode, key: str, name: str, values: dict[str, ParamValue | None],
                   subflow: str) -> str:
    if name not in values:
        raise ValueError(f"node '{node.id}', param '{key}' reads subflow.{name}, which subflow "
                         f"'{subflow}' does not declare")
    setting = values[name]
    if setting is None:
        return "none"
    if setting.scope is Scope.CUSTOM:
        return "(" + _literal(setting.value) + ")"
    if setting.scope is Scope.MESSAGE:
        path = setting.path or ""
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", path):
            raise ValueError(f"node '{node.id}', param '{key}' reads subflow.{name}, given as "
                             f"the message path '{path}', which a template cannot write")
        return "msg." + path
    if setting.scope is Scope.SUBFLOW:
        return f"subflow.{setting.param}"
    if setting.scope is Scope.EXPRESSION:
        body = str(setting.value or "").strip()
        m = re.fullmatch(r"\{\{(.*)\}\}", body, re.S)
        if m is None or "{{" in m.group(1) or "{%" in m.group(1):
            raise ValueError(f"node '{node.id}', param '{key}' reads subflow.{name}, given by a "
                             "template with text around its expression, which cannot be "
                             "written inside another template")
        return "(" + m.group(1).strip() + ")"
    raise ValueError(f"node '{node.id}', param '{key}' reads subflow.{name}, "
                     f"set to scope {setting.scope}, which a template cannot read")


def _literal(value: Any) -> str:
    """A JSON value as a Jinja literal."""
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {_literal(v)}"
                               for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


# -- save to the library ------------------------------------------------------------
def move_to_library(flow: Flow, name: str, folder: str | Path, version: str = "1.0.0", *,
                    flow_file: str = "") -> Flow:
    """Write the flow's definition ``name`` to the library folder ``folder``
    as version ``version`` (``save_to_library``: a file of another version
    there is kept as NAME@VERSION.subflow.json) and return the flow without
    it, every instance of it (in the flow and in its other definitions)
    pinning that version and its content hash.

    Refused before anything is written: no such definition, a version that
    is no semver, a library that already has this name at this version with
    other content, or a newer version (choose a higher one), and a folder
    the flow would not look in (``library_dirs(flow_file)``: the flow
    file's subflows/ folder, $SWITCHBOARD_SUBFLOWS, the data folder's)."""
    defn = flow.subflow(name)
    if defn is None:
        raise ValueError(f"the flow has no subflow named '{name}' to save to the library")
    if not isinstance(version, str) or not re.match(SEMVER_RE, version):
        raise ValueError(f"'{version}' is not a version: use MAJOR.MINOR.PATCH, e.g. 1.0.0")
    target = Path(folder).expanduser()
    searched = library_dirs(flow_file)
    if not any(_same_dir(target, d) for d in searched):
        raise ValueError(f"this flow would not find a subflow in {target}: save it in one of "
                         + ", ".join(str(d) for d in searched))
    saved = defn.model_copy(deep=True)
    saved.version = version
    saved.format = None
    check_new_version(saved, target)
    pin = SubflowPin(version=version, hash=saved.content_hash())
    out = _copy(flow)
    out.subflows = [d for d in out.subflows if d.name != name]
    for nodes in [out.nodes, *(d.nodes for d in out.subflows)]:
        for n in nodes:
            if n.type == TYPE_PREFIX + name:
                n.subflow = pin.model_copy()
    save_to_library(saved, target)
    return out


def check_new_version(defn: SubflowDef, folder: str | Path) -> None:
    """Refuse (ValueError) to write ``defn`` (with its version) as the
    current version in the library folder ``folder`` when the file there
    is this version with other content (the instances that pin it would
    break), or a newer version."""
    version = defn.version or ""
    if not re.match(SEMVER_RE, version):
        raise ValueError(f"'{version}' is not a version: use MAJOR.MINOR.PATCH, e.g. 1.0.0")
    path = Path(folder) / f"{defn.name}.subflow.json"
    if not path.is_file():
        return
    from .subflows import read_library_file

    try:
        current = read_library_file(path)
    except FlowError:
        return  # unreadable: save_to_library replaces it
    if not current.version:
        return
    if current.version == version and current.content_hash() != defn.content_hash():
        raise ValueError(f"{path} is already version {version} of '{defn.name}', with other "
                         f"content: choose a new version (e.g. {bump_patch(version)})")
    if version_key(current.version) > version_key(version):
        raise ValueError(f"{path} is version {current.version}, newer than {version}: "
                         "choose a version above it")


def save_new_version(defn: SubflowDef, folder: str | Path, version: str) -> Path:
    """Write a library definition edited in the designer as ``version`` of
    it in ``folder`` (the one it came from), after ``check_new_version``;
    the version it replaces is kept beside it (save_to_library)."""
    saved = defn.model_copy(deep=True)
    saved.version = version
    saved.format = None
    check_new_version(saved, folder)
    return save_to_library(saved, Path(folder))


def bump_patch(version: str | None) -> str:
    """1.2.3 -> 1.2.4 (1.2.3-beta -> 1.2.3); no version: 1.0.0."""
    m = re.match(SEMVER_RE, version or "")
    if m is None:
        return "1.0.0"
    major, minor, patch, pre = m.groups()
    return f"{major}.{minor}.{patch}" if pre else f"{major}.{minor}.{int(patch) + 1}"


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False

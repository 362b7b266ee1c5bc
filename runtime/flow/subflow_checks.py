"""Validation of subflows (runtime.flow.validate calls these; see
docs/subflows.md, "Errors"): a flow's instances (library pins, required
params, settings their definition cannot take, ids that collide with the
paths a run gives inner nodes), a definition's inputs and outputs, and,
once per flow, every definition the flow uses checked as a flow, cycles
of definitions and nesting depth.

A problem inside a definition names the node ``subflows.NAME/<inner id>``
(the definition's node, once, however many instances use it); one of the
definition as a whole has no node and the field ``subflows.NAME`` (or
``subflows.NAME.<field>``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..spec import NodeSpec, Scope
from .graph import rings
from .model import Flow, FlowError, FlowNode, Problem, SubflowDef
from .subflows import (
    IN_TYPE,
    LIBRARY_SUFFIX,
    MAX_NESTING,
    OUT_TYPE,
    SubflowRegistry,
    find_library,
    is_instance_type,
    library_dirs,
    port_names,
    subflow_name,
)

Err = Callable[..., None]



def _dirs_text(flow_file: str) -> str:
    return ", ".join(str(d) for d in library_dirs(flow_file))


def missing_definition(fnode: FlowNode, flow_file: str) -> str:
    """Why an instance's definition is not there: the file(s) looked for,
    the version wanted and the version found."""
    name = subflow_name(fnode.type)
    pin = fnode.subflow
    try:
        current = find_library(name, flow_file)
    except FlowError as exc:
        return f"subflow '{name}': " + "; ".join(str(p) for p in exc.problems)
    if pin is None:
        return (f"no subflow '{name}': it is not in this flow's subflows, and no library folder "
                f"has {name}{LIBRARY_SUFFIX} (looked in: {_dirs_text(flow_file)})")
    found = (f"the current file {current.path} is version {current.definition.version}"
             if current is not None else "there is no current file either")
    return (f"library subflow '{name}' version {pin.version} not found: no {name}{LIBRARY_SUFFIX} "
            f"of that version nor {name}@{pin.version}{LIBRARY_SUFFIX} (looked in: "
            f"{_dirs_text(flow_file)}); {found}")


def instance_problems(flow: Flow, seen: dict[str, FlowNode], specs: dict[str, NodeSpec],
                      registry: Any, flow_file: str, err: Err, warn: Err) -> None:
    """The problems of a level's instances (the top flow or one definition)."""
    defs = registry.defs if isinstance(registry, SubflowRegistry) else {}
    instance_ids = set()
    for fnode in flow.nodes:
        if not is_instance_type(fnode.type) or seen.get(fnode.id) is not fnode:
            continue
        instance_ids.add(fnode.id)
        entry = defs.get(subflow_name(fnode.type))
        if entry is None or fnode.id not in specs:
            continue
        defn, where = entry
        if where == "library":
            _pin_problems(fnode, defn, flow_file, err, warn)
        for p in defn.params:
            setting = fnode.params.get(p.name)
            unset = setting is None or (setting.scope is Scope.CUSTOM and setting.value is None)
            if unset and p.default is None:
                err(f"subflow '{defn.name}' needs param '{p.name}' (it has no default): set it "
                    "on this instance", fnode.id, f"params.{p.name}")
    if instance_ids:
        for node_id in seen:
            if "." not in node_id:
                continue
            head = node_id
            while "." in head:
                head = head.rsplit(".", 1)[0]
                if head in instance_ids:
                    err(f"node id '{node_id}' is also the id a run gives a node inside instance "
                        f"'{head}' ({head}.<inner id>): rename it", node_id, "id")
                    break


def _pin_problems(fnode: FlowNode, defn: SubflowDef, flow_file: str, err: Err, warn: Err) -> None:
    name = defn.name
    pin = fnode.subflow
    try:
        entry = find_library(name, flow_file, pin.version if pin is not None else None)
    except FlowError as exc:
        err(f"subflow '{name}': " + "; ".join(p.message for p in exc.problems), fnode.id, "type")
        return
    if entry is None:
        err(missing_definition(fnode, flow_file), fnode.id, "subflow.version")
        return
    if pin is None:
        warn(f"this instance of library subflow '{name}' pins no version: it runs the current "
             f"one ({entry.definition.version}, {entry.path}); pin it (Update) so that a run is "
             "the same run tomorrow", fnode.id, "subflow")
        return
    if entry.definition.version != defn.version:
        err(f"this instance pins version {pin.version} of subflow '{name}', another instance in "
            f"this flow version {defn.version}: a flow runs one version of a subflow; update "
            "them to the same one", fnode.id, "subflow.version")
        return
    now = entry.definition.content_hash()
    if now != pin.hash:
        err(f"library file {entry.path} (version {pin.version}) changed since pinned: pinned "
            f"{pin.hash}, the file now has {now}; restore it, or update the instance to what it "
            "holds now", fnode.id, "subflow.hash")


def port_problems(flow: Flow, inside: SubflowDef | None, seen: dict[str, FlowNode],
                  successors: dict[str, list[str]], specs: dict[str, NodeSpec], err: Err) -> None:
    """subflow.in and subflow.out: only inside a definition, unique names,
    every output reachable from an input (or, with no input, a source)."""
    ports = [n for n in flow.nodes if n.type in (IN_TYPE, OUT_TYPE) and seen.get(n.id) is n]
    if inside is None:
        for n in ports:
            what = "input" if n.type == IN_TYPE else "output"
            err(f"a subflow {what} ({n.type}) belongs inside a subflow definition; in the flow "
                "itself nothing connects to it", n.id, "type")
        return
    for node_type, what in ((IN_TYPE, "input"), (OUT_TYPE, "output")):
        mine = [n for n in inside.nodes if n.type == node_type]
        first: dict[str, str] = {}
        for n, name in zip(mine, port_names(inside, node_type), strict=False):
            if name in first:
                err(f"two subflow {what}s named '{name}' (nodes '{first[name]}' and '{n.id}'): "
                    f"each {what} of a subflow needs its own name", n.id, "params.name")
            else:
                first[name] = n.id
    starts = [n.id for n in flow.nodes if n.id in specs
              and (n.type == IN_TYPE or specs[n.id].source)]
    reached = set(starts)
    todo = deque(starts)
    while todo:
        for nxt in successors.get(todo.popleft(), ()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    names = dict(zip([n.id for n in inside.nodes if n.type == OUT_TYPE],
                     port_names(inside, OUT_TYPE), strict=False))
    for n in ports:
        if n.type == OUT_TYPE and n.id not in reached:
            err(f"subflow output '{names.get(n.id, n.id)}' is not reachable from any subflow "
                "input: wire a path to it", n.id)


def subflow_scope_problem(inside: SubflowDef | None, pname: str, param: str | None,
                          pspec: Any) -> str | None:
    """Why a node's param cannot take its value from subflow param ``param``."""
    if inside is None:
        return ("scope 'subflow' reads a param of the subflow the node is in; this node is in "
                "the flow itself, not in a subflow definition")
    declared = inside.param(param or "")
    if declared is None:
        names = ", ".join(p.name for p in inside.params) or "none"
        return f"subflow '{inside.name}' has no param '{param or ''}' (its params: {names})"
    if declared.ai_allowed and not pspec.allows(Scope.AI):
        return (f"subflow param '{declared.name}' may be handed to the AI, and this node's author "
                f"did not let the AI set '{pname}': clear ai_allowed of '{declared.name}' or set "
                f"'{pname}' another way")
    return None


def template_problem(inside: SubflowDef | None, text: Any) -> str | None:
    """Why ``{{ subflow.X }}`` in a template cannot work here, or None."""
    if not isinstance(text, str) or "subflow" not in text:
        return None
    from ..expressions import ExpressionError, compile_template

    try:
        compiled = compile_template(text)
    except ExpressionError:
        return None  # said by the template's own check
    if "subflow" not in compiled.roots:
        return None
    if inside is None:
        return ("'subflow' holds the params of the subflow a node is in; this node is in the "
                "flow itself, not in a subflow definition")
    return _unknown_param(inside, compiled.subflow_names)


def _unknown_param(inside: SubflowDef, names: frozenset[str] | None,
                   text: bool = False) -> str | None:
    """The first of ``names`` (the params a template reads as
    ``subflow.NAME``; None: read by a computed name, not checked) that
    ``inside`` does not declare, said (``text``: of a node's own text
    template, which says what it reads); else None."""
    unknown = sorted((names or frozenset()) - {p.name for p in inside.params})
    if not unknown:
        return None
    declared = ", ".join(p.name for p in inside.params) or "none"
    lead = f"the text reads subflow.{unknown[0]}, and " if text else ""
    return (f"{lead}subflow '{inside.name}' has no param '{unknown[0]}' (its params: "
            f"{declared})")


#: Params whose fixed text is a template of the node's own, rendered for
#: each message (runtime.expressions.compile_text_template); inside a
#: definition it reads the instance's params as ``subflow`` too.
TEXT_TEMPLATES: dict[str, tuple[str, ...]] = {"core.template": ("template",)}


def text_template_problems(defn: SubflowDef) -> list[tuple[str, str, str]]:
    """(inner node id, field, message) for each text template of a node of
    ``defn`` that reads ``subflow.NAME`` for a NAME the definition does not
    declare. (A ``{{ }}`` param's is template_problem's; outside a
    definition ``subflow`` in such a text is a key of the message.)"""
    from ..expressions import ExpressionError, compile_text_template

    out: list[tuple[str, str, str]] = []
    for node in defn.nodes:
        for pname in TEXT_TEMPLATES.get(node.type, ()):
            setting = node.params.get(pname)
            if setting is None or setting.scope is not Scope.CUSTOM:
                continue
            text = setting.value
            if not isinstance(text, str) or "subflow" not in text:
                continue
            try:
                compiled = compile_text_template(text)
            except ExpressionError:
                continue  # said by the node's own check
            if "subflow" not in compiled.roots:
                continue
            why = _unknown_param(defn, compiled.subflow_names, text=True)
            if why:
                out.append((node.id, f"params.{pname}.value", why))
    return out


def landed_problems(flow: Flow, registry: Any, flow_file: str, err: Err,
                    check_param_value: Callable[[Any, Any], str | None]) -> None:
    """Each value an instance gives a param inside, checked where it lands
    (through every level of nesting): the scope that param allows, its
    type, and its node's own check. Said at the top-level instance, naming
    the inner node by its path."""
    from .expand import expand

    try:
        exp = expand(flow, registry, flow_file)
    except FlowError:
        return  # a definition missing, a cycle: said already
    for node_id, names in exp.substituted.items():
        fnode = exp.flow.node(node_id)
        spec = registry.spec(fnode.type) if fnode is not None else None
        if fnode is None or spec is None:
            continue
        where = exp.outermost(node_id)
        problems: list[tuple[str, str]] = []
        for q in names:
            qspec, setting = spec.param(q), fnode.params.get(q)
            if qspec is None or setting is None:
                continue
            if not qspec.allows(setting.scope):
                allowed = ", ".join(s.value for s in qspec.allowed_scopes)
                problems.append((q, f"set with scope '{setting.scope.value}' from this instance's "
                                    f"params, and it takes only: {allowed}"))
            elif setting.scope is Scope.CUSTOM:
                why = check_param_value(qspec, setting.value)
                if why:
                    problems.append((q, why))
        own = getattr(registry.get(fnode.type), "check", None)
        if not problems and own is not None:
            try:
                fixed = {k: v for k, v in fnode.params.items()
                         if v.scope is not Scope.EXPRESSION}
                problems = [(f, why) for f, why in own(fixed) if f in names]
            except Exception:  # noqa: BLE001 - the node's check is said elsewhere
                problems = []
        for q, why in problems:
            err(f"node '{node_id}' ({spec.name}) gets '{q}' from this instance's params: {why}",
                where, None)


def definition_problems(flow: Flow, registry: Any, flow_file: str,
                        check: Callable[[Flow, Any, str, SubflowDef], list[Problem]],
                        ) -> list[Problem]:
    """Once per flow: each definition it uses (and each of its own) checked
    as a flow by ``check``, cycles of definitions, nesting depth."""
    defs: dict[str, tuple[SubflowDef, str]] = registry.defs \
        if isinstance(registry, SubflowRegistry) else {}
    out: list[Problem] = []
    uses: dict[str, list[str]] = {}
    for name, (defn, _where) in defs.items():
        uses[name] = list(dict.fromkeys(subflow_name(n.type) for n in defn.nodes
                                        if is_instance_type(n.type)
                                        and subflow_name(n.type) in defs))
    cycles = list(rings(uses))
    for ring in cycles:
        out.append(Problem(file=flow_file, field=f"subflows.{ring[0]}",
                           message="subflows use each other in a cycle: " + " > ".join(ring)
                           + "; a subflow cannot contain itself"))
    if not cycles:
        top = list(dict.fromkeys(subflow_name(n.type) for n in flow.nodes
                                 if is_instance_type(n.type) and subflow_name(n.type) in defs))
        chain = _deepest(top, uses)
        if len(chain) > MAX_NESTING:
            first = next((n.id for n in flow.nodes if n.type == "subflow:" + chain[0]), None)
            out.append(Problem(file=flow_file, node=first, message=(
                f"subflows nest {len(chain)} deep ({' > '.join(chain)}); at most {MAX_NESTING} "
                "levels are allowed")))
    for name, (defn, _where) in defs.items():
        for p in check(defn.as_flow(), registry, flow_file, defn):
            if p.node:
                p.node = f"subflows.{name}/{p.node}"
            else:
                p.field = f"subflows.{name}" + (f".{p.field}" if p.field else "")
            out.append(p)
        for node_id, field, message in text_template_problems(defn):
            out.append(Problem(file=flow_file, node=f"subflows.{name}/{node_id}", field=field,
                               message=message))
    return out


def _deepest(top: list[str], uses: dict[str, list[str]]) -> list[str]:
    """The longest chain of nested definitions from ``top`` (no cycles)."""
    memo: dict[str, list[str]] = {}

    def chain(name: str, depth: int = 0) -> list[str]:
        if name in memo:
            return memo[name]
        if depth > 4 * MAX_NESTING:
            return [name]  # deep enough to be refused: no need to go on
        memo[name] = [name]  # guards a ring, which rings() reports instead
        best: list[str] = []
        for child in uses.get(name, ()):
            c = chain(child, depth + 1)
            if len(c) > len(best):
                best = c
        memo[name] = [name, *best]
        return memo[name]

    best: list[str] = []
    for name in top:
        c = chain(name)
        if len(c) > len(best):
            best = c
    return best

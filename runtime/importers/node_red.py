"""Node-RED export -> Switchboard flow.

Reads the array a Node-RED editor exports (or its admin API's GET /flows
returns): ``tab``, ``subflow``, ``group``, ``comment`` and node entries,
``wires`` by output index. What becomes of each entry:

- a node of a type in ``node_red_nodes.MAPPERS``: its Switchboard node
  (``mapped``, or ``review`` where something did not map: the node's notes
  say what);
- link in / link out / junction: dissolved into wires (``mapped``); a link
  call or a link out in return mode: a placeholder;
- a subflow: a Switchboard subflow definition in the flow's ``subflows``
  (runtime.flow.subflows): its input and outputs ``subflow.in`` /
  ``subflow.out`` nodes (named ``in``, ``out1``..``outN`` or by its port
  labels), its env properties its params (type from theirs; a credential a
  secret param), its nodes mapped as anywhere else, except that a read of
  one of its env properties (a change rule of type env, ``${NAME}``, an
  inject payload of type env, ``{{env.NAME}}``, ``env.get("NAME")`` in a
  function) reads the param (scope ``subflow``, ``{{ subflow.NAME }}``);
  a subflow no instance uses is a definition all the same;
- a subflow instance: a node of type ``subflow:NAME``, its env values its
  params' values, wired by port;
- a group: its name in the notes of its nodes; a comment: its text in the
  flow's description under "Notes imported from Node-RED"; a config node
  (no place on a tab): listed there too (``review``);
- anything else: a ``core.placeholder`` that keeps its type, settings and
  wires and blocks the run with an error naming the type.

Every entry is counted in the report's table exactly once (a subflow's
nodes once, in its definition, however many instances use it), so the
table's total is the array's length, and ``ImportReport.where`` says where
each entry went.

Bounds (the file comes from elsewhere): ``MAX_FILE_BYTES``, ``MAX_ENTRIES``,
``MAX_NODES``, ``MAX_SUBFLOW_DEPTH``, ``MAX_STRING_CHARS`` and
``MAX_JSON_DEPTH``; a subflow that contains itself (directly or through
others) is an error naming the chain.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..flow.model import Flow, FlowNode, SubflowDef, SubflowParam, Wire
from ..flow.subflows import IN_TYPE, OUT_TYPE, TYPE_PREFIX, is_instance_type
from .node_red_base import (
    MAPPED,
    PLACEHOLDER,
    REVIEW,
    Env,
    Mapped,
    c,
    env_name,
    param_ref,
    placeholder,
    sub,
    typed,
    worse,
)
from .node_red_nodes import map_node
from .node_red_report import ImportReport, NodeRedImportError

MAX_FILE_BYTES = 20_000_000
MAX_ENTRIES = 20_000
MAX_NODES = 50_000
MAX_SUBFLOW_DEPTH = 16
MAX_STRING_CHARS = 1_000_000
MAX_JSON_DEPTH = 64
#: Longest text of a comment or note kept in the description.
MAX_NOTE_CHARS = 4000

_DISSOLVED = ("link in", "link out", "junction")
_LAYOUT = ("tab", "subflow", "group", "comment")


# -- reading ----------------------------------------------------------------------------

def read_node_red(path: str | Path) -> ImportReport:
    """Import the Node-RED export at ``path``."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise NodeRedImportError(f"{p}: {size:,} bytes; a Node-RED export may have at most "
                                     f"{MAX_FILE_BYTES:,}")
        raw = p.read_bytes()
    except OSError as exc:
        raise NodeRedImportError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise NodeRedImportError(f"{p}: more than {MAX_FILE_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NodeRedImportError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    return import_node_red(text, name=p.name.removesuffix(".json"), file=str(p))


def import_node_red(text: str, name: str = "Imported", file: str = "<input>") -> ImportReport:
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise NodeRedImportError(f"{file}: not JSON: {exc.msg} at line {exc.lineno} column "
                                 f"{exc.colno}") from None
    except RecursionError:
        raise NodeRedImportError(f"{file}: JSON nested too deeply") from None
    except _Constant as exc:
        raise NodeRedImportError(f"{file}: not JSON: {exc} is not a JSON number") from None
    if isinstance(data, dict) and isinstance(data.get("flows"), list):
        data = data["flows"]  # GET /flows with the v2 API header: {"rev", "flows"}
    if not isinstance(data, list):
        raise NodeRedImportError(f"{file}: a Node-RED export is a JSON array of nodes; this is "
                                 f"a JSON {type(data).__name__.replace('dict', 'object')}")
    if len(data) > MAX_ENTRIES:
        raise NodeRedImportError(f"{file}: {len(data):,} entries; at most {MAX_ENTRIES:,}")
    _check_entries(data, file)
    return _Importer(data, name, file).run()


def _check_entries(data: list, file: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(data):
        where = f"{file}: entry {i + 1}"
        if not isinstance(n, dict):
            raise NodeRedImportError(f"{where}: not an object (a JSON {type(n).__name__})")
        nid, kind = n.get("id"), n.get("type")
        if not isinstance(nid, str) or not nid or len(nid) > 200:
            raise NodeRedImportError(f"{where}: 'id' must be text of 1 to 200 characters")
        if not isinstance(kind, str) or not kind or len(kind) > 200:
            raise NodeRedImportError(f"{where} (id {nid!r}): 'type' must be text of 1 to 200 "
                                     "characters")
        if nid in seen:
            raise NodeRedImportError(f"{where}: id {nid!r} is used twice")
        seen.add(nid)
        problem = _bounds_problem(n, 0)
        if problem:
            raise NodeRedImportError(f"{where} (id {nid!r}, type {kind!r}): {problem}")
        wires = n.get("wires")
        if wires is not None and not (isinstance(wires, list) and all(
                isinstance(w, list) and all(isinstance(t, str) for t in w) for w in wires)):
            raise NodeRedImportError(f"{where} (id {nid!r}): 'wires' must be a list of lists "
                                     "of node ids")


def _bounds_problem(v: Any, depth: int) -> str | None:
    if depth > MAX_JSON_DEPTH:
        return f"nested more than {MAX_JSON_DEPTH} levels"
    if isinstance(v, str):
        return f"a text of {len(v):,} characters (at most {MAX_STRING_CHARS:,})" \
            if len(v) > MAX_STRING_CHARS else None
    items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
    for item in items:
        problem = _bounds_problem(item, depth + 1)
        if problem:
            return problem
    return None


# -- importing --------------------------------------------------------------------------

@dataclass
class _Placed:
    """One Node-RED node as it lands: its id, entry, scope ("" the flow,
    else the id of the subflow whose definition holds it) and env."""

    key: str
    entry: dict
    scope: str
    env: Env
    disabled: bool = False
    offset: tuple[float, float] = (0.0, 0.0)
    mapped: Mapped | None = None


@dataclass
class _Def:
    """A Node-RED subflow as the Switchboard definition it becomes."""

    entry: dict
    name: str
    env: Env
    #: Its input's port name (None: no input) and the id of its subflow.in.
    in_port: str | None = None
    in_id: str = ""
    #: Its outputs' port names and the ids of their subflow.out nodes.
    out_ports: list[str] = field(default_factory=list)
    out_ids: list[str] = field(default_factory=list)
    params: list[SubflowParam] = field(default_factory=list)
    status: str = MAPPED
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.entry.get("name") or self.entry["id"])


class _Importer:
    def __init__(self, data: list[dict], name: str, file: str) -> None:
        self.data, self.name, self.file = data, name, file
        self.by_id = {n["id"]: n for n in data}
        self.tabs = [n for n in data if n["type"] == "tab"]
        self.subflows = {n["id"]: n for n in data if n["type"] == "subflow"}
        self.scope: dict[str, list[dict]] = {}
        for n in data:
            z = n.get("z")
            self.scope.setdefault(z if isinstance(z, str) else "", []).append(n)
        self.placed: dict[str, _Placed] = {}
        self.virtual: dict[str, _Placed] = {}  # link in/out, junction
        self.defs: dict[str, _Def] = {}
        #: Ids of the subflow.in / subflow.out nodes made (keyed apart from
        #: Node-RED's ids: subflow id + NUL + in / out index) -> (scope, id).
        self.ports: dict[str, tuple[str, str]] = {}
        #: (node id, output index) -> the subflow.out keys it feeds (a
        #: subflow's ``out`` array), and the subflow.in's own.
        self.feeds: dict[tuple[str, int], list[str]] = {}
        self.fed: dict[str, int] = {}  # node id -> 1 + its highest output index in feeds
        self.instances: dict[str, list[dict]] = {}  # subflow id -> its instances
        for n in data:
            if n["type"].startswith("subflow:"):
                self.instances.setdefault(n["type"][8:], []).append(n)
        self.status: dict[str, str] = {}  # entry id -> worst status
        self.report_warnings: list[str] = []
        self.notes: list[str] = []
        self.where: dict[str, str] = {}

    # -- walking tabs and subflows --------------------------------------------------
    def run(self) -> ImportReport:
        self._check_nesting()
        # Nodes of no tab: an old single-tab export (no z), or a tab missing.
        loose = [n for n in self.scope.get("", []) if n["type"] not in _LAYOUT
                 and ("x" in n or "wires" in n)]
        # Nodes whose tab is not in the file are imported as of a tab of their own.
        orphans = [{"id": z, "label": f"(tab {z} not in the file)"} for z in self.scope
                   if z and z not in self.by_id]
        tabs = self.tabs + orphans + ([{"id": "", "label": ""}] if loose else [])
        envs = {tab["id"]: Env(self._env_values(tab.get("env")), None,
                               f"tab '{tab.get('label')}'") for tab in tabs}
        names: set[str] = set()
        for sf in self.subflows.values():
            self.defs[sf["id"]] = self._define(sf, names)
        # A name a subflow does not declare is read where its instances are.
        for n in self.data:
            d = self.defs.get(n["type"][8:]) if n["type"].startswith("subflow:") else None
            z = n.get("z") if isinstance(n.get("z"), str) else ""
            where = self.defs[z].env if z in self.defs else envs.get(z)
            if d is not None and where is not None and where not in d.env.parents:
                d.env.parents.append(where)
        for d in self.defs.values():
            self._env_defaults(d)
        y0 = 0.0
        for tab in tabs:
            ymax = self._walk(tab["id"], "", envs[tab["id"]], (0.0, y0), bool(tab.get("disabled")))
            y0 = ymax + 160.0
            if tab["id"] in self.by_id:
                self.status.setdefault(tab["id"], MAPPED)
                self.where[tab["id"]] = "flow"
            if tab.get("info"):
                self.notes.append(f"- Tab '{tab.get('label')}': {_cut(tab['info'])}")
        for sf_id, d in self.defs.items():
            self._walk(sf_id, sf_id, d.env, (0.0, 0.0), False)
            self.status[sf_id] = d.status
            self.notes += [f"- Subflow '{d.label}': {note}" for note in d.notes]
        for n in self.data:
            t = n["type"]
            if t == "comment":
                self.status[n["id"]] = REVIEW
                text = str(n.get("name") or "")
                if n.get("info"):
                    text += (": " if text else "") + str(n["info"])
                self.notes.append(f"- Comment{self._where(n)}: {_cut(text) or '(empty)'}")
            elif t == "group":
                self.status[n["id"]] = REVIEW
            elif n["id"] not in self.status and t not in ("tab",):
                # Not on any tab or subflow: a config node (a broker, a TLS setting...).
                self.status[n["id"]] = REVIEW
                self.notes.append(f"- Config node '{t}' {n.get('name') or n['id']!r} "
                                  f"(settings and credentials not imported)")
        self._groups()
        return self._assemble()

    def _where(self, n: dict) -> str:
        z = n.get("z")
        z = self.by_id.get(z) if isinstance(z, str) else None
        if z is None:
            return ""
        kind = "tab" if z["type"] == "tab" else "subflow"
        return f" on {kind} '{z.get('label') or z.get('name') or z['id']}'"

    def _env_values(self, env: Any) -> dict[str, tuple[str, Any]]:
        out = {}
        for e in env if isinstance(env, list) else ():
            if isinstance(e, dict) and isinstance(e.get("name"), str):
                out[e["name"]] = (str(e.get("type") or "str"), e.get("value"))
        return out

    def _check_nesting(self) -> None:
        """A subflow that contains itself (directly or through others) is an
        error naming the chain, as is nesting past MAX_SUBFLOW_DEPTH."""
        uses: dict[str, list[str]] = {}
        for n in self.data:
            z = n.get("z")
            if n["type"].startswith("subflow:") and n["type"][8:] in self.subflows \
                    and isinstance(z, str) and z in self.subflows:
                uses.setdefault(z, []).append(n["type"][8:])
        depth: dict[str, int] = {}

        def label(s: str) -> str:
            return repr(self.subflows[s].get("name") or s)

        def visit(sf_id: str, chain: list[str]) -> int:
            if sf_id in chain:
                ring = chain[chain.index(sf_id):] + [sf_id]
                raise NodeRedImportError(
                    f"{self.file}: subflow {label(sf_id)[1:-1]!r} contains itself "
                    f"({' -> '.join(label(s) for s in ring)})")
            if sf_id in depth:
                return depth[sf_id]
            if len(chain) >= MAX_SUBFLOW_DEPTH:
                raise NodeRedImportError(f"{self.file}: subflows nested more than "
                                         f"{MAX_SUBFLOW_DEPTH} deep (at {label(sf_id)})")
            chain.append(sf_id)
            depth[sf_id] = 1 + max((visit(u, chain) for u in dict.fromkeys(
                uses.get(sf_id, []))), default=0)
            chain.pop()
            return depth[sf_id]

        for sf_id in self.subflows:
            visit(sf_id, [])

    # -- a subflow's definition -----------------------------------------------------
    def _define(self, sf: dict, names: set[str]) -> _Def:
        sf_id = sf["id"]
        name = _unique(_identifier(str(sf.get("name") or ""), "subflow"), names)
        d = _Def(sf, name, Env())
        taken = {n["id"] for n in self.scope.get(sf_id, [])}
        ins = _list(sf.get("in"))
        if ins:
            labels = _list(sf.get("inputLabels"))
            d.in_port = _identifier(str(labels[0]), "in") if labels and labels[0] else "in"
            d.in_id = _unique("in", taken)
            self.ports[sf_id + "\0in"] = (sf_id, d.in_id)
            self.feeds[(sf_id + "\0in", 0)] = []
            if len(ins) > 1:
                d.notes.append("REVIEW: more than one input (Node-RED has one): only the "
                               "first is imported")
                d.status = REVIEW
        labels = _list(sf.get("outputLabels"))
        ports: set[str] = set()
        for k, out in enumerate(_list(sf.get("out"))):
            label = labels[k] if k < len(labels) and isinstance(labels[k], str) else ""
            port = _unique(_identifier(label, f"out{k + 1}") if label else f"out{k + 1}", ports)
            d.out_ports.append(port)
            d.out_ids.append(_unique(port if port.startswith("out") else f"out_{port}", taken))
            key = f"{sf_id}\0{k}"
            self.ports[key] = (sf_id, d.out_ids[-1])
            for w in _list(_dict(out).get("wires")):
                if isinstance(w, dict) and isinstance(w.get("id"), str):
                    src = sf_id + "\0in" if w["id"] == sf_id else w["id"]
                    port_i = int(w["port"]) if str(w.get("port", 0)).isdigit() else 0
                    self.feeds.setdefault((src, port_i), []).append(key)
                    self.fed[src] = max(self.fed.get(src, 0), port_i + 1)
        # Its env properties: the definition's params.
        values = self._env_values(sf.get("env"))
        instances = self.instances.get(sf_id, [])
        params: dict[str, tuple[str, str]] = {}
        pnames: set[str] = set()
        for e in _list(sf.get("env")):
            if not isinstance(e, dict) or not isinstance(e.get("name"), str) \
                    or e["name"] in params:
                continue
            env_name = e["name"]
            pname = _unique(_identifier(env_name, "param"), pnames)
            p = self._param(d, pname, e, instances)
            d.params.append(p)
            params[env_name] = (pname, p.type.value)
        d.env = Env(values, None, f"subflow '{d.label}'", params=params)
        return d

    def _param(self, d: _Def, pname: str, e: dict, instances: list[dict]) -> SubflowParam:
        """A param from one env property: its type from the property's, its
        default its value (an ``env`` one's: found later, _env_defaults)."""
        kind, value = str(e.get("type") or "str"), e.get("value")
        ui = _dict(e.get("ui"))
        label = _dict(ui.get("label"))
        label_text = str(label.get("en-US") or next(iter(label.values()), "") or "")[:200]
        spec: dict[str, Any] = {"name": pname, "label": label_text}
        if kind == "cred":
            # Node-RED never exports a credential: the default names where it is kept.
            spec.update(type="secret", secret=True, default={"env": pname})
            d.notes.append(f"REVIEW: env '{e['name']}' is a credential, which Node-RED does "
                           f"not export: param '{pname}' reads the environment variable "
                           f"{pname} unless an instance sets it")
            d.status = REVIEW
        elif kind in ("str", "num", "bool", "json"):
            ok, v, why = typed(value, kind, None)
            if not ok:
                d.notes.append(f"REVIEW: env '{e['name']}': {why}; param '{pname}' has no "
                               "default")
                d.status = REVIEW
                v = None
            ptype = {"str": "str", "bool": "bool", "json": "json"}.get(kind)
            if kind == "num":
                numbers = [v] + [typed(i.get("value"), "num", None)[1] for n in instances
                                 for i in _list(n.get("env")) if isinstance(i, dict)
                                 and i.get("name") == e["name"] and i.get("type") == "num"]
                ptype = "int" if all(isinstance(x, int) and not isinstance(x, bool)
                                     for x in numbers) else "float"
            opts = [o.get("v") for o in _list(_dict(ui.get("opts")).get("opts"))
                    if isinstance(o, dict) and isinstance(o.get("v"), str)]
            if ui.get("type") == "select" and kind == "str" and opts and v in opts:
                spec.update(type="enum", choices=opts[:1000])
            else:
                spec["type"] = ptype
            spec["default"] = v
        elif kind == "env":
            spec.update(type="str", default="")  # found in _env_defaults
        else:
            spec.update(type="str", default=None if value is None else str(value)[:10_000])
            d.notes.append(f"REVIEW: env '{e['name']}' of type '{kind}' ({_cut(value)[:80]!r}) "
                           f"has no fixed equivalent: param '{pname}' has it as text")
            d.status = REVIEW
        return SubflowParam.model_validate(spec)

    def _env_defaults(self, d: _Def) -> None:
        """The default of a param from an env property of type ``env`` (one
        that reads another variable): that variable where the subflow's
        instances are, when they agree."""
        for e in _list(d.entry.get("env")):
            if not isinstance(e, dict) or e.get("type") != "env" or not isinstance(
                    e.get("name"), str) or e["name"] not in d.env.params:
                continue
            pname = d.env.params[e["name"]][0]
            ok, v, why = d.env._up(str(e.get("value")), 0)
            p = d.params[[q.name for q in d.params].index(pname)]
            if ok and v is not None:
                kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(v), "json")
                d.params[d.params.index(p)] = p.model_copy(update={"type": kind, "default": v})
                d.env.params[e["name"]] = (pname, kind)
            else:
                d.notes.append(f"REVIEW: env '{e['name']}' reads {e.get('value')!r}: {why}; "
                               f"param '{pname}' has the default ''")
                d.status = REVIEW

    def _instance(self, n: dict, d: _Def, env: Env) -> Mapped:
        """An instance: a node of its definition's type, its env values the
        params' values."""
        out = Mapped(TYPE_PREFIX + d.name, ports=list(d.out_ports))
        types = {p.name: p for p in d.params}
        for e in _list(n.get("env")):
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                continue
            name, kind, value = e["name"], str(e.get("type") or "str"), e.get("value")
            declared = d.env.params.get(name)
            if declared is None:
                out.review(f"env '{name}' ({kind} {_cut(value)[:60]!r}) is not a property of "
                           f"subflow '{d.label}': not imported")
                continue
            pname, p = declared[0], types[declared[0]]
            if kind == "cred" or p.secret:
                out.review(f"env '{name}' is a credential, which Node-RED does not export: set "
                           f"param '{pname}'")
                continue
            if kind == "env":
                ref = env.param(env_name(value) or str(value))
                if ref is not None:  # the enclosing subflow's param, as its instance sets it
                    out.params[pname] = sub(ref[0])
                    continue
                ok, v, why = env.lookup(env_name(value) or str(value))
            else:
                ref = param_ref(value, env)
                if ref is not None:
                    out.params[pname] = sub(ref[0])
                    continue
                ok, v, why = typed(value, kind, None)
            if ok:
                v, why = _as_type(v, p)
                ok = why == ""
            if not ok:
                out.review(f"env '{name}': {why}; param '{pname}' has the subflow's default")
                continue
            out.params[pname] = c(v)
        return out

    def _walk(self, scope_id: str, scope: str, env: Env, offset: tuple[float, float],
              disabled: bool) -> float:
        """Places the nodes of a tab or subflow; returns the lowest y used."""
        ymax = offset[1]
        for n in self.scope.get(scope_id, []):
            t = n["type"]
            if t in _LAYOUT:
                continue
            if not isinstance(n.get("x"), (int, float)) and "wires" not in n:
                continue  # a config node scoped to the tab: listed at the end
            ymax = max(ymax, offset[1] + _num(n.get("y")))
            if len(self.placed) + len(self.virtual) >= MAX_NODES:
                raise NodeRedImportError(f"{self.file}: more than {MAX_NODES:,} nodes")
            self._place(n, scope, env, offset, disabled or bool(n.get("d")))
        return ymax

    def _place(self, n: dict, scope: str, env: Env, offset: tuple[float, float],
               disabled: bool) -> None:
        p = _Placed(n["id"], n, scope, env, disabled, offset)
        t = n["type"]
        if t in _DISSOLVED and not (t == "link out" and n.get("mode") == "return"):
            self.virtual[p.key] = p
            self.status[n["id"]] = worse(self.status.get(n["id"], MAPPED), MAPPED)
            return
        if t.startswith("subflow:"):
            d = self.defs.get(t[8:])
            p.mapped = self._instance(n, d, env) if d is not None else \
                placeholder(n, f"its subflow {t[8:]!r} is not in the file")
        elif t == "link call":
            p.mapped = placeholder(n, "a link call (call and return) has no Switchboard "
                                      "equivalent yet")
        elif t == "link out":
            p.mapped = placeholder(n, "a link out in return mode (ends a link call) has no "
                                      "Switchboard equivalent yet")
        else:
            try:
                p.mapped = map_node(n, env)
            except Exception as exc:  # noqa: BLE001 - settings of a shape no Node-RED writes
                p.mapped = placeholder(n, "its settings could not be read "
                                          f"({type(exc).__name__}: {str(exc)[:200]})")
        self.status[n["id"]] = worse(self.status.get(n["id"], MAPPED), p.mapped.status)
        self.placed[p.key] = p

    # -- groups ---------------------------------------------------------------------
    def _groups(self) -> None:
        for g in (n for n in self.data if n["type"] == "group"):
            label = g.get("name") or g["id"]
            members = [m for m in _list(g.get("nodes")) if isinstance(m, str)]
            hit = 0
            for p in list(self.placed.values()):
                if p.entry["id"] in members or p.entry.get("g") == g["id"]:
                    p.mapped.notes.insert(0, f"Node-RED group: {label}")
                    hit += 1
            self.notes.append(f"- Group '{label}'{self._where(g)}: {hit} node(s); their notes "
                              "name it" + (f". {_cut(g['info'])}" if g.get("info") else ""))

    # -- wires ----------------------------------------------------------------------
    def _scope_of(self, key: str) -> str | None:
        p = self.placed.get(key) or self.virtual.get(key)
        if p is not None:
            return p.scope
        return self.ports[key][0] if key in self.ports else None

    def _targets(self, key: str, scope: str, seen: set[str], away: list[str]) -> list[str]:
        """The keys of the nodes a wire to ``key`` reaches (through links and
        junctions) in ``scope``; one in another scope is added to ``away``."""
        if key in seen:
            return []
        seen.add(key)
        where = self._scope_of(key)
        if where is None:
            return []
        if where != scope:
            away.append(key)
            return []
        if key in self.placed or key in self.ports:
            return [key]
        v = self.virtual[key]
        out: list[str] = []
        if v.entry["type"] == "link out":
            for lid in _list(v.entry.get("links")):
                if isinstance(lid, str):
                    out += self._targets(lid, scope, seen, away)
            return out
        for i, port in enumerate(v.entry.get("wires") or [[]]):
            for t in port:
                out += self._targets(t, scope, seen, away)
            for t in self.feeds.get((key, i), []):
                out += self._targets(t, scope, seen, away)
        return out

    def _target_port(self, key: str) -> str | None:
        p = self.placed.get(key)
        if p is not None and p.mapped is not None and is_instance_type(p.mapped.type):
            return self.defs[p.entry["type"][8:]].in_port
        return "in"

    def _node_id(self, key: str) -> str:
        return self.ports[key][1] if key in self.ports else key

    def _wires(self, key: str, scope: str, outputs: list[list[str]], ports: list[str],
               mp: Mapped | None) -> list[Wire]:
        """The wires of one node's outputs (Node-RED's wires, and the
        subflow outputs it feeds) as Switchboard wires."""
        wires: list[Wire] = []
        for i in range(max(len(outputs), self.fed.get(key, 0))):
            port = outputs[i] if i < len(outputs) else []
            targets: list[str] = []
            away: list[str] = []
            for t in port:
                if self._scope_of(t) is None and mp is not None:
                    mp.review(f"output {i + 1} went to {t!r}, which is not in the file")
                targets += self._targets(t, scope, set(), away)
            for t in self.feeds.get((key, i), []):
                targets += self._targets(t, scope, set(), away)
            if away and mp is not None:
                mp.review(f"output {i + 1} went to {', '.join(sorted(set(away))[:10])}, on "
                          "another tab's subflow or outside this subflow: not wired")
            if not targets:
                continue
            if i >= len(ports):
                if mp is not None:
                    mp.review(f"output {i + 1} went to "
                              f"{', '.join(sorted(set(targets))[:10])}: Switchboard's node "
                              "has no such output; wire it by hand")
                continue
            for t in dict.fromkeys(targets):
                to_port = self._target_port(t)
                if to_port is None:
                    if mp is not None:
                        mp.review(f"output {i + 1} went to {t!r}, a subflow with no input")
                    continue
                wires.append(Wire.model_validate({"from": [self._node_id(key), ports[i]],
                                                  "to": [self._node_id(t), to_port]}))
        return wires

    def _assemble(self) -> ImportReport:
        nodes: dict[str, list[FlowNode]] = {"": []}
        wires: dict[str, list[Wire]] = {"": []}
        env_readable: list[str] = []
        for sf_id, d in self.defs.items():
            nodes[sf_id], wires[sf_id] = [], []
            if d.in_port is not None:
                port = _list(d.entry.get("in"))[0]
                nodes[sf_id].append(self._port_node(d.in_id, IN_TYPE, d.in_port, _dict(port)))
                wires[sf_id] += self._wires(sf_id + "\0in", sf_id, [[
                    w["id"] for w in _list(_dict(port).get("wires"))
                    if isinstance(w, dict) and isinstance(w.get("id"), str)]], ["out"], None)
        for key, p in self.placed.items():
            mp = p.mapped
            assert mp is not None
            n = p.entry
            wires[p.scope] += self._wires(key, p.scope, n.get("wires") or [], mp.ports, mp)
            self.status[n["id"]] = worse(self.status[n["id"]], mp.status)
            head = f"Imported from Node-RED: {n['type']} (id {n['id']})"
            if n.get("info"):
                mp.notes.append(f"Node-RED description: {_cut(n['info'])}")
            env_readable += mp.env_readable
            self.where[key] = (f"subflows.{self.defs[p.scope].name}/{key}" if p.scope
                               else f"{'placeholder' if mp.status == PLACEHOLDER else 'node'} "
                               f"{key}")
            nodes[p.scope].append(FlowNode.model_validate({
                "id": key, "type": mp.type, "name": (str(n.get("name"))[:200] or None)
                if n.get("name") else None,
                "position": _position(p.offset[0] + _num(n.get("x")),
                                      p.offset[1] + _num(n.get("y"))),
                "params": mp.params, "disabled": p.disabled,
                "notes": "\n".join([head] + mp.notes)}))
        self.where.update((key, "wires") for key in self.virtual)
        subflows = []
        for sf_id, d in self.defs.items():
            self.where[sf_id] = f"subflow {d.name}"
            for k, port in enumerate(d.out_ports):
                out = _dict(_list(d.entry.get("out"))[k])
                nodes[sf_id].append(self._port_node(d.out_ids[k], OUT_TYPE, port, out))
            subflows.append(SubflowDef(
                name=d.name, label=d.label[:200],
                description=str(d.entry.get("info") or "")[:10_000], params=d.params,
                nodes=nodes[sf_id], wires=wires[sf_id]))
        flow = Flow(name=str((self.tabs[0].get("label") if self.tabs else None)
                             or self.name)[:200], nodes=nodes[""], wires=wires[""],
                    subflows=subflows)
        if env_readable:
            flow.settings.env_readable = sorted(set(env_readable))
        desc = [f"Imported from the Node-RED export {Path(self.file).name}."]
        if self.notes or self.report_warnings:
            desc += ["", "## Notes imported from Node-RED", ""] + self.notes
            desc += [f"- {w}" for w in self.report_warnings]
        flow.description = "\n".join(desc)
        table: dict[str, Counter] = {}
        for n in self.data:
            t = n["type"]
            if t.startswith("subflow:"):
                sf = self.subflows.get(t[8:])
                t = f"subflow:{(sf or {}).get('name') or t[8:]}"
            table.setdefault(t, Counter())[self.status.get(n["id"], PLACEHOLDER)] += 1
        for n in self.data:
            self.where.setdefault(n["id"], "notes")  # tabs, groups, comments, config nodes
        return ImportReport(flow, table, self.report_warnings, len(self.data), self.where)

    def _port_node(self, node_id: str, kind: str, port: str, where: dict) -> FlowNode:
        return FlowNode.model_validate({
            "id": node_id, "type": kind, "position": _position(_num(where.get("x")),
                                                              _num(where.get("y"))),
            "params": {"name": c(port)}})


def _identifier(text: str, fallback: str) -> str:
    """``text`` as a name (letters, digits, _; not starting with a digit;
    at most 64 characters), else ``fallback``."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text.strip()).strip("_")
    if not name:
        return fallback
    if name[0].isdigit():
        name = "_" + name
    return name[:64]


def _unique(name: str, taken: set[str]) -> str:
    out, i = name, 2
    while out in taken:
        tail = f"_{i}"
        out, i = name[:64 - len(tail)] + tail, i + 1
    taken.add(out)
    return out


def _as_type(v: Any, p: SubflowParam) -> tuple[Any, str]:
    """An instance's value as its param's type: (value, "") or (v, why not)."""
    t = p.type.value
    if t in ("str", "enum"):
        if not isinstance(v, str):
            v = json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else \
                ("true" if v is True else "false" if v is False else str(v))
        if t == "enum" and v not in (p.choices or []):
            return v, f"{v!r} is not one of its choices"
        return v, ""
    if t == "int" and isinstance(v, float) and v.is_integer():
        return int(v), ""
    if t in ("int", "float") and (isinstance(v, bool) or not isinstance(v, (int, float))):
        return v, f"{_cut(v)[:60]!r} is not a number"
    if t == "int" and not isinstance(v, int):
        return v, f"{v!r} is not a whole number"
    if t == "bool" and not isinstance(v, bool):
        return v, f"{_cut(v)[:60]!r} is not true or false"
    return v, ""


#: Node-RED's nodes are ~120 px wide, placed by their centre; Switchboard's
#: are wider and placed by their corner: spread the layout so none overlap.
X_SCALE, Y_SCALE = 1.6, 1.5


def _position(x: float, y: float) -> tuple[float, float]:
    return (round(max(0.0, x * X_SCALE - 80), 1), round(max(0.0, y * Y_SCALE - 20), 1))


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Constant(name)  # NaN, Infinity: Python's json reads them, JSON has none


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
        and v - v == 0 else 0.0


def _cut(text: Any) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= MAX_NOTE_CHARS else s[:MAX_NOTE_CHARS] + "... (cut)"

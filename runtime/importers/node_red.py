"""Node-RED export -> Switchboard flow.

Reads the array a Node-RED editor exports (or its admin API's GET /flows
returns): ``tab``, ``subflow``, ``group``, ``comment`` and node entries,
``wires`` by output index. What becomes of each entry:

- a node of a type in ``node_red_nodes.MAPPERS``: its Switchboard node
  (``mapped``, or ``review`` where something did not map: the node's notes
  say what);
- link in / link out / junction: dissolved into wires (``mapped``); a link
  call or a link out in return mode: a placeholder;
- a subflow instance: its subflow's nodes inlined, ids prefixed with
  ``<instance id>.``, its env values (over the subflow's defaults) read where
  the nodes read ``env`` (``review``: Switchboard has no subflows yet); a
  subflow no instance uses is inlined once, disabled, so nothing is lost;
- a group: its name in the notes of its nodes; a comment: its text in the
  flow's description under "Notes imported from Node-RED"; a config node
  (no place on a tab): listed there too (``review``);
- anything else: a ``core.placeholder`` that keeps its type, settings and
  wires and blocks the run with an error naming the type.

Every entry is counted in the report's table exactly once (its worst status
over every place it was inlined), so the table's total is the array's length.

Bounds (the file comes from elsewhere): ``MAX_FILE_BYTES``, ``MAX_ENTRIES``,
``MAX_NODES`` after inlining, ``MAX_SUBFLOW_DEPTH``, ``MAX_STRING_CHARS`` and
``MAX_JSON_DEPTH``; a subflow that contains itself is an error naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..flow.model import Flow, FlowNode, Wire
from .node_red_nodes import MAPPED, PLACEHOLDER, REVIEW, Env, Mapped, map_node, placeholder, worse

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


class NodeRedImportError(ValueError):
    """A file that is not a Node-RED export this importer can read; the
    message names what is wrong and where."""


@dataclass
class ImportReport:
    flow: Flow
    #: Node-RED type -> Counter of status (mapped / review / placeholder).
    table: dict[str, Counter] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    entries: int = 0

    def total(self) -> int:
        return sum(sum(c.values()) for c in self.table.values())


def format_table(report: ImportReport) -> str:
    rows = sorted(report.table.items())
    width = max([len("Node-RED type")] + [len(t) for t, _ in rows])
    head = f"{'Node-RED type':<{width}}  {'mapped':>6}  {'review':>6}  {'placeholder':>11}"
    lines = [head, "-" * len(head)]
    tot: Counter = Counter()
    for t, counts in rows:
        tot.update(counts)
        lines.append(f"{t:<{width}}  {counts[MAPPED]:>6}  {counts[REVIEW]:>6}  "
                     f"{counts[PLACEHOLDER]:>11}")
    lines.append("-" * len(head))
    lines.append(f"{'total (' + str(report.total()) + ')':<{width}}  {tot[MAPPED]:>6}  "
                 f"{tot[REVIEW]:>6}  {tot[PLACEHOLDER]:>11}")
    return "\n".join(lines)


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
    """One Node-RED node as it lands in the flow (a subflow's node once per
    instance): its new id, entry, scope prefix and env."""

    key: str
    entry: dict
    prefix: str
    env: Env
    origin: str = ""  # "subflow X via instance Y" for inlined nodes
    disabled: bool = False
    offset: tuple[float, float] = (0.0, 0.0)
    mapped: Mapped | None = None


@dataclass
class _Instance:
    key: str
    entry: dict
    definition: dict
    inner_prefix: str
    prefix: str


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
        self.instances: dict[str, _Instance] = {}
        #: (inner key, port) -> instance keys + output index it feeds
        self.feeds: dict[tuple[str, int], list[tuple[str, int]]] = {}
        self.status: dict[str, str] = {}  # entry id -> worst status
        self.report_warnings: list[str] = []
        self.notes: list[str] = []
        self.used_subflows: set[str] = set()

    # -- walking tabs and subflows --------------------------------------------------
    def run(self) -> ImportReport:
        y0 = 0.0
        # Nodes of no tab: an old single-tab export (no z), or a tab missing.
        loose = [n for n in self.scope.get("", []) if n["type"] not in _LAYOUT
                 and ("x" in n or "wires" in n)]
        # Nodes whose tab is not in the file are imported as of a tab of their own.
        orphans = [{"id": z, "label": f"(tab {z} not in the file)"} for z in self.scope
                   if z and z not in self.by_id]
        for tab in self.tabs + orphans + ([{"id": "", "label": ""}] if loose else []):
            env = Env(self._env_values(tab.get("env")), None, f"tab {tab.get('label')}")
            ymax = self._walk(tab["id"], "", env, "", (0.0, y0), bool(tab.get("disabled")), [])
            y0 = ymax + 160.0
            if tab["id"] in self.by_id:
                self.status.setdefault(tab["id"], MAPPED)
            if tab.get("info"):
                self.notes.append(f"- Tab '{tab.get('label')}': {_cut(tab['info'])}")
        for sf_id, sf in self.subflows.items():
            if sf_id not in self.used_subflows:
                # No instance uses it: inlined once, disabled, so that it is not lost.
                stub = {"id": sf_id, "type": f"subflow:{sf_id}", "x": 0, "y": y0 + 40, "wires": []}
                self._instance(stub, sf, "", Env(None, None, ""), (0.0, 0.0), True, [],
                               unused=True)
                y0 += 400.0
                self.report_warnings.append(
                    f"subflow '{sf.get('name')}' has no instance: its nodes were imported "
                    "disabled, with ids prefixed by its id")
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
            elif t == "subflow":
                self.status.setdefault(n["id"], REVIEW)
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

    def _walk(self, scope_id: str, prefix: str, env: Env, origin: str,
              offset: tuple[float, float], disabled: bool, chain: list[str]) -> float:
        """Places the nodes of a tab or subflow; returns the lowest y used."""
        ymax = offset[1]
        for n in self.scope.get(scope_id, []):
            t = n["type"]
            if t in _LAYOUT:
                continue
            if not isinstance(n.get("x"), (int, float)) and "wires" not in n:
                continue  # a config node scoped to the tab: listed at the end
            ymax = max(ymax, offset[1] + _num(n.get("y")))
            key = prefix + n["id"]
            if t.startswith("subflow:"):
                sf = self.subflows.get(t.split(":", 1)[1])
                if sf is None:
                    self._place(key, n, prefix, env, origin, offset, disabled)
                    continue
                ymax = max(ymax, self._instance(n, sf, prefix, env, offset, disabled, chain))
                continue
            if len(self.placed) + len(self.virtual) >= MAX_NODES:
                raise NodeRedImportError(f"{self.file}: more than {MAX_NODES:,} nodes once "
                                         "subflows are inlined")
            self._place(key, n, prefix, env, origin, offset, disabled or bool(n.get("d")))
        return ymax

    def _place(self, key: str, n: dict, prefix: str, env: Env, origin: str,
               offset: tuple[float, float], disabled: bool) -> None:
        p = _Placed(key, n, prefix, env, origin, disabled, offset)
        t = n["type"]
        if t in _DISSOLVED and not (t == "link out" and n.get("mode") == "return"):
            self.virtual[key] = p
            self.status[n["id"]] = worse(self.status.get(n["id"], MAPPED), MAPPED)
            return
        if t.startswith("subflow:"):
            p.mapped = placeholder(n, f"its subflow {t[8:]!r} is not in the file")
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
        if origin:
            p.mapped.status = worse(p.mapped.status, REVIEW)
            p.mapped.notes.insert(0, f"From Node-RED {origin} (REVIEW: Switchboard has no "
                                     "subflows yet; edit every copy alike)")
        self.status[n["id"]] = worse(self.status.get(n["id"], MAPPED), p.mapped.status)
        self.placed[key] = p

    def _instance(self, n: dict, sf: dict, prefix: str, env: Env, offset: tuple[float, float],
                  disabled: bool, chain: list[str], unused: bool = False) -> float:
        sf_id = sf["id"]
        if sf_id in chain:
            names = " -> ".join(repr(self.subflows[s].get("name") or s) for s in chain + [sf_id])
            raise NodeRedImportError(f"{self.file}: subflow {sf.get('name') or sf_id!r} "
                                     f"contains itself ({names})")
        if len(chain) >= MAX_SUBFLOW_DEPTH:
            raise NodeRedImportError(f"{self.file}: subflows nested more than "
                                     f"{MAX_SUBFLOW_DEPTH} deep (at {sf.get('name') or sf_id!r})")
        if not unused:
            self.used_subflows.add(sf_id)
            self.status[n["id"]] = REVIEW
        key = prefix + n["id"]
        inner_prefix = key + "."
        inst = _Instance(key, n, sf, inner_prefix, prefix)
        self.instances[key] = inst
        values = self._env_values(sf.get("env"))
        values.update(self._env_values(n.get("env")))
        inner_env = Env(values, env, f"subflow {sf.get('name')}")
        inner = [m for m in self.scope.get(sf_id, []) if isinstance(m.get("x"), (int, float))]
        x0 = min((_num(m.get("x")) for m in inner), default=0.0)
        y0 = min((_num(m.get("y")) for m in inner), default=0.0)
        # Below the instance's row, so that the copies do not cover its neighbours.
        here = (offset[0] + _num(n.get("x")) - x0, offset[1] + _num(n.get("y")) - y0 + 60)
        origin = (f"subflow '{sf.get('name') or sf_id}' (no instance: imported disabled)"
                  if unused else f"subflow '{sf.get('name') or sf_id}' via instance "
                  f"'{n.get('name') or n['id']}'")
        ymax = self._walk(sf_id, inner_prefix, inner_env, origin, here,
                          disabled or unused or bool(n.get("d")), chain + [sf_id])
        for k, out in enumerate(_list(sf.get("out"))):
            for w in _list(_dict(out).get("wires")):
                if isinstance(w, dict) and isinstance(w.get("id"), str):
                    src = key if w["id"] == sf_id else inner_prefix + w["id"]
                    port = int(w.get("port") or 0) if str(w.get("port", 0)).isdigit() else 0
                    self.feeds.setdefault((src, port if src != key else -1), []).append((key, k))
        return ymax

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
    def _targets(self, key: str, prefix: str, seen: set[str]) -> list[str]:
        """The placed nodes a wire to ``key`` reaches (through links, junctions
        and subflow instances)."""
        if key in seen:
            return []
        seen.add(key)
        if key in self.placed:
            return [key]
        if key in self.instances:
            inst = self.instances[key]
            out: list[str] = []
            for port in _list(inst.definition.get("in")):
                for w in _list(_dict(port).get("wires")):
                    if isinstance(w, dict) and isinstance(w.get("id"), str):
                        out += self._targets(inst.inner_prefix + w["id"], inst.inner_prefix, seen)
            for inst_key, k in self.feeds.get((key, -1), []):  # input wired straight to output
                out += self._instance_out(inst_key, k, seen)
            return out
        v = self.virtual.get(key)
        if v is None:
            return []
        out = []
        if v.entry["type"] == "link out":
            for lid in _list(v.entry.get("links")):
                if isinstance(lid, str):
                    tk = v.prefix + lid if v.prefix + lid in self.virtual else lid
                    out += self._targets(tk, v.prefix, seen)
            return out
        for port in v.entry.get("wires") or []:
            for t in port:
                out += self._targets(v.prefix + t, v.prefix, seen)
        return out

    def _instance_out(self, inst_key: str, k: int, seen: set[str]) -> list[str]:
        inst = self.instances[inst_key]
        wires = inst.entry.get("wires") or []
        out: list[str] = []
        for t in wires[k] if k < len(wires) else []:
            out += self._targets(inst.prefix + t, inst.prefix, seen)
        for outer_key, j in self.feeds.get((inst_key, k), []):  # a nested subflow's output
            out += self._instance_out(outer_key, j, seen)
        return out

    def _assemble(self) -> ImportReport:
        nodes, wires, keys, env_readable = [], [], set(), []
        for key, p in self.placed.items():
            mp = p.mapped
            assert mp is not None
            n = p.entry
            if mp.type == "core.catch":
                mp.params["nodes"]["value"] = [p.prefix + s for s in mp.params["nodes"]["value"]]
            for i, port in enumerate(n.get("wires") or []):
                targets: list[str] = []
                for t in port:
                    tk = p.prefix + t
                    if tk not in self.placed and tk not in self.virtual \
                            and tk not in self.instances:
                        mp.review(f"output {i + 1} went to {t!r}, which is not in the file")
                        self.status[n["id"]] = worse(self.status[n["id"]], mp.status)
                    targets += self._targets(tk, p.prefix, set())
                for inst_key, k in self.feeds.get((key, i), []):
                    targets += self._instance_out(inst_key, k, set())
                if not targets:
                    continue
                if i >= len(mp.ports):
                    mp.review(f"output {i + 1} went to {', '.join(sorted(set(targets))[:10])}: "
                              "Switchboard's node has no such output; wire it by hand")
                    self.status[n["id"]] = worse(self.status[n["id"]], mp.status)
                    continue
                for t in dict.fromkeys(targets):
                    if (key, mp.ports[i], t) not in keys:
                        keys.add((key, mp.ports[i], t))
                        wires.append(Wire.model_validate({"from": [key, mp.ports[i]],
                                                          "to": [t, "in"]}))
            head = f"Imported from Node-RED: {n['type']} (id {n['id']})"
            if n.get("info"):
                mp.notes.append(f"Node-RED description: {_cut(n['info'])}")
            env_readable += mp.env_readable
            nodes.append(FlowNode.model_validate({
                "id": key, "type": mp.type, "name": (str(n.get("name"))[:200] or None)
                if n.get("name") else None,
                "position": _position(p.offset[0] + _num(n.get("x")),
                                      p.offset[1] + _num(n.get("y"))),
                "params": mp.params, "disabled": p.disabled,
                "notes": "\n".join([head] + mp.notes)}))
        flow = Flow(name=str((self.tabs[0].get("label") if self.tabs else None)
                             or self.name)[:200], nodes=nodes, wires=wires)
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
        return ImportReport(flow, table, self.report_warnings, len(self.data))


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

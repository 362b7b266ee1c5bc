"""What two runs did differently, from their events: ``diff_runs`` is a
pure function of two runs' stored events (and, if given, the flows they
ran), shared by ``switchboard runs diff`` and the designer's History tab.
``facts`` sorts one run's events into what the run did."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Differences listed per compared value (a message, a tool call's arguments).
MAX_CHANGES = 20
#: Keys that differ in every run and say nothing about what a flow did.
IGNORED_KEYS = frozenset({"_msgid", "__tool_caller_id__"})


class _Absent:
    """A value one run does not have (a node that got no message)."""

    def __repr__(self) -> str:
        return "—"


ABSENT: Any = _Absent()


@dataclass
class RunFacts:
    """One run's events, sorted into what the commands show."""

    run_id: str = ""
    started: Any = None  # RunStarted
    finished: Any = None  # RunFinished
    replay: Any = None  # RunReplay
    stats: Any = None  # the last Stats (the one history keeps whole)
    debug: list[Any] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    answers: dict[str, list[str]] = field(default_factory=dict)  # agent -> final texts
    names: dict[str, str] = field(default_factory=dict)  # node id -> name, where events say

    def counts(self, node: str) -> dict[str, int]:
        return (self.stats.nodes.get(node, {}) if self.stats is not None else {})

    def last(self, node: str, direction: str) -> Any:
        """The node's last recorded input ("in") or output ("out")."""
        if direction == "in" and self.replay is not None and self.replay.inputs.get(node):
            return self.replay.inputs[node][-1]
        if self.stats is not None:
            seen = self.stats.last.get(node, {}).get(direction) or []
            if seen:
                return seen[-1]
        return ABSENT

    @property
    def busy_ms(self) -> dict[str, float]:
        return dict(self.replay.busy_ms) if self.replay is not None else {}


def facts(events: list[Any]) -> RunFacts:
    out = RunFacts()
    by_caller: dict[str, dict[str, Any]] = {}
    for e in events:
        kind = e.type
        if not out.run_id and e.run_id:
            out.run_id = e.run_id
        if kind == "run.started":
            out.started = e
        elif kind == "run.finished":
            out.finished = e
        elif kind == "run.replay":
            out.replay = e
        elif kind == "stats":
            out.stats = e
        elif kind == "debug":
            out.debug.append(e)
            if e.name:
                out.names.setdefault(e.node, e.name)
        elif kind == "node.error":
            out.errors.append(e)
            if e.name:
                out.names.setdefault(e.node, e.name)
        elif kind == "tool.call":
            call = {"caller_id": e.caller_id, "agent": e.agent, "node": e.node, "tool": e.tool,
                    "args": e.args, "parent": e.parent, "status": "", "data": None, "error": "",
                    "ms": None}
            by_caller[e.caller_id] = call
            out.calls.append(call)
        elif kind == "tool.result":
            call = by_caller.get(e.caller_id)
            if call is not None and (not call["status"] or not e.tracking_id):
                call.update(status=e.status, data=e.data, error=e.error, ms=e.ms)
        elif kind == "llm.response" and e.text and not e.tool_calls:
            out.answers.setdefault(e.agent, []).append(e.text)
    # A call a person edited (at a breakpoint, or approving it with changes)
    # ran with their arguments: that is what it did, what a diff compares and
    # what a rerun of it repeats; the LLM's stay under "asked".
    for caller_id, args in edited_calls(events).items():
        call = by_caller.get(caller_id)
        if call is not None:
            call["asked"], call["args"], call["edited"] = call["args"], args, True
    return out


def edited_calls(events: list[Any]) -> dict[str, Any]:
    """Caller id -> the arguments a person gave the call before it ran."""
    out: dict[str, Any] = {}
    for e in events:
        if e.type == "debug.resumed" and e.caller_id and e.edited and e.msg is not None:
            out[e.caller_id] = e.msg
        elif e.type == "tool.decision" and e.decision == "edited" and e.args is not None:
            out[e.caller_id] = e.args
    return out


def run_cost(fin: Any) -> dict[str, Any]:
    """Cost, tokens and tool cost of a run, from its run.finished."""
    if fin is None:
        return {"cost_usd": None, "tokens": 0, "tool_cost_usd": 0.0}
    usage = fin.usage or {}
    tokens = int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
    return {"cost_usd": fin.cost_usd, "tokens": tokens, "tool_cost_usd": fin.tool_cost_usd}


def diff_runs(a_events: list[Any], b_events: list[Any], a_flow: dict | None = None,
              b_flow: dict | None = None) -> dict[str, Any]:
    """What differed between two runs, from their events (and, if given,
    the flows they ran): a dict of sections, each a list of differences.

    - ``summary``: status, duration, errors, cost and tokens (every row,
      with ``same``);
    - ``flow``: params, nodes and wires that differ between the two flows;
    - ``messages``: nodes whose message counts differ (a rerun from a node
      shows its upstream at 0);
    - ``inputs`` / ``outputs``: per node, the paths in which its last input
      (its last output) differ; ``_msgid`` is ignored;
    - ``debug``: debug values, per node in order;
    - ``tool_calls``: calls matched by tool name and order (the k-th call of
      a tool with the k-th; a rerun of one call with the call it repeats),
      with the paths in which their arguments and results differ;
    - ``answers``: the agents' final answers;
    - ``durations``: per node (nodes that await) and in total, every row.

    A value missing on one side has no ``a`` (or ``b``) key. When one run
    is a rerun from a node or of one call (``partial``: "a" or "b"), the
    nodes it left out are named in ``not_rerun`` and left out of the
    sections, instead of differing in each."""
    fa, fb = facts(a_events), facts(b_events)
    out: dict[str, Any] = {"a": fa.run_id, "b": fb.run_id}
    ca, cb = run_cost(fa.finished), run_cost(fb.finished)
    rows = [("status", _attr(fa.finished, "status"), _attr(fb.finished, "status")),
            ("duration_ms", _attr(fa.finished, "duration_ms"), _attr(fb.finished, "duration_ms")),
            ("errors", _attr(fa.finished, "errors"), _attr(fb.finished, "errors")),
            ("cost_usd", ca["cost_usd"], cb["cost_usd"]), ("tokens", ca["tokens"], cb["tokens"]),
            ("tool_cost_usd", ca["tool_cost_usd"], cb["tool_cost_usd"])]
    out["summary"] = [{"field": k, "a": a, "b": b, "same": _same(a, b)} for k, a, b in rows]
    out["flow"] = _flow_changes(a_flow, b_flow) if a_flow is not None and b_flow is not None \
        else []
    nodes = list(dict.fromkeys([*_node_ids(fa), *_node_ids(fb)]))
    # A rerun from a node (or of one call) leaves the rest of the flow out:
    # those nodes are named once, not listed as differing in every section.
    out["partial"] = "b" if _is_partial(fb) else "a" if _is_partial(fa) else ""
    skipped: set[str] = set()
    if out["partial"]:
        side = fb if out["partial"] == "b" else fa
        skipped = {n for n in nodes if not any(side.counts(n).get(k) for k in ("in", "out"))
                   and side.last(n, "in") is ABSENT}
    out["not_rerun"] = [n for n in nodes if n in skipped]
    nodes = [n for n in nodes if n not in skipped]
    out["messages"] = []
    for n in nodes:
        ka, kb = fa.counts(n), fb.counts(n)
        pa, pb = (ka.get("in", 0), ka.get("out", 0)), (kb.get("in", 0), kb.get("out", 0))
        if pa != pb:
            out["messages"].append({"node": n, "a": {"in": pa[0], "out": pa[1]},
                                    "b": {"in": pb[0], "out": pb[1]}})
    for section, direction in (("inputs", "in"), ("outputs", "out")):
        out[section] = []
        for n in nodes:
            x, y = fa.last(n, direction), fb.last(n, direction)
            if x is ABSENT or y is ABSENT:  # the node got (sent) nothing in one run
                if x is not y:
                    out[section].append(_pair({"node": n, "path": "(message)"}, x, y))
                continue
            out[section] += [{"node": n, **c} for c in changes(x, y)]
    out["debug"] = [c for c in _debug_changes(fa, fb) if c["node"] not in skipped]
    out["tool_calls"] = _call_changes(fa, fb)
    out["answers"] = [_pair({"agent": agent, "index": i}, x, y)
                      for agent in dict.fromkeys([*fa.answers, *fb.answers])
                      if agent not in skipped
                      for i, (x, y) in enumerate(_zip_all(fa.answers.get(agent, []),
                                                          fb.answers.get(agent, [])))
                      if not _same(x, y)]
    ba, bb = fa.busy_ms, fb.busy_ms
    out["durations"] = [_pair({"node": n}, ba.get(n, ABSENT), bb.get(n, ABSENT))
                        for n in dict.fromkeys([*ba, *bb]) if n not in skipped]
    out["durations"].append({"node": "(total)", "a": _attr(fa.finished, "duration_ms"),
                             "b": _attr(fb.finished, "duration_ms")})
    out["same"] = not any(out[k] for k in ("flow", "messages", "inputs", "outputs", "debug",
                                           "tool_calls", "answers")) \
        and all(r["same"] for r in out["summary"] if r["field"] not in ("duration_ms",))
    return out


def _is_partial(f: RunFacts) -> bool:
    return bool(getattr(f.started, "from_node", "") or getattr(f.started, "call", ""))


def changes(a: Any, b: Any, path: str = "", limit: int = MAX_CHANGES) -> list[dict[str, Any]]:
    """The paths at which two JSON values differ, at most ``limit`` of
    them: [{"path", "a", "b"}], a side without the path has no key."""
    found: list[dict[str, Any]] = []
    _walk(a, b, path, found, limit)
    return found


def _walk(a: Any, b: Any, path: str, found: list, limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            if not path and k in IGNORED_KEYS:
                continue
            _walk(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else str(k),
                  found, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}[{i}]", found, limit)
    elif not _same(a, b):
        found.append(_pair({"path": path or "(value)"}, a, b))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _pair(head: dict[str, Any], a: Any, b: Any) -> dict[str, Any]:
    out = dict(head)
    if a is not ABSENT:
        out["a"] = a
    if b is not ABSENT:
        out["b"] = b
    return out


def _attr(event: Any, name: str) -> Any:
    return getattr(event, name) if event is not None else ABSENT


def _zip_all(a: list, b: list) -> list[tuple[Any, Any]]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT) for i in range(n)]


def _node_ids(f: RunFacts) -> list[str]:
    ids = list(f.stats.nodes) if f.stats is not None else []
    if f.replay is not None:
        ids += list(f.replay.inputs)
    return ids


def _flow_changes(a: dict, b: dict) -> list[dict[str, Any]]:
    na = {n.get("id"): n for n in a.get("nodes", [])}
    nb = {n.get("id"): n for n in b.get("nodes", [])}
    out = []
    for node_id in dict.fromkeys([*na, *nb]):
        x, y = na.get(node_id), nb.get(node_id)
        if x is None or y is None:
            out.append(_pair({"node": node_id, "path": "(node)"},
                             x.get("type") if x else ABSENT, y.get("type") if y else ABSENT))
            continue
        x = {k: v for k, v in x.items() if k != "position"}
        y = {k: v for k, v in y.items() if k != "position"}
        out += [{"node": node_id, **c} for c in changes(x, y)]
    wa = {json.dumps(w, sort_keys=True) for w in a.get("wires", [])}
    wb = {json.dumps(w, sort_keys=True) for w in b.get("wires", [])}
    out += [{"node": "(wires)", "path": "wire", "a": json.loads(w)} for w in sorted(wa - wb)]
    out += [{"node": "(wires)", "path": "wire", "b": json.loads(w)} for w in sorted(wb - wa)]
    settings = changes(a.get("settings", {}), b.get("settings", {}), "settings")
    return out + [{"node": "(flow)", **c} for c in settings]


def _debug_changes(fa: RunFacts, fb: RunFacts) -> list[dict[str, Any]]:
    def per_node(f: RunFacts) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for d in f.debug:
            out.setdefault(d.node, []).append(d.value)
        return out

    da, db = per_node(fa), per_node(fb)
    out = []
    for node in dict.fromkeys([*da, *db]):
        for i, (x, y) in enumerate(_zip_all(da.get(node, []), db.get(node, []))):
            if x is ABSENT or y is ABSENT:
                out.append(_pair({"node": node, "index": i, "path": "(value)"}, x, y))
            else:
                out += [{"node": node, "index": i, **c} for c in changes(x, y)]
    return out


def _call_changes(fa: RunFacts, fb: RunFacts) -> list[dict[str, Any]]:
    """Tool calls paired by tool name and order; a rerun of one call is
    paired with the call it repeated."""
    pairs: list[tuple[Any, Any]] = []
    repeated = getattr(fb.started, "call", "") or ""
    a_calls, b_calls = list(fa.calls), list(fb.calls)
    if repeated:
        # The other calls of A were not repeated: only the pair is compared.
        original = next((c for c in a_calls if c["caller_id"] == repeated), None)
        if original is not None and b_calls:
            pairs.append((original, b_calls[0]))
            a_calls, b_calls = [], b_calls[1:]
    by_tool_a: dict[str, list] = {}
    by_tool_b: dict[str, list] = {}
    for c in a_calls:
        by_tool_a.setdefault(c["tool"], []).append(c)
    for c in b_calls:
        by_tool_b.setdefault(c["tool"], []).append(c)
    for tool in dict.fromkeys([*by_tool_a, *by_tool_b]):
        pairs += _zip_all(by_tool_a.get(tool, []), by_tool_b.get(tool, []))
    out = []
    counter: dict[str, int] = {}
    for x, y in pairs:
        tool = (x if x is not ABSENT else y)["tool"]
        counter[tool] = counter.get(tool, 0) + 1
        head = {"tool": tool, "index": counter[tool],
                "caller_a": x["caller_id"] if x is not ABSENT else "",
                "caller_b": y["caller_id"] if y is not ABSENT else ""}
        if x is ABSENT or y is ABSENT:
            out.append(_pair({**head, "path": "(call)"},
                             _call_brief(x) if x is not ABSENT else ABSENT,
                             _call_brief(y) if y is not ABSENT else ABSENT))
            continue
        found = [*changes(x["args"], y["args"], "args")]
        if x["status"] != y["status"]:
            found.append({"path": "status", "a": x["status"], "b": y["status"]})
        found += changes(x["data"] if x["status"] == "success" else x["error"],
                         y["data"] if y["status"] == "success" else y["error"], "result")
        out += [{**head, **c} for c in found]
    return out


def _call_brief(c: dict[str, Any]) -> dict[str, Any]:
    return {"args": c["args"], "status": c["status"]}

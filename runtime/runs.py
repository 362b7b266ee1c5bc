"""``switchboard runs``: list, show, compare and rerun the runs in history.

Every run, from the CLI or the designer, is in one history (runtime.history),
so these commands read designer runs as well as terminal ones. A run keeps
what a rerun needs in its ``run.replay`` event (see events.RunReplay): the
flow as it ran and a bounded sample of the messages that reached each node.

- ``rerun ID`` runs that flow again, as it was then (the file may have
  changed since: it says so, and runs the stored flow).
- ``rerun ID --from NODE`` injects the messages NODE got, in their order,
  into NODE of that flow; nothing upstream runs (its sources do not even
  start), and the flow variables start as the run left them, since the
  nodes that set them are the ones that do not run. ``--set msg.PATH=V``
  edits the injected messages, ``--set NODE.PARAM=V`` a param, as in
  ``switchboard run``.
- ``rerun ID --call CALLER_ID [--args JSON]`` repeats one tool call of an
  agent with the same arguments, or with some replaced, through the agent's
  ToolBridge: the schema, the approval rules and the scopes apply as they
  did for the LLM, so an argument the designer did not give to the AI is
  refused.

A rerun is a new run in history whose run.started names what it repeats.
``diff_runs`` is a pure function of two runs' events, for the designer too.
Nothing here imports Qt; the heavy modules are imported when used, so that
``switchboard --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Runs ``runs list`` shows unless told otherwise.
LIST_LIMIT = 20
#: Characters of a value in a table cell, and in ``runs show``.
CELL_CHARS = 50
SHOW_CHARS = 300
#: Differences listed per compared value (a message, a tool call's arguments).
MAX_CHANGES = 20
#: Keys that differ in every run and say nothing about what a flow did.
IGNORED_KEYS = frozenset({"_msgid"})

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class RunsError(Exception):
    """Bad input: an unknown or ambiguous run id, a node with nothing to
    replay, an argument that is not JSON. The CLI exits 2 with its text."""


class _Absent:
    def __repr__(self) -> str:
        return "—"


ABSENT: Any = _Absent()


# -- the command line --------------------------------------------------------------

RERUN_EPILOG = """examples:
  switchboard runs rerun 3fa2                       the whole flow, as it ran then
  switchboard runs rerun 3fa2 --from mail           node 'mail' and what follows it,
                                                    with the messages it got
  switchboard runs rerun last --from mail --set msg.payload.order=Z-9
  switchboard runs rerun 3fa2 --from mail --set 'mail.subject=New subject'
  switchboard runs rerun 3fa2 --call 9c1e0f2a-3 --args '{"subject": "Edited"}'

A run id may be shortened to any unique start; 'last' is the newest run.
Exit codes as for `switchboard run`; a repeated tool call that was refused
(its arguments do not fit the tool) exits 2, one that failed or was
rejected exits 1."""


def add_parser(sub: Any, parser_class: type, run_options: Callable[[Any], None]) -> None:
    """Declare ``runs list|show|diff|rerun`` on the CLI's subparsers;
    ``run_options`` adds the options a rerun shares with ``switchboard run``."""
    p = sub.add_parser("runs", help="list, show, compare and rerun the runs in history")
    rs = p.add_subparsers(dest="runs_command", required=True, parser_class=parser_class)
    ls = rs.add_parser("list", help="the runs in history, newest first")
    ls.add_argument("--flow", metavar="NAME",
                    help="only runs of flows whose name or file contains NAME")
    ls.add_argument("--limit", type=int, default=LIST_LIMIT, metavar="N",
                    help=f"show at most N runs (default {LIST_LIMIT})")
    ls.add_argument("--json", action="store_true", help="one JSON array")
    sh = rs.add_parser("show", help="one run: summary, debug output, tool calls, errors")
    sh.add_argument("id", help="a run id (any unique start of it) or 'last'")
    sh.add_argument("--json", action="store_true", help="everything, as one JSON object")
    df = rs.add_parser("diff", help="what differed between two runs: node inputs and outputs, "
                                    "tool calls, answers, durations, cost")
    df.add_argument("a", help="a run id (any unique start of it) or 'last'")
    df.add_argument("b", help="the run to compare it with")
    df.add_argument("--json", action="store_true", help="the differences as one JSON object")
    rr = rs.add_parser("rerun", help="run a run again: all of it, from one node, or one tool call",
                       epilog=RERUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    rr.add_argument("id", help="a run id (any unique start of it) or 'last'")
    rr.add_argument("--from", dest="from_node", metavar="NODE",
                    help="rerun NODE and everything downstream with the messages it got; "
                         "nothing upstream runs")
    rr.add_argument("--call", metavar="CALLER_ID",
                    help="repeat one tool call (its caller id, as `runs show` lists it)")
    rr.add_argument("--args", metavar="JSON",
                    help="with --call: a JSON object whose keys replace those of the recorded "
                         "arguments")
    rr.add_argument("--set", action="append", default=[],
                    metavar="msg.PATH=VALUE|NODE.PARAM=VALUE",
                    help="edit the replayed messages (msg.PATH, with --from) or override a "
                         "param; VALUE is JSON if it parses, else text")
    run_options(rr)


def command(args: argparse.Namespace) -> int:
    """``runs list``, ``show`` and ``diff``: print, return the exit code."""
    from .history import History

    with History() as history:
        if args.runs_command == "list":
            return _list(history, args)
        if args.runs_command == "show":
            return _show(history, args)
        return _diff(history, args)


def resolve(history: Any, ref: str) -> str:
    """The id of the run ``ref`` names: a whole id, a unique start of one,
    or ``last`` (the newest run)."""
    ref = ref.strip()
    if ref in ("last", "latest"):
        newest = history.runs(limit=1)
        if not newest:
            raise RunsError(f"there are no runs in history yet ({history.path})")
        return newest[0].id
    found = history.find(ref)
    if ref in found:
        return ref
    if not found:
        raise RunsError(f"no run '{ref}' in history ({history.path}); `switchboard runs list` "
                        "shows the runs")
    if len(found) > 1:
        more = f" and {len(found) - 8} more" if len(found) > 8 else ""
        raise RunsError(f"run id '{ref}' is ambiguous: {len(found)} runs start with it "
                        f"({', '.join(found[:8])}{more}); give more of it")
    return found[0]


# -- what one run did --------------------------------------------------------------

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
    return out


def _cost(fin: Any) -> dict[str, Any]:
    if fin is None:
        return {"cost_usd": None, "tokens": 0, "tool_cost_usd": 0.0}
    usage = fin.usage or {}
    tokens = int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
    return {"cost_usd": fin.cost_usd, "tokens": tokens, "tool_cost_usd": fin.tool_cost_usd}


def _origin(started: Any) -> str:
    """"rerun of 3fa2… from 'mail'" for a rerun, else ""."""
    if started is None or not getattr(started, "rerun_of", ""):
        return ""
    where = (f" from '{started.from_node}'" if started.from_node
             else f" call {started.call}" if started.call else "")
    return f"rerun of {started.rerun_of}{where}"


# -- list ----------------------------------------------------------------------------

def _list(history: Any, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise RunsError(f"--limit {args.limit}: must be at least 1")
    wanted = (args.flow or "").lower()
    rows = []
    # Filtering needs no events, so read the run rows first and only the
    # first and last event of the runs shown.
    for info in history.runs(limit=100_000 if wanted else args.limit):
        if wanted and wanted not in info.flow.lower() and wanted not in info.path.lower():
            continue
        started, last = history.edge_events(info.id)
        fin = last if last is not None and last.type == "run.finished" else None
        rows.append({"id": info.id, "flow": info.flow, "path": info.path,
                     "started": info.started, "status": info.status,
                     "duration_ms": info.duration_ms, "errors": info.errors,
                     **_cost(fin), "rerun_of": getattr(started, "rerun_of", "") or "",
                     "from_node": getattr(started, "from_node", "") or "",
                     "call": getattr(started, "call", "") or "", "note": _origin(started)})
        if len(rows) >= args.limit:
            break
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        what = f" of a flow matching '{args.flow}'" if args.flow else ""
        print(f"no runs{what} in history ({history.path})", file=sys.stderr)
        return EXIT_OK
    table = [("ID", "STARTED", "FLOW", "STATUS", "DURATION", "ERRORS", "COST", "")]
    for r in rows:
        table.append((r["id"], _when(r["started"]), _cut(r["flow"], 30), r["status"],
                      _duration(r["duration_ms"]), str(r["errors"]), _cost_text(r), r["note"]))
    for line in _columns(table):
        print(line)
    return EXIT_OK


# -- show ----------------------------------------------------------------------------

def summary(history: Any, run_id: str) -> dict[str, Any]:
    """Everything ``runs show`` prints, as data (``--json``)."""
    info = history.run(run_id)
    f = facts(history.events(run_id))
    fin = f.finished
    replay = f.replay
    return {
        "id": run_id, "flow": info.flow, "path": info.path, "started": info.started,
        "status": info.status, "reason": fin.reason if fin else "",
        "message": fin.message if fin else "", "duration_ms": info.duration_ms,
        "errors": info.errors, **_cost(fin), "usage": dict(fin.usage) if fin else {},
        "rerun_of": getattr(f.started, "rerun_of", ""), "from_node": getattr(f.started, "from_node", ""),
        "call": getattr(f.started, "call", ""),
        "nodes": dict(f.stats.nodes) if f.stats is not None else {},
        "debug": [{"node": d.node, "name": d.name, "value": d.value} for d in f.debug],
        "tool_calls": f.calls,
        "node_errors": [{"node": e.node, "name": e.name, "message": e.message, "caught": e.caught}
                        for e in f.errors],
        "answers": f.answers,
        "replayable": {n: {"recorded": len(m), "received": replay.received.get(n, len(m))}
                       for n, m in replay.inputs.items()} if replay is not None else {},
        "busy_ms": f.busy_ms,
    }


def _show(history: Any, args: argparse.Namespace) -> int:
    run_id = resolve(history, args.id)
    s = summary(history, run_id)
    if args.json:
        print(json.dumps(s, indent=2, ensure_ascii=False, default=str))
        return EXIT_OK
    names = _names(history.flow_of(run_id))
    who = _who(names)
    print(f"run {run_id}  {s['flow']}")
    status = s["status"] + (f" ({s['reason']})" if s["reason"] else "")
    rows = [("file", s["path"] or "(not saved)"), ("started", _when(s["started"])),
            ("status", status + (f": {s['message']}" if s["message"] else "")),
            ("duration", _duration(s["duration_ms"])), ("errors", str(s["errors"])),
            ("cost", _cost_text(s) or "—")]
    origin = _origin(_Started(s))
    if origin:
        rows.append(("origin", origin))
    for line in _columns([(f"  {k}", v) for k, v in rows]):
        print(line)
    if s["nodes"]:
        print("\nnodes (messages in / out, errors)")
        table = [(f"  {who(n)}", f"{c.get('in', 0)} / {c.get('out', 0)}",
                  f"{c.get('errors', 0)} error{'s' if c.get('errors', 0) != 1 else ''}"
                  if c.get("errors") else "",
                  f"{s['busy_ms'][n]:.1f} ms" if n in s["busy_ms"] else "")
                 for n, c in s["nodes"].items()]
        for line in _columns(table):
            print(line)
    print(f"\ndebug output ({len(s['debug'])})")
    for d in s["debug"]:
        print(f"  {who(d['node'], d['name'])}  {_cut(_text(d['value']), SHOW_CHARS)}")
    print(f"\ntool calls ({len(s['tool_calls'])})")
    for c in s["tool_calls"]:
        took = f"  {c['ms']:.0f} ms" if c["ms"] is not None else ""
        target = f" -> {who(c['node'])}" if c["node"] else ""
        print(f"  {c['caller_id']}  {c['tool']}  by {who(c['agent'])}{target}  "
              f"{c['status'] or 'no result'}{took}")
        print(f"      args    {_cut(_text(c['args']), SHOW_CHARS)}")
        if c["status"] == "success":
            print(f"      result  {_cut(_text(c['data']), SHOW_CHARS)}")
        elif c["error"]:
            print(f"      error   {_cut(c['error'], SHOW_CHARS)}")
    for agent, texts in s["answers"].items():
        print(f"\nanswer of {who(agent)}")
        for text in texts:
            print(f"  {_cut(text, SHOW_CHARS)}")
    print(f"\nerrors ({len(s['node_errors'])})")
    for e in s["node_errors"]:
        print(f"  {who(e['node'], e['name'])}: {e['message']}" + ("  (caught)" if e["caught"] else ""))
    if s["replayable"]:
        parts = [f"{n} ({v['recorded']}" + (f" of {v['received']})" if v["received"] > v["recorded"]
                                            else ")") for n, v in s["replayable"].items()]
        print(f"\nrerun --from NODE can replay: {', '.join(parts)}")
    return EXIT_OK


class _Started:
    """A summary dict read as a run.started, for _origin."""

    def __init__(self, s: dict[str, Any]) -> None:
        self.rerun_of, self.from_node, self.call = s["rerun_of"], s["from_node"], s["call"]


# -- diff ----------------------------------------------------------------------------

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

    A value missing on one side has no ``a`` (or ``b``) key."""
    fa, fb = facts(a_events), facts(b_events)
    out: dict[str, Any] = {"a": fa.run_id, "b": fb.run_id}
    ca, cb = _cost(fa.finished), _cost(fb.finished)
    rows = [("status", _attr(fa.finished, "status"), _attr(fb.finished, "status")),
            ("duration_ms", _attr(fa.finished, "duration_ms"), _attr(fb.finished, "duration_ms")),
            ("errors", _attr(fa.finished, "errors"), _attr(fb.finished, "errors")),
            ("cost_usd", ca["cost_usd"], cb["cost_usd"]), ("tokens", ca["tokens"], cb["tokens"]),
            ("tool_cost_usd", ca["tool_cost_usd"], cb["tool_cost_usd"])]
    out["summary"] = [{"field": k, "a": a, "b": b, "same": _same(a, b)} for k, a, b in rows]
    out["flow"] = _flow_changes(a_flow, b_flow) if a_flow is not None and b_flow is not None \
        else []
    nodes = list(dict.fromkeys([*_node_ids(fa), *_node_ids(fb)]))
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
    out["debug"] = _debug_changes(fa, fb)
    out["tool_calls"] = _call_changes(fa, fb)
    out["answers"] = [_pair({"agent": agent, "index": i}, x, y)
                      for agent in dict.fromkeys([*fa.answers, *fb.answers])
                      for i, (x, y) in enumerate(_zip_all(fa.answers.get(agent, []),
                                                          fb.answers.get(agent, [])))
                      if not _same(x, y)]
    ba, bb = fa.busy_ms, fb.busy_ms
    out["durations"] = [_pair({"node": n}, ba.get(n, ABSENT), bb.get(n, ABSENT))
                        for n in dict.fromkeys([*ba, *bb])]
    out["durations"].append({"node": "(total)", "a": _attr(fa.finished, "duration_ms"),
                             "b": _attr(fb.finished, "duration_ms")})
    out["same"] = not any(out[k] for k in ("flow", "messages", "inputs", "outputs", "debug",
                                           "tool_calls", "answers")) \
        and all(r["same"] for r in out["summary"] if r["field"] not in ("duration_ms",))
    return out


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
        original = next((c for c in a_calls if c["caller_id"] == repeated), None)
        if original is not None and b_calls:
            pairs.append((original, b_calls[0]))
            a_calls.remove(original)
            b_calls = b_calls[1:]
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


def _diff(history: Any, args: argparse.Namespace) -> int:
    a, b = resolve(history, args.a), resolve(history, args.b)
    d = diff_runs(history.events(a), history.events(b), history.flow_of(a), history.flow_of(b))
    if args.json:
        print(json.dumps(d, indent=2, ensure_ascii=False, default=str))
        return EXIT_OK
    flow = history.flow_of(b) or history.flow_of(a)
    for line in format_diff(d, history.run(a), history.run(b), _names(flow)):
        print(line)
    return EXIT_OK


def format_diff(d: dict[str, Any], info_a: Any = None, info_b: Any = None,
                names: dict[str, str] | None = None) -> list[str]:
    """diff_runs() as aligned text: one row per difference, A and B in
    columns."""
    who = _who(names or {})
    lines = []
    for tag, info in (("A", info_a), ("B", info_b)):
        if info is not None:
            lines.append(f"{tag}  {info.id}  {info.flow}  {info.status}  "
                         f"{_when(info.started)}")
    from .cost import fmt_usd

    rows: list[tuple[str, ...]] = [("", "A", "B")]
    label = {"duration_ms": "duration", "cost_usd": "cost", "tool_cost_usd": "tool cost"}
    for r in d["summary"]:
        a, b = r.get("a", ABSENT), r.get("b", ABSENT)
        if r["field"] in ("tokens", "tool_cost_usd") and not a and not b:
            continue  # no LLM, no paid tool: nothing to say
        if r["field"] == "duration_ms":
            cells = (_duration(a), _duration(b))
        elif r["field"] in ("cost_usd", "tool_cost_usd"):
            cells = tuple(fmt_usd(v) if isinstance(v, (int, float)) else "—" for v in (a, b))
        else:
            cells = tuple("—" if v is ABSENT else f"{v:,}" if isinstance(v, int) else str(v)
                          for v in (a, b))
        rows.append((label.get(r["field"], r["field"]), *cells))
    sections = [
        ("flow", "flow (what was set differently)",
         lambda c: f"  {c['node']}  {c['path']}"),
        ("messages", "messages per node (in / out)", None),
        ("inputs", "node inputs (the last message each node got)",
         lambda c: f"  {who(c['node'])}  {c['path']}"),
        ("outputs", "node outputs (the last message each node sent)",
         lambda c: f"  {who(c['node'])}  {c['path']}"),
        ("debug", "debug output", lambda c: f"  {who(c['node'])} #{c['index'] + 1}  {c['path']}"),
        ("tool_calls", "tool calls", lambda c: f"  {c['tool']} #{c['index']}  {c['path']}"),
        ("answers", "answers", lambda c: f"  {who(c['agent'])} #{c['index'] + 1}"),
    ]
    for key, title, label in sections:
        if not d[key]:
            continue
        rows.append(("", "", ""))
        rows.append((title, "", ""))
        for c in d[key]:
            if key == "messages":
                rows.append((f"  {who(c['node'])}", f"{c['a']['in']} / {c['a']['out']}",
                             f"{c['b']['in']} / {c['b']['out']}"))
            elif c.get("path") == "(message)":
                rows.append((f"  {who(c['node'])}", "a message" if "a" in c else "—",
                             "a message" if "b" in c else "—"))
            else:
                rows.append((label(c), _cell(c.get("a", ABSENT)), _cell(c.get("b", ABSENT))))
    rows.append(("", "", ""))
    rows.append(("durations", "", ""))
    for c in d["durations"]:
        name = c["node"] if c["node"] == "(total)" else who(c["node"])
        rows.append((f"  {name}", _duration(c.get("a")), _duration(c.get("b"))))
    lines += [""] + _columns(rows)
    if d["same"]:
        lines.append("\nno differences in what the runs did (only in how long they took)")
    return lines


# -- rerun ---------------------------------------------------------------------------

@dataclass
class Rerun:
    """A rerun ready to go: the flow to run and how to start it. The CLI
    applies ``param_sets`` (``NODE.PARAM=VALUE``) as ``switchboard run``
    does, validates, builds the engine, calls ``prepare(engine)`` and runs
    it; ``report()`` then says what happened."""

    run_id: str
    flow: Any  # runtime.flow.Flow
    file: str
    from_node: str = ""
    call: dict[str, Any] | None = None
    messages: list[dict] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    args: Any = None
    base: dict[str, Any] = field(default_factory=dict)
    param_sets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine: Any = None
    outcome: Any = None  # the repeated call's ToolOutcome

    def prepare(self, engine: Any) -> None:
        self.engine = engine
        engine.rerun_of = self.run_id
        if self.call is not None:
            engine.rerun_call = self.call["caller_id"]
            engine.entry = self._repeat_call
        elif self.from_node:
            engine.from_node = self.from_node
            engine.entry = self._inject
            if self.variables:
                from .expressions import FLOW_VARIABLES
                from .message import deep_copy

                # Made before any node asks, so Set Variable and templates
                # find the values the original run ended with.
                engine.resource(FLOW_VARIABLES, lambda: deep_copy(self.variables))

    async def _inject(self, engine: Any) -> None:
        from .message import Message, deep_copy

        for msg in self.messages:
            engine.inject(self.from_node, Message(deep_copy(msg)))

    async def _repeat_call(self, engine: Any) -> None:
        from .tools import ToolBridge

        assert self.call is not None
        bridge = ToolBridge(engine, self.call["agent"])
        self.outcome = await bridge.call(self.base, "rerun", self.call["tool"], self.args,
                                         parent=self.call.get("parent", ""))

    def report(self, code: int) -> tuple[int, list[str], str]:
        """(exit code, lines for stderr, a JSON line for stdout or "")."""
        new = self.engine.run_id if self.engine is not None else "?"
        what = (f" from '{self.from_node}' ({len(self.messages)} message"
                f"{'s' if len(self.messages) != 1 else ''})" if self.from_node
                else f", call {self.call['caller_id']} ({self.call['tool']})" if self.call
                else "")
        lines = [f"run {new}: rerun of {self.run_id}{what}; compare them with "
                 f"`switchboard runs diff {self.run_id} {new}`"]
        if self.call is None:
            return code, lines, ""
        o = self.outcome
        if o is None:
            return (code or EXIT_FAILED), lines + ["the tool call did not run"], ""
        line = {"call": o.caller_id, "tool": o.tool, "status": o.status}
        if o.status == "success":
            line["data"] = o.data
        else:
            line["error"] = o.error
            lines.append(f"the tool call was {o.status}: {o.error}")
        text = json.dumps(line, ensure_ascii=False, default=str)
        if o.status == "refused":
            return EXIT_BAD_INPUT, lines, text
        if o.status != "success":
            return max(code, EXIT_FAILED), lines, text
        return code, lines, text


def plan_rerun(history: Any, ref: str, *, from_node: str | None = None,
               sets: list[str] | tuple[str, ...] = (), call: str | None = None,
               args_json: str | None = None, registry: Any = None) -> Rerun:
    """The rerun of run ``ref`` (see the module's docstring); RunsError for
    bad input, naming what and where."""
    from .message import set_path

    if call and from_node:
        raise RunsError("--from and --call do not go together: a tool call is rerun alone")
    if args_json is not None and not call:
        raise RunsError("--args goes with --call (the tool call whose arguments it edits)")
    run_id = resolve(history, ref)
    edits, param_sets = _split_sets(sets)
    if edits and not from_node:
        raise RunsError("--set msg.PATH=VALUE edits the messages of a rerun --from NODE; "
                        "give --from")
    info = history.run(run_id)
    f = facts(history.events(run_id))
    plan = Rerun(run_id=run_id, flow=_flow_for(history, run_id, info, f, registry),
                 file=info.path, param_sets=param_sets)
    plan.notes += _flow_notes(info, history.flow_of(run_id), registry)
    if from_node:
        plan.from_node = _pick_node(plan.flow, from_node, f, run_id)
        recorded = f.replay.inputs.get(plan.from_node, []) if f.replay is not None else []
        if not recorded:
            raise RunsError(_nothing_to_replay(plan.from_node, f, run_id))
        received = f.replay.received.get(plan.from_node, len(recorded))
        if received > len(recorded):
            plan.notes.append(f"'{plan.from_node}' got {received} messages in run {run_id}; "
                              f"the {len(recorded)} recorded ones are replayed")
        plan.messages = [json.loads(json.dumps(m)) for m in recorded]
        for path, value in edits:
            for msg in plan.messages:
                try:
                    set_path(msg, path, value)
                except ValueError as exc:
                    raise RunsError(f"--set msg.{path}: {exc}") from None
        plan.variables = dict(f.replay.variables or {})
    elif call:
        plan.call = _pick_call(f, call, run_id)
        plan.args = _call_args(plan.call, args_json)
        request = (f.replay.calls.get(plan.call["caller_id"]) if f.replay is not None else None)
        if request is None:
            plan.notes.append("the message the tool got was not recorded: its params that read "
                              "the message see an empty one")
        else:
            from .message import RESERVED_KEYS

            plan.base = {k: v for k, v in request.items() if k not in RESERVED_KEYS}
    return plan


def _split_sets(items: list[str] | tuple[str, ...]) -> tuple[list[tuple[str, Any]], list[str]]:
    """``msg.PATH=VALUE`` edits of the replayed messages, and the rest
    (``NODE.PARAM=VALUE``, for the CLI's apply_sets)."""
    edits, params = [], []
    for item in items:
        target, sep, raw = item.partition("=")
        if target.startswith("msg.") and sep:
            path = target[4:]
            if not path.strip():
                raise RunsError(f"--set {item!r}: expected msg.PATH=VALUE")
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
            edits.append((path, value))
        else:
            params.append(item)
    return edits, params


def _flow_for(history: Any, run_id: str, info: Any, f: RunFacts, registry: Any) -> Any:
    """The flow as the run ran it; the file, said so, where it was not kept."""
    from .flow import FlowError, load_flow, parse_flow

    stored = history.flow_of(run_id)
    try:
        if stored is not None:
            return parse_flow(stored, file=info.path)
        if not info.path:
            raise RunsError(f"run {run_id} kept no copy of its flow and had no file; it cannot be "
                            "rerun")
        return load_flow(info.path, registry, validate=False)
    except FlowError as exc:
        raise RunsError(f"the flow of run {run_id} does not load: "
                        + "; ".join(str(p) for p in exc.problems[:3])) from None
    except OSError as exc:
        raise RunsError(f"run {run_id} kept no copy of its flow, and its file {info.path} "
                        f"cannot be read ({exc.strerror or exc})") from None


def _flow_notes(info: Any, stored: dict | None, registry: Any) -> list[str]:
    """Whether the file changed since the run (the rerun runs the stored
    flow either way)."""
    from .engine import flow_hash
    from .flow import FlowError, load_flow

    if stored is None:
        return [f"run {info.id} kept no copy of its flow (it was cut off); running the file "
                f"{info.path} as it is now"] if info.path else []
    if not info.path:
        return []
    try:
        now = load_flow(info.path, registry, validate=False).to_json()
    except (FlowError, OSError):
        return [f"{info.path} cannot be loaded now; rerunning the flow as run {info.id} ran it"]
    from .message import to_jsonable
    from .node import redact

    if flow_hash(to_jsonable(now, text=redact)) != flow_hash(stored):
        return [f"{info.path} differs from the flow run {info.id} ran (edited since, or run "
                "with --set); rerunning the flow as it ran then"]
    return []


def _pick_node(flow: Any, wanted: str, f: RunFacts, run_id: str) -> str:
    """A node by id, or by its name where that is unique."""
    if flow.node(wanted) is not None:
        node_id = wanted
    else:
        named = [n.id for n in flow.nodes if (n.name or "").lower() == wanted.lower()]
        if len(named) != 1:
            ids = ", ".join(n.id for n in flow.nodes)
            raise RunsError(f"--from {wanted}: no node " + (
                f"'{wanted}' in the flow of run {run_id} (its nodes: {ids})" if not named
                else f"is named '{wanted}' alone ({', '.join(named)}); give its id"))
        node_id = named[0]
    if flow.node(node_id).disabled:
        raise RunsError(f"--from {node_id}: the node is disabled in the flow of run {run_id}")
    return node_id


def _nothing_to_replay(node_id: str, f: RunFacts, run_id: str) -> str:
    if f.replay is None:
        return (f"run {run_id} kept no messages to replay (it was cut off before its end, or "
                "ran before runs kept them); rerun all of it without --from")
    if any(c["node"] == node_id for c in f.calls):
        return (f"'{node_id}' ran only as a tool in run {run_id}: repeat one of its calls with "
                f"--call CALLER_ID (`switchboard runs show {run_id}` lists them)")
    nodes = ", ".join(f"{n} ({len(m)})" for n, m in f.replay.inputs.items()) or "none"
    return (f"'{node_id}' got no message in run {run_id}, so there is nothing to replay "
            f"(nodes with recorded messages: {nodes})")


def _pick_call(f: RunFacts, wanted: str, run_id: str) -> dict[str, Any]:
    found = [c for c in f.calls if c["caller_id"] == wanted] or \
        [c for c in f.calls if c["caller_id"].startswith(wanted)]
    if len(found) != 1:
        known = ", ".join(f"{c['caller_id']} ({c['tool']})" for c in f.calls[:10]) or "none"
        raise RunsError(f"--call {wanted}: " + (
            f"no tool call of run {run_id} has that caller id" if not found
            else f"{len(found)} calls start with it; give more of it") + f" (its calls: {known})")
    c = found[0]
    if not c["node"]:
        raise RunsError(f"--call {wanted}: {c['tool']} was answered by the agent itself, not by "
                        "a node; there is nothing to repeat")
    return c


def _call_args(c: dict[str, Any], args_json: str | None) -> Any:
    args = c["args"]
    if args_json is None:
        if not isinstance(args, dict):
            raise RunsError(f"--call {c['caller_id']}: its arguments were not recorded whole "
                            "(over the size bound, or not a JSON object); give them with --args")
        return dict(args)
    try:
        edited = json.loads(args_json)
    except ValueError as exc:
        raise RunsError(f"--args: not JSON ({exc})") from None
    if not isinstance(edited, dict):
        raise RunsError(f"--args: expected a JSON object, got {type(edited).__name__}")
    return {**(args if isinstance(args, dict) else {}), **edited}


# -- text ----------------------------------------------------------------------------

def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as left-aligned columns (the last one unpadded)."""
    if not rows:
        return []
    n = max(len(r) for r in rows)
    widths = [max((len(r[i]) for r in rows if i < len(r) and _counts(r, i)), default=0)
              for i in range(n)]
    out = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def _counts(row: tuple[str, ...], i: int) -> bool:
    """A section title (a row with text only in its first cell) does not
    widen the first column."""
    return not (i == 0 and len(row) > 1 and not any(row[1:]))


def _cell(value: Any) -> str:
    if value is ABSENT:
        return "—"
    return _cut(_text(value), CELL_CHARS)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


def _duration(ms: Any) -> str:
    if ms is None or ms is ABSENT:
        return "—"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def _cost_text(r: dict[str, Any]) -> str:
    from .cost import summary as cost_summary

    usage = {"input_tokens": r.get("tokens", 0)}
    return cost_summary(usage, r.get("cost_usd"), r.get("tool_cost_usd") or 0.0)


def _names(flow: dict | None) -> dict[str, str]:
    return {n.get("id", ""): n.get("name", "") for n in (flow or {}).get("nodes", [])
            if n.get("name")}


def _who(names: dict[str, str]) -> Callable[..., str]:
    def who(node_id: str, name: str = "") -> str:
        name = name or names.get(node_id, "")
        return f"'{name}' ({node_id})" if name and name != node_id else node_id

    return who

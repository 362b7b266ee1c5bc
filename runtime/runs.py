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
from typing import Any

from .rerun import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Rerun, RunsError, plan_rerun, resolve
from .rundiff import ABSENT, changes, diff_runs, facts, run_cost
from .text import printable

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "Rerun", "RunsError", "add_parser",
           "changes", "command", "diff_runs", "facts", "format_diff", "plan_rerun", "resolve",
           "summary"]

#: Runs ``runs list`` shows unless told otherwise.
LIST_LIMIT = 20
#: Characters of a value in a table cell, and in ``runs show``.
CELL_CHARS = 50
SHOW_CHARS = 300


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
    _history_option(ls)
    sh = rs.add_parser("show", help="one run: summary, debug output, tool calls, errors")
    sh.add_argument("id", help="a run id (any unique start of it) or 'last'")
    sh.add_argument("--json", action="store_true", help="everything, as one JSON object")
    _history_option(sh)
    df = rs.add_parser("diff", help="what differed between two runs: node inputs and outputs, "
                                    "tool calls, answers, durations, cost")
    df.add_argument("a", help="a run id (any unique start of it) or 'last'")
    df.add_argument("b", help="the run to compare it with")
    df.add_argument("--json", action="store_true", help="the differences as one JSON object")
    _history_option(df)
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
    _history_option(rr, "read the run from the history database PATH (e.g. the workers' "
                        "shared one); the rerun is recorded in this machine's")
    from .queue.command import add_cancel_parser

    add_cancel_parser(rs)


def _history_option(p: argparse.ArgumentParser, text: str = "") -> None:
    p.add_argument("--history", metavar="PATH",
                   help=text or "read the history database PATH instead of this machine's "
                                "(e.g. the workers' shared one: $SWITCHBOARD_SHARED_HISTORY)")


def open_history(args: argparse.Namespace) -> Any:
    """This machine's history, or the file ``--history`` names (which must
    exist: a typo must not make an empty history)."""
    from pathlib import Path

    from .history import History

    given = getattr(args, "history", None)
    if not given:
        return History()
    path = Path(given).expanduser()
    if not path.is_file():
        raise RunsError(f"--history {given}: no such history file")
    try:
        return History(path)
    except Exception as exc:  # noqa: BLE001 - not a database, no permission
        raise RunsError(f"--history {given}: cannot read it as a run history: {exc}") from None


def command(args: argparse.Namespace) -> int:
    """``runs list``, ``show`` and ``diff``: print, return the exit code."""
    with open_history(args) as history:
        if args.runs_command == "list":
            return _list(history, args)
        if args.runs_command == "show":
            return _show(history, args)
        return _diff(history, args)


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
                     **run_cost(fin), "rerun_of": getattr(started, "rerun_of", "") or "",
                     "from_node": getattr(started, "from_node", "") or "",
                     "call": getattr(started, "call", "") or "", "note": _origin(started),
                     "worker": getattr(started, "worker", "") or ""})
        if len(rows) >= args.limit:
            break
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        what = f" of a flow matching '{args.flow}'" if args.flow else ""
        print(f"no runs{what} in history ({history.path})", file=sys.stderr)
        return EXIT_OK
    # Runs from queue workers (a shared history, or followed here) name
    # the worker; a history of local runs only gets no empty column.
    workers = any(r["worker"] for r in rows)
    table = [("ID", "STARTED", "FLOW", "STATUS", "DURATION", "ERRORS", "COST",
              *(("WORKER",) if workers else ()), "")]
    for r in rows:
        table.append((r["id"], _when(r["started"]), _cut(r["flow"], 30), r["status"],
                      _duration(r["duration_ms"]), str(r["errors"]), _cost_text(r),
                      *((r["worker"] or "-",) if workers else ()), r["note"]))
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
        "errors": info.errors, **run_cost(fin), "usage": dict(fin.usage) if fin else {},
        "rerun_of": getattr(f.started, "rerun_of", ""), "from_node": getattr(f.started, "from_node", ""),
        "call": getattr(f.started, "call", ""), "worker": getattr(f.started, "worker", ""),
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
    print(f"run {run_id}  {printable(s['flow'])}")
    status = s["status"] + (f" ({s['reason']})" if s["reason"] else "")
    rows = [("file", s["path"] or "(not saved)"), ("started", _when(s["started"])),
            ("status", status + (f": {printable(s['message'])}" if s["message"] else "")),
            ("duration", _duration(s["duration_ms"])), ("errors", str(s["errors"])),
            ("cost", _cost_text(s) or "—")]
    origin = _origin(_Started(s))
    if origin:
        rows.append(("origin", origin))
    if s["worker"]:
        rows.append(("worker", s["worker"]))
    elif s["status"] == "queued":
        rows.append(("note", "queued on the workers and not followed here: its events are in "
                             "the workers' shared history (runs show ID --history PATH)"))
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
        print(f"  {who(e['node'], e['name'])}: {printable(e['message'])}"
              + ("  (caught)" if e["caught"] else ""))
    if s["replayable"]:
        parts = [f"{printable(n)} ({v['recorded']}" + (f" of {v['received']})" if v["received"] > v["recorded"]
                                            else ")") for n, v in s["replayable"].items()]
        print(f"\nrerun --from NODE can replay: {', '.join(parts)}")
    return EXIT_OK


class _Started:
    """A summary dict read as a run.started, for _origin."""

    def __init__(self, s: dict[str, Any]) -> None:
        self.rerun_of, self.from_node, self.call = s["rerun_of"], s["from_node"], s["call"]


# -- diff ----------------------------------------------------------------------------

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
         lambda c: f"  {c['node'] if c['node'].startswith('(') else who(c['node'])}  "
                   f"{c['path']}"),
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
    if d.get("not_rerun"):
        side = "B" if d["partial"] == "b" else "A"
        rows.append(("", "", ""))
        rows.append((f"not rerun in {side}: " + ", ".join(who(n) for n in d["not_rerun"]), "", ""))
    rows.append(("", "", ""))
    rows.append(("durations", "", ""))
    for c in d["durations"]:
        name = c["node"] if c["node"] == "(total)" else who(c["node"])
        rows.append((f"  {name}", _duration(c.get("a")), _duration(c.get("b"))))
    lines += [""] + _columns(rows)
    if d["same"]:
        lines.append("\nno differences in what the runs did (only in how long they took)")
    return lines


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
    text = printable(" ".join(text.split()) if "\n" in text else text)
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
        if name and name != node_id:
            return f"'{printable(name)}' ({printable(node_id)})"
        return printable(node_id)

    return who

"""``switchboard run`` (and ``runs rerun``, run the same way): a flow run
headless, its debug output as JSON lines on stdout, what happens on stderr;
``runs`` and the queue commands are handed to ``runtime.runs`` and
``runtime.queue``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from runtime.text import finite_or_none, printable

from .base import EXIT_BAD_INPUT, UsageError, _load, _unfinished, apply_sets, exit_code, log
from .guard import _recording, _RunGuard, _say_unasked

RUN_EPILOG = """exit codes:
  0    completed (or a long-running flow stopped by --timeout with nothing in flight)
  1    failed: an uncaught node error, or a bound such as the message-storm cap
  2    bad input: file, flow or usage
  124  stopped by --timeout with work unfinished
  130  interrupted by SIGINT (Ctrl+C)
  143  interrupted by SIGTERM

Every run ends with a run.finished event (reason: completed, failed, timeout,
interrupted; in_flight: what was still unfinished) and is recorded in the run
history, however it ends."""


def _add_run_options(r: argparse.ArgumentParser) -> None:
    """What ``run`` and ``runs rerun`` share: both are runs."""
    r.add_argument("--events", metavar="FILE", help="write every event as JSON lines to FILE")
    r.add_argument("--trace", action="store_true",
                   help="print every message hop to stderr (source -> target [port] and the "
                        "payload) and record it in --events and the run history")
    r.add_argument("--timeout", type=float, metavar="S", help="stop the run after S seconds")
    r.add_argument("--max-in-flight", type=int, metavar="N",
                   help="fail the run as a message storm past N messages in flight "
                        "(default: the flow's setting, else 100000)")
    r.add_argument("--no-history", action="store_true", help="do not record the run in history")
    r.add_argument("--approve", default="ask", metavar="ask|auto|deny|POLICY.json",
                   help="who decides on tool calls that need approval: ask on the terminal "
                        "(the default; refused when there is none), approve all, deny all, "
                        "or the rules of a policy file (its format: docs/tools.md, 'Approval "
                        "policy files'; check one with validate FLOW --approve POLICY.json)")
    from runtime.break_prompt import add_break_options

    add_break_options(r)


def _run(args: argparse.Namespace) -> int:
    approver = _run_options(args)
    flow = _load(args.flow, validate=False)
    return _run_flow(flow, args.flow, args.set, args, approver)


def _run_options(args: argparse.Namespace):
    """Check the options every run has; the approver they name."""
    from runtime.approval import approver_for

    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be more than 0 seconds")
    if args.max_in_flight is not None and args.max_in_flight < 1:
        raise UsageError(f"--max-in-flight {args.max_in_flight}: must be at least 1")
    try:
        return approver_for(args.approve)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run_flow(flow, file: str, sets: list[str], args: argparse.Namespace, approver,
              prepare=None) -> int:
    """Run ``flow`` headless as ``switchboard run`` does (debug lines on
    stdout, history, signals, exit code); ``prepare(engine)`` may set the
    engine up first (a rerun's entry)."""
    from runtime.approval import People
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import FlowError, validate_flow

    apply_sets(flow, sets, file)
    problems = validate_flow(flow, file=file)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        for problem in errors:
            print(str(problem), file=sys.stderr)
        return EXIT_BAD_INPUT
    for problem in problems:
        log.info("%s", problem)
    attach_breaks = None
    if getattr(args, "breaks", None):  # checked, and a terminal found, before anything runs
        from runtime.break_prompt import prepare_breaks

        try:
            attach_breaks = prepare_breaks(args.breaks, flow)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    bus = EventBus()
    out = sys.stdout
    names = _node_names(flow)
    catchers = _catchers(flow, names)
    tool_agents = _tool_agents(flow, names)
    calls: dict[str, int] = {}  # tool calls going on, per tool node
    handled = 0

    def who(node_id: str, name: str = "") -> str:
        """A node as the designer shows it, with its id for grep and --set;
        control characters in either are shown escaped."""
        name = name or names.get(node_id, "")
        if name and name != node_id:
            return f"'{printable(name)}' ({printable(node_id)})"
        return f"'{printable(node_id)}'"

    def print_debug(event) -> None:
        nonlocal handled
        if event.type == "debug":
            out.write(debug_line(event.node, event.name, event.value) + "\n")
            out.flush()
        elif event.type == "node.error":
            if event.caught:
                # The flow handled it (a Catch node took the message): not a
                # failure of the run, so not printed as one.
                handled += 1
                if calls.get(event.node):  # a tool call's: its agent got the error
                    agents = tool_agents.get(event.node) or ["its agent"]
                    how = f"{' or '.join(agents)} got it as the tool's result"
                else:
                    how = f"caught by {', '.join(catchers.get(event.node) or ['the flow'])}"
                print(f"handled: node {who(event.node, event.name)} failed: "
                      f"{printable(event.message)} ({how})", file=sys.stderr)
            else:
                print(f"error: node {who(event.node, event.name)}: {printable(event.message)}",
                      file=sys.stderr)
        elif event.type == "tool.call":
            calls[event.node] = calls.get(event.node, 0) + 1
        elif event.type == "tool.result" and calls.get(event.node):
            calls[event.node] -= 1
        elif event.type == "message.sent":
            print(f"trace: '{printable(names.get(event.source, event.source))}' -> "
                  f"'{printable(names.get(event.target, event.target))}' "
                  f"[{printable(event.port)}] {printable(_preview(event.msg))}", file=sys.stderr)
        elif event.type == "log" and event.level != "debug":
            # What a node tells its user: where a webhook listens, a
            # script's prints, messages a rate limit dropped. Each line of
            # a text is printed with the node's name before it, so that no
            # line of it can pass for a line of Switchboard's own.
            prefix = f"{'' if event.level == 'info' else event.level + ': '}node {who(event.node)}: "
            for line in str(event.text).split("\n"):
                print(prefix + printable(line), file=sys.stderr)

    bus.subscribe(print_debug)
    writer, recorder = _recording(bus, args)
    try:
        # record: the last messages of each node go to history with the run
        # (what `runs diff` compares), as in the designer.
        use_pins = getattr(args, "use_pins", False)
        engine = Engine(flow, bus=bus, trace=args.trace, record=True, file=file,
                        max_in_flight=args.max_in_flight, validated=True, use_pins=use_pins)
        if engine.expansion is not None:
            # Nodes inside subflow instances (path ids) and the Catch nodes
            # there: who catches what is the flat flow's.
            catchers.clear()
            catchers.update(_catchers(engine.flow, names))
            tool_agents.update(_tool_agents(engine.flow, names))
        _say_pins(flow, use_pins, names, offer=hasattr(args, "use_pins"))
        engine.people = People(approver)  # type: ignore[attr-defined]
        if prepare is not None:
            prepare(engine)
        if attach_breaks is not None:
            attach_breaks(engine, names)
    except FlowError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return EXIT_BAD_INPUT
    guard = _RunGuard(engine, writer, recorder)
    result = guard.run_to_end(guard.run(args.timeout))
    if result.message:
        print(f"switchboard: {printable(result.message)}", file=sys.stderr)
    elif handled and result.reason == "completed":
        print(f"switchboard: completed; {handled} node error{'s were' if handled > 1 else ' was'} "
              "handled by the flow", file=sys.stderr)
    elif result.reason == "timeout":
        print(f"switchboard: stopped after {args.timeout:g} s" + _unfinished(result.in_flight),
              file=sys.stderr)
    _say_unasked(approver)
    return exit_code(result.reason, result.in_flight, result.errors, guard.signal)


def _runs(args: argparse.Namespace) -> int:
    """``switchboard runs ...`` (runtime.runs); a rerun is run like ``run``."""
    from runtime import runs

    try:
        if args.runs_command == "cancel":
            return _queue(args)
        if args.runs_command != "rerun":
            return runs.command(args)
        approver = _run_options(args)
        with runs.open_history(args) as history:
            plan = runs.plan_rerun(history, args.id, from_node=args.from_node, sets=args.set,
                                   call=args.call, args_json=args.args)
            if getattr(args, "history", None):  # a shared history: the rerun lands here
                plan.source = str(history.path)
    except runs.RunsError as exc:
        raise UsageError(str(exc)) from None
    for note in plan.notes:
        print(f"switchboard: note: {note}", file=sys.stderr)
    code = _run_flow(plan.flow, plan.file, plan.param_sets, args, approver, plan.prepare)
    if plan.engine is None:
        return code  # the flow did not validate: said so already
    code, lines, out = plan.report(code, recorded=not args.no_history)
    if out:
        print(out, flush=True)
    for line in lines:
        print(f"switchboard: {line}", file=sys.stderr)
    return code


def _queue(args: argparse.Namespace) -> int:
    """Queue mode (runtime.queue): worker, submit, serve, queue, runs cancel."""
    from runtime.queue import command

    return command.main(args, command.Helpers(_load, apply_sets, exit_code, UsageError))


def _say_pins(flow, used: bool, names: dict[str, str], *, offer: bool) -> None:
    """On stderr: which pinned nodes this run uses, or that it ignores them
    (and, with ``offer``, how not to)."""
    from runtime.pins import pinned_nodes

    pinned = pinned_nodes(flow)
    if not pinned:
        return
    n = len(pinned)
    which = ", ".join(f"'{names.get(i, i)}'" for i in pinned[:10]) + (" ..." if n > 10 else "")
    if used:
        print(f"switchboard: using pinned data of {n} node{'s' * (n != 1)} (not run): {which}",
              file=sys.stderr)
    else:
        print(f"switchboard: ignoring the pinned data of {n} node{'s' * (n != 1)} ({which}); "
              "they run" + (" (--use-pins uses it)" if offer else ""), file=sys.stderr)


def debug_line(node: str, name: str, value: Any) -> str:
    """A debug event as one line of ``switchboard run``'s JSON-lines
    output. JSON has no NaN or Infinity: a value holding one (a script
    computed it) is written with null in its place, as JavaScript's
    JSON.stringify does, so that every line parses as JSON."""
    record = {"node": node, "name": name, "value": value}
    try:
        return json.dumps(record, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        record["value"] = finite_or_none(value)
        return json.dumps(record, ensure_ascii=False, default=str, allow_nan=False)


def _node_names(flow) -> dict[str, str]:
    """Each node's name as the designer shows it: its own, else its type's."""
    from runtime.registry import Registry

    registry = Registry.default()
    names = {}
    for fnode in flow.nodes:
        spec = registry.spec(fnode.type)
        names[fnode.id] = fnode.name or (spec.name if spec else fnode.id)
    return names


def _catchers(flow, names: dict[str, str]) -> dict[str, list[str]]:
    """For each node a Catch node watches: the Catch nodes' names, quoted
    (the engine's rule: a Catch with no list watches every other node)."""
    catches = [n for n in flow.nodes if n.type == "core.catch" and not n.disabled]
    out: dict[str, list[str]] = {}
    for fnode in flow.nodes:
        for catch in catches:
            setting = catch.params.get("nodes")
            watched = setting.value if setting is not None and setting.value else []
            if catch.id != fnode.id and (not watched or fnode.id in watched):
                out.setdefault(fnode.id, []).append(f"'{names.get(catch.id, catch.id)}'")
    return out


def _tool_agents(flow, names: dict[str, str]) -> dict[str, list[str]]:
    """For each tool node: the agents whose tools port it is wired to, quoted."""
    out: dict[str, list[str]] = {}
    for wire in flow.wires:
        if wire.source[1] == "tools":
            agent = wire.source[0]
            out.setdefault(wire.target[0], []).append(f"agent '{names.get(agent, agent)}'")
    return out


#: How much of a message a trace line shows.
TRACE_PREVIEW_CHARS = 100


def _preview(msg: Any) -> str:
    """A message in one short line: its payload, and its topic if it has one."""
    if not isinstance(msg, dict):
        return ""
    parts = []
    for key in ("topic", "payload"):
        if key in msg and msg[key] not in (None, ""):
            value = json.dumps(msg[key], ensure_ascii=False, default=str)
            parts.append(f"{key}={value}")
    text = " ".join(parts) or "(no payload)"
    return text if len(text) <= TRACE_PREVIEW_CHARS else text[:TRACE_PREVIEW_CHARS - 1] + "…"

"""``switchboard``: run, validate and inspect flows headless; open the designer.

Exit codes: 0 completed (or a long-running flow stopped by its timeout with
nothing in flight), 1 the flow failed (an uncaught node error, or a bound
such as the message-storm cap), 2 bad input (file, flow, usage), 124 stopped
by ``--timeout`` with work unfinished, 130 SIGINT, 143 SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from runtime.text import NotFiniteError, finite_loads, finite_or_none, printable

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_TIMEOUT, EXIT_SIGINT, EXIT_SIGTERM = 124, 130, 143
#: After a signal or past the deadline, how long the run gets to wind down
#: before the process ends anyway (a node stuck in inline work).
HARD_STOP_GRACE = 1.5

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

log = logging.getLogger("switchboard")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as everywhere else
        self.print_usage(sys.stderr)
        print(f"switchboard: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="switchboard", description="Design and run flows of RPA nodes and AI agents.")
    p.add_argument("-v", "--verbose", action="store_true", help="log details (and tracebacks) to stderr")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    d = sub.add_parser("design", help="open the designer on a flow")
    d.add_argument("flow", nargs="?", help="a .flow.json file")
    d.add_argument("--screenshot", metavar="PNG", help="render the window to PNG and exit")
    d.add_argument("--size", default="1440x900", help="window size for --screenshot (WxH)")
    d.add_argument("--theme", choices=["light", "dark", "system"], default="system")

    r = sub.add_parser("run", help="run a flow headless; debug output as JSON lines",
                       epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("flow")
    r.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override a param with a fixed value (JSON if it parses, else text)")
    r.add_argument("--use-pins", action="store_true",
                   help="pinned nodes send their pinned data instead of running "
                        "(without it, pins are ignored and every node runs)")
    _add_run_options(r)

    v = sub.add_parser("validate", help="check a flow; exit 2 with the reasons")
    v.add_argument("flow")
    v.add_argument("--approve", metavar="POLICY.json",
                   help="also check an approval policy file (--approve of run), and its rules "
                        "against the flow's tools")

    n = sub.add_parser("nodes", help="the node catalog")
    n.add_argument("--json", action="store_true", help="full specs as JSON")

    t = sub.add_parser("tools", help="per agent: the tools and JSON schemas its LLM sees")
    t.add_argument("flow")

    _add_mcp_parser(sub)
    from runtime.runs import add_parser as add_runs_parser

    add_runs_parser(sub, _Parser, _add_run_options)
    from runtime.queue.command import add_parsers as add_queue_parsers

    add_queue_parsers(sub, _Parser)

    pk = sub.add_parser("package", help="make, install and list node packages (plugins)")
    pks = pk.add_subparsers(dest="package_command", required=True, parser_class=_Parser)
    pn = pks.add_parser("new", help="write a working node package with one example node")
    pn.add_argument("name", help="package name: lower case letters, digits, - or _")
    pn.add_argument("--lang", choices=["python", "node"], default="python")
    pn.add_argument("--dir", default=".", help="where to create the package's folder")
    pi = pks.add_parser("install", help="install a package folder into the plugins folder")
    pi.add_argument("path", help="a folder with a plugin.json")
    pi.add_argument("--force", action="store_true", help="replace an installed package")
    pks.add_parser("list", help="the plugin packages found, and their state")

    c = sub.add_parser("credentials", help="store API keys and passwords that flows name "
                                           "(the system keyring, or an encrypted file)")
    cs = c.add_subparsers(dest="credentials_command", required=True, parser_class=_Parser)
    cs.add_parser("list", help="the stored names (never the secrets) and where they are")
    cset = cs.add_parser("set", help="store a secret under NAME, read from the terminal "
                                     "without echo, or from standard input")
    cset.add_argument("name")
    cdel = cs.add_parser("delete", help="remove the entry NAME")
    cdel.add_argument("name")
    ct = cs.add_parser("test", help="list the models of an OpenAI-compatible server")
    ct.add_argument("base_url", help="e.g. http://127.0.0.1:11434/v1")
    ct.add_argument("--key", metavar="NAME", help="the stored credential to send as API key")
    return p


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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from runtime.node import RedactingFilter  # secrets a library logs (-v), masked

    for log_handler in logging.getLogger().handlers:
        log_handler.addFilter(RedactingFilter())
    try:
        if args.command is None or args.command == "design":
            return _design(args)
        handler = {"run": _run, "validate": _validate, "nodes": _nodes, "tools": _tools,
                   "package": _package, "credentials": _credentials, "mcp": _mcp,
                   "runs": _runs, "worker": _queue, "submit": _queue, "serve": _queue,
                   "queue": _queue}[args.command]
        return handler(args)
    except UsageError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_SIGINT
    except BrokenPipeError:
        # The reader went away (`switchboard nodes | head`): stop quietly, and
        # keep the interpreter's final flush from failing on the same pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # never a traceback on a user's terminal
        log.debug("unexpected error", exc_info=True)
        print(f"switchboard: internal error: {printable(exc)} (run with -v for details)",
              file=sys.stderr)
        return EXIT_FAILED


def _load(path: str, *, validate: bool = True):
    from runtime.flow import FlowError, load_flow

    try:
        return load_flow(path, validate=validate)
    except FlowError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None


def parse_set(item: str) -> tuple[str, str, Any]:
    target, sep, raw = item.partition("=")
    node_id, dot, param = target.rpartition(".")
    if not sep or not dot or not node_id or not param:
        raise UsageError(f"--set {item!r}: expected NODE.PARAM=VALUE")
    try:
        value = finite_loads(raw)
    except NotFiniteError as exc:
        raise UsageError(f"--set {item!r}: {exc}; JSON has no NaN or Infinity") from None
    except ValueError:
        value = raw
    return node_id, param, value


def apply_sets(flow, sets: list[str], file: str) -> None:
    from runtime.registry import Registry
    from runtime.spec import ParamType, ParamValue, Scope

    registry = Registry.default()
    for item in sets:
        node_id, param, value = parse_set(item)
        fnode = flow.node(node_id)
        if fnode is None:
            raise UsageError(f"--set {item!r}: no node '{node_id}' in {file}")
        spec = registry.spec(fnode.type)
        pspec = spec.param(param) if spec else None
        if pspec is None:
            raise UsageError(f"--set {item!r}: node '{node_id}' ({fnode.type}) has no param '{param}'")
        if not pspec.allows(Scope.CUSTOM):
            raise UsageError(f"--set {item!r}: param '{param}' cannot take a fixed value")
        if pspec.type in (ParamType.STR, ParamType.ENUM) and not isinstance(value, str):
            value = raw_text(item)
        fnode.params[param] = ParamValue(scope=Scope.CUSTOM, value=value)


def raw_text(item: str) -> str:
    return item.partition("=")[2]


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


def _say_unasked(approver) -> None:
    """Once per run: calls that needed approval had no terminal to ask on,
    and how to decide without one."""
    from runtime.approval import no_terminal_note

    note = no_terminal_note(approver)
    if note:
        print(f"switchboard: {note}", file=sys.stderr)


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


def exit_code(reason: str, in_flight: dict[str, int], errors: int, signum: int | None) -> int:
    """The exit code of a run that ended for ``reason`` (see RUN_EPILOG)."""
    if reason == "interrupted":
        return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
    if reason == "timeout":
        if in_flight:
            return EXIT_TIMEOUT
        return EXIT_FAILED if errors else EXIT_OK
    return EXIT_FAILED if reason == "failed" else EXIT_OK


def _unfinished(in_flight: dict[str, int]) -> str:
    if not in_flight:
        return " (nothing was in flight)"
    parts = [f"{node} ({n})" for node, n in sorted(in_flight.items())[:5]]
    more = f" and {len(in_flight) - 5} more" if len(in_flight) > 5 else ""
    return "; unfinished: " + ", ".join(parts) + more


def _recording(bus, args):
    """The run's ``--events`` file writer and history recorder (either may
    be None), both subscribed to ``bus``."""
    from runtime.events import JsonlWriter

    writer = None
    if args.events:
        try:
            writer = JsonlWriter(args.events)
        except OSError as exc:
            raise UsageError(f"--events {args.events}: {exc.strerror}") from None
        bus.subscribe(writer)
    return writer, (None if args.no_history else _history_recorder(bus))


def _history_recorder(bus):
    """A recorder of this run in the history database (flushed at every
    stats tick, so a killed run keeps what it did), or None if the history
    cannot be opened: a run must not fail for want of its record."""
    from runtime.history import History

    try:
        recorder = History().recorder()
    except Exception as exc:  # noqa: BLE001 - sqlite, permissions, a full disk
        log.warning("run history unavailable: %s", exc)
        return None
    bus.subscribe(recorder)

    def flush_on_stats(event) -> None:
        if event.type == "stats":
            recorder.flush()

    bus.subscribe(flush_on_stats)
    return recorder


def _close_recorder(recorder) -> None:
    try:
        recorder.close()
        recorder.history.prune()
        recorder.history.close()
    except Exception as exc:  # noqa: BLE001
        log.warning("could not store the run in history: %s", exc)


class _RunGuard:
    """Ends a headless run on time, whatever it does.

    SIGINT and SIGTERM stop the engine (the run winds down and writes its
    run.finished). The handlers are Python-level, so they run even while a
    node keeps the event loop busy; if the run has not ended ``HARD_STOP_GRACE``
    seconds after a signal or after its deadline (a node stuck in inline
    work), a watchdog thread writes run.finished itself, flushes the events
    file and the history, and ends the process with the run's exit code."""

    def __init__(self, engine, writer, recorder) -> None:
        self.engine = engine
        self.writer = writer
        self.recorder = recorder
        self.signal: int | None = None
        self._timer = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}
        self._finished = False

    async def run(self, timeout: float | None):
        self._loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)
        if timeout is not None:
            self._arm(timeout + HARD_STOP_GRACE, "timeout")
        try:
            return await self.engine.run(timeout)
        finally:
            self._finished = True

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal is not None:
            return  # a second Ctrl+C while winding down: the watchdog is armed
        self.signal = signum
        name = signal.Signals(signum).name
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.engine.stop, f"interrupted by {name}")
        self._arm(HARD_STOP_GRACE, "interrupted", f"interrupted by {name}")

    def _arm(self, delay: float, reason: str, message: str = "") -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(delay, self._hard_stop, (reason, message))
        self._timer.daemon = True
        self._timer.start()

    def run_to_end(self, main: Any) -> Any:
        """``asyncio.run(main)`` (a coroutine awaiting ``self.run``), then,
        however it ended, the guard off and the events file and the history
        closed."""
        try:
            return asyncio.run(main)
        finally:
            self.disarm()
            if self.writer:
                self.writer.close()
            if self.recorder is not None:
                _close_recorder(self.recorder)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _hard_stop(self, reason: str, message: str) -> None:
        from runtime.engine import STATUS_OF_REASON
        from runtime.events import RunFinished

        if self._finished:
            return
        engine = self.engine
        in_flight = engine.in_flight()
        stuck = _busy_node(engine)
        if stuck:
            in_flight[stuck] = in_flight.get(stuck, 0) + 1
        message = message or ("the run did not stop on time: "
                              f"{f'node {stuck!r}' if stuck else 'a node'} kept the event loop busy")
        event = RunFinished(status=STATUS_OF_REASON[reason], reason=reason,  # type: ignore[arg-type]
                            message=message, in_flight=in_flight, errors=engine.uncaught,
                            run_id=engine.run_id, duration_ms=engine.elapsed_ms())
        try:
            if self.writer is not None:
                self.writer.write_last(event)
            if self.recorder is not None:
                self.recorder.close_from_thread(event)
        except Exception:  # noqa: BLE001 - the process ends either way
            log.debug("could not record the hard stop", exc_info=True)
        finally:
            print(f"switchboard: {message}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(exit_code(reason, in_flight, engine.uncaught, self.signal))


def _busy_node(engine) -> str | None:
    """The node whose code the main thread is running now, if any: what a
    stuck run is stuck in."""
    from runtime.engine import busy_node

    return busy_node(engine, threading.main_thread().ident)


def _validate(args: argparse.Namespace) -> int:
    from runtime.flow import validate_flow

    flow = _load(args.flow)
    for problem in validate_flow(flow, file=args.flow):
        print(str(problem), file=sys.stderr)
    print(f"{args.flow}: ok ({len(flow.nodes)} nodes, {len(flow.wires)} wires)")
    if args.approve:
        return _validate_policy(args.approve, flow)
    return EXIT_OK


def _validate_policy(path: str, flow) -> int:
    """``validate FLOW --approve POLICY.json``: the policy file's problems,
    and what in it the flow's tools cannot match (warnings)."""
    from runtime.approval import policy_warnings, read_policy
    from runtime.node import NodeConfigError
    from runtime.tools import agent_tool_specs

    policy, problems = read_policy(path)
    if policy is not None:
        try:
            tools = {f["function"]["name"]: f["function"].get("parameters") or {}
                     for functions in agent_tool_specs(flow).values() for f in functions}
        except NodeConfigError:
            tools = None  # an MCP server's list the flow's checks could not see: not judged
        if tools is not None:
            problems += policy_warnings(policy, path, tools)
    for problem in problems:
        print(str(problem), file=sys.stderr)
    if policy is None or any(p.severity == "error" for p in problems):
        return EXIT_BAD_INPUT
    n = len(policy.rules)
    print(f"{path}: ok ({n} rule{'s' * (n != 1)}, default {policy.default})")
    return EXIT_OK


def _nodes(args: argparse.Namespace) -> int:
    from runtime.registry import Registry

    registry = Registry.default()
    specs = registry.specs()
    if args.json:
        print(json.dumps([s.model_dump(mode="json") for s in specs], indent=2))
    else:
        width = max((len(s.type) for s in specs), default=10)
        for s in specs:
            tool = f"  [tool: {s.tool.name}]" if s.tool else ""
            plugin = f"  [plugin: {s.plugin}]" if s.plugin else ""
            summary = " ".join(s.description.split("\n\n")[0].split())
            print(f"{s.type:<{width}}  {s.name} - {summary}{tool}{plugin}")
    for err in registry.load_errors:
        print(f"warning: {err}", file=sys.stderr)
    return EXIT_OK


def _package(args: argparse.Namespace) -> int:
    from runtime.plugin import scaffold

    try:
        if args.package_command == "new":
            folder = scaffold.new_package(args.name, args.lang, Path(args.dir))
            print(f"wrote {folder}")
            for line in scaffold.next_steps(folder, args.lang):
                print(f"  {line}")
        elif args.package_command == "install":
            target = scaffold.install(Path(args.path), force=args.force)
            print(f"installed {target}")
        else:
            for line in scaffold.list_packages():
                print(line)
    except scaffold.PackageError as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def _credentials(args: argparse.Namespace) -> int:
    from runtime import credentials

    try:
        if args.credentials_command == "list":
            for name in credentials.list_names():
                print(name)
            print(credentials.backend_note(), file=sys.stderr)
        elif args.credentials_command == "set":
            credentials.check_name(args.name)
            if sys.stdin.isatty():
                import getpass

                secret = getpass.getpass(f"secret for {args.name}: ")
            else:  # piped: the first line, so that `echo KEY | ...` stores KEY
                secret = sys.stdin.readline().rstrip("\r\n")
            credentials.set(args.name, secret)
            print(f"stored {args.name}; a flow names it as "
                  f"{json.dumps(credentials.reference(args.name))}")
        elif args.credentials_command == "delete":
            if not credentials.delete(args.name):
                raise UsageError(f"no credential named '{args.name}'")
            print(f"deleted {args.name}")
        else:
            key = None
            if args.key:
                key = credentials.get(args.key)
                if key is None:
                    raise UsageError(f"--key {args.key}: no credential named '{args.key}'")
            for model in credentials.list_models(args.base_url, key):
                print(model)
    except credentials.CredentialError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _tools(args: argparse.Namespace) -> int:
    from runtime.node import NodeConfigError
    from runtime.tools import agent_tool_specs

    flow = _load(args.flow)
    try:
        specs = agent_tool_specs(flow)
    except NodeConfigError as exc:  # a tool the flow's checks could not see (an MCP server's)
        raise UsageError(f"{args.flow}: {exc}") from None
    print(json.dumps(specs, indent=2, ensure_ascii=False))
    return EXIT_OK


MCP_EPILOG = """The calls run exactly as the agent's would: the same schemas (only the params
the designer gave to AI), validation, approval and limits, with the run's events
and history. The flow's sources stay quiet: serving does not also run the flow.
stdio (the default) is for a client that starts this command; stdout is then
the MCP channel and everything else goes to stderr. With --http the run ends on
SIGINT or SIGTERM (exit 130 or 143); over stdio when the client closes it (0)."""


def _add_mcp_parser(sub: Any) -> None:
    m = sub.add_parser("mcp", help="serve a flow's tools to MCP clients")
    ms = m.add_subparsers(dest="mcp_command", required=True, parser_class=_Parser)
    s = ms.add_parser("serve", help="serve one agent's tools over MCP (stdio, or streamable "
                      "HTTP with --http)", epilog=MCP_EPILOG,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("flow")
    s.add_argument("--agent", metavar="ID",
                   help="the agent whose tools are served (default: the flow's only agent)")
    s.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    s.add_argument("--token", help="the bearer token --http requires (default: "
                   "$SWITCHBOARD_MCP_TOKEN, else a new one, printed to stderr)")
    s.add_argument("--approve", default="ask", metavar="ask|auto|deny|POLICY.json",
                   help="who decides on calls that need approval, as for run (default: ask "
                        "on the terminal; refused when there is none)")
    s.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override a param with a fixed value, as for run")
    s.add_argument("--events", metavar="FILE", help="write every event as JSON lines to FILE")
    s.add_argument("--no-history", action="store_true", help="do not record the run in history")


def _mcp(args: argparse.Namespace) -> int:
    """``switchboard mcp serve``: a run of the flow that serves one agent's
    tools (runtime.mcp_serve), ended, recorded and signalled like ``run``."""
    from runtime import mcp_serve
    from runtime.approval import People, approver_for
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import validate_flow
    from runtime.registry import Registry

    try:
        approver = approver_for(args.approve)
        if args.token is not None and not args.http:
            raise mcp_serve.ServeError("--token goes with --http (stdio needs no token)")
        address = mcp_serve.parse_address(args.http) if args.http else None
        token, made = mcp_serve.choose_token(args.token) if args.http else ("", False)
    except (ValueError, mcp_serve.ServeError) as exc:
        raise UsageError(str(exc)) from None
    flow = _load(args.flow, validate=False)
    apply_sets(flow, args.set, args.flow)
    errors = [p for p in validate_flow(flow, file=args.flow) if p.severity == "error"]
    for problem in errors:
        print(str(problem), file=sys.stderr)
    if errors:
        return EXIT_BAD_INPUT
    registry = Registry.default()
    try:
        agent_id = mcp_serve.choose_agent(flow, args.agent, registry, args.flow)
        sock = mcp_serve.listen(*address) if address else None
    except mcp_serve.ServeError as exc:
        raise UsageError(str(exc)) from None

    bus = EventBus()

    def report(event) -> None:
        line = mcp_serve.report_line(event)
        if line:  # one line: a node id or a tool's error may hold control characters
            print(printable(line), file=sys.stderr, flush=True)

    bus.subscribe(report)
    writer, recorder = _recording(bus, args)
    engine = Engine(mcp_serve.quiet_flow(flow, registry), registry, bus, file=args.flow,
                    validated=True)
    engine.people = People(approver)  # type: ignore[attr-defined]
    tools = mcp_serve.ToolServer(engine, agent_id)
    if sock is not None:
        endpoint = mcp_serve.HttpEndpoint(tools, sock, token)
        serve, stop = endpoint.serve, endpoint.stop
        print(f"serving the tools of '{agent_id}' over MCP at {endpoint.url}", file=sys.stderr)
        print(f"token: {token}" if made else "token: as given", file=sys.stderr, flush=True)
    else:
        def serve():
            return mcp_serve.serve_stdio(tools)
        stop = None
        if sys.stdin.isatty():
            print(f"serving the tools of '{agent_id}' over MCP on stdio (an MCP client "
                  "starts this command; Ctrl+C to stop)", file=sys.stderr, flush=True)
    guard = _RunGuard(engine, writer, recorder)
    result = guard.run_to_end(mcp_serve.serve_run(tools, guard.run(None), serve, stop))
    if result.message:
        print(f"switchboard: {result.message}", file=sys.stderr)
    _say_unasked(approver)
    return exit_code(result.reason, result.in_flight, result.errors, guard.signal)


def _design(args: argparse.Namespace) -> int:
    # The one place the headless runtime hands over to the GUI. It names the
    # designer at run time instead of importing it, so that no runtime module
    # depends on designer/Qt (the import-linter contract) and `switchboard
    # run` works where PySide6 is not installed.
    import importlib

    try:
        run_designer = importlib.import_module("designer.app").run_designer
    except ImportError as exc:
        if args.command is None:
            build_parser().print_help()
            return EXIT_OK
        raise UsageError(f"the designer is not available: {exc}") from None
    return run_designer(args)


"""``switchboard``: run, validate and inspect flows headless; open the designer.

Exit codes: 0 ran, 1 the flow had an uncaught node error, 2 bad input."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

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

    r = sub.add_parser("run", help="run a flow headless; debug output as JSON lines")
    r.add_argument("flow")
    r.add_argument("--events", metavar="FILE", help="write every event as JSON lines to FILE")
    r.add_argument("--trace", action="store_true", help="also record every message hop")
    r.add_argument("--timeout", type=float, metavar="S", help="stop the run after S seconds")
    r.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override a param with a fixed value (JSON if it parses, else text)")

    v = sub.add_parser("validate", help="check a flow; exit 2 with the reasons")
    v.add_argument("flow")

    n = sub.add_parser("nodes", help="the node catalog")
    n.add_argument("--json", action="store_true", help="full specs as JSON")

    t = sub.add_parser("tools", help="per agent: the tools and JSON schemas its LLM sees")
    t.add_argument("flow")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command is None or args.command == "design":
            return _design(args)
        handler = {"run": _run, "validate": _validate, "nodes": _nodes, "tools": _tools}[args.command]
        return handler(args)
    except UsageError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as exc:  # never a traceback on a user's terminal
        log.debug("unexpected error", exc_info=True)
        print(f"switchboard: internal error: {exc} (run with -v for details)", file=sys.stderr)
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
        value = json.loads(raw)
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
    from runtime.engine import Engine
    from runtime.events import EventBus, JsonlWriter
    from runtime.flow import FlowError, validate_flow

    flow = _load(args.flow, validate=False)
    apply_sets(flow, args.set, args.flow)
    problems = validate_flow(flow, file=args.flow)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        for problem in errors:
            print(str(problem), file=sys.stderr)
        return EXIT_BAD_INPUT
    for problem in problems:
        log.info("%s", problem)

    bus = EventBus()
    out = sys.stdout

    def print_debug(event) -> None:
        if event.type == "debug":
            out.write(json.dumps({"node": event.node, "name": event.name, "value": event.value},
                                 ensure_ascii=False, default=str) + "\n")
            out.flush()
        elif event.type == "node.error":
            print(f"error: node '{event.node}': {event.message}", file=sys.stderr)

    bus.subscribe(print_debug)
    writer = None
    if args.events:
        try:
            writer = JsonlWriter(args.events)
        except OSError as exc:
            raise UsageError(f"--events {args.events}: {exc.strerror}") from None
        bus.subscribe(writer)
    try:
        engine = Engine(flow, bus=bus, trace=args.trace, record=bool(args.trace), file=args.flow)
        result = asyncio.run(engine.run(timeout=args.timeout))
    except FlowError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if writer:
            writer.close()
    if result.status == "timeout":
        print(f"switchboard: stopped after {args.timeout:g} s", file=sys.stderr)
    return EXIT_FAILED if result.errors else EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from runtime.flow import validate_flow

    flow = _load(args.flow)
    for problem in validate_flow(flow, file=args.flow):
        print(str(problem), file=sys.stderr)
    print(f"{args.flow}: ok ({len(flow.nodes)} nodes, {len(flow.wires)} wires)")
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
            summary = " ".join(s.description.split("\n\n")[0].split())
            print(f"{s.type:<{width}}  {s.name} - {summary}{tool}")
    for err in registry.load_errors:
        print(f"warning: {err}", file=sys.stderr)
    return EXIT_OK


def _tools(args: argparse.Namespace) -> int:
    from runtime.tools import agent_tool_specs

    flow = _load(args.flow)
    print(json.dumps(agent_tool_specs(flow), indent=2, ensure_ascii=False))
    return EXIT_OK


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


if __name__ == "__main__":
    sys.exit(main())

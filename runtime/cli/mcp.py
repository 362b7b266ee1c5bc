"""``switchboard mcp serve``: one agent's tools served to MCP clients
(``runtime.mcp_serve``), as a run that is ended, recorded and signalled like
``run``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runtime.text import printable

from .base import EXIT_BAD_INPUT, UsageError, _load, _Parser, apply_sets, exit_code
from .guard import _recording, _RunGuard, _say_unasked

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

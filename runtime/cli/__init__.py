"""``switchboard``: run, validate and inspect flows headless; open the designer.

Exit codes: 0 completed (or a long-running flow stopped by its timeout with
nothing in flight), 1 the flow failed (an uncaught node error, or a bound
such as the message-storm cap), 2 bad input (file, flow, usage), 124 stopped
by ``--timeout`` with work unfinished, 130 SIGINT, 143 SIGTERM."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from runtime.text import printable

from .base import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_TIMEOUT,
    UsageError,
    _load,
    _Parser,
    apply_sets,
    exit_code,
    log,
    parse_set,
    raw_text,
)
from .guard import HARD_STOP_GRACE
from .importing import _add_import_parser, _import
from .mcp import MCP_EPILOG, _add_mcp_parser, _mcp
from .run import RUN_EPILOG, TRACE_PREVIEW_CHARS, _add_run_options, _queue, _run, _runs, debug_line
from .testing import _add_test_parser, _test

#: What other code imports from runtime.cli (the modules below hold it).
__all__ = [
    "EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "EXIT_SIGINT", "EXIT_SIGTERM", "EXIT_TIMEOUT",
    "HARD_STOP_GRACE", "MCP_EPILOG", "RUN_EPILOG", "TRACE_PREVIEW_CHARS", "UsageError",
    "apply_sets", "build_parser", "debug_line", "exit_code", "main", "parse_set", "raw_text",
]


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
    _add_test_parser(sub)
    _add_import_parser(sub)
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
                   "queue": _queue, "import": _import, "test": _test}[args.command]
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


def _validate(args: argparse.Namespace) -> int:
    from runtime.flow import validate_flow

    flow = _load(args.flow)
    for problem in validate_flow(flow, file=args.flow):
        print(str(problem), file=sys.stderr)
    print(f"{args.flow}: ok ({len(flow.nodes)} nodes, {len(flow.wires)} wires)")
    if args.approve:
        return _validate_policy(args.approve, flow, args.flow)
    return EXIT_OK


def _validate_policy(path: str, flow, flow_file: str = "") -> int:
    """``validate FLOW --approve POLICY.json``: the policy file's problems,
    and what in it the flow's tools cannot match (warnings)."""
    from runtime.approval import policy_warnings, read_policy
    from runtime.node import NodeConfigError
    from runtime.tools import agent_tool_specs

    policy, problems = read_policy(path)
    if policy is not None:
        try:
            tools = {f["function"]["name"]: f["function"].get("parameters") or {}
                     for functions in agent_tool_specs(flow, file=flow_file).values()
                     for f in functions}
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
        specs = agent_tool_specs(flow, file=args.flow)
    except NodeConfigError as exc:  # a tool the flow's checks could not see (an MCP server's)
        raise UsageError(f"{args.flow}: {exc}") from None
    print(json.dumps(specs, indent=2, ensure_ascii=False))
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

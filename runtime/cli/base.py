"""What every ``switchboard`` command shares: the exit codes, a usage error
(exit 2, one line), the parser class that makes argparse's errors one, a
flow loaded or refused, ``--set NODE.PARAM=VALUE``, and a run's exit code.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from runtime.text import NotFiniteError, finite_loads

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_TIMEOUT, EXIT_SIGINT, EXIT_SIGTERM = 124, 130, 143

log = logging.getLogger("switchboard")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as everywhere else
        self.print_usage(sys.stderr)
        print(f"switchboard: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


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

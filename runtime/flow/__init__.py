"""The flow file: a pydantic model of ``switchboard.flow/1``, atomic save with
stable key order, and validation that names the file, node id and field of
every problem.

- ``model``: the flow, its nodes, wires and settings; ``Problem``, ``FlowError``.
- ``parse``: decoded JSON to a Flow (``parse_flow``) and its structural checks.
- ``validate``: every problem of a parsed flow (``validate_flow``), and the
  ports and tool names each node offers.
- here: reading a flow file (``load_flow``) and saving one, atomically.

``runtime.flow`` is the public face of the package: import from here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..paths import write_atomic_bytes
from ..registry import Registry
from .model import (
    FORMAT,
    HOOK_PORTS,
    MAX_FLOW_HOOKS,
    Flow,
    FlowError,
    FlowHook,
    FlowNode,
    FlowSettings,
    Problem,
    ToolOverride,
    Wire,
    flow_graph,
)
from .parse import (
    _SURROGATE_ESCAPE,
    _TOO_DEEP,
    MAX_DEPTH,
    _no_gc,
    _parse,
    parse_flow,
)
from .validate import (
    HOOK_RESULT,
    INJECT,
    PROMPT,
    TOOL_NAME_RE,
    agent_cycle,
    check_param_value,
    empty_prompts,
    offered_tool_names,
    output_ports,
    tool_name,
    tool_name_problem,
    validate_flow,
)

__all__ = [
    "FORMAT",
    "Flow",
    "FlowError",
    "FlowHook",
    "FlowNode",
    "FlowSettings",
    "HOOK_PORTS",
    "HOOK_RESULT",
    "INJECT",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_FLOW_HOOKS",
    "PROMPT",
    "Problem",
    "TOOL_NAME_RE",
    "ToolOverride",
    "Wire",
    "agent_cycle",
    "check_param_value",
    "empty_prompts",
    "flow_graph",
    "load_flow",
    "offered_tool_names",
    "output_ports",
    "parse_flow",
    "save_flow",
    "tool_name",
    "tool_name_problem",
    "validate_flow",
    "write_atomic",
]

#: The largest flow file load_flow reads.
MAX_FILE_BYTES = 50 * 1024 * 1024


# -- load / save ------------------------------------------------------------

def load_flow(path: str | Path, registry: Registry | None = None, *, validate: bool = True) -> Flow:
    """Read and check a flow file. Raises FlowError with every problem found
    (warnings do not raise), and nothing else for any file's content."""
    path = Path(path)
    file = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise FlowError([Problem(file=file, message=(
                f"file is {size / 1024 / 1024:.1f} MB; a flow file may be at most "
                f"{MAX_FILE_BYTES // 1024 // 1024} MB"))])
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FlowError([Problem(file=file, message="file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FlowError([Problem(file=file, message=f"cannot read: {exc}")]) from None
    # Loading builds millions of objects and no cycles: the cyclic collector
    # would only walk them over and over (it was half the time of loading a
    # 100,000-node flow).
    with _no_gc():
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FlowError([Problem(file=file, field=f"line {exc.lineno} column {exc.colno}",
                                     message=f"invalid JSON: {exc.msg}")]) from None
        except RecursionError:
            raise FlowError([Problem(file=file, field=_deep_place(text),
                                     message=_TOO_DEEP)]) from None
        except ValueError as exc:  # an integer of more than 4,300 digits
            why = str(exc).split(";")[0]  # not the advice to call sys.set_int_max_str_digits
            raise FlowError([Problem(file=file, message=f"invalid JSON: {why}")]) from None
        flow = _parse(data, file, check_text=_SURROGATE_ESCAPE.search(text) is not None,
                      check_numbers=True)
        del data, text
        if validate:
            errors = [p for p in validate_flow(flow, registry, file=file) if p.severity == "error"]
            if errors:
                raise FlowError(errors)
    return flow


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deep_place(text: str) -> str | None:
    """``line L column C`` where ``text`` first nests deeper than MAX_DEPTH
    (strings skipped); for the message when the JSON parser gave up."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        ch = m.group()
        if ch in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - text.rfind("\n", 0, m.start())
                return f"line {line} column {col}"
        elif ch in ("]", "}"):
            depth -= 1
    return None


def save_flow(flow: Flow, path: str | Path) -> None:
    """Atomic: write a temp file beside the target, fsync, then rename, so a
    crash never leaves half a flow behind."""
    write_atomic(Path(path), flow.dumps())


def write_atomic(path: Path, text: str) -> None:
    # mkstemp would make the file 0600; keep the mode the file had (or the
    # one a plain open() would give) so that saving does not hide a shared flow.
    write_atomic_bytes(path, text.encode("utf-8"), _file_mode(path))


def _file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask

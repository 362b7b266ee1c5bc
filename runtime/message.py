"""Messages: JSON-like dicts with dotted-path access and the reserved keys of
tool calls. A message is a plain ``dict`` subclass so that the hot path of the
engine pays nothing for wrapping it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any

MESSAGE_TYPE = "__message_type__"
TOOL_CALLER_ID = "__tool_caller_id__"
AGENT_NODE_ID = "__agent_node_id__"
TOOL_NAME = "__tool_name__"
PARAMETERS = "__parameters__"
TOOL_STATUS = "__tool_status__"
TOOL_DATA = "__tool_data__"
TOOL_ERROR = "__tool_error__"
TOOL_REQUEST = "tool_request"
TOOL_RESPONSE = "tool_response"
RESERVED_KEYS = frozenset(
    {MESSAGE_TYPE, TOOL_CALLER_ID, AGENT_NODE_ID, TOOL_NAME, PARAMETERS, TOOL_STATUS,
     TOOL_DATA, TOOL_ERROR}
)

#: An agent's lifecycle hooks (runtime.agent.hooks): the id a blocking hook's
#: AI Hook Result answers, and the conversation a message sent back into the
#: agent's ``in`` continues. Not reserved for tool calls: a hook flow may read them.
HOOK_ID = "__hook_id__"
CONVERSATION_ID = "__conversation_id__"
#: A subflow used as an agent's tool (runtime.engine.subflow_tool): the
#: message key that says which call a message inside works for, and the run
#: resource of the calls going on (caller id -> call), which the tool bridge
#: reads too. Here, below both, so that the bridge needs no engine import.
SUBFLOW_CALL = "__subflow_call__"
SUBFLOW_CALLS = "subflow-tool-calls"

_MISSING = object()
#: Deepest nesting to_jsonable() keeps (events, the inspector, history).
MAX_JSONABLE_DEPTH = 32
_prefix = os.urandom(4).hex()
_counter = itertools.count(1)


def new_msgid() -> str:
    return f"{_prefix}.{next(_counter):x}"


class PathError(ValueError):
    """A dotted path that cannot be parsed or cannot be written."""


def parse_path(path: str) -> tuple[str | int, ...]:
    """``payload.items.0.name`` or ``payload.items[0].name`` -> parts.

    Digit parts become ints; they index lists and are also accepted as dict
    keys (as strings) when the container is a dict."""
    # Checked before the cache: an unhashable path (a list from a hand-edited
    # flow) must be a PathError, not a TypeError from lru_cache.
    if not isinstance(path, str):
        raise PathError(f"a path must be text, got {type(path).__name__}")
    if not path.strip():
        raise PathError("empty path")
    return _parse_path(path)


@lru_cache(maxsize=4096)
def _parse_path(path: str) -> tuple[str | int, ...]:
    parts: list[str | int] = []
    for raw in path.replace("[", ".").replace("]", "").split("."):
        if raw == "":
            raise PathError(f"bad path {path!r}: empty segment")
        parts.append(int(raw) if _is_index(raw) else raw)
    return tuple(parts)


def _is_index(raw: str) -> bool:
    # Only canonical ASCII numbers are indices: str.isdigit() also accepts
    # "²" (int() then fails) and "01" (would name key "1", not "01"). Past 18
    # digits it is a key: no list is that long, and int() refuses > 4300.
    return (raw.isascii() and raw.isdigit() and (raw == "0" or raw[0] != "0")
            and len(raw) <= 18)


def _step(container: Any, part: str | int) -> Any:
    if isinstance(container, dict):
        if part in container:
            return container[part]
        if isinstance(part, int):
            return container.get(str(part), _MISSING)
        return _MISSING
    if isinstance(container, list) and isinstance(part, int):
        return container[part] if part < len(container) else _MISSING
    return _MISSING


def get_path(obj: Any, path: str, default: Any = None) -> Any:
    cur = obj
    for part in parse_path(path):
        cur = _step(cur, part)
        if cur is _MISSING:
            return default
    return cur


def has_path(obj: Any, path: str) -> bool:
    return get_path(obj, path, _MISSING) is not _MISSING


def set_path(obj: dict, path: str, value: Any) -> None:
    """Set, creating dicts (or lists, before an int part) on the way."""
    parts = parse_path(path)
    if len(parts) == 1 and type(parts[0]) is str:
        obj[parts[0]] = value
        return
    cur: Any = obj
    for i, part in enumerate(parts[:-1]):
        nxt = _step(cur, part)
        if nxt is _MISSING or not isinstance(nxt, (dict, list)):
            nxt = [] if isinstance(parts[i + 1], int) else {}
            _assign(cur, part, nxt, path)
        cur = nxt
    _assign(cur, parts[-1], value, path)


def _assign(container: Any, part: str | int, value: Any, path: str) -> None:
    if isinstance(container, dict):
        # JSON object keys are strings, so an int part names the key "0".
        container[str(part) if isinstance(part, int) else part] = value
    elif isinstance(container, list) and isinstance(part, int):
        if part < len(container):
            container[part] = value
        elif part == len(container):
            container.append(value)
        else:
            raise PathError(f"cannot set {path!r}: index {part} past the end of a list")
    else:
        raise PathError(f"cannot set {path!r}: {type(container).__name__} has no field {part!r}")


def delete_path(obj: dict, path: str) -> bool:
    """Remove the value at path; True if something was removed."""
    parts = parse_path(path)
    parent = obj if len(parts) == 1 else get_path(obj, ".".join(map(str, parts[:-1])), _MISSING)
    last = parts[-1]
    if isinstance(parent, dict):
        key: Any = last if last in parent else str(last)
        if key in parent:
            del parent[key]
            return True
    elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        del parent[last]
        return True
    return False


def deep_copy(value: Any) -> Any:
    """A copy of JSON-like data, several times faster than copy.deepcopy:
    immutable leaves are shared, dicts and lists are rebuilt."""
    cls = type(value)
    if cls is dict:
        return {k: deep_copy(v) for k, v in value.items()}
    if cls is Message:
        copy = Message({k: deep_copy(v) for k, v in value.items()})
        catches = getattr(value, "_catches", 0)
        if catches:
            copy._catches = catches  # a fan-out copy of a caught message stays counted
        return copy
    if cls is list:
        return [deep_copy(v) for v in value]
    if cls is tuple:
        return tuple(deep_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: deep_copy(v) for k, v in value.items()}
    return value


class Message(dict):
    """A message travelling through a flow. ``payload`` is the main value and
    ``_msgid`` its id; keys starting with ``__`` are reserved for tool calls.

    ``_catches`` (unset until the message is first caught) counts how often a
    ``core.catch`` node received it. It is an attribute, not a key, so that
    no node can reset it and turn a failing catch flow into an endless loop."""

    __slots__ = ("_catches",)

    @classmethod
    def new(cls, payload: Any = None, **fields: Any) -> Message:
        msg = cls(_msgid=new_msgid(), payload=payload)
        msg.update(fields)
        return msg

    def get_path(self, path: str, default: Any = None) -> Any:
        return get_path(self, path, default)

    def set_path(self, path: str, value: Any) -> None:
        set_path(self, path, value)

    def delete_path(self, path: str) -> bool:
        return delete_path(self, path)

    def has_path(self, path: str) -> bool:
        return has_path(self, path)

    def clone(self) -> Message:
        return deep_copy(self)

    @property
    def is_tool_request(self) -> bool:
        return self.get(MESSAGE_TYPE) == TOOL_REQUEST

    @property
    def msgid(self) -> str:
        return self.get("_msgid", "")


def to_jsonable(value: Any, *, limit: int = 0, depth: int = MAX_JSONABLE_DEPTH,
                text: Callable[[str], str] | None = None, items: int = 0) -> Any:
    """Values as JSON can carry them (for events and the inspector); anything
    else becomes its repr. ``limit`` truncates long strings; ``items`` (0:
    none) keeps that many elements of a list or keys of an object and says
    how many more there were; containers nested deeper than ``depth`` become
    a short note. So whatever a model or a node produced, an event can be
    written out, at a cost bounded by these rather than by the data. ``text``,
    if given, rewrites every string and key first (the engine and the tool
    bridge mask secrets with it). Recursive, never deeper than ``depth``."""
    return _jsonable(value, limit, depth, text, items)


def _jsonable(value: Any, limit: int, depth: int, text: Callable[[str], str] | None,
              items: int) -> Any:
    # Positional arguments and type() tests: events of tool calls go through here.
    t = type(value)
    if t is str:
        if text is not None:
            value = text(value)
        return value if not limit or len(value) <= limit else value[:limit] + "…"
    if value is None or t is int or t is float or t is bool:
        return value
    if t is dict or t is list or isinstance(value, (dict, list, tuple)):
        if depth <= 0:
            return f"<{type(value).__name__} nested more than {MAX_JSONABLE_DEPTH} levels>"
        depth -= 1
        more = len(value) - items if items else 0
        if isinstance(value, dict):
            pairs = itertools.islice(value.items(), items) if more > 0 else value.items()
            if text is None:
                out = {str(k): _jsonable(v, limit, depth, None, items) for k, v in pairs}
            else:
                out = {text(str(k)): _jsonable(v, limit, depth, text, items) for k, v in pairs}
            if more > 0:
                out["…"] = f"{more} more keys"
            return out
        elems = itertools.islice(value, items) if more > 0 else value
        out_list = [_jsonable(v, limit, depth, text, items) for v in elems]
        if more > 0:
            out_list.append(f"… {more} more items")
        return out_list
    if isinstance(value, str):  # a str subclass
        return _jsonable(str(value), limit, depth, text, items)
    if isinstance(value, (bool, int, float)):  # an int subclass, an enum
        return value
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    rendered = repr(value)
    return text(rendered) if text is not None else rendered

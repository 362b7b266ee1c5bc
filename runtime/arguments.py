"""Tool-call arguments as an LLM sends them: parsed, bounded and quoted.

Everything the AI controls is bounded (docs/tools.md, "Limits"): arguments
nested deeper than ``MAX_ARG_DEPTH`` or larger than ``MAX_ARG_BYTES`` are
refused before anything recurses into them (text is measured before
``json.loads`` sees it, parsed values are walked iteratively), and any text
that quotes a value (a refusal, an event) shows at most ``QUOTE_LIMIT``
characters of it, with secrets masked."""

from __future__ import annotations

import itertools
import json
from typing import Any

from .message import to_jsonable
from .node import redact

#: Deepest nesting of tool-call arguments (the object itself is level 1).
MAX_ARG_DEPTH = 32
#: Largest tool-call arguments: bytes of JSON text as the LLM sent them (or,
#: for arguments an SDK already parsed, an estimate from a bounded walk).
MAX_ARG_BYTES = 256 * 1024
#: Most characters of a value an error text quotes.
QUOTE_LIMIT = 200


# -- limits and quoting -----------------------------------------------------

def _too_deep_text(limit: int) -> str:
    return f"the arguments are nested more than {limit} levels deep (the limit is {limit})"


def _too_large_text(size: int, limit: int, estimated: bool = False) -> str:
    about = "about " if estimated else ""
    return (f"the arguments are {about}{size / 1024:.0f} KB, more than the {limit // 1024} KB "
            f"a tool call may send")


def argument_problem(value: Any, max_depth: int = MAX_ARG_DEPTH,
                     max_bytes: int | None = MAX_ARG_BYTES) -> str | None:
    """Why ``value`` (already parsed) breaks the depth or size bound, or None.

    An iterative walk over the containers only (no recursion, so no depth
    can overflow the stack). The size is an estimate of the JSON text (the
    strings and keys plus a few bytes per item) and the walk stops as soon
    as it passes ``max_bytes``, so it costs at most that much work."""
    t = type(value)
    if t is not dict and t is not list:
        if max_bytes is not None and t is str and len(value) > max_bytes:
            return _too_large_text(len(value), max_bytes, estimated=True)
        return None
    size = 2
    limit = max_bytes if max_bytes is not None else float("inf")
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        container, depth = pop()
        values = container
        if type(container) is dict:
            for k in container:
                size += (len(k) if type(k) is str else 8) + 4  # "key": and a comma
            values = container.values()
        for v in values:
            tv = type(v)
            if tv is str:
                size += len(v) + 4
            elif tv is dict or tv is list:
                if depth >= max_depth:
                    return _too_deep_text(max_depth)
                push((v, depth + 1))
                size += 3
            else:
                size += 6
            if size > limit:
                return _too_large_text(size, max_bytes or 0, estimated=True)
    return None


class _Raw(str):
    """A piece of punctuation in preview()'s work list (not a value)."""


def preview(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as JSON-like text of at most about ``limit`` characters
    (cut with "…"), for quoting in an error. Never recurses and never looks
    at more than it shows, whatever the size or depth of ``value``."""
    parts: list[str] = []
    n = 0
    stack: list[Any] = [value]
    while stack and n <= limit:
        v = stack.pop()
        t = type(v)
        if t is _Raw:
            s = v
        elif v is None or t is bool or t is int or t is float:
            s = json.dumps(v)
        elif isinstance(v, str):
            s = json.dumps(v[:limit + 1], ensure_ascii=False)
        elif isinstance(v, dict):
            items = list(itertools.islice(v.items(), limit // 4 + 1))
            stack.append(_Raw("}"))
            if len(v) > len(items):
                stack.append(_Raw(", …"))
            for i in range(len(items) - 1, -1, -1):
                key, item = items[i]
                stack.append(item)
                stack.append(_Raw(json.dumps(str(key)[:limit + 1], ensure_ascii=False) + ": "))
                if i:
                    stack.append(_Raw(", "))
            s = "{"
        elif isinstance(v, (list, tuple)):
            items = list(itertools.islice(v, limit // 2 + 1))
            stack.append(_Raw("]"))
            if len(v) > len(items):
                stack.append(_Raw(", …"))
            for i in range(len(items) - 1, -1, -1):
                stack.append(items[i])
                if i:
                    stack.append(_Raw(", "))
            s = "["
        else:
            s = repr(v)[:limit + 1]
        parts.append(s)
        n += len(s)
    text = "".join(parts)
    return text if len(text) <= limit and not stack else text[:limit] + "…"


def short(text: str, limit: int = QUOTE_LIMIT) -> str:
    """A text cut to ``limit`` characters (with "…")."""
    return text if len(text) <= limit else text[:limit] + "…"


def event_args(value: Any, limit: int = 4000, *, checked: bool = False) -> Any:
    """Tool-call arguments as an event (or the agent's output) may hold them:
    secrets masked, long strings cut, and anything past the depth or size
    bound replaced by a short preview text. ``checked``: the value already
    passed argument_problem()."""
    if type(value) is str:
        # Masked before it is cut, so that no cut leaves half a secret.
        return short(redact(value[:limit + 256]), limit)
    if not checked and argument_problem(value) is not None:
        return redact(preview(value, limit))
    return masked(value, limit)


_SCALARS = frozenset((int, float, bool))


def masked(value: Any, limit: int = 0, depth: int = MAX_ARG_DEPTH + 8) -> Any:
    """``to_jsonable`` with every string and key through ``redact``: what
    events and the agent's output may hold of an argument or a result."""
    if value is None or type(value) in _SCALARS:  # a no-result tool's answer
        return value
    if type(value) is dict:
        # Tool arguments and results are mostly one flat object of scalars:
        # that case in one loop (two events per tool call go through here).
        out = {}
        for k, v in value.items():
            tv = type(v)
            if tv is str:
                v = redact(v)
                if limit and len(v) > limit:
                    v = v[:limit] + "…"
            elif not (v is None or tv is int or tv is float or tv is bool) or type(k) is not str:
                break
            out[redact(k)] = v
        else:
            return out
    return to_jsonable(value, limit=limit, depth=depth, text=redact)


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """Arguments as the LLM sent them -> (value, error). Text is JSON; an
    empty text means no arguments.

    Arguments past the size or depth bound are refused before anything
    recurses into them: text is measured before ``json.loads`` sees it (and
    a RecursionError from it is a refusal too), parsed values are walked
    iteratively. A value refused for a bound comes back as a short preview
    text, so that nothing downstream (events, the agent's output) holds the
    deep or large original."""
    value, why, _ = _parse(raw)
    return value, why


def _parse(raw: Any) -> tuple[Any, str | None, bool]:
    """parse_arguments(), and whether the value was replaced by a preview."""
    if isinstance(raw, str):
        n = len(raw)
        if n > MAX_ARG_BYTES or (n > MAX_ARG_BYTES // 4
                                 and len(raw.encode("utf-8", "surrogatepass")) > MAX_ARG_BYTES):
            size = n if n > MAX_ARG_BYTES else len(raw.encode("utf-8", "surrogatepass"))
            return short(raw), _too_large_text(size, MAX_ARG_BYTES), True
        if not raw.strip():
            return {}, None, False
        try:
            value = json.loads(raw)
        except RecursionError:
            return short(raw), _too_deep_text(MAX_ARG_DEPTH), True
        except ValueError as exc:
            return raw, f"the arguments are not valid JSON ({exc}); send one JSON object", False
        # Fewer brackets than the bound cannot nest deeper than it: the
        # common case costs two counts in C, no walk.
        if raw.count("[") + raw.count("{") > MAX_ARG_DEPTH:
            why = argument_problem(value, max_bytes=None)
            if why is not None:
                return short(raw), why, True
        return value, None, False
    if isinstance(raw, (dict, list)):
        why = argument_problem(raw)
        return (raw, None, False) if why is None else (preview(raw), why, True)
    if isinstance(raw, (int, float, bool)) or raw is None:
        return raw, None, False
    return preview(raw), f"the arguments must be a JSON object, got {type(raw).__name__}", True

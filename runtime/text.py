"""User data as a message may show it, and JSON numbers JSON can carry.

Node ids, names, paths and values come from flow files, messages, HTTP
clients and LLMs. A message that quotes one goes to a terminal, a log file
or a one-line status: ``printable()`` writes its control characters (ANSI
escape codes, newlines, bidirectional overrides) as escapes, so a quoted
value cannot clear a screen, colour the text after it or start a line that
looks like another message.

JSON has no NaN or Infinity, and ``float()`` turns a number beyond
±1.8e308 into infinity. Python's json module reads and writes them anyway,
producing text that is not JSON; ``finite_loads()`` refuses them when
reading, ``non_finite_place()`` finds one in a decoded value, and
``finite_or_none()`` writes them as null, as JavaScript's JSON.stringify
does."""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: Characters written as escapes: C0 and C1 controls (newline, tab and
#: escape among them), DEL, the line and paragraph separators, and the
#: marks that reorder text (bidirectional overrides and isolates). Zero
#: width joiners stay: emoji are built with them.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Characters of a value a message quotes by default.
QUOTE_LIMIT = 200


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any) -> str:
    """``text`` on one line with its control characters escaped
    (``\\n``, ``\\x1b``, ``\\u202e``); text without any is returned as is."""
    if type(text) is not str:
        text = str(text)
    if text.isprintable():  # the common case, checked in C
        return text
    return _UNPRINTABLE.sub(_escape, text)


def quoted(text: Any, limit: int = QUOTE_LIMIT) -> str:
    """``'text'`` as a message quotes user data: escaped as ``printable()``
    does, and cut after ``limit`` characters (0: never)."""
    shown = printable(text)
    if limit and len(shown) > limit:
        shown = shown[:limit] + "…"
    return f"'{shown}'"


# -- JSON numbers ---------------------------------------------------------------------

class NotFiniteError(ValueError):
    """JSON text holding NaN, Infinity or a number out of float range."""


def _refuse_constant(name: str) -> Any:
    raise NotFiniteError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0:  # inf - inf is nan; nan != 0
        shown = text if len(text) <= 24 else text[:20] + "…"
        raise NotFiniteError(f"{shown} is out of range: a number must lie within ±1.8e308")
    return value


def finite_loads(text: str | bytes, **kw: Any) -> Any:
    """``json.loads`` that refuses NaN, Infinity, -Infinity and numbers
    beyond ±1.8e308 with a NotFiniteError (a ValueError) saying which."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, **kw)


def non_finite_place(value: Any) -> tuple[list, str] | None:
    """The path (keys and indexes) to the first NaN or infinite float in a
    decoded JSON value, and what it is ('NaN', 'Infinity', '-Infinity');
    None when every number is finite. Iterative: depth costs no stack."""
    stack: list[tuple[Any, list]] = [(value, [])]
    while stack:
        obj, path = stack.pop()
        t = type(obj)
        if t is float or (t is not bool and t is not int and isinstance(obj, float)):
            if obj - obj != 0:
                return path, _name(obj)
        elif t is dict or isinstance(obj, dict):
            stack.extend((v, [*path, k]) for k, v in reversed(obj.items()))
        elif t is list or t is tuple or isinstance(obj, (list, tuple)):
            stack.extend((v, [*path, i]) for i, v in reversed(list(enumerate(obj))))
    return None


def _name(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def finite_or_none(value: Any) -> Any:
    """A copy of ``value`` with every NaN and infinite float replaced by
    None (containers that hold none are returned as they are)."""
    t = type(value)
    if t is float:
        return value if value - value == 0 else None
    if t is dict:
        out = {k: finite_or_none(v) for k, v in value.items()}
        return out if any(out[k] is not v for k, v in value.items()) else value
    if t is list or t is tuple:
        items = [finite_or_none(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value

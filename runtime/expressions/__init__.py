"""Template expressions: the fourth way to set a param, and Switchboard's one
template engine (the Template node renders with it too: ``TextTemplate``).

``{"scope": "expression", "value": "Hello {{ msg.payload.name }}"}`` is
rendered for every message with Jinja2 in an immutable sandbox. A template
sees four names and nothing else:

- ``msg``: the incoming message, without the reserved keys of tool calls (so
  a template cannot read the AI's arguments from ``__parameters__``);
- ``env``: the environment variables that the flow (``settings.env_readable``)
  or the user's settings name as readable, and a few harmless ones
  (``DEFAULT_READABLE_ENV``), less every one that names a secret (an
  allow-list, with the deny-list ``SECRET_NAME`` as a second guard; see
  ``template_env``);
- ``flow``: this run's flow variables (what Set Variable stores with scope
  flow), read-only;
- ``global``: the global variables (Set Variable with scope global).

A template that is one expression and nothing else (``{{ msg.payload.count
}}``) gives that expression's own value (an int stays an int); any other
template gives text. Either is then coerced to the param's type, so an int
param set to ``"{{ msg.payload.n }}"`` gets an int from ``"7"`` too.

The Template node's template (``TextTemplate``) sees the message's own keys
(``payload``, ``topic``) and ``msg``, reads a missing key as empty text, and
always gives text; it has the same sandbox and the same bounds.

Bounds, the same for every template (``_Render`` keeps the counts of one
render; counts, not a clock, so that a template always stops at the same
place):

- at most ``MAX_TEMPLATE_CHARS`` characters of template
  (``MAX_TEXT_TEMPLATE_CHARS`` for the Template node's);
- at most ``MAX_STEPS`` steps: loop turns, macro calls, calls and filters;
- at most ``MAX_WORK`` units of work: the characters and items that the
  render's operations build, copy, scan, compare or turn into text;
- no value of more than ``MAX_VALUE`` characters or items, counted through
  every level of nesting (a list held three times in another counts three
  times: about the size of its text), and no whole number of more than
  ``MAX_INT_DIGITS`` digits. The operations that could build one (``*``,
  ``+``, ``**``, ``~``, ``%``, ``str.format``, list and dict literals,
  ``join``, ``center``, ``indent``, ``replace``, ``tojson``, ...) are
  checked *before* they build it;
- at most ``MAX_VALUE`` characters of text out.

Constant parts are worked out under the same bounds when a template is
compiled (``switchboard validate``, the designer's Problems), so that a
constant that cannot be built (``{% set a = 2 ** 999999 %}``) is an error of
the flow, never of a run. A render that sees its run's deadline pass
(``switchboard run --timeout``: ``RUN_DEADLINE``) stops with
``RenderDeadline``, which the engine turns into the run's timeout with the
node's message unfinished (exit 124).

Templates cannot include, import or extend other templates (there is no
loader: nothing touches files), reach attributes starting with ``_``, or
change the data they read.

A template is compiled once per param (and once per distinct text in the
process: the compiled form is cached), never per message.
"""

from __future__ import annotations

import json
import math
import operator
import re
import string
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..message import RESERVED_KEYS, deep_copy
from ..spec import ParamSpec, ParamType
from . import bounds
from .bounds import (
    _INT_BITS,
    _STATE,
    FOLD_WORK,
    MAX_INT_DIGITS,
    MAX_JSON_INDENT,
    MAX_STEPS,
    MAX_TEMPLATE_CHARS,
    MAX_TEXT_TEMPLATE_CHARS,
    MAX_VALUE,
    MAX_WORK,
    RUN_DEADLINE,
    ExpressionError,
    RenderDeadline,
    _as_text,
    _at_most,
    _Bound,
    _built,
    _charge,
    _charge_made,
    _check_int,
    _deep,
    _int,
    _int_weight,
    _is_deep,
    _NotFolded,
    _preview,
    _Render,
    _size,
    _sized,
    _step,
    _text_of,
    _weight,
)
from .context import (
    _DICT_METHODS,
    DEFAULT_READABLE_ENV,
    FLOW_VARIABLES,
    GLOBAL_FILE,
    GLOBAL_MAX_BYTES,
    MAX_ENV_READABLE,
    ROOTS,
    SECRET_NAME,
    SETTINGS_FILE,
    SETTINGS_MAX_BYTES,
    ExpressionContext,
    _Env,
    default_context,
    env_pattern_problem,
    flow_env_readable,
    hidden_env_names,
    read_global_variables,
    template_env,
    user_env_readable,
)

if TYPE_CHECKING:
    from jinja2 import Template

#: The clock deadlines are read on (the engine's: time.monotonic). Renders
#: look it up here (bounds._clock), so that a clock set here is theirs.
_now = time.monotonic

#: The public names, wherever in the package they live.
__all__ = [
    "DEFAULT_READABLE_ENV", "FLOW_VARIABLES", "FOLD_WORK", "GLOBAL_FILE", "GLOBAL_MAX_BYTES",
    "MAX_ENV_READABLE", "MAX_INT_DIGITS", "MAX_JSON_INDENT", "MAX_STEPS", "MAX_TEMPLATE_CHARS",
    "MAX_TEXT_TEMPLATE_CHARS", "MAX_VALUE", "MAX_WORK", "ROOTS", "RUN_DEADLINE", "SECRET_NAME",
    "SETTINGS_FILE", "SETTINGS_MAX_BYTES",
    "Compiled", "Expression", "ExpressionContext", "ExpressionError", "RenderDeadline",
    "TextTemplate",
    "coerce", "compile_template", "compile_text_template", "default_context",
    "env_pattern_problem", "flow_env_readable", "hidden_env_names", "problem",
    "read_global_variables", "sandbox", "template_env", "text_sandbox", "user_env_readable",
]


# -- names: where an undefined value was looked for ------------------------------

def _path_of(obj: Any) -> str:
    """``msg.payload`` for the payload dict of the message being rendered:
    the name of an object by identity among the roots, so that an error says
    where a key was missing rather than "'dict object' has no attribute"."""
    state = _STATE.get()
    if state is None:
        return ""
    todo: list[tuple[Any, str, int]] = [(v, k, 0) for k, v in state.roots.items()]
    seen = 0
    while todo and seen < 5000:
        value, path, depth = todo.pop(0)
        seen += 1
        if value is obj:
            return path
        if depth >= 6:
            continue
        if isinstance(value, dict):
            for k, v in list(value.items())[:200]:
                if isinstance(v, (dict, list)):
                    todo.append((v, f"{path}.{k}" if isinstance(k, str) else f"{path}[{k!r}]",
                                 depth + 1))
        elif isinstance(value, list):
            for i, v in enumerate(value[:200]):
                if isinstance(v, (dict, list)):
                    todo.append((v, f"{path}[{i}]", depth + 1))
    return ""


def _keys_hint(obj: Any) -> str:
    if isinstance(obj, _Env):
        return ""
    if isinstance(obj, dict) and obj:
        keys = [str(k) for k in list(obj)[:8]]
        more = ", …" if len(obj) > 8 else ""
        return f" (it has: {', '.join(keys)}{more})"
    if isinstance(obj, dict):
        return " (it is empty)"
    return ""


def _undefined_class() -> type:
    from jinja2 import StrictUndefined
    from jinja2.utils import missing, object_type_repr

    class NamedUndefined(StrictUndefined):
        """StrictUndefined whose message names where the value was looked
        for: ``'msg.payload' has no attribute 'nme' (it has: name, count)``."""

        __slots__ = ()

        @property
        def _undefined_message(self) -> str:
            if self._undefined_hint:
                return self._undefined_hint
            name, obj = self._undefined_name, self._undefined_obj
            if obj is missing:
                if name in ROOTS:
                    return f"'{name}' is not available here"
                return f"'{name}' is undefined"
            where = _path_of(obj) or object_type_repr(obj)
            if isinstance(obj, _Env):
                return f"'env' has no variable {name!r} (environment variable not set)"
            if isinstance(name, str):
                return f"'{where}' has no attribute {name!r}{_keys_hint(obj)}"
            if isinstance(obj, (list, tuple)):
                return f"'{where}' has no element {name!r} (it has {len(obj)})"
            return f"'{where}' has no element {name!r}{_keys_hint(obj)}"

    return NamedUndefined


_placeholder: Any = None


def _placeholder_class() -> type:
    """Stands in for the flow variables in a designer preview, where no run
    holds any: ``{{ flow.shop }}`` shows as ‹flow.shop›, and using one as a
    number or a list says why there is no value."""
    global _placeholder
    if _placeholder is None:
        from jinja2 import ChainableUndefined

        class Placeholder(ChainableUndefined):
            __slots__ = ()

            def __str__(self) -> str:
                return f"‹{self._undefined_name}›"

            def __getattr__(self, name: str) -> Any:
                if name[:2] == "__":
                    raise AttributeError(name)
                return _flow_placeholder(f"{self._undefined_name}.{name}")

            def __getitem__(self, key: Any) -> Any:
                return _flow_placeholder(f"{self._undefined_name}[{key!r}]")

        _placeholder = Placeholder
    return _placeholder


def _flow_placeholder(name: str) -> Any:
    return _placeholder_class()(
        f"{name} is a flow variable, and those exist only while the flow runs: the preview "
        "has none", name=name)


# -- bounded operators, calls and filters ----------------------------------------

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow}


def _items(seq: Any) -> int:
    """What the items of a text or list weigh (the list itself aside)."""
    return len(seq) if isinstance(seq, (str, bytes)) else _weight(seq) - 1


def _short(n: int) -> str:
    return str(n) if -10 ** 12 < n < 10 ** 12 else f"a number of {_int_weight(n)} digits"


def _binop(op: str, left: Any, right: Any) -> Any:
    """``left op right``, with its size (texts, lists) or digits (whole
    numbers) checked before it is worked out."""
    lt, rt = type(left), type(right)
    if lt is int and rt is int:
        if op == "**":
            if right > 0 and (left > 1 or left < -1) \
                    and (left.bit_length() - 1) * right >= _INT_BITS:
                raise _Bound(f"{_short(left)} ** {_short(right)} would be a whole number of more "
                             f"than {MAX_INT_DIGITS} digits, the most a template may make")
        elif op == "*" and left.bit_length() + right.bit_length() - 1 > _INT_BITS:
            raise _Bound(f"{_short(left)} * {_short(right)} would be a whole number of more than "
                         f"{MAX_INT_DIGITS} digits, the most a template may make")
        result = _OPS[op](left, right)
        if type(result) is int:
            _check_int(result)
        return result
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if type(n) is int and isinstance(seq, (str, list, tuple, bytes)):
                _at_most(_items(seq) * max(n, 0), "repeating a text or list")
                result = left * right
                _charge_made(result, len(result))
                return result
    elif op == "+":
        if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _at_most(_items(left) + _items(right), "joining two texts or lists")
            result = left + right
            _charge_made(result, len(result))
            return result
    elif op == "%" and isinstance(left, str):
        _percent_check(left, right)
        result = left % right
        _charge_made(result, len(result))
        return result
    result = _OPS[op](left, right)
    if type(result) is int:
        _check_int(result)
    return result


_PERCENT_REST = re.compile(r"[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.?)", re.DOTALL)


def _percent_fields(fmt: str) -> Iterable[tuple[str | None, str | None, str | None, str]]:
    """(mapping key, width, precision, conversion) of each % field of a
    format, read as Python reads them (a key's parentheses nest)."""
    i, n = 0, len(fmt)
    while True:
        i = fmt.find("%", i)
        if i < 0:
            return
        i += 1
        key = None
        if i < n and fmt[i] == "(":
            depth, j = 1, i + 1
            while j < n and depth:
                if fmt[j] == "(":
                    depth += 1
                elif fmt[j] == ")":
                    depth -= 1
                j += 1
            key, i = fmt[i + 1:j - 1], j
        m = _PERCENT_REST.match(fmt, i)
        assert m is not None  # every part of the pattern is optional
        i = m.end()
        yield key, m.group(1), m.group(2), m.group(3)


def _room(digits: str | None, star: Any) -> int:
    if digits == "*":
        return abs(star) if type(star) is int else 0
    if not digits:
        return 0
    return int(digits) if len(digits) <= 18 else 10 ** 18


def _percent_check(fmt: str, args: Any) -> None:
    """``fmt % args`` would make at most MAX_VALUE characters: each field
    counts its width, its precision and its value's text, named fields
    (``%(name)400000000s``) and repeated ones included."""
    _charge(len(fmt) >> 4)
    positional = list(args) if isinstance(args, tuple) else [args]
    mapping = args if isinstance(args, Mapping) else None
    total, i = len(fmt), 0
    for key, width, precision, conversion in _percent_fields(fmt):
        if conversion == "%":
            continue
        room = 0
        for part in (width, precision):
            star = None
            if part == "*":
                star = positional[i] if i < len(positional) else None
                i += 1
            room += _room(part, star)
        if key is not None:
            value = mapping.get(key) if mapping is not None else None
        else:
            value = positional[i] if i < len(positional) else None
            i += 1
        total += room + _as_text(value, "the %-format")
        if total > MAX_VALUE:
            break
    _at_most(total, "the %-format")


_FORMATTER = string.Formatter()
_FIELD_HEAD = re.compile(r"[^.\[]*")
_DIGITS = re.compile(r"\d+")


def _format_check(fmt: str, args: tuple, kwargs: Mapping) -> None:
    """``fmt.format(*args, **kwargs)`` would make at most MAX_VALUE
    characters: each field counts its width, precision and value's text
    (``'{0}{0}{0}'`` counts the value three times). A field whose spec holds
    another field (``{:>{w}}``) is refused: its width is known only while
    formatting."""
    _charge(len(fmt) >> 4)
    try:
        fields = list(_FORMATTER.parse(fmt))
    except ValueError:
        return  # format() says what is wrong
    _charge(_FORMAT_FIELD * len(fields))  # the sandbox's formatter: Python, field by field
    total, auto = 0, 0
    for literal, field, spec, _conversion in fields:
        total += len(literal)
        if field is None:
            continue
        if spec and "{" in spec:
            raise _Bound("a format field with a nested field ({:>{w}}) is not allowed in a "
                         "template")
        head = _FIELD_HEAD.match(field).group()  # type: ignore[union-attr]
        if not head:
            value = args[auto] if auto < len(args) else None
            auto += 1
        elif head.isdigit():
            k = int(head) if len(head) < 7 else -1
            value = args[k] if 0 <= k < len(args) else None
        else:
            value = kwargs.get(head) if isinstance(kwargs, Mapping) else None
        room = sum(_room(d, None) for d in _DIGITS.findall(spec or ""))
        total += room + _as_text(value, "format()")
        if total > MAX_VALUE:
            break
    _at_most(total, "format()")


def _call_check(fn: Any, args: tuple, kwargs: dict) -> tuple | None:
    """Checks a call of a method of a str (the ones that can build much more
    than they are given) before it runs, and counts the text or container it
    is called on as work. Returns the arguments to call with, when they had
    to be read first (join of a generator)."""
    self = getattr(fn, "__self__", None)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None and not isinstance(self, (str, bytes)):
        self = getattr(wrapped, "__self__", self)  # the sandbox's wrapper of str.format
    if isinstance(self, (list, tuple, dict)):
        _charge(len(self) >> 4)  # index(), count(): a scan in C
        return None
    if not isinstance(self, (str, bytes)):
        return None
    _charge(len(self) >> 4)
    name = getattr(fn, "__name__", "")
    if name in ("center", "ljust", "rjust", "zfill"):
        width = _int(args[0]) if args else _int(kwargs.get("width"))
        if width is not None:
            _at_most(width, f"{name}()")
    elif name == "expandtabs":
        size = _int(args[0]) if args else _int(kwargs.get("tabsize", 8))
        tab = "\t" if isinstance(self, str) else b"\t"
        _at_most(len(self) + self.count(tab) * max(size or 0, 0), "expandtabs()")  # type: ignore[arg-type]
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, type(self)) and isinstance(new, type(self)):
            times = self.count(old) if old else len(self) + 1  # type: ignore[arg-type]
            if len(args) > 2 and _int(args[2]) is not None and args[2] >= 0:
                times = min(times, args[2])
            _at_most(len(self) + times * len(new), "replace()")
    elif name == "join" and args:
        items = args[0] if isinstance(args[0], (list, tuple, str)) else _listed(args[0])
        _at_most(len(items) * len(self) + sum(_as_text(x, "join()") for x in items), "join()")
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((_size(v) for v in args[0].values()), default=1)
        _at_most(len(self) * max(longest, 1), "translate()")
    elif name == "format" and isinstance(self, str):
        _format_check(self, args, kwargs)
    elif name == "format_map" and isinstance(self, str) and args:
        _format_check(self, (), args[0])
    return None


def _listed(items: Any) -> list:
    """An iterable read into a list, at most MAX_VALUE items of it."""
    out = []
    for x in items:
        out.append(x)
        if len(out) > MAX_VALUE:
            raise _Bound(f"more than {MAX_VALUE} items, more than a template may build")
    _charge(len(out) >> 1)
    return out


def _filter_checks() -> dict[str, Callable[..., tuple | None]]:
    """Per filter: a check of its arguments (without the environment or
    context a filter may be passed) before it runs."""

    def center(value: Any, width: Any = 80, *_: Any, **__: Any) -> None:
        if _int(width) is not None:
            _at_most(width, "center")

    def indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> None:
        text = _text_of(s, "indent")
        lines = text.count("\n") + 1
        per = _int(width) if _int(width) is not None else _size(width)
        _at_most(len(text) + lines * max(per or 0, 0), "indent")

    def replace(s: Any, old: Any, new: Any, count: Any = None, **__: Any) -> None:
        s, old, new = (_text_of(x, "replace") for x in (s, old, new))
        times = s.count(old) if old else len(s) + 1
        if _int(count) is not None and count >= 0:
            times = min(times, count)
        _at_most(len(s) + times * len(new), "replace")

    def wordwrap(s: Any, width: Any = 79, _b: Any = True, wrapstring: Any = None,
                 *_: Any, **kw: Any) -> None:
        wrap = kw.get("wrapstring", wrapstring)
        w = max(_int(kw.get("width", width)) or 1, 1)
        n = len(_text_of(s, "wordwrap"))
        _at_most(n + (n // w + 1) * _size(wrap or "\n"), "wordwrap")
        _charge(40 * (n // w))  # each line costs Python's textwrap tens of units

    def batch(value: Any, linecount: Any = 1, fill_with: Any = None, **__: Any) -> None:
        if _int(linecount) is not None:
            _at_most(linecount * max(_weight(fill_with), 1), "batch")

    def slice_(value: Any, slices: Any = 1, fill_with: Any = None, **__: Any) -> None:
        if _int(slices) is not None:
            _at_most(slices * max(_weight(fill_with), 1), "slice")

    def format_(value: Any, *args: Any, **kwargs: Any) -> None:
        # The format filter is ``value % (kwargs or args)``.
        if isinstance(value, str):
            _percent_check(value, kwargs or args)

    def tojson(value: Any, indent: Any = None, **__: Any) -> None:
        size = _int(indent) if _int(indent) is not None else _size(indent)
        if indent is not None and size > MAX_JSON_INDENT:
            raise _Bound(f"tojson indent of more than {MAX_JSON_INDENT}")
        weight, depth = _deep(value) if _is_deep(value) else (_weight(value), 1)
        # Indented, every item starts a line as deep as it is nested.
        _at_most(weight * (1 + (size or 0) * depth) if indent is not None else weight, "tojson")

    def pprint(value: Any, *_: Any, **__: Any) -> None:
        weight, depth = _deep(value) if _is_deep(value) else (_weight(value), 1)
        _at_most(weight * (depth + 2), "pprint")

    def join(value: Any, d: Any = "", attribute: Any = None, **__: Any) -> tuple | None:
        items = value if isinstance(value, (list, tuple, str, dict)) else _listed(value)
        _at_most(len(items) * len(_text_of(d, "join")) + sum(_as_text(x, "join") for x in items),
                 "join")
        return (items, d, attribute) if items is not value else None

    return {"center": center, "indent": indent, "replace": replace, "wordwrap": wordwrap,
            "batch": batch, "slice": slice_, "format": format_, "tojson": tojson,
            "pprint": pprint, "join": join}


#: What a filter costs in units of work (MAX_WORK), per character or item
#: of the value it is given: (what is counted, units for each). "chars":
#: the characters of a text (a list's items otherwise); "items": the
#: top-level items; "text": everything through the nesting (the size of its
#: text, refused past MAX_VALUE); "sort": items and text. Measured: a unit is
#: about what Python does for one item of a filter's own loop; C's work on
#: text runs 16 characters to the unit, and regular expressions with Python
#: in them (title, wordwrap, urlize) take a unit or more per character.
_FILTER_COST: dict[str, tuple[str, float]] = {
    **dict.fromkeys(("abs", "attr", "count", "d", "default", "first", "last", "length",
                     "random", "round", "safe", "filesizeformat", "float", "int"),
                    ("free", 0)),
    **dict.fromkeys(("capitalize", "center", "escape", "e", "forceescape", "indent", "lower",
                     "upper", "replace", "reverse", "trim", "truncate", "list", "format"),
                    ("chars", 1 / 16)),
    "striptags": ("chars", 1 / 8), "wordcount": ("chars", 1 / 2), "title": ("chars", 2),
    "wordwrap": ("chars", 2), "urlize": ("chars", 6), "urlencode": ("text", 1),
    **dict.fromkeys(("sum", "batch", "slice", "map", "select", "reject", "selectattr",
                     "rejectattr"), ("items", 1)),
    "items": ("items", 2), "min": ("items", 3), "max": ("items", 3), "unique": ("items", 4),
    "groupby": ("items", 12), "xmlattr": ("text", 16),
    "string": ("text", 1), "tojson": ("text", 1), "join": ("text", 2), "pprint": ("text", 16),
    "sort": ("sort", 8), "dictsort": ("sort", 8),
}
#: Filters that make a text of what they are given (str() of a list).
_TEXT_INPUT = frozenset({"capitalize", "center", "escape", "e", "forceescape", "indent",
                         "lower", "upper", "replace", "trim", "truncate", "striptags",
                         "wordcount", "title", "wordwrap", "urlize", "format", "safe"})
_FILTER_CALL = 4  # units of any filter, whatever it is given
_CALL = 32  # units of a call through the sandbox (a method, dict(), a macro's own)
_LOOKUP = 24  # units of an attribute the sandbox looks up (not a key of the data)
_TEST_CALL = 4  # units of a test (select() calls one for each item)
_FORMAT_FIELD = 16  # units of a field of str.format() in the sandbox
_MACRO_CALL = 100  # units of a macro call or call block: Jinja's costliest step


def _bounded_filter(name: str, fn: Callable[..., Any],
                    check: Callable[..., tuple | None] | None) -> Callable[..., Any]:
    pass_arg = getattr(fn, "jinja_pass_arg", None)
    kind, per = _FILTER_COST.get(name, ("items", 1))
    text_input = name in _TEXT_INPUT

    def bounded(*args: Any, **kwargs: Any) -> Any:
        _step()
        lead, core = (args[:1], args[1:]) if pass_arg is not None else ((), args)
        if check is not None:
            replaced = check(*core, **kwargs)
            if replaced is not None:
                args = (*lead, *replaced)
                core = replaced
        value = core[0] if core else None
        work = _FILTER_CALL
        if text_input and _is_deep(value):  # the filter makes its text first
            work += _as_text(value, f"the {name} filter")
        if kind == "chars" or kind == "items":
            work += int(per * _size(value))
        elif kind == "text":
            work += int(per * _as_text(value, f"the {name} filter"))
        elif kind == "sort":
            work += int(per * _size(value)) + _weight(value)
        _charge(work)
        result = fn(*args, **kwargs)
        return _sized(result, f"the {name} filter made a value", charge=result is not value)

    bounded.__name__ = getattr(fn, "__name__", name)
    if pass_arg is not None:
        bounded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return bounded


def _bounded_test(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A test (``x is in y``, ``select('==', z)``) counts the values it
    compares as work: a filter may call it once per item."""
    pass_arg = getattr(fn, "jinja_pass_arg", None)

    def bounded(*args: Any, **kwargs: Any) -> Any:
        work = _TEST_CALL
        for a in args:
            t = type(a)
            if t is list or t is dict or t is tuple:
                work += _weight(a) >> 4  # `in`, `==`: a scan in C
            elif t is str:
                work += len(a) >> 6
        _charge(work)
        return fn(*args, **kwargs)

    bounded.__name__ = getattr(fn, "__name__", "test")
    if pass_arg is not None:
        bounded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return bounded


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` written out: a container's text is sized before
    it is made."""
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if _is_deep(value):
        _charge(_as_text(value, "writing out a value"))  # str() of it: a unit an item
    return value


def _concat(parts: Iterable[str]) -> str:
    """The text of a macro, a call or filter block, or a ``{% set %}`` block,
    checked before it is joined."""
    if type(parts) is not list:
        parts = _listed(parts)
    total = 0
    for p in parts:
        total += len(p)
    _at_most(total, "the text of a block or macro")
    _charge(total >> 4)
    return "".join(parts)


# -- the environments ---------------------------------------------------------------

_env_lock = threading.Lock()
_environment: Any = None
_text_environment: Any = None


def sandbox() -> Any:
    """The sandboxed Jinja2 environment of expressions (made on first use:
    importing jinja2 costs ~30 ms most runs never need)."""
    global _environment
    if _environment is None:
        with _env_lock:
            if _environment is None:
                _environment = _make_environment(text=False)
    return _environment


def text_sandbox() -> Any:
    """The Template node's environment: the same sandbox and bounds; a
    missing key reads as empty text."""
    global _text_environment
    if _text_environment is None:
        with _env_lock:
            if _text_environment is None:
                _text_environment = _make_environment(text=True)
    return _text_environment


def _make_environment(*, text: bool) -> Any:
    from jinja2 import ChainableUndefined, nodes
    from jinja2.compiler import CodeGenerator, operators, optimizeconst
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    bounds._NAMESPACE = Namespace  # the sizes tell a namespace by its type

    class BoundedCodeGenerator(CodeGenerator):
        # `a ~ b`, list, tuple and dict literals, and the two sides of a
        # comparison go through the environment, so that what they build or
        # compare is sized (Jinja writes them as Python's own).
        def visit_Concat(self, node: Any, frame: Any) -> None:  # noqa: N802 - Jinja's visitor
            self.write("environment.sb_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

        def _literal(self, visit: Any, node: Any, frame: Any, items: list) -> None:
            if all(isinstance(x, nodes.Const) for x in items):
                visit(self, node, frame)
                return
            self.write("environment.sb_built(")
            visit(self, node, frame)
            self.write(")")

        def visit_List(self, node: Any, frame: Any) -> None:  # noqa: N802
            self._literal(CodeGenerator.visit_List, node, frame, node.items)

        def visit_Tuple(self, node: Any, frame: Any) -> None:  # noqa: N802
            if node.ctx != "load":  # a loop's or a set's targets
                CodeGenerator.visit_Tuple(self, node, frame)
                return
            self._literal(CodeGenerator.visit_Tuple, node, frame, node.items)

        def visit_Dict(self, node: Any, frame: Any) -> None:  # noqa: N802
            self._literal(CodeGenerator.visit_Dict, node, frame,
                          [x for pair in node.items for x in (pair.key, pair.value)])

        def _operand(self, node: Any, frame: Any) -> None:
            if isinstance(node, nodes.Const):
                self.visit(node, frame)
                return
            self.write("environment.sb_compared(")
            self.visit(node, frame)
            self.write(")")

        def visit_ExprStmt(self, node: Any, frame: Any) -> None:  # noqa: N802
            if isinstance(node.node, nodes.EnvironmentAttribute) \
                    and node.node.name in ("sb_step", "sb_call_step"):
                # The step of a loop turn or macro call (_add_steps): a plain
                # call, not one through the sandbox's call().
                self.newline(node)
                self.write(f"environment.{node.node.name}({getattr(node, 'sb_cost', 1)})")
                return
            CodeGenerator.visit_ExprStmt(self, node, frame)

        @optimizeconst
        def visit_Compare(self, node: Any, frame: Any) -> None:  # noqa: N802
            self.write("(")
            self._operand(node.expr, frame)
            for op in node.ops:
                self.write(f" {operators[op.op]} ")
                self._operand(op.expr, frame)
            self.write(")")

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(_OPS)
        code_generator_class = BoundedCodeGenerator
        concat = staticmethod(_concat)  # joins the text of blocks and macros

        def getattr(self, obj: Any, attribute: str) -> Any:
            if type(obj) is Namespace:
                # What a template stored: read at once (Jinja's own checks of
                # a namespace's attribute take tens of microseconds).
                attrs = obj._Namespace__attrs
                if attribute in attrs:
                    return attrs[attribute]
            # A key of the data wins over a dict method: msg.payload.items is
            # the order's items, not dict.items.
            if isinstance(obj, dict):
                if attribute in obj:
                    return obj[attribute]
                if isinstance(obj, _Env) and attribute not in _DICT_METHODS:
                    why = obj.why_not(attribute)
                    if why:
                        return self.undefined(why, obj=obj, name=attribute)
            _charge(_LOOKUP)
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            t = type(obj)
            if t is dict or t is list:
                try:
                    return obj[argument]
                except (KeyError, IndexError, TypeError):
                    pass
            if isinstance(obj, _Env) and argument not in obj:
                why = obj.why_not(argument)
                if why:
                    return self.undefined(why, obj=obj, name=argument)
            _charge(_LOOKUP)
            return super().getitem(obj, argument)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return _binop(operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            _step()
            replaced = _call_check(__obj, args, kwargs)
            if replaced is not None:
                args = replaced
            _charge(_CALL)
            result = super().call(__context, __obj, *args, **kwargs)
            if __obj is dict or __obj is Namespace:  # built from what it was given
                if __obj is Namespace:
                    _charge(_CALL)  # a namespace costs twice a call (Jinja's checks of it)
                return _built(result, "dict() or namespace()")
            # What a method of a list or dict gives is found there, not made.
            return _sized(result, charge=not isinstance(getattr(__obj, "__self__", None),
                                                        (list, tuple, dict)))

        def sb_concat(self, parts: tuple) -> str:
            total, work = 0, 0
            for p in parts:
                if type(p) is str:
                    total += len(p)
                else:
                    n = _as_text(p, "joining texts with ~")
                    total += n
                    work += n if _is_deep(p) else 0  # str() of a list: a unit an item
            _at_most(total, "joining texts with ~")
            _charge(work + (total >> 4))
            return "".join([p if type(p) is str else str(p) for p in parts])

        def sb_built(self, value: Any) -> Any:
            return _built(value, "a list or mapping")

        def sb_compared(self, value: Any) -> Any:
            # Comparing runs in C: 64 characters or 8 items to the unit.
            t = type(value)
            if t is str:
                if len(value) > 1024:
                    _charge(len(value) >> 6)
            elif t is list or t is dict or t is tuple:
                _charge(_weight(value) >> 3)
            return value

        def sb_step(self, cost: int = 1) -> None:
            """Called at the start of every loop turn, with what its body
            costs."""
            _step()
            if cost > 1:
                _charge(cost)

        def sb_call_step(self, cost: int = 1) -> None:
            """Called at the start of every macro call and call block."""
            _step()
            _charge(_MACRO_CALL + cost)

    env = Sandbox(undefined=ChainableUndefined if text else _undefined_class(),
                  autoescape=False, loader=None, auto_reload=False, keep_trailing_newline=True,
                  cache_size=0, finalize=_finalize)
    env.globals.pop("lipsum", None)  # makes pages of text from a number
    checks = _filter_checks()
    env.filters = {name: _bounded_filter(name, fn, checks.get(name))
                   for name, fn in env.filters.items()}
    env.tests = {name: _bounded_test(fn) for name, fn in env.tests.items()}
    return env


# -- compiling --------------------------------------------------------------------

class Compiled:
    """One template, compiled: shared by every param with the same text."""

    __slots__ = ("text", "template", "native", "roots")

    def __init__(self, text: str, template: Template, native: bool, roots: frozenset[str]):
        self.text = text
        self.template = template
        self.native = native  # one expression: the result is its own value
        self.roots = roots  # which of msg, env, flow, global it reads


def _syntax_text(exc: Any) -> str:
    line = f" (line {exc.lineno})" if getattr(exc, "lineno", None) and "\n" in (exc.source or "") \
        else ""
    return f"template syntax: {exc.message}{line}"


_TOO_DEEP = "the template nests too deeply"


@lru_cache(maxsize=512)
def compile_template(text: str) -> Compiled:
    """Compile an expression's template (cached by text). Raises
    ExpressionError with the problem, without the param's name."""
    return _compile(text, text_mode=False)


@lru_cache(maxsize=256)
def compile_text_template(text: str) -> Compiled:
    """Compile a Template node's template (cached by text): its names are
    the message's keys and ``msg``. Raises ExpressionError."""
    return _compile(text, text_mode=True)


def _compile(text: str, *, text_mode: bool) -> Compiled:
    from jinja2 import TemplateSyntaxError, meta, nodes

    if not isinstance(text, str):
        raise ExpressionError("an expression must be text")
    limit = MAX_TEXT_TEMPLATE_CHARS if text_mode else MAX_TEMPLATE_CHARS
    if len(text) > limit:
        raise ExpressionError(f"the template has {len(text)} characters, more than the "
                              f"{limit} allowed")
    env = text_sandbox() if text_mode else sandbox()
    stripped = text.strip()
    try:
        ast = env.parse(text)
        _check_tree(ast, internals=not text_mode)
        names = meta.find_undeclared_variables(ast)  # also finds an unknown filter or test
    except TemplateSyntaxError as exc:
        raise ExpressionError(_syntax_text(exc)) from None
    except RecursionError:
        raise ExpressionError(_TOO_DEEP) from None
    except (ValueError, OverflowError) as exc:  # a number of more than 4,300 digits
        raise ExpressionError(f"template syntax: {exc}") from None
    roots: frozenset[str] = frozenset()
    native_expr = None
    if not text_mode:
        unknown = sorted(n for n in names if n not in ROOTS and n not in env.globals)
        if unknown:
            name = unknown[0]
            hint = f" (did you mean msg.{name}?)" if name in ("payload", "topic") else ""
            raise ExpressionError(f"unknown name '{name}'{hint}: a template reads msg, env, "
                                  "flow and global")
        roots = frozenset(n for n in names if n in ROOTS)
        if stripped.startswith("{{") and stripped.endswith("}}"):
            body = ast.body if stripped == text else env.parse(stripped).body
            if len(body) == 1 and isinstance(body[0], nodes.Output) \
                    and len(body[0].nodes) == 1 \
                    and not isinstance(body[0].nodes[0], nodes.TemplateData):
                native_expr = body[0].nodes[0]
    # Constants are worked out (by _check_constants, then by Jinja's own
    # optimizer) under the bounds, with compiling's share of work.
    token = _STATE.set(_Render({}, folding=True))
    try:
        return _compiled(env, ast, text, native_expr, roots)
    finally:
        _STATE.reset(token)


def _compiled(env: Any, ast: Any, text: str, native_expr: Any, roots: frozenset[str]) -> Compiled:
    from jinja2 import TemplateSyntaxError, nodes

    _check_constants(ast, env, text)
    _add_steps(ast)
    try:
        if native_expr is not None:
            tree = nodes.Template([nodes.Assign(nodes.Name("result", "store"), native_expr,
                                                lineno=1)], lineno=1)
            tree.set_environment(env)
            template = env.from_string(tree)
        else:
            template = env.from_string(ast)
    except TemplateSyntaxError as exc:  # found only when compiling
        raise ExpressionError(_syntax_text(exc)) from None
    except _Bound as exc:  # a constant part broke a bound while Jinja folded it
        raise ExpressionError(str(exc)) from None
    except RecursionError:
        raise ExpressionError(_TOO_DEEP) from None
    return Compiled(text, template, native_expr is not None, roots)


def _check_tree(ast: Any, *, internals: bool) -> None:
    from jinja2 import nodes

    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        raise ExpressionError("a template cannot include, import or extend another template "
                              f"(line {node.lineno})")
    if not internals:
        return  # the Template node's: reaching one gives nothing (the sandbox says so)
    for node in ast.find_all(nodes.Getattr):
        if node.attr.startswith("__"):
            raise ExpressionError(f"'{node.attr}' is not reachable from a template: names "
                                  "starting with __ are internals")
    for node in ast.find_all(nodes.Getitem):
        arg = node.arg
        if isinstance(arg, nodes.Const) and isinstance(arg.value, str) \
                and arg.value.startswith("__"):
            raise ExpressionError(f"'{arg.value}' is not reachable from a template: names "
                                  "starting with __ are internals")


_NO = object()  # not a constant


def _check_constants(ast: Any, env: Any, text: str) -> None:
    """Work out the constant parts of a template (``2 ** 999999``,
    ``'x' * 400000000``, ``'{:>400000000}'.format('x')``) under the render's
    bounds, so that one that cannot be built is an error of the template,
    found when the flow is checked rather than when a message comes. Other
    errors of a constant (``1 / 0``) are left to the render, which names
    them."""
    from jinja2 import nodes
    from jinja2.nodes import EvalContext

    memo: dict[int, Any] = {}
    eval_ctx = EvalContext(env)

    def attempt(work: Callable[[], Any]) -> Any:
        try:
            return work()
        except _Bound:
            raise
        except Exception:  # noqa: BLE001 - the render will say what is wrong
            return _NO

    def fold(node: Any) -> Any:
        key = id(node)
        if key not in memo:
            memo[key] = _fold(node)
        return memo[key]

    def folded(items: Iterable[Any]) -> list | None:
        values = [fold(x) for x in items]
        return None if any(v is _NO for v in values) else values

    def _fold(node: Any) -> Any:
        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, nodes.List) or (isinstance(node, nodes.Tuple) and node.ctx == "load"):
            items = folded(node.items)
            if items is None:
                return _NO
            return _built(items if isinstance(node, nodes.List) else tuple(items),
                          "a list or mapping")
        if isinstance(node, nodes.Dict):
            keys, values = folded(p.key for p in node.items), folded(p.value for p in node.items)
            if keys is None or values is None:
                return _NO
            return attempt(lambda: _built(dict(zip(keys, values, strict=True)), "a list or mapping"))
        if isinstance(node, nodes.BinExpr) and node.operator in _OPS:
            left, right = fold(node.left), fold(node.right)
            if left is _NO or right is _NO:
                return _NO
            return attempt(lambda: _binop(node.operator, left, right))
        if isinstance(node, (nodes.Neg, nodes.Pos)):
            value = fold(node.node)
            if value is _NO:
                return _NO
            return attempt(lambda: -value if isinstance(node, nodes.Neg) else +value)
        if isinstance(node, nodes.Concat):
            parts = folded(node.nodes)
            return _NO if parts is None else attempt(lambda: env.sb_concat(tuple(parts)))
        if isinstance(node, (nodes.Filter, nodes.Call)) and (node.dyn_args or node.dyn_kwargs):
            return _NO
        if isinstance(node, nodes.Filter) and node.node is not None:
            value, args = fold(node.node), folded(node.args)
            kwargs = folded(k.value for k in node.kwargs)
            fn = env.filters.get(node.name)
            if value is _NO or args is None or kwargs is None or fn is None:
                return _NO
            named = {k.key: v for k, v in zip(node.kwargs, kwargs, strict=True)}
            pass_arg = getattr(fn, "jinja_pass_arg", None)
            lead: tuple = ()
            if pass_arg is not None:
                if pass_arg.name == "context":
                    return _NO
                lead = (eval_ctx,) if pass_arg.name == "eval_context" else (env,)
            return attempt(lambda: fn(*lead, value, *args, **named))
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) \
                and not node.node.attr.startswith("_"):
            target, args = fold(node.node.node), folded(node.args)
            kwargs = folded(k.value for k in node.kwargs)
            if isinstance(target, str) and args is not None and kwargs is not None:
                method = getattr(target, node.node.attr, None)
                named = {k.key: v for k, v in zip(node.kwargs, kwargs, strict=True)}
                if callable(method):
                    attempt(lambda: _call_check(method, tuple(args), named))
        return _NO

    try:
        for node in ast.find_all(nodes.Expr):
            try:
                fold(node)
            except _Bound as exc:
                line = f" (line {node.lineno})" if "\n" in text else ""
                raise ExpressionError(f"{exc}{line}") from None
    except _NotFolded:
        pass  # the rest is bounded when rendering
    except RecursionError:
        raise ExpressionError(_TOO_DEEP) from None


def _add_steps(ast: Any) -> None:
    """Count a step at the start of every loop turn, macro call and call
    block, so that nested loops over data end at MAX_STEPS however little
    they do each turn; and count as work what the turn's own body is (a
    unit for each of its parts: names, operators, outputs, about what one
    takes), so that a long body in a long loop ends at MAX_WORK."""
    from jinja2 import nodes

    for node in list(ast.find_all((nodes.For, nodes.Macro, nodes.CallBlock))):
        name = "sb_step" if isinstance(node, nodes.For) else "sb_call_step"
        tick = nodes.ExprStmt(nodes.EnvironmentAttribute(name), lineno=node.lineno)
        tick.set_lineno(node.lineno)
        tick.sb_cost = 1 + sum(_parts(x) for x in node.body)
        node.body.insert(0, tick)


def _parts(node: Any) -> int:
    """The parts of a template's tree below ``node``, a loop or macro inside
    it counting as one (each counts its own turns)."""
    from jinja2 import nodes

    count, todo = 0, [node]
    while todo:
        n = todo.pop()
        count += 1
        if n is not node and isinstance(n, (nodes.For, nodes.Macro, nodes.CallBlock)):
            continue
        todo.extend(n.iter_child_nodes())
    return count


# -- rendering ----------------------------------------------------------------------

#: A value a template only passes on (``{{ msg.payload }}``) may be bigger
#: than one it builds, but not without end: a message whose lists refer to
#: each other (a code node's) could stand for more than memory holds.
_RESULT_CAP = 16 * MAX_VALUE


def _render(compiled: Compiled, roots: dict[str, Any]) -> Any:
    """Render under the bounds. Raises _Bound, RenderDeadline, or what the
    template raised."""
    deadline = RUN_DEADLINE.get()
    if deadline is not None and _now() > deadline:
        raise RenderDeadline("the run's time limit passed before the template was rendered")
    state = _Render(roots, deadline)
    token = _STATE.set(state)
    try:
        template = compiled.template
        ctx = template.new_context(roots)
        if compiled.native:
            for _ in template.root_render_func(ctx):
                pass
            value = ctx.vars.get("result")
            from jinja2 import Undefined

            if isinstance(value, Undefined) and not (
                    _placeholder is not None and isinstance(value, _placeholder)):
                value._fail_with_undefined_error()
            if _is_deep(value) and _deep(value, _RESULT_CAP)[0] > _RESULT_CAP:
                raise _Bound(f"the result has more than {_RESULT_CAP} characters or items "
                             "(counted through every level of nesting)")
            return _sized(value, "the result")
        parts: list[str] = []
        total = 0
        for chunk in template.root_render_func(ctx):
            total += len(chunk)
            if total > MAX_VALUE:
                raise _Bound(f"the template's text passed {MAX_VALUE} characters")
            parts.append(chunk)
        _charge(total >> 4)
        return "".join(parts)
    except RecursionError:
        raise _Bound("the template calls itself too deeply") from None
    except MemoryError:
        raise _Bound("the template ran out of memory") from None
    finally:
        _STATE.reset(token)


class Expression:
    """One param's template, compiled once; ``render(msg)`` gives the
    param's value for a message, coerced to the param's type."""

    __slots__ = ("spec", "compiled", "context")

    def __init__(self, spec: ParamSpec, text: Any, context: ExpressionContext | None = None):
        self.spec = spec
        why = problem(spec, text)
        if why is not None:
            raise ExpressionError(f"params.{spec.name}: {why}")
        try:
            self.compiled = compile_template(text)
        except ExpressionError as exc:
            raise ExpressionError(f"params.{spec.name}: {exc}") from None
        self.context = context

    @property
    def text(self) -> str:
        return self.compiled.text

    def render(self, msg: Mapping | None) -> Any:
        """The value for ``msg``; None when the template gives none (then
        the param's default applies, as for an unset fixed value): a blank
        template, a null, or blank text for a param that is not text."""
        if not self.compiled.text.strip():
            return None
        try:
            value = self.render_raw(msg)
            if _placeholder is not None and isinstance(value, _placeholder):
                # A preview's flow variable, alone: text shows it as
                # ‹flow.name›; any other type has no value to show.
                if self.spec.type not in (ParamType.STR, ParamType.ENUM):
                    raise _Bound(value._undefined_hint)
                return str(value)
            return coerce(value, self.spec)
        except _Bound as exc:
            raise ExpressionError(f"params.{self.spec.name}: {exc}") from None

    def render_raw(self, msg: Mapping | None) -> Any:
        try:
            return _render(self.compiled, self._roots(msg))
        except (_Bound, ExpressionError, RenderDeadline):
            raise
        except Exception as exc:
            raise _Bound(_render_error(exc)) from None

    def _roots(self, msg: Mapping | None) -> dict[str, Any]:
        used = self.compiled.roots
        context = self.context or default_context()
        roots: dict[str, Any] = {}
        if "msg" in used:
            roots["msg"] = {k: v for k, v in msg.items() if k not in RESERVED_KEYS} \
                if msg else {}
        if "env" in used:
            roots["env"] = context.env
        if "flow" in used:
            roots["flow"] = _flow_placeholder("flow") if context.preview \
                else context.flow_variables()
        if "global" in used:
            roots["global"] = read_global_variables()
        return roots


class TextTemplate:
    """A Template node's template: it sees the message's keys (``{{
    payload.name }}``) and ``msg``, reads a missing key as empty text and
    gives text, with the sandbox and the bounds of every template.
    ``render`` raises ExpressionError with what is wrong (and
    RenderDeadline past the run's deadline)."""

    __slots__ = ("compiled",)

    def __init__(self, text: Any) -> None:
        if not isinstance(text, str):
            raise ExpressionError("a template must be text")
        self.compiled = compile_text_template(text)

    @property
    def text(self) -> str:
        return self.compiled.text

    def render(self, msg: Mapping) -> str:
        roots = dict(msg)
        roots["msg"] = msg
        try:
            return _render(self.compiled, roots)
        except (ExpressionError, RenderDeadline):
            raise
        except _Bound as exc:
            raise ExpressionError(str(exc)) from None
        except Exception as exc:
            raise ExpressionError(str(exc).strip() or type(exc).__name__) from None


def _render_error(exc: Exception) -> str:
    from jinja2 import TemplateError

    text = str(exc).strip()
    if isinstance(exc, TemplateError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce(value: Any, spec: ParamSpec) -> Any:
    """A template's value as the param's type. None stays None (the
    param's default applies). Raises _Bound with what was wrong."""
    t = spec.type
    if value is None or (isinstance(value, str) and not value.strip()
                         and t not in (ParamType.STR, ParamType.SECRET)):
        return None
    if t in (ParamType.STR, ParamType.ENUM, ParamType.SECRET):
        if isinstance(value, str):
            text = value
        elif isinstance(value, (dict, list, tuple, bool)):
            text = json.dumps(_jsonable(value), ensure_ascii=False)
        else:
            text = str(value)
        if t is ParamType.ENUM and spec.choices and text not in spec.choices:
            raise _Bound(f"the template gave {_preview(text)}, which is not one of "
                         f"{', '.join(spec.choices)}")
        return text
    if t is ParamType.INT:
        if _int(value) is not None:
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,18}\s*", value):
            return int(value)
        raise _Bound(f"the template gave {_preview(value)}, which is not a whole number")
    if t is ParamType.FLOAT:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            result = float(value)
        else:
            try:
                result = float(value) if isinstance(value, str) else math.nan
            except ValueError:
                result = math.nan
        if not math.isfinite(result):
            raise _Bound(f"the template gave {_preview(value)}, which is not a number")
        return result
    if t is ParamType.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _Bound(f"the template gave {_preview(value)}, which is not true or false")
    return deep_copy(_jsonable(value))  # JSON


def _jsonable(value: Any, seen: dict[int, Any] | None = None) -> Any:
    """A template's value as JSON data: tuples and ranges become lists; a
    value that has no JSON form (a macro, a cycler) is an error. A list of
    plain values is taken as it is (checked in C), and a list met again is
    the one made the first time."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if seen is None:
        seen = {}
    key = id(value)
    if key in seen:
        return seen[key][1]
    if type(value) is list and Counter(map(type, value)).keys() <= _JSON_PLAIN:
        out: Any = value
    elif isinstance(value, dict):
        out = {str(k): _jsonable(v, seen) for k, v in value.items()}
    elif isinstance(value, (list, tuple, range)):
        out = [_jsonable(v, seen) for v in value]
    else:
        raise _Bound(f"the template gave a {type(value).__name__}, which has no JSON form")
    seen[key] = (value, out)  # the value is kept so that its id is not reused meanwhile
    return out


_JSON_PLAIN = frozenset({str, int, float, bool, type(None)})


def problem(spec: ParamSpec, text: Any) -> str | None:
    """Why ``text`` cannot be this param's expression (for validation), or
    None."""
    if spec.secret:
        return ("a secret cannot be an expression: it must name an environment variable or a "
                "keyring entry")
    if not isinstance(text, str):
        return "an expression must be text, e.g. \"Hello {{ msg.payload.name }}\""
    try:
        compile_template(text)
    except ExpressionError as exc:
        return str(exc)
    return None

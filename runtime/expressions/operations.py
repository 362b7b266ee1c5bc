"""What a template's operations cost and build, checked before they run:
the operators (``_binop``: ``*``, ``+``, ``**``, ``%``), calls of a text's
methods that can build more than they are given (``_call_check``:
``center``, ``replace``, ``join``, ``format``, ...), every filter and test
(``_bounded_filter``, ``_bounded_test``, with ``_FILTER_COST``), what a
template writes out (``_finalize``) and the text of its blocks
(``_concat``). The sandboxed environment routes a template's operations
through them; the bounds they count against are in ``bounds``."""

from __future__ import annotations

import operator
import re
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .bounds import (
    _INT_BITS,
    MAX_INT_DIGITS,
    MAX_JSON_INDENT,
    MAX_VALUE,
    _as_text,
    _at_most,
    _Bound,
    _charge,
    _charge_made,
    _check_int,
    _deep,
    _int,
    _int_weight,
    _is_deep,
    _size,
    _sized,
    _step,
    _text_of,
    _weight,
)

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

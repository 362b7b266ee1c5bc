"""The bounds of every template: the limits, the errors a render ends with,
the counts of one render (``_Render``: steps and work, and its run's
deadline), and how big a value is through its nesting (``_weight``,
``_deep``), with the checks that use it (``_at_most``, ``_sized``,
``_check_int``, ``_as_text``). What counts against the bounds (the
operators, calls and filters) is in ``operations``; see the package's
docstring for the bounds themselves."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable
from contextvars import ContextVar
from itertools import chain
from typing import Any

# -- the limits -------------------------------------------------------------------

MAX_TEMPLATE_CHARS = 10_000
#: A Template node's template may be a whole page (a mail body, a report).
MAX_TEXT_TEMPLATE_CHARS = 100_000
#: Most characters (text) or items (lists, mappings) of any value one render
#: builds, its result included, counted through every level of nesting.
MAX_VALUE = 1_000_000
#: Most steps of one render: loop turns, macro calls, calls and filters.
MAX_STEPS = 100_000
#: Most units of work of one render. A unit is about one item handled in
#: Python (a filter's turn over a list; a macro call counts 100), or 16
#: characters or 2 list slots made or scanned in C, so that the bound holds
#: both the time of a render (about a second at worst) and what it
#: allocates on the way (a few tens of MB); see _FILTER_COST.
MAX_WORK = 2_000_000
#: The work compiling may spend on a template's constants (at most about a
#: tenth of a second; what is allocated counts at C's rate then, since the
#: values are dropped once compiled): validating a flow stays quick however
#: its templates look.
FOLD_WORK = 250_000
#: Most digits of a whole number (Python's own limit for turning one into
#: text, so that any number a template makes can be shown).
MAX_INT_DIGITS = 4_300
#: Largest indent ``tojson`` may use.
MAX_JSON_INDENT = 16


#: The time.monotonic() past which renders stop (the run's --timeout); the
#: engine sets it for the run's tasks. None: no deadline.
RUN_DEADLINE: ContextVar[float | None] = ContextVar("switchboard_run_deadline", default=None)

_INT_LIMIT = 10 ** MAX_INT_DIGITS
_INT_BITS = _INT_LIMIT.bit_length()
_BIG = 1 << 64
_CHECK_WORK = 100_000  # work between two looks at the clock (with a deadline)


# -- the errors a template ends with ----------------------------------------------

class ExpressionError(ValueError):
    """A template that cannot be compiled or rendered; the text names the
    param (``params.subject: ...``) and what is wrong, never a traceback.
    (BoundParam turns it into the NodeConfigError a run reports: this module
    imports nothing of runtime.node, which imports it.)"""


class RenderDeadline(Exception):
    """A render stopped because its run's deadline (``--timeout``) passed.
    Not a ValueError, so that neither a param nor a node turns it into an
    error of its own: it reaches the engine, which ends the run as timed out
    with the node's message counted as unfinished."""


class _Bound(Exception):
    """A bound was hit inside a render (turned into an ExpressionError)."""


class _NotFolded(Exception):
    """Compiling spent its share of work on constants: what is left of them
    is worked out (and bounded) when rendering."""


def _preview(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


# -- the state of one render ---------------------------------------------------

class _Render:
    __slots__ = ("steps", "work", "check_at", "roots", "weights", "deadline", "folding")

    def __init__(self, roots: dict[str, Any], deadline: float | None = None, *,
                 folding: bool = False) -> None:
        self.steps = MAX_STEPS
        # Working out a template's constants when it is compiled gets a
        # small part of the budget: past it, the rest is left to renders.
        self.work = FOLD_WORK if folding else MAX_WORK
        self.check_at = self.work - _CHECK_WORK
        self.folding = folding
        self.roots = roots
        # id -> (value, weight, depth) of the containers weighed so far
        # (the value is kept so that its id cannot be reused meanwhile).
        self.weights: dict[int, tuple[Any, int, int]] = {}
        self.deadline = deadline


_STATE: ContextVar[_Render | None] = ContextVar("switchboard_template_render", default=None)


def _step() -> None:
    state = _STATE.get()
    if state is not None:
        state.steps -= 1
        if state.steps < 0:
            raise _Bound(f"the template ran more than {MAX_STEPS} steps (loop turns, calls and "
                         "filters); it is bounded so that no message can keep a node busy")
        if state.deadline is not None and not state.steps & 1023:
            _check_deadline(state)


def _charge(n: int) -> None:
    """Count ``n`` units of work of the render under way."""
    state = _STATE.get()
    if state is not None:
        state.work -= n
        if state.work < state.check_at:
            _worked(state)


def _worked(state: _Render) -> None:
    if state.work < 0 and state.folding:
        raise _NotFolded
    if state.work < 0:
        raise _Bound(f"the template did more than {MAX_WORK} units of work (characters and "
                     "items built, copied, compared or turned into text); it is bounded so that "
                     "no message can keep a node busy")
    state.check_at = state.work - _CHECK_WORK
    if state.deadline is not None:
        _check_deadline(state)


def _clock() -> float:
    """The clock deadlines are read on: ``runtime.expressions._now`` (the
    engine's, time.monotonic), looked up on the package each time (once a
    render, then every 1,024 steps or 100,000 units of work, and only with a
    deadline), so that a clock set there is the one every render reads."""
    return sys.modules[__package__]._now()


def _check_deadline(state: _Render) -> None:
    if state.deadline is not None and _clock() > state.deadline:
        raise RenderDeadline("the run's time limit passed while the template was rendering")


# -- sizes: how big a value is, through its nesting -------------------------------

_NAMESPACE: Any = None  # jinja2.utils.Namespace, set when the environment is made
_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))
_ITEMS_VIEW = _VIEWS[2]
_DEEP = (list, tuple, dict, set, frozenset, *_VIEWS)


def _use_namespace(namespace: type) -> None:
    """jinja2's Namespace, the one container a template can change: the
    sizes tell it by its type (set when the environment is made, so that
    importing this module does not import jinja2)."""
    global _NAMESPACE
    _NAMESPACE = namespace


def _size(value: Any) -> int:
    """Characters or items at the top level."""
    if type(value) is _NAMESPACE:
        return 0
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset, range)):
        return len(value)
    return 0


def _int_weight(n: int) -> int:
    return 1 if -_BIG < n < _BIG else n.bit_length() * 3 // 10 + 1  # about its digits


def _is_deep(value: Any) -> bool:
    t = type(value)
    if t is list or t is dict or t is tuple or t is _NAMESPACE:
        return True
    if t is str or t is int or t is float or t is bool or value is None:
        return False
    # (A namespace's isinstance() runs Python code: its type is asked first.)
    return isinstance(value, _DEEP) or (_NAMESPACE is not None and isinstance(value, _NAMESPACE))


def _mutable(value: Any) -> bool:
    """A namespace: the one container a template can change."""
    return type(value) is _NAMESPACE


def _flat(value: Any) -> int | None:
    """What the items of a long list or tuple of plain texts or numbers
    weigh, counted in C; None for any other (the walk counts those)."""
    if type(value) not in (list, tuple) or len(value) < 256:
        return None
    kinds = Counter(map(type, value))
    if kinds.keys() <= _SMALL:
        if int in kinds and not (kinds.keys() == {int} and -_BIG < min(value)
                                 and max(value) < _BIG):
            return None  # big whole numbers weigh their digits: the walk counts them
        _charge(len(value) >> 4)
        return len(value)
    if kinds.keys() == {str}:
        _charge(len(value) >> 4)
        return sum(map(len, value))
    return None


_SMALL = frozenset({int, float, bool, type(None)})


def _small(value: Any) -> int | None:
    """What a short list, tuple or dict of plain texts and numbers weighs
    (most of what templates build: the walk's frames cost more than these);
    None for any other."""
    t = type(value)
    if t is dict or t is _NAMESPACE:
        if t is _NAMESPACE:
            value = value._Namespace__attrs
        if len(value) > 16:
            return None
        items: Iterable[Any] = chain.from_iterable(value.items())
    elif t is list or t is tuple:
        if len(value) > 16:
            return None
        items = value
    else:
        return None
    total = 1
    for x in items:
        tx = type(x)
        if tx is str:
            total += len(x)
        elif tx is float or tx is bool or x is None or (tx is int and -_BIG < x < _BIG):
            total += 1
        else:
            return None
    return total


def _children(value: Any) -> Iterable[Any]:
    if type(value) is _NAMESPACE:
        return chain.from_iterable(value._Namespace__attrs.items())
    if isinstance(value, dict):
        return chain.from_iterable(value.items())
    if type(value) is _ITEMS_VIEW:
        return chain.from_iterable(value)
    return iter(value)


def _weight(value: Any) -> int:
    """Characters or items of a value through every level of nesting (a
    list held three times in another counts three times): about the size of
    its text. Past MAX_VALUE the count stops (the result is then more)."""
    t = type(value)
    if t is str:
        return len(value)
    if t is int:
        return _int_weight(value)
    if t is float or t is bool or value is None:
        return 1
    if _is_deep(value):
        return _deep(value)[0]
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    return 1


def _deep(value: Any, cap: int = MAX_VALUE) -> tuple[int, int]:
    """(weight, depth) of a container; iterative, so depth costs no stack.
    What it visits is work of the render; containers it has weighed are
    remembered for the rest of the render (they cannot change in the
    sandbox), except those holding a namespace, which can."""
    state = _STATE.get()
    cache = state.weights if state is not None else None
    if cache is not None:
        hit = cache.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1], hit[2]
    small = _small(value)
    if small is not None:
        return small, 1
    flat = _flat(value)
    if flat is not None:
        if cache is not None and flat >= 64:
            cache[id(value)] = (value, flat + 1, 1)
        return flat + 1, 1
    # A frame: [container, its children left, weight before it, deepest
    # child, whether a namespace is below it]. A container counts 1 and its
    # items what they weigh: [1, 2, 3] weighs 4.
    total = 1
    frames: list[list[Any]] = [[value, _children(value), 0, 0, _mutable(value)]]
    visits = 0
    root_depth = len(frames)  # when the count stops early
    while frames and total <= cap:
        frame = frames[-1]
        below = None
        for child in frame[1]:
            visits += 1
            t = type(child)
            if t is str:
                total += len(child)
            elif t is int:
                total += 1 if -_BIG < child < _BIG else _int_weight(child)
            elif t is float or t is bool or child is None:
                total += 1
            elif _is_deep(child):
                hit = cache.get(id(child)) if cache is not None else None
                if hit is not None and hit[0] is child:
                    total += hit[1]
                    if hit[2] > frame[3]:
                        frame[3] = hit[2]
                elif (small := _small(child)) is not None:
                    total += small
                    if frame[3] < 1:
                        frame[3] = 1
                    if type(child) is _NAMESPACE:
                        frame[4] = True
                elif (flat := _flat(child)) is not None:
                    total += flat + 1
                    if cache is not None:
                        cache[id(child)] = (child, flat + 1, 1)
                    if frame[3] < 1:
                        frame[3] = 1
                else:
                    below = child
                    break
            elif isinstance(child, (str, bytes, bytearray)):
                total += len(child)
            else:
                total += 1
            if total > cap:
                break
        if total > cap:
            break
        if below is not None:
            frames.append([below, _children(below), total, 0, _mutable(below)])
            total += 1
            continue
        obj, _, before, deepest, mutable = frames.pop()
        depth = deepest + 1
        if not frames:
            root_depth = depth
        else:
            parent = frames[-1]
            if depth > parent[3]:
                parent[3] = depth
            if mutable:
                parent[4] = True
        if cache is not None and not mutable and total - before >= 64:
            cache[id(obj)] = (obj, total - before, depth)
    if state is not None:
        _charge(visits)
    return total, root_depth


def _at_most(n: float, what: str) -> None:
    if n > MAX_VALUE:
        raise _Bound(f"{what} would make about {_count(n)} characters or items, more than the "
                     f"{MAX_VALUE} a template may build")


def _count(n: float) -> str:
    return str(int(n)) if n < 10 ** 30 else f"{n:.3g}"


def _check_int(n: int) -> None:
    if not -_BIG < n < _BIG and not -_INT_LIMIT < n < _INT_LIMIT:
        raise _Bound(f"a whole number of more than {MAX_INT_DIGITS} digits, the most a template "
                     "may make")


def _sized(value: Any, what: str = "a value", charge: bool = True) -> Any:
    """A result checked at its top level (the operations that could nest
    more than they were given are checked before they run), and what making
    it cost counted as work (``charge``: it was made, not found)."""
    t = type(value)
    if t is int:
        _check_int(value)
        return value
    n = len(value) if t is str or t is list or t is dict or t is tuple else _size(value)
    if n > MAX_VALUE:
        raise _Bound(f"{what} of {n} characters or items, more than the {MAX_VALUE} a "
                     "template may build")
    if n and charge:
        _charge_made(value, n)
    return value


def _charge_made(value: Any, n: int) -> None:
    """Making a value of ``n`` characters (1/16 unit each) or items (list
    slots, 1/2 unit each): what a render allocates is bounded by MAX_WORK."""
    state = _STATE.get()
    if state is not None and state.folding:
        _charge(n >> 4)  # compiling keeps no value: only its time counts
    else:
        _charge(n >> 4 if isinstance(value, (str, bytes)) else n >> 1)


def _built(value: Any, what: str) -> Any:
    """A container just built from others (a literal, dict(), namespace()),
    checked through its nesting."""
    if _deep(value)[0] > MAX_VALUE:
        raise _Bound(_past(what))
    return value


def _as_text(value: Any, what: str) -> int:
    """The size of ``value``'s text, checked before it is made."""
    n = _weight(value)
    if n > MAX_VALUE:
        raise _Bound(_past(what))
    return n


def _past(what: str) -> str:
    # The count stops at the bound: how far past it is not known.
    return (f"{what} would make more than the {MAX_VALUE} characters or items a template may "
            "build (counted through every level of nesting)")


def _text_of(value: Any, what: str) -> str:
    """``str(value)``, its size checked before it is made."""
    if type(value) is str:
        return value
    _charge(_as_text(value, what) if _is_deep(value) else 1)
    return str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

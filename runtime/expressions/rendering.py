"""Rendering a compiled template under the bounds (``_render``: the counts
of one render, its run's deadline, the size of its text or value), what a
param's template gives for a message (``Expression``: the roots it reads,
its value coerced to the param's type) and what a Template node's gives
(``TextTemplate``: text). In a designer preview a flow variable shows as
‹flow.name› (``_flow_placeholder``)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..message import RESERVED_KEYS, deep_copy
from ..spec import ParamSpec, ParamType
from .bounds import (
    _STATE,
    MAX_VALUE,
    RUN_DEADLINE,
    ExpressionError,
    RenderDeadline,
    _Bound,
    _charge,
    _clock,
    _deep,
    _int,
    _is_deep,
    _preview,
    _Render,
    _sized,
)
from .compiling import Compiled, compile_template, compile_text_template, problem
from .context import ExpressionContext, default_context, read_global_variables

# -- a preview's flow variables -------------------------------------------------------

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


# -- rendering ----------------------------------------------------------------------

#: A value a template only passes on (``{{ msg.payload }}``) may be bigger
#: than one it builds, but not without end: a message whose lists refer to
#: each other (a code node's) could stand for more than memory holds.
_RESULT_CAP = 16 * MAX_VALUE


def _render(compiled: Compiled, roots: dict[str, Any]) -> Any:
    """Render under the bounds. Raises _Bound, RenderDeadline, or what the
    template raised."""
    deadline = RUN_DEADLINE.get()
    if deadline is not None and _clock() > deadline:
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
        if "subflow" in used and context.subflow is not None:
            roots["subflow"] = context.subflow(msg)
        return roots


class TextTemplate:
    """A Template node's template: it sees the message's keys (``{{
    payload.name }}``), ``msg`` and, inside a subflow, ``subflow``; reads a missing key as empty text and
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

    def render(self, msg: Mapping, subflow: Mapping | None = None) -> str:
        """``subflow``: inside a subflow instance, its params' values
        (``{{ subflow.NAME }}``); they then hide a message key of that name."""
        roots = dict(msg)
        roots["msg"] = msg
        if subflow is not None:
            roots["subflow"] = subflow
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

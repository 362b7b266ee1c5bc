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
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..message import RESERVED_KEYS, deep_copy
from ..spec import ParamSpec, ParamType
from .bounds import (
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
    _Bound,
    _built,
    _charge,
    _deep,
    _int,
    _is_deep,
    _NotFolded,
    _preview,
    _Render,
    _sized,
)
from .context import (
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
    default_context,
    env_pattern_problem,
    flow_env_readable,
    hidden_env_names,
    read_global_variables,
    template_env,
    user_env_readable,
)
from .operations import (
    _OPS,
    _binop,
    _call_check,
)
from .sandbox import sandbox, text_sandbox

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

"""Compiling a template, once per distinct text (cached): its size, its
syntax, what it may not reach (includes, imports, ``__`` names), which of
``msg``, ``env``, ``flow`` and ``global`` it reads, whether it is one
expression (whose own value is the result), its constant parts worked out
under the bounds (``_check_constants``: a constant that cannot be built is
an error of the flow, found by ``switchboard validate``), and a step counted
at the start of every loop turn, macro call and call block
(``_add_steps``). ``problem`` is a param's check for validation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..spec import ParamSpec
from .bounds import (
    _STATE,
    MAX_TEMPLATE_CHARS,
    MAX_TEXT_TEMPLATE_CHARS,
    ExpressionError,
    _Bound,
    _built,
    _NotFolded,
    _Render,
)
from .context import ROOTS
from .operations import _OPS, _binop, _call_check
from .sandbox import sandbox, text_sandbox

if TYPE_CHECKING:
    from jinja2 import Template


class Compiled:
    """One template, compiled: shared by every param with the same text."""

    __slots__ = ("text", "template", "native", "roots", "subflow_names")

    def __init__(self, text: str, template: Template, native: bool, roots: frozenset[str],
                 subflow_names: frozenset[str] | None = frozenset()):
        self.text = text
        self.template = template
        self.native = native  # one expression: the result is its own value
        self.roots = roots  # which of msg, env, flow, global, subflow it reads
        #: The names it reads of ``subflow`` (``subflow.sku``, ``subflow["sku"]``);
        #: None when it reads it some other way (a computed key).
        self.subflow_names = subflow_names


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
    the message's keys and ``msg``; ``roots`` says only whether it reads
    ``subflow`` (inside a definition, the instance's params). Raises
    ExpressionError."""
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
    elif "subflow" in names:
        # A Template node's text inside a subflow definition reads the
        # instance's params as ``subflow`` (its other names are the message's).
        roots = frozenset(("subflow",))
    # Constants are worked out (by _check_constants, then by Jinja's own
    # optimizer) under the bounds, with compiling's share of work.
    subflow_names = _subflow_names(ast) if "subflow" in roots else frozenset()
    token = _STATE.set(_Render({}, folding=True))
    try:
        return _compiled(env, ast, text, native_expr, roots, subflow_names)
    finally:
        _STATE.reset(token)


def _subflow_names(ast: Any) -> frozenset[str] | None:
    """The subflow params a template reads (``subflow.NAME`` or
    ``subflow['NAME']``); None if it reads ``subflow`` any other way."""
    from jinja2 import nodes

    found: set[str] = set()
    uses = 0
    for n in ast.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(n.node, nodes.Name) and n.node.name == "subflow":
            if isinstance(n, nodes.Getattr):
                found.add(n.attr)
            elif isinstance(n.arg, nodes.Const) and isinstance(n.arg.value, str):
                found.add(n.arg.value)
            else:
                return None
            uses += 1
    names = sum(1 for n in ast.find_all(nodes.Name) if n.name == "subflow")
    return frozenset(found) if names == uses else None


def _compiled(env: Any, ast: Any, text: str, native_expr: Any, roots: frozenset[str],
              subflow_names: frozenset[str] | None = frozenset()) -> Compiled:
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
    return Compiled(text, template, native_expr is not None, roots, subflow_names)


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

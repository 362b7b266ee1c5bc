"""The sandboxed Jinja2 environments every template runs in (``sandbox``,
``text_sandbox`` for the Template node's): immutable, with no loader, no
``lipsum``, the operators, calls, filters and tests of ``operations``, code
generated so that concatenation, literals and comparisons are sized too,
and attribute lookups that read a key of the data first and say why an
``env`` variable is not there. ``NamedUndefined`` names where a missing
value was looked for (``'msg.payload' has no attribute 'nme'``)."""

from __future__ import annotations

import threading
from typing import Any

from .bounds import (
    _STATE,
    _as_text,
    _at_most,
    _built,
    _charge,
    _is_deep,
    _sized,
    _step,
    _use_namespace,
    _weight,
)
from .context import _DICT_METHODS, ROOTS, _Env
from .operations import (
    _CALL,
    _LOOKUP,
    _MACRO_CALL,
    _OPS,
    _binop,
    _bounded_filter,
    _bounded_test,
    _call_check,
    _concat,
    _filter_checks,
    _finalize,
)

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

    _use_namespace(Namespace)

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

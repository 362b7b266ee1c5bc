"""Template expressions: the fourth way to set a param.

``{"scope": "expression", "value": "Hello {{ msg.payload.name }}"}`` is
rendered for every message with Jinja2 in an immutable sandbox. A template
sees four names and nothing else:

- ``msg``: the incoming message, without the reserved keys of tool calls (so
  a template cannot read the AI's arguments from ``__parameters__``);
- ``env``: the process's environment variables, less every one that names a
  secret (see ``hidden_env_names``);
- ``flow``: this run's flow variables (what Set Variable stores with scope
  flow), read-only;
- ``global``: the global variables (Set Variable with scope global).

A template that is one expression and nothing else (``{{ msg.payload.count
}}``) gives that expression's own value (an int stays an int); any other
template gives text. Either is then coerced to the param's type, so an int
param set to ``"{{ msg.payload.n }}"`` gets an int from ``"7"`` too.

Bounds: a template has at most ``MAX_TEMPLATE_CHARS`` characters; one render
runs at most ``MAX_STEPS`` steps (loop turns, macro calls, function calls and
filters, a count rather than a clock so that the same template always
stops at the same place); no text, list or mapping a template builds may
pass ``MAX_VALUE`` characters or items, and the operators and filters that
could build one in a single step (``*``, ``+``, ``~``, ``%``, ``center``,
``indent``, ``join``, ``replace``, ...) are checked *before* they run.
Templates cannot include, import or extend other templates (there is no
loader: nothing touches files), reach attributes starting with ``_``, or
change the data they read.

A template is compiled once per param (and once per distinct text in the
process: the compiled form is cached), never per message.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .message import RESERVED_KEYS, deep_copy
from .paths import data_dir
from .spec import ParamSpec, ParamType, Scope

if TYPE_CHECKING:
    from jinja2 import Template

MAX_TEMPLATE_CHARS = 10_000
#: Most characters (text) or items (lists, mappings) of any value one render
#: builds, its result included.
MAX_VALUE = 1_000_000
#: Most steps of one render: loop turns, macro calls, calls and filters.
MAX_STEPS = 100_000
#: Largest number of bits an integer power may have (2 ** 1_000_000 is fine,
#: 10 ** 10 ** 9 would take the process down).
MAX_POWER_BITS = 1_000_000
#: Largest indent ``tojson`` may use.
MAX_JSON_INDENT = 16

#: The names a template sees.
ROOTS = ("msg", "env", "flow", "global")
#: An environment variable whose name contains one of these is never shown
#: to a template, whatever the flow: it most likely holds a secret.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|AUTH",
                         re.IGNORECASE)
#: The run resource holding the flow variables (nodes/core/variables.py).
FLOW_VARIABLES = "variables:flow"
GLOBAL_FILE = "variables.json"
GLOBAL_MAX_BYTES = 10_000_000


class ExpressionError(ValueError):
    """A template that cannot be compiled or rendered; the text names the
    param (``params.subject: ...``) and what is wrong, never a traceback.
    (BoundParam turns it into the NodeConfigError a run reports: this module
    imports nothing of runtime.node, which imports it.)"""


class _Bound(Exception):
    """A bound was hit inside a render (turned into an ExpressionError)."""


def _preview(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


# -- the state of one render ---------------------------------------------------

class _Render:
    __slots__ = ("steps", "roots")

    def __init__(self, roots: dict[str, Any]) -> None:
        self.steps = MAX_STEPS
        self.roots = roots


_STATE: ContextVar[_Render | None] = ContextVar("switchboard_template_render", default=None)


def _step() -> None:
    state = _STATE.get()
    if state is not None:
        state.steps -= 1
        if state.steps < 0:
            raise _Bound(f"the template ran more than {MAX_STEPS} steps (loop turns, calls and "
                         "filters); it is bounded so that no message can keep a node busy")


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset, range)):
        return len(value)
    return 0


def _sized(value: Any, what: str = "a value") -> Any:
    if _size(value) > MAX_VALUE:
        raise _Bound(f"{what} of {_size(value)} characters or items, more than the {MAX_VALUE} a "
                     "template may build")
    return value


def _at_most(n: float, what: str) -> None:
    if n > MAX_VALUE:
        raise _Bound(f"{what} would make about {int(n)} characters or items, more than the "
                     f"{MAX_VALUE} a template may build")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


class _Env(dict):
    """The environment a template sees, and the names it may not see."""

    __slots__ = ("_hidden",)

    def __init__(self, values: Mapping[str, str], hidden: frozenset[str]) -> None:
        super().__init__(values)
        self._hidden = hidden


def _hidden_env(name: Any) -> str:
    return (f"env.{name} is hidden from templates: it names a secret (a secret param of this "
            "flow uses it, or its name looks like one); set the param from a secret instead")


# -- bounded operators, calls and filters ----------------------------------------

_PERCENT_WIDTH = re.compile(r"%[-#0 +]*(?:\*|\d{7,})|%[-#0 +]*\d*\.(?:\*|\d{7,})")
_FORMAT_FIELD = re.compile(r"\{[^{}]*(?:\{|\d{7,})")


def _check_percent(fmt: Any) -> None:
    if isinstance(fmt, str) and _PERCENT_WIDTH.search(fmt):
        raise _Bound("a %-format width or precision that is '*' or 7 digits or more is not "
                     "allowed in a template")


def _check_format_string(fmt: str) -> None:
    if _FORMAT_FIELD.search(fmt):
        raise _Bound("a format field with a nested field or a width of 7 digits or more is not "
                     "allowed in a template")


def _estimate_binop(op: str, left: Any, right: Any) -> None:
    if op == "*":
        for seq, n in ((left, _int(right)), (right, _int(left))):
            if n is not None and _size(seq):
                _at_most(_size(seq) * max(n, 0), "repeating a text or list")
    elif op == "+":
        if _size(left) and _size(right):
            _at_most(_size(left) + _size(right), "joining two texts or lists")
    elif op == "**":
        base, exp = _int(left), _int(right)
        if base is not None and exp is not None and exp > 0 and abs(base) > 1:
            if exp * abs(base).bit_length() > MAX_POWER_BITS:
                raise _Bound(f"{base} ** {exp} is a number of more than {MAX_POWER_BITS} bits")
    elif op == "%":
        _check_percent(left)


def _str_method_check(fn: Any, args: tuple, kwargs: dict) -> tuple | None:
    """Checks a call of a method of a str or bytes before it runs (the ones
    that can build much more than they are given). Returns the arguments to
    call with, when they had to be read first (join of a generator)."""
    self = getattr(fn, "__self__", None)
    wrapped = getattr(fn, "__wrapped__", None)
    if self is None and wrapped is not None:  # the sandbox's wrapper of str.format
        self = getattr(wrapped, "__self__", None)
    if not isinstance(self, (str, bytes)):
        return None
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
        items = list(args[0]) if not isinstance(args[0], (list, tuple, str)) else args[0]
        _at_most(len(items) * len(self) + sum(_size(x) for x in items), "join()")
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((_size(v) for v in args[0].values()), default=1)
        _at_most(len(self) * max(longest, 1), "translate()")
    elif name in ("format", "format_map") and isinstance(self, str):
        _check_format_string(self)
    return None


def _filter_checks() -> dict[str, Callable[..., tuple | None]]:
    """Per filter: a check of its arguments (without the environment or
    context a filter may be passed) before it runs."""

    def center(value: Any, width: Any = 80, *_: Any, **__: Any) -> None:
        if _int(width) is not None:
            _at_most(width, "center")

    def indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> None:
        lines = str(s).count("\n") + 1
        per = _int(width) if _int(width) is not None else _size(width)
        _at_most(len(str(s)) + lines * max(per or 0, 0), "indent")

    def replace(s: Any, old: Any, new: Any, count: Any = None, **__: Any) -> None:
        s, old, new = str(s), str(old), str(new)
        times = s.count(old) if old else len(s) + 1
        if _int(count) is not None and count >= 0:
            times = min(times, count)
        _at_most(len(s) + times * len(new), "replace")

    def wordwrap(s: Any, width: Any = 79, _b: Any = True, wrapstring: Any = None,
                 *_: Any, **kw: Any) -> None:
        wrap = kw.get("wrapstring", wrapstring)
        w = _int(kw.get("width", width)) or 1
        _at_most(len(str(s)) + (len(str(s)) // max(w, 1) + 1) * _size(wrap or "\n"), "wordwrap")

    def batch(value: Any, linecount: Any = 1, *_: Any, **__: Any) -> None:
        if _int(linecount) is not None:
            _at_most(linecount, "batch")

    def slice_(value: Any, slices: Any = 1, *_: Any, **__: Any) -> None:
        if _int(slices) is not None:
            _at_most(slices, "slice")

    def format_(value: Any, *_: Any, **__: Any) -> None:
        _check_percent(value)

    def tojson(value: Any, indent: Any = None, **__: Any) -> None:
        if indent is not None and (_int(indent) or _size(indent)) > MAX_JSON_INDENT:
            raise _Bound(f"tojson indent of more than {MAX_JSON_INDENT}")

    def join(value: Any, d: Any = "", attribute: Any = None, **__: Any) -> tuple | None:
        items = value if isinstance(value, (list, tuple, str, dict)) else list(value)
        _at_most(len(items) * _size(str(d)) + sum(_size(x) for x in items), "join")
        return (items, d, attribute) if items is not value else None

    return {"center": center, "indent": indent, "replace": replace, "wordwrap": wordwrap,
            "batch": batch, "slice": slice_, "format": format_, "tojson": tojson,
            "join": join}


def _bounded_filter(name: str, fn: Callable[..., Any],
                    check: Callable[..., tuple | None] | None) -> Callable[..., Any]:
    pass_arg = getattr(fn, "jinja_pass_arg", None)

    def bounded(*args: Any, **kwargs: Any) -> Any:
        _step()
        if check is not None:
            lead, core = (args[:1], args[1:]) if pass_arg is not None else ((), args)
            replaced = check(*core, **kwargs)
            if replaced is not None:
                args = (*lead, *replaced)
        return _sized(fn(*args, **kwargs), f"the {name} filter made a value")

    bounded.__name__ = getattr(fn, "__name__", name)
    if pass_arg is not None:
        bounded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return bounded


# -- the environment ------------------------------------------------------------

_env_lock = threading.Lock()
_environment: Any = None


def sandbox() -> Any:
    """The one sandboxed Jinja2 environment of this process (made on first
    use: importing jinja2 costs ~30 ms most runs never need)."""
    global _environment
    if _environment is None:
        with _env_lock:
            if _environment is None:
                _environment = _make_environment()
    return _environment


def _make_environment() -> Any:
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedCodeGenerator(CodeGenerator):
        def visit_Concat(self, node: Any, frame: Any) -> None:  # noqa: N802 - Jinja's visitor
            # `a ~ b` through the environment, so that its size is checked
            # before the text is built (Jinja joins the parts directly).
            self.write("environment.sb_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "+", "**", "%"})
        code_generator_class = BoundedCodeGenerator

        def getattr(self, obj: Any, attribute: str) -> Any:
            # A key of the data wins over a dict method: msg.payload.items is
            # the order's items, not dict.items.
            if isinstance(obj, dict):
                if isinstance(obj, _Env) and attribute in obj._hidden:
                    return self.undefined(_hidden_env(attribute), obj=obj, name=attribute)
                if attribute in obj:
                    return obj[attribute]
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            if isinstance(obj, _Env) and argument in obj._hidden:
                return self.undefined(_hidden_env(argument), obj=obj, name=argument)
            return super().getitem(obj, argument)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _estimate_binop(operator, left, right)
            return _sized(super().call_binop(context, operator, left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            _step()
            replaced = _str_method_check(__obj, args, kwargs)
            if replaced is not None:
                args = replaced
            return _sized(super().call(__context, __obj, *args, **kwargs))

        def sb_concat(self, parts: tuple) -> str:
            texts = [str(p) for p in parts]
            _at_most(sum(len(t) for t in texts), "joining texts with ~")
            return "".join(texts)

        def sb_step(self) -> None:
            """Called at the start of every loop turn and macro call (the
            call itself counts the step)."""

    env = Sandbox(undefined=_undefined_class(), autoescape=False, loader=None,
                  auto_reload=False, keep_trailing_newline=True, cache_size=0)
    env.globals.pop("lipsum", None)  # makes pages of text from a number
    checks = _filter_checks()
    env.filters = {name: _bounded_filter(name, fn, checks.get(name))
                   for name, fn in env.filters.items()}
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


@lru_cache(maxsize=512)
def compile_template(text: str) -> Compiled:
    """Compile a template (cached by text). Raises ExpressionError with the
    problem, without the param's name."""
    from jinja2 import TemplateSyntaxError, meta, nodes

    if not isinstance(text, str):
        raise ExpressionError("an expression must be text")
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ExpressionError(f"the template has {len(text)} characters, more than the "
                              f"{MAX_TEMPLATE_CHARS} allowed")
    env = sandbox()
    stripped = text.strip()
    try:
        ast = env.parse(text)
    except TemplateSyntaxError as exc:
        raise ExpressionError(_syntax_text(exc)) from None
    _check_tree(ast)
    try:
        names = meta.find_undeclared_variables(ast)
    except TemplateSyntaxError as exc:  # an unknown filter or test
        raise ExpressionError(_syntax_text(exc)) from None
    unknown = sorted(n for n in names if n not in ROOTS and n not in env.globals)
    if unknown:
        name = unknown[0]
        hint = f" (did you mean msg.{name}?)" if name in ("payload", "topic") else ""
        raise ExpressionError(f"unknown name '{name}'{hint}: a template reads msg, env, flow "
                              "and global")
    roots = frozenset(n for n in names if n in ROOTS)
    native_expr = None
    if stripped.startswith("{{") and stripped.endswith("}}"):
        body = ast.body if stripped == text else env.parse(stripped).body
        if len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1 \
                and not isinstance(body[0].nodes[0], nodes.TemplateData):
            native_expr = body[0].nodes[0]
    _add_steps(ast)
    try:
        if native_expr is not None:
            tree = nodes.Template([nodes.Assign(nodes.Name("result", "store"), native_expr,
                                                lineno=1)], lineno=1)
            tree.set_environment(env)
            template = env.from_string(tree)
        else:
            template = env.from_string(ast)
    except TemplateSyntaxError as exc:  # found only when compiling (an unknown filter)
        raise ExpressionError(_syntax_text(exc)) from None
    except _Bound as exc:  # a constant part broke a bound while Jinja folded it
        raise ExpressionError(str(exc)) from None
    return Compiled(text, template, native_expr is not None, roots)


def _check_tree(ast: Any) -> None:
    from jinja2 import nodes

    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        raise ExpressionError("a template cannot include, import or extend another template "
                              f"(line {node.lineno})")
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


def _add_steps(ast: Any) -> None:
    """Count a step at the start of every loop turn, macro call and call
    block, so that nested loops over data end at MAX_STEPS however little
    they do each turn."""
    from jinja2 import nodes

    for node in list(ast.find_all((nodes.For, nodes.Macro, nodes.CallBlock))):
        tick = nodes.ExprStmt(nodes.Call(nodes.EnvironmentAttribute("sb_step"), [], [], None,
                                         None), lineno=node.lineno)
        tick.set_lineno(node.lineno)
        node.body.insert(0, tick)


# -- what a template sees ---------------------------------------------------------

def hidden_env_names(flow: Any, registry: Any) -> frozenset[str]:
    """The environment variables a template of this flow may not read: every
    one a secret param of the flow names ({"env": NAME}, set in the flow or
    the param's default), every one a ``*_env`` param names (the convention
    for "the variable that holds the key", as the agent's api_key_env), and
    any whose name looks like a secret (SECRET_NAME)."""
    hidden: set[str] = set()
    for fnode in getattr(flow, "nodes", ()):
        spec = registry.spec(fnode.type) if registry is not None else None
        if spec is None:
            continue
        for p in spec.params:
            setting = fnode.params.get(p.name)
            value = setting.value if setting is not None and setting.scope is Scope.CUSTOM \
                else p.default
            if p.secret and isinstance(value, dict) and isinstance(value.get("env"), str):
                hidden.add(value["env"])
            elif p.name.endswith("_env") and isinstance(value, str) and value:
                hidden.add(value)
    return frozenset(hidden)


def template_env(hidden: frozenset[str] = frozenset()) -> _Env:
    """The ``env`` a template sees: os.environ without the hidden names."""
    names = hidden | {k for k in os.environ if SECRET_NAME.search(k)}
    return _Env({k: v for k, v in os.environ.items() if k not in names}, frozenset(names))


_global_cache: dict[str, tuple[tuple[int, int], dict]] = {}


def read_global_variables() -> dict:
    """The global variables (nodes/core/variables.py keeps them in this
    file), read again only when the file changed."""
    path: Path = data_dir() / GLOBAL_FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _Bound(f"cannot read the global variables ({path}): {exc.strerror}") from None
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _global_cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    if st.st_size > GLOBAL_MAX_BYTES:
        raise _Bound(f"the global variables file {path} is {st.st_size} bytes, more than "
                     f"{GLOBAL_MAX_BYTES}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _Bound(f"cannot read the global variables ({path}): {exc}") from None
    if not isinstance(data, dict):
        raise _Bound(f"the global variables file {path} must hold a JSON object")
    _global_cache[str(path)] = (stamp, data)
    return data


class ExpressionContext:
    """What the templates of one run see besides the message: ``env``
    (filtered once per run), ``flow`` (the run's variables) and ``global``.
    ``preview``: a designer preview, where no run holds flow variables:
    each one shows as ‹flow.name›."""

    def __init__(self, env: _Env | None = None, flow: Callable[[], dict] | None = None,
                 *, preview: bool = False) -> None:
        self.env = env if env is not None else template_env()
        self._flow = flow
        self.preview = preview

    def flow_variables(self) -> dict:
        return self._flow() if self._flow is not None else {}

    @classmethod
    def for_run(cls, flow: Any, registry: Any, resource: Callable[..., Any]) -> ExpressionContext:
        """The context of one engine run: ``resource(key, make)`` is the
        engine's run resources, where Set Variable keeps the flow scope."""
        return cls(template_env(hidden_env_names(flow, registry)),
                   lambda: resource(FLOW_VARIABLES, dict))


_default_context: ExpressionContext | None = None


def default_context() -> ExpressionContext:
    """For a node made by hand, outside a run: no flow variables."""
    global _default_context
    if _default_context is None:
        _default_context = ExpressionContext()
    return _default_context


# -- rendering ----------------------------------------------------------------------

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
        compiled = self.compiled
        roots = self._roots(msg)
        state = _Render(roots)
        token = _STATE.set(state)
        try:
            if compiled.native:
                ctx = compiled.template.new_context(roots)
                for _ in compiled.template.root_render_func(ctx):
                    pass
                value = ctx.vars.get("result")
                from jinja2 import Undefined

                if isinstance(value, Undefined) and not (
                        _placeholder is not None and isinstance(value, _placeholder)):
                    value._fail_with_undefined_error()
                return _sized(value, "the result")
            ctx = compiled.template.new_context(roots)
            parts: list[str] = []
            total = 0
            for chunk in compiled.template.root_render_func(ctx):
                total += len(chunk)
                if total > MAX_VALUE:
                    raise _Bound(f"the template's text passed {MAX_VALUE} characters")
                parts.append(chunk)
            return "".join(parts)
        except (_Bound, ExpressionError):
            raise
        except RecursionError:
            raise _Bound("the template calls itself too deeply") from None
        except MemoryError:
            raise _Bound("the template ran out of memory") from None
        except Exception as exc:
            raise _Bound(_render_error(exc)) from None
        finally:
            _STATE.reset(token)

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


def _jsonable(value: Any) -> Any:
    """A template's value as JSON data: tuples and ranges become lists; a
    value that has no JSON form (a macro, a cycler) is an error."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, range)):
        return [_jsonable(v) for v in value]
    raise _Bound(f"the template gave a {type(value).__name__}, which has no JSON form")


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

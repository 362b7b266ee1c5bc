"""What a template sees besides the message: the environment variables it
may read (an allow-list: ``DEFAULT_READABLE_ENV``, the user's settings and
the flow's ``settings.env_readable``, less every name a secret param of the
flow names and every name ``SECRET_NAME`` matches), the flow and global
variables, and ``ExpressionContext``, which holds them for one run's
templates."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..paths import data_dir
from ..spec import Scope
from .bounds import _Bound, _preview

#: The names a template sees (``subflow``: inside a subflow definition, the
#: instance's params, runtime.flow.expand; elsewhere it is not available).
ROOTS = ("msg", "env", "flow", "global", "subflow")
#: An environment variable whose name contains one of these is never shown
#: to a template, whatever the flow or the settings say: it most likely
#: holds a secret (the second guard behind the allow-list).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIAL|PRIVATE|AUTH",
                         re.IGNORECASE)
#: Environment variables any template may read: nothing secret in them.
DEFAULT_READABLE_ENV = ("HOME", "USER", "USERNAME", "LOGNAME", "LANG", "LC_ALL", "TZ",
                        "TMPDIR")
#: The user's settings file in the data dir; its ``env_readable`` list names
#: more variables every flow's templates may read.
SETTINGS_FILE = "settings.json"
SETTINGS_MAX_BYTES = 1_000_000
#: Most names in one ``env_readable`` list.
MAX_ENV_READABLE = 1_000
#: The run resource holding the flow variables (nodes/core/variables.py).
FLOW_VARIABLES = "variables:flow"
GLOBAL_FILE = "variables.json"
GLOBAL_MAX_BYTES = 10_000_000


# -- the environment a template sees ---------------------------------------------

_ENV_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")
_DICT_METHODS = frozenset({"items", "keys", "values", "get"})


class _Env(dict):
    """The environment variables a template may read, and why any other is
    not there."""

    __slots__ = ("_hidden", "_readable", "_problem")

    def __init__(self, values: Mapping[str, str], hidden: frozenset[str],
                 readable: Callable[[str], bool], problem: str = "") -> None:
        super().__init__(values)
        self._hidden = hidden
        self._readable = readable
        self._problem = problem

    def why_not(self, name: Any) -> str:
        """Why ``env.NAME`` has no value: a secret, not readable, or ""
        (readable, but not set)."""
        if not isinstance(name, str):
            return ""
        if name in self._hidden or SECRET_NAME.search(name):
            return (f"env.{name} is hidden from templates: it names a secret (a secret param of "
                    "this flow uses it, or its name looks like one); set the param from a "
                    "secret instead")
        if not self._readable(name):
            text = (f"env.{name} is not readable by templates: a template reads only the "
                    "environment variables the flow names in settings.env_readable or your "
                    f"settings name ({data_dir() / SETTINGS_FILE}, \"env_readable\"), and "
                    f"{', '.join(DEFAULT_READABLE_ENV)}")
            return f"{text} ({self._problem})" if self._problem else text
        return ""


def env_pattern_problem(entry: Any) -> str | None:
    """Why ``entry`` cannot be in an ``env_readable`` list, or None: a
    variable's name, or a prefix ending in ``*`` (``SHOP_*``)."""
    if not isinstance(entry, str):
        return f"must be a variable's name in quotes, e.g. \"SHOP_NAME\", not {_preview(entry)}"
    if not _ENV_PATTERN.fullmatch(entry):
        return (f"{_preview(entry)} is not a variable's name: letters, digits and _, not "
                "starting with a digit; a name may end in * to mean every name that starts so "
                "(SHOP_*)")
    return None


def _readable(patterns: Iterable[str]) -> Callable[[str], bool]:
    exact = frozenset(p for p in patterns if not p.endswith("*"))
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    if not prefixes:
        return exact.__contains__
    return lambda name: name in exact or name.startswith(prefixes)


_settings_cache: dict[str, tuple[tuple[int, int], tuple[tuple[str, ...], str]]] = {}


def user_env_readable() -> tuple[tuple[str, ...], str]:
    """The ``env_readable`` names of the user's settings file (data dir,
    ``settings.json``), read again only when it changed, and what is wrong
    with the file ("" if nothing)."""
    path: Path = data_dir() / SETTINGS_FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        return (), ""
    except OSError as exc:
        return (), f"cannot read {path}: {exc.strerror}"
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _settings_cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    result = _read_settings(path, st.st_size)
    _settings_cache[str(path)] = (stamp, result)
    return result


def _read_settings(path: Path, size: int) -> tuple[tuple[str, ...], str]:
    if size > SETTINGS_MAX_BYTES:
        return (), f"{path} is {size} bytes, more than {SETTINGS_MAX_BYTES}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return (), f"cannot read {path}: {exc}"
    if not isinstance(data, dict):
        return (), f"{path} must hold a JSON object"
    names = data.get("env_readable", [])
    if not isinstance(names, list):
        return (), f"{path}: env_readable must be a list of names"
    if len(names) > MAX_ENV_READABLE:
        return (), f"{path}: env_readable has more than {MAX_ENV_READABLE} names"
    for i, name in enumerate(names):
        why = env_pattern_problem(name)
        if why:
            return (), f"{path}: env_readable[{i}]: {why}"
    return tuple(names), ""


def flow_env_readable(flow: Any) -> tuple[str, ...]:
    """The names a flow's ``settings.env_readable`` makes readable."""
    settings = getattr(flow, "settings", None)
    return tuple(getattr(settings, "env_readable", None) or ())


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


def template_env(hidden: frozenset[str] = frozenset(), readable: Iterable[str] = ()) -> _Env:
    """The ``env`` a template sees: the variables set in this process that
    are readable (DEFAULT_READABLE_ENV, the user's settings, and
    ``readable``: the flow's settings.env_readable) and neither named by a
    secret param (``hidden``) nor named like a secret (SECRET_NAME)."""
    user, problem = user_env_readable()
    allowed = _readable((*DEFAULT_READABLE_ENV, *user, *readable))
    return _Env({k: v for k, v in os.environ.items()
                 if allowed(k) and k not in hidden and not SECRET_NAME.search(k)},
                hidden, allowed, problem)


# -- what a template sees ---------------------------------------------------------------

_global_cache: dict[str, tuple[tuple[int, int], dict]] = {}


class GlobalVariablesError(Exception):
    """The global variables file cannot be read; the text says why and where."""


def read_globals_at(path: Path) -> dict:
    """The global variables kept in ``path``, read again only when the file
    changed. The one reader of the file: templates (read_global_variables)
    and nodes/core/variables.py share it and its cache."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise GlobalVariablesError(
            f"cannot read the global variables ({path}): {exc.strerror}") from None
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _global_cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    if st.st_size > GLOBAL_MAX_BYTES:
        raise GlobalVariablesError(f"the global variables file {path} is {st.st_size} bytes, "
                                   f"more than the {GLOBAL_MAX_BYTES} it may hold")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GlobalVariablesError(
            f"cannot read the global variables ({path}): {exc}") from None
    if not isinstance(data, dict):
        raise GlobalVariablesError(f"the global variables file {path} must hold a JSON object")
    _global_cache[str(path)] = (stamp, data)
    return data


def forget_globals_at(path: Path) -> None:
    """The file was written: read it again next time."""
    _global_cache.pop(str(path), None)


def read_global_variables() -> dict:
    """The global variables (nodes/core/variables.py keeps them in this
    file), read again only when the file changed."""
    try:
        return read_globals_at(data_dir() / GLOBAL_FILE)
    except GlobalVariablesError as exc:
        raise _Bound(str(exc)) from None


class ExpressionContext:
    """What the templates of one run see besides the message: ``env``
    (filtered once per run), ``flow`` (the run's variables) and ``global``.
    ``preview``: a designer preview, where no run holds flow variables:
    each one shows as ‹flow.name›."""

    def __init__(self, env: _Env | None = None, flow: Callable[[], dict] | None = None,
                 *, preview: bool = False,
                 subflow: Callable[[Mapping | None], dict] | None = None) -> None:
        self.env = env if env is not None else template_env()
        self._flow = flow
        self.preview = preview
        #: Inside a subflow instance: its params' values for a message
        #: (``{{ subflow.NAME }}``); None elsewhere.
        self.subflow = subflow

    def with_subflow(self, values: Callable[[Mapping | None], dict]) -> ExpressionContext:
        """This run's context for the templates of one subflow instance."""
        return ExpressionContext(self.env, self._flow, preview=self.preview, subflow=values)

    def flow_variables(self) -> dict:
        return self._flow() if self._flow is not None else {}

    @classmethod
    def for_run(cls, flow: Any, registry: Any, resource: Callable[..., Any]) -> ExpressionContext:
        """The context of one engine run: ``resource(key, make)`` is the
        engine's run resources, where Set Variable keeps the flow scope."""
        return cls(template_env(hidden_env_names(flow, registry), flow_env_readable(flow)),
                   lambda: resource(FLOW_VARIABLES, dict))


_default_context: ExpressionContext | None = None


def default_context() -> ExpressionContext:
    """For a node made by hand, outside a run: no flow variables."""
    global _default_context
    if _default_context is None:
        _default_context = ExpressionContext()
    return _default_context

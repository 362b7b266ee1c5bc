"""The node authoring API.

A node type is a class decorated with ``@node``; its ``Param`` and ``Output``
attributes become its spec. ``on_message`` is the only place a node author
writes logic, and it never asks whether it runs as a tool: ``param.get(msg)``
resolves the value from the designer's fixed value, a message path or the
validated tool arguments, and ``output.set(msg, v)`` writes the result where
the current mode wants it.

- ``declare``: what a node class declares (``Param``, ``Output``, ``Tool``).
- ``masking``: how the secrets a process knows are found in a text.
- ``blocking``: ``run_in_thread``, blocking work off the event loop.
- here: ``Node`` and ``@node``, the bound params and outputs of one node
  (``param.get(msg)``, the hot path), and the secrets a run resolves and
  registers, which redact() hides.

``runtime.node`` is the public face of the package: import from here.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

from ..effects import effect_once
from ..message import MESSAGE_TYPE, PARAMETERS, TOOL_DATA, TOOL_REQUEST, Message, get_path, set_path
from ..spec import Allow, NodeSpec, ParamSpec, ParamType, ParamValue, PortSpec, Scope
from .blocking import run_in_thread
from .declare import AI, CUSTOM, MESSAGE, Output, Param, Tool, label_for
from .masking import _ANCHOR, SECRET_RUN, _Masker, _secret_forms

__all__ = [
    "AI",
    "CUSTOM",
    "DECLARED",
    "DROP",
    "MESSAGE",
    "SECRET_RUN",
    "TOOL_CALL",
    "Allow",
    "BoundOutput",
    "BoundParam",
    "Node",
    "NodeConfigError",
    "NodeServices",
    "Output",
    "Param",
    "RedactingFilter",
    "Tool",
    "is_secret_ref",
    "label_for",
    "node",
    "redact",
    "redact_hold",
    "register_flow_secrets",
    "register_secret",
    "resolve_secret",
    "run_in_thread",
]

log = logging.getLogger(__name__)

#: Return this from ``on_message`` to send nothing on.
DROP = object()

_MISSING = object()


class NodeConfigError(Exception):
    """A node cannot do its job with the settings it was given; the text is
    shown to the user (and to the LLM in tool mode), so it names the param."""


_resolved_secrets: set[str] = set()
_resolved_logins: set[tuple[str, str]] = set()  # (username, password) pairs
_redact_lock = threading.Lock()


def _rebuild_redact_pattern() -> None:
    logins: dict[str, list[str]] = {}
    for user, password in _resolved_logins:
        logins.setdefault(password, []).append(user)
    whole: set[str] = set()
    runs: set[str] = set()
    for secret in _resolved_secrets:
        w, r = _secret_forms(secret, logins.get(secret, []))
        whole |= w
        runs |= r
    global _masker
    _masker = _Masker(whole, runs) if whole or runs else None


_masker: _Masker | None = None  # None: no secret registered


def redact_hold(text: str) -> int:
    """How many characters at the end of ``text``, a text still growing (an
    answer streaming in), must wait before they are shown: the longest end
    of it that the next piece may complete into something redact() hides,
    i.e. the start of a whole form of a known secret, or a piece of
    _ANCHOR to SECRET_RUN - 1 characters of one of its text forms
    (redact() cannot recognise half a secret). 0 when the end starts
    nothing, so the text shows as it comes. A piece of under _ANCHOR
    characters is not held: one or two letters that occur somewhere in a
    secret end almost every text, and holding them would stall what a
    stream shows at each pause; if the secret does go on in the next piece,
    those few characters have been shown (fewer than SECRET_RUN) and the
    rest is hidden."""
    masker = _masker
    if masker is None:
        return 0
    hold = 0
    for form in masker.starts:
        for k in range(min(len(form) - 1, len(text)), hold, -1):
            if text.endswith(form[:k]):
                hold = k
                break
    for k in range(min(SECRET_RUN - 1, len(text)), max(hold, _ANCHOR - 1), -1):
        end = text[-k:]
        if any(end in form for form in masker.runs):
            return k
    return hold


def redact(text: str) -> str:
    """Replace every secret this process has resolved with ***: any run of
    SECRET_RUN or more characters of it (as is, JSON-escaped, URL-encoded),
    and each whole form a server or library may echo it in (base64 alone,
    inside a base64 blob or as an AUTH PLAIN token; see _secret_forms), so
    that an error text, event, log line or LLM request quoting one, whole
    or in pieces, cannot leak it. One precompiled search; with no secret
    registered it costs one test, and a text without a secret one search."""
    masker = _masker
    if masker is None or not text:
        return text
    m = masker.search(text)
    return text if m is None else masker.mask(text, m)


class RedactingFilter(logging.Filter):
    """A logging filter for a handler that writes where a person reads
    (the CLI's stderr): every record's text and traceback through redact().
    Libraries log at DEBUG what a server sent (httpcore the response
    headers), so ``switchboard -v`` would otherwise print a secret a server
    echoes. With no secret registered it costs one test per record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _masker is None:
            return True
        text = record.getMessage()
        masked = redact(text)
        if masked is not text:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def register_secret(value: str | None, username: str | None = None) -> str | None:
    """Remember a secret obtained outside resolve_secret (an API key read from
    the env var the flow names) so that redact() hides it. With the username
    it is used with (SMTP login), the AUTH PLAIN token of the pair is hidden
    whole too. Secrets under 4 characters are not registered: hiding every
    "abc" in every text would hide more than it protects. Returns ``value``,
    so a caller can register where it reads: ``pw = register_secret(p.get(msg), user)``."""
    if isinstance(value, str) and len(value) >= 4:
        with _redact_lock:
            known = value in _resolved_secrets
            login = (username, value) if username else None
            if known and (login is None or login in _resolved_logins):
                return value
            _resolved_secrets.add(value)
            if login is not None:
                _resolved_logins.add(login)
            _rebuild_redact_pattern()
    return value


def resolve_secret(ref: Any, *, param: str = "", username: str | None = None) -> str:
    """Turn a secret reference ({"env": NAME} or {"keyring": SERVICE,
    "username": USER}) into the secret. Errors name the reference, never a
    value. ``username``: the login the secret goes with, if known (see
    register_secret); a keyring entry's username is used when none is given."""
    where = f"param '{param}': " if param else ""
    if isinstance(ref, dict) and "env" in ref:
        name = ref["env"]
        value = os.environ.get(name)
        if value is None:
            raise NodeConfigError(f"{where}environment variable {name} is not set")
        register_secret(value, username)
        return value
    if isinstance(ref, dict) and "keyring" in ref:
        # Imported lazily: keyring is slow to import, and most flows need none.
        from .. import credentials

        service, entry = ref["keyring"], ref.get("username", "")
        try:
            if service == credentials.SERVICE:
                # The Credentials dialog's entries: the keyring, then the
                # encrypted file where no keyring works.
                value = credentials.get(entry)
            else:
                import keyring

                value = keyring.get_password(service, entry)
        except credentials.CredentialError as exc:
            raise NodeConfigError(f"{where}{exc}") from None
        except Exception as exc:  # noqa: BLE001 - no keyring backend, a locked keyring
            raise NodeConfigError(f"{where}keyring entry {service}/{entry}: the system "
                                  f"keyring failed: {type(exc).__name__}") from None
        if value is None:
            if service == credentials.SERVICE:
                raise NodeConfigError(f"{where}no credential named '{entry}'; add it in "
                                      "Run > Credentials…")
            raise NodeConfigError(f"{where}no keyring entry {service}/{entry}")
        register_secret(value, username or entry or None)
        return value
    raise NodeConfigError(f"{where}a secret must name an env var or a keyring entry")


def register_flow_secrets(nodes: Iterable[Node]) -> None:
    """Resolve and register, before a run's first node runs, every secret
    its nodes name, so that redact() hides it from the start: a node that
    prints one (a file, a server's reply) before the node that uses it has
    run must not put it into an event or the run history in plain text.
    Named are: a secret param's reference ({"env": NAME} or {"keyring": ...},
    set in the flow or the param's default), the variable a ``*_env`` param
    names (the convention for "the variable that holds the key", as the
    agent's api_key_env) and each secret reference among the values of an
    ``env`` object param (an MCP server's environment). A secret that cannot
    be resolved now is left out: its node says why when it runs."""
    values: list[str] = []
    for node in nodes:
        for p in node.spec.params:
            bp = node.__dict__.get(p.name)
            if type(bp) is not BoundParam or bp.scope is not Scope.CUSTOM:
                continue
            value = bp.value
            if p.secret:
                refs = [value]
            elif p.name.endswith("_env") and isinstance(value, str) and value:
                refs = [{"env": value}]
            elif p.name == "env" and isinstance(value, dict):
                refs = list(value.values())
            else:
                continue
            for ref in refs:
                if not is_secret_ref(ref):
                    continue
                if "env" in ref:
                    found = os.environ.get(ref["env"])
                    if found is not None:
                        values.append(found)
                    continue
                try:
                    resolve_secret(ref, param=p.name)  # a keyring entry: registers it
                except Exception:  # noqa: BLE001 - reported by the node when it runs
                    log.debug("node %s: secret of param %s not resolved at run start",
                              node.id, p.name)
    new = [v for v in values if len(v) >= 4 and v not in _resolved_secrets]
    if new:
        with _redact_lock:
            _resolved_secrets.update(new)
            _rebuild_redact_pattern()


def is_secret_ref(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if set(value) == {"env"}:
        return isinstance(value["env"], str) and bool(value["env"])
    if "keyring" in value and set(value) <= {"keyring", "username"}:
        return isinstance(value["keyring"], str) and bool(value["keyring"])
    return False


class BoundParam:
    """A param of one node instance, with the flow's setting applied."""

    __slots__ = ("name", "scope", "value", "path", "default", "spec", "null_is_value", "expr")

    def __init__(self, spec: ParamSpec, setting: ParamValue | None) -> None:
        self.spec = spec
        self.name = spec.name
        self.default = spec.default
        # Scope expression: the compiled template (runtime.expressions); the
        # engine gives it the run's context (flow variables, env).
        self.expr: Any = None
        if setting is not None and setting.scope is Scope.EXPRESSION:
            from ..expressions import Expression  # lazily: most flows have none

            try:
                self.expr = Expression(spec, setting.value)
            except ValueError as exc:  # ExpressionError: names the param and the problem
                raise NodeConfigError(str(exc)) from None
        # A json param explicitly set to null means null (inject a null
        # payload); for other types null means "not set": the default.
        self.null_is_value = (setting is not None and setting.scope is Scope.CUSTOM
                              and spec.type is ParamType.JSON
                              and "value" in setting.model_fields_set)
        if setting is None:
            self.scope = spec.default_scope
            self.value = spec.default
            self.path = spec.default_path or spec.name
        else:
            self.scope = setting.scope
            self.value = setting.value if setting.scope is Scope.CUSTOM else spec.default
            self.path = setting.path or spec.default_path or spec.name
        if self.scope is Scope.CUSTOM and spec.type is ParamType.FLOAT and isinstance(self.value, int):
            self.value = float(self.value)

    def get(self, msg: dict | None = None, default: Any = _MISSING) -> Any:
        fallback = self.default if default is _MISSING else default
        scope = self.scope
        if scope is Scope.CUSTOM:
            value = self.value
            if value is None:
                return None if self.null_is_value else fallback
            if self.spec.secret:
                return resolve_secret(value, param=self.name)
            return value
        if scope is Scope.EXPRESSION:
            try:
                value = self.expr.render(msg)
            except ValueError as exc:  # ExpressionError, for the run to report as the user's
                raise NodeConfigError(str(exc)) from None
            return fallback if value is None else value
        if msg is None:
            return fallback
        if scope is Scope.MESSAGE:
            return get_path(msg, self.path, fallback)
        # AI scope: inside a tool call only the validated arguments count;
        # outside one (a plain RPA message) fall back to msg[name], so one node
        # serves both uses.
        if msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            return (msg.get(PARAMETERS) or {}).get(self.name, fallback)
        return msg.get(self.name, fallback)


class BoundOutput:
    __slots__ = ("name", "path")

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path

    def set(self, msg: dict, value: Any) -> None:
        if msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            data = msg.get(TOOL_DATA)
            if data is None:
                data = msg[TOOL_DATA] = {}
            data[self.name] = value
        else:
            set_path(msg, self.path, value)


class NodeServices(Protocol):
    """What a node asks of the run it belongs to (the engine implements it
    as NodeRuntime). A protocol, so that this module knows nothing of the
    engine: dependencies in runtime/ point down, never back up."""

    engine: Any

    def send(self, msg: dict, port: str = "out") -> None: ...

    def status(self, text: str, color: str = "", state: str = "idle") -> None: ...

    def debug(self, value: Any, msg: dict | None = None) -> None: ...

    def log(self, text: str, level: str = "info") -> None: ...

    def progress(self, fraction: float | None, text: str = "") -> None: ...

    def resource(self, key: str, make: Callable[[], Any],
                 close: Callable[[Any], Any] | None = None) -> Any: ...


#: The tool call the current task runs a node for (runtime.tools sets it):
#: where ``Node.progress`` goes. An object with ``node`` and ``progress()``.
TOOL_CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("switchboard_tool_call",
                                                                default=None)

#: Every class ``@node`` declared in this process, by type id; the registry
#: picks a package's classes from here after importing the package.
DECLARED: dict[str, type[Node]] = {}


class Node:
    """Base class of every node type. Subclasses declare ``Param``/``Output``
    attributes, are decorated with ``@node`` and implement ``on_message``
    (plain function: runs inline in the sender's call; coroutine: a task per
    message so slow I/O overlaps).

    ``on_message`` returns None to send the message on ``out``, ``DROP`` to
    send nothing, a port name, or a list of port names."""

    spec: ClassVar[NodeSpec]
    #: Max concurrent ``on_message`` calls of an async node; 0 = unlimited,
    #: 1 keeps messages in order.
    concurrency: ClassVar[int] = 0
    #: A plain-function ``on_message`` that may block (waits on I/O, a lock,
    #: long CPU work). In tool mode it then runs in a worker thread under the
    #: tool timeout, which fires on time (the thread itself cannot be killed;
    #: its result is dropped). Left False, a plain function runs inline: the
    #: author promises it returns quickly. From the thread, touch only the
    #: message: no ``send``, status or debug.
    blocking: ClassVar[bool] = False
    #: As a tool, a call returns at once with a tracking id while the work
    #: goes on as a task of the run (a crawl, a booking, a long export); the
    #: agent learns the result later. A flow may override it (tool.background).
    background: ClassVar[bool] = False

    def __init__(
        self,
        id: str,
        name: str = "",
        params: dict[str, ParamValue] | None = None,
        outputs: dict[str, str] | None = None,
        runtime: NodeServices | None = None,
    ) -> None:
        self.id = id
        self.name = name or self.spec.name
        self._rt = runtime
        params = params or {}
        outputs = outputs or {}
        for p in self.spec.params:
            self.__dict__[p.name] = BoundParam(p, params.get(p.name))
        for o in self.spec.results:
            self.__dict__[o.name] = BoundOutput(o.name, outputs.get(o.name) or o.path)

    # -- to override -------------------------------------------------------
    def on_message(self, msg: Message) -> Any:
        return None

    async def start(self) -> None:
        """Called once before any message; open connections here."""

    async def generate(self) -> None:
        """Sources override this to send messages; the run waits for it."""

    async def close(self) -> None:
        """Called once when the run ends, even after an error."""

    @classmethod
    def output_ports(cls, params: dict[str, ParamValue]) -> list[str]:
        """Output port names for this node with these settings."""
        return [p.name for p in cls.spec.outputs]

    @classmethod
    def check(cls, params: dict[str, ParamValue]) -> list[tuple[str, str]]:
        """Node-specific checks of the flow's settings: (param, problem)."""
        return []

    # -- services ----------------------------------------------------------
    def param(self, name: str) -> BoundParam:
        return self.__dict__[name]

    def send(self, msg: dict, port: str = "out") -> None:
        """Send a message on a port (sources, or more than one message)."""
        if msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            return  # in tool mode nothing flows on from the node's outputs
        if self._rt is not None:
            self._rt.send(msg, port)

    async def run_blocking(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run blocking work (a synchronous SDK, file or CPU work) in a worker
        thread, so that the event loop (and, in the designer, the window)
        stays responsive. Call it from an ``async def on_message``; the
        function must not touch the message router (no ``send`` from it)."""
        import functools

        return await run_in_thread(functools.partial(fn, *args, **kwargs))

    def run_resource(self, key: str, make: Callable[[], Any],
                     close: Callable[[Any], Any] | None = None) -> Any:
        """Something shared by the nodes of one run (one HTTP client, a
        browser session by name): made by ``make()`` when first asked for,
        closed by ``close(value)`` when the run ends, whatever happens.
        Outside a run (a node made by hand) each call makes a new one."""
        if self._rt is None:
            return make()
        return self._rt.resource(key, make, close)

    def show_status(self, text: str = "", color: str = "", state: str = "idle") -> None:
        if self._rt is not None:
            self._rt.status(text, color, state)

    def debug(self, value: Any, msg: dict | None = None) -> None:
        if self._rt is not None:
            self._rt.debug(value, msg)

    def progress(self, fraction: float | None, text: str = "") -> None:
        """Report how far the work is (``fraction`` 0..1, or None when not
        known) and a short text ("page 2 of 5"). Inside a tool call it
        becomes a ``tool.status`` progress event of that call (at most a
        few per second); otherwise the node's status line. A worker thread
        (``run_blocking``, a ``blocking`` node) may call it too."""
        if fraction is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
        if self._rt is None:
            return
        report = getattr(self._rt, "progress", None)
        if report is not None:
            report(fraction, text)
        else:  # services without progress (a plugin process): the status line
            done = f"{fraction:.0%}" if fraction is not None else ""
            self._rt.status(" ".join(x for x in (done, text) if x), "blue", "running")

    def effect_once(self, what: str, *parts: Any) -> Any:
        """Before an effect outside the run (a mail, an HTTP POST, a file
        written): whether an earlier attempt of this run already did it, and
        a key to hand the counterpart (runtime.effects). In-process it says
        "not done, no key" at the cost of one look-up; in queue mode, where
        a lost worker's run runs again, it asks the run's ledger."""
        return effect_once(self.id, what, parts)

    @property
    def replay_of(self) -> str:
        """The run whose recorded messages this run replays (``runs rerun
        --from`` or ``--call``, the designer's "Run from here"), else "".
        A node whose counterpart belonged to that run (a webhook request
        waiting for its answer) can then say what it would do instead of
        failing. A whole rerun starts its sources anew: it replays nothing."""
        engine = getattr(self._rt, "engine", None)
        if not (getattr(engine, "from_node", "") or getattr(engine, "rerun_call", "")):
            return ""
        return getattr(engine, "rerun_of", "") or ""

    def log(self, text: str, level: str = "info") -> None:
        log.log(logging.getLevelName(level.upper()), "%s: %s", self.id, text)
        if self._rt is not None:
            self._rt.log(text, level)


def node(
    type_id: str,
    *,
    name: str,
    category: str,
    description: str | None = None,
    icon: str = "",
    color: str = "",
    tool: Tool | None = None,
    inputs: tuple[str, ...] = ("in",),
    outputs: tuple[str, ...] = ("out",),
    tools_port: bool = False,
    dynamic_outputs: bool = False,
    hooks: tuple[tuple[str, str], ...] = (),
) -> Callable[[type[Node]], type[Node]]:
    """Register a node class and generate its spec from its declaration.
    ``hooks``: (port, label) of lifecycle hook outputs (the agent's)."""

    def wrap(cls: type[Node]) -> type[Node]:
        params: list[Param] = []
        outs: list[Output] = []
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, Param):
                    params = [p for p in params if p.name != attr] + [value]
                elif isinstance(value, Output):
                    outs = [o for o in outs if o.name != attr] + [value]
        # id and name are instance attributes and spec only an annotation on
        # Node, so dir() misses them; a param called `name` would silently
        # replace the node's display name, one called `spec` the spec itself.
        reserved = set(dir(Node)) | {"id", "name", "spec"}
        for p in [*params, *outs]:
            if p.name in reserved or p.name.startswith("_"):
                raise TypeError(f"{type_id}: '{p.name}' is reserved and cannot be a param")
        names = {p.name for p in params}
        for p in params:
            for other in (p.visible_if or {}):
                if other not in names or other == p.name:
                    raise TypeError(f"{type_id}: param '{p.name}' is visible_if "
                                    f"'{other}', which is not another param of it")
        ports_out = [PortSpec(name=o, kind="out") for o in outputs]
        if tools_port:
            ports_out.append(PortSpec(name="tools", label="tools", kind="tools"))
        ports_out += [PortSpec(name=h, label=label, kind="hook") for h, label in hooks]
        doc = inspect.cleandoc(cls.__doc__) if cls.__doc__ else ""
        cls.spec = NodeSpec(
            type=type_id,
            name=name,
            category=category,
            description=description if description is not None else doc,
            icon=icon,
            color=color,
            inputs=[PortSpec(name=i, kind="in") for i in inputs],
            outputs=ports_out,
            dynamic_outputs=dynamic_outputs,
            params=[p.spec() for p in params],
            results=[o.spec(main=i == 0) for i, o in enumerate(outs)],
            tool=tool.spec if tool else None,
            source=cls.generate is not Node.generate,
            package=cls.__module__.split(".")[0] if "." in cls.__module__ else cls.__module__,
        )
        if tool is not None and tool.background:
            cls.background = True
        DECLARED[type_id] = cls
        return cls

    return wrap

"""What a node class declares in its body: ``Param`` (with the scopes the
designer may pick: AI, CUSTOM, MESSAGE), ``Output`` and ``Tool``, each
making its part of the node's spec (``@node`` in runtime.node puts the spec
together), and the labels params get from their names."""

from __future__ import annotations

from typing import Any

from ..spec import Allow, OutputSpec, ParamSpec, ParamType, Scope, ToolSpec

AI = Allow.AI
CUSTOM = Allow.CUSTOM
MESSAGE = Allow.MESSAGE

_SCOPE_FLAG = {Scope.AI: AI, Scope.CUSTOM: CUSTOM, Scope.MESSAGE: MESSAGE}

_NO_DEFAULT = object()

_PY_TYPES: dict[Any, ParamType] = {
    str: ParamType.STR,
    int: ParamType.INT,
    float: ParamType.FLOAT,
    bool: ParamType.BOOL,
    dict: ParamType.JSON,
    list: ParamType.JSON,
    object: ParamType.JSON,
}


class Tool:
    """Declares that a node can serve as an LLM tool."""

    def __init__(self, name: str, description: str, *, background: bool = False) -> None:
        self.spec = ToolSpec(name=name, description=description)
        #: Calls return at once with a tracking id; the work goes on as a
        #: task of the run (Node.background, set by @node).
        self.background = background


def _param_type(t: Any) -> ParamType:
    if isinstance(t, ParamType):
        return t
    if isinstance(t, str):
        return ParamType(t)
    if t in _PY_TYPES:
        return _PY_TYPES[t]
    raise TypeError(f"unsupported param type {t!r}")


_ACRONYMS = {"smtp": "SMTP", "url": "URL", "api": "API", "id": "ID", "http": "HTTP",
             "https": "HTTPS", "json": "JSON", "llm": "LLM", "ai": "AI", "starttls": "STARTTLS",
             "tls": "TLS", "ssl": "SSL", "imap": "IMAP", "sql": "SQL", "csv": "CSV",
             "dir": "folder", "uri": "URI", "ip": "IP"}


def label_for(name: str) -> str:
    """A readable label from a param name: ``smtp_host`` -> "SMTP host",
    ``api_key_env`` -> "API key env", ``base_url`` -> "Base URL"."""
    words = [_ACRONYMS.get(w.lower(), w.lower()) for w in name.split("_") if w]
    if not words:
        return name
    first = words[0]
    words[0] = first if first.isupper() else first[:1].upper() + first[1:]
    return " ".join(words)


class Param:
    """A node parameter. ``allow`` is the set of scopes the designer may pick;
    ``scope`` the one a new node starts with."""

    def __init__(
        self,
        type: Any = str,
        description: str = "",
        *,
        default: Any = _NO_DEFAULT,
        optional: bool = False,
        scope: Allow | Scope | None = None,
        allow: Allow | None = None,
        choices: list[str] | None = None,
        label: str | None = None,
        multiline: bool = False,
        path: str | None = None,
        visible_if: dict[str, list[Any]] | None = None,
        group: str = "",
    ) -> None:
        self.type = ParamType.ENUM if choices else _param_type(type)
        self.visible_if = {k: list(v) for k, v in visible_if.items()} if visible_if else None
        self.group = group
        self.description = description
        self.default = default
        self.optional = optional
        self.choices = list(choices) if choices else None
        self.label = label
        self.multiline = multiline
        self.path = path
        secret = self.type is ParamType.SECRET
        if isinstance(scope, Allow):
            scope = scope.scopes()[0]
        if allow is None:
            allow = CUSTOM if secret else CUSTOM | MESSAGE
            if scope is not None:
                # Naming a default scope is consent to it (Param(str, scope=AI)).
                allow |= _SCOPE_FLAG[Scope(scope)]
        if secret and allow != CUSTOM:
            # A secret is a reference to an env var or keyring entry, fixed by
            # the designer; letting the AI or a message pick it would let them
            # choose which secret leaks.
            raise TypeError("a secret param allows only CUSTOM")
        self.allow = allow
        self.scope = scope or (Scope.CUSTOM if CUSTOM in allow else allow.scopes()[0])
        if Scope(self.scope) not in allow.scopes():
            # Otherwise a new node would start in a scope its flow file then
            # refuses to load.
            raise TypeError(f"default scope '{Scope(self.scope).value}' is not in allow")
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def spec(self) -> ParamSpec:
        has_default = self.default is not _NO_DEFAULT
        return ParamSpec(
            name=self.name,
            type=self.type,
            label=self.label or label_for(self.name),
            description=self.description,
            default=self.default if has_default else None,
            has_default=has_default,
            optional=self.optional,
            allowed_scopes=self.allow.scopes(),
            default_scope=Scope(self.scope),
            choices=self.choices,
            secret=self.type is ParamType.SECRET,
            multiline=self.multiline,
            default_path=self.path,
            visible_if=self.visible_if,
            group=self.group,
        )


class Output:
    """A named result of a node. In RPA mode it is written at its path (the
    flow may move it); in tool mode it is collected into ``__tool_data__``."""

    def __init__(self, type: Any = object, description: str = "", *, path: str | None = None):
        self.type = _param_type(type)
        self.description = description
        self.path = path
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def spec(self, main: bool) -> OutputSpec:
        path = self.path or ("payload" if main else self.name)
        return OutputSpec(name=self.name, type=self.type, description=self.description, path=path)

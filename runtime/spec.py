"""Node specs as data: what the catalog, the flow validator, the designer and
the tool-schema builder all read. Generated from node classes (runtime.node)."""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Scope(enum.StrEnum):
    """Where a parameter's value comes from at run time."""

    CUSTOM = "custom"  # the designer's fixed value in the flow
    MESSAGE = "message"  # a dotted path into the incoming message
    AI = "ai"  # the LLM's tool-call arguments
    # A template rendered per message (runtime.expressions). Not an Allow
    # flag: allowed wherever CUSTOM is and the param is no secret.
    EXPRESSION = "expression"
    # Inside a subflow definition: the value of one of the subflow's own
    # params (``ParamValue.param`` names it), set on each instance. Not an
    # Allow flag either: allowed wherever CUSTOM is (runtime.flow.subflows).
    SUBFLOW = "subflow"

    def __str__(self) -> str:
        return self.value


class Allow(enum.Flag):
    """Which scopes a node author lets the designer pick for a parameter."""

    CUSTOM = 1
    MESSAGE = 2
    AI = 4

    def scopes(self) -> list[Scope]:
        return [s for flag, s in _FLAG_SCOPE if flag in self]


_FLAG_SCOPE = ((Allow.AI, Scope.AI), (Allow.CUSTOM, Scope.CUSTOM), (Allow.MESSAGE, Scope.MESSAGE))


class ParamType(enum.StrEnum):
    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    JSON = "json"
    ENUM = "enum"
    SECRET = "secret"


# JSON-schema type for each param type, used by tool schemas and forms.
JSON_TYPES: dict[ParamType, str | None] = {
    ParamType.STR: "string",
    ParamType.INT: "integer",
    ParamType.FLOAT: "number",
    ParamType.BOOL: "boolean",
    ParamType.ENUM: "string",
    ParamType.SECRET: "string",
    ParamType.JSON: None,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamSpec(_Strict):
    name: str
    type: ParamType
    label: str
    description: str = ""
    default: Any = None
    has_default: bool = False
    optional: bool = False
    allowed_scopes: list[Scope]
    default_scope: Scope
    choices: list[str] | None = None
    secret: bool = False
    multiline: bool = False
    # For a message-scoped default: the path it reads (e.g. the agent's prompt
    # reads `payload` unless the designer says otherwise).
    default_path: str | None = None
    # Shown (and used) only while another param's fixed value is one of these:
    # {"delivery": ["smtp"]}. The designer hides the param otherwise, and
    # validation does not ask for it.
    visible_if: dict[str, list[Any]] | None = None
    # Where the designer shows it: "" with the main params, or a collapsible
    # section ("connection", "advanced", ...) that starts closed.
    group: str = ""

    @property
    def required(self) -> bool:
        return not self.has_default and not self.optional

    def allows(self, scope: Scope) -> bool:
        if scope is Scope.EXPRESSION:
            # A template is a fixed value the designer writes, computed per
            # message: wherever a fixed value is allowed, except a secret
            # (which must name where it is kept, never be computed).
            return Scope.CUSTOM in self.allowed_scopes and not self.secret
        if scope is Scope.SUBFLOW:
            # The instance's setting of a subflow param stands in for a
            # fixed value; a secret one passes the secret's reference.
            return Scope.CUSTOM in self.allowed_scopes
        return scope in self.allowed_scopes


class PortSpec(_Strict):
    name: str
    label: str = ""
    # "tools" marks an agent's tools port: wires from it make tools, not RPA hops.
    # "hook" marks an agent's lifecycle hook (on_start, on_tool, ...): an
    # output like "out" to the engine, drawn apart by the designer.
    kind: Literal["in", "out", "tools", "hook"] = "out"


class OutputSpec(_Strict):
    name: str
    type: ParamType = ParamType.JSON
    description: str = ""
    path: str


class ToolSpec(_Strict):
    name: str
    description: str


class NodeSpec(_Strict):
    type: str
    name: str
    category: str
    description: str = ""
    icon: str = ""
    color: str = ""
    inputs: list[PortSpec] = Field(default_factory=list)
    outputs: list[PortSpec] = Field(default_factory=list)
    # True when output ports depend on params (core.switch: one per rule).
    dynamic_outputs: bool = False
    params: list[ParamSpec] = Field(default_factory=list)
    results: list[OutputSpec] = Field(default_factory=list)
    tool: ToolSpec | None = None
    source: bool = False
    package: str = ""
    # The plugin package serving this node out of process ("" for a node
    # that runs in the runtime's own process).
    plugin: str = ""

    def param(self, name: str) -> ParamSpec | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def output(self, name: str) -> OutputSpec | None:
        for o in self.results:
            if o.name == name:
                return o
        return None

    def param_visible(self, name: str, settings: dict[str, ParamValue]) -> bool:
        """Whether param ``name`` means anything with these settings (its
        ``visible_if``): a param the designer's choice makes meaningless is
        hidden in the designer and left out of a tool's schema. A condition
        on a param that is not fixed (message or AI) holds: that is decided
        at run time."""
        p = self.param(name)
        if p is None or not p.visible_if:
            return True
        for other, values in p.visible_if.items():
            setting = settings.get(other)
            if setting is not None and setting.scope is not Scope.CUSTOM:
                continue
            ospec = self.param(other)
            value = setting.value if setting is not None and setting.value is not None \
                else (ospec.default if ospec is not None else None)
            if value not in values:
                return False
        return True

    @property
    def has_tools_port(self) -> bool:
        return any(p.kind == "tools" for p in self.outputs)


class ParamValue(BaseModel):
    """One parameter's setting in a flow file: who supplies the value."""

    model_config = ConfigDict(extra="forbid")

    scope: Scope
    value: Any = None  # scope custom; scope expression: the template text
    path: str | None = None  # scope message
    description: str | None = None  # scope ai: overrides what the LLM sees
    param: str | None = None  # scope subflow: the name of the subflow's param

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scope": self.scope.value}
        if self.scope is Scope.CUSTOM or self.scope is Scope.EXPRESSION:
            out["value"] = self.value
        elif self.scope is Scope.MESSAGE:
            out["path"] = self.path
        elif self.scope is Scope.SUBFLOW:
            out["param"] = self.param
        if self.description:
            out["description"] = self.description
        return out

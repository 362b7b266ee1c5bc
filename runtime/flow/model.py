"""The flow file's model: a pydantic model of ``switchboard.flow/1`` (the
flow, its nodes, wires and settings) with its stable JSON form, and Problem
and FlowError, which say what is wrong with one."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    PrivateAttr,
    field_validator,
    model_validator,
)

from ..approval import ApprovalPolicy
from ..spec import ParamType, ParamValue
from ..text import printable

if TYPE_CHECKING:
    import networkx as nx  # imported when first needed: it costs ~0.3 s at startup


FORMAT = "switchboard.flow/1"


class ToolOverride(BaseModel):
    """A flow's settings for a tool node: its own name/description (so that
    two Send Mail nodes can be two tools of one agent), when its calls wait
    for a person (``approval``; unset: sensitive-looking tools always do),
    and how often it may be called."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    description: str | None = None
    approval: ApprovalPolicy | None = None
    #: Most calls of this tool in one run (all agents together), and in one
    #: LLM answer; past them a call is refused with a reason the LLM reads.
    max_calls_per_run: int | None = Field(default=None, ge=1, le=1_000_000)
    max_calls_per_turn: int | None = Field(default=None, ge=1, le=1000)
    #: Calls return at once with a tracking id and the work goes on as a task
    #: of the run (unset: as the node's author declared, Node.background).
    background: bool | None = None

    def is_set(self) -> bool:
        return any(v is not None for v in (self.name, self.description, self.approval,
                                           self.max_calls_per_run, self.max_calls_per_turn,
                                           self.background))


class FlowNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    type: str = Field(min_length=1)
    name: str | None = None
    # Finite only: NaN would be saved as the non-JSON token NaN.
    position: tuple[FiniteFloat, FiniteFloat] = (0.0, 0.0)
    params: dict[str, ParamValue] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    tool: ToolOverride | None = None
    disabled: bool = False
    notes: str | None = None
    #: Pinned data (runtime.pins): per output port, the messages sent instead
    #: of running the node, in runs that use pins.
    pin: dict[str, list[dict[str, Any]]] | None = None
    #: An instance of a library subflow: the version and content hash it
    #: pins (runtime.flow.subflows). None for every other node, and for an
    #: instance of a definition kept in the flow file itself.
    subflow: SubflowPin | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.name:
            out["name"] = self.name
        out["position"] = [_num(self.position[0]), _num(self.position[1])]
        if self.params:
            out["params"] = {k: v.to_json() for k, v in self.params.items()}
        if self.outputs:
            out["outputs"] = dict(self.outputs)
        if self.tool and self.tool.is_set():
            out["tool"] = self.tool.model_dump(mode="json", exclude_none=True)
        if self.disabled:
            out["disabled"] = True
        if self.notes:
            out["notes"] = self.notes
        if self.pin is not None:
            out["pin"] = self.pin
        if self.subflow is not None:
            out["subflow"] = self.subflow.model_dump(mode="json")
        return out


def fresh_id(base: str, taken: set[str]) -> str:
    """``base``, else ``base2``, ``base3``... (counting on from a number it
    ends in: ``ask2`` -> ``ask3``): the first not in ``taken``. A node id
    for a copy, a paste or a node brought out of a subflow."""
    if base not in taken:
        return base
    stem = base.rstrip("0123456789") or base
    i = 2
    while f"{stem}{i}" in taken:
        i += 1
    return f"{stem}{i}"


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 2)


class SubflowPin(BaseModel):
    """What an instance of a library subflow runs: the definition's version
    and the hash of its content (``SubflowDef.content_hash``), so that a run
    is the same run tomorrow, or a clear error if the file changed."""

    model_config = ConfigDict(extra="forbid")
    version: str = Field(min_length=1, max_length=100)
    hash: str = Field(min_length=1, max_length=100)


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: tuple[str, str] = Field(alias="from")
    target: tuple[str, str] = Field(alias="to")

    def to_json(self) -> dict[str, Any]:
        return {"from": list(self.source), "to": list(self.target)}


#: An agent's lifecycle hook ports (runtime.agent.hooks), in the order they fire.
HOOK_PORTS = ("on_start", "on_turn", "on_tool", "on_end")
#: Most flow-level hooks one flow may set.
MAX_FLOW_HOOKS = 100


class FlowHook(BaseModel):
    """A hook flow wired by the flow's settings instead of by a wire: ``node``
    (the first node of the hook flow) gets the ``port`` hook's messages of
    every agent of the flow, or of the agents named (seed 004's apply_to)."""

    model_config = ConfigDict(extra="forbid")
    port: Literal["on_start", "on_turn", "on_tool", "on_end"]
    node: str = Field(min_length=1, max_length=200)
    agents: Literal["all"] | list[str] = Field(default="all")
    #: The agent waits for the flow's AI Hook Result (hook_timeout_seconds at most).
    blocking: bool = False

    @field_validator("agents")
    @classmethod
    def _bounded(cls, v: Any) -> Any:
        if isinstance(v, list) and len(v) > 1000:
            raise ValueError("at most 1000 agents")
        return v

    def applies_to(self, agent_id: str) -> bool:
        return self.agents == "all" or agent_id in self.agents


class FlowSettings(BaseModel):
    """How the flow's runs are bounded. A run option given on the command
    line (``--max-in-flight``) or by the engine's caller wins over these."""

    model_config = ConfigDict(extra="forbid")

    #: Messages in flight past which a run fails as a message storm.
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000_000)
    #: Node packages, by their ``switchboard.nodes`` entry point name (core,
    #: ai, mail, http, files, browser, triggers, or an installed package's;
    #: ``switchboard package list`` names them), whose nodes run in their own
    #: process, as a plugin, in this flow.
    out_of_process: list[str] = Field(default_factory=list, max_length=100)
    #: A budget for the whole run, in USD (needs the models' prices) and/or
    #: tokens (input + output of every LLM request): past it, no agent gets
    #: another LLM turn and the run's end says why (runtime.cost).
    budget_usd: float | None = Field(default=None, gt=0)
    budget_tokens: int | None = Field(default=None, ge=1)
    #: Hook flows applied to every agent of the flow, or to the agents named.
    hooks: list[FlowHook] = Field(default_factory=list, max_length=MAX_FLOW_HOOKS)
    #: Environment variables this flow's templates may read as ``env.NAME``
    #: (a name, or a prefix ending in ``*``); see runtime.expressions.
    env_readable: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("env_readable", mode="before")
    @classmethod
    def _env_names(cls, v: Any) -> Any:
        from ..expressions import env_pattern_problem

        for i, name in enumerate(v if isinstance(v, list) else ()):
            why = env_pattern_problem(name)
            if why:
                raise ValueError(f"entry {i + 1}: {why}")
        return v


#: A subflow's name: what its instances' type says after ``subflow:``, its
#: library file's name (NAME.subflow.json) and its tool name.
SUBFLOW_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
#: A library subflow's version: semver, MAJOR.MINOR.PATCH[-prerelease].
SEMVER_RE = r"^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(-[0-9A-Za-z.-]{1,40})?$"


class SubflowParam(BaseModel):
    """A param a subflow declares, set on each of its instances like a
    node's param; inside, a node's param reads it with scope ``subflow``
    (or a template with ``{{ subflow.NAME }}``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    label: str = Field(default="", max_length=200)
    type: ParamType = ParamType.STR
    description: str = Field(default="", max_length=10_000)
    default: Any = None
    #: Whether an instance may hand this param to the AI (scope ``ai``);
    #: a secret never is.
    ai_allowed: bool = False
    secret: bool = False
    choices: list[str] | None = Field(default=None, max_length=1000)
    visible_if: dict[str, list[Any]] | None = None

    @model_validator(mode="after")
    def _no_ai_secret(self) -> SubflowParam:
        if self.secret and self.ai_allowed:
            raise ValueError(f"param '{self.name}': a secret is never given to the AI "
                             "(ai_allowed must be false)")
        if (self.secret or self.type is ParamType.SECRET) and self.default is not None:
            from ..node import is_secret_ref

            if not is_secret_ref(self.default):
                raise ValueError(
                    f"param '{self.name}': a secret's default must name an environment variable "
                    '{"env": "NAME"} or a keyring entry {"keyring": "SERVICE", "username": "USER"}, '
                    "never the secret itself")
        if self.type is ParamType.ENUM and not self.choices:
            raise ValueError(f"param '{self.name}': an enum needs its choices")
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True) | {"name": self.name}


class SubflowDef(BaseModel):
    """A subflow: a flow with named inputs and outputs (its ``subflow.in``
    and ``subflow.out`` nodes) and params of its own, placed in other flows
    as one node of type ``subflow:NAME``. Kept in a flow file's
    ``subflows`` section, or alone in a library file NAME.subflow.json
    (``format`` switchboard.subflow/1, with a ``version``)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["switchboard.subflow/1"] | None = None  # set in a library file
    name: str = Field(pattern=SUBFLOW_NAME_RE)
    label: str = Field(default="", max_length=200)
    description: str = Field(default="", max_length=10_000)
    version: str | None = Field(default=None, pattern=SEMVER_RE)
    icon: str = Field(default="", max_length=100)
    params: list[SubflowParam] = Field(default_factory=list, max_length=1000)
    #: Used as an agent's tool: the first message that reaches a
    #: ``subflow.out`` is the result, or (``list``) every message until the
    #: call's run inside settles.
    result: Literal["first", "list"] = "first"
    nodes: list[FlowNode] = Field(default_factory=list)
    wires: list[Wire] = Field(default_factory=list)

    @property
    def type(self) -> str:
        """The node type of its instances."""
        return "subflow:" + self.name

    def param(self, name: str) -> SubflowParam | None:
        return next((p for p in self.params if p.name == name), None)

    def as_flow(self) -> Flow:
        """Its nodes and wires as a Flow (sharing them), to check and edit:
        the Flow's ``nodes`` and ``wires`` are this definition's own lists,
        so that a node added to one is in the other (validation copies the
        lists it is given, so they are set after)."""
        flow = Flow(name=self.label or self.name, description=self.description or None)
        flow.nodes = self.nodes
        flow.wires = self.wires
        return flow

    def to_json(self, *, library: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if library:
            out["format"] = SUBFLOW_FORMAT
        out["name"] = self.name
        for key in ("label", "description", "version", "icon"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.params:
            out["params"] = [p.to_json() for p in self.params]
        if self.result != "first":
            out["result"] = self.result
        out["nodes"] = [n.to_json() for n in self.nodes]
        out["wires"] = [w.to_json() for w in self.wires]
        return out

    def content_hash(self) -> str:
        """``sha256:`` of its content in canonical JSON, version and format
        left out: what an instance pins beside the version, so that a file
        edited without a new version is seen."""
        import hashlib

        body = self.to_json()
        body.pop("version", None)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


SUBFLOW_FORMAT = "switchboard.subflow/1"


class Flow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["switchboard.flow/1"] = FORMAT
    name: str = "Untitled"
    description: str | None = None
    settings: FlowSettings = Field(default_factory=FlowSettings)
    nodes: list[FlowNode] = Field(default_factory=list)
    wires: list[Wire] = Field(default_factory=list)
    #: Subflow definitions kept in this file (runtime.flow.subflows).
    subflows: list[SubflowDef] = Field(default_factory=list, max_length=1000)
    _index: _NodeIndex = PrivateAttr(default_factory=lambda: _NodeIndex())

    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, v: Any) -> Any:
        if v != FORMAT:
            raise ValueError(f"unknown format {v!r}; expected {FORMAT!r}")
        return v

    def node(self, node_id: str) -> FlowNode | None:
        """The first node with this id, or None. Constant time: positions by
        id are cached for the current ``nodes`` list and every hit is checked
        against the list, so appending, removing, replacing or renaming nodes
        in place (as the designer does) is seen at once."""
        nodes = self.nodes
        ix = self._index
        if ix.nodes is nodes:
            i = ix.pos.get(node_id)
            if i is not None and i < len(nodes) and nodes[i].id == node_id:
                return nodes[i]
            if len(nodes) == ix.length and i is None:
                # Same list, same length, id never seen: only a node renamed
                # or replaced in place could have it. Look, as before.
                found = next((n for n in nodes if n.id == node_id), None)
                if found is None:
                    return None
        ix.rebuild(nodes)
        i = ix.pos.get(node_id)
        return nodes[i] if i is not None else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format, "name": self.name}
        if self.description:
            out["description"] = self.description
        settings = self.settings.model_dump(exclude_none=True, exclude_defaults=True)
        if settings:
            out["settings"] = settings
        out["nodes"] = [n.to_json() for n in self.nodes]
        out["wires"] = [w.to_json() for w in self.wires]
        if self.subflows:
            out["subflows"] = [d.to_json() for d in self.subflows]
        return out

    def subflow(self, name: str) -> SubflowDef | None:
        """The definition of this name kept in the flow file, or None."""
        return next((d for d in self.subflows if d.name == name), None)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def new_id(self, base: str) -> str:
        """An id not yet used in this flow, derived from ``base``."""
        base = base.split(".")[-1] or "node"
        taken = {n.id for n in self.nodes}
        if base not in taken:
            return base
        i = 2
        while f"{base}{i}" in taken:
            i += 1
        return f"{base}{i}"


class _NodeIndex:
    """Flow.node()'s cache: first position of each id in one list object.
    Not part of a flow's value: any two compare equal and a copied flow
    starts with an empty one."""

    __slots__ = ("nodes", "length", "pos")

    def __init__(self) -> None:
        self.nodes: list[FlowNode] | None = None
        self.length = 0
        self.pos: dict[str, int] = {}

    def rebuild(self, nodes: list[FlowNode]) -> None:
        pos: dict[str, int] = {}
        for i, n in enumerate(nodes):
            pos.setdefault(n.id, i)
        self.nodes, self.length, self.pos = nodes, len(nodes), pos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NodeIndex)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> _NodeIndex:
        return _NodeIndex()

    def __deepcopy__(self, memo: dict) -> _NodeIndex:
        return _NodeIndex()


class Problem(BaseModel):
    """One thing wrong with a flow. ``severity`` warning does not stop a run.
    ``node_index`` places a problem in a node entry whose id cannot name it
    (not text, or not an object at all)."""

    severity: Literal["error", "warning"] = "error"
    file: str = ""
    node: str | None = None
    node_index: int | None = None
    field: str | None = None
    message: str

    def __str__(self) -> str:
        # One line whatever the file holds: a node id with a newline or an
        # escape code in it is shown escaped (runtime.text.printable).
        where = printable(self.file or "<flow>")
        if self.node:
            where += f": node '{printable(self.node)}'"
        elif self.node_index is not None:
            where += f": node #{self.node_index}"
        if self.field:
            # "f: node 'a', params.x: ..." but "f: format: ...", never "f, format".
            placed = bool(self.node) or self.node_index is not None
            field = printable(self.field)
            where += f", {field}" if placed else f": {field}"
        prefix = "" if self.severity == "error" else "warning: "
        return f"{where}: {prefix}{printable(self.message)}"


class FlowError(Exception):
    """A flow that cannot be loaded or run; ``problems`` says why."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def flow_graph(flow: Flow) -> nx.MultiDiGraph:
    """Nodes and wires as a networkx graph (edge attr ``port``, ``kind``)."""
    import networkx as nx

    g = nx.MultiDiGraph()
    for n in flow.nodes:
        g.add_node(n.id, type=n.type)
    for i, w in enumerate(flow.wires):
        if w.source[0] in g and w.target[0] in g:
            g.add_edge(w.source[0], w.target[0], port=w.source[1], index=i)
    return g

"""Tool definitions and their validation: the JSON schema of each tool an
agent offers its LLM, built from node specs and the flow's scopes.

The schema holds exactly the params the designer set to scope ``ai`` (and
only those the node's author allowed AI). Every call is checked against it
before the node runs (``runtime.tools.bridge``): an unknown tool, an
argument outside the schema (``smtp_host``), a wrong type, a missing
required argument or arguments that are not a JSON object are *refused*
with a text the LLM can read, and the node never runs.

Validation is exact JSON Schema semantics (Draft 2020-12, as ``jsonschema``
implements them). The schemas built here use a small subset (object of typed
or enum properties, ``required``, ``additionalProperties: false``), which is
compiled to a plain-Python check; a property test holds it equal to
``jsonschema``. Refusal texts are built here from ``jsonschema``'s errors,
quoting at most ``QUOTE_LIMIT`` characters of any value, and a schema outside
the subset is validated with ``jsonschema`` directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..approval import ApprovalPolicy, default_policy
from ..arguments import preview, short
from ..flow import TOOL_NAME_RE  # what OpenAI (and most compatible servers) accept
from ..node import NodeConfigError
from ..spec import JSON_TYPES, NodeSpec, ParamType, Scope

if TYPE_CHECKING:
    from ..flow import Flow, FlowNode
    from ..registry import Registry

TRACKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tracking_id": {"type": "string",
                                   "description": "The tracking_id the tool call returned"}},
    "required": ["tracking_id"],
    "additionalProperties": False,
}
# -- schemas ----------------------------------------------------------------

def ai_params(spec: NodeSpec, fnode: FlowNode) -> list[tuple[Any, Any]]:
    """(ParamSpec, setting or None) of every param whose scope is ``ai``,
    in spec order. A param whose author did not allow AI never counts, even
    if a (hand-edited, unvalidated) flow says ``ai``. A template param (scope
    ``expression``) is the designer's like a fixed one: it is never listed,
    so a call that names it is refused as an unknown argument."""
    out = []
    for p in spec.params:
        setting = fnode.params.get(p.name)
        scope = setting.scope if setting is not None else p.default_scope
        if scope is Scope.AI and p.allows(Scope.AI) and not p.secret \
                and spec.param_visible(p.name, fnode.params):
            out.append((p, setting))
    return out


AGENT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "The task, with everything the other agent "
                                                  "needs to know to do it"},
        "documents": {"type": "array", "items": {"type": "string"},
                      "description": "Paths of workspace documents it should read"},
    },
    "required": ["task"],
    "additionalProperties": False,
}

HANDOFF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {"type": "string", "description": "Your result, for the agent that gave you "
                                                    "the task"},
        "documents": {"type": "array", "items": {"type": "string"},
                      "description": "Paths of workspace documents that go with it (files your "
                                     "tools wrote)"},
    },
    "required": ["result"],
    "additionalProperties": False,
}


def tool_schema(spec: NodeSpec, fnode: FlowNode) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: exactly the ``ai`` params (an
    agent used as a tool takes a task and documents)."""
    if spec.has_tools_port:
        return json.loads(json.dumps(AGENT_TOOL_SCHEMA))
    props: dict[str, Any] = {}
    required: list[str] = []
    for p, setting in ai_params(spec, fnode):
        prop: dict[str, Any] = {}
        json_type = JSON_TYPES.get(p.type)
        if json_type:
            prop["type"] = json_type
        if p.type is ParamType.ENUM and p.choices:
            prop["enum"] = list(p.choices)
        description = (setting.description if setting is not None else None) or p.description
        if description:
            prop["description"] = description
        props[p.name] = prop
        if p.required:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


def strict_compatible(schema: dict[str, Any]) -> bool:
    """OpenAI's strict function calling wants every property typed and
    required; a schema with an optional or free-form (json) param is sent
    without ``strict``."""
    props = schema.get("properties", {})
    return set(schema.get("required", [])) == set(props) and all("type" in p for p in props.values())


def function_spec(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A tool as OpenAI's chat completions API takes it."""
    fn: dict[str, Any] = {"name": name, "description": description, "parameters": schema}
    if strict_compatible(schema):
        fn["strict"] = True
    return {"type": "function", "function": fn}


@dataclass
class ToolDef:
    """One tool of one agent."""

    name: str
    description: str
    node_id: str
    schema: dict[str, Any]
    function: dict[str, Any]
    check: Callable[[Any], bool] = field(repr=False)
    _validator: Any = field(default=None, repr=False)
    policy: ApprovalPolicy = field(default_factory=lambda: ApprovalPolicy(mode="never"))
    max_per_run: int | None = None
    max_per_turn: int | None = None
    #: Calls return at once with a tracking id (set by ToolBridge).
    background: bool = False
    #: What max_calls_per_run counts under (default: the node's id).
    count_key: str = ""

    @property
    def validator(self) -> Any:
        if self._validator is None:
            import jsonschema  # lazily: 50 ms of import most runs never need

            self._validator = jsonschema.Draft202012Validator(self.schema)
        return self._validator

    def validate(self, args: Any) -> str | None:
        """None if ``args`` fit the schema, else why not (for the LLM)."""
        if self.check(args):
            return None
        errors = sorted(self.validator.iter_errors(args), key=_error_order)
        if not errors:
            return None
        return "; ".join(_describe(e, self) for e in errors[:5])


def _error_order(e: Any) -> tuple:
    return (list(e.absolute_path), e.validator)


def _describe(e: Any, tool: ToolDef) -> str:
    """One refusal reason, written here rather than taken from jsonschema,
    whose messages quote the whole offending value (a 1 MB argument would go
    back to the LLM whole): a value is quoted with preview(), a name cut
    short."""
    props = tool.schema.get("properties", {})
    accepted = ", ".join(props) or "no arguments"
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        extra = [k for k in e.instance if k not in props]
        names = ", ".join(f"'{short(str(k), 64)}'" for k in extra[:5])
        if len(extra) > 5:
            names += f" and {len(extra) - 5} more"
        word = "argument" if len(extra) == 1 else "arguments"
        return f"unknown {word} {names} ({tool.name} accepts: {accepted})"
    if e.validator == "required":
        missing = re.findall(r"^'(.*)' is a required property$", e.message)
        return f"missing required argument '{short(missing[0] if missing else e.message, 64)}'"
    if e.validator == "type" and not e.absolute_path:
        return "the arguments must be a JSON object"
    where = short(".".join(str(x) for x in e.absolute_path), 100)
    label = f"argument '{where}': " if where else ""
    if e.validator == "type":
        expected = e.validator_value
        if isinstance(expected, list):
            kinds = ", ".join(f"'{x}'" for x in expected)
            return f"{label}{preview(e.instance)} is not of any of the types {kinds}"
        return f"{label}{preview(e.instance)} is not of type '{expected}'"
    if e.validator == "enum":
        return f"{label}{preview(e.instance)} is not one of {preview(e.validator_value)}"
    if e.validator == "const":
        return f"{label}{preview(e.instance)} is not {preview(e.validator_value)}"
    # Any other keyword (a schema outside the compiled subset): jsonschema's
    # text, with the value it quotes at the start cut short.
    text = e.message
    quoted = repr(e.instance)
    if text.startswith(quoted):
        text = preview(e.instance) + text[len(quoted):]
    return label + short(text, 300)


def flat_schema(schema: dict[str, Any]) -> bool:
    """Whether a schema is in the subset tool_schema() builds: a closed
    object of typed or enum properties (compile_check's fast path)."""
    props = schema.get("properties", {})
    return (set(schema) <= {"type", "properties", "required", "additionalProperties"}
            and schema.get("type") == "object" and schema.get("additionalProperties") is False
            and isinstance(props, dict)
            and all(isinstance(p, dict) and set(p) <= {"type", "enum", "description"}
                    for p in props.values()))


def compile_check(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """A plain-Python test equal to JSON Schema validation for the schemas
    tool_schema() builds; anything else is left to jsonschema."""
    props = schema.get("properties", {})
    if not flat_schema(schema):
        def slow(args: Any) -> bool:
            import jsonschema

            return jsonschema.Draft202012Validator(schema).is_valid(args)
        return slow

    tests: dict[str, Callable[[Any], bool]] = {}
    for name, p in props.items():
        tests[name] = _value_test(p.get("type"), p.get("enum"))
    required = frozenset(schema.get("required", ()))

    def check(args: Any) -> bool:
        if type(args) is not dict:
            return False
        if not required.issubset(args):
            return False
        for key, value in args.items():
            test = tests.get(key)
            if test is None or not test(value):
                return False
        return True

    return check


def _value_test(json_type: str | None, enum: list | None) -> Callable[[Any], bool]:
    def type_ok(v: Any) -> bool:
        t = type(v)
        if json_type is None:
            return True
        if json_type == "string":
            return t is str
        if json_type == "boolean":
            return t is bool
        if json_type == "integer":
            return t is int or (t is float and v.is_integer())
        if json_type == "number":
            return t is int or t is float
        return False

    if enum is None:
        return type_ok
    # Our enums are strings (typed "string"); for anything else defer to
    # JSON equality as jsonschema does it (1 == 1.0, but True != 1).
    choices = list(enum)

    def enum_ok(v: Any) -> bool:
        return type_ok(v) and any(_json_equal(v, c) for c in choices)

    return enum_ok


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _tool_description(spec: NodeSpec, fnode: FlowNode) -> str:
    if fnode.tool and fnode.tool.description:
        return fnode.tool.description
    return spec.tool.description if spec.tool else ""


def build_tool(spec: NodeSpec, fnode: FlowNode) -> ToolDef:
    from ..flow import tool_name

    name = tool_name(spec, fnode) or ""
    if not TOOL_NAME_RE.match(name):
        raise NodeConfigError(
            f"tool name '{name}' of node '{fnode.id}' must be 1-64 letters, digits, '_' or '-'")
    schema = tool_schema(spec, fnode)
    description = _tool_description(spec, fnode)
    settings = fnode.tool
    if settings is not None and settings.approval is not None:
        policy = settings.approval
    elif spec.has_tools_port:
        # An agent used as a tool does nothing itself: its own tools ask.
        policy = ApprovalPolicy(mode="never")
    else:
        policy = default_policy(name, spec.type)
    return ToolDef(name=name, description=description, node_id=fnode.id, schema=schema,
                   function=function_spec(name, description, schema),
                   check=compile_check(schema), policy=policy,
                   max_per_run=settings.max_calls_per_run if settings else None,
                   max_per_turn=settings.max_calls_per_turn if settings else None)


def build_offered_tools(spec: NodeSpec, fnode: FlowNode, entries: list[Any]) -> list[ToolDef]:
    """The tools of a node that offers several (an MCP server's): one per
    entry its class's ``tool_entries(params)`` gives (objects with name,
    description, schema, approval, max_calls_per_run, max_calls_per_turn),
    all run by that node. Their calls are counted per tool, not per node."""
    out = []
    for e in entries:
        if not TOOL_NAME_RE.match(e.name):
            raise NodeConfigError(f"tool name '{short(e.name, 64)}' of node '{fnode.id}' must be "
                                  "1-64 letters, digits, '_' or '-'")
        function = function_spec(e.name, e.description, e.schema)
        if not flat_schema(e.schema):
            # Strict mode wants every nested object closed and fully required:
            # a schema someone else wrote is sent as it is, unstrict.
            function["function"].pop("strict", None)
        out.append(ToolDef(name=e.name, description=e.description, node_id=fnode.id,
                           schema=e.schema, function=function, check=compile_check(e.schema),
                           policy=e.approval or default_policy(e.name, spec.type),
                           max_per_run=e.max_calls_per_run, max_per_turn=e.max_calls_per_turn,
                           count_key=f"{fnode.id}/{e.name}"))
    return out


def agent_tools(flow: Flow, agent_id: str, registry: Registry | None = None, *,
                wires: list[Any] | None = None) -> list[ToolDef]:
    """The tools of one agent, in wire order. ``wires``: the agent's own
    wires, when the caller has grouped them (else every wire is looked at)."""
    from ..registry import Registry as _Registry

    registry = registry or _Registry.default()
    agent = flow.node(agent_id)
    aspec = registry.spec(agent.type) if agent else None
    if aspec is None:
        return []
    tool_ports = {p.name for p in aspec.outputs if p.kind == "tools"}
    out: list[ToolDef] = []
    for wire in flow.wires if wires is None else wires:
        if wire.source[0] != agent_id or wire.source[1] not in tool_ports:
            continue
        fnode = flow.node(wire.target[0])
        spec = registry.spec(fnode.type) if fnode else None
        if fnode is None or spec is None or spec.tool is None or fnode.disabled:
            continue
        entries = getattr(registry.get(fnode.type), "tool_entries", None)
        if entries is not None:
            out += build_offered_tools(spec, fnode, entries(fnode.params))
            continue
        out.append(build_tool(spec, fnode))
    return out


def agent_tool_specs(flow: Flow, registry: Registry | None = None,
                     file: str = "") -> dict[str, list[dict]]:
    """Per agent id: its tools exactly as sent to the LLM (OpenAI function
    format). What ``switchboard tools FLOW`` prints. A flow with subflow
    instances is looked at as it runs (expanded, ``file`` locating its
    library): a subflow instance wired to an agent is one tool, and an
    agent inside an instance is listed by its path (``order.assistant``)."""
    from ..flow.expand import expand, has_subflows
    from ..registry import Registry as _Registry

    registry = registry or _Registry.default()
    if has_subflows(flow):
        from ..flow.subflows import with_subflows

        registry = with_subflows(registry, flow, file)
        flow = expand(flow, registry, file).flow
    by_source: dict[str, list[Any]] = {}
    for wire in flow.wires:  # once, not once per agent
        by_source.setdefault(wire.source[0], []).append(wire)
    out: dict[str, list[dict]] = {}
    for fnode in flow.nodes:
        spec = registry.spec(fnode.type)
        if spec is not None and spec.has_tools_port:
            out[fnode.id] = [t.function for t in agent_tools(
                flow, fnode.id, registry, wires=by_source.get(fnode.id, []))]
    return out

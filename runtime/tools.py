"""Tool schemas from node specs and the flow's scopes, and the bridge that
turns an LLM's tool calls into ``tool_request`` messages.

The JSON schema an agent gives its LLM for a tool holds exactly the params the
designer set to scope ``ai`` (and only those the node's author allowed AI).
Every call is checked against that schema before the node runs: an unknown
tool, an argument outside the schema (``smtp_host``), a wrong type, a missing
required argument or arguments that are not a JSON object are *refused* with
a text the LLM can read, and the node never runs.

Validation is exact JSON Schema semantics (Draft 2020-12, as ``jsonschema``
implements them). The schemas built here use a small subset (object of typed
or enum properties, ``required``, ``additionalProperties: false``), which is
compiled to a plain-Python check; a property test holds it equal to
``jsonschema``. Refusal texts come from ``jsonschema`` itself, and a schema
outside the subset is validated with ``jsonschema`` directly.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .events import ToolCall, ToolResult
from .message import (
    AGENT_NODE_ID,
    MESSAGE_TYPE,
    PARAMETERS,
    RESERVED_KEYS,
    TOOL_CALLER_ID,
    TOOL_DATA,
    TOOL_ERROR,
    TOOL_NAME,
    TOOL_REQUEST,
    TOOL_STATUS,
    deep_copy,
    to_jsonable,
)
from .node import NodeConfigError, redact
from .spec import JSON_TYPES, NodeSpec, ParamType, Scope

if TYPE_CHECKING:
    from .engine import Engine
    from .flow import Flow, FlowNode
    from .registry import Registry

#: What OpenAI (and most compatible servers) accept as a function name.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_TOOL_TIMEOUT = 60.0


# -- schemas ----------------------------------------------------------------

def ai_params(spec: NodeSpec, fnode: FlowNode) -> list[tuple[Any, Any]]:
    """(ParamSpec, setting or None) of every param whose scope is ``ai``,
    in spec order. A param whose author did not allow AI never counts, even
    if a (hand-edited, unvalidated) flow says ``ai``."""
    out = []
    for p in spec.params:
        setting = fnode.params.get(p.name)
        scope = setting.scope if setting is not None else p.default_scope
        if scope is Scope.AI and p.allows(Scope.AI) and not p.secret:
            out.append((p, setting))
    return out


def tool_schema(spec: NodeSpec, fnode: FlowNode) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: exactly the ``ai`` params."""
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
    accepted = ", ".join(tool.schema.get("properties", {})) or "no arguments"
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        extra = [k for k in e.instance if k not in tool.schema.get("properties", {})]
        names = ", ".join(f"'{k}'" for k in extra)
        word = "argument" if len(extra) == 1 else "arguments"
        return f"unknown {word} {names} ({tool.name} accepts: {accepted})"
    if e.validator == "required":
        missing = re.findall(r"^'(.*)' is a required property$", e.message)
        return f"missing required argument '{missing[0] if missing else e.message}'"
    if e.validator == "type" and not e.absolute_path:
        return "the arguments must be a JSON object"
    where = ".".join(str(x) for x in e.absolute_path)
    text = e.message if len(e.message) <= 300 else e.message[:300] + "…"
    return f"argument '{where}': {text}" if where else text


def compile_check(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """A plain-Python test equal to JSON Schema validation for the schemas
    tool_schema() builds; anything else is left to jsonschema."""
    props = schema.get("properties", {})
    simple = (set(schema) <= {"type", "properties", "required", "additionalProperties"}
              and schema.get("type") == "object" and schema.get("additionalProperties") is False
              and all(set(p) <= {"type", "enum", "description"} for p in props.values()))
    if not simple:
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
    from .flow import tool_name

    name = tool_name(spec, fnode) or ""
    if not TOOL_NAME_RE.match(name):
        raise NodeConfigError(
            f"tool name '{name}' of node '{fnode.id}' must be 1-64 letters, digits, '_' or '-'")
    schema = tool_schema(spec, fnode)
    description = _tool_description(spec, fnode)
    return ToolDef(name=name, description=description, node_id=fnode.id, schema=schema,
                   function=function_spec(name, description, schema),
                   check=compile_check(schema))


def agent_tools(flow: Flow, agent_id: str, registry: Registry | None = None) -> list[ToolDef]:
    """The tools of one agent, in wire order."""
    from .registry import Registry as _Registry

    registry = registry or _Registry.default()
    agent = flow.node(agent_id)
    aspec = registry.spec(agent.type) if agent else None
    if aspec is None:
        return []
    tool_ports = {p.name for p in aspec.outputs if p.kind == "tools"}
    out: list[ToolDef] = []
    for wire in flow.wires:
        if wire.source[0] != agent_id or wire.source[1] not in tool_ports:
            continue
        fnode = flow.node(wire.target[0])
        spec = registry.spec(fnode.type) if fnode else None
        if fnode is None or spec is None or spec.tool is None or fnode.disabled:
            continue
        out.append(build_tool(spec, fnode))
    return out


def agent_tool_specs(flow: Flow, registry: Registry | None = None) -> dict[str, list[dict]]:
    """Per agent id: its tools exactly as sent to the LLM (OpenAI function
    format). What ``switchboard tools FLOW`` prints."""
    from .registry import Registry as _Registry

    registry = registry or _Registry.default()
    out: dict[str, list[dict]] = {}
    for fnode in flow.nodes:
        spec = registry.spec(fnode.type)
        if spec is not None and spec.has_tools_port:
            out[fnode.id] = [t.function for t in agent_tools(flow, fnode.id, registry)]
    return out


# -- calls ------------------------------------------------------------------

@dataclass(slots=True)
class ToolOutcome:
    """What one tool call came to: ``success`` (data), ``error`` (the node
    failed or timed out) or ``refused`` (the node never ran)."""

    call_id: str  # the LLM's id for the call, echoed back to it
    caller_id: str  # ours: unique per call in this process
    tool: str
    node: str
    args: Any
    status: str
    data: Any = None
    error: str = ""
    ms: float = 0.0

    def content(self) -> str:
        """The text the LLM gets back; a secret a node put in its outputs is
        masked (errors already are)."""
        if self.status == "success":
            try:
                text = json.dumps(self.data, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                text = json.dumps(to_jsonable(self.data), ensure_ascii=False)
            return redact(text)
        prefix = "refused: " if self.status == "refused" else ""
        return json.dumps({"error": prefix + self.error}, ensure_ascii=False)

    def summary(self) -> dict[str, Any]:
        """One entry of the agent's ``agent.tool_calls`` output."""
        out: dict[str, Any] = {"tool": self.tool, "args": to_jsonable(self.args),
                               "status": self.status}
        if self.status == "success":
            out["data"] = to_jsonable(self.data)
        else:
            out["error"] = self.error
        out["ms"] = round(self.ms, 3)
        return out


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """Arguments as the LLM sent them -> (value, error). Text is JSON; an
    empty text means no arguments."""
    if isinstance(raw, (dict, list, int, float, bool)) or raw is None:
        return raw, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            return json.loads(raw), None
        except ValueError as exc:
            return raw, f"the arguments are not valid JSON ({exc}); send one JSON object"
    return raw, f"the arguments must be a JSON object, got {type(raw).__name__}"


_caller_prefix = uuid.uuid4().hex[:8]
_caller_seq = 0


def new_caller_id() -> str:
    global _caller_seq
    _caller_seq += 1
    return f"{_caller_prefix}-{_caller_seq:x}"


class ToolBridge:
    """An agent's side of its tools: the schemas its LLM sees, and calls
    routed to the tool nodes as ``tool_request`` messages.

    Every call runs on its own clone of the agent's message, under its own
    timeout, and is cancelled with the task that awaits it (the agent's, which
    the engine cancels when the run stops)."""

    def __init__(self, engine: Engine, agent_id: str) -> None:
        self.engine = engine
        self.agent_id = agent_id
        self.tools: dict[str, ToolDef] = {}
        for t in agent_tools(engine.flow, agent_id, engine.registry):
            self.tools[t.name] = t
        self.functions = [t.function for t in self.tools.values()]
        self.names = list(self.tools)

    async def call_many(self, base: dict, calls: list[Any], timeout: float | None) -> list[ToolOutcome]:
        """Run the calls of one LLM turn concurrently; results in call order.
        Each call is ``(call_id, name, raw_arguments)``."""
        if len(calls) == 1 or all(self._inline(c[1]) for c in calls):
            # A plain-function node never yields to the loop, so tasks would
            # only run these one after the other anyway: skip making them.
            return [await self.call(base, c[0], c[1], c[2], timeout) for c in calls]
        return list(await asyncio.gather(
            *(self.call(base, c[0], c[1], c[2], timeout) for c in calls)))

    def _inline(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is None or not self.engine.nodes[tool.node_id].is_async

    async def call(self, base: dict, call_id: str, name: str, raw_args: Any,
                   timeout: float | None = DEFAULT_TOOL_TIMEOUT) -> ToolOutcome:
        t0 = time.perf_counter()
        bus = self.engine.bus
        caller_id = new_caller_id()
        tool = self.tools.get(name)
        node_id = tool.node_id if tool else ""
        args, why = parse_arguments(raw_args)
        if bus.active:
            bus.publish(ToolCall(agent=self.agent_id, node=node_id, tool=str(name),
                                 caller_id=caller_id, args=to_jsonable(args, limit=4000)))
        if tool is None:
            available = ", ".join(self.names) or "none"
            why = f"unknown tool '{name}' (available tools: {available})"
        elif why is None:
            why = tool.validate(args)
        if why is not None:
            out = ToolOutcome(call_id, caller_id, str(name), node_id, args, "refused", error=why,
                              ms=(time.perf_counter() - t0) * 1000)
            self._published(out)
            return out

        req = self.request(base, caller_id, tool, args)
        try:
            # A plain-function node runs to the end without yielding, so no
            # timer could interrupt it: only coroutines get one.
            if timeout and self.engine.nodes[tool.node_id].is_async:
                async with asyncio.timeout(timeout):
                    resp = await self.engine.run_as_tool(tool.node_id, req)
            else:
                resp = await self.engine.run_as_tool(tool.node_id, req)
        except TimeoutError:
            out = ToolOutcome(call_id, caller_id, name, node_id, args, "error",
                              error=f"the tool did not finish within {timeout:g} s and was cancelled",
                              ms=(time.perf_counter() - t0) * 1000)
        except asyncio.CancelledError:
            out = ToolOutcome(call_id, caller_id, name, node_id, args, "error",
                              error="cancelled: the run stopped",
                              ms=(time.perf_counter() - t0) * 1000)
            self._published(out)
            raise
        else:
            if resp.get(TOOL_CALLER_ID) != caller_id:  # correlation is by caller id
                raise RuntimeError(f"tool response for {resp.get(TOOL_CALLER_ID)!r}, "
                                   f"expected {caller_id!r}")
            ms = (time.perf_counter() - t0) * 1000
            if resp.get(TOOL_STATUS) == "success":
                out = ToolOutcome(call_id, caller_id, name, node_id, args, "success",
                                  data=resp.get(TOOL_DATA), ms=ms)
            else:
                out = ToolOutcome(call_id, caller_id, name, node_id, args, "error",
                                  error=redact(str(resp.get(TOOL_ERROR) or "failed")), ms=ms)
        self._published(out)
        return out

    def request(self, base: dict, caller_id: str, tool: ToolDef, args: dict) -> dict:
        """The tool_request: a clone of the agent's message plus the reserved
        keys; the validated arguments travel only under ``__parameters__``."""
        req = deep_copy(base)
        for key in RESERVED_KEYS:
            if key in req:
                del req[key]
        req[MESSAGE_TYPE] = TOOL_REQUEST
        req[TOOL_CALLER_ID] = caller_id
        req[AGENT_NODE_ID] = self.agent_id
        req[TOOL_NAME] = tool.name
        req[PARAMETERS] = args
        return req

    def _published(self, out: ToolOutcome) -> None:
        bus = self.engine.bus
        if bus.active:
            bus.publish(ToolResult(agent=self.agent_id, node=out.node, tool=out.tool,
                                   caller_id=out.caller_id, status=out.status,  # type: ignore[arg-type]
                                   data=to_jsonable(out.data, limit=4000), error=out.error,
                                   ms=out.ms))

"""What a new wire brings with it: the defaults a newcomer would otherwise
have to find and type, set in the same undo step as the wire.

- An Inject with an empty payload wired into a node that asks its payload
  as a prompt (an AI Agent) gets a sample prompt, as text: the flow runs at
  once, and the payload field shows it selected, so that typing replaces it.
  (Left empty, validation calls it an error: runtime.flow.empty_prompts.)
- A tool wired into an agent that still plays the keyless script (a new
  agent with no API key set up, designer.model.commands.KEYLESS_SCRIPT) gets a
  script that calls it once with example arguments, then answers with what
  the tool said: Run shows a tool call, with its arguments, before any key
  exists.

Each is set only while the value is the one a new node starts with, so an
edited flow is never changed behind the user's back."""

from __future__ import annotations

import json
from typing import Any

from runtime.flow import Wire, empty_prompts
from runtime.spec import ParamValue, Scope

from ..model.commands import KEYLESS_SCRIPT, AddWire, SetParam
from ..model.document import FlowDocument

#: What a new Inject before an agent asks, until the user types over it.
SAMPLE_PROMPT = "Write to ada@example.com that the report is ready"

#: The keyless agent's answer once it has a tool to call.
DEMO_ANSWER = ("Scripted answer (no API key is set up yet) to: {prompt}. I called {tool} with "
               "example arguments; it answered: {last_result}")

_ADDRESS_NAMES = {"to", "cc", "bcc", "email", "recipient", "recipients", "address", "sender"}


def connect(doc: FlowDocument, wire: Wire, label: str = "Connect") -> list[str]:
    """Add a wire and its defaults as one undo step; what was set, in words."""
    stack = doc.undo_stack
    stack.beginMacro(label)
    try:
        stack.push(AddWire(doc, wire))
        return wire_defaults(doc, wire)
    finally:
        stack.endMacro()


def wire_defaults(doc: FlowDocument, wire: Wire) -> list[str]:
    """Push the defaults a wire just added brings (call inside the wire's
    undo macro); what was set, in words, for the status bar."""
    said: list[str] = []
    source, port = wire.source
    for inject, _field, _message in empty_prompts(doc.flow, doc.registry):
        if inject == source:
            doc.undo_stack.push(SetParam(doc, inject, "payload", ParamValue(
                scope=Scope.CUSTOM, value=SAMPLE_PROMPT), merge=False))
            said.append(f"{_name(doc, inject)} asks a sample prompt: click it and type over it")
    spec = doc.spec(source)
    kinds = {p.name: p.kind for p in spec.outputs} if spec is not None else {}
    if kinds.get(port) == "tools" and _keyless(doc, source):
        demo = demo_script(doc, source, wire.target[0])
        if demo is not None:
            doc.undo_stack.push(SetParam(doc, source, "script", ParamValue(
                scope=Scope.CUSTOM, value=demo), merge=False))
            tool = demo[0]["tool_calls"][0]["name"]
            said.append(f"{_name(doc, source)} (scripted, no key yet) now calls {tool} once "
                        "with example arguments")
    return said


def _name(doc: FlowDocument, node_id: str) -> str:
    from ..model.commands import node_label

    fnode = doc.node(node_id)
    return node_label(doc, fnode) if fnode is not None else node_id


def _keyless(doc: FlowDocument, agent_id: str) -> bool:
    """The agent still plays the script a new agent without a key starts with."""
    fnode = doc.node(agent_id)
    if fnode is None:
        return False
    provider, script = fnode.params.get("provider"), fnode.params.get("script")
    return (provider is not None and provider.scope is Scope.CUSTOM
            and provider.value == "scripted" and script is not None
            and script.scope is Scope.CUSTOM and script.value == KEYLESS_SCRIPT)


def demo_script(doc: FlowDocument, agent_id: str, tool_node: str) -> list[dict] | None:
    """One call of the tool node's (first) function with example arguments,
    then an answer that quotes the prompt and the tool's result."""
    from ..panels.tool_preview import agent_functions

    functions, nodes, error = agent_functions(doc, agent_id)
    if error:
        return None
    for function, node in zip(functions, nodes, strict=False):
        if node == tool_node:
            fn = function.get("function", function)
            name = str(fn.get("name", ""))
            args = example_arguments(fn.get("parameters") or {})
            return [{"tool_calls": [{"name": name, "arguments": args}]},
                    {"text": DEMO_ANSWER.replace("{tool}", name)}]
    return None


def example_arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    """Arguments a JSON schema accepts, plainly examples: an address where
    the name or description asks for one, "Example subject" for text."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(props, dict):
        return {}
    return {name: example_value(name, schema if isinstance(schema, dict) else {})
            for name, schema in props.items()}


def example_value(name: str, schema: dict[str, Any]) -> Any:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return json.loads(json.dumps(schema["default"]))
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "string":
        words = f"{name} {schema.get('description', '')}".lower()
        if name.lower() in _ADDRESS_NAMES or "email" in words or "e-mail" in words:
            return "ada@example.com"
        if "url" in words:
            return "https://example.com/"
        return f"Example {name.replace('_', ' ')}"
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return None

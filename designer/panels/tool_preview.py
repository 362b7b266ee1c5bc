"""What the LLM sees of an agent's tools, for the properties panel: the
functions exactly as ``switchboard tools`` prints them (runtime.tools), and
in words which params the AI fills and which it cannot reach."""

from __future__ import annotations

from designer.model.document import FlowDocument
from runtime.spec import NodeSpec, Scope
from runtime.tools import agent_tools, build_tool

from .editor_base import AI_COLOR, MESSAGE_COLOR


def agent_functions(doc: FlowDocument, agent_id: str) -> tuple[list[dict], list[str], str]:
    """(functions in OpenAI format, their node ids, error text) for one agent:
    the same code path as ``switchboard tools``."""
    try:
        tools = agent_tools(doc.flow, agent_id, doc.registry)
    except Exception as exc:  # a bad tool name: say so instead of a preview
        return [], [], str(exc)
    return [t.function for t in tools], [t.node_id for t in tools], ""


def node_function(doc: FlowDocument, node_id: str) -> tuple[dict | None, str]:
    """One tool node's function entry as its agents would send it."""
    spec, fnode = doc.spec(node_id), doc.node(node_id)
    if spec is None or fnode is None or spec.tool is None:
        return None, ""
    try:
        return build_tool(spec, fnode).function, ""
    except Exception as exc:
        return None, str(exc)


def hidden_params(doc: FlowDocument, node_id: str) -> tuple[list[str], list[str]]:
    """(custom, message) param names of a tool node: what the AI cannot touch."""
    spec, fnode = doc.spec(node_id), doc.node(node_id)
    custom: list[str] = []
    message: list[str] = []
    if spec is None or fnode is None:
        return custom, message
    for p in spec.params:
        if not spec.param_visible(p.name, fnode.params):
            continue  # meaningless with the current choices (visible_if)
        setting = fnode.params.get(p.name)
        scope = setting.scope if setting else p.default_scope
        if scope is Scope.CUSTOM:
            custom.append(p.name)
        elif scope is Scope.MESSAGE:
            message.append(p.name)
    return custom, message


def hidden_summary(fn: dict, custom: list[str], message: list[str],
                   spec: NodeSpec | None = None) -> str:
    """Who supplies what, in words: the AI's arguments and what it cannot
    reach, by the labels the form shows (given the node's spec)."""
    def human(names: list[str]) -> list[str]:
        if spec is None:
            return names
        return [p.label if (p := spec.param(n)) is not None else n for n in names]

    args = human(list(fn.get("function", {}).get("parameters", {}).get("properties", {})))
    custom, message = human(custom), human(message)
    parts = []
    if args:
        parts.append(f"<b style='color:{AI_COLOR}'>AI fills</b> &nbsp;" + ", ".join(args))
    else:
        parts.append("Takes no arguments from the AI.")
    if custom:
        parts.append("<b>Fixed by you</b> &nbsp;" + ", ".join(custom))
    if message:
        parts.append(f"<b style='color:{MESSAGE_COLOR}'>From the message</b> &nbsp;"
                     + ", ".join(message))
    return "<br>".join(parts)

"""The agent loop: ask the LLM, run the tool calls it makes (one turn's calls
concurrently), give it the results, until it answers without calling a tool
or ``max_turns`` runs out."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import LlmRequest, LlmResponse
from ..message import to_jsonable
from ..node import NodeConfigError
from .base import LlmReply, Provider

if TYPE_CHECKING:
    from ..events import EventBus
    from ..tools import ToolBridge, ToolOutcome

EVENT_TEXT_LIMIT = 4000


@dataclass
class AgentResult:
    text: str = ""
    turns: int = 0
    outcomes: list[ToolOutcome] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})

    def info(self) -> dict[str, Any]:
        """The agent's ``agent`` output."""
        return {"turns": self.turns, "tool_calls": [o.summary() for o in self.outcomes],
                "usage": dict(self.usage)}


async def run_agent(*, agent_id: str, provider: Provider, bridge: ToolBridge | None, bus: EventBus,
                    base_msg: dict, prompt: str, instructions: str, model: str,
                    temperature: float | None, max_tokens: int, max_turns: int,
                    tool_timeout: float | None) -> AgentResult:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    functions = bridge.functions if bridge else []
    names = bridge.names if bridge else []
    result = AgentResult()
    usage = result.usage
    for turn in range(max(1, max_turns)):
        if bus.active:
            bus.publish(LlmRequest(agent=agent_id, provider=provider.name, model=model, turn=turn + 1,
                                   message_count=len(conversation) + (1 if instructions else 0),
                                   tools=list(names),
                                   messages=to_jsonable(_as_seen(instructions, conversation),
                                                        limit=EVENT_TEXT_LIMIT)))
        t0 = time.perf_counter()
        reply: LlmReply = await provider.complete(
            system=instructions, messages=conversation, tools=functions, model=model,
            temperature=temperature, max_tokens=max_tokens, turn=turn)
        result.turns = turn + 1
        usage["input_tokens"] += reply.usage.get("input_tokens", 0)
        usage["output_tokens"] += reply.usage.get("output_tokens", 0)
        calls = reply.tool_calls
        if bus.active:
            bus.publish(LlmResponse(
                agent=agent_id, turn=turn + 1, text=reply.text[:EVENT_TEXT_LIMIT],
                tool_calls=[{"id": c.id, "name": c.name,
                             "arguments": to_jsonable(c.arguments, limit=EVENT_TEXT_LIMIT)}
                            for c in calls],
                usage=dict(reply.usage), ms=(time.perf_counter() - t0) * 1000))
        if not calls:
            result.text = reply.text
            return result
        conversation.append({"role": "assistant", "content": reply.text,
                             "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                            for c in calls]})
        if bridge is None:
            outcomes = [_no_tools(c) for c in calls]
        else:
            outcomes = await bridge.call_many(base_msg, [(c.id, c.name, c.arguments) for c in calls],
                                              tool_timeout)
        result.outcomes.extend(outcomes)
        for o in outcomes:
            conversation.append({"role": "tool", "tool_call_id": o.call_id, "name": o.tool,
                                 "content": o.content(), "is_error": o.status != "success"})
    raise NodeConfigError(
        f"no final answer after {result.turns} turns (max_turns); the model kept calling tools")


def _no_tools(call: Any) -> ToolOutcome:
    from ..tools import ToolOutcome

    return ToolOutcome(call.id, "", call.name, "", call.arguments, "refused",
                       error=f"unknown tool '{call.name}' (this agent has no tools)")


def _as_seen(instructions: str, conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the model sees it: providers pass the instructions
    apart from the messages, but a person reading the run wants them first."""
    if not instructions:
        return conversation
    return [{"role": "system", "content": instructions}, *conversation]

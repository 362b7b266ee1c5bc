"""The agent loop: ask the LLM, run the tool calls it makes (one turn's calls
concurrently), give it the results, until it answers without calling a tool
or ``max_turns`` runs out.

The model's text is passed through ``redact`` before it is published or
becomes the agent's answer (a model may repeat a secret it saw). When the
run fails after tool calls already had an effect (a mail went out), the
error names them."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import node as _secrets
from ..events import LlmDelta, LlmRequest, LlmResponse
from ..message import to_jsonable
from ..node import NodeConfigError, redact, redact_hold
from .base import DeltaCoalescer, LlmReply, Provider

if TYPE_CHECKING:
    from ..events import EventBus
    from ..tools import ToolBridge, ToolOutcome
    from .hooks import HookRun

#: Characters of one string (a message's text, an argument) an event holds.
#: An llm.request holds the messages its turn added (_Sent), so an event is
#: bounded by a turn's work, not by the conversation, but for a request
#: that carries the whole list (a job's first).
EVENT_TEXT_LIMIT = 4000
#: Successful calls an error names at most (then "and N more").
NAMED_CALLS = 5


#: Numbers the agents' jobs (one message's work) in this process, for the
#: llm.request events that tell jobs of one agent running at once apart.
_jobs = itertools.count(1)

#: How deep agents may call agents as tools (a parent, its child, ...).
MAX_AGENT_DEPTH = 8
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("agent_depth", default=0)


@dataclass
class AgentResult:
    text: str = ""
    turns: int = 0
    outcomes: list[ToolOutcome] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    #: Workspace documents a child agent handed to its parent (handoff).
    documents: list[str] = field(default_factory=list)
    #: USD of this message's LLM requests; None when the model has no price.
    cost_usd: float | None = None
    #: Call id -> tokens its result cost in the next request (an estimate: runtime.cost).
    tool_tokens: dict[str, int] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        """The agent's ``agent`` output."""
        calls = [o.summary() for o in self.outcomes]
        for o, c in zip(self.outcomes, calls, strict=True):
            if o.call_id in self.tool_tokens:
                c["result_tokens"] = self.tool_tokens[o.call_id]
        return {"turns": self.turns, "tool_calls": calls, "usage": dict(self.usage),
                "cost_usd": self.cost_usd}


async def run_agent(*, agent_id: str, provider: Provider, bridge: ToolBridge | None, bus: EventBus,
                    base_msg: dict, prompt: str, instructions: str, model: str,
                    temperature: float | None, max_tokens: int, max_turns: int,
                    tool_timeout: float | None,
                    max_tool_calls_per_turn: int | None = None,
                    max_tool_calls: int | None = None, max_seconds: float | None = None,
                    parent: str = "", engine: Any = None,
                    budget_usd: float | None = None,
                    budget_tokens: int | None = None,
                    hooks: HookRun | None = None) -> AgentResult:
    """``parent``: the caller id of the tool call this agent answers (an
    agent used as another's tool): its events carry it, and it gets the
    ``handoff`` tool to end its task with a result and documents.
    ``hooks``: the agent's lifecycle hooks and the conversation this work
    belongs to (runtime.agent.hooks); None when nothing is wired to them."""
    depth = _depth.get() + (1 if parent else 0)
    if depth > MAX_AGENT_DEPTH:
        raise NodeConfigError(f"agents call agents {depth} deep; at most {MAX_AGENT_DEPTH} "
                              "(an agent used as a tool counts one level)")
    from ..cost import AgentMeter

    meter = AgentMeter(agent_id, model, engine, budget_usd, budget_tokens,
                       offline=getattr(provider, "offline", False))
    token = _depth.set(depth)
    try:
        run = _run(agent_id, provider, bridge, bus, base_msg, prompt, instructions, model,
                   temperature, max_tokens, max_turns, tool_timeout, max_tool_calls_per_turn,
                   max_tool_calls, parent, engine, meter=meter, hooks=hooks)
        try:
            if max_seconds:
                try:
                    async with asyncio.timeout(max_seconds):
                        result = await run
                except TimeoutError:
                    raise NodeConfigError(f"the agent did not finish within {max_seconds:g} s "
                                          "(max_seconds)") from None
            else:
                result = await run
        except NodeConfigError as exc:
            if hooks is not None:
                hooks.failed(str(exc))
            raise
        if hooks is not None:
            result.text = await hooks.end(result.text, result.info())
        return result
    finally:
        _depth.reset(token)


async def _run(agent_id: str, provider: Provider, bridge: ToolBridge | None, bus: EventBus,
               base_msg: dict, prompt: str, instructions: str, model: str,
               temperature: float | None, max_tokens: int, max_turns: int,
               tool_timeout: float | None, max_tool_calls_per_turn: int | None,
               max_tool_calls: int | None, parent: str, engine: Any, *,
               meter: Any = None, hooks: HookRun | None = None) -> AgentResult:
    if hooks is None:
        return await _turns(agent_id, provider, bridge, bus, base_msg, prompt, instructions,
                            model, temperature, max_tokens, max_turns, tool_timeout,
                            max_tool_calls_per_turn, max_tool_calls, parent, engine, meter,
                            None, [{"role": "user", "content": prompt}])
    # A conversation a hook flow may add to: its history goes on, and it is
    # "running" (a message sent back into the agent joins this work) until
    # the answer is final.
    conv = hooks.conv
    conversation = conv.messages
    continued = bool(conversation)
    conv.running = True
    try:
        prompt = await hooks.start(prompt, model, continued)
        conversation.append({"role": "user", "content": prompt})
        return await _turns(agent_id, provider, bridge, bus, base_msg, prompt, instructions,
                            model, temperature, max_tokens, max_turns, tool_timeout,
                            max_tool_calls_per_turn, max_tool_calls, parent, engine, meter,
                            hooks, conversation)
    finally:
        conv.running = False


async def _turns(agent_id: str, provider: Provider, bridge: ToolBridge | None, bus: EventBus,
                 base_msg: dict, prompt: str, instructions: str, model: str,
                 temperature: float | None, max_tokens: int, max_turns: int,
                 tool_timeout: float | None, max_tool_calls_per_turn: int | None,
                 max_tool_calls: int | None, parent: str, engine: Any, meter: Any,
                 hooks: HookRun | None, conversation: list[dict[str, Any]]) -> AgentResult:
    from ..arguments import event_args, masked
    from ..tools import MAX_TOOL_CALLS_PER_TURN, AgentCalls

    max_calls = max_tool_calls_per_turn or MAX_TOOL_CALLS_PER_TURN
    conv = hooks.conv if hooks is not None else None
    sent = _Sent(next(_jobs), instructions)
    chars = _Chars(instructions)
    calls_state = AgentCalls(parent=parent, limit=max_tool_calls, engine=engine)
    functions = bridge.functions_for(calls_state) if bridge else []
    names = [f["function"]["name"] for f in functions]
    result = AgentResult()
    usage = result.usage
    # Decided once: a turn without a budget checks none.
    budgeted = meter is not None and meter.budgeted
    for turn in range(max(1, max_turns)):
        if conv is not None:
            # Messages a hook flow sent back into the agent meanwhile.
            for text in conv.take_inbox():
                conversation.append({"role": "user", "content": text})
        if bridge is not None and bridge.jobs:
            # Background tasks: what ended since is told, and the agent has
            # task_status / task_cancel while it has any.
            for note in bridge.take_ended():
                conversation.append({"role": "user", "content": note})
            functions = bridge.functions_for(calls_state)
            names = [f["function"]["name"] for f in functions]
        if budgeted:
            try:
                meter.before_request()  # a spent budget: no more LLM turns
            except NodeConfigError as exc:
                _name_effects(exc, result.outcomes)
                raise
        if bus.active:
            since, news = sent.news(conversation, masked)
            bus.publish(LlmRequest(agent=agent_id, parent=parent, provider=provider.name,
                                   model=model, turn=turn + 1,
                                   message_count=len(conversation) + (1 if instructions else 0),
                                   tools=list(names), messages=news, since=since, job=sent.job))
        t0 = time.perf_counter()
        # In a conversation that goes on, the provider's turn counts its
        # requests so far (the scripted provider plays the next one).
        asked = turn if conv is None else conv.requests
        # The streamed text is only for events: with no one listening, the
        # provider is not asked to stream it piece by piece.
        deltas = _deltas(bus, agent_id, parent, turn + 1) if bus.active else None
        try:
            reply: LlmReply = await provider.complete(
                system=instructions, messages=conversation, tools=functions, model=model,
                temperature=temperature, max_tokens=max_tokens, turn=asked, on_delta=deltas)
        except NodeConfigError as exc:  # ProviderError: the LLM failed
            _name_effects(exc, result.outcomes)
            raise
        if deltas is not None:
            deltas.flush()  # the rest of the streamed text, before the answer
        if conv is not None:
            conv.requests += 1
        result.turns = turn + 1
        usage["input_tokens"] += reply.usage.get("input_tokens", 0)
        usage["output_tokens"] += reply.usage.get("output_tokens", 0)
        cost = None
        if meter is not None:
            # The conversation's characters are counted only when the
            # meter shares input tokens out among tool results (a reply
            # that reports none, as the scripted provider's, needs none).
            cost = meter.after_reply(reply.usage, chars.counter(conversation))
            result.cost_usd, result.tool_tokens = meter.cost_usd, meter.tool_tokens
        calls = reply.tool_calls
        text = redact(reply.text) if reply.text else ""
        if bus.active:
            bus.publish(LlmResponse(
                agent=agent_id, parent=parent, turn=turn + 1, text=text[:EVENT_TEXT_LIMIT],
                tool_calls=[{"id": c.id, "name": str(c.name)[:100],
                             "arguments": event_args(c.arguments, EVENT_TEXT_LIMIT)}
                            for c in calls],
                usage=dict(reply.usage), ms=(time.perf_counter() - t0) * 1000,
                cost_usd=cost))
        vetoed: dict[int, str] = {}
        if hooks is not None:
            try:
                text, veto = await hooks.turn(turn + 1, text, calls, reply.usage, cost)
                if veto is not None:
                    vetoed = dict.fromkeys(range(len(calls)), veto)
                elif calls:
                    vetoed = await hooks.before_tools(turn + 1, calls)
            except NodeConfigError as exc:  # a blocking hook stopped the agent
                _name_effects(exc, result.outcomes)
                raise
        if not calls:
            result.text = text
            if conv is not None and conv.inbox:
                # A hook flow sent a message in meanwhile: the work goes on.
                conversation.append({"role": "assistant", "content": text})
                continue
            if bridge is not None and bridge.should_wake():
                # wake_on_background: the message goes on until its tasks
                # end; each ending wakes the agent with a turn that tells it.
                # What it said meanwhile answers the user at once.
                conversation.append({"role": "assistant", "content": text})
                if text and bridge.answer_early is not None and not parent:
                    bridge.answer_early(base_msg, text)
                await bridge.wait_ended()
                continue
            if conv is not None:
                conversation.append({"role": "assistant", "content": text})
            return result
        if bridge is None:
            outcomes = [_no_tools(c) for c in calls]
        elif vetoed:
            outcomes = await _call_unvetoed(bridge, base_msg, calls, vetoed, tool_timeout,
                                            max_calls, calls_state)
        else:
            outcomes = await bridge.call_many(base_msg, [(c.id, c.name, c.arguments) for c in calls],
                                              tool_timeout, max_calls, state=calls_state)
        if hooks is not None:
            hooks.after_tools(turn + 1, outcomes)
        result.outcomes.extend(outcomes)
        if meter is not None:
            meter.after_tools(outcomes)
        if calls_state.handoff is not None:
            # The child ended its task: its result is the answer, whatever
            # else it asked for in the same turn.
            result.text = redact(str(calls_state.handoff.get("result", "")))
            result.documents = list(calls_state.handoff.get("documents") or [])
            if conv is not None:
                _keep_handoff(conversation, text, calls, outcomes)
            return result
        # Arguments refused for their size or depth go back as "{}": the
        # model learns why from the tool result, and the next request does
        # not carry (nor an SDK serialise) the oversized original.
        conversation.append({"role": "assistant", "content": text,
                             "tool_calls": [{"id": c.id, "name": c.name,
                                             "arguments": "{}" if o.bounded else c.arguments}
                                            for c, o in zip(calls, outcomes, strict=True)]})
        for o in outcomes:
            conversation.append({"role": "tool", "tool_call_id": o.call_id, "name": o.tool,
                                 "content": o.content(), "is_error": o.status != "success"})
    exc = NodeConfigError(
        f"no final answer after {result.turns} turns (max_turns); the model kept calling tools")
    _name_effects(exc, result.outcomes)
    raise exc


async def _call_unvetoed(bridge: ToolBridge, base_msg: dict, calls: list[Any],
                         vetoed: dict[int, str], tool_timeout: float | None,
                         max_calls: int, state: Any) -> list[ToolOutcome]:
    """A turn's calls less the ones a blocking hook vetoed: those are
    refused with its reason (the LLM reads it; the node never runs), the
    others run as usual; the outcomes in call order."""
    going = [(c.id, c.name, c.arguments) for i, c in enumerate(calls) if i not in vetoed]
    ran = iter(await bridge.call_many(base_msg, going, tool_timeout, max_calls, state=state)
               if going else [])
    return [_vetoed(bridge, c, vetoed[i], state.parent) if i in vetoed else next(ran)
            for i, c in enumerate(calls)]


def _vetoed(bridge: ToolBridge, call: Any, why: str, parent: str) -> ToolOutcome:
    """A vetoed call's outcome: refused, but with its arguments as the model
    sent them when they are sound (the conversation keeps them, and the
    on_tool hook and the agent's output can read them), not a preview."""
    from ..arguments import parse_arguments

    out = bridge.refuse(call.id, call.name, call.arguments, why, parent)
    args, problem = parse_arguments(call.arguments)
    if problem is None:
        out.args, out.bounded = args, False
    return out


def _keep_handoff(conversation: list[dict[str, Any]], text: str, calls: list[Any],
                  outcomes: list[ToolOutcome]) -> None:
    """A kept conversation ends as the model left it: its last message with
    the calls it made (handoff too) and their results."""
    conversation.append({"role": "assistant", "content": text,
                         "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                        for c in calls]})
    for o in outcomes:
        conversation.append({"role": "tool", "tool_call_id": o.call_id, "name": o.tool,
                             "content": o.content(), "is_error": o.status != "success"})


def _name_effects(exc: Exception, outcomes: list[ToolOutcome]) -> None:
    """Add to the error's text the tool calls that succeeded before it, so
    that whoever reads it knows what already happened (a mail went out):
    "... (after 1 successful tool call: send_email(to=john@example.com…))"."""
    done = [o for o in outcomes if o.status == "success"]
    if not done:
        return
    shown = ", ".join(_call_text(o) for o in done[:NAMED_CALLS])
    if len(done) > NAMED_CALLS:
        shown += f" and {len(done) - NAMED_CALLS} more"
    word = "call" if len(done) == 1 else "calls"
    exc.args = (f"{exc} (after {len(done)} successful tool {word}: {redact(shown)})",
                *exc.args[1:])


def _call_text(o: ToolOutcome) -> str:
    """``send_email(to=john@example.com…)``: the tool and its first argument,
    cut short; "…" when there is more."""
    args = o.args if isinstance(o.args, dict) else {}
    if not args:
        return f"{o.tool}()"
    key, value = next(iter(args.items()))
    text = value if isinstance(value, str) else json.dumps(to_jsonable(value, limit=40),
                                                           ensure_ascii=False)
    more = len(args) > 1 or len(text) > 40
    return f"{o.tool}({key}={text[:40]}{'…' if more else ''})"


def _no_tools(call: Any) -> ToolOutcome:
    from ..arguments import preview, short
    from ..tools import ToolOutcome

    args = call.arguments
    args = short(args) if isinstance(args, str) else preview(args)
    return ToolOutcome(call.id, "", short(str(call.name), 100), "", args, "refused",
                       error=f"unknown tool '{short(str(call.name), 100)}' (this agent has no tools)",
                       bounded=True)


class _Chars:
    """The characters of every text a request carries (for a tool result's
    share of its tokens), counted as the conversation grows: each message
    once, not the whole conversation again every turn."""

    __slots__ = ("total", "seen")

    def __init__(self, instructions: str) -> None:
        self.total = len(instructions)
        self.seen = 0

    def count(self, conversation: list[dict[str, Any]]) -> None:
        total = self.total
        for i in range(self.seen, len(conversation)):
            m = conversation[i]
            text = m.get("content")
            if text:
                total += len(text) if type(text) is str else len(str(text))
            for c in m.get("tool_calls") or ():
                args = c.get("arguments")
                if args:
                    total += len(args) if type(args) is str else len(str(args))
        self.total = total
        self.seen = len(conversation)

    def counter(self, conversation: list[dict[str, Any]]) -> Callable[[], int]:
        """What gives the total so far when called (for AgentMeter.after_reply)."""
        def total() -> int:
            self.count(conversation)
            return self.total
        return total


class _Sent:
    """What a job's ``llm.request`` events carried so far, so that each
    carries only what is new since the one before (``since``) and masks each
    message once: a run with a subscriber costs what its messages do, not
    its turns times its conversation.

    The loop changes the conversation only by appending. Anything that
    would change it otherwise (trim it, replace a message: a provider is
    handed the live list) is seen by the next request, which then carries
    it all again (``since`` 0): the conversation is shorter than it was, or
    its message at the old end is no longer the same object. A change that
    keeps both (a message's text edited in place) is not seen: whoever
    makes one calls ``reset()``. A secret that became known since (a node
    resolved it) sends it all again too, masked anew, as every request did
    before events carried only what is new: what the events show of the
    earlier messages hides it from then on."""

    __slots__ = ("job", "offset", "instructions", "count", "last", "masker")

    def __init__(self, job: int, instructions: str) -> None:
        self.job, self.instructions = job, instructions
        self.offset = 1 if instructions else 0  # the system message the events put first
        self.count = 0  # messages of the conversation the events carried
        self.last: Any = None  # the last of them
        self.masker: Any = None  # the secrets redact() knew then

    def reset(self) -> None:
        self.count, self.last = 0, None

    def news(self, conversation: list[dict[str, Any]],
             masked: Callable[..., Any]) -> tuple[int, list[dict[str, Any]]]:
        """(since, messages) for the next request's event."""
        seen, n = self.count, len(conversation)
        masker = _secrets._masker
        if seen and (n < seen or conversation[seen - 1] is not self.last
                     or masker is not self.masker):
            seen = 0  # changed other than by growing: all of it again
        self.count, self.last, self.masker = n, conversation[-1] if n else None, masker
        if not seen:
            return 0, masked(_as_seen(self.instructions, conversation), EVENT_TEXT_LIMIT)
        return seen + self.offset, masked(conversation[seen:], EVENT_TEXT_LIMIT)


def _as_seen(instructions: str, conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the model sees it: providers pass the instructions
    apart from the messages, but a person reading the run wants them first."""
    if not instructions:
        return conversation
    return [{"role": "system", "content": instructions}, *conversation]


def _deltas(bus: EventBus, agent_id: str, parent: str, turn: int) -> DeltaCoalescer:
    """The turn's text as it streams in, as ``llm.delta`` events: coalesced
    to at most ~20 a second (a fast model cannot flood the bus). A delta
    with ``restart`` says the stream is played again from its start (a
    retry)."""
    return _TurnDeltas(bus, agent_id, parent, turn)


class _TurnDeltas(DeltaCoalescer):
    """One turn's deltas, redacted as a whole text, with its last characters
    held back while they are the start of a secret (redact_hold): a
    secret split across two pieces must not show half in one of them. The
    end of the turn (flush) shows the rest, redacted whole."""

    def __init__(self, bus: EventBus, agent_id: str, parent: str, turn: int) -> None:
        super().__init__(self._show)
        self.bus, self.agent_id, self.parent, self.turn = bus, agent_id, parent, turn
        self.raw: list[str] = []
        self.sent = 0

    def _show(self, text: str, final: bool = False) -> None:
        if not self.bus.active:
            return
        if not text and not final:  # played again from its start
            self.raw.clear()
            self.sent = 0
            self._publish("", restart=True)
            return
        self.raw.append(text)
        shown = redact("".join(self.raw))
        safe = len(shown) - (0 if final else redact_hold(shown))
        if safe > self.sent:
            self._publish(shown[self.sent:safe])
            self.sent = safe

    def _publish(self, text: str, restart: bool = False) -> None:
        self.bus.publish(LlmDelta(agent=self.agent_id, parent=self.parent, turn=self.turn,
                                  text=text, restart=restart))

    def flush(self) -> None:
        super().flush()
        self._show("", final=True)

"""An agent's lifecycle hooks: ``on_start`` (before its first LLM request),
``on_turn`` (after each LLM message), ``on_tool`` (each tool call) and
``on_end`` (its answer). A hook is an output port of the agent node, and
what is wired there (or named by the flow's ``settings.hooks``) is an
ordinary flow that gets one message per firing.

A hook does not block the agent: its message is sent and the agent goes on
(the hook flow's async nodes run as tasks of the run). A *blocking* hook
(the agent's ``block_on_<port>`` param, or a flow hook's ``blocking``) makes
the agent wait, at most ``hook_timeout_seconds``, for the flow's AI Hook
Result node, which answers through the hook id the message carries (as a
tool's answer finds its call by caller id) and may replace the text, veto
tool calls or stop the agent. A blocking ``on_tool`` fires *before* the call
(it can still be vetoed); a non-blocking one fires after it, with its result.

With nothing wired to a hook, the agent builds no message and publishes no
event for it: an agent without hooks is as fast as before hooks existed."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import HookFired
from ..flow import HOOK_RESULT
from ..message import CONVERSATION_ID, HOOK_ID, Message, deep_copy, new_msgid
from ..node import NodeConfigError, redact

if TYPE_CHECKING:
    from ..tools import ToolOutcome

log = logging.getLogger(__name__)

#: The hook ports, in the order they fire (runtime.flow.HOOK_PORTS).
HOOK_PORTS = ("on_start", "on_turn", "on_tool", "on_end")
#: The run resource that maps a waiting hook's id to its waiter.
WAITERS = "agent-hook-waiters"
#: Conversations an agent keeps for messages sent back into it (oldest dropped).
MAX_CONVERSATIONS = 100
#: User turns that hook flows may add to one conversation; past it, refused.
MAX_HOOK_TURNS = 20
#: Characters of a replacement text or a reason that a hook may give.
MAX_HOOK_TEXT = 100_000
MAX_REASON = 2000
DEFAULT_HOOK_TIMEOUT = 30.0
ACTIONS = ("continue", "replace", "veto", "stop")

_ids = itertools.count(1)
_prefix = os.urandom(3).hex()


def new_hook_id() -> str:
    return f"hook-{_prefix}-{next(_ids):x}"


def new_conversation_id() -> str:
    return f"conv-{_prefix}-{next(_ids):x}"


@dataclass(slots=True)
class HookDecision:
    """What an AI Hook Result said: ``continue``; ``replace`` the text the
    hook was given (the prompt, the LLM's message, the answer); ``veto`` the
    tool call(s) with a reason the LLM reads; ``stop`` the agent."""

    action: str = "continue"
    text: str | None = None
    reason: str = ""
    node: str = ""


class HookStopped(NodeConfigError):
    """A blocking hook stopped the agent; the text says which and why."""


class _Waiter:
    __slots__ = ("expected", "decisions", "future")

    def __init__(self, expected: int, future: asyncio.Future) -> None:
        self.expected, self.future = expected, future
        self.decisions: list[HookDecision] = []

    def add(self, decision: HookDecision) -> None:
        self.decisions.append(decision)
        if len(self.decisions) >= self.expected and not self.future.done():
            self.future.set_result(None)


def answer_hook(engine: Any, msg: dict, decision: HookDecision) -> bool:
    """Hand an AI Hook Result's decision to the agent waiting for it. False
    when none waits: the hook was not blocking, or the agent stopped
    waiting (timeout) or has ended."""
    hook_id = msg.get(HOOK_ID)
    if engine is None or not isinstance(hook_id, str):
        return False
    waiter = engine.resource(WAITERS, dict).get(hook_id)
    if waiter is None:
        return False
    waiter.add(decision)
    return True


# -- conversations ------------------------------------------------------------

@dataclass
class Conversation:
    """One agent's conversation, kept while its agent has hooks so that a
    hook flow can send a new user turn into it (trigger_agent): into the
    work still going (``inbox``), or, once answered, as a new piece of work
    on the same history."""

    id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False
    inbox: list[str] = field(default_factory=list)
    #: LLM requests made in this conversation so far (the scripted provider
    #: plays the turn that follows them).
    requests: int = 0
    #: User turns hook flows added (bounded by MAX_HOOK_TURNS).
    hook_turns: int = 0

    def take_inbox(self) -> list[str]:
        out, self.inbox = self.inbox, []
        return out


class Conversations:
    """An agent node's conversations by id, the newest MAX_CONVERSATIONS."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Conversation] = OrderedDict()

    def new(self) -> Conversation:
        conv = Conversation(new_conversation_id())
        self._by_id[conv.id] = conv
        over = len(self._by_id) - MAX_CONVERSATIONS
        if over > 0:  # the oldest go, but never one whose work is going on
            for old in [c for c, v in self._by_id.items() if not v.running][:over]:
                del self._by_id[old]
        return conv

    def get(self, conv_id: Any) -> Conversation | None:
        return self._by_id.get(conv_id) if isinstance(conv_id, str) else None

    def add_turn(self, conv: Conversation, text: str) -> None:
        """A user turn from a hook flow: counted against MAX_HOOK_TURNS."""
        if conv.hook_turns >= MAX_HOOK_TURNS:
            raise NodeConfigError(
                f"conversation {conv.id} already got {MAX_HOOK_TURNS} messages from hook flows, "
                "the limit; a hook flow that answers every answer would never end")
        conv.hook_turns += 1
        self._by_id.move_to_end(conv.id)


# -- the hooks of one agent ---------------------------------------------------

class _Port:
    """Where one hook's messages go: the port's wires (blocking or not, as
    the agent says) and the flow hooks that apply to this agent. ``answers``:
    how many of the blocking targets can reach an AI Hook Result (a debug
    node tapped on a blocking port answers nothing and is not waited for)."""

    __slots__ = ("name", "wires", "port_blocking", "flow", "answers")

    def __init__(self, name: str, wires: int, port_blocking: bool,
                 flow: list[tuple[str, bool]], answers: int) -> None:
        self.name, self.wires, self.port_blocking, self.flow = name, wires, port_blocking, flow
        self.answers = answers

    def count(self, blocking: bool) -> int:
        n = self.wires if self.port_blocking == blocking else 0
        return n + sum(1 for _, b in self.flow if b == blocking)


def _answers(start: Any, memo: dict[str, bool]) -> bool:
    """Whether a message delivered to node runtime ``start`` can reach an AI
    Hook Result along the run's wires. An agent on the way is an end: what
    it sends on is its own message, not the hook's."""
    if start.id in memo:
        return memo[start.id]
    seen, todo, found = {start.id}, [start], False
    while todo and not found:
        rt = todo.pop()
        if rt.spec.type == HOOK_RESULT and not rt.disabled:
            found = True
        elif rt is start or not rt.spec.has_tools_port:
            for wires in rt.routes.values():
                for w in wires:
                    if w.target.id not in seen:
                        seen.add(w.target.id)
                        todo.append(w.target)
    memo[start.id] = found
    return found


class AgentHooks:
    """The hooks of one agent node in one run, worked out once. ``of()``
    gives None when nothing is wired: the loop then never asks."""

    def __init__(self, engine: Any, agent_id: str, ports: dict[str, _Port],
                 timeout: float) -> None:
        self.engine, self.agent_id, self.timeout = engine, agent_id, timeout
        self.ports = ports
        self.rt = engine.nodes[agent_id]
        # Which (port, blocking) have somewhere to go: tested before any
        # message is built.
        self.blocking = {p: ports[p].count(True) for p in ports}
        self.answers = {p: ports[p].answers for p in ports}
        self.after = {p: ports[p].count(False) for p in ports}

    @classmethod
    def of(cls, engine: Any, agent_id: str, blocking_ports: set[str],
           timeout: float) -> AgentHooks | None:
        rt = getattr(engine, "nodes", {}).get(agent_id)
        if rt is None:
            return None
        flow_hooks = engine.flow.settings.hooks
        ports: dict[str, _Port] = {}
        memo: dict[str, bool] = {}
        for name in HOOK_PORTS:
            targets = [w.target for w in rt.routes.get(name, ()) if not w.target.disabled]
            flow = [(h.node, h.blocking) for h in flow_hooks
                    if h.port == name and h.applies_to(agent_id) and h.node in engine.nodes
                    and not engine.nodes[h.node].disabled]
            if not targets and not flow:
                continue
            block = name in blocking_ports
            answers = sum(1 for t in targets if block and _answers(t, memo))
            answers += sum(1 for n, b in flow if b and _answers(engine.nodes[n], memo))
            ports[name] = _Port(name, len(targets), block, flow, answers)
        if not ports:
            return None
        return cls(engine, agent_id, ports, timeout or DEFAULT_HOOK_TIMEOUT)

    def wired(self, port: str) -> bool:
        return port in self.ports

    # -- sending -------------------------------------------------------------
    def _message(self, conv: Conversation, port: str, phase: str, blocking: bool,
                 payload: Any, data: dict[str, Any]) -> Message:
        hook = {"port": port, "agent": self.agent_id, "agent_name": self.rt.node.name,
                "conversation": conv.id, "phase": phase, "blocking": blocking}
        # Copies: a hook flow may change its message, and the same data may go
        # to a blocking and a non-blocking flow.
        hook.update(deep_copy(data))
        msg = Message(_msgid=new_msgid(), payload=deep_copy(payload), hook=hook)
        msg[CONVERSATION_ID] = conv.id
        return msg

    def _send(self, port: str, msg: Message, blocking: bool) -> int:
        """Deliver ``msg`` to every target of (port, blocking), each its own
        copy; returns how many got it."""
        p = self.ports[port]
        targets: list[str | None] = []
        if p.wires and p.port_blocking == blocking:
            targets.append(None)  # the port's wires (the engine clones per wire)
        targets += [n for n, b in p.flow if b == blocking]
        for i, target in enumerate(targets):
            m = msg if i == len(targets) - 1 else deep_copy(msg)
            if target is None:
                self.rt.send(m, port)
            else:
                self.engine.inject(target, m)
        return p.count(blocking)

    def post(self, run: HookRun, port: str, payload: Any, data: dict[str, Any],
             phase: str = "") -> None:
        """A non-blocking hook: its message goes out and the agent goes on."""
        if not self.after.get(port):
            return
        msg = self._message(run.conv, port, phase, False, payload, data)
        n = self._send(port, msg, False)
        bus = self.engine.bus
        if bus.active:
            bus.publish(HookFired(agent=self.agent_id, parent=run.parent, hook=port,
                                  phase=phase, targets=n, turn=data.get("turn", 0),
                                  tool=data.get("tool", "") or ""))

    async def ask(self, run: HookRun, port: str, payload: Any, data: dict[str, Any],
                  phase: str = "") -> HookDecision:
        """A blocking hook: its message goes out and the agent waits for the
        AI Hook Results of its flows (each flow's first answer counts), at
        most ``timeout`` seconds; then goes on with what they decided."""
        if not self.blocking.get(port):
            return HookDecision()
        expected = self.answers[port]
        if not expected:
            # No AI Hook Result to wait for (validation warned): its flows
            # get the message, the agent goes on.
            msg = self._message(run.conv, port, phase, True, payload, data)
            self._send(port, msg, True)
            return HookDecision()
        hook_id = new_hook_id()
        waiter = _Waiter(expected, asyncio.get_running_loop().create_future())
        waiters = self.engine.resource(WAITERS, dict)
        waiters[hook_id] = waiter
        msg = self._message(run.conv, port, phase, True, payload, data)
        msg[HOOK_ID] = hook_id
        t0 = time.perf_counter()
        timed_out = False
        try:
            self._send(port, msg, True)
            if not waiter.future.done():
                try:
                    await asyncio.wait_for(waiter.future, self.timeout)
                except TimeoutError:
                    timed_out = True
        finally:
            waiters.pop(hook_id, None)
        decision = _combine(waiter.decisions)
        ms = (time.perf_counter() - t0) * 1000
        if timed_out:
            text = (f"{port} hook: {len(waiter.decisions)} of {expected} AI Hook Result"
                    f"{'s' if expected != 1 else ''} within {self.timeout:g} s "
                    "(hook_timeout_seconds); the agent goes on")
            log.warning("agent %s: %s", self.agent_id, text)
            self.rt.log(text, "warning")
        outcome = "timeout" if timed_out and decision.action == "continue" else \
            _OUTCOMES[decision.action]
        bus = self.engine.bus
        if bus.active:
            bus.publish(HookFired(agent=self.agent_id, parent=run.parent, hook=port, phase=phase,
                                  blocking=True, targets=expected, turn=data.get("turn", 0),
                                  tool=data.get("tool", "") or "", outcome=outcome,  # type: ignore[arg-type]
                                  reason=redact(decision.reason), ms=ms))
        if decision.action == "stop":
            by = f" (node '{decision.node}')" if decision.node else ""
            raise HookStopped(f"stopped by the {port} hook{by}: "
                              f"{decision.reason or 'no reason given'}")
        return decision


_OUTCOMES = {"continue": "continue", "replace": "replaced", "veto": "vetoed", "stop": "stopped"}


def _combine(decisions: list[HookDecision]) -> HookDecision:
    """Several blocking flows on one hook: a stop wins, then a veto, then the
    first replacement; none (a timeout) is continue."""
    for action in ("stop", "veto", "replace"):
        for d in decisions:
            if d.action == action:
                return d
    return HookDecision()


class HookRun:
    """The hooks as one agent message's work sees them: what the loop calls
    at each point. Each method is a no-op (and builds nothing) when nothing
    is wired to its hook."""

    __slots__ = ("hooks", "conv", "parent")

    def __init__(self, hooks: AgentHooks, conv: Conversation, parent: str) -> None:
        self.hooks, self.conv, self.parent = hooks, conv, parent

    async def start(self, prompt: str, model: str, continued: bool) -> str:
        """on_start: the prompt, perhaps replaced by a blocking hook."""
        h = self.hooks
        if not h.wired("on_start"):
            return prompt
        data = {"prompt": prompt, "model": model, "continued": continued}
        h.post(self, "on_start", prompt, data)
        d = await h.ask(self, "on_start", prompt, data)
        return _text(d, prompt)

    async def turn(self, turn: int, text: str, calls: list[Any], usage: dict[str, int],
                   cost_usd: float | None) -> tuple[str, str | None]:
        """on_turn: the message's text (perhaps replaced) and, if a blocking
        hook vetoed its tool calls, why."""
        h = self.hooks
        if not h.wired("on_turn"):
            return text, None
        from ..arguments import event_args

        data = {"turn": turn, "text": text,
                "tool_calls": [{"id": c.id, "name": str(c.name)[:100],
                                "arguments": event_args(c.arguments)} for c in calls],
                "usage": dict(usage), "cost_usd": cost_usd}
        h.post(self, "on_turn", text, data)
        d = await h.ask(self, "on_turn", text, data)
        veto = _reason(d) if d.action == "veto" and calls else None
        return _text(d, text), veto

    async def before_tools(self, turn: int, calls: list[Any]) -> dict[int, str]:
        """A blocking on_tool, before the calls run (all at once, each its
        own message): the vetoed ones by index, with the reason."""
        h = self.hooks
        if not h.blocking.get("on_tool"):
            return {}
        from ..arguments import masked, parse_arguments, preview

        asks = []
        for c in calls:
            args, why = parse_arguments(c.arguments)
            args = masked(args, 4000) if why is None else preview(args)
            name = str(c.name)[:100]
            data = {"turn": turn, "tool": name, "call_id": c.id, "args": args}
            asks.append(h.ask(self, "on_tool", {"tool": name, "args": args}, data,
                              phase="before"))
        # Every call's flow gets its answer or its timeout, even when one
        # of them stops the agent: no wait is left behind.
        decisions = await asyncio.gather(*asks, return_exceptions=True)
        for d in decisions:
            if isinstance(d, BaseException):
                raise d
        return {i: _reason(d) for i, d in enumerate(decisions) if d.action == "veto"}

    def after_tools(self, turn: int, outcomes: list[ToolOutcome]) -> None:
        """A non-blocking on_tool, after the calls: each with its result."""
        h = self.hooks
        if not h.after.get("on_tool"):
            return
        for o in outcomes:
            row = o.summary()
            # data and error both there, one empty: a template or a CSV
            # column may name either.
            data = {"turn": turn, "tool": o.tool, "call_id": o.call_id, "node": o.node,
                    "data": None, "error": "", **row}
            if o.tracking_id:
                data["tracking_id"] = o.tracking_id
            h.post(self, "on_tool", row, data, phase="after")

    def failed(self, error: str) -> None:
        """on_end of work that failed: not blocking (nothing is left to
        change), with the error instead of an answer."""
        h = self.hooks
        if h.wired("on_end"):
            h.post(self, "on_end", "", {"answer": "", "error": redact(error)})

    async def end(self, text: str, info: dict[str, Any]) -> str:
        """on_end: the answer, perhaps replaced by a blocking hook."""
        h = self.hooks
        if not h.wired("on_end"):
            return text
        data = {"answer": text, **info}
        h.post(self, "on_end", text, data)
        d = await h.ask(self, "on_end", text, data)
        return _text(d, text)


def _text(d: HookDecision, text: str) -> str:
    if d.action == "replace" and d.text is not None:
        return redact(str(d.text)[:MAX_HOOK_TEXT])
    return text


def _reason(d: HookDecision) -> str:
    by = f" (node '{d.node}')" if d.node else ""
    why = redact(str(d.reason or "no reason given")[:MAX_REASON])
    return f"vetoed by a hook{by}: {why}"

"""The bridge that turns an LLM's tool calls into ``tool_request``
messages: every call is checked against its tool's schema
(``runtime.tools.schema``) before the node runs, and a call that does not
fit is *refused* with a text the LLM can read.

Arguments are parsed and bounded first (``runtime.arguments``: depth, size,
quoting); one LLM turn runs at most ``max_tool_calls_per_turn`` calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..approval import ApprovalRequest, people_of
from ..arguments import _parse, argument_problem, event_args, masked, preview, short
from ..cost import tool_cost
from ..events import NodeStatus, ToolApproval, ToolCall, ToolDecision, ToolResult
from ..message import (
    AGENT_NODE_ID,
    MESSAGE_TYPE,
    PARAMETERS,
    RESERVED_KEYS,
    SUBFLOW_CALLS,
    TOOL_CALLER_ID,
    TOOL_DATA,
    TOOL_ERROR,
    TOOL_NAME,
    TOOL_REQUEST,
    TOOL_STATUS,
    Message,
    deep_copy,
)
from ..node import TOOL_CALL, redact
from .background import MAX_BACKGROUND_TASKS, TASK_CANCEL, TASK_STATUS, BackgroundTasks, _Job
from .calls import (
    AgentCalls,
    CallStatus,
    ToolOutcome,
    _Deadlines,
    _final_phase,
    _Paused,
    _resume,
    _Running,
    _Waiting,
    new_caller_id,
)
from .schema import HANDOFF_SCHEMA, TRACKING_SCHEMA, ToolDef, agent_tools, function_spec

if TYPE_CHECKING:
    from ..engine import Engine

DEFAULT_TOOL_TIMEOUT = 60.0
#: Most tool calls one LLM turn may make (the agent's max_tool_calls_per_turn).
MAX_TOOL_CALLS_PER_TURN = 16
#: The tool a child agent (an agent used as another's tool) ends its task with.
HANDOFF = "handoff"
MAX_HANDOFF_DOCUMENTS = 50


#: Values a tool request shares with the agent's message (immutable).
_LEAVES = frozenset((str, int, float, bool, type(None)))
_UNKNOWN: Any = object()


def _setting(node: Any, name: str) -> Any:
    """The value of a node's (designer-set) param ``name``, or None."""
    bound = getattr(node, "__dict__", {}).get(name)
    if bound is None or not hasattr(bound, "get"):
        return None
    try:
        return bound.get()
    except Exception:  # a param that needs a message: not a setting
        return None


def _run_counts(engine: Any) -> dict[str, int]:
    """Calls per tool node in this run (max_calls_per_run counts all agents)."""
    return engine.resource("tool-call-counts", dict)


class ToolBridge(BackgroundTasks):
    """An agent's side of its tools: the schemas its LLM sees, and calls
    routed to the tool nodes as ``tool_request`` messages.

    Every call runs on its own clone of the agent's message, under its own
    timeout, and is cancelled with the task that awaits it (the agent's, which
    the engine cancels when the run stops). Background calls, and the
    task_status and task_cancel tools, are BackgroundTasks' methods
    (``runtime.tools.background``)."""

    def __init__(self, engine: Engine, agent_id: str) -> None:
        self.engine = engine
        self.agent_id = agent_id
        self.tools: dict[str, ToolDef] = {}
        for t in agent_tools(engine.flow, agent_id, engine.registry):
            fnode = engine.flow.node(t.node_id)
            override = fnode.tool.background if fnode is not None and fnode.tool else None
            rt = engine.nodes.get(t.node_id) if hasattr(engine, "nodes") else None
            t.background = bool(override if override is not None
                                else getattr(getattr(rt, "node", None), "background", False))
            self.tools[t.name] = t
        self.functions = [t.function for t in self.tools.values()]
        self.names = list(self.tools)
        #: Background calls of this agent in this run, by tracking id.
        self.jobs: dict[str, _Job] = {}
        #: Most background tasks going at once; past it a call is refused.
        self.max_background = MAX_BACKGROUND_TASKS
        #: Wake the agent with a new turn when a background task ends
        #: (else it learns of it on its next turn).
        self.wake_on_background = False
        #: Sends an answer given while background tasks go on (the agent
        #: node sets it): (the message, the text).
        self.answer_early: Callable[[dict, str], None] | None = None
        # The agent node's settings, when it has them (params of these names).
        agent = getattr(engine.nodes.get(agent_id), "node", None) if hasattr(engine, "nodes") \
            else None
        wake = _setting(agent, "wake_on_background")
        if wake is not None:
            self.wake_on_background = bool(wake)
        cap = _setting(agent, "max_background_tasks")
        if cap is not None:
            self.max_background = max(1, int(cap))
        self._ended = asyncio.Event()
        self._live: dict[str, CallStatus] = {}  # caller id -> its status, until it ends
        #: The timeouts of its calls that went on past their first step.
        self._deadlines: _Deadlines | None = None
        #: Tool name -> (its ToolDef, runs at once) if it never asks, else None (_quick_tool).
        self._quick: dict[str, tuple[ToolDef, bool] | None] = {}

    def functions_for(self, state: AgentCalls | None) -> list[dict]:
        """The functions the LLM is offered: a child agent also gets handoff;
        an agent with background tasks gets task_status and task_cancel."""
        out = self.functions
        if self._child(state) and HANDOFF not in self.tools:
            out = [*out, function_spec(
                HANDOFF, "End your task and hand your result (and any workspace documents) to "
                "the agent that gave it to you", HANDOFF_SCHEMA)]
        if self.jobs:
            out = [*out, *(function_spec(n, d, TRACKING_SCHEMA) for n, d in (
                (TASK_STATUS, "The status, progress or result of a background task"),
                (TASK_CANCEL, "Cancel a background task that is still going"))
                if n not in self.tools)]
        return out

    def _child(self, state: AgentCalls | None) -> bool:
        """Whether the agent works on a task another agent gave it (it may
        hand off), not on a message inside a subflow tool call (whose
        caller id its events carry as parent, too)."""
        if state is None or not state.parent:
            return False
        resource = getattr(self.engine, "resource", None)
        return resource is None or state.parent not in resource(SUBFLOW_CALLS, dict)

    async def call_many(self, base: dict, calls: list[Any], timeout: float | None,
                        max_calls: int | None = MAX_TOOL_CALLS_PER_TURN,
                        state: AgentCalls | None = None) -> list[ToolOutcome]:
        """Run the calls of one LLM turn concurrently; results in call order.
        Each call is ``(call_id, name, raw_arguments)``. Past ``max_calls``
        the calls are refused and their nodes never run; so are calls past a
        tool's own limits, or past the agent's calls per message (``state``).
        A child agent's ``handoff`` is taken here and ends its task."""
        refused: dict[int, ToolOutcome] = {}
        parent = state.parent if state is not None else ""
        # A tool's own limits are counted only for a tool that has them
        # (every definition of a tool node shares its settings).
        per_turn: dict[str, int] | None = None
        counts: dict[str, int] | None = None
        tools = self.tools
        for i, (call_id, name, raw) in enumerate(calls):
            tool = tools.get(name)
            why = None
            if tool is None:
                if name == HANDOFF and self._child(state):
                    refused[i] = self._handoff(state, call_id, raw)
                    continue
                if name in (TASK_STATUS, TASK_CANCEL) and self.jobs:
                    refused[i] = await self._task_tool(call_id, name, raw, parent)
                    continue
            else:
                if tool.max_per_turn:
                    if per_turn is None:
                        per_turn = {}
                    n = per_turn[name] = per_turn.get(name, 0) + 1
                    if n > tool.max_per_turn:
                        why = (f"tool '{name}' may be called at most {tool.max_per_turn} times "
                               "in one answer (max_calls_per_turn); make this call in a later "
                               "turn")
                if why is None and tool.max_per_run:
                    if counts is None:
                        counts = _run_counts(self.engine)
                    if counts.get(tool.count_key or tool.node_id, 0) >= tool.max_per_run:
                        why = (f"tool '{name}' was called {tool.max_per_run} times in this run, "
                               "its limit (max_calls_per_run); it cannot be called again")
            if why is None and state is not None and state.limit is not None:
                if state.count >= state.limit:
                    why = (f"this agent made {state.limit} tool calls for this message, its "
                           "limit (max_tool_calls_per_run); answer with what you have")
            if why is not None:
                refused[i] = self.refuse(call_id, name, raw, why, parent)
                continue
            if tool is not None and tool.max_per_run:
                assert counts is not None
                key = tool.count_key or tool.node_id
                counts[key] = counts.get(key, 0) + 1
            if state is not None:
                state.count += 1
            if tool is not None and tool.background:
                refused[i] = self._start_background(base, call_id, name, raw, parent)
        asked = len(calls)
        if refused:
            calls = [c for i, c in enumerate(calls) if i not in refused]
        over: list[Any] = []
        if max_calls and len(calls) > max_calls:
            calls, over = calls[:max_calls], calls[max_calls:]
        # A call runs start to end in one task: node code may enter a scope
        # bound to its task in its first step (asyncio.timeout, an httpx
        # request's cancel scope) and must leave it in the same one. So a
        # call only runs in the agent's own task when no other call of the
        # turn could overlap it: one call, or nodes that never wait (plain
        # functions that do not block). Otherwise each call gets a task.
        if len(calls) == 1:  # most turns
            c = calls[0]
            out: list[Any] = [await self.call(base, c[0], c[1], c[2], timeout, parent)]
        elif len(calls) <= 1 or all(self._never_waits(c[1], c[2]) for c in calls):
            out = [await self.call(base, c[0], c[1], c[2], timeout, parent) for c in calls]
        else:
            loop = asyncio.get_running_loop()
            tasks = [loop.create_task(self.call(base, c[0], c[1], c[2], timeout, parent))
                     for c in calls]
            try:
                out = list(await asyncio.gather(*tasks))
            except BaseException:
                for t in tasks:
                    t.cancel()
                raise
        if over:
            total = len(calls) + len(over)
            why = (f"too many tool calls in one turn: {total} asked, and "
                   f"max_tool_calls_per_turn={max_calls} runs only the first {max_calls}; "
                   "this call did not run, make it again in the next turn")
            out += [self.refuse(c[0], c[1], c[2], why, parent) for c in over]
        if refused:
            # Back into call order, the refused and handed-off ones in their places.
            ran = iter(out)
            out = [refused[i] if i in refused else next(ran) for i in range(asked)]
        return out

    def _handoff(self, state: AgentCalls, call_id: str, raw: Any) -> ToolOutcome:
        """A child agent's handoff: checked, kept on ``state`` (the loop ends
        the agent's task with it), answered at once."""
        caller_id = new_caller_id()
        args, why, bounded = _parse(raw)
        if why is None:
            if not isinstance(args, dict) or not isinstance(args.get("result"), str):
                why = "handoff needs a 'result' text"
            else:
                docs = args.get("documents") or []
                if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
                    why = "documents must be a list of workspace paths"
                elif len(docs) > MAX_HANDOFF_DOCUMENTS:
                    why = f"at most {MAX_HANDOFF_DOCUMENTS} documents"
                else:
                    from ..workspace import workspace_of

                    why = workspace_of(state.engine).missing(docs)
        if self.engine.bus.active:
            self.engine.bus.publish(ToolCall(agent=self.agent_id, tool=HANDOFF,
                                             caller_id=caller_id, parent=state.parent,
                                             args=event_args(args, checked=True)))
        if why is not None:
            out = ToolOutcome(call_id, caller_id, HANDOFF, "", args, "refused", error=why,
                              bounded=bounded)
        else:
            state.handoff = args
            out = ToolOutcome(call_id, caller_id, HANDOFF, "", args, "success",
                              data={"status": "handed off"})
        self._published(out, state.parent)
        return out

    def _never_waits(self, name: str, raw_args: Any = None) -> bool:
        if name not in self.tools:
            return True  # refused at once
        quick = self._quick.get(name, _UNKNOWN)
        if quick is _UNKNOWN:
            quick = self._quick_tool(name)
        return quick is not None and quick[1]

    def _quick_tool(self, name: str) -> tuple[ToolDef, bool] | None:
        """For a tool whose calls never ask a person (nor run in the
        background): its ToolDef, and whether its node is a plain function
        that does not block (a call of it runs start to end at once). None
        for any other name. Found once per tool: none of this changes in a
        run."""
        tool = self.tools.get(name)
        quick = None
        if tool is not None and tool.policy.mode == "never" and not tool.policy.confirm \
                and not tool.background:
            rt = self.engine.nodes.get(tool.node_id) if hasattr(self.engine, "nodes") else None
            if rt is not None:
                quick = (tool, not rt.is_async and not rt.node.blocking)
        if len(self._quick) < 4096:  # names come from the LLM: bounded
            self._quick[name] = quick
        return quick

    def refuse(self, call_id: str, name: Any, raw_args: Any, why: str,
               parent: str = "") -> ToolOutcome:
        """A call that never reaches its node (past max_tool_calls_per_turn):
        its events and outcome, with a bounded preview of the arguments."""
        caller_id = new_caller_id()
        name = short(str(name), 100)
        tool = self.tools.get(name)
        node_id = tool.node_id if tool else ""
        parsed, problem, _ = _parse(raw_args)
        if problem is None and isinstance(parsed, dict):
            # Sound arguments stay an object, as any call's do (masked and
            # bounded), not their JSON text.
            args: Any = event_args(parsed, checked=True)
        else:
            args = short(raw_args) if isinstance(raw_args, str) else preview(raw_args)
        if self.engine.bus.active:
            self.engine.bus.publish(ToolCall(agent=self.agent_id, node=node_id, tool=name,
                                             caller_id=caller_id, parent=parent,
                                             args=redact(args) if isinstance(args, str) else args))
        out = ToolOutcome(call_id, caller_id, name, node_id, args, "refused", error=why,
                          bounded=True)
        self._published(out, parent)
        return out

    async def call(self, base: dict, call_id: str, name: str, raw_args: Any,
                   timeout: float | None = DEFAULT_TOOL_TIMEOUT,
                   parent: str = "") -> ToolOutcome:
        quick = self._quick.get(name, _UNKNOWN)
        if quick is _UNKNOWN:
            quick = self._quick_tool(name)
        if quick is not None and self.engine.debugger is None:
            # The common call, of a tool that asks no one: the same checks,
            # events and request as _begin's and _start's, in one frame.
            # Anything unusual (arguments past a bound or not fitting the
            # schema) goes the general way, which says why.
            tool, inline = quick
            t0 = time.perf_counter()
            if type(raw_args) is dict:
                args: Any = raw_args
                fits = argument_problem(args) is None and tool.check(args)
            else:
                args, why, _ = _parse(raw_args)
                fits = why is None and tool.check(args)
            if fits:
                caller_id = new_caller_id()
                bus = self.engine.bus
                if bus.active:
                    # Checked arguments: masked() is event_args()'s work for them.
                    bus.publish(ToolCall(agent=self.agent_id, node=tool.node_id, tool=name,
                                         caller_id=caller_id, parent=parent,
                                         args=masked(args, 4000) if type(args) is not str
                                         else event_args(args, checked=True)))
                running = _Running(call_id, caller_id, name, tool.node_id, args, t0, None, self,
                                   parent)
                if not inline:
                    started = self._start(base, running, tool, parent)
                    if isinstance(started, ToolOutcome):
                        return started
                    return await self._wait(started, timeout, parent)
                # A plain function that never waits: it cannot suspend, so it
                # needs no timer, and awaiting it costs no StopIteration as
                # stepping it by hand (_start) does.
                running.step = step = self.engine.run_as_tool(
                    tool.node_id, self.request(base, caller_id, tool, args))
                token = TOOL_CALL.set(running)
                try:
                    resp = await step
                finally:
                    TOOL_CALL.reset(token)
                return self._settled(running, resp, parent)
        started = self._begin(base, call_id, name, raw_args, parent)
        if isinstance(started, _Waiting):
            started = await self._approve(base, started)
        if isinstance(started, _Running):
            return await self._wait(started, timeout, parent)
        return started

    async def _approve(self, base: dict, w: _Waiting) -> ToolOutcome | _Running:
        """Wait for a person's decision on a call (or the policy's timeout):
        then run it, with the edited arguments if they were edited (checked
        against the same schema), or answer the LLM with the rejection."""
        if isinstance(w, _Paused):
            started = await self._paused(base, w)
            if not isinstance(started, _Waiting):
                return started
            w = started
        tool, bus, t0 = w.tool, self.engine.bus, time.perf_counter()
        w.status.publish("waiting_approval")
        confirm = [a for a in tool.policy.confirm if a in tool.schema.get("properties", {})]
        request = ApprovalRequest(caller_id=w.caller_id, agent=self.agent_id, node=tool.node_id,
                                  tool=tool.name, args=w.args, reason=w.reason, confirm=confirm,
                                  schema=tool.schema, timeout=tool.policy.timeout_seconds)
        if bus.active:
            bus.publish(ToolApproval(agent=self.agent_id, node=tool.node_id, tool=tool.name,
                                     caller_id=w.caller_id, args=event_args(w.args, checked=True),
                                     reason=w.reason, confirm=confirm,
                                     timeout=tool.policy.timeout_seconds, parent=w.parent))
            bus.publish(NodeStatus(node=tool.node_id, text="waiting for approval",
                                   color="yellow", state="waiting"))  # type: ignore[arg-type]
        try:
            decision = await people_of(self.engine).approve(request)
        finally:
            if bus.active:
                bus.publish(NodeStatus(node=tool.node_id, text="", color="",
                                       state="idle"))  # type: ignore[arg-type]
        args = decision.args if decision.approved and decision.args is not None else w.args
        why = None
        if decision.approved and decision.args is not None:
            why = tool.validate(decision.args)
        if bus.active:
            bus.publish(ToolDecision(agent=self.agent_id, node=tool.node_id, tool=tool.name,
                                     caller_id=w.caller_id, decision=decision.kind,  # type: ignore[arg-type]
                                     by=decision.by, reason=redact(decision.reason),
                                     args=event_args(args, checked=True),
                                     waited_ms=(time.perf_counter() - t0) * 1000,
                                     parent=w.parent))
        if not decision.approved or why is not None:
            if why is not None:
                error = f"the edited arguments do not fit the tool: {why}"
            elif decision.by == "timeout":
                error = decision.reason
            else:
                error = f"rejected by {decision.by}" + (f": {decision.reason}"
                                                        if decision.reason else "")
            out = ToolOutcome(w.call_id, w.caller_id, tool.name, tool.node_id, args, "rejected",
                              error=redact(error), ms=(time.perf_counter() - w.t0) * 1000)
            self._published(out, w.parent)
            return out
        running = _Running(w.call_id, w.caller_id, tool.name, tool.node_id, args, w.t0,
                           w.status, self, w.parent)
        return self._start(base, running, tool, w.parent)

    def _begin(self, base: dict, call_id: str, name: str, raw_args: Any,
               parent: str = "", *, defer: bool = False) -> ToolOutcome | _Running | _Waiting:
        """A call's checks, events and request, and the tool's first step,
        run now: a ToolOutcome if that settled it, else the call still going.
        The first step needs no timer: nothing could interrupt it anyway."""
        t0 = time.perf_counter()
        bus = self.engine.bus
        caller_id = new_caller_id()
        tool = self.tools.get(name)
        if tool is None:
            name = short(str(name), 100)  # the LLM's text: quoted, never whole
        node_id = tool.node_id if tool else ""
        args, why, bounded = _parse(raw_args)
        if bus.active:
            bus.publish(ToolCall(agent=self.agent_id, node=node_id, tool=name,
                                 caller_id=caller_id, args=event_args(args, checked=True),
                                 parent=parent))
        if tool is None:
            available = ", ".join(self.names) or "none"
            why = f"unknown tool '{name}' (available tools: {available})"
        elif why is None:
            why = tool.validate(args)
        if why is not None:
            out = ToolOutcome(call_id, caller_id, name, node_id, args, "refused",
                              error=redact(why), ms=(time.perf_counter() - t0) * 1000,
                              bounded=bounded)
            self._published(out, parent)
            return out
        debugger = self.engine.debugger
        if debugger is not None:
            held = debugger.tool_hit(node=node_id, agent=self.agent_id, tool=name,
                                     caller_id=caller_id, args=args, base=base,
                                     validate=tool.validate)  # type: ignore[union-attr]
            if held is not None:
                status = self.status_of(caller_id, node_id, name, parent)
                return _Paused(call_id, caller_id, tool, args, t0, parent, status, held,  # type: ignore[arg-type]
                               debugger)
        # What follows is _proceed's, inline: a method call here would cost a
        # fast tool call 1-2 % (benchmarks/tool_calls.py).
        policy = tool.policy  # type: ignore[union-attr]
        reason = None if policy.mode == "never" and not policy.confirm else policy.reason(args)
        if reason is not None:
            status = self.status_of(caller_id, node_id, name, parent)
            return _Waiting(call_id, caller_id, tool, args, t0, reason, parent, status)  # type: ignore[arg-type]
        running = _Running(call_id, caller_id, name, node_id, args, t0, None, self, parent)
        if defer:  # a background call: its task takes the first step
            return running
        return self._start(base, running, tool, parent)  # type: ignore[arg-type]

    def _proceed(self, base: dict, call_id: str, caller_id: str, tool: ToolDef, args: dict,
                 t0: float, parent: str, *, status: CallStatus | None = None
                 ) -> ToolOutcome | _Running | _Waiting:
        """A valid call that a breakpoint held, on to its approval (a
        _Waiting) or its node: the end of _begin."""
        policy = tool.policy
        reason = None if policy.mode == "never" and not policy.confirm else policy.reason(args)
        if reason is not None:
            status = status or self.status_of(caller_id, tool.node_id, tool.name, parent)
            return _Waiting(call_id, caller_id, tool, args, t0, reason, parent, status)
        running = _Running(call_id, caller_id, tool.name, tool.node_id, args, t0, status, self,
                           parent)
        return self._start(base, running, tool, parent)

    async def _paused(self, base: dict, w: _Paused) -> ToolOutcome | _Running | _Waiting:
        """A call held at a breakpoint, until the person lets it go on with
        the arguments as they left them (any param of the schema may be
        edited, the person being the flow's designer, but the edit is
        checked against the same schema) or skips it (the LLM is told it
        was rejected)."""
        action, args = await w.debugger.wait(w.held)
        tool = w.tool
        why = None
        if action == "skip":
            why, status = "skipped at a breakpoint by the person debugging the flow", "rejected"
        elif args != w.args:
            why, status = tool.validate(args), "refused"
            if why is not None:
                why = f"the edited arguments do not fit the tool: {why}"
        if why is not None:
            out = ToolOutcome(w.call_id, w.caller_id, tool.name, tool.node_id, args, status,
                              error=redact(why), ms=(time.perf_counter() - w.t0) * 1000)
            self._published(out, w.parent)
            return out
        return self._proceed(base, w.call_id, w.caller_id, tool, args, w.t0, w.parent,
                             status=w.status)

    def _start(self, base: dict, running: _Running, tool: ToolDef,
               parent: str) -> ToolOutcome | _Running:
        """The tool's first step, now: settled, or the call still going."""
        running.step = self.engine.run_as_tool(
            tool.node_id, self.request(base, running.caller_id, tool, running.args))
        status = running.status
        if status is not None:
            if status.shown:
                status.publish("running")
            else:
                status.phase = "running"  # published if the call goes on past its first step
        token = TOOL_CALL.set(running)
        try:
            running.pending = running.step.send(None)
        except StopIteration as done:
            return self._settled(running, done.value, parent)
        finally:
            TOOL_CALL.reset(token)
        if running.status is not None or self.engine.bus.active:
            # Shown running (queued, running) to whoever listens. With no one
            # listening a live status is made only if its node reports
            # progress (running.live()): the phases it would keep could reach
            # no one, and making, keeping and dropping it cost every call
            # that suspends.
            status = running.live()
            if not status.shown:
                status.publish("running")
        return running

    async def _wait(self, r: _Running, timeout: float | None, parent: str = "") -> ToolOutcome:
        """The rest of a call that suspended in its first step, under its
        timeout (entered here, in the task that awaits the call)."""
        deadlines = None
        if timeout:
            # One timer for all of this bridge's calls (_Deadlines), not one
            # asyncio.timeout per call.
            deadlines = self._deadlines
            if deadlines is None or not deadlines.usable():
                deadlines = self._deadlines = _Deadlines(asyncio.get_running_loop())
            deadlines.enter(r, timeout)
        token = TOOL_CALL.set(r)
        try:
            resp = await _resume(r.step, r.pending)
        except asyncio.CancelledError:
            if deadlines is not None and deadlines.leave(r):
                out = r.outcome("error", error=f"the tool did not finish within {timeout:g} s "
                                               "(tool_timeout_seconds) and was cancelled")
            else:
                out = r.outcome("error", error=r.cancel_reason, cancelled=True)
                self._published(out, parent)
                raise
        except BaseException:
            if deadlines is not None:
                deadlines.leave(r)
            raise
        else:
            if deadlines is not None:
                deadlines.leave(r)
            return self._settled(r, resp, parent)
        finally:
            TOOL_CALL.reset(token)
        self._published(out, parent)
        return out

    def _settled(self, r: _Running, resp: dict, parent: str = "") -> ToolOutcome:
        if resp.get(TOOL_CALLER_ID) != r.caller_id:  # correlation is by caller id
            raise RuntimeError(f"tool response for {resp.get(TOOL_CALLER_ID)!r}, "
                               f"expected {r.caller_id!r}")
        if resp.get(TOOL_STATUS) == "success":
            out = r.outcome("success", data=resp.get(TOOL_DATA))
        else:
            out = r.outcome("error", error=redact(str(resp.get(TOOL_ERROR) or "failed")))
        self._published(out, parent)
        return out

    def status_of(self, caller_id: str, node_id: str, tool: str, parent: str) -> CallStatus:
        """A new live status for a call, kept until its result is published."""
        status = CallStatus(self.engine.bus, self.agent_id, node_id, tool, caller_id, parent)
        self._live[caller_id] = status
        return status

    def request(self, base: dict, caller_id: str, tool: ToolDef, args: dict) -> dict:
        """The tool_request: a clone of the agent's message plus the reserved
        keys; the validated arguments travel only under ``__parameters__``."""
        # Immutable values are shared (as deep_copy would), containers
        # copied: one C-level copy and a test per key, not a call per value.
        req = Message(base)
        for k, v in base.items():
            if type(v) not in _LEAVES:
                req[k] = deep_copy(v)
        if not RESERVED_KEYS.isdisjoint(req):
            for k in RESERVED_KEYS.intersection(req):
                del req[k]
        req[MESSAGE_TYPE] = TOOL_REQUEST
        req[TOOL_CALLER_ID] = caller_id
        req[AGENT_NODE_ID] = self.agent_id
        req[TOOL_NAME] = tool.name
        req[PARAMETERS] = args
        return req

    def _published(self, out: ToolOutcome, parent: str = "") -> None:
        if out.status == "error" or out.status == "refused":
            self.engine.failed_tool_calls += 1
        bus = self.engine.bus
        if bus.active:
            data = out.data
            bus.publish(ToolResult(agent=self.agent_id, node=out.node, tool=out.tool,
                                   caller_id=out.caller_id, status=out.status,  # type: ignore[arg-type]
                                   data=masked(data, 4000), error=out.error,
                                   ms=out.ms, parent=parent, tracking_id=out.tracking_id,
                                   cost_usd=tool_cost(data) if out.status == "success"
                                   and isinstance(data, dict) and "cost" in data else None))
        if self._live:
            status = self._live.pop(out.caller_id, None)
            if status is not None:
                status.publish(_final_phase(out))

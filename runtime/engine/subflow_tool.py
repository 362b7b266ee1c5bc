"""A subflow instance as an agent's tool (docs/subflows.md, "A subflow as an
agent's tool").

The expansion (``runtime.flow.expand``) keeps an instance wired to an
agent's ``tools`` port as ONE node, and expands its definition beside it as
``<instance>.<inner>`` with its ``subflow.in`` and ``subflow.out`` nodes kept
as real nodes wired to nothing outside. The Engine binds that node to a
``SubflowTool`` class (``tool_class``). A call (``run_as_tool``, through the
ToolBridge: schema, limits, approval, timeout, background, progress as for
any node) then:

1. sends a message into the definition: a clone of the agent's message
   less the tool-call keys, ``payload`` the validated arguments, each AI
   param of the instance also at ``msg[NAME]`` (what the expansion reads;
   the definition's default where the LLM left an optional one out), a new
   ``_msgid``, and ``__subflow_call__`` the call's caller id. It leaves by
   the kept ``subflow.in`` that the agent's tools wire names (an instance
   port), else by the definition's first input;
2. waits for what reaches a kept ``subflow.out`` carrying that caller id:
   concurrent calls never get each other's results. ``result: first`` (the
   default): the first message's payload, ``{"result": payload}`` (and
   ``"output": NAME`` when the definition has several); ``result: list``:
   every payload that reached an output until the instance's work settled,
   at most MAX_RESULTS (``{"results": [...]}``, ``"truncated": true`` past
   it; with several outputs each entry is ``{"output", "payload"}``);
3. fails, with the inner node's path and its user-facing error, when a node
   of the call raises and no Catch inside the instance watches it (the
   run does not count it as uncaught: the call took it, as a tool node's
   error); fails with "no message reached an output" when the instance's
   work settles with nothing out (no hang: the tool timeout still bounds
   a call whose work never settles).

"Settled": no node of the instance has a message running, queued,
deferred or waiting at a breakpoint (the engine's own counts; a message
let go at a breakpoint without going on, Skip, makes it look again). The check is per instance: calls of
one instance at once end their ``list`` (or their wait for nothing) when
all of them have settled.

A cancelled call (its timeout, the run stopping, task_cancel) cancels the
tasks running nodes for it and the waits of its messages held at
breakpoints, and its messages still on their way are dropped at their
next node. After a ``first`` call has its answer, the
rest of its work goes on (a branch that writes a log), its outputs unread
and its errors reported as caught ``node.error`` events.

Inside the call an agent's tool calls carry ``parent`` = the call's caller
id (nodes/ai reads ``__subflow_call__``), and each inner node that runs
publishes a ``tool.step`` event (at most MAX_STEP_EVENTS a call), which the
inspector's Tools and Agent tabs nest under the call. ``Node.progress`` of
an inner node is the call's ``tool.status`` progress ("Look up: page 2").
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

from ..events import NodeError, NodeStatus, ToolStep
from ..message import (
    AGENT_NODE_ID,
    MESSAGE_TYPE,
    PARAMETERS,
    RESERVED_KEYS,
    SUBFLOW_CALL,
    SUBFLOW_CALLS,
    TOOL_CALLER_ID,
    TOOL_DATA,
    TOOL_NAME,
    TOOL_REQUEST,
    Message,
    deep_copy,
    new_msgid,
)
from ..node import DROP, TOOL_CALL, Node, NodeConfigError, redact
from ..spec import Scope
from .errors import _log_traceback, error_text

#: Most payloads a ``result: list`` call returns.
MAX_RESULTS = 100
#: Most tool.step events one call publishes.
MAX_STEP_EVENTS = 200
#: Ended calls remembered, so that their late messages are known.
_ENDED_KEPT = 1000
#: Names an AI param cannot take: the run's own keys of a message.
_KEPT_NAMES = RESERVED_KEYS | {SUBFLOW_CALL, "_msgid"}


class _Call:
    """One call of the tool on its way."""

    __slots__ = ("id", "agent", "tool", "running", "done", "results", "truncated", "error",
                 "tasks", "steps", "proxies")

    def __init__(self, caller_id: str, agent: str, tool: str, running: Any,
                 done: asyncio.Future) -> None:
        self.id, self.agent, self.tool, self.running = caller_id, agent, tool, running
        self.done = done
        self.results: list[Any] = []
        self.truncated = False
        self.error: str | None = None
        self.tasks: set[asyncio.Task] = set()
        self.steps = 0
        self.proxies: dict[str, _Progress] = {}

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _Progress:
    """What TOOL_CALL holds while an inner node runs for a call: its
    ``Node.progress`` becomes the call's progress, said with its name."""

    __slots__ = ("node", "name", "call")

    def __init__(self, node: str, name: str, call: _Call) -> None:
        self.node, self.name, self.call = node, name, call

    def progress(self, fraction: float | None, text: str = "") -> None:
        running = self.call.running
        if running is not None:
            running.progress(fraction, f"{self.name}: {text}" if text else self.name)


_classes: dict[type, type] = {}


def tool_class(cls: type[Node]) -> type[Node]:
    """The class of a subflow instance that is an agent's tool: ``cls``'s
    spec (the instance's ports and params), SubflowTool's behaviour."""
    found = _classes.get(cls)
    if found is None:
        found = _classes[cls] = type(cls.__name__, (SubflowTool,), {"spec": cls.spec})
    return found


class SubflowTool(Node):
    """Runs its definition's nodes (expanded beside it) for each tool call;
    see the module's doc."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._calls: dict[str, _Call] = {}
        #: Ended calls: caller id -> "done" or "cancelled" (bounded).
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._installed = False
        self._label = self.id
        self._result = "first"
        self._first_input = ""
        self._input_of: dict[str, str] = {}  # agent id -> kept subflow.in id
        self._output_of: dict[str, str] = {}  # kept subflow.out id -> output name
        self._inner: list[Any] = []  # NodeRuntime of every node of the expansion
        self._watched: frozenset[str] = frozenset()  # inner ids a Catch inside watches
        self._ai: list[tuple[str, Any]] = []  # AI params of the instance: (name, default)
        self._check_due = False

    async def start(self) -> None:
        self._install()

    # -- setting up ----------------------------------------------------------
    def _install(self) -> None:
        """Take over the kept subflow.out nodes and wrap the inner nodes'
        on_message (their NodeRuntime's: the engine's code is untouched,
        and no other node pays for it)."""
        if self._installed or self._rt is None:
            return
        self._installed = True
        engine = self._rt.engine
        expansion = getattr(engine, "expansion", None)
        tool = expansion.tools.get(self.id) if expansion is not None else None
        if tool is None:
            return
        defn = tool.definition
        self._label = defn.label or defn.name
        self._result = defn.result
        self._first_input = next(iter(tool.inputs.values()), "")
        for w in engine.flow.wires:
            if w.target[0] == self.id and w.target[1] in tool.inputs:
                self._input_of.setdefault(w.source[0], tool.inputs[w.target[1]])
        self._output_of = {node: name for name, node in tool.outputs.items()}
        defaults = {p.name: p.default for p in defn.params}
        fnode = self._rt.fnode
        self._ai = [(name, defaults.get(name)) for name, pv in fnode.params.items()
                    if pv.scope is Scope.AI and name in defaults]
        prefix = self.id + "."
        nested: set[str] = set()
        for tid, t in expansion.tools.items():
            if tid.startswith(prefix):
                nested.update(t.nodes)  # run by that instance's own SubflowTool
        watched: set[str] = set()
        for catcher, ids in getattr(engine, "_catchers", ()):
            if catcher.id.startswith(prefix):
                watched |= ids
        self._watched = frozenset(watched)
        inputs = set(tool.inputs.values())
        for node_id in tool.nodes:
            rt = engine.nodes.get(node_id)
            if rt is None:
                continue
            self._inner.append(rt)
            if node_id in nested or node_id in inputs:
                continue
            if node_id in self._output_of:
                rt.on_message = self._arrival(self._output_of[node_id])
            elif rt.is_async:
                rt.on_message = self._wrap_async(rt, rt.on_message)
            else:
                rt.on_message = self._wrap(rt, rt.on_message)

    # -- one call ------------------------------------------------------------
    async def on_message(self, msg: Message) -> Any:
        if msg.get(MESSAGE_TYPE) != TOOL_REQUEST:
            return DROP  # only a tool call runs it: its nodes take every other message
        self._install()
        rt = self._rt
        assert rt is not None
        engine = rt.engine
        caller_id = str(msg.get(TOOL_CALLER_ID) or "") or new_msgid()
        agent = str(msg.get(AGENT_NODE_ID) or "")
        target = self._input_of.get(agent) or self._first_input
        if not target or target not in engine.nodes:
            raise NodeConfigError(f"subflow '{self._label}' has no input (a Subflow input "
                                  "node) to send the call's arguments to")
        args = msg.get(PARAMETERS) or {}
        inner = Message(msg)
        for key in RESERVED_KEYS.intersection(inner):
            del inner[key]
        inner["_msgid"] = new_msgid()
        inner["payload"] = dict(args)
        for name, default in self._ai:
            if name in _KEPT_NAMES:
                raise NodeConfigError(f"subflow '{self._label}': param '{name}' has a name the "
                                      "run keeps for itself; rename it in the definition")
            if name in args:
                inner[name] = args[name]
            elif default is not None:
                inner[name] = deep_copy(default)
            else:
                inner.pop(name, None)
        inner[SUBFLOW_CALL] = caller_id
        loop = asyncio.get_running_loop()
        call = _Call(caller_id, agent, str(msg.get(TOOL_NAME) or ""), TOOL_CALL.get(),
                     loop.create_future())
        going = engine.resource(SUBFLOW_CALLS, dict)
        self._calls[caller_id] = going[caller_id] = call
        debugger = engine.debugger
        if debugger is not None and self._holds_changed not in debugger.on_change:
            debugger.on_change.append(self._holds_changed)
        how = "done"
        try:
            engine.nodes[target].send(inner)
            if not call.done.done():
                self._watch()
                await call.done
        except asyncio.CancelledError:
            how = "cancelled"
            for task in list(call.tasks):
                task.cancel()
            self._drop_held(caller_id)
            raise
        finally:
            del self._calls[caller_id]
            going.pop(caller_id, None)
            self._ended[caller_id] = how
            if len(self._ended) > _ENDED_KEPT:
                self._ended.popitem(last=False)
        if call.error is not None:
            raise NodeConfigError(call.error)
        if not call.results:
            raise NodeConfigError(f"no message reached an output of subflow '{self._label}' "
                                  "(its nodes finished without sending one to a Subflow output)")
        several = len(self._output_of) > 1
        if self._result == "list":
            data: dict[str, Any] = {"results": [
                {"output": o, "payload": p} if several else p for o, p in call.results]}
            if call.truncated:
                data["truncated"] = True
        else:
            output, payload = call.results[0]
            data = {"output": output, "result": payload} if several else {"result": payload}
        msg[TOOL_DATA] = data
        return None

    # -- what the inner nodes do -----------------------------------------------
    def _arrival(self, name: str) -> Any:
        """A kept subflow.out's on_message: the call's result."""
        def on_message(msg: dict) -> Any:
            call = self._calls.get(msg.get(SUBFLOW_CALL))  # type: ignore[arg-type]
            if call is None or call.error is not None:
                return DROP
            if self._result == "list":
                if len(call.results) < MAX_RESULTS:
                    call.results.append((name, deep_copy(msg.get("payload"))))
                else:
                    call.truncated = True
                self._watch()
            elif not call.results:
                call.results.append((name, msg.get("payload")))
                call.finish()
            return DROP
        return on_message

    def _call_of(self, msg: dict) -> tuple[_Call | None, str]:
        """The call a message works for, or None and how its call ended
        ("": not a call's message, or a tool request an agent inside made)."""
        key = msg.get(SUBFLOW_CALL)
        if key is None or msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            return None, ""
        call = self._calls.get(key)
        if call is not None:
            return call, ""
        return None, self._ended.get(key, "")

    def _wrap(self, rt: Any, run: Any) -> Any:
        def on_message(msg: dict) -> Any:
            call, ended = self._call_of(msg)
            if call is None:
                if ended == "cancelled":
                    return DROP
                if ended:
                    try:
                        return run(msg)
                    except Exception as exc:
                        return self._late_failure(rt, msg, exc)
                return run(msg)
            token = TOOL_CALL.set(self._progress(call, rt))
            t0 = time.perf_counter()
            try:
                result = run(msg)
            except Exception as exc:
                return self._failed(call, rt, msg, exc, t0)
            finally:
                TOOL_CALL.reset(token)
            self._step(call, rt.id, rt.node.name, "done", "", t0)
            if self._calls:
                self._watch()
            return result
        return on_message

    def _wrap_async(self, rt: Any, run: Any) -> Any:
        async def on_message(msg: dict) -> Any:
            call, ended = self._call_of(msg)
            if call is None:
                if ended == "cancelled":
                    return DROP
                if ended:
                    try:
                        return await run(msg)
                    except Exception as exc:
                        return self._late_failure(rt, msg, exc)
                return await run(msg)
            task = asyncio.current_task()
            if task is not None:
                call.tasks.add(task)
            TOOL_CALL.set(self._progress(call, rt))  # this task's own context
            if call.running is not None:
                call.running.progress(None, rt.node.name)
            self._step(call, rt.id, rt.node.name, "running", "", None)
            t0 = time.perf_counter()
            try:
                result = await run(msg)
            except Exception as exc:
                return self._failed(call, rt, msg, exc, t0)
            finally:
                if task is not None:
                    call.tasks.discard(task)
                self._watch()
            self._step(call, rt.id, rt.node.name, "done", "", t0)
            return result
        return on_message

    def _progress(self, call: _Call, rt: Any) -> _Progress:
        found = call.proxies.get(rt.id)
        if found is None:
            found = call.proxies[rt.id] = _Progress(rt.id, rt.node.name, call)
        return found

    def _failed(self, call: _Call, rt: Any, msg: dict, exc: Exception, t0: float) -> Any:
        """An inner node of a call raised: a Catch inside the instance that
        watches it takes it as in any flow; else the call fails with the
        node's path and its user-facing error (a NodeConfigError's text;
        anything else only its type, its text going to node.error, as a
        tool node's error), and the run goes on."""
        if rt.id in self._watched:
            raise exc
        text = self._report(rt, msg, exc)
        self._step(call, rt.id, rt.node.name, "error", text, t0)
        if call.error is None and not (self._result == "first" and call.results):
            said = text if isinstance(exc, NodeConfigError) else (
                f"{type(exc).__name__}: the node failed unexpectedly; details are in the "
                "run's events")
            name = rt.node.name
            who = f"'{rt.id}'" + (f" ({name})" if name and name != rt.id else "")
            call.error = f"node {who} inside subflow '{self._label}' failed: {said}"
            call.finish()
        return DROP

    def _late_failure(self, rt: Any, msg: dict, exc: Exception) -> Any:
        """A node still working for a call that already has its answer."""
        if rt.id in self._watched:
            raise exc
        self._report(rt, msg, exc)
        return DROP

    def _report(self, rt: Any, msg: dict, exc: Exception) -> str:
        rt.errors += 1
        text = error_text(exc)
        _log_traceback("node %s raised in a subflow tool call", rt.id, exc)
        bus = rt.engine.bus
        if bus.active:
            bus.publish(NodeError(node=rt.id, name=rt.node.name, message=text,
                                  msgid=msg.get("_msgid", ""), caught=True))
            bus.publish(NodeStatus(node=rt.id, text=text[:80], color="red", state="error"))
        return text

    def _step(self, call: _Call, node: str, name: str, status: str, text: str,
              t0: float | None) -> None:
        bus = self._rt.engine.bus  # type: ignore[union-attr]
        if not bus.active or call.steps >= MAX_STEP_EVENTS:
            return
        call.steps += 1
        bus.publish(ToolStep(agent=call.agent, tool=call.tool, caller_id=call.id, node=node,
                             name=name, status=status,  # type: ignore[arg-type]
                             text=redact(text[:500]),
                             ms=(time.perf_counter() - t0) * 1000 if t0 else 0.0))

    # -- breakpoints -----------------------------------------------------------
    def _holds_changed(self) -> None:
        """The debugger held or let go a message. One of a call's messages
        waiting at a breakpoint is the call's work in flight (its node's
        ``starting`` count, which _check reads); let go without reaching a
        node (Skip), nothing inside runs to look again whether the work
        settled: look once its waiting task has ended (a loop turn after
        it was woken: it is scheduled before this)."""
        if self._calls:
            asyncio.get_running_loop().call_soon(self._watch)

    def _drop_held(self, caller_id: str) -> None:
        """A call cancelled (its timeout, the run stopping): its messages
        waiting at breakpoints go too, as its running tasks do (each wait
        ends as "stopped"), rather than wait for a person to let them go
        to be dropped at their next node."""
        debugger = self._rt.engine.debugger if self._rt is not None else None
        if debugger is None:
            return
        for held in list(debugger.held.values()):
            msg = held.msg
            if (not held.is_tool and isinstance(msg, dict)
                    and msg.get(SUBFLOW_CALL) == caller_id and not held.future.done()):
                held.future.cancel()

    # -- settling ------------------------------------------------------------
    def _watch(self) -> None:
        """Look, once the loop has run what is ready now, whether the
        instance's work has settled (a node that just ended has forwarded
        its message by then: the counts are the next hops')."""
        if not self._check_due and self._calls:
            self._check_due = True
            asyncio.get_running_loop().call_soon(self._check)

    def _check(self) -> None:
        self._check_due = False
        for rt in self._inner:
            if rt.active or rt.deferred or rt.starting:
                return
        for call in list(self._calls.values()):
            call.finish()

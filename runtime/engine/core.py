"""One run of one flow (``Engine``): builds a runtime per node and its
wires, starts the nodes and sources, counts what is in flight and ends the
run the moment the last message settles (or at a stop, a timeout, a message
storm), shares the run's resources among its nodes, and publishes the
run's start and end.

What the engine does per message is ``runtime.engine.dispatch``; a tool
call's node run is ``tool_mode``; its stats and its record for a rerun,
``recording``; ``Engine`` inherits each of them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cost import RunCost
from ..events import EventBus, NodeError, RunFinished, RunStarted
from ..expressions import RUN_DEADLINE
from ..flow import Flow, FlowError, Problem, validate_flow
from ..flow.subflows import is_instance_type
from ..node import Node, NodeConfigError, register_flow_secrets
from ..registry import Registry
from .dispatch import Dispatch
from .errors import _log_traceback, error_text
from .node_runtime import NodeRuntime, WireRuntime
from .params import expand_flow_dir, expand_workspace
from .recording import REPLAY_INPUTS, Recording
from .subflow_tool import tool_class
from .tool_mode import ToolMode

log = logging.getLogger("runtime.engine")  # the name its log lines had as one module

#: Messages in flight (tasks, deferred hops, tool calls) past which a run
#: fails as a message storm; a run option and a flow setting.
MAX_IN_FLIGHT = 100_000


#: RunFinished.status for each reason (the short form the designer shows).
STATUS_OF_REASON = {"completed": "ok", "failed": "error", "timeout": "timeout",
                    "interrupted": "stopped"}


@dataclass
class RunResult:
    status: str = "ok"  # ok | error | stopped | timeout
    errors: int = 0  # uncaught node errors
    duration_ms: float = 0.0
    problems: list = field(default_factory=list)
    reason: str = "completed"  # completed | failed | timeout | interrupted
    message: str = ""  # why, when a bound or a signal ended the run
    in_flight: dict[str, int] = field(default_factory=dict)  # node id -> unfinished messages
    #: LLM tokens and USD of the whole run (None: no request, or a model
    #: without a price), and what tool results reported they cost.
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    tool_cost_usd: float = 0.0
    #: Tool calls that ended in error or were refused (runtime.tools counts).
    failed_tool_calls: int = 0
    #: LLM requests to an offline provider (scripted), which cost nothing.
    offline_requests: int = 0


class Engine(Dispatch, ToolMode, Recording):
    """One run of one flow. Create, ``await run()``, optionally ``stop()``."""

    def __init__(
        self,
        flow: Flow,
        registry: Registry | None = None,
        bus: EventBus | None = None,
        *,
        trace: bool = False,
        record: bool | None = None,
        keep_alive: bool = False,
        file: str = "",
        max_in_flight: int | None = None,
        validated: bool = False,
        record_inputs: bool | None = None,
        use_pins: bool = False,
    ) -> None:
        #: The flow this engine runs: ``source_flow`` itself, or, when that
        #: has subflow instances, the flat flow its expansion made (node ids
        #: inside an instance are paths: ``order.check_stock``). Wire indexes,
        #: node ids and tools are the flat flow's; a run's record (rerun,
        #: flow hash, history) keeps ``source_flow``.
        self.flow = flow
        self.source_flow = flow
        #: runtime.flow.expand.Expansion of a flow with subflows, else None.
        self.expansion: Any = None
        self.registry = registry or Registry.default()
        self.bus = bus or EventBus()
        self.trace = trace
        # Record last messages per node/wire for the inspector; costs a copy
        # of a few messages per node per stats tick, so only when listened to.
        self._record_wanted = record
        # Keep what reached each node for a rerun (a run.replay event at the
        # end); like ``record``, on whenever someone listens.
        self._inputs_wanted = record_inputs
        self._record_inputs = False
        self._calls: dict[str, Any] | None = None  # tool requests by caller id
        self._variables: Any = None  # the flow variables as the run ended
        #: What starts the run instead of its sources: a coroutine function
        #: of the engine (a rerun injecting recorded messages into one node,
        #: or repeating one tool call). Sources then neither start nor send.
        self.entry: Callable[[Engine], Any] | None = None
        #: A rerun's origin, published in run.started: the run it repeats,
        #: and the node or tool call it starts from.
        self.rerun_of = self.from_node = self.rerun_call = ""
        self.keep_alive = keep_alive
        self.file = file
        self.run_id = uuid.uuid4().hex[:12]
        self.nodes: dict[str, NodeRuntime] = {}
        self._inflight = 0
        self._tasks: set[asyncio.Task] = set()
        self._done: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._catchers: list[tuple[NodeRuntime, frozenset[str]]] = []
        self._uncaught = 0
        self._send_nesting = 0
        self._reason = ""  # set when something other than settling ends the run
        self._message = ""
        self.cost = RunCost()  # made again, with the flow's budget, by run()
        self.failed_tool_calls = 0  # tool calls that failed or were refused (runtime.tools)
        self._in_flight: dict[str, int] = {}
        self._deadline = 0.0  # time.monotonic() past which deferred work is dropped
        self._queue: deque[tuple[NodeRuntime, dict]] = deque()  # deferred hops, in order
        self._resources: dict[str, Any] = {}
        self._closers: list[tuple[str, Callable[[Any], Any]]] = []
        self._drain_scheduled = False
        self.max_in_flight = max_in_flight or flow.settings.max_in_flight or MAX_IN_FLIGHT
        self._started = 0.0
        self._record = False
        self.running = False
        #: Breakpoints (runtime.debugger.Debugger.attach); None asks nothing.
        self.debugger: Any = None
        #: Set once every node's start() has run: from then on a node may be
        #: called from outside (an MCP client's tool calls wait for it).
        self.started = asyncio.Event()
        #: Expression contexts by instance path (None: the top level).
        self._contexts: dict[str | None, Any] = {}
        self._build(validated)
        #: Nodes that send their pinned data instead of running (runtime.pins);
        #: their code is swapped out here, so the hot path tests nothing new.
        self.pinned: list[str] = []
        if use_pins:
            from ..pins import apply_pins

            self.pinned = apply_pins(self)

    # -- construction -------------------------------------------------------
    def _build(self, validated: bool) -> None:
        # ``validated``: the caller has just validated this very flow (the
        # CLI, the designer) and a second pass would double the load time.
        if not validated:
            problems = [p for p in validate_flow(self.flow, self.registry, file=self.file)
                        if p.severity == "error"]
            if problems:
                raise FlowError(problems)
        if self.flow.subflows or any(is_instance_type(n.type) for n in self.flow.nodes):
            from ..flow.expand import expand
            from ..flow.subflows import with_subflows

            self.registry = with_subflows(self.registry, self.flow, self.file)
            self.expansion = expand(self.flow, self.registry, self.file)
            self.flow = self.expansion.flow
        flow_dir = str(Path(self.file).resolve().parent) if self.file else os.getcwd()
        isolate = set(self.flow.settings.out_of_process)
        problems: list[Problem] = []
        for fnode in self.flow.nodes:
            cls = self.registry.get(fnode.type)
            assert cls is not None
            if self.expansion is not None and fnode.id in self.expansion.tools:
                cls = tool_class(cls)  # a subflow instance that is an agent's tool
            if isolate and self.registry.package_of(fnode.type) in isolate:
                cls = self.registry.isolated(fnode.type) or cls
            rt = NodeRuntime(self, fnode, cls.spec)
            params = expand_flow_dir(fnode.params, flow_dir)
            params = expand_workspace(params, self.run_id)
            try:
                rt.bind(cls(fnode.id, fnode.name or "", params, fnode.outputs, rt))
            except NodeConfigError as exc:
                # A param the node reads when the flow starts, before any
                # message (a Switch's path as an expression of msg).
                problems.append(Problem(file=self.file, node=fnode.id,
                                        message=f"read when the flow starts, before any message: {exc}"))
                continue
            self.nodes[fnode.id] = rt
        if problems:
            raise FlowError(problems)
        self._bind_expressions()
        for index, wire in enumerate(self.flow.wires):
            (src, port), (dst, dport) = wire.source, wire.target
            s, d = self.nodes[src], self.nodes[dst]
            kind = next((p.kind for p in s.spec.outputs if p.name == port), "out")
            if kind == "tools":
                s.tool_targets.append(dst)
                continue
            s.routes.setdefault(port, []).append(WireRuntime(index, d, dport))
        for rt in self.nodes.values():
            rt.out_routes = rt.routes.get("out", [])
            for wires in rt.routes.values():
                for w in wires:
                    w.target.incoming.append(w)
            if len(rt.out_routes) == 1 and not rt.out_routes[0].target.disabled \
                    and not self.trace:
                rt.next = rt.out_routes[0]
            if rt.spec.type == "core.catch":
                watched = rt.node.param("nodes").get(None) or []
                self._catchers.append((rt, frozenset(watched)))

    def _bind_expressions(self) -> None:
        """Give every template param the run's context: its flow variables
        (the run resource Set Variable keeps) and the environment less the
        variables the flow's secrets name. One context per run, made only
        when the flow has a template."""
        templates = [(rt.id, bp) for rt in self.nodes.values() for p in rt.spec.params
                     if (bp := rt.node.__dict__.get(p.name)) is not None
                     and getattr(bp, "expr", None) is not None]
        if not templates:
            return
        expansion = self.expansion
        if expansion is None or not expansion.instances:
            context = self._context_for(None)
            for _node_id, bp in templates:
                bp.expr.context = context
            return
        # Inside a subflow instance a template also sees ``subflow``: that
        # instance's params (one context per instance).
        for node_id, bp in templates:
            bp.expr.context = self.template_context(node_id, bp.name) \
                if "subflow" in bp.expr.compiled.roots else self._context_for(None)

    def _context_for(self, path: str | None) -> Any:
        """The expression context of the templates of instance ``path``
        (None: the top level), made once per run and instance."""
        contexts = self._contexts
        found = contexts.get(path)
        if found is None:
            if path is None:
                from ..expressions import ExpressionContext

                found = ExpressionContext.for_run(self.flow, self.registry, self.resource)
            else:
                found = self._context_for(None).with_subflow(
                    self.expansion.subflow_values(path, self._context_for))
            contexts[path] = found
        return found

    def template_context(self, node_id: str, param: str) -> Any:
        """The expression context a template of ``node_id``'s ``param`` reads
        ``subflow`` through: inside a subflow instance, that instance's
        params; the run's plain context elsewhere. The Template node's own
        text asks it too (nodes/core/transform.py)."""
        expansion = self.expansion
        path = expansion.template_scope(node_id, param) if expansion is not None else None
        return self._context_for(path)

    # -- running ------------------------------------------------------------
    async def run(self, timeout: float | None = None) -> RunResult:
        self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        self.bus.run_id = self.run_id
        self._record = self._record_wanted if self._record_wanted is not None else self.bus.active
        self._record_inputs = self.bus.active and (
            self._inputs_wanted if self._inputs_wanted is not None else True)
        if self._record_inputs:
            for rt in self.nodes.values():
                rt.inputs = deque(maxlen=REPLAY_INPUTS)
            self._calls = {}
        self._started = time.perf_counter()
        # The run's tokens and USD; agents add to it and check its budget.
        self.cost = RunCost(budget_usd=self.flow.settings.budget_usd,
                            budget_tokens=self.flow.settings.budget_tokens)
        self.failed_tool_calls = 0
        if timeout is not None:
            self._deadline = time.monotonic() + timeout
        # Templates stop rendering at the deadline too (RenderDeadline, below).
        deadline_token = RUN_DEADLINE.set(self._deadline or None)
        self.running = True
        # Every secret the flow names is masked from the first event on, not
        # only once the node that uses it has run (docs/credentials.md).
        register_flow_secrets(rt.node for rt in self.nodes.values() if not rt.disabled)
        if self.bus.active:
            self.bus.publish(RunStarted(flow=self.flow.name, path=self.file,
                                        nodes=len(self.nodes), trace=self.trace,
                                        rerun_of=self.rerun_of, from_node=self.from_node,
                                        call=self.rerun_call))
        stats_task = self._loop.create_task(self._stats_loop()) if self.bus.active else None
        try:
            await self._start_nodes()
            self.started.set()
            if not self._done.done():
                self._inflight += 1  # held while sources are being started
                if self.entry is not None:
                    self._start_entry()
                else:
                    for rt in self.nodes.values():
                        if rt.spec.source and not rt.disabled:
                            self._spawn(self._run_source(rt), rt)
                self._inflight -= 1
                self._settle()
            try:
                if timeout is not None:
                    await asyncio.wait_for(asyncio.shield(self._done), timeout)
                else:
                    await self._done
            except TimeoutError:
                self._end("timeout")
        finally:
            RUN_DEADLINE.reset(deadline_token)
            if not self._reason:
                self._in_flight = self.in_flight()
            if self._record_inputs:
                self._variables = self._keep_variables()
            await self._shutdown()
            if stats_task:
                stats_task.cancel()
        return self._finish()

    def stop(self, message: str = "") -> None:
        """Cancel everything in flight (tool calls included) and end the run
        as interrupted (a person's Stop, SIGINT, SIGTERM); ``message`` says
        by what."""
        self._end("interrupted", message)

    def _end(self, reason: str, message: str = "") -> None:
        """End the run now for ``reason``; the first reason given wins."""
        if self._done is not None and not self._done.done():
            self._reason, self._message = reason, message
            # What was unfinished, now: queued hops drain (dropped) before
            # run() wakes up, and would no longer be seen then.
            self._in_flight = self.in_flight()
            self._done.set_result(None)

    @property
    def uncaught(self) -> int:
        """Node errors so far that no catch node took."""
        return self._uncaught

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self._started) * 1000 if self._started else 0.0

    def in_flight(self) -> dict[str, int]:
        """Per node, messages it is still handling or that wait for it."""
        # A task cancelled before it ran leaves `starting` counted, but only
        # after the run has ended, when nobody asks any more.
        return {rt.id: rt.active + rt.deferred + rt.starting for rt in self.nodes.values()
                if rt.active or rt.deferred or rt.starting}

    def _storm(self, rt: NodeRuntime) -> None:
        text = f"message storm at {rt.id}: {self._inflight} messages in flight " \
               f"(the limit is {self.max_in_flight})"
        log.warning("%s", text)
        if self.bus.active:
            self.bus.publish(NodeError(node=rt.id, name=rt.node.name, message=text))
        self._end("failed", text)

    def _past_deadline(self) -> bool:
        if self._deadline and time.monotonic() > self._deadline:
            # The loop is too busy for the timer to fire on time (a flood of
            # deferred hops in one turn): end the run from the hot path.
            self._end("timeout")
            return True
        return False

    async def _start_nodes(self) -> None:
        for rt in self.nodes.values():
            if self.entry is not None and rt.spec.source:
                continue  # a rerun: triggers stay quiet (a watched folder may be gone)
            try:
                await rt.node.start()
            except Exception as exc:
                self._node_failed(rt, None, exc)
        if self._uncaught:
            self._end("failed")

    async def _shutdown(self) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for rt in self.nodes.values():
            try:
                await rt.node.close()
            except Exception as exc:
                log.warning("node %s failed to close: %s", rt.id, exc)
        await self._close_resources()
        self.running = False

    # -- resources shared by the nodes of one run ---------------------------
    def resource(self, key: str, make: Callable[[], Any],
                 close: Callable[[Any], Any] | None = None) -> Any:
        """The run's one ``key`` (an HTTP client, a browser session by name,
        flow-scoped variables), made by ``make()`` the first time a node asks
        and closed by ``close(value)`` (a function or a coroutine function)
        when the run ends, after every node's close(), whatever happened."""
        if key not in self._resources:
            self._resources[key] = make()
            if close is not None:
                self._closers.append((key, close))
        return self._resources[key]

    async def _close_resources(self) -> None:
        closers, self._closers = self._closers, []
        for key, close in reversed(closers):
            try:
                result = close(self._resources.get(key))
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # one bad closer must not keep the others open
                log.warning("could not close the run's %s: %s", key, exc)
        self._resources.clear()

    def _finish(self) -> RunResult:
        duration = (time.perf_counter() - self._started) * 1000
        reason = self._reason or ("failed" if self._uncaught else "completed")
        status = STATUS_OF_REASON[reason]
        cost = self.cost
        if cost.exceeded and not self._message:
            self._message = cost.exceeded  # a budget stopped an agent: say which
        spent = {"usage": dict(cost.run.usage) if cost.run.requests else {},
                 "cost_usd": cost.run.known_cost if cost.run.requests else None,
                 "tool_cost_usd": round(cost.tool_cost_usd, 10),
                 "failed_tool_calls": self.failed_tool_calls,
                 "offline_requests": cost.run.offline}
        if self.bus.active:
            self.bus.publish(self.stats())
            if self._record_inputs:
                try:
                    self.bus.publish(self.replay())
                except Exception:  # a run's end must not fail for its recording
                    log.exception("could not record the run's inputs for a rerun")
            self.bus.publish(RunFinished(
                status=status, reason=reason, message=self._message,  # type: ignore[arg-type]
                in_flight=self._in_flight, duration_ms=duration, errors=self._uncaught,
                **spent))
        return RunResult(status=status, errors=self._uncaught, duration_ms=duration,
                         reason=reason, message=self._message, in_flight=self._in_flight,
                         **spent)

    def _start_entry(self) -> None:
        """Run ``entry`` as the run's one source (counted in flight)."""
        self._inflight += 1
        task = self._loop.create_task(self._run_entry())  # type: ignore[union-attr]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _run_entry(self) -> None:
        try:
            await self.entry(self)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log_traceback("the run's entry (%s) failed", "rerun", exc)
            self._end("failed", error_text(exc))

    def _spawn(self, coro: Any, rt: NodeRuntime) -> asyncio.Task | None:
        if self._done.done():  # type: ignore[union-attr]
            coro.close()  # the run has ended: start nothing new
            return None
        if self._inflight >= self.max_in_flight:
            coro.close()
            self._storm(rt)
            return None
        self._inflight += 1
        task = self._loop.create_task(coro)  # type: ignore[union-attr]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._inflight -= 1
        self._settle()

    def _settle(self) -> None:
        if self._inflight == 0 and not self.keep_alive and self._done and not self._done.done():
            self._done.set_result(None)

    async def _run_source(self, rt: NodeRuntime) -> None:
        try:
            await rt.node.generate()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._node_failed(rt, None, exc)

    def hold(self) -> None:
        """Count outside work (an agent's pending LLM call) as in flight."""
        self._inflight += 1

    def release(self) -> None:
        self._inflight -= 1
        self._settle()


def busy_node(engine: Engine, thread_id: int | None) -> str | None:
    """The node whose code the thread ``thread_id`` (the run's event loop)
    is running now, if any: what a stuck run is stuck in, read from the
    thread's stack, innermost first. For the watchdogs that end such a run
    (the CLI's, a queue worker's): inline work counts in no in-flight figure."""
    import sys

    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Node) and owner.id in engine.nodes:
            return owner.id
        frame = frame.f_back
    return None

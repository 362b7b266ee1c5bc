"""Dispatch, the engine's hot path: how a message moves from node to node.

A node whose ``on_message`` is a plain function runs inline in the sender's
call (no queue, no task); a coroutine gets a task per message so that slow
I/O overlaps. Inline chains are bounded in depth: past ``MAX_DEPTH`` hops
(or while a node already has deferred messages, to keep its order) a
message continues on the next turn of the event loop. A node that raises
hands its message to the flow's catch nodes (``_node_failed``).

``Dispatch`` is the part of ``Engine`` (``runtime.engine.core``) that does
it: the engine holds the run's state and counts what is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from ..events import EventBus, MessageSent, NodeError, NodeStatus
from ..expressions import RenderDeadline
from ..flow import Flow
from ..message import Message, deep_copy, new_msgid, to_jsonable
from ..node import DROP, NodeConfigError, redact
from .errors import _log_traceback, error_text
from .node_runtime import SNAPSHOT_ITEMS, SNAPSHOT_LIMIT, NodeRuntime, WireRuntime

log = logging.getLogger("runtime.engine")  # the name its log lines had as one module

MAX_DEPTH = 100
MAX_CATCHES = 10  # times one message may be caught before an error is final
#: Deferred hops run per turn of the event loop, so that a flood of them
#: lets timers, I/O and (in the designer) painting in between.
DRAIN_BATCH = 10_000


class Dispatch:
    """The Engine's dispatch and its node errors (the engine inherits
    these methods)."""

    # Set by Engine.__init__ and run().
    flow: Flow
    bus: EventBus
    nodes: dict[str, NodeRuntime]
    trace: bool
    debugger: Any
    max_in_flight: int
    _record: bool
    _done: asyncio.Future | None
    _loop: asyncio.AbstractEventLoop | None
    _inflight: int
    _in_flight: dict[str, int]
    _queue: deque[tuple[NodeRuntime, dict]]
    _drain_scheduled: bool
    _send_nesting: int
    _catchers: list[tuple[NodeRuntime, frozenset[str]]]
    _uncaught: int

    # -- dispatch (the hot path) -------------------------------------------
    def inject(self, node_id: str, msg: dict | None = None) -> None:
        """Deliver a message to a node's input as if it arrived on a wire."""
        rt = self.nodes[node_id]
        self._deliver(rt, msg if msg is not None else Message.new(), 0)

    def _deliver(self, rt: NodeRuntime, msg: dict, depth: int) -> None:
        # A linear chain of sync nodes is a loop here, not a recursion: while
        # a node's result is None and it has one wire on (rt.next), the
        # message moves on with one count and four tests per hop. Anything
        # else (async, deferred, recording, past MAX_DEPTH, a port, fan-out)
        # leaves the loop for _deliver_slow or _forward.
        if rt.disabled:
            return
        rt.n_in += 1
        self._chain(rt, msg, depth)

    def _chain(self, rt: NodeRuntime, msg: dict, depth: int) -> None:
        """_deliver's loop, for a message already counted in at ``rt``."""
        while True:
            if rt.gate or depth > MAX_DEPTH:
                self._deliver_slow(rt, msg, depth)
                return
            try:
                result = rt.on_message(msg)
            except Exception as exc:
                self._node_failed(rt, msg, exc, depth)
                return
            if result is None:
                wire = rt.next
                if wire is not None:
                    wire.fast += 1
                    rt = wire.target
                    depth += 1
                    continue
            if result is not DROP:
                self._forward(rt, msg, result, depth)
            return

    def _deliver_slow(self, rt: NodeRuntime, msg: dict, depth: int) -> None:
        """The rest of _deliver for a message already counted in at ``rt``."""
        if self.debugger is not None and self.debugger.stop_at(self, rt, msg):
            return  # held at a breakpoint; the debugger sends it on
        if rt.budget > 0:
            rt.record_in(msg)
        if rt.is_async:
            if self._done.done():  # type: ignore[union-attr]
                return  # the run has ended: start nothing new
            if self._inflight >= self.max_in_flight:
                self._storm(rt)
                return
            # _spawn's, less the done callback: the task settles its own
            # count as it ends (one event-loop callback less per message).
            self._inflight += 1
            rt.starting += 1
            self._tasks.add(self._loop.create_task(self._run_async(rt, msg)))  # type: ignore[union-attr]
            return
        if depth > MAX_DEPTH or rt.deferred:
            if self._done.done():  # type: ignore[union-attr]
                return  # the run ended (stop, timeout, storm): drop, do not queue
            if self._inflight >= self.max_in_flight:
                self._storm(rt)
                return
            rt.deferred += 1
            rt.gate += 1
            self._inflight += 1
            self._queue.append((rt, msg))
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self._loop.call_soon(self._drain)  # type: ignore[union-attr]
            return
        try:
            result = rt.on_message(msg)
        except Exception as exc:
            self._node_failed(rt, msg, exc, depth)
            return
        if result is not DROP:
            self._forward(rt, msg, result, depth)

    def _drain(self) -> None:
        """Run the hops deferred so far (at most DRAIN_BATCH), in the order
        they were deferred; what they defer in turn waits for the next turn
        of the event loop, as call_soon per hop would, but costs one loop
        callback per batch instead of one per hop (qasync's are expensive)."""
        self._drain_scheduled = False
        queue, run = self._queue, self._run_deferred
        for _ in range(min(len(queue), DRAIN_BATCH)):
            rt, msg = queue.popleft()
            run(rt, msg)
        if queue and not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)  # type: ignore[union-attr]

    def _run_deferred(self, rt: NodeRuntime, msg: dict) -> None:
        # The deadline is checked while this hop still counts as in flight,
        # so that the run's end names it as unfinished.
        stopped = self._done.done() or self._past_deadline()  # type: ignore[union-attr]
        rt.deferred -= 1
        rt.gate -= 1
        if stopped:
            # stop() or the timeout ended the run: a loop must not go on
            # running nodes (after close(), in a long-lived designer loop).
            self._inflight -= 1
            return
        try:
            result = rt.on_message(msg)
        except Exception as exc:
            self._node_failed(rt, msg, exc)
        else:
            if result is not DROP:
                self._forward(rt, msg, result, 0)
        self._inflight -= 1
        self._settle()

    async def _run_async(self, rt: NodeRuntime, msg: dict) -> None:
        try:
            rt.starting -= 1
            rt.active += 1
            t0 = time.perf_counter()
            try:
                if rt.sem is not None:
                    async with rt.sem:
                        result = await rt.on_message(msg)
                else:
                    result = await rt.on_message(msg)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._node_failed(rt, msg, exc)
                return
            finally:
                rt.active -= 1
                rt.busy += time.perf_counter() - t0
            if result is not DROP:
                self._forward(rt, msg, result, 0)
        finally:
            # What _task_done does for other tasks, here as the task ends.
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._inflight -= 1
            self._settle()

    def _forward(self, rt: NodeRuntime, msg: dict, result: Any, depth: int) -> None:
        if result is None:
            wires = rt.out_routes
        elif isinstance(result, str):
            wires = rt.routes.get(result, ())  # type: ignore[assignment]
        elif isinstance(result, (list, tuple)) and all(type(p) is str for p in result):
            wires = [w for port in result for w in rt.routes.get(port, ())]
        else:
            self._node_failed(rt, msg, TypeError(
                f"on_message returned {type(result).__name__}; expected None, DROP, "
                "a port name or a list of port names"), depth)
            return
        if self.debugger is not None and self.debugger.wires:
            wires = self.debugger.on_wires(self, rt, msg, wires)
        n = len(wires)
        if n == 0:
            return
        rt.n_out += 1
        if rt.budget > 0 and self._record:
            rt.record(rt.last_out, msg)
        depth += 1
        if n == 1:
            wire = wires[0]
            wire.slow += 1
            if self.trace:
                self._trace_hop(rt, wire, msg)
            self._deliver(wire.target, msg, depth)
            return
        # Fan-out clones, so that no two branches share a mutable message.
        copies = [deep_copy(msg) for _ in range(n - 1)]
        copies.append(msg)
        for wire, m in zip(wires, copies, strict=True):
            wire.slow += 1
            if self.trace:
                self._trace_hop(rt, wire, m)
            self._deliver(wire.target, m, depth)

    def _send_from(self, rt: NodeRuntime, msg: dict, port: str) -> None:
        if "_msgid" not in msg:
            msg["_msgid"] = new_msgid()
        # A send from a source's task starts at depth 0. A send made inside
        # another dispatch (core.split sending from on_message) sits on top of
        # an unknown number of inline hops; each such nesting level gets half
        # the depth budget, so the stack stays bounded even in a loop.
        nesting = self._send_nesting
        wire = rt.next
        if wire is not None and not nesting and port == "out" and not rt.gate:
            # A source's message onto its one wire: straight into the chain
            # loop (the wire's count stands for rt's out and the target's in).
            self._send_nesting = 1
            try:
                wire.fast += 1
                self._chain(wire.target, msg, 1)
            finally:
                self._send_nesting = 0
            return
        self._send_nesting = nesting + 1
        try:
            self._forward(rt, msg, port if port != "out" else None,
                          min(MAX_DEPTH, nesting * (MAX_DEPTH // 2)))
        finally:
            self._send_nesting = nesting

    def _trace_hop(self, rt: NodeRuntime, wire: WireRuntime, msg: dict) -> None:
        if self._record:
            wire.last = to_jsonable(msg, limit=SNAPSHOT_LIMIT, text=redact,
                                    items=SNAPSHOT_ITEMS)
        if self.bus.active:
            port = self.flow.wires[wire.index].source[1]
            self.bus.publish(MessageSent(source=rt.id, port=port, target=wire.target.id,
                                         wire=wire.index,
                                         msg=to_jsonable(msg, limit=SNAPSHOT_LIMIT, text=redact,
                                                         items=SNAPSHOT_ITEMS)))

    # -- errors -------------------------------------------------------------
    def _node_failed(self, rt: NodeRuntime, msg: dict | None, exc: BaseException,
                     depth: int = 0) -> None:
        if isinstance(exc, RenderDeadline):
            # A template saw the run's deadline pass mid-render: the run ends
            # as timed out, with that message unfinished (inline work counts
            # in no in-flight figure of its own).
            if self._done is not None and not self._done.done():
                self._end("timeout")
                self._in_flight[rt.id] = self._in_flight.get(rt.id, 0) + 1
            return
        rt.errors += 1
        text = error_text(exc)
        if isinstance(exc, NodeConfigError):
            log.info("node %s: %s", rt.id, text)
        else:
            _log_traceback("node %s raised", rt.id, exc)
        # How often this message has been caught already: a catch flow that
        # fails every time would otherwise loop until the run is stopped
        # (Node-RED stops at 10 as well).
        # The count lives on the message object (Message._catches), where no
        # node can reset it: a change node deleting msg.error once made a
        # failing catch flow endless.
        caught_before = getattr(msg, "_catches", 0)
        error = {"message": text, "node": rt.id, "name": rt.node.name, "type": rt.spec.type,
                 "catches": caught_before + 1}
        catchers = [c for c, watched in self._catchers
                    if c is not rt and (not watched or rt.id in watched) and not c.disabled]
        if caught_before >= MAX_CATCHES:
            log.warning("node %s: message %s caught %d times; not caught again", rt.id,
                        (msg or {}).get("_msgid", ""), caught_before)
            text = f"{text} (caught {caught_before} times already; not caught again)"
            catchers = []
        if not catchers:
            self._uncaught += 1
        # Published before the catch flow runs, so that observers see the
        # error before whatever the catch flow does about it.
        if self.bus.active:
            self.bus.publish(NodeError(node=rt.id, name=rt.node.name, message=text,
                                       msgid=(msg or {}).get("_msgid", ""), caught=bool(catchers)))
            self.bus.publish(NodeStatus(node=rt.id, text=text[:80], color="red", state="error"))
        if catchers:
            base = msg if type(msg) is Message else Message(msg or Message.new())
            base._catches = caught_before + 1
            for i, catcher in enumerate(catchers):
                m = deep_copy(base) if i < len(catchers) - 1 else base
                m["error"] = dict(error)
                # The failing hop's depth, not 0: a loop through a catch must
                # still hit MAX_DEPTH and continue on the next turn.
                self._deliver(catcher, m, depth + 1)

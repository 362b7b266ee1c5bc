"""The one bidirectional stream from the host to a plugin process, on one
event loop: requests out (batched into one Batch per write), results and
node events (send, debug, status, log) in. ``runtime.plugin.host`` makes
one per process and loop.

No task reads or writes the stream. gRPC's reads and writes are coroutines;
this module takes each one's first step at once (a write's bytes leave in
it) and the next steps from done-callbacks of what it waits for, so that:

- a caller never waits for its frame's write to be confirmed, and a caller
  that is cancelled (a tool's timeout, a stopped run) cannot cancel the
  write or the read, which in grpc.aio cancels the whole stream and every
  other call on it;
- what is read is handled by a callback, whoever waits, so a node's events
  arrive while no call is in flight;
- one waiting call, the leader, is woken by the read itself (``_Peek``), in
  the loop turn in which its answer is read: the answer reaches the caller
  without the extra turn a reader task costs (task reads, sets the caller's
  future, the caller runs one turn later). The other calls in flight wait
  for their futures;
- a call alone writes its frame at once; calls made while others are in
  flight leave together, in one Batch at the end of the loop's turn, so
  that many calls in flight cost a few writes and reads, not one each.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import math
import subprocess
from typing import Any, get_args, get_type_hints

import grpc

from ..events import NodeStatus
from ..message import Message
from ..node import NodeConfigError
from ..node.blocking import runs_here
from . import wire
from .discovery import PluginError
from .pb import plugin_pb2 as pb
from .pb import plugin_pb2_grpc as pb_grpc

#: The host's logger: one name for all it logs about a plugin.
log = logging.getLogger("runtime.plugin.host")

K = pb.Frame
#: Frame kinds looked up once (an attribute of the message class is a
#: descriptor search each time).
_RESULT, _ERROR = K.RESULT, K.ERROR
#: The colors and states a node.status event may hold (runtime.events.NodeStatus).
STATUS_COLORS = frozenset(get_args(get_type_hints(NodeStatus)["color"]))
STATUS_STATES = frozenset(get_args(get_type_hints(NodeStatus)["state"]))


class _Peek:
    """What the leading call awaits: it wakes when the stream's pending read
    completes, in the same loop turn as the callback that handles what was
    read (registered on the read first, so it runs first), or when the
    connection wakes it (the call's timeout). It is a Future as far as a
    Task can tell (asyncio accepts any object with
    ``_asyncio_future_blocking``); cancelling the waiting task wakes it with
    CancelledError and leaves gRPC's read alone."""

    __slots__ = ("_loop", "_read", "own", "_wakeup", "_context", "_state",
                 "_asyncio_future_blocking")

    def __init__(self, loop: asyncio.AbstractEventLoop, read: asyncio.Future,
                 own: asyncio.Future) -> None:
        self._loop = loop
        self._read = read
        self.own = own  # the call's future, which its timeout settles
        self._wakeup: Any = None
        self._context: Any = None
        self._state = 0  # 0 waiting, 1 woken, 2 cancelled
        self._asyncio_future_blocking = False

    def __await__(self) -> Any:
        if not self._state:
            self._asyncio_future_blocking = True
            yield self
        return self.result()

    __iter__ = __await__

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._state != 0

    def cancelled(self) -> bool:
        return self._state == 2

    def result(self) -> None:
        if self._state == 2:
            raise asyncio.CancelledError()

    def exception(self) -> BaseException | None:
        return asyncio.CancelledError() if self._state == 2 else None

    def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
        # Only the task that awaits it calls this, once.
        self._wakeup, self._context = fn, context
        self._read.add_done_callback(self._fire, context=context)

    def remove_done_callback(self, fn: Any) -> int:
        if self._wakeup is None or fn != self._wakeup:
            return 0
        self._read.remove_done_callback(self._fire)
        self._wakeup = None
        return 1

    def _fire(self, _read: Any) -> None:
        if self._state:
            return
        self._state = 1
        # The task's own wakeup, now: this callback runs in the task's context.
        self._wakeup(self)

    def wake(self, cancelled: bool = False) -> bool:
        """Wake the task in the next turn (its call timed out, or the task
        is cancelled); False if it is awake already."""
        if self._state or self._wakeup is None:
            return False
        self._state = 2 if cancelled else 1
        self._read.remove_done_callback(self._fire)
        self._loop.call_soon(self._wakeup, self, context=self._context)
        return True

    def cancel(self, msg: Any = None) -> bool:
        return self.wake(cancelled=True)


# The process and node are host.PluginProcess and host.RemoteNode, typed Any:
# host imports this module, so naming them here would make an import cycle.
class _Connection:
    """The one bidirectional stream to a plugin process, on one event loop:
    requests out (batched), results and node events in."""

    def __init__(self, process: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.process = process
        self.loop = loop
        self.channel = grpc.aio.insecure_channel(process.address,
                                                 options=wire.channel_options())
        self.stub = pb_grpc.PluginStub(self.channel)
        self.metadata = process.metadata
        self.call = self.stub.Channel(metadata=self.metadata)
        self.pending: dict[int, asyncio.Future] = {}
        #: The frames of the next write, made in place in its Batch.
        self.batch = pb.Batch()
        self.frames = self.batch.frames
        self.writing = False
        self.flush_soon = False
        self.lasting = 0  # requests in flight made with lead=False
        self.alive = True
        self.closed = False
        self.ids = itertools.count(1)
        #: The context the stream's callbacks run in (what a reader task
        #: made here would have had): a node's events are handled in it.
        self.context = contextvars.copy_context()
        #: The future the pending read waits for (None: no read waiting).
        self.waiting: asyncio.Future | None = None
        self.leader: _Peek | None = None  # the call that waits on the read itself
        #: When each call in flight that has a timeout must be answered (loop
        #: time); one timer for them all, set for the earliest.
        self.deadlines: dict[int, float] = {}
        self.sweep: asyncio.TimerHandle | None = None
        self.sweep_at = math.inf
        self._read_step: Any = self.call.read()
        self._write_step: Any = None
        self.keeper = loop.create_task(self._keep())
        self._read_on()

    def usable(self) -> bool:
        """Alive, and its loop is the one running the caller."""
        return self.alive and runs_here(self.loop)

    async def _keep(self) -> None:
        """Lives as long as the stream. When the loop ends first (its tasks
        are cancelled), the stream ends with it, as a reader task's would:
        a gRPC call left open on a closed loop fails when collected."""
        try:
            await self.loop.create_future()
        finally:
            if not self.closed:
                self.call.cancel()
                self._lost(reap=False)

    # -- reading ----------------------------------------------------------------
    def _read_on(self, _done: Any = None) -> None:
        """The read's next step: handle a batch read and start the next
        read, until one has to wait; then go on when what it waits for is
        done."""
        while True:
            try:
                waiting = self._read_step.send(None)
            except StopIteration as stop:
                batch = stop.value
            except grpc.aio.AioRpcError as exc:
                log.debug("plugin %s: stream ended: %s", self.process.name, exc.code().name)
                self._lost()
                return
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - no call may hang
                log.debug("plugin %s: read failed", self.process.name, exc_info=True)
                self._lost()
                return
            else:
                self.waiting = self._wait(waiting, self._read_on)
                return
            self.waiting = None
            if batch is grpc.aio.EOF:
                self._lost()
                return
            try:
                for frame in batch.frames:
                    self._on_frame(frame)
            except Exception:  # noqa: BLE001 - a bad frame must not leave calls hanging
                log.exception("plugin %s: bad frame", self.process.name)
                self._lost()
                return
            self._read_step = self.call.read()

    def _wait(self, waiting: Any, then: Any) -> asyncio.Future | None:
        """Call ``then`` when what a step of a read or write yielded is done."""
        if waiting is None:  # a bare yield: go on in the next turn
            self.loop.call_soon(then, None, context=self.context)
            return None
        waiting._asyncio_future_blocking = False
        waiting.add_done_callback(then, context=self.context)
        return waiting

    def _lost(self, reap: bool = True) -> None:
        self.alive = False
        if self.closed:
            return
        self.closed = True
        if not self.keeper.done():
            self.keeper.cancel()
        process = self.process
        # Give a dying process a moment to be reaped, so the error says how it ended.
        if reap and process.proc is not None:
            try:
                process.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        if process.conn is self:
            process.lost(self)
        why = process.exit_text() or " (its connection was lost)"
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(PluginError(
                    f"plugin '{process.name}' stopped during the call{why}; it is started "
                    "again for the next call"))
        self.pending.clear()
        self._take()
        if self.sweep is not None:
            self.sweep.cancel()
        self.loop.create_task(self.channel.close())

    def _on_frame(self, frame: Any) -> None:
        kind = frame.kind
        if kind == _RESULT or kind == _ERROR:
            fut = self.pending.pop(frame.id, None)
            if fut is not None and not fut.done():
                fut.set_result(frame)
            if kind == _RESULT:
                self.process.failures = 0
            return
        node = self.process.instances.get(frame.instance)
        if node is None:
            return  # a late event of a closed instance
        data = wire.loads(frame.data) if frame.data else {}
        if kind == K.SEND:
            if isinstance(data, dict):
                node.send(Message(data), frame.port or "out")
        elif kind == K.DEBUG:
            node.debug(data.get("value"), {"_msgid": str(data.get("msgid", ""))})
        elif kind == K.STATUS:
            # A plugin may send any text; an event must hold only what every
            # reader (a queue follower, the history) reads back.
            color, state = str(data.get("color", "")), str(data.get("state", "idle"))
            node.show_status(str(data.get("text", ""))[:500],
                             color if color in STATUS_COLORS else "",
                             state if state in STATUS_STATES else "idle")
        elif kind == K.LOG:
            level = str(data.get("level", "info")).lower()
            if level not in ("debug", "info", "warning", "error"):
                level = "info"
            node.log(str(data.get("text", ""))[:10_000], level)

    # -- requests --------------------------------------------------------------
    async def request(self, kind: int, instance: str, data: bytes,
                      timeout: float | None, lead: bool = True) -> Any:
        """Send one frame and wait for its answer (a RESULT or ERROR frame).
        ``lead``: a call expected to end soon, which may wait on the read
        itself; a source's GENERATE, which lasts the run, is not one, and
        is not counted as a call in flight when deciding to batch."""
        if not self.alive:
            raise PluginError(f"plugin '{self.process.name}' is not running")
        id = next(self.ids)
        fut = self.loop.create_future()
        self.pending[id] = fut
        self.frames.add(kind=kind, id=id, instance=instance, data=data)
        if not self.writing:
            if len(self.pending) - self.lasting <= 1:
                self._write()  # the only call: its bytes leave now
            elif not self.flush_soon:
                # Others wait too: the frames of every call made in this
                # turn of the loop leave in one Batch, at its end. Answers
                # then come back batched as well, instead of each call of
                # 16 in flight costing a write, a read and a wakeup on
                # both sides (16 in flight: ~1 write a call -> 0.12).
                self.flush_soon = True
                self.loop.call_soon(self._flush_soon, context=self.context)
        if not lead:
            self.lasting += 1
        if timeout:
            at = self.loop.time() + timeout
            self.deadlines[id] = at
            if at < self.sweep_at:
                self._arm(at)
        try:
            if lead and self.leader is None and self.waiting is not None:
                # Woken by the read that brings the answer, in its turn. Once
                # only: a call whose answer was not in that batch is a slow
                # one, and leaves the lead to the next call.
                self.leader = peek = _Peek(self.loop, self.waiting, fut)
                try:
                    await peek
                finally:
                    self.leader = None
            return await fut
        except asyncio.CancelledError:
            # A tool timeout or the run stopping: the plugin stops working on it.
            if self.pending.pop(id, None) is not None and self.alive:
                self._send_cancel(id)
            raise
        except TimeoutError:
            self.pending.pop(id, None)
            if self.alive:
                self._send_cancel(id)
            raise PluginError(f"plugin '{self.process.name}' did not answer within "
                              f"{timeout:g} s") from None
        finally:
            if timeout:
                del self.deadlines[id]
            if not lead:
                self.lasting -= 1

    # -- timeouts ----------------------------------------------------------------
    def _arm(self, at: float) -> None:
        if self.sweep is not None:
            self.sweep.cancel()
        self.sweep_at = at
        self.sweep = self.loop.call_at(at, self._expire_due)

    def _expire_due(self) -> None:
        """Fail each call past its deadline with TimeoutError; set the timer
        for the next deadline. One timer instead of one per call: most calls
        end long before their timeout, and a timer made and cancelled for
        each costs them."""
        self.sweep, self.sweep_at = None, math.inf
        now = self.loop.time() + 0.001
        earliest = math.inf
        for id, at in self.deadlines.items():
            if at > now:
                earliest = min(earliest, at)
                continue
            fut = self.pending.get(id)
            if fut is not None and not fut.done():
                fut.set_exception(TimeoutError())
                leader = self.leader
                if leader is not None and leader.own is fut:
                    leader.wake()
        if earliest < math.inf:
            self._arm(earliest)

    def _flush_soon(self) -> None:
        self.flush_soon = False
        if self.frames and not self.writing and self.alive:
            self._write()

    def _send_cancel(self, id: int) -> None:
        self.frames.add(kind=K.CANCEL, id=id)
        if not self.writing:
            self._write()

    # -- writing -----------------------------------------------------------------
    def _write(self) -> None:
        """Write the frames queued so far as one Batch; its bytes leave in
        this first step. Frames queued meanwhile go in the next write, made
        when this one is done."""
        self.writing = True
        self._write_step = self.call.write(self._take())
        self._write_on()

    def _take(self) -> Any:
        batch = self.batch
        self.batch = pb.Batch()
        self.frames = self.batch.frames
        return batch

    def _write_on(self, _done: Any = None) -> None:
        while True:
            try:
                waiting = self._write_step.send(None)
            except StopIteration:
                pass
            except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - the read sees it too
                log.debug("plugin %s: write failed: %s", self.process.name, exc)
                self._write_step = None
                self.writing = False
                return
            else:
                self._wait(waiting, self._write_on)
                return
            if not self.frames or not self.alive:
                self._write_step = None
                self.writing = False
                return
            self._write_step = self.call.write(self._take())

    async def create(self, node: Any) -> None:
        reply = await self._unary(self.stub.Create, pb.CreateRequest(
            instance=node._instance, type=node.spec.type, name=node.name, run=node._run,
            params_json=wire.dumps(node._settings), outputs_json=wire.dumps(node._outputs)),
            self.process.manifest.start_timeout)
        if reply.error:
            raise NodeConfigError(reply.error)

    async def close_instance(self, instance: str) -> None:
        reply = await self._unary(self.stub.Close, pb.CloseRequest(instance=instance), 10.0)
        if reply.error:
            log.warning("plugin %s: closing %s: %s", self.process.name, instance, reply.error)

    async def health(self) -> Any:
        return await self._unary(self.stub.Health, pb.HealthRequest(), 5.0)

    async def _unary(self, method: Any, request: Any, timeout: float) -> Any:
        try:
            return await method(request, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise PluginError(f"plugin '{self.process.name}': {exc.code().name}: "
                              f"{exc.details()}") from None

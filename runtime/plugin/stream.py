"""The one bidirectional stream from the host to a plugin process, on one
event loop: requests out (batched into one Batch per write), results and
node events (send, debug, status, log) in. ``runtime.plugin.host`` makes
one per process and loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import subprocess
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

import grpc

from ..events import NodeStatus
from ..message import Message
from ..node import NodeConfigError
from . import wire
from .discovery import PluginError
from .pb import plugin_pb2 as pb
from .pb import plugin_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from .host import PluginProcess, RemoteNode

#: The host's logger: one name for all it logs about a plugin.
log = logging.getLogger("runtime.plugin.host")

K = pb.Frame
#: The colors and states a node.status event may hold (runtime.events.NodeStatus).
STATUS_COLORS = frozenset(get_args(get_type_hints(NodeStatus)["color"]))
STATUS_STATES = frozenset(get_args(get_type_hints(NodeStatus)["state"]))


class _Connection:
    """The one bidirectional stream to a plugin process, on one event loop:
    requests out (batched), results and node events in."""

    def __init__(self, process: PluginProcess, loop: asyncio.AbstractEventLoop) -> None:
        self.process = process
        self.loop = loop
        self.channel = grpc.aio.insecure_channel(process.address,
                                                 options=wire.channel_options())
        self.stub = pb_grpc.PluginStub(self.channel)
        self.metadata = process.metadata
        self.call = self.stub.Channel(metadata=self.metadata)
        self.pending: dict[int, asyncio.Future] = {}
        self.frames: list = []
        self.writing = False
        self.kicked = False
        self.alive = True
        self.ids = itertools.count(1)
        self.reader = loop.create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                batch = await self.call.read()
                if batch is grpc.aio.EOF:
                    break
                for frame in batch.frames:
                    self._on_frame(frame)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            log.debug("plugin %s: stream ended: %s", self.process.name, exc.code().name)
        except Exception:  # noqa: BLE001 - a bad frame must not leave calls hanging
            log.exception("plugin %s: bad frame", self.process.name)
        finally:
            self._lost()

    def _lost(self) -> None:
        self.alive = False
        process = self.process
        # Give a dying process a moment to be reaped, so the error says how it ended.
        if process.proc is not None:
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
        self.loop.create_task(self.channel.close())

    def _on_frame(self, frame: Any) -> None:
        kind = frame.kind
        if kind == K.RESULT or kind == K.ERROR:
            fut = self.pending.pop(frame.id, None)
            if fut is not None and not fut.done():
                fut.set_result(frame)
            if kind == K.RESULT:
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
                      timeout: float | None) -> Any:
        if not self.alive:
            raise PluginError(f"plugin '{self.process.name}' is not running")
        id = next(self.ids)
        fut = self.loop.create_future()
        self.pending[id] = fut
        self.frames.append(K(kind=kind, id=id, instance=instance, data=data))
        if not self.writing:
            await self.flush()
        timer = self.loop.call_later(timeout, _expire, fut) if timeout else None
        try:
            return await fut
        except asyncio.CancelledError:
            # A tool timeout or the run stopping: the plugin stops working on it.
            if self.pending.pop(id, None) is not None and self.alive:
                self.frames.append(K(kind=K.CANCEL, id=id))
                self._kick()
            raise
        except TimeoutError:
            self.pending.pop(id, None)
            if self.alive:
                self.frames.append(K(kind=K.CANCEL, id=id))
                self._kick()
            raise PluginError(f"plugin '{self.process.name}' did not answer within "
                              f"{timeout:g} s") from None
        finally:
            if timer is not None:
                timer.cancel()

    def _kick(self) -> None:
        if not self.writing and not self.kicked:
            self.kicked = True
            self.loop.create_task(self.flush())

    async def flush(self) -> None:
        self.kicked = False
        if self.writing:
            return
        self.writing = True
        try:
            while self.frames and self.alive:
                frames, self.frames = self.frames, []
                await self.call.write(pb.Batch(frames=frames))
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError) as exc:
            log.debug("plugin %s: write failed: %s", self.process.name, exc)
        finally:
            self.writing = False

    async def create(self, node: RemoteNode) -> None:
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


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())

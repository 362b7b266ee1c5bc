"""The Python SDK's side of a plugin: an ordinary node package (``@node``
classes, unchanged) served in its own process.

    python -m runtime.plugin serve PACKAGE

imports PACKAGE, listens on a Unix socket in a private folder, prints the
handshake line and answers the host until its stdin closes (the host is
gone) or it gets SIGTERM. Params arrive resolved by the host (scopes,
secrets, validated tool arguments); ``param.get(msg)`` returns them, so the
node's code cannot tell it runs out of process.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import grpc

from ..message import Message
from ..node import DECLARED, DROP, BoundParam, Node, NodeConfigError, run_in_thread
from ..spec import ParamValue, Scope
from . import wire
from .pb import plugin_pb2 as pb
from .pb import plugin_pb2_grpc as pb_grpc

log = logging.getLogger("switchboard.plugin")

K = pb.Frame
_RESULT, _ERROR = K.RESULT, K.ERROR
#: The params the host resolved for the message being handled (per task).
_RESOLVED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("resolved", default=None)
#: The call being handled, so that a send() from it names it.
_CALL: contextvars.ContextVar[int] = contextvars.ContextVar("call", default=0)
_MISSING = object()
#: Most node instances one plugin process holds (every run's nodes together).
MAX_INSTANCES = 10_000


class _HostParam(BoundParam):
    """A param whose message, AI and secret values come from the host."""

    __slots__ = ()

    def get(self, msg: dict | None = None, default: Any = _MISSING) -> Any:
        resolved = _RESOLVED.get()
        if resolved is not None and self.name in resolved:
            return resolved[self.name]
        if self.scope is Scope.CUSTOM and not self.spec.secret:
            return super().get(msg) if default is _MISSING else super().get(msg, default)
        return self.default if default is _MISSING else default


def package_classes(module: str) -> list[type[Node]]:
    """The ``@node`` classes that ``module`` (and its submodules) declare."""
    importlib.import_module(module)
    return [cls for cls in DECLARED.values()
            if cls.__module__ == module or cls.__module__.startswith(module + ".")]


class _Services:
    """What a node asks of its run (runtime.node.NodeServices), answered
    by frames to the host; run resources are kept here, per run."""

    engine = None

    def __init__(self, plugin: PluginServer, instance: str, run: str) -> None:
        self.plugin = plugin
        self.instance = instance
        self.run = run

    def _frame(self, kind: int, data: Any, port: str = "", id: int = 0) -> None:
        self.plugin.outbox.put(kind, id, wire.dumps(data), self.instance, port)

    def send(self, msg: dict, port: str = "out") -> None:
        self._frame(K.SEND, msg, port, _CALL.get())

    def status(self, text: str, color: str = "", state: str = "idle") -> None:
        self._frame(K.STATUS, {"text": text, "color": color, "state": state})

    def debug(self, value: Any, msg: dict | None = None) -> None:
        self._frame(K.DEBUG, {"value": value, "msgid": (msg or {}).get("_msgid", "")})

    def log(self, text: str, level: str = "info") -> None:
        self._frame(K.LOG, {"text": text, "level": level})

    def resource(self, key: str, make: Any, close: Any = None) -> Any:
        store = self.plugin.resources.setdefault(self.run, ({}, []))
        values, closers = store
        if key not in values:
            values[key] = make()
            if close is not None:
                closers.append((key, close))
        return values[key]


class _Instance:
    __slots__ = ("node", "is_async", "blocking", "sem", "run")

    def __init__(self, node: Node, run: str) -> None:
        import inspect

        self.node = node
        self.run = run
        self.is_async = inspect.iscoroutinefunction(type(node).on_message)
        self.blocking = not self.is_async and type(node).blocking
        n = type(node).concurrency
        self.sem = asyncio.Semaphore(n) if self.is_async and n else None


class _Outbox:
    """Frames to the host, packed into one Batch per write. The read loop
    flushes after each batch it handled; a frame put by a task while no
    write is going on starts a flush of its own.

    Frames are made in place in the Batch of the next write: a Frame made
    apart and then put in a Batch is copied into it (with protobuf's upb,
    ``Batch(frames=[Frame(...)])`` costs about three times ``frames.add``)."""

    def __init__(self) -> None:
        self._next()
        self.context: Any = None
        self.writing = False
        self.kicked = False
        self.reading = False  # the read loop is dispatching and flushes after

    def _next(self) -> Any:
        """The Batch filled so far; a new one takes the frames that follow."""
        batch = getattr(self, "batch", None)
        self.batch = pb.Batch()
        self.frames = self.batch.frames
        return batch

    def put(self, kind: int, id: int, data: bytes, instance: str = "", port: str = "") -> None:
        self.frames.add(kind=kind, id=id, instance=instance, port=port, data=data)
        if not (self.writing or self.kicked or self.reading) and self.context is not None:
            self.kicked = True
            asyncio.get_running_loop().create_task(self.flush())

    async def flush(self) -> None:
        self.kicked = False
        if self.writing or self.context is None:
            return
        self.writing = True
        try:
            while self.frames:
                await self.context.write(self._next())
        except Exception:  # noqa: BLE001 - the stream is gone; the host restarts us
            log.debug("could not write to the host", exc_info=True)
            self._next()
        finally:
            self.writing = False


class PluginServer(pb_grpc.PluginServicer):
    def __init__(self, name: str, version: str, classes: list[type[Node]], token: str) -> None:
        self.name = name
        self.version = version
        self.classes = {c.spec.type: c for c in classes}
        self.token = token
        self.instances: dict[str, _Instance] = {}
        self.calls: dict[int, asyncio.Task] = {}
        self.resources: dict[str, tuple[dict, list]] = {}
        self.outbox = _Outbox()

    async def _auth(self, context: Any) -> None:
        md = dict(context.invocation_metadata() or ())
        if not secrets.compare_digest(str(md.get(wire.TOKEN_KEY, "")), self.token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a wrong or missing token")

    # -- unary calls ---------------------------------------------------------
    async def Describe(self, request: Any, context: Any) -> Any:
        await self._auth(context)
        specs = [c.spec.model_dump(mode="json") for c in self.classes.values()]
        return pb.DescribeReply(protocol=wire.PROTOCOL, name=self.name, version=self.version,
                                language="python", specs_json=wire.dumps(specs))

    async def Create(self, request: Any, context: Any) -> Any:
        await self._auth(context)
        cls = self.classes.get(request.type)
        if cls is None:
            return pb.CreateReply(error=f"this package has no node type {request.type!r}")
        if len(self.instances) >= MAX_INSTANCES:
            return pb.CreateReply(error=f"more than {MAX_INSTANCES} node instances")
        try:
            raw = wire.loads(request.params_json or b"{}")
            params = {k: ParamValue.model_validate(v) for k, v in raw.items()}
            outputs = wire.loads(request.outputs_json or b"{}")
            services = _Services(self, request.instance, request.run)
            node = cls(request.instance, request.name, params, outputs, services)
            for p in cls.spec.params:
                node.__dict__[p.name] = _HostParam(p, params.get(p.name))
            await node.start()
        except Exception as exc:  # noqa: BLE001 - told to the host, which names the node
            log.debug("create %s failed", request.type, exc_info=True)
            return pb.CreateReply(error=_error_text(exc))
        self.instances[request.instance] = _Instance(node, request.run)
        return pb.CreateReply()

    async def Close(self, request: Any, context: Any) -> Any:
        await self._auth(context)
        inst = self.instances.pop(request.instance, None)
        error = ""
        if inst is not None:
            try:
                await inst.node.close()
            except Exception as exc:  # noqa: BLE001
                error = _error_text(exc)
            if not any(i.run == inst.run for i in self.instances.values()):
                await self._close_run(inst.run)
        return pb.CloseReply(error=error)

    async def _close_run(self, run: str) -> None:
        import inspect

        values, closers = self.resources.pop(run, ({}, []))
        for key, close in reversed(closers):
            try:
                result = close(values.get(key))
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - one bad closer must not keep the others open
                log.warning("could not close the run's %s", key, exc_info=True)

    async def Health(self, request: Any, context: Any) -> Any:
        await self._auth(context)
        return pb.HealthReply(status="serving", instances=len(self.instances),
                              in_flight=len(self.calls), pid=os.getpid())

    # -- the stream ----------------------------------------------------------
    async def Channel(self, request_iterator: Any, context: Any) -> None:
        await self._auth(context)
        # Answers go back on the stream their call came in on; what a node
        # sends of itself (a source's messages, status) on the newest one.
        outbox = _Outbox()
        outbox.context = context
        self.outbox = outbox
        mine: set[int] = set()
        try:
            while True:
                batch = await context.read()
                if batch is grpc.aio.EOF:
                    break
                outbox.reading = True
                try:
                    for frame in batch.frames:
                        self._dispatch(frame, outbox, mine)
                finally:
                    outbox.reading = False
                if outbox.frames and not outbox.writing:
                    await outbox.flush()
        finally:
            outbox.context = None
            for id in mine:
                task = self.calls.pop(id, None)
                if task is not None:
                    task.cancel()

    def _dispatch(self, frame: Any, out: _Outbox, mine: set[int]) -> None:
        kind = frame.kind
        if kind == K.CALL:
            inst = self.instances.get(frame.instance)
            if inst is None:
                self._error(out, frame.id, f"no node instance {frame.instance!r} (not created)")
                return
            try:
                data = wire.loads(frame.data)
                msg = Message(data["msg"])
                params = data.get("params") or {}
            except Exception:  # noqa: BLE001
                self._error(out, frame.id, "a malformed CALL frame")
                return
            token = _RESOLVED.set(params)
            call = _CALL.set(frame.id)
            try:
                if inst.is_async or inst.blocking:
                    # The task copies the context: it sees this call's params.
                    self.calls[frame.id] = asyncio.get_running_loop().create_task(
                        self._call_async(inst, frame.id, msg, out))
                    mine.add(frame.id)
                    return
                try:
                    result = inst.node.on_message(msg)
                except Exception as exc:  # noqa: BLE001 - reported to the host
                    self._failed(out, frame.id, exc)
                    return
            finally:
                _RESOLVED.reset(token)
                _CALL.reset(call)
            self._result(out, frame.id, msg, result)
        elif kind == K.CANCEL:
            task = self.calls.pop(frame.id, None)
            if task is not None:
                task.cancel()
        elif kind == K.GENERATE:
            inst = self.instances.get(frame.instance)
            if inst is None:
                self._error(out, frame.id, f"no node instance {frame.instance!r} (not created)")
                return
            call = _CALL.set(frame.id)
            try:
                self.calls[frame.id] = asyncio.get_running_loop().create_task(
                    self._generate(inst, frame.id, out))
                mine.add(frame.id)
            finally:
                _CALL.reset(call)
        else:
            self._error(out, frame.id, f"unknown frame kind {kind}")

    async def _call_async(self, inst: _Instance, id: int, msg: Message, out: _Outbox) -> None:
        try:
            if inst.blocking:
                result = await run_in_thread(inst.node.on_message, msg)
            elif inst.sem is not None:
                async with inst.sem:
                    result = await inst.node.on_message(msg)
            else:
                result = await inst.node.on_message(msg)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - reported to the host
            self._failed(out, id, exc)
        else:
            self._result(out, id, msg, result)
        finally:
            self.calls.pop(id, None)

    async def _generate(self, inst: _Instance, id: int, out: _Outbox) -> None:
        try:
            await inst.node.generate()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001
            self._failed(out, id, exc)
        else:
            out.put(_RESULT, id, b'{"msg":{},"ports":[]}')
        finally:
            self.calls.pop(id, None)

    def _result(self, out: _Outbox, id: int, msg: dict, result: Any) -> None:
        if result is None:
            ports: Any = None
        elif result is DROP:
            ports = []
        elif isinstance(result, str):
            ports = [result]
        elif isinstance(result, (list, tuple)) and all(type(p) is str for p in result):
            ports = list(result)
        else:
            self._error(out, id, f"on_message returned {type(result).__name__}; expected "
                                 "None, DROP, a port name or a list of port names",
                        type_="TypeError")
            return
        out.put(_RESULT, id, wire.dumps({"msg": msg, "ports": ports}))

    def _failed(self, out: _Outbox, id: int, exc: BaseException) -> None:
        log.debug("call %d failed", id, exc_info=exc)
        self._error(out, id, _error_text(exc), config=isinstance(exc, NodeConfigError),
                    type_=type(exc).__name__)

    def _error(self, out: _Outbox, id: int, message: str, *, config: bool = False,
               type_: str = "PluginError") -> None:
        out.put(_ERROR, id, wire.dumps({"message": message, "config": config, "type": type_}))


def _error_text(exc: BaseException) -> str:
    return (str(exc).strip() or type(exc).__name__)[:2000]


def _package_version(module: str) -> str:
    try:
        return version(module.split(".")[0])
    except PackageNotFoundError:
        return "0"


def _watch_parent() -> None:
    """Exit when stdin reaches EOF: the host closed it or died (even by
    kill -9), so a plugin never outlives its host."""
    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)

    threading.Thread(target=watch, name="switchboard-plugin-parent", daemon=True).start()


async def serve(module: str, name: str | None = None) -> None:
    classes = package_classes(module)
    if not classes:
        raise SystemExit(f"{module}: declares no @node classes")
    # What is loaded now lives as long as the process: out of the collector's
    # sight, so that a collection during a call has less to walk.
    import gc

    gc.collect()
    gc.freeze()
    token = secrets.token_hex(16)
    folder = tempfile.mkdtemp(prefix="switchboard-plugin-")  # mode 0700: only this user
    address = f"unix:{os.path.join(folder, 'plugin.sock')}"
    server = grpc.aio.server(options=wire.channel_options())
    plugin = PluginServer(name or module.split(".")[-1], _package_version(module), classes, token)
    pb_grpc.add_PluginServicer_to_server(plugin, server)
    server.add_insecure_port(address)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _watch_parent()
    sys.stdout.write(wire.handshake_line(address, token, os.getpid()) + "\n")
    sys.stdout.flush()
    # Nothing else may go to stdout: a node's print() lands in stderr.
    sys.stdout = sys.stderr
    try:
        await stop.wait()
    finally:
        await server.stop(0.5)
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m runtime.plugin",
                                description="Serve a node package as a Switchboard plugin.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve PACKAGE's nodes over gRPC (started by the host)")
    s.add_argument("package", help="the module that declares the nodes, e.g. nodes.http")
    s.add_argument("--name", help="the plugin's name (default: the module's last part)")
    args = p.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SWITCHBOARD_PLUGIN_LOG", "WARNING"),
                        stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        asyncio.run(serve(args.package, args.name))
    except ImportError as exc:
        print(f"cannot import node package {args.package!r}: {exc}", file=sys.stderr)
        return 3
    return 0

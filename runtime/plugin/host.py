"""The runtime's side of plugins: start them, talk to them.

Plugin packages are found by ``runtime.plugin.discovery`` (its names are
re-exported here). A plugin's process is started on first use; its specs
are cached, so listing the catalog starts nothing. Each of its node types
becomes a ``RemoteNode`` subclass: a proxy with the interface of a local
node, so that the engine, the tool bridge and the designer cannot tell the
difference. Scope resolution, secrets and validation of tool arguments
stay here.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, ClassVar

import grpc
from pydantic import ValidationError

from ..node import DROP, Node, NodeConfigError, redact
from ..paths import data_dir
from ..spec import NodeSpec, Scope
from . import wire
from .discovery import (  # noqa: F401 - re-exported: callers know them as host.*
    ENTRY_POINT_GROUP,
    MANIFEST,
    MAX_PLUGINS,
    Plugin,
    PluginError,
    PluginManifest,
    PluginNeedsSetup,
    find_plugins,
    plugin_folders,
    python_plugin,
    read_manifest,
    setup_needed,
)
from .pb import plugin_pb2 as pb
from .pb import plugin_pb2_grpc as pb_grpc
from .stream import STATUS_COLORS, STATUS_STATES, _Connection  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

K = pb.Frame
_CALL, _ERROR = K.CALL, K.ERROR
_MISSING = object()
#: Longest a restart waits after repeated crashes.
MAX_BACKOFF = 10.0
#: Lines of a plugin's stderr kept to explain why it failed.
STDERR_LINES = 20
#: Most node types one plugin may declare.
MAX_SPECS = 1000
#: Files looked at to tell whether a plugin changed since its specs were cached.
FINGERPRINT_FILES = 2000


# -- the process -------------------------------------------------------------
class PluginProcess:
    """One running (or not yet, or crashed) plugin process, its connection
    on the current event loop, and the live node instances it serves."""

    def __init__(self, plugin: Plugin) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self.manifest = plugin.manifest
        self.proc: subprocess.Popen | None = None
        self.address = ""
        self.token = ""
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.conn: _Connection | None = None
        self.instances: dict[str, RemoteNode] = {}
        self.failures = 0  # crashes since the last answered call
        self.failed_at = 0.0
        self.starts = 0
        self._lock = threading.Lock()
        self._alocks: dict[int, asyncio.Lock] = {}

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and bool(self.token)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- starting --------------------------------------------------------------
    def start(self) -> None:
        """Start the process and shake hands (blocking, up to the manifest's
        start_timeout); PluginError naming the plugin and its stderr if it
        cannot."""
        with self._lock:
            if self.alive:
                return
            self._kill()
            self._spawn()

    def _spawn(self) -> None:
        m = self.manifest
        env = {**os.environ, **m.env, wire.PROTO_ENV: str(wire.PROTO_PATH),
               "PYTHONUNBUFFERED": "1"}
        cwd = self.plugin.folder
        command = list(m.command)
        if command[0] in ("python", "python3"):
            # The interpreter Switchboard runs in: it has runtime.plugin and
            # the package's dependencies, where a bare "python" may not.
            command[0] = sys.executable
        elif cwd is not None and not os.path.isabs(command[0]) and (cwd / command[0]).exists():
            command[0] = str(cwd / command[0])
        npm = setup_needed(cwd)
        if npm:
            raise PluginNeedsSetup(f"plugin '{self.name}' needs its npm packages: run `{npm}` "
                                   f"in {cwd}")
        tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.stderr_tail = tail
        try:
            proc = subprocess.Popen(
                command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise PluginError(f"plugin '{self.name}' could not start: {command[0]}: "
                              f"{exc.strerror or exc}") from None
        self.proc = proc
        self.starts += 1
        stderr_done = threading.Thread(target=_read_stderr, args=(self.name, proc, tail),
                                       name=f"plugin-{self.name}-stderr", daemon=True)
        stderr_done.start()
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=_read_stdout, args=(self.name, proc, lines),
                         name=f"plugin-{self.name}-stdout", daemon=True).start()
        try:
            line = lines.get(timeout=m.start_timeout)
        except queue.Empty:
            self._kill()
            raise self._start_error(f"sent no handshake within {m.start_timeout:g} s",
                                    stderr_done) from None
        if not line:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            self._kill()
            raise self._start_error(f"exited{_exit_text(code)} before its handshake",
                                    stderr_done)
        try:
            self.address, self.token = wire.parse_handshake(line)
        except wire.HandshakeError as exc:
            self._kill()
            raise self._start_error(f"did not start: {exc}", stderr_done) from None
        log.info("plugin %s started (pid %d, %s)", self.name, proc.pid, self.address)

    def _start_error(self, what: str, stderr_done: threading.Thread) -> PluginError:
        stderr_done.join(timeout=2)  # the last lines of a process that just ended
        text = f"plugin '{self.name}' {what}"
        if self.stderr_tail:
            text += "; its last output:\n" + "\n".join(self.stderr_tail)
        return PluginError(redact(text))

    def exit_text(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        return _exit_text(code) if code is not None else ""

    # -- stopping ----------------------------------------------------------------
    def stop(self) -> None:
        with self._lock:
            self._kill()

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        self.token = ""
        if self.conn is not None:
            self.conn.alive = False
            self.conn = None
        if proc is None:
            return
        try:
            proc.stdin.close()  # type: ignore[union-attr] - the plugin exits on EOF
        except OSError:
            pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=2)
            except (ProcessLookupError, PermissionError):
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=2)
        else:
            # Its children, if it left any in its group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- describing ----------------------------------------------------------------
    def describe(self) -> tuple[str, list[NodeSpec]]:
        """(version, specs) from the running plugin (started if need be)."""
        self.start()
        channel = grpc.insecure_channel(self.address, options=wire.channel_options())
        try:
            reply = pb_grpc.PluginStub(channel).Describe(
                pb.DescribeRequest(protocol=wire.PROTOCOL), metadata=self.metadata,
                timeout=self.manifest.start_timeout)
        except grpc.RpcError as exc:
            raise PluginError(f"plugin '{self.name}' did not describe itself: "
                              f"{exc.code().name}: {exc.details()}") from None
        finally:
            channel.close()
        if reply.protocol != wire.PROTOCOL:
            raise PluginError(f"plugin '{self.name}' speaks protocol {reply.protocol}; "
                              f"this Switchboard speaks {wire.PROTOCOL}")
        return reply.version or self.manifest.version, parse_specs(self.name, reply.specs_json)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((wire.TOKEN_KEY, self.token),)

    # -- connecting ------------------------------------------------------------------
    async def connection(self) -> _Connection:
        """The stream on the running loop, (re)starting the process if it is
        not running: after a crash, with backoff, and with the live node
        instances created again."""
        loop = asyncio.get_running_loop()
        conn = self.conn
        if conn is not None and conn.alive and conn.loop is loop:
            return conn
        lock = self._alocks.get(id(loop))
        if lock is None:
            lock = self._alocks[id(loop)] = asyncio.Lock()
        async with lock:
            conn = self.conn
            if conn is not None and conn.alive and conn.loop is loop:
                return conn
            restarted = False
            if not self.alive:
                delay = self.backoff() - (time.monotonic() - self.failed_at)
                if delay > 0:
                    log.info("plugin %s: restarting in %.2f s", self.name, delay)
                    await asyncio.sleep(delay)
                restarted = self.starts > 0
                try:
                    await asyncio.to_thread(self.start)
                except PluginError:
                    self.failures += 1
                    self.failed_at = time.monotonic()
                    raise
            if conn is not None and conn.loop is not loop:
                conn.alive = False
            self.conn = conn = _Connection(self, loop)
            if restarted:
                for node in list(self.instances.values()):
                    try:
                        await conn.create(node)
                    except PluginError as exc:
                        log.warning("plugin %s: could not create %s again: %s", self.name,
                                    node.id, exc)
            return conn

    def backoff(self) -> float:
        if not self.failures:
            return 0.0
        return min(MAX_BACKOFF, 0.2 * 2 ** (self.failures - 1))

    def lost(self, conn: _Connection) -> None:
        """The stream broke. If the process died, that is a crash: the next
        call restarts it, after a backoff that grows with each crash."""
        if self.proc is not None and self.proc.poll() is not None:
            log.warning("plugin %s stopped%s", self.name, self.exit_text())
            self.failures += 1
            self.failed_at = time.monotonic()
            self.token = ""


def _exit_text(code: int | None) -> str:
    if code is None:
        return ""
    if code < 0:
        try:
            return f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f" (killed by signal {-code})"
    return f" with code {code}"


def _read_stderr(name: str, proc: subprocess.Popen, tail: deque[str]) -> None:
    for raw in iter(lambda: proc.stderr.readline(64 * 1024), b""):  # type: ignore[union-attr]
        line = redact(raw[:2000].decode("utf-8", "replace").rstrip())
        tail.append(line)
        log.debug("plugin %s: %s", name, line)


def _read_stdout(name: str, proc: subprocess.Popen, lines: queue.Queue) -> None:
    """The handshake line, then anything else the plugin prints (which it
    should not), logged, so that a full pipe never blocks it."""
    stdout = proc.stdout
    assert stdout is not None
    lines.put(stdout.readline(wire.MAX_HANDSHAKE_BYTES))
    extra = 0
    for raw in iter(lambda: stdout.readline(64 * 1024), b""):
        extra += 1
        if extra <= STDERR_LINES:  # a chatty plugin must not flood the log
            log.warning("plugin %s wrote to stdout: %s", name,
                        redact(raw[:500].decode("utf-8", "replace").rstrip()))


def parse_specs(name: str, data: bytes) -> list[NodeSpec]:
    """The node specs a plugin sent, each checked against the NodeSpec model
    and marked as this plugin's; PluginError naming the first bad one."""
    try:
        raw = wire.loads(data)
    except ValueError:
        raise PluginError(f"plugin '{name}' sent specs that are not JSON") from None
    if not isinstance(raw, list) or len(raw) > MAX_SPECS:
        raise PluginError(f"plugin '{name}' must send a list of at most {MAX_SPECS} specs")
    specs = []
    for i, item in enumerate(raw):
        try:
            spec = NodeSpec.model_validate(item)
        except ValidationError as exc:
            e = exc.errors()[0]
            where = ".".join(map(str, e["loc"]))
            label = item.get("type", f"#{i}") if isinstance(item, dict) else f"#{i}"
            raise PluginError(f"plugin '{name}': node spec {label}: {where}: {e['msg']}") from None
        specs.append(spec.model_copy(update={"plugin": name}))
    return specs


# -- the proxy node ----------------------------------------------------------
_instances = itertools.count(1)


class RemoteNode(Node):
    """A node whose ``on_message`` runs in a plugin process. Made per node
    type by ``remote_class``; the engine uses it like any other node."""

    process: ClassVar[PluginProcess]

    def __init__(self, id: str, name: str = "", params: dict | None = None,
                 outputs: dict | None = None, runtime: Any = None) -> None:
        super().__init__(id, name, params, outputs, runtime)
        params = params or {}
        secret = {p.name for p in self.spec.params if p.secret}
        # The flow's settings go to the plugin, but never a secret's
        # reference: secrets are resolved here and sent with each call.
        self._settings = {k: v.to_json() for k, v in params.items() if k not in secret}
        self._outputs = {o.name: self.__dict__[o.name].path for o in self.spec.results}
        # Params the host resolves per message; custom ones the plugin knows.
        self._per_message = [bp for bp in (self.__dict__[p.name] for p in self.spec.params)
                             if bp.scope is not Scope.CUSTOM or bp.spec.secret]
        self._instance = ""
        self._run = ""

    async def start(self) -> None:
        engine = getattr(self._rt, "engine", None)
        self._run = getattr(engine, "run_id", "") or "local"
        self._instance = f"{self._run}/{self.id}/{next(_instances)}"
        conn = await self.process.connection()
        self.process.instances[self._instance] = self
        try:
            await conn.create(self)
        except Exception:
            self.process.instances.pop(self._instance, None)
            raise

    async def on_message(self, msg: Any) -> Any:
        if not self._instance:
            await self.start()  # a node used outside a run (tests, tools by hand)
        params = {}
        for bp in self._per_message:
            value = bp.get(msg, _MISSING)
            if value is not _MISSING:
                params[bp.name] = value
        process = self.process
        conn = process.conn
        if conn is None or not conn.usable():
            conn = await process.connection()
        frame = await conn.request(_CALL, self._instance,
                                   wire.dumps({"msg": msg, "params": params}),
                                   process.manifest.call_timeout)
        data = wire.loads(frame.data)
        if frame.kind == _ERROR:
            raise _remote_error(data)
        new = data.get("msg")
        if isinstance(new, dict):
            msg.clear()
            msg.update(new)
        ports = data.get("ports")
        if ports is None:
            return None
        if not ports:
            return DROP
        return [str(p) for p in ports]

    async def generate(self) -> None:
        conn = await self.process.connection()
        frame = await conn.request(K.GENERATE, self._instance, b"", None, lead=False)
        if frame.kind == K.ERROR:
            raise _remote_error(wire.loads(frame.data))

    async def close(self) -> None:
        instance, self._instance = self._instance, ""
        if not instance:
            return
        self.process.instances.pop(instance, None)
        conn = self.process.conn
        if conn is not None and conn.alive:
            try:
                await conn.close_instance(instance)
            except PluginError as exc:
                log.debug("%s", exc)


class RemoteError(Exception):
    """An exception a plugin's node raised; named by its type there."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


def _remote_error(data: Any) -> Exception:
    if not isinstance(data, dict):
        return RemoteError("PluginError", "the plugin sent a malformed error")
    message = str(data.get("message", ""))[:2000] or "the node failed"
    if data.get("config"):
        return NodeConfigError(message)
    type_name = str(data.get("type", "Error"))[:64]
    # Named like the plugin's exception, so error_text reads "ValueError: ...".
    cls = type(type_name if type_name.isidentifier() else "RemoteError", (RemoteError,), {})
    return cls(type_name, message)


def remote_class(spec: NodeSpec, process: PluginProcess) -> type[Node]:
    """A Node class for ``spec`` whose instances run in ``process``."""
    return type(f"Remote_{spec.type.replace('.', '_')}", (RemoteNode,),
                {"spec": spec, "process": process, "__module__": __name__})


# -- all processes -----------------------------------------------------------
_processes: dict[str, PluginProcess] = {}
_processes_lock = threading.Lock()


def process_for(plugin: Plugin) -> PluginProcess:
    """The one process of a plugin in this runtime (made, not started)."""
    key = plugin.name + "\0" + " ".join(plugin.manifest.command)
    with _processes_lock:
        proc = _processes.get(key)
        if proc is None:
            proc = _processes[key] = PluginProcess(plugin)
        return proc


def running() -> list[PluginProcess]:
    return [p for p in _processes.values() if p.proc is not None]


@atexit.register
def stop_all() -> None:
    """Stop every plugin process (the runtime is exiting). Each also exits
    by itself when its stdin closes, should this never run (kill -9)."""
    for proc in list(_processes.values()):
        try:
            proc.stop()
        except Exception:  # noqa: BLE001 - at exit, stop the others anyway
            log.debug("could not stop plugin %s", proc.name, exc_info=True)


# -- specs, cached -----------------------------------------------------------
def _fingerprint(plugin: Plugin) -> str:
    """What the cached specs depend on: the manifest and the files of the
    package (their count, sizes and newest change), so that editing a node
    means its specs are read again."""
    h = hashlib.sha256(plugin.manifest.model_dump_json().encode())
    h.update(str(plugin.folder).encode())
    root = plugin.watch
    if root is not None and root.is_dir():
        n = 0
        newest = 0
        size = 0
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames
                           if d not in ("node_modules", ".git", "__pycache__", ".venv")]
            for f in filenames:
                try:
                    st = os.stat(os.path.join(dirpath, f))
                except OSError:
                    continue
                n += 1
                newest = max(newest, st.st_mtime_ns)
                size += st.st_size
                if n >= FINGERPRINT_FILES:
                    break
            if n >= FINGERPRINT_FILES:
                break
        h.update(f"{n}:{newest}:{size}".encode())
    return h.hexdigest()


def cache_path(plugin: Plugin) -> Path:
    return data_dir() / "plugins" / ".cache" / f"{plugin.name}.json"


def load_specs(plugin: Plugin) -> list[NodeSpec]:
    """The plugin's node specs: from the cache when the package has not
    changed since they were read, else from the plugin (started for it)."""
    key = _fingerprint(plugin)
    path = cache_path(plugin)
    try:
        cached = wire.loads(path.read_bytes())
        if isinstance(cached, dict) and cached.get("key") == key:
            return [NodeSpec.model_validate(s) for s in cached["specs"]]
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        pass
    _version, specs = process_for(plugin).describe()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(wire.dumps({"key": key, "specs": [s.model_dump(mode="json")
                                                          for s in specs]}))
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("cannot cache specs of plugin %s: %s", plugin.name, exc)
    return specs

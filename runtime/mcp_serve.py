"""One agent's tools served over MCP (the official ``mcp`` SDK), to any MCP
client: Claude Desktop, an IDE, another framework's agent.

A served call is an agent's call: it goes through the agent's own
``ToolBridge``, so the client sees the schemas the agent's LLM sees (only the
``ai``-scoped params), and every call is parsed, bounded and validated the
same way, waits for approval by the same policy, counts against the same
limits and publishes the same ``tool.call`` / ``tool.status`` /
``tool.result`` events on the run's bus. An argument the schema does not
hold (``smtp_host``) is refused with the agent's refusal text and the node
never runs.

The calls run inside a run of the flow (its nodes started, their resources
shared, the run recorded in history) in which no source sends anything: the
flow's triggers and inject nodes stay quiet, so serving a flow does not also
run it. The run lasts as long as the serving: until the client closes stdio,
or the HTTP server is stopped.

Transports: stdio (the client starts ``switchboard mcp serve`` and talks on
its stdin/stdout, so nothing else may write to stdout), or streamable HTTP
at ``/mcp`` behind a bearer token, on loopback unless told otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .message import Message
from .tools import DEFAULT_TOOL_TIMEOUT, AgentCalls, ToolBridge, ToolOutcome, _cancel_all

if TYPE_CHECKING:
    from .engine import Engine, RunResult
    from .flow import Flow
    from .registry import Registry

log = logging.getLogger(__name__)

#: Where streamable HTTP is served.
MCP_PATH = "/mcp"
#: Largest JSON-RPC message read from stdin (the SDK's own bound for an HTTP body).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: How long an HTTP client's open streams may keep the server from stopping.
HTTP_STOP_GRACE = 2.0
ENV_TOKEN = "SWITCHBOARD_MCP_TOKEN"
#: Shortest token accepted from --token or the environment.
MIN_TOKEN_CHARS = 16


class ServeError(Exception):
    """Bad input for serving (no such agent, a bad address): the message
    says what and where."""


# -- what is served -----------------------------------------------------------

def agent_ids(flow: Flow, registry: Registry) -> list[str]:
    """The nodes of ``flow`` that have a tools port, in file order."""
    out = []
    for fnode in flow.nodes:
        spec = registry.spec(fnode.type)
        if spec is not None and spec.has_tools_port:
            out.append(fnode.id)
    return out


def choose_agent(flow: Flow, agent_id: str | None, registry: Registry, file: str = "") -> str:
    """The agent whose tools are served: ``agent_id``, or the flow's only
    agent; ServeError naming the flow's agents otherwise."""
    where = file or flow.name or "the flow"
    agents = agent_ids(flow, registry)
    listed = ", ".join(agents) or "none"
    if agent_id is None:
        if len(agents) == 1:
            return agents[0]
        if not agents:
            raise ServeError(f"{where} has no agent, so no tools to serve")
        raise ServeError(f"{where} has {len(agents)} agents ({listed}); "
                         "choose one with --agent ID")
    fnode = flow.node(agent_id)
    if fnode is None:
        raise ServeError(f"--agent {agent_id}: no node '{agent_id}' in {where} "
                         f"(its agents: {listed})")
    if agent_id not in agents:
        raise ServeError(f"--agent {agent_id}: node '{agent_id}' ({fnode.type}) is not an "
                         f"agent: it has no tools port (agents in {where}: {listed})")
    if fnode.disabled:
        raise ServeError(f"--agent {agent_id}: the agent is disabled in {where}")
    return agent_id


def quiet_flow(flow: Flow, registry: Registry) -> Flow:
    """A copy of ``flow`` in which no source sends anything (triggers and
    inject nodes disabled): serving an agent's tools must not also run the
    flow (the example's inject would make its agent send a mail)."""
    quiet = flow.model_copy(deep=True)
    for fnode in quiet.nodes:
        spec = registry.spec(fnode.type)
        if spec is not None and spec.source:
            fnode.disabled = True
    return quiet


def _agent_setting(engine: Engine, agent_id: str, name: str) -> Any:
    """The agent node's (designer-set) param ``name``, or None when it has none."""
    node = engine.nodes[agent_id].node
    bound = node.__dict__.get(name)
    if bound is None or not hasattr(bound, "get"):
        return None
    try:
        return bound.get()
    except Exception:  # noqa: BLE001 - a param that needs a message is no setting
        return None


# -- the MCP server -----------------------------------------------------------

@dataclass
class ServedCall:
    """One call a client made, for whoever watches the serving (the designer's
    dialog counts them)."""

    tool: str
    status: str  # success | error | refused | rejected
    error: str = ""


class ToolServer:
    """An agent's tools as an MCP server, over the agent's own ToolBridge.

    A client's calls share one ``AgentCalls``: a serving run counts as one
    message of the agent, so its ``max_tool_calls_per_run`` bounds all the
    calls of the run (as each tool's own ``max_calls_per_run`` does). Each
    call is its own LLM turn: ``max_tool_calls_per_turn`` never bites."""

    def __init__(self, engine: Engine, agent_id: str,
                 on_call: Callable[[ServedCall], Any] | None = None) -> None:
        self.engine = engine
        self.agent_id = agent_id
        self.bridge = ToolBridge(engine, agent_id)
        timeout = _agent_setting(engine, agent_id, "tool_timeout_seconds")
        self.timeout: float | None = (float(timeout) if timeout else None) \
            if timeout is not None else DEFAULT_TOOL_TIMEOUT
        limit = _agent_setting(engine, agent_id, "max_tool_calls_per_run")
        self.state = AgentCalls(limit=max(1, int(limit)) if limit is not None else None,
                                engine=engine)
        self.on_call = on_call
        self.calls = 0
        self._seq = 0

    @property
    def name(self) -> str:
        flow = self.engine.flow.name or "flow"
        return f"switchboard: {flow} ({self.agent_id})"

    def tools(self) -> list[Any]:
        """The tools as MCP lists them: the functions the agent's LLM is
        offered now (task_status and task_cancel while background calls are
        going), with the same names, descriptions and schemas."""
        import mcp_types as types

        out = []
        for fn in self.bridge.functions_for(self.state):
            f = fn["function"]
            out.append(types.Tool(name=f["name"], description=f.get("description") or None,
                                  input_schema=f["parameters"]))
        return out

    async def call(self, name: str, arguments: Any) -> ToolOutcome:
        """One client call, exactly as the agent would make it."""
        engine = self.engine
        if not engine.started.is_set():
            await engine.started.wait()  # the run's nodes are started first
        self._seq += 1
        call_id = f"mcp-{self._seq}"
        if not engine.running:
            return self.bridge.refuse(call_id, name, arguments, "the run has ended")
        args = {} if arguments is None else arguments
        # Its own task, which the run's end cancels (as it does an agent's
        # calls and background tasks); the client then hears why.
        task = asyncio.get_running_loop().create_task(self.bridge.call_many(
            Message.new(), [(call_id, name, args)], self.timeout, None, state=self.state))
        going = engine.resource("mcp-calls", set, _cancel_all)
        going.add(task)
        task.add_done_callback(going.discard)
        try:
            [outcome] = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the client went away: not an outcome anyone reads
            outcome = ToolOutcome(call_id, "", str(name), "", args, "error",
                                  error="cancelled: the run stopped", cancelled=True)
        self.calls += 1
        if self.on_call is not None:
            try:
                self.on_call(ServedCall(outcome.tool, outcome.status, outcome.error))
            except Exception:  # noqa: BLE001 - an observer must not fail the call
                log.exception("on_call failed")
        return outcome

    async def _on_call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        outcome = await self.call(params.name, params.arguments)
        return call_result(outcome, types)

    async def _on_list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListToolsResult(tools=self.tools())

    def server(self) -> Any:
        """The SDK's low-level server answering tools/list and tools/call:
        the schemas come from the flow, not from Python functions."""
        from mcp.server.lowlevel import Server

        from . import __version__

        return Server(self.name, version=__version__, on_list_tools=self._on_list_tools,
                      on_call_tool=self._on_call_tool)


def call_result(outcome: ToolOutcome, types: Any) -> Any:
    """A CallToolResult: the data as JSON text (and as structured content
    when it is an object), or ``is_error`` with the reason a call was
    refused, rejected or failed. Secrets are masked as for the LLM."""
    if outcome.status == "success":
        text = outcome.content()
        data = json.loads(text)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=data if isinstance(data, dict) else None,
                                    is_error=False)
    prefix = {"refused": "refused: ", "rejected": "rejected: "}.get(outcome.status, "")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=prefix + outcome.error)], is_error=True)


# -- stdio ----------------------------------------------------------------------

class _PipeLines:
    """stdin as the SDK's stdio transport reads it (``async for line``), but
    read by the event loop instead of a worker thread: a thread blocked in
    ``readline`` cannot be cancelled, and would keep a stopped server (and
    the process) waiting for the client's next line. A line longer than
    MAX_MESSAGE_BYTES is skipped (the SDK answers it as a parse error)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise StopAsyncIteration from None
            line = exc.partial
        except asyncio.LimitOverrunError:
            await self._skip_line()
            return "{\"error\": \"message too large\""  # not JSON: a parse error
        return line.decode("utf-8", errors="replace")

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


@contextlib.asynccontextmanager
async def _stdin_lines():
    """stdin read by the loop when it is a pipe (what MCP clients give);
    else None, and the SDK reads it its own way."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    fd = sys.stdin.fileno()
    blocking = os.get_blocking(fd)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", closefd=False))
    except (ValueError, OSError):  # a regular file, a closed stdin
        yield None
        return
    try:
        yield _PipeLines(reader)
    finally:
        transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(fd, blocking)  # the fd is shared with whoever started us


async def serve_stdio(tools: ToolServer) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    server = tools.server()
    async with _stdin_lines() as lines, stdio_server(stdin=lines) as (read, write):
        await server.run(read, write, server.create_initialization_options())


# -- streamable HTTP ----------------------------------------------------------

def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6; ``:8000`` is loopback);
    ServeError naming the option otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServeError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def choose_token(given: str | None) -> tuple[str, bool]:
    """The bearer token: ``given`` (``--token``), else $SWITCHBOARD_MCP_TOKEN,
    else a new random one; and whether it was made here (then it is shown)."""
    token = given if given is not None else os.environ.get(ENV_TOKEN)
    if token is None or token == "":
        return secrets.token_urlsafe(32), True
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        source = "--token" if given is not None else ENV_TOKEN
        raise ServeError(f"{source}: the token must be at least {MIN_TOKEN_CHARS} characters "
                         "with no spaces")
    return token, False


class BearerGuard:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer
    <token>`` gets 401 and never reaches the MCP app."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def allows(self, headers: list[tuple[bytes, bytes]]) -> bool:
        value = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        scheme, _, given = value.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.allows(scope.get("headers") or []):
            body = json.dumps({"error": "unauthorized: send the token as "
                                        "'Authorization: Bearer <token>'"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="switchboard"')]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound now so that a port in use is a clear error
    before anything is announced (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        raise ServeError(f"--http {host}:{port}: cannot listen there: "
                         f"{exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


@dataclass
class HttpEndpoint:
    """A ToolServer served over streamable HTTP on a socket already bound."""

    tools: ToolServer
    sock: socket.socket
    token: str
    host: str = field(init=False)
    port: int = field(init=False)
    _server: Any = field(default=None, repr=False)
    _stop: bool = False

    def __post_init__(self) -> None:
        # Kept: the socket is closed when serving ends.
        self.host, self.port = self.sock.getsockname()[:2]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"

    def app(self) -> Any:
        server = self.tools.server()
        # The SDK guards loopback against DNS rebinding by itself (allowed
        # Host and Origin headers); elsewhere the token is the guard.
        # Stateless, with plain JSON answers: the server keeps nothing per
        # client session (limits count per run) and sends nothing unasked,
        # so no session needs an open stream, and stopping never waits for
        # one a client keeps open.
        inner = server.streamable_http_app(streamable_http_path=MCP_PATH, host=self.host,
                                             stateless_http=True, json_response=True)
        return BearerGuard(inner, self.token)

    async def serve(self) -> None:
        """Serve until stop()."""
        import uvicorn

        class _Server(uvicorn.Server):
            def capture_signals(self):  # the run's owner handles signals, not uvicorn
                return contextlib.nullcontext()

        config = uvicorn.Config(self.app(), log_config=None, access_log=False,
                                lifespan="on", timeout_graceful_shutdown=HTTP_STOP_GRACE,
                                log_level="warning")
        self._server = _Server(config)
        if self._stop:
            return
        try:
            await self._server.serve(sockets=[self.sock])
        finally:
            self.sock.close()

    def stop(self) -> None:
        self._stop = True
        if self._server is not None:
            self._server.should_exit = True


# -- a serving run --------------------------------------------------------------

def serve_run(tools: ToolServer, running: Awaitable[RunResult],
              serve: Callable[[], Awaitable[None]],
              stop_serving: Callable[[], None] | None = None) -> Coroutine[Any, Any, RunResult]:
    """Serve ``tools`` while their engine runs: ``running`` awaits the
    engine's run; ``serve()`` serves until the client leaves or
    ``stop_serving()`` (HTTP) is called. Await what this returns.

    The run is held open while serving (the engine's in-flight count), from
    this call on: the engine's run must not have taken its first step yet
    (with every source quiet it would end at once). When serving ends, the
    run ends as completed once its calls have settled; when the run ends
    first (a signal stopped it, a node failed to start), serving stops."""
    tools.engine.hold()
    return _serve_run(tools, running, serve, stop_serving)


async def _serve_run(tools: ToolServer, running: Awaitable[RunResult],
                     serve: Callable[[], Awaitable[None]],
                     stop_serving: Callable[[], None] | None) -> RunResult:
    engine = tools.engine
    run_task = asyncio.ensure_future(running)
    serving = asyncio.ensure_future(serve())
    released = False
    try:
        await asyncio.wait({run_task, serving}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            if not serving.cancelled() and serving.exception() is not None:
                log.error("serving MCP failed: %s", serving.exception())
                engine.stop(f"serving MCP failed: {serving.exception()}")
            released = True
            engine.release()
            return await run_task
        # The run ended first: stop serving (its calls were cancelled with the run).
        if stop_serving is not None:
            stop_serving()
        else:
            serving.cancel()
        await asyncio.wait({serving}, timeout=HTTP_STOP_GRACE * 2)
        if not serving.done():
            serving.cancel()
        return await run_task
    finally:
        if not released and not run_task.done():
            engine.release()
        for task in (serving, run_task):
            if not task.done():
                task.cancel()


def report_line(event: Any) -> str | None:
    """What the person running the server reads on stderr about an event:
    each call's outcome, node errors and what nodes tell their user."""
    kind = event.type
    if kind == "tool.result":
        if event.status == "success":
            return f"call {event.tool}: success ({event.ms:.0f} ms)"
        return f"call {event.tool}: {event.status}: {event.error}"
    if kind == "tool.approval":
        return f"call {event.tool}: waiting for approval ({event.reason})"
    if kind == "node.error" and not event.caught:
        return f"error: node '{event.node}': {event.message}"
    if kind == "log" and event.level != "debug":
        prefix = "" if event.level == "info" else f"{event.level}: "
        return f"{prefix}node '{event.node}': {event.text}"
    return None

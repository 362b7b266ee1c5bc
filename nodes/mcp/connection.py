"""One connection to an MCP server, through the official ``mcp`` SDK's
``Client`` (stdio: the server is a subprocess; or streamable HTTP).

The SDK's transports are anyio context managers whose task groups must be
entered and left by one task. A run's tool calls come from many tasks (one
per call, an approval's), so the connection has a task of its own that
enters the client, holds it open until ``close()`` and then leaves it, which
ends the stdio server (stdin closed, then terminated, then killed: the SDK's
bounded shutdown). Calls from any task go through the open session.

A server that exits, or a connection that breaks, fails the calls made on
it with a text that says so (and the last line the server wrote to stderr);
the next call starts it again, at most MAX_RESTARTS times per connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from runtime.arguments import short
from runtime.node import NodeConfigError, redact

log = logging.getLogger(__name__)

#: Times a server that exited is started again in one run; then its calls fail.
MAX_RESTARTS = 3
#: Seconds the SDK's shutdown may take (its own steps are bounded at ~6 s).
CLOSE_TIMEOUT = 15.0
#: Characters of the server's stderr quoted in an error.
STDERR_QUOTE = 300


class McpUnavailable(NodeConfigError):
    """The server could not be reached, or went away: the text says which
    server and why, for the user and the LLM."""


@dataclass
class Target:
    """Where the server is: a command to start (stdio) or a URL (streamable
    HTTP). ``label`` names it in every error."""

    label: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    token: str | None = field(default=None, repr=False)

    @property
    def is_stdio(self) -> bool:
        return not self.url


class McpConnection:
    """The session with one server, opened on first use (under a lock, so
    that concurrent first calls open it once) and closed by ``close()``."""

    def __init__(self, target: Target, *, connect_timeout: float = 30.0) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self.starts = 0
        self._lock = asyncio.Lock()
        self._client: Any = None
        self._task: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._ended = ""  # why the last session ended by itself, "" while none did
        self._stderr_path: str | None = None
        self._http_status: int | None = None
        self._closed = False

    # -- use ------------------------------------------------------------------
    async def list_tools(self, limit: int) -> list[Any]:
        """Every tool the server lists (all pages), at most ``limit``."""
        client = await self.client()
        tools: list[Any] = []
        cursor = None
        for _ in range(max(1, limit)):  # a page holds at least one tool
            try:
                page = await client.list_tools(cursor=cursor)
            except Exception as exc:  # noqa: BLE001 - said in the server's words below
                raise self._failure(exc, "listing its tools") from None
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None or len(tools) >= limit:
                break
        return tools[:limit]

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's CallToolResult for one call, or McpUnavailable /
        NodeConfigError saying why there is none."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import REQUEST_TIMEOUT

        client = await self.client()
        try:
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise NodeConfigError(
                    f"MCP server '{self.target.label}' did not answer {name} within "
                    f"{timeout:g} s (timeout_seconds)") from None
            raise self._failure(exc, f"calling {name}") from None
        except Exception as exc:  # noqa: BLE001 - a broken transport: said below
            raise self._failure(exc, f"calling {name}") from None

    async def client(self) -> Any:
        """The open session, opening it first if there is none (again after
        the server exited, up to MAX_RESTARTS times)."""
        if self._client is not None and self._alive():
            return self._client
        async with self._lock:
            if self._client is not None and self._alive():
                return self._client
            if self._closed:
                raise McpUnavailable(f"MCP server '{self.target.label}': the run has ended")
            if self._task is not None:  # a session that ended: leave it first
                ended = self._ended or "the connection closed"
                await self._shut()
                if self.starts > MAX_RESTARTS:
                    raise McpUnavailable(
                        f"MCP server '{self.target.label}' exited {self.starts} times in this "
                        f"run and is not started again (last: {ended})")
            self.starts += 1
            self._client = await self._open()
            return self._client

    async def close(self) -> None:
        """End the session: the stdio server is stopped (killed if it will
        not exit). Calls after this fail."""
        self._closed = True
        async with self._lock:
            await self._shut()

    # -- the owner task --------------------------------------------------------
    def _alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._ended

    async def _open(self) -> Any:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        self._stop = asyncio.Event()
        self._ended = ""
        self._http_status = None
        self._task = loop.create_task(self._own(ready, self._stop),
                                      name=f"mcp server {self.target.label}")
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await asyncio.shield(ready)
        except TimeoutError:
            note = self._stderr_note()
            await self._shut()
            raise McpUnavailable(
                f"MCP server '{self.target.label}' did not complete the MCP handshake within "
                f"{self.connect_timeout:g} s (connect_timeout_seconds){note}") from None

    async def _own(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        """Enter the client, hand it over, hold it until ``stop``, leave it."""
        from mcp import Client

        errlog = None
        try:
            if self.target.is_stdio:
                transport, errlog = self._stdio_transport()
            else:
                transport = self._http_transport()
            async with Client(transport) as client:
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - CancelledError too: the session is over
            why = self._describe(exc)
            if not ready.done():
                ready.set_exception(McpUnavailable(
                    f"cannot connect to MCP server '{self.target.label}': {why}"
                    f"{self._stderr_note()}"))
            elif not stop.is_set():
                self._ended = why
                log.info("MCP server %s: the session ended: %s", self.target.label, why)
        finally:
            self._client = None
            if errlog is not None:
                errlog.close()
        if not stop.is_set() and not self._ended:
            self._ended = "the connection closed"

    async def _shut(self) -> None:
        task, stop = self._task, self._stop
        self._client = None
        if task is None:
            return
        if stop is not None:
            stop.set()
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            except BaseException:
                pass
        self._task = None
        self._remove_stderr()

    # -- transports -------------------------------------------------------------
    def _stdio_transport(self) -> tuple[Any, Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        # The server's stderr goes to a file of ours, for its last words in an
        # error (and not into the designer's console). Appended to, and read
        # through a second handle, so reading never moves where it writes.
        self._remove_stderr()
        fd, path = tempfile.mkstemp(prefix="switchboard-mcp-", suffix=".log")
        os.close(fd)
        self._stderr_path = path
        errlog = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by _own
        t = self.target
        params = StdioServerParameters(command=t.command, args=list(t.args), env=dict(t.env),
                                       cwd=t.cwd or None, encoding_error_handler="replace")
        return stdio_client(params, errlog=errlog), errlog

    def _http_transport(self) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

        headers = {"Authorization": f"Bearer {self.target.token}"} if self.target.token else {}

        async def seen(response: Any) -> None:
            if response.status_code >= 400:
                self._http_status = response.status_code

        client = httpx2.AsyncClient(
            headers=headers, event_hooks={"response": [seen]},
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))
        return streamable_http_client(self.target.url, http_client=client)

    # -- words --------------------------------------------------------------------
    def _failure(self, exc: BaseException, doing: str) -> NodeConfigError:
        """The error a call gets: a session that ended says the server went
        away (and the next call starts it again); anything else quotes the
        server's own error."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        closed = isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
        if closed or not isinstance(exc, MCPError):
            why = self._ended or self._describe(exc)
            self._ended = self._ended or why
            word = "exited" if self.target.is_stdio else "closed the connection"
            return McpUnavailable(f"MCP server '{self.target.label}' {word} while {doing}: "
                                  f"{why}{self._stderr_note()}")
        return NodeConfigError(f"MCP server '{self.target.label}' answered an error while "
                               f"{doing}: {short(redact(str(exc)), 500)}")

    def _describe(self, exc: BaseException) -> str:
        """One line for an exception out of the SDK: the first real cause in
        anyio's exception groups, with the HTTP status a server answered."""
        leaf = _leaf(exc)
        if self._http_status in (401, 403):
            return (f"HTTP {self._http_status} from {self.target.url}: the server refused the "
                    "token (check the token credential)")
        if self._http_status is not None:
            return f"HTTP {self._http_status} from {self.target.url}"
        if isinstance(leaf, asyncio.CancelledError):
            return "the connection closed"
        if isinstance(leaf, FileNotFoundError) and self.target.is_stdio:
            return f"command not found: {self.target.command}"
        return short(redact(str(leaf).strip() or type(leaf).__name__), 300)

    def _stderr_note(self) -> str:
        """`` (stderr: last line)``, when the server wrote to stderr."""
        tail = self.stderr_tail()
        return f" (stderr: {tail})" if tail else ""

    def stderr_tail(self) -> str:
        path = self._stderr_path
        if not path:
            return ""
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 4096))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return short(redact(lines[-1]), STDERR_QUOTE) if lines else ""

    def _remove_stderr(self) -> None:
        if self._stderr_path:
            with contextlib.suppress(OSError):
                os.unlink(self._stderr_path)
            self._stderr_path = None


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups, else ``exc``."""
    seen = 0
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions and seen < 50:
        exc = exc.exceptions[0]
        seen += 1
    while exc.__cause__ is not None and seen < 100 and type(exc).__module__.startswith("mcp"):
        exc = exc.__cause__
        seen += 1
    return exc

"""A small MCP server, written with the official ``mcp`` SDK (MCPServer), for
the MCP-client tests, the docs' examples and the designer's screenshots.

    python tests/servers/mcp_demo.py stdio [--log FILE]
    python tests/servers/mcp_demo.py http [--token T] [--log FILE]

Over stdio it speaks MCP on stdin/stdout. Over streamable HTTP it listens on
a free loopback port, prints ``PORT <n>`` on its first stdout line (so a
test never guesses a port) and serves ``/mcp``; with ``--token`` a request
without ``Authorization: Bearer T`` gets a 401.

With ``--log`` every start and every tool call is appended to FILE as one
JSON line (``{"event": "call", "tool": ..., "args": ..., "pid": ...}``): what
the server really received, for a test to compare with what the LLM sent.

Tools: ``add``, ``lookup_order`` (its ``region`` is what the tests pin),
``slow`` (sleeps), ``crash`` (the process exits at once, mid-call) and
``fail`` (an MCP tool error)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

LOG: Path | None = None

server = MCPServer("demo", instructions="A demo server for Switchboard's tests")


def _log(event: str, **fields: Any) -> None:
    if LOG is None:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), **fields})
    with LOG.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    _log("call", tool="add", args={"a": a, "b": b})
    return str(a + b)


@server.tool()
def lookup_order(order_id: str, region: str) -> str:
    """Look up an order by its id in one region's order system."""
    _log("call", tool="lookup_order", args={"order_id": order_id, "region": region})
    return f"order {order_id} in region {region}: shipped"


@server.tool()
async def slow(seconds: float) -> str:
    """Wait a number of seconds, then answer."""
    _log("call", tool="slow", args={"seconds": seconds})
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def crash(reason: str = "") -> str:
    """Stop the server process at once (for testing a server that dies)."""
    _log("call", tool="crash", args={"reason": reason})
    print(f"demo server crashing: {reason or 'asked to'}", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def fail(why: str) -> str:
    """Always fails, with an error the caller reads."""
    _log("call", tool="fail", args={"why": why})
    raise ToolError(f"cannot do that: {why}")


def _serve_http(token: str | None) -> None:
    import uvicorn

    app = server.streamable_http_app()

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong token"})
                return
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    global LOG
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--log", help="append starts and calls to this file, as JSON lines")
    parser.add_argument("--token", help="http: the bearer token every request must carry")
    args = parser.parse_args(argv)
    LOG = Path(args.log) if args.log else None
    _log("start", transport=args.transport)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        _serve_http(args.token)


if __name__ == "__main__":
    main()

"""``mcp.server``: an MCP server's tools as an agent's tools.

Wired to an agent's ``tools`` port, the node offers the agent one tool per
enabled entry of its ``tools`` param (runtime.tools asks the class's
``tool_entries``); a call reaches ``on_message`` with the name the LLM used,
which is mapped back to the server's name, the designer's pinned arguments
are put over the LLM's (the LLM's schema never holds them, so it cannot send
them anyway), and the call goes to the server over one connection per run
(nodes.mcp.connection), opened at the first call and closed when the run
ends. A server that fails or dies fails that call, never the run.

On a plain message the node calls the tool named in ``tool_name`` with the
arguments at ``arguments`` (the payload, by default), pins included."""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from runtime.arguments import short
from runtime.message import MESSAGE_TYPE, PARAMETERS, TOOL_NAME, TOOL_REQUEST, Message
from runtime.node import (
    CUSTOM,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    is_secret_ref,
    node,
    resolve_secret,
)
from runtime.spec import ParamValue, Scope

from .connection import McpConnection, Target
from .entries import MAX_TOOLS, McpToolEntry, OfferedTool, offered, parse_entries

DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_MAX_RESULT_CHARS = 20_000
#: Arguments and environment variables a stdio server may be given.
MAX_ARGS = 200
MAX_ENV = 200

STDIO = {"transport": ["stdio"]}
HTTP = {"transport": ["http"]}


def split_args(value: Any) -> list[str]:
    """A server's arguments from the ``args`` param: a JSON list of strings
    as it is, or one line split as a shell splits it (quotes group, a
    backslash escapes; Windows' rules on Windows). ValueError says why a
    line cannot be split (an unclosed quote)."""
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(a) for a in value]
    try:
        return shlex.split(str(value), posix=os.name != "nt")
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        why = str(exc).lower()
        hint = "close the quote" if "quotation" in why else "end the line with a character " \
            "after the backslash"
        raise ValueError(f"args cannot be split like a shell line: {why} ({hint}, or give a "
                         "JSON list such as [\"-m\", \"my_server\"])") from None


@node("mcp.server", name="MCP Server", category="AI", icon="wrench", color="#6c5ce7",
      tool=Tool("mcp_server", "The tools of an MCP server"))
class McpServer(Node):
    """Gives an agent the tools of an MCP server (Model Context Protocol):
    a command it starts (stdio) or a URL (streamable HTTP). Wire an agent's
    tools port here, then List tools: each tool can be enabled, renamed,
    given approval rules and call limits, and each argument left to the AI
    or fixed by you (the AI never sees a fixed one)."""

    transport = Param(str, "stdio: start a command that serves MCP on its stdin and stdout; "
                      "http: connect to a streamable HTTP URL", choices=["stdio", "http"],
                      default="stdio", allow=CUSTOM)
    command = Param(str, "The program that serves MCP: python, npx, uvx or a path",
                    default="", allow=CUSTOM, visible_if=STDIO)
    args = Param("json", "Its command-line arguments: one line split like a shell does "
                 "(-m my_server --port 8000; quote an argument with spaces), or a JSON list "
                 "of strings ([\"-m\", \"my_server\"])",
                 default=[], allow=CUSTOM, visible_if=STDIO)
    env = Param("json", "Environment variables for it, {\"NAME\": \"value\"}; a value may name "
                "a secret instead: {\"env\": \"VAR\"} or {\"keyring\": \"switchboard\", "
                "\"username\": \"credential name\"}. The server gets only these and a few "
                "basic ones (PATH, HOME, ...)", default={}, allow=CUSTOM, visible_if=STDIO,
                group="connection")
    cwd = Param(str, "The folder it starts in; empty: Switchboard's working folder "
                "({flow_dir} is the flow's folder)", default="", allow=CUSTOM, visible_if=STDIO,
                group="connection")
    url = Param(str, "The server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp", default="",
                allow=CUSTOM, visible_if=HTTP)
    token = Param("secret", "A bearer token the server wants, as a stored credential or "
                  "environment variable", optional=True, visible_if=HTTP)
    tools = Param("json", "The server's tools as listed, with your choices for each (the "
                  "Tools section edits this)", default=[], allow=CUSTOM)
    tool_name = Param(str, "On a plain message (not an agent's call): the tool to call, by the "
                      "server's name for it", default="", allow=CUSTOM | MESSAGE,
                      group="plain messages")
    arguments = Param("json", "On a plain message: the tool's arguments, an object (your pinned "
                      "arguments are put over them)", default={}, scope=MESSAGE,
                      path="payload", allow=CUSTOM | MESSAGE, group="plain messages")
    timeout_seconds = Param(float, "Most seconds one call may take", default=DEFAULT_TIMEOUT,
                            allow=CUSTOM, group="advanced")
    connect_timeout_seconds = Param(float, "Most seconds starting or reaching the server and "
                                    "the MCP handshake may take",
                                    default=DEFAULT_CONNECT_TIMEOUT, allow=CUSTOM,
                                    group="advanced")
    max_result_chars = Param(int, "Longest answer passed on; a longer one is cut, with a note "
                             "saying so", default=DEFAULT_MAX_RESULT_CHARS, allow=CUSTOM,
                             group="advanced")

    result = Output("json", "What the tool answered: its text, or its structured content")

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._conn: McpConnection | None = None
        self._entries: dict[str, McpToolEntry] | None = None

    # -- the flow's settings ------------------------------------------------------
    @classmethod
    def tool_entries(cls, params: dict[str, ParamValue]) -> list[OfferedTool]:
        """The tools this node offers an agent (runtime.tools, runtime.flow):
        its enabled entries, as the LLM sees them."""
        return offered(_entries(params)[0])

    @classmethod
    def check(cls, params: dict[str, ParamValue]) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []

        def fixed(name: str) -> Any:
            p = params.get(name)
            return p.value if p is not None and p.scope is Scope.CUSTOM else None

        args = fixed("args")
        if args is not None and not isinstance(args, str) and not (
                isinstance(args, list) and all(isinstance(a, str) for a in args)):
            problems.append(("args", "args must be a list of strings or one line of text"))
        else:
            try:
                if len(split_args(args)) > MAX_ARGS:
                    problems.append(("args", f"at most {MAX_ARGS} arguments"))
            except ValueError as exc:
                problems.append(("args", str(exc)))
        env = fixed("env")
        if env is not None:
            if not isinstance(env, dict):
                problems.append(("env", "env must be an object {\"NAME\": \"value\"}"))
            elif len(env) > MAX_ENV:
                problems.append(("env", f"at most {MAX_ENV} variables"))
            else:
                for k, v in env.items():
                    if not isinstance(v, str) and not is_secret_ref(v):
                        problems.append(("env", f"env '{k}': a value is text or names a secret "
                                                "({\"env\": \"VAR\"} or {\"keyring\": ...})"))
                        break
        url = fixed("url")
        if isinstance(url, str) and url.strip() and not url.strip().lower().startswith(
                ("http://", "https://")):
            problems.append(("url", "url must start with http:// or https://"))
        for name in ("timeout_seconds", "connect_timeout_seconds"):
            v = fixed(name)
            if isinstance(v, (int, float)) and not v > 0:
                problems.append((name, f"{name} must be more than 0"))
        limit = fixed("max_result_chars")
        if isinstance(limit, int) and limit < 1:
            problems.append(("max_result_chars", "max_result_chars must be at least 1"))
        problems += [("tools", p) for p in _entries(params)[1]]
        return problems

    def target(self) -> Target:
        """Where the server is, with its secrets resolved (never logged)."""
        label = self.name if self.name and self.name != self.spec.name else self.id
        if self.transport.get() == "http":
            url = str(self.url.get() or "").strip()
            if not url:
                raise NodeConfigError(f"MCP server '{label}': url is empty (the server's MCP "
                                      "endpoint, e.g. http://127.0.0.1:8000/mcp)")
            return Target(label=label, url=url, token=self.token.get() or None)
        command = str(self.command.get() or "").strip()
        if not command:
            raise NodeConfigError(f"MCP server '{label}': command is empty (the program that "
                                  "serves MCP, e.g. python or npx)")
        try:
            args = split_args(self.args.get())
        except ValueError as exc:
            raise NodeConfigError(f"MCP server '{label}': {exc}") from None
        env = {}
        for key, value in (self.env.get() or {}).items():
            env[str(key)] = resolve_secret(value, param=f"env.{key}") \
                if is_secret_ref(value) else str(value)
        return Target(label=label, command=command, args=args[:MAX_ARGS],
                      env=env, cwd=str(self.cwd.get() or "") or None)

    def connection(self) -> McpConnection:
        """This run's connection (made, not yet opened, on first use)."""
        if self._conn is None:
            timeout = float(self.connect_timeout_seconds.get() or DEFAULT_CONNECT_TIMEOUT)
            self._conn = McpConnection(self.target(), connect_timeout=timeout)
        return self._conn

    def _by_offered_name(self) -> dict[str, McpToolEntry]:
        if self._entries is None:
            setting = self.tools.get()
            entries, _ = parse_entries(setting)
            self._entries = {e.offered_name: e for e in entries if e.enabled}
        return self._entries

    # -- running ------------------------------------------------------------------
    async def on_message(self, msg: Message) -> None:
        entries = self._by_offered_name()
        if msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            asked = str(msg.get(TOOL_NAME) or "")
            entry = entries.get(asked)
            if entry is None:
                known = ", ".join(entries) or "none; List tools in its properties"
                raise NodeConfigError(f"no enabled MCP tool '{short(asked, 64)}' on this "
                                      f"server (enabled: {known})")
            arguments = dict(msg.get(PARAMETERS) or {})
        else:
            asked = str(self.tool_name.get(msg) or "")
            entry = next((e for e in entries.values() if asked in (e.name, e.offered_name)),
                         None)
            if entry is None:
                known = ", ".join(e.name for e in entries.values()) or "none"
                raise NodeConfigError(f"tool_name: no enabled MCP tool '{asked}' "
                                      f"(enabled: {known})")
            arguments = self.arguments.get(msg)
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise NodeConfigError("arguments: the tool's arguments must be an object")
            arguments = dict(arguments)
        # The designer's values win: pinned arguments are the Custom scope.
        arguments.update(entry.pinned)
        timeout = float(self.timeout_seconds.get() or DEFAULT_TIMEOUT)
        self.show_status(f"calling {entry.name}", "blue", "running")
        result = await self.connection().call(entry.name, arguments, timeout)
        limit = int(self.max_result_chars.get() or DEFAULT_MAX_RESULT_CHARS)
        value = result_value(result, limit)
        if result.is_error:
            self.show_status(f"{entry.name} failed", "red", "error")
            raise NodeConfigError(f"MCP tool {entry.name} failed: {value}")
        self.show_status(f"{entry.name} answered", "green", "done")
        self.result.set(msg, value)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    # -- for the designer --------------------------------------------------------
    @classmethod
    async def list_server_tools(cls, params: dict[str, ParamValue], label: str = "") -> list[dict]:
        """The server's tools as it lists them now (name, description,
        input_schema): a connection of its own, closed before returning."""
        node_ = cls(label or "mcp", label, params)
        conn = node_.connection()
        try:
            tools = await conn.list_tools(MAX_TOOLS + 1)
        finally:
            await conn.close()
        return [{"name": t.name, "description": t.description or "",
                 "input_schema": t.input_schema} for t in tools]


def _entries(params: dict[str, ParamValue]) -> tuple[list[McpToolEntry], list[str]]:
    setting = params.get("tools")
    value = setting.value if setting is not None and setting.scope is Scope.CUSTOM else None
    return parse_entries(value)


def result_value(result: Any, limit: int) -> Any:
    """What the agent (or the next node) gets of a CallToolResult: the text
    of its content (images, audio and binary resources described, not
    inlined), or its structured content when it has no text; at most
    ``limit`` characters."""
    texts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            texts.append(f"[{kind} {block.mime_type}, {len(block.data)} characters of base64 "
                         "left out]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            texts.append(text if text is not None else f"[binary resource {res.uri}]")
        elif kind == "resource_link":
            texts.append(f"[resource link {block.uri}]")
        else:
            texts.append(f"[{kind or 'unknown'} content left out]")
    text = "\n".join(texts)
    if not text and result.structured_content is not None:
        dumped = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if len(dumped) <= limit:
            return result.structured_content
        text = dumped
    if len(text) > limit:
        text = (text[:limit] + f"\n[cut: the answer had {len(text)} characters; "
                f"max_result_chars is {limit}]")
    return text

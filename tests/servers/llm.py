"""A local LLM server speaking the real wire formats: OpenAI chat completions
(``POST /v1/chat/completions``, incl. parallel ``tool_calls``) and Anthropic
messages (``POST /v1/messages``, ``tool_use`` blocks). The official SDKs talk
HTTP to it exactly as they would to the real services.

A test gives it replies: a list (played in order) of response bodies, or of
``(status, body)`` / ``(status, body, headers)`` to play errors (a 429 with
``Retry-After``), or a function ``(kind, request) -> body`` (called outside
the server's lock, so one that waits, to play a stalled server, holds up no
other request). Every request is recorded (path, headers, parsed JSON body).

``GET /v1/models`` lists ``models`` (OpenAI's model list); with ``api_key``
set, a request without ``Authorization: Bearer <api_key>`` gets a 401 as
OpenAI answers it."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


def openai_reply(text: str | None = None, tool_calls: list[tuple[str, Any]] | None = None, *,
                 model: str = "gpt-test", usage: tuple[int, int] = (10, 5)) -> dict:
    """A chat.completion body. ``tool_calls``: (name, arguments) with
    arguments as JSON text or an object (encoded here)."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{next(_ids)}", "type": "function",
             "function": {"name": name,
                          "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for name, args in tool_calls]
    return {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                      "total_tokens": usage[0] + usage[1]}}


def anthropic_reply(text: str | None = None, tool_calls: list[tuple[str, dict]] | None = None, *,
                    model: str = "claude-test", usage: tuple[int, int] = (10, 5)) -> dict:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args in tool_calls or []:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name,
                        "input": args})
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def error_body(kind: str, status: int, message: str) -> dict:
    if kind == "anthropic":
        etype = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": etype, "message": message}}
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


class LlmServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[Any] | Callable[[str, dict], Any] = []
        self.models: list[str] = ["gpt-test", "gpt-test-mini"]
        self.api_key: str | None = None
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append({"kind": "models", "path": path, "headers": headers,
                                            "body": None})
                if path != "/v1/models":
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                if server.api_key is not None \
                        and headers.get("authorization") != f"Bearer {server.api_key}":
                    given = headers.get("authorization", "")[7:]
                    self._send(401, {"error": {
                        "message": f"Incorrect API key provided: {given}.",
                        "type": "invalid_request_error", "param": None,
                        "code": "invalid_api_key"}})
                    return
                self._send(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 1700000000, "owned_by": "test"}
                    for m in server.models]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                path = self.path.split("?")[0]
                if path.endswith("/chat/completions"):
                    kind = "openai"
                elif path.endswith("/messages"):
                    kind = "anthropic"
                else:
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                status, payload, headers = server._next(kind, body, dict(self.headers), path)
                self._send(status, payload, headers)

            def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, str(value))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a request-timeout test): expected

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _next(self, kind: str, body: dict, headers: dict, path: str) -> tuple[int, Any, dict]:
        with self._lock:
            self.requests.append({"kind": kind, "path": path,
                                  "headers": {k.lower(): v for k, v in headers.items()},
                                  "body": body})
            replies = self.replies
            if callable(replies):
                reply = None
            elif replies:
                reply = replies.pop(0)
            else:
                reply = (500, error_body(kind, 500, "the test server has no reply left"))
        if callable(replies):
            reply = replies(kind, body)
        if isinstance(reply, tuple):
            status, payload, *extra = reply
            return status, payload, (extra[0] if extra else {})
        return 200, reply, {}

    def __enter__(self) -> LlmServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

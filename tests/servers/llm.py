"""A local LLM server speaking the real wire formats: OpenAI chat completions
(``POST /v1/chat/completions``, incl. parallel ``tool_calls``) and Anthropic
messages (``POST /v1/messages``, ``tool_use`` blocks). The official SDKs talk
HTTP to it exactly as they would to the real services.

A test gives it replies: a list (played in order) of response bodies, or of
``(status, body)`` / ``(status, body, headers)`` to play errors (a 429 with
``Retry-After``), or a function ``(kind, request) -> body`` (called outside
the server's lock, so one that waits, to play a stalled server, holds up no
other request). Every request is recorded (path, headers, parsed JSON body).

A request that asks ``stream: true`` is answered as the service streams it
(server-sent events, chunked): a body from ``openai_reply`` /
``anthropic_reply`` is cut into pieces (its text in ``stream_pieces``
pieces, tool-call arguments in a few), or a ``Stream`` reply says how
(its pieces, a drop half way, a hold before the last piece). With
``streaming = False`` the server ignores ``stream`` and answers plain
JSON, as a server that cannot stream does.

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
                 model: str = "gpt-test", usage: tuple[int, int] = (10, 5),
                 cached: int = 0) -> dict:
    """A chat.completion body. ``tool_calls``: (name, arguments) with
    arguments as JSON text or an object (encoded here). ``cached``: prompt
    tokens read from the provider's cache (``prompt_tokens_details``)."""
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
                      "total_tokens": usage[0] + usage[1],
                      **({"prompt_tokens_details": {"cached_tokens": cached}} if cached else {})}}


def anthropic_reply(text: str | None = None, tool_calls: list[tuple[str, dict]] | None = None, *,
                    model: str = "claude-test", usage: tuple[int, int] = (10, 5),
                    cached: int = 0) -> dict:
    """A Message body; ``usage[0]`` counts the input outside the prompt
    cache (as Anthropic does) and ``cached`` what was read from it."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args in tool_calls or []:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name,
                        "input": args})
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                      **({"cache_read_input_tokens": cached} if cached else {})}}


class Stream:
    """A streamed reply: ``body`` (as ``openai_reply`` / ``anthropic_reply``
    make it) sent with its text in ``pieces`` (a list of texts that make up
    the body's text, or a number of pieces). ``drop_after``: the connection
    closes after that many text pieces, with no end (a stream broken half
    way). ``hold``: a threading.Event the server waits for before the last
    text piece (a test looks at the partial answer meanwhile)."""

    def __init__(self, body: dict, pieces: int | list[str] = 5, *,
                 drop_after: int | None = None, hold: threading.Event | None = None) -> None:
        self.body = body
        self.pieces = pieces
        self.drop_after = drop_after
        self.hold = hold


def split_text(text: str, pieces: int | list[str]) -> list[str]:
    if isinstance(pieces, list):
        assert "".join(pieces) == text, "the pieces must make up the body's text"
        return list(pieces)
    if not text:
        return []
    n = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(text[at:at + step])
        at += step
    return out


def _arg_pieces(arguments: str) -> list[str]:
    third = max(1, len(arguments) // 3)
    return [arguments[i:i + third] for i in range(0, len(arguments), third)] or [""]


def openai_events(body: dict, pieces: int | list[str]) -> list[tuple[str | None, Any]]:
    """chat.completion.chunk events for a chat.completion body (usage in a
    last chunk with no choices, as ``stream_options.include_usage`` asks)."""
    choice = body["choices"][0]
    message = choice["message"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
            "model": body["model"]}

    def chunk(delta: dict, finish: str | None = None) -> tuple[None, dict]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                           "finish_reason": finish}]}

    events: list[tuple[str | None, Any]] = [chunk({"role": "assistant", "content": ""})]
    events += [("text", chunk({"content": t})[1]) for t in split_text(message.get("content") or "", pieces)]
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": fn["name"], "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": a}}]})
                   for a in _arg_pieces(fn["arguments"])]
    events.append(chunk({}, choice["finish_reason"]))
    events.append((None, {**base, "choices": [], "usage": body["usage"]}))
    events.append((None, "[DONE]"))
    return events


def anthropic_events(body: dict, pieces: int | list[str]) -> list[tuple[str | None, Any]]:
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [(None, {"type": "message_start", "message": start})]
    for i, block in enumerate(body["content"]):
        if block["type"] == "text":
            events.append((None, {"type": "content_block_start", "index": i,
                                  "content_block": {"type": "text", "text": ""}}))
            events += [("text", {"type": "content_block_delta", "index": i,
                                 "delta": {"type": "text_delta", "text": t}})
                       for t in split_text(block["text"], pieces)]
        else:
            events.append((None, {"type": "content_block_start", "index": i,
                                  "content_block": {"type": "tool_use", "id": block["id"],
                                                    "name": block["name"], "input": {}}}))
            events += [(None, {"type": "content_block_delta", "index": i,
                               "delta": {"type": "input_json_delta", "partial_json": a}})
                       for a in _arg_pieces(json.dumps(block["input"]))]
        events.append((None, {"type": "content_block_stop", "index": i}))
    events.append((None, {"type": "message_delta",
                          "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                          "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append((None, {"type": "message_stop"}))
    return events


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
        #: False: a server that cannot stream (plain JSON whatever is asked).
        self.streaming = True
        #: Pieces a plain body's text is streamed in.
        self.stream_pieces = 5
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
                if isinstance(payload, Stream) or (
                        status == 200 and body.get("stream") is True and server.streaming):
                    if not isinstance(payload, Stream):
                        payload = Stream(payload, server.stream_pieces)
                    if body.get("stream") is True and server.streaming:
                        self._stream(kind, payload)
                        return
                    payload = payload.body
                self._send(status, payload, headers)

            def _stream(self, kind: str, reply: Stream) -> None:
                make = openai_events if kind == "openai" else anthropic_events
                events = make(reply.body, reply.pieces)
                texts = sum(1 for tag, _ in events if tag == "text")
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    sent = 0
                    for tag, data in events:
                        if tag == "text":
                            if reply.drop_after is not None and sent >= reply.drop_after:
                                self.close_connection = True  # no end: a broken stream
                                return
                            if sent == texts - 1 and reply.hold is not None:
                                reply.hold.wait(30)
                            sent += 1
                        text = data if isinstance(data, str) else json.dumps(data)
                        name = "" if kind == "openai" else f"event: {data['type']}\n"
                        frame = f"{name}data: {text}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

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

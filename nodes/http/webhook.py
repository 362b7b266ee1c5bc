"""``trigger.webhook`` and ``http.response``: a flow that answers HTTP
requests.

The trigger serves one path on an in-process asyncio server (no web
framework: a small HTTP/1.1 reader for the request line, the headers and a
Content-Length or chunked body). Each request becomes a message; the
message carries a private key, ``_http_res``, under which the request waits
in a dict shared by the run's nodes (``run_resource``) until an
``http.response`` node answers it, or until response_timeout_seconds pass
(504)."""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import math
import os
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote

from runtime.arguments import event_args
from runtime.message import Message, new_msgid
from runtime.node import CUSTOM, DROP, MESSAGE, Node, NodeConfigError, Param, node
from runtime.text import NotFiniteError, finite_loads, non_finite_place, printable

from .request import header_pairs

#: The run's requests waiting for an answer: id -> future of a Reply.
PENDING_KEY = "http.webhook.pending"
RESPONSE_KEY = "_http_res"

METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE", "ANY"]
DEFAULT_PORT = 8181
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_PENDING = 100
DEFAULT_RESPONSE_TIMEOUT = 30.0
#: The request line and headers together; more is answered 431.
MAX_HEAD_BYTES = 32 * 1024
MAX_HEADER_COUNT = 100
#: Seconds a client may take to send a request's head or body, and an idle
#: kept-alive connection may stay open.
READ_TIMEOUT = 30.0
#: What a client may still send after an early answer (see _linger).
LINGER_SECONDS = 2.0
LINGER_BYTES = 4 * 1024 * 1024
#: Seconds the open connections get to finish when the run stops.
CLOSE_GRACE = 2.0
MAX_RESPONSE_HEADERS = 100
#: Open connections allowed: twice max_pending, at least this many.
MIN_CONNECTIONS = 64
QUOTE_LIMIT = 200
#: Characters of a body (and of a header value) shown when a rerun says
#: what it would answer.
SHOWN_BODY = 2000

_ids = itertools.count(1)
_prefix = os.urandom(3).hex()


class Reply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class HttpError(Exception):
    """A request answered by the server itself (400, 404, 413, ...)."""

    def __init__(self, status: int, text: str, headers: list[tuple[str, str]] | None = None):
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = headers or []


class Request:
    __slots__ = ("method", "path", "query", "version", "headers", "keep_alive")

    def __init__(self, method: str, path: str, query: dict[str, Any], version: str,
                 headers: dict[str, str]) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.version = version
        self.headers = headers
        conn = headers.get("connection", "").lower()
        self.keep_alive = "close" not in conn if version == "HTTP/1.1" else "keep-alive" in conn


def parse_head(head: bytes) -> Request:
    """The request line and headers (``head`` ends with the blank line).
    Header names come out in lower case; repeated headers are joined with
    ', '. Raises HttpError for anything that is not plain HTTP/1.x."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise HttpError(400, "the request head is not text") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if not method.isalpha() or not method.isupper():
        raise HttpError(400, "malformed method")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if not target.startswith("/"):
        raise HttpError(400, "the request target must be a path")
    headers: dict[str, str] = {}
    count = 0
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t":
            raise HttpError(400, "folded header lines are not accepted")
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise HttpError(400, "malformed header line")
        count += 1
        if count > MAX_HEADER_COUNT:
            raise HttpError(431, f"more than {MAX_HEADER_COUNT} headers")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    raw_path, _, raw_query = target.partition("?")
    query: dict[str, Any] = {}
    for k, vs in parse_qs(raw_query, keep_blank_values=True).items():
        query[k] = vs[0] if len(vs) == 1 else vs
    return Request(method, unquote(raw_path), query, version, headers)


def response_bytes(status: int, headers: list[tuple[str, str]], body: bytes, *,
                   keep_alive: bool, head_only: bool = False) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}".rstrip()]
    names = set()
    for name, value in headers:
        lname = name.lower()
        if lname in ("content-length", "connection", "transfer-encoding"):
            continue  # framing is the server's
        names.add(lname)
        lines.append(f"{name}: {value}")
    if "content-type" not in names and body:
        lines.append("Content-Type: text/plain; charset=utf-8")
    lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
    return out if head_only else out + body


@node("trigger.webhook", name="Webhook", category="Triggers", icon="webhook", color="#d35400",
      inputs=())
class Webhook(Node):
    """Serves an HTTP endpoint while the flow runs: each request to its
    path becomes a message (payload: the JSON body, form fields or text; a
    request without a body: its query parameters; ``req``: method, path,
    query and headers). Answer it with an HTTP Response node; a request with
    no answer within response_timeout_seconds gets 504."""

    path = Param(str, "The path served, e.g. /orders", default="/webhook", allow=CUSTOM)
    method = Param(str, "The HTTP method accepted (ANY: every method); others get 405",
                   choices=METHODS, default="POST", allow=CUSTOM)
    host = Param(str, "The address to listen on: 127.0.0.1 only this machine; 0.0.0.0 every "
                 "network (then set a secret)", default="127.0.0.1", allow=CUSTOM,
                 group="connection")
    port = Param(int, "The port to listen on; 0: any free port (the status shows which)",
                 default=DEFAULT_PORT, allow=CUSTOM, group="connection")
    response_timeout_seconds = Param(float, "Seconds a request waits for an HTTP Response "
                                     "node before it is answered 504",
                                     default=DEFAULT_RESPONSE_TIMEOUT, allow=CUSTOM,
                                     group="advanced")
    secret_header = Param(str, "A header every request must carry with the secret's value, "
                          "e.g. X-Webhook-Secret; empty: no check", default="", allow=CUSTOM,
                          group="connection")
    secret = Param("secret", "The value secret_header must hold, as an environment variable "
                   "or keyring entry; a request without it gets 401", optional=True,
                   group="connection")
    max_body_bytes = Param(int, "Largest request body accepted; larger gets 413",
                           default=DEFAULT_MAX_BODY, allow=CUSTOM, group="advanced")
    max_pending = Param(int, "Most requests waiting for their answer at once; more get 503",
                        default=DEFAULT_MAX_PENDING, allow=CUSTOM, group="advanced")

    @classmethod
    def check(cls, params):
        problems: list[tuple[str, str]] = []

        def value(name: str) -> Any:
            p = params.get(name)
            return p.value if p is not None else None

        port = value("port")
        if isinstance(port, int) and not 0 <= port < 65536:
            problems.append(("port", "port must be 0-65535 (0: any free port)"))
        path = value("path")
        if isinstance(path, str) and not path.startswith("/"):
            problems.append(("path", "path must start with /"))
        timeout = value("response_timeout_seconds")
        if isinstance(timeout, (int, float)) and not 0 < timeout < math.inf:
            problems.append(("response_timeout_seconds",
                             "response_timeout_seconds must be more than 0"))
        for name in ("max_body_bytes", "max_pending"):
            v = value(name)
            if isinstance(v, int) and v < (0 if name == "max_body_bytes" else 1):
                problems.append((name, f"{name} must be at least "
                                 f"{0 if name == 'max_body_bytes' else 1}"))
        if bool(value("secret_header")) != bool(value("secret")):
            problems.append(("secret_header", "set both secret_header and secret, or neither"))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        #: Where the server listens once it does (port 0 picks one).
        self.bound_port: int | None = None
        self.url: str = ""
        self.listening = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._busy: set[asyncio.StreamWriter] = set()  # in the middle of a request
        self._mine: set[str] = set()
        self._pending: dict[str, asyncio.Future] = {}
        self._closing = False

    # -- serving --------------------------------------------------------------
    async def generate(self) -> None:
        self._path = self.path.get() or "/webhook"
        if not self._path.startswith("/"):
            raise NodeConfigError("path must start with /")
        self._method = self.method.get() or "POST"
        self._timeout = float(self.response_timeout_seconds.get() or DEFAULT_RESPONSE_TIMEOUT)
        if not 0 < self._timeout < math.inf:  # NaN too
            raise NodeConfigError("response_timeout_seconds must be more than 0")
        self._max_body = int(self.max_body_bytes.get() or 0) \
            if self.max_body_bytes.get() is not None else DEFAULT_MAX_BODY
        self._max_pending = int(self.max_pending.get() or DEFAULT_MAX_PENDING)
        header = (self.secret_header.get() or "").strip().lower()
        secret = self.secret.get()
        if bool(header) != bool(secret):
            raise NodeConfigError("secret_header: set both secret_header and secret, or neither")
        self._secret_header = header
        self._secret = secret.encode("utf-8") if secret else None
        self._pending = self.run_resource(PENDING_KEY, dict)
        host = self.host.get() or "127.0.0.1"
        port = self.port.get()
        port = DEFAULT_PORT if port is None else int(port)
        try:
            self._server = await asyncio.start_server(self._connection, host, port,
                                                      limit=MAX_HEAD_BYTES)
        except OSError as exc:
            raise NodeConfigError(
                f"port: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another "
                "port, or 0 for any free one") from None
        sock = self._server.sockets[0].getsockname()
        self.bound_port = sock[1]
        shown_host = f"[{sock[0]}]" if ":" in sock[0] else sock[0]
        self.url = f"http://{shown_host}:{self.bound_port}{self._path}"
        text = f"listening on {self.url}"
        self.show_status(text, "green", "running")
        self.log(text)
        self.listening.set()
        try:
            await asyncio.Event().wait()  # serve until the run stops
        finally:
            await self._shutdown()

    async def close(self) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._server is not None:
            self._server.close()
        # Requests still waiting are answered, then their connections end.
        for rid in list(self._mine):
            fut = self._pending.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(Reply(503, [], b"the flow stopped before answering"))
        for writer in list(self._writers - self._busy):
            writer.transport.abort()  # idle keep-alive connections
        handlers = [t for t in self._handlers if not t.done()]
        if handlers:
            # The busy ones write their answer (503 if the flow had none yet).
            await asyncio.wait(handlers, timeout=CLOSE_GRACE)
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if self.listening.is_set():
            self.show_status("stopped", "grey", "idle")

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self._writers.add(writer)
        try:
            if len(self._writers) > max(2 * self._max_pending, MIN_CONNECTIONS):
                # Idle connections are bounded too (each also ends after
                # READ_TIMEOUT without a request).
                await self._write(writer, Reply(503, [("Retry-After", "1")],
                                                b"too many open connections"), keep=False)
                return
            keep = not self._closing
            while keep:
                self._busy.discard(writer)
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
                except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                    return
                except asyncio.LimitOverrunError:
                    await self._write(writer, Reply(431, [], b"the request head is too large"),
                                      keep=False)
                    return
                self._busy.add(writer)
                keep = await self._request(head, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._busy.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _request(self, head: bytes, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        """Serve one request; whether the connection stays open."""
        head_only = False
        try:
            req = parse_head(head)
            head_only = req.method == "HEAD"
            if req.path != self._path:
                raise HttpError(404, f"nothing is served at {_quote(req.path)}")
            if self._method != "ANY" and req.method != self._method:
                raise HttpError(405, f"{req.method} is not accepted here; use {self._method}",
                                [("Allow", self._method)])
            if self._secret is not None:
                got = req.headers.get(self._secret_header, "").encode("utf-8", "replace")
                if not hmac.compare_digest(got, self._secret):
                    raise HttpError(401, "missing or wrong secret")
            if len(self._mine) >= self._max_pending:
                raise HttpError(503, f"too many requests waiting (max_pending="
                                f"{self._max_pending}); try again later",
                                [("Retry-After", "1")])
            body = await self._body(req, reader, writer)
            payload = _payload(req, body)
        except HttpError as exc:
            await self._write(writer, Reply(exc.status, exc.headers, exc.text.encode()),
                              keep=False, head_only=head_only)
            await _linger(reader, writer)
            return False
        keep = req.keep_alive and not self._closing
        rid = f"{_prefix}.{next(_ids):x}"
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._mine.add(rid)
        headers = dict(req.headers)
        headers.pop(self._secret_header, None)  # never into the message, events or history
        msg = Message(_msgid=new_msgid(), payload=payload,
                      req={"method": req.method, "path": req.path, "query": req.query,
                           "headers": headers})
        msg[RESPONSE_KEY] = rid
        try:
            self.send(msg)
            reply = await asyncio.wait_for(fut, self._timeout)
        except TimeoutError:
            reply = Reply(504, [], f"the flow did not answer within response_timeout_seconds="
                                   f"{self._timeout:g}".encode())
            keep = False
        finally:
            self._pending.pop(rid, None)
            self._mine.discard(rid)
        await self._write(writer, reply, keep=keep and not self._closing, head_only=head_only)
        return keep and not self._closing

    async def _body(self, req: Request, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> bytes:
        te = req.headers.get("transfer-encoding", "").lower()
        length = req.headers.get("content-length")
        limit = self._max_body
        too_big = HttpError(413, f"the body is larger than max_body_bytes={limit}")
        if te and length is not None:
            raise HttpError(400, "both Transfer-Encoding and Content-Length")
        if te and te != "chunked":
            raise HttpError(501, f"Transfer-Encoding {_quote(te)} is not supported")
        if length is not None:
            if not length.isdigit():
                raise HttpError(400, "malformed Content-Length")
            n = int(length)
            if n > limit:
                raise too_big
        if req.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if not te:
            if not length or int(length) == 0:
                return b""
            try:
                return await asyncio.wait_for(reader.readexactly(int(length)), READ_TIMEOUT)
            except TimeoutError:
                raise HttpError(408, "the body did not arrive in time") from None
        try:
            return await asyncio.wait_for(_read_chunked(reader, limit, too_big), READ_TIMEOUT)
        except TimeoutError:
            raise HttpError(408, "the body did not arrive in time") from None

    async def _write(self, writer: asyncio.StreamWriter, reply: Reply, *, keep: bool,
                     head_only: bool = False) -> None:
        try:
            writer.write(response_bytes(reply.status, reply.headers, reply.body,
                                        keep_alive=keep, head_only=head_only))
            await writer.drain()
        except ConnectionError:
            pass


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an answer sent before the body was read (401, 413, ...): stop
    writing and read what the client still sends, a bounded amount, before
    closing. Closing a socket with unread data resets the connection, and
    the client would see the reset instead of the answer."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(LINGER_SECONDS):
            total = 0
            while total < LINGER_BYTES:
                data = await reader.read(64 * 1024)
                if not data:
                    return
                total += len(data)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass


async def _read_chunked(reader: asyncio.StreamReader, limit: int, too_big: HttpError) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(400, "malformed chunk") from None
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise HttpError(400, "malformed chunk size") from None
        if size == 0:
            break
        total += size
        if total > limit:
            raise too_big
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise HttpError(400, "malformed chunk")
    while True:  # trailers, up to the blank line
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, "the trailers are too large") from None
        if line == b"\r\n":
            return b"".join(parts)


def _payload(req: Request, body: bytes) -> Any:
    if not body:
        return req.query
    ctype = req.headers.get("content-type", "").lower()
    charset = "utf-8"
    for part in ctype.split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k == "charset" and v:
            charset = v.strip('"')
    if "json" in ctype:
        try:
            # NaN, Infinity and 1e400 are not JSON: a payload holding one
            # could not be answered or written as JSON later.
            return finite_loads(body.decode(charset, errors="strict"))
        except NotFiniteError as exc:
            raise HttpError(400, f"the body is not valid JSON: {exc}") from None
        except (ValueError, LookupError, RecursionError):
            raise HttpError(400, "the body is not valid JSON") from None
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if ctype.startswith("application/x-www-form-urlencoded"):
        return {k: vs[0] if len(vs) == 1 else vs
                for k, vs in parse_qs(text, keep_blank_values=True).items()}
    return text


def _quote(text: str) -> str:
    text = printable(text)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"


@node("http.response", name="HTTP Response", category="HTTP", icon="http-response",
      color="#3a9d8f", outputs=())
class HttpResponse(Node):
    """Answers the request that a Webhook trigger turned into this message:
    a status code, headers and a body (by default the payload: text as is,
    anything else as JSON). In a rerun from a node the request was the
    original run's: it then says what it would answer, as debug output."""

    status = Param(int, "The HTTP status code", default=200, allow=CUSTOM | MESSAGE)
    headers = Param("json", "Response headers as an object, {\"Name\": \"value\"}", default={},
                    allow=CUSTOM | MESSAGE, group="advanced")
    body = Param("json", "The response body", scope=MESSAGE, path="payload",
                 allow=CUSTOM | MESSAGE, optional=True)
    body_type = Param(str, "auto: text as is, anything else as JSON; json: always JSON; "
                      "text: always text", choices=["auto", "json", "text"], default="auto",
                      allow=CUSTOM | MESSAGE, group="advanced")

    @classmethod
    def check(cls, params):
        p = params.get("status")
        if p is not None and isinstance(p.value, int) and not 100 <= p.value <= 599:
            return [("status", "status must be 100-599")]
        return []

    def on_message(self, msg: Message) -> Any:
        rid = msg.get(RESPONSE_KEY)
        if not isinstance(rid, str):
            raise NodeConfigError(
                "this message did not come from a Webhook trigger (it has no _http_res), so "
                "there is no request to answer")
        status = self.status.get(msg)
        if isinstance(status, str) and status.isdigit():
            status = int(status)
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise NodeConfigError(f"status: expected a number 100-599, got "
                                  f"{_quote(json.dumps(status, default=str))}")
        headers = _response_headers(self.headers.get(msg))
        body = self.body.get(msg)
        body_type = self.body_type.get(msg) or "auto"
        if body is None:
            data = b""
        elif body_type == "text" or (body_type == "auto" and isinstance(body, str)):
            data = (body if isinstance(body, str) else _json_body(body)).encode("utf-8")
            _default_type(headers, "text/plain; charset=utf-8")
        else:
            data = _json_body(body).encode("utf-8")
            _default_type(headers, "application/json")
        pending = self.run_resource(PENDING_KEY, dict)
        fut = pending.pop(rid, None)
        if fut is None and self.replay_of:
            # A replayed message: its request was the original run's.
            self._would_answer(msg, status, headers, data)
            return DROP
        if fut is None or fut.done():
            raise NodeConfigError(
                "the request of this message is no longer waiting: it was answered already, "
                "or it passed the Webhook's response_timeout_seconds (it got 504), or the run "
                "is stopping")
        fut.set_result(Reply(status, headers, data))
        return DROP

    def _would_answer(self, msg: Message, status: int, headers: list[tuple[str, str]],
                      data: bytes) -> None:
        """In a rerun from a node, the reply this node would send, as its
        debug output: ``runs show`` prints it and ``runs diff`` compares it,
        so a changed status or body shows without a client to send it to.
        Secrets are masked and long texts cut, as in every event."""
        ctype = next((v for k, v in headers if k.lower() == "content-type"), "")
        what = f"{status} {ctype}" if data else f"{status} (no body)"
        text = data[:4 * SHOWN_BODY + 16].decode("utf-8", errors="replace")
        self.debug({"note": f"rerun: would answer {what} (the original request was answered "
                            f"in run {self.replay_of}; nothing is sent now)",
                    "status": status,
                    "headers": event_args(dict(headers), SHOWN_BODY),
                    "body": event_args(text, SHOWN_BODY) if data else None,
                    "bytes": len(data)}, msg)
        self.show_status(f"rerun: would answer {status}", "blue", "done")


def _json_body(body: Any) -> str:
    """``body`` as JSON text, or an error naming the NaN or Infinity in
    it: JSON has neither, and a client's parser would refuse the answer."""
    try:
        return json.dumps(body, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError as exc:
        place = non_finite_place(body) if "JSON compliant" in str(exc) else None
        if place is not None:
            where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in place[0])
            raise NodeConfigError(
                f"body{printable(where)}: {place[1]} cannot be sent as JSON (JSON has no NaN or "
                "Infinity); turn it into a number or text first") from None
        raise NodeConfigError(f"body: cannot be sent as JSON ({exc})") from None
    except RecursionError as exc:
        raise NodeConfigError(f"body: cannot be sent as JSON ({exc})") from None


def _default_type(headers: list[tuple[str, str]], ctype: str) -> None:
    if not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", ctype))


def _response_headers(value: Any) -> list[tuple[str, str]]:
    return header_pairs(value, MAX_RESPONSE_HEADERS)

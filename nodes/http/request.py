"""``http.request``: one HTTP request per message, through one httpx client
per run (``run_resource("http.client", ...)``), so that connections are
pooled across the nodes and messages of a run and closed when it ends.

httpx is imported when the first request goes out, never at import: the
designer's palette imports every node package."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import mimetypes
import os
from pathlib import Path
from typing import Any

from runtime.message import MESSAGE_TYPE, TOOL_REQUEST, Message
from runtime.node import (
    AI,
    CUSTOM,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    redact,
    register_secret,
)

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
#: Methods with no effect on the server: never in the effects ledger.
SAFE_METHODS = frozenset({"GET", "HEAD"})
BODY_TYPES = ["none", "json", "text", "form", "file"]
RESPONSE_AS = ["auto", "json", "text", "file"]
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_CONCURRENT = 16
MAX_CONCURRENT_LIMIT = 1000
#: Redirects followed for one request; one more is an error.
MAX_REDIRECTS = 10
#: Request headers one message may set, query parameters it may add,
#: entries of allowed_hosts.
MAX_HEADERS = 100
MAX_QUERY = 1000
MAX_ALLOWED_HOSTS = 100
QUOTE_LIMIT = 200
FILE_CHUNK = 64 * 1024
CLIENT_KEY = "http.client"
#: A second client for nodes that turn TLS verification off: verification is
#: a setting of httpx's connection pool, not of one request.
INSECURE_CLIENT_KEY = "http.client.insecure"


@node("http.request", name="HTTP Request", category="HTTP", icon="http", color="#3a9d8f",
      tool=Tool("http_request", "Make an HTTP request to a web API and return its status, "
                "headers and body"))
class HttpRequest(Node):
    """Sends an HTTP request (GET, POST, ...) and puts the response's body in
    the payload, its status code in ``status`` and its headers in
    ``response_headers``. A status of 4xx or 5xx is a normal result unless
    fail_on_error_status is on. As an agent's tool it may reach only the
    hosts listed in allowed_hosts."""

    method = Param(str, "HTTP method", choices=METHODS, default="GET",
                   allow=AI | CUSTOM | MESSAGE)
    url = Param(str, "The URL to request, starting with http:// or https://", scope=AI,
                allow=AI | CUSTOM | MESSAGE)
    query = Param("json", "Query parameters as an object, {\"name\": value or [values]}; added "
                  "to those already in the URL", default={}, allow=AI | CUSTOM | MESSAGE)
    headers = Param("json", "Request headers as an object, {\"Name\": \"value\"}", default={},
                    allow=CUSTOM | MESSAGE)
    body_type = Param(str, "How the body is sent: none; json (any JSON value); text; form (an "
                      "object of fields, URL-encoded); file (the file at body_file, as is)",
                      choices=BODY_TYPES, default="json", allow=CUSTOM | MESSAGE)
    body = Param("json", "The request body (json: any value; text: text; form: an object of "
                 "fields); empty sends no body", default=None, optional=True, path="payload",
                 allow=AI | CUSTOM | MESSAGE, visible_if={"body_type": ["json", "text", "form"]})
    body_file = Param(str, "body_type file: the path of the file to send", default="",
                      allow=CUSTOM | MESSAGE, visible_if={"body_type": ["file"]})
    auth = Param(str, "Authentication: none; basic (username and password); bearer (token)",
                 choices=["none", "basic", "bearer"], default="none", allow=CUSTOM,
                 group="authentication")
    username = Param(str, "Basic auth: the user name", default="", allow=CUSTOM | MESSAGE,
                     group="authentication", visible_if={"auth": ["basic"]})
    password = Param("secret", "Basic auth: the password, as an environment variable or "
                     "keyring entry", optional=True,
                     group="authentication", visible_if={"auth": ["basic"]})
    token = Param("secret", "Bearer auth: the token, as an environment variable or keyring "
                  "entry", optional=True, group="authentication", visible_if={"auth": ["bearer"]})
    response_as = Param(str, "How the response body is read: auto (JSON when the server says "
                        "it is JSON, else text); json; text; file (written to response_file)",
                        choices=RESPONSE_AS, default="auto", allow=CUSTOM | MESSAGE)
    response_file = Param(str, "response_as file: where to write the body (replaced if it "
                          "exists)", default="", allow=CUSTOM | MESSAGE,
                          visible_if={"response_as": ["file"]})
    fail_on_error_status = Param(bool, "Treat a 4xx or 5xx status as an error (off: it is a "
                                 "normal result, read from status)", default=False,
                                 allow=CUSTOM, group="advanced")
    timeout_seconds = Param(float, "Most seconds one request may take, redirects and reading "
                            "the body included", default=DEFAULT_TIMEOUT, allow=CUSTOM,
                            group="advanced")
    follow_redirects = Param(bool, f"Follow redirects (at most {MAX_REDIRECTS})", default=True,
                             allow=CUSTOM, group="advanced")
    verify_tls = Param(bool, "Check the server's TLS certificate (turn off only for a test "
                       "server you trust)", default=True, allow=CUSTOM, group="advanced")
    max_response_bytes = Param(int, "Largest response body read; a longer one is cut off "
                               "with an error", default=DEFAULT_MAX_RESPONSE_BYTES,
                               allow=CUSTOM, group="advanced")
    max_concurrent = Param(int, "Most requests this node has open at once; later messages "
                           "wait their turn", default=DEFAULT_MAX_CONCURRENT, allow=CUSTOM,
                           group="advanced")
    allowed_hosts = Param(str, "Hosts this node may reach, comma-separated (example.com, "
                          "api.example.com:8443, *.example.com). Empty: any host for plain "
                          "messages, none as an agent's tool", default="", allow=CUSTOM)

    response_body = Output("json", "The response body (parsed JSON, text, or the file "
                           "written)")
    status = Output(int, "The HTTP status code", path="status")
    response_headers = Output("json", "The response headers (names in lower case)",
                              path="response_headers")

    @classmethod
    def check(cls, params):
        problems: list[tuple[str, str]] = []

        def value(name: str) -> Any:
            p = params.get(name)
            return p.value if p is not None and p.scope.value == "custom" else None

        timeout = value("timeout_seconds")
        if isinstance(timeout, (int, float)) and not 0 < timeout < math.inf:
            problems.append(("timeout_seconds", "timeout_seconds must be more than 0"))
        limit = value("max_response_bytes")
        if isinstance(limit, int) and limit < 1:
            problems.append(("max_response_bytes", "max_response_bytes must be at least 1"))
        conc = value("max_concurrent")
        if isinstance(conc, int) and not 1 <= conc <= MAX_CONCURRENT_LIMIT:
            problems.append(("max_concurrent",
                             f"max_concurrent must be 1-{MAX_CONCURRENT_LIMIT}"))
        hosts = value("allowed_hosts")
        if isinstance(hosts, str):
            try:
                parse_allowed_hosts(hosts)
            except NodeConfigError as exc:
                problems.append(("allowed_hosts", str(exc)))
        url = value("url")
        if isinstance(url, str) and url.strip():
            scheme = url.strip().partition(":")[0].lower()
            if scheme not in ("http", "https") or "://" not in url:
                problems.append(("url", "url must start with http:// or https://"))
        if value("response_as") == "file" and params.get("response_file") is None:
            problems.append(("response_file", "response_as is file: set response_file"))
        if value("body_type") == "file" and params.get("body_file") is None:
            problems.append(("body_file", "body_type is file: set body_file"))
        auth = value("auth")
        if auth == "basic":
            if params.get("username") is None:
                problems.append(("username", "basic auth needs a username"))
            if value("password") is None:
                problems.append(("password", "basic auth needs a password"))
        if auth == "bearer" and value("token") is None:
            problems.append(("token", "bearer auth needs a token"))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        # Designer-only settings, read once: they cannot change per message.
        self._hosts = parse_allowed_hosts(self.allowed_hosts.get() or "")
        conc = self.max_concurrent.get()
        conc = DEFAULT_MAX_CONCURRENT if conc is None else int(conc)
        if not 1 <= conc <= MAX_CONCURRENT_LIMIT:
            raise NodeConfigError(f"max_concurrent must be 1-{MAX_CONCURRENT_LIMIT}")
        self._sem = asyncio.Semaphore(conc)
        timeout = self.timeout_seconds.get()
        self._timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        if not 0 < self._timeout < math.inf:  # NaN too
            raise NodeConfigError("timeout_seconds must be a number more than 0")
        limit = self.max_response_bytes.get()
        self._limit = DEFAULT_MAX_RESPONSE_BYTES if limit is None else int(limit)
        if self._limit < 1:
            raise NodeConfigError("max_response_bytes must be at least 1")
        self._verify = self.verify_tls.get() is not False
        self._follow = self.follow_redirects.get() is not False
        self._fail_on_status = bool(self.fail_on_error_status.get())
        self._last_status: int | None = None

    async def on_message(self, msg: Message) -> None:
        import httpx

        as_tool = msg.get(MESSAGE_TYPE) == TOOL_REQUEST
        url = _parse_url(httpx, self.url.get(msg))
        if as_tool and not self._hosts:
            raise NodeConfigError(
                "allowed_hosts is empty: as an agent's tool this node reaches only the hosts "
                "the designer lists in allowed_hosts (comma-separated), and none is listed")
        if self._hosts:
            _check_host(url, self._hosts, f"url: {_shown(url)}:")
        method = str(self.method.get(msg) or "GET").upper()
        if method not in METHODS:
            raise NodeConfigError(f"method: '{_quote(method)}' is not one of {', '.join(METHODS)}")
        headers = _headers(self.headers.get(msg))
        query = _query(self.query.get(msg))
        if query:
            url = url.copy_merge_params(query)
        content = self._body(msg, method, headers)
        effect = None
        if method not in SAFE_METHODS:
            # A run that may run twice (queue mode): the response an earlier
            # attempt recorded instead of a second request; else the same
            # Idempotency-Key on every attempt, for the server to see a repeat.
            effect = self.effect_once("http", method, str(url), self._effect_body(content, msg))
            if effect.done and isinstance(effect.result, dict):
                self._replay(msg, effect.result, f"{method} {_shown(url)}")
                return
            if effect.key and not any(k.lower() == "idempotency-key" for k in headers):
                headers["Idempotency-Key"] = effect.key
        self._auth(msg, headers)
        response_as = self.response_as.get(msg) or "auto"
        if response_as not in RESPONSE_AS:
            raise NodeConfigError(f"response_as: '{_quote(str(response_as))}' is not one of "
                                  f"{', '.join(RESPONSE_AS)}")
        target = None
        if response_as == "file":
            target = str(self.response_file.get(msg) or "")
            if not target:
                raise NodeConfigError("response_file: response_as is file but no file is named")

        client = self._client(httpx)
        shown = f"{method} {_shown(url)}"
        async with self._sem:  # the timeout counts from here: waiting for a turn is not the request's
            try:
                async with asyncio.timeout(self._timeout):
                    request = client.build_request(
                        method, url, headers=headers,
                        timeout=httpx.Timeout(self._timeout), **content)
                    response = await self._send(client, request, shown)
                    try:
                        body = await self._read(response, method, response_as, target, shown)
                    finally:
                        await response.aclose()
            except (TimeoutError, httpx.TimeoutException):
                raise NodeConfigError(
                    f"{shown}: timed out: no complete answer within timeout_seconds="
                    f"{self._timeout:g} s") from None
            except httpx.RequestError as exc:
                raise NodeConfigError(f"{shown}: {_reason(exc)}") from None

        status = response.status_code
        if effect is not None:
            effect.record({"status": status, "reason": response.reason_phrase,
                           "headers": dict(response.headers), "body": body})
        if self._fail_on_status and status >= 400:
            excerpt = body if isinstance(body, str) else ""
            excerpt = " ".join(excerpt.split())[:QUOTE_LIMIT]
            raise NodeConfigError(f"{shown}: HTTP {status} {response.reason_phrase}"
                                  + (f": {excerpt}" if excerpt else "")
                                  + " (fail_on_error_status is on)")
        if status != self._last_status:
            self._last_status = status
            self.show_status(f"{status} {response.reason_phrase}",
                             "green" if status < 400 else "yellow", "done")
        self.response_body.set(msg, body)
        self.status.set(msg, status)
        self.response_headers.set(msg, dict(response.headers))

    def _effect_body(self, content: dict[str, Any], msg: Message) -> Any:
        """What identifies a request's body for the ledger: the form fields,
        a digest of the bytes, or the name of the file streamed."""
        if "data" in content:
            return content["data"]
        data = content.get("content")
        if isinstance(data, bytes):
            return hashlib.sha256(data).hexdigest()
        return str(self.body_file.get(msg) or "") if data is not None else None

    def _replay(self, msg: Message, done: dict[str, Any], shown: str) -> None:
        """An earlier attempt of this run sent this request: its response."""
        status = done.get("status")
        self.show_status(f"{status} {done.get('reason', '')} (an earlier attempt)",
                         "green" if isinstance(status, int) and status < 400 else "yellow", "done")
        if self._fail_on_status and isinstance(status, int) and status >= 400:
            raise NodeConfigError(f"{shown}: HTTP {status} {done.get('reason', '')} "
                                  "(fail_on_error_status is on; an earlier attempt)")
        self.response_body.set(msg, done.get("body"))
        self.status.set(msg, status)
        self.response_headers.set(msg, done.get("headers") or {})

    # -- the pieces -----------------------------------------------------------
    def _client(self, httpx: Any) -> Any:
        from http.cookiejar import CookieJar, DefaultCookiePolicy

        verify = self._verify

        def make() -> Any:
            # No cookie is kept: one client serves every node and tool call of
            # the run, and a session cookie from one must not ride along on
            # another's requests. A flow that needs one sends it in headers.
            jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
            return httpx.AsyncClient(
                verify=_tls_context(httpx) if verify else False, follow_redirects=False,
                cookies=jar,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

        async def close(client: Any) -> None:
            await client.aclose()

        return self.run_resource(CLIENT_KEY if verify else INSECURE_CLIENT_KEY, make, close)

    async def _send(self, client: Any, request: Any, shown: str) -> Any:
        """Send, following redirects by hand so that each target is checked
        against allowed_hosts before anything is sent to it."""
        for _ in range(MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True, follow_redirects=False)
            nxt = response.next_request
            if not self._follow or nxt is None:
                return response
            await response.aclose()
            if nxt.url.scheme not in ("http", "https"):
                raise NodeConfigError(f"{shown}: redirected to a {nxt.url.scheme} URL; only "
                                      "http and https are followed")
            if self._hosts:
                _check_host(nxt.url, self._hosts,
                            f"{shown}: redirected to {_shown(nxt.url)}, and the redirect was "
                            "not followed:")
            request = nxt
        raise NodeConfigError(f"{shown}: more than {MAX_REDIRECTS} redirects")

    async def _read(self, response: Any, method: str, response_as: str, target: str | None,
                    shown: str) -> Any:
        limit = self._limit
        too_big = NodeConfigError(
            f"{shown}: the response body is larger than max_response_bytes={limit}; "
            "it was cut off")
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise too_big
        if target is not None:
            return await self._to_file(response, method, target, limit, too_big)
        if method == "HEAD":
            return None
        chunks: list[bytes] = []
        total = 0
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if total > limit:
                raise too_big
            chunks.append(chunk)
        data = b"".join(chunks)
        ctype = response.headers.get("content-type", "").lower()
        wants_json = response_as == "json" or (response_as == "auto" and "json" in ctype)
        if wants_json:
            if not data.strip():
                return None
            import orjson

            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                if response_as == "json" and response.status_code < 300:
                    raise NodeConfigError(
                        f"{shown}: response_as is json but the body is not JSON "
                        f"(content-type '{_quote(ctype) or 'none'}'); choose text or auto"
                    ) from None
        return _decode(data, response.charset_encoding)

    async def _to_file(self, response: Any, method: str, target: str, limit: int,
                       too_big: NodeConfigError) -> str:
        path = Path(os.path.expanduser(target))
        tmp = path.with_name(path.name + ".part")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            total = 0
            with open(tmp, "wb") as fh:
                if method != "HEAD":
                    async for chunk in response.aiter_bytes():
                        total += len(chunk)
                        if total > limit:
                            raise too_big
                        fh.write(chunk)
            os.replace(tmp, path)
        except OSError as exc:
            raise NodeConfigError(f"response_file: cannot write {path}: "
                                  f"{exc.strerror or exc}") from None
        finally:
            if tmp.exists():
                tmp.unlink(missing_ok=True)
        return str(path)

    def _body(self, msg: Message, method: str, headers: dict[str, str]) -> dict[str, Any]:
        body_type = self.body_type.get(msg) or "json"
        if body_type not in BODY_TYPES:
            raise NodeConfigError(f"body_type: '{_quote(str(body_type))}' is not one of "
                                  f"{', '.join(BODY_TYPES)}")
        if body_type == "none" or method == "HEAD":
            return {}
        if body_type == "file":
            return self._file_body(msg, headers)
        body = self.body.get(msg)
        if body is None:
            return {}
        lower = {k.lower() for k in headers}
        if body_type == "json":
            import orjson

            try:
                data = orjson.dumps(body)
            except TypeError as exc:
                raise NodeConfigError(f"body: cannot be sent as JSON ({exc})") from None
            if "content-type" not in lower:
                headers["Content-Type"] = "application/json"
            return {"content": data}
        if body_type == "text":
            if not isinstance(body, str):
                import json

                body = json.dumps(body, ensure_ascii=False)
            if "content-type" not in lower:
                headers["Content-Type"] = "text/plain; charset=utf-8"
            return {"content": body.encode("utf-8")}
        # form
        if not isinstance(body, dict):
            raise NodeConfigError(f"body: body_type form needs an object of fields, got "
                                  f"{_kind(body)}")
        return {"data": _fields("body", body, MAX_QUERY)}

    def _file_body(self, msg: Message, headers: dict[str, str]) -> dict[str, Any]:
        name = str(self.body_file.get(msg) or "")
        if not name:
            raise NodeConfigError("body_file: body_type is file but no file is named")
        path = Path(os.path.expanduser(name))
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise NodeConfigError(f"body_file: cannot read {path}: {exc.strerror or exc}") from None
        if not path.is_file():
            raise NodeConfigError(f"body_file: {path} is not a file")
        lower = {k.lower() for k in headers}
        if "content-type" not in lower:
            headers["Content-Type"] = mimetypes.guess_type(path.name)[0] \
                or "application/octet-stream"
        headers["Content-Length"] = str(size)

        async def chunks():
            with open(path, "rb") as fh:
                while True:
                    chunk = fh.read(FILE_CHUNK)
                    if not chunk:
                        return
                    yield chunk

        return {"content": chunks()}

    def _auth(self, msg: Message, headers: dict[str, str]) -> None:
        auth = self.auth.get(msg) or "none"
        if auth == "none":
            return
        for k in [k for k in headers if k.lower() == "authorization"]:
            del headers[k]
        if auth == "basic":
            user = str(self.username.get(msg) or "")
            if not user:
                raise NodeConfigError("username: basic auth needs a user name")
            if ":" in user:
                raise NodeConfigError("username: a basic auth user name cannot hold ':'")
            password = self.password.get(msg)
            if not password:
                raise NodeConfigError("password: basic auth needs a password (an environment "
                                      "variable or keyring entry)")
            register_secret(password, user)
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            register_secret(token)
            headers["Authorization"] = f"Basic {token}"
        elif auth == "bearer":
            token = self.token.get(msg)
            if not token:
                raise NodeConfigError("token: bearer auth needs a token (an environment "
                                      "variable or keyring entry)")
            headers["Authorization"] = f"Bearer {token}"
        else:
            raise NodeConfigError(f"auth: '{_quote(str(auth))}' is not none, basic or bearer")


# -- helpers ------------------------------------------------------------------

def parse_allowed_hosts(text: Any) -> list[tuple[str, int | None]]:
    """``"example.com, api.example.com:8443, *.example.org"`` -> [(host,
    port or None)]. A ``*.`` entry matches every subdomain (not the domain
    itself); an entry without a port matches every port."""
    if not isinstance(text, str):
        raise NodeConfigError("allowed_hosts must be text: hosts separated by commas")
    out: list[tuple[str, int | None]] = []
    for raw in text.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if len(out) == MAX_ALLOWED_HOSTS:
            raise NodeConfigError(f"allowed_hosts lists more than {MAX_ALLOWED_HOSTS} hosts")
        host, port = entry, None
        if "://" in entry:
            from urllib.parse import urlsplit

            try:
                parts = urlsplit(entry)
                host, port = parts.hostname or "", parts.port
            except ValueError:
                host = ""
        elif entry.startswith("["):
            inner, _, rest = entry[1:].partition("]")
            host = inner
            if rest:
                if not rest.startswith(":") or not rest[1:].isdigit():
                    raise NodeConfigError(f"allowed_hosts: '{_quote(raw.strip())}' is not a "
                                          "host or host:port")
                port = int(rest[1:])
        elif entry.count(":") == 1:
            host, _, p = entry.partition(":")
            if not p.isdigit():
                raise NodeConfigError(f"allowed_hosts: '{_quote(raw.strip())}' is not a host "
                                      "or host:port")
            port = int(p)
        host = host.rstrip(".")
        wildcard = host.startswith("*.")
        bare = host[2:] if wildcard else host
        if not bare or "*" in bare or "/" in bare or " " in bare or "@" in bare:
            raise NodeConfigError(f"allowed_hosts: '{_quote(raw.strip())}' is not a host "
                                  "(write example.com, example.com:8443 or *.example.com)")
        if port is not None and not 0 < port < 65536:
            raise NodeConfigError(f"allowed_hosts: '{_quote(raw.strip())}': the port must be "
                                  "1-65535")
        out.append((host, port))
    return out


def _host_allowed(host: str, port: int, hosts: list[tuple[str, int | None]]) -> bool:
    host = host.lower().rstrip(".")
    for allowed, aport in hosts:
        if aport is not None and aport != port:
            continue
        if allowed.startswith("*."):
            if host.endswith(allowed[1:]):
                return True
        elif host == allowed:
            return True
    return False


def _check_host(url: Any, hosts: list[tuple[str, int | None]], where: str) -> None:
    port = url.port or (443 if url.scheme == "https" else 80)
    if not _host_allowed(url.host, port, hosts):
        listed = ", ".join(h if p is None else f"{h}:{p}" for h, p in hosts)
        raise NodeConfigError(f"{where} {url.host}:{port} is not in allowed_hosts ({listed}); "
                              "only the designer can add a host there")


def _parse_url(httpx: Any, value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise NodeConfigError("url: no URL given")
    text = value.strip()
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise NodeConfigError(f"url: '{_quote(redact(text))}' is not a valid URL ({exc})") from None
    if url.scheme not in ("http", "https"):
        raise NodeConfigError(f"url: '{_quote(redact(text))}' is not an http:// or https:// URL")
    if not url.host:
        raise NodeConfigError(f"url: '{_quote(redact(text))}' names no host")
    return url


def _shown(url: Any) -> str:
    """A URL as an error may show it: no user info, no query values (either
    may carry a key), any secret this process knows masked, at most 200
    characters."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port else ""
    text = f"{url.scheme}://{host}{port}{url.path}" + ("?…" if url.query else "")
    return _quote(redact(text))


_TLS: list[Any] = []


def _tls_context(httpx: Any) -> Any:
    """The verifying TLS context, made once per process: loading the CA
    bundle takes ~80 ms, which a run per event (queue mode: every run makes
    its own client) would otherwise pay each time."""
    if not _TLS:
        _TLS.append(httpx.create_ssl_context())
    return _TLS[0]


def _headers(value: Any) -> dict[str, str]:
    return dict(header_pairs(value, MAX_HEADERS))


def header_pairs(value: Any, most: int) -> list[tuple[str, str]]:
    """Headers as the designer or a message gives them (an object of names
    and values) -> (name, text) pairs, each name a token and each value one
    line (a line break would let a value add headers), at most ``most``."""
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        raise NodeConfigError(f"headers: expected an object of header names and values, got "
                              f"{_kind(value)}")
    if len(value) > most:
        raise NodeConfigError(f"headers: more than {most} headers")
    out: list[tuple[str, str]] = []
    for name, v in value.items():
        if not name or any(c in name for c in " \t\r\n:") or not name.isascii():
            raise NodeConfigError(f"headers: '{_quote(name)}' is not a header name")
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (int, float)):
            v = str(v)
        elif not isinstance(v, str):
            raise NodeConfigError(f"headers: the value of '{_quote(name)}' must be text, got "
                                  f"{_kind(v)}")
        if "\r" in v or "\n" in v:
            raise NodeConfigError(f"headers: the value of '{_quote(name)}' must be one line")
        out.append((name, v))
    return out


def _query(value: Any) -> dict[str, Any]:
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise NodeConfigError(f"query: expected an object of parameter names and values, got "
                              f"{_kind(value)}")
    return _fields("query", value, MAX_QUERY)


def _fields(param: str, value: dict, limit: int) -> dict[str, Any]:
    """Names to scalars or lists of scalars (query parameters, form fields),
    at most ``limit`` values in all."""
    count = 0
    out: dict[str, Any] = {}
    for name, v in value.items():
        items = v if isinstance(v, list) else [v]
        count += len(items)
        if count > limit:
            raise NodeConfigError(f"{param}: more than {limit} values")
        for item in items:
            if item is not None and not isinstance(item, (str, int, float, bool)):
                raise NodeConfigError(f"{param}: '{_quote(str(name))}' must be text, a number, "
                                      f"true/false or a list of those, got {_kind(item)}")
        out[str(name)] = [_scalar(i) for i in items] if isinstance(v, list) else _scalar(v)
    return out


def _scalar(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    """What went wrong with a connection, in words: the innermost OSError
    (anyio wraps "connection refused" in "All connection attempts failed")."""
    import socket

    import httpx

    seen = exc
    inner: BaseException | None = None
    for _ in range(10):
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            break
        seen = nxt
        if isinstance(seen, OSError):
            inner = seen
    if isinstance(inner, ConnectionRefusedError):
        return "cannot connect: connection refused (is the server running?)"
    if isinstance(inner, socket.gaierror):
        return f"cannot connect: host not found ({inner.strerror or inner})"
    if isinstance(exc, httpx.ConnectError):
        why = getattr(inner, "strerror", None) or str(inner or exc)
        return f"cannot connect: {why}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the server broke the HTTP protocol ({exc})"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "the connection was closed while the request was under way"
    return f"{type(exc).__name__}: {exc}"


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false",
            type(None): "null"}.get(type(value), "a number" if isinstance(value, (int, float))
                                     else type(value).__name__)


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"

"""HTTP nodes against real servers on loopback: http.request (statuses,
bodies, auth, redirects, bounds, the tool allow-list through a scripted
agent) and trigger.webhook -> http.response served to a real httpx client."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.http import HttpRequest
from runtime.registry import Registry
from tests.runtime_fixtures import N, engine_for, make_flow, run
from tests.servers.flows import agent_flow, fixed, scripted
from tests.servers.flows import run as run_agent

WAIT = 10  # seconds any wait in this file may take at most; never a measured time


# -- a real HTTP server on loopback -----------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet test output
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain",
              headers: dict[str, str] | None = None, length: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        server: TestServer = self.server.owner  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        server.seen.append({"method": self.command, "path": parts.path, "body": body,
                            "headers": {k.lower(): v for k, v in self.headers.items()}})
        query = parse_qs(parts.query, keep_blank_values=True)
        if parts.path == "/echo":
            out = {"method": self.command, "query": query, "body": body.decode(),
                   "headers": {k.lower(): v for k, v in self.headers.items()}}
            self._send(200, json.dumps(out).encode(), "application/json")
        elif parts.path.startswith("/status/"):
            code = int(parts.path.rsplit("/", 1)[1])
            self._send(code, f"status {code} from the server".encode())
        elif parts.path == "/json":
            self._send(200, b'{"ok": true}', "application/json")
        elif parts.path == "/text":
            self._send(200, "héllo".encode(), "text/plain; charset=utf-8")
        elif parts.path == "/notjson":
            self._send(200, b"<html>hi</html>", "text/html")
        elif parts.path == "/redirect":
            self._send(302, b"", headers={"Location": query["to"][0]})
        elif parts.path == "/slow":
            server.slow_started.set()
            server.release.wait(WAIT)
            self._send(200, b"late")
        elif parts.path == "/big":
            size = int(query["n"][0])
            self._send(200, b"x" * size, length=query.get("length", ["1"])[0] == "1")
        else:
            self._send(404, b"not found")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up first
            super().handle_error(request, client_address)


class TestServer:
    __test__ = False

    def __init__(self) -> None:
        self.httpd = _Quiet(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: list[dict] = []
        self.release = threading.Event()
        self.slow_started = threading.Event()
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    def paths(self) -> list[str]:
        return [s["path"] for s in self.seen]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = TestServer()
    yield s
    s.close()


@pytest.fixture
def other():
    s = TestServer()
    yield s
    s.close()


async def request(payload: Any = "", **params: Any):
    """inject -> http.request (id 'req') -> debug of the whole message."""
    flow = make_flow([N("src", "core.inject", payload=payload),
                      N("req", "http.request", **params),
                      N("show", "core.debug", path="msg")],
                     ["src->req", "req->show"])
    return await run(flow, timeout=WAIT)


def one(r) -> dict:
    assert not r.of("node.error"), [e.message for e in r.of("node.error")]
    [msg] = r.debug("show")
    return msg


def error(r) -> str:
    assert r.debug("show") == []
    [e] = r.of("node.error")
    return e.message


def dump(r) -> str:
    return "\n".join(e.model_dump_json() for e in r.events)


# -- http.request ------------------------------------------------------------------

async def test_get_json_text_and_headers(server):
    msg = one(await request(url=server.url + "/json"))
    assert msg["payload"] == {"ok": True}
    assert msg["status"] == 200
    assert msg["response_headers"]["content-type"] == "application/json"
    msg = one(await request(url=server.url + "/text"))
    assert msg["payload"] == "héllo"
    msg = one(await request(url=server.url + "/json", response_as="text"))
    assert msg["payload"] == '{"ok": true}'


async def test_response_as_json_on_a_non_json_body_names_the_fix(server):
    text = error(await request(url=server.url + "/notjson", response_as="json"))
    assert "response_as is json but the body is not JSON" in text and "text/html" in text
    # auto: an HTML page is text
    assert one(await request(url=server.url + "/notjson"))["payload"] == "<html>hi</html>"


async def test_error_status_is_a_result_unless_fail_on_error_status(server):
    msg = one(await request(url=server.url + "/status/404"))
    assert msg["status"] == 404 and msg["payload"] == "status 404 from the server"
    text = error(await request(url=server.url + "/status/503", fail_on_error_status=True))
    assert text.startswith(f"GET {server.url}/status/503: HTTP 503 Service Unavailable")
    assert "status 503 from the server" in text and "fail_on_error_status" in text
    assert one(await request(url=server.url + "/status/201",
                             fail_on_error_status=True))["status"] == 201


async def test_json_text_form_and_file_bodies(server, tmp_path):
    msg = one(await request({"a": [1, 2], "b": None}, url=server.url + "/echo", method="POST",
                            body={"scope": "message", "path": "payload"}))
    echo = msg["payload"]
    assert json.loads(echo["body"]) == {"a": [1, 2], "b": None}
    assert echo["headers"]["content-type"] == "application/json"

    echo = one(await request(url=server.url + "/echo", method="PUT", body_type="text",
                             body="plain words"))["payload"]
    assert echo["method"] == "PUT" and echo["body"] == "plain words"
    assert echo["headers"]["content-type"] == "text/plain; charset=utf-8"

    echo = one(await request(url=server.url + "/echo", method="POST", body_type="form",
                             body={"name": "Ada Lovelace", "tag": ["x", "y"], "n": 3}))["payload"]
    assert parse_qs(echo["body"]) == {"name": ["Ada Lovelace"], "tag": ["x", "y"], "n": ["3"]}
    assert echo["headers"]["content-type"] == "application/x-www-form-urlencoded"

    f = tmp_path / "upload.csv"
    f.write_bytes(b"id,name\n1,Ada\n" * 5000)
    echo = one(await request(url=server.url + "/echo", method="POST", body_type="file",
                             body_file=str(f)))["payload"]
    assert echo["body"].encode() == f.read_bytes()
    assert echo["headers"]["content-type"] == "text/csv"
    assert echo["headers"]["content-length"] == str(f.stat().st_size)

    text = error(await request(url=server.url + "/echo", method="POST", body_type="form",
                               body=[1, 2]))
    assert "body: body_type form needs an object of fields, got a list" in text
    text = error(await request(url=server.url + "/echo", method="POST", body_type="file",
                               body_file=str(tmp_path / "missing.bin")))
    assert text.startswith("body_file: cannot read") and "missing.bin" in text


async def test_query_merges_with_the_urls_and_headers_are_sent(server):
    echo = one(await request(url=server.url + "/echo?x=1", query={"q": "two words", "n": [1, 2]},
                             headers={"X-Trace": "abc", "Accept": "application/json"}))["payload"]
    assert echo["query"] == {"x": ["1"], "q": ["two words"], "n": ["1", "2"]}
    assert echo["headers"]["x-trace"] == "abc"
    text = error(await request(url=server.url + "/echo", headers={"X-Bad": "a\r\nInjected: 1"}))
    assert text == "headers: the value of 'X-Bad' must be one line"
    text = error(await request(url=server.url + "/echo", query={"deep": {"a": 1}}))
    assert text.startswith("query: 'deep' must be text, a number")


async def test_basic_and_bearer_auth_from_env_never_reach_events(server, monkeypatch):
    monkeypatch.setenv("TEST_HTTP_PASSWORD", "pa55-word-from-env")
    monkeypatch.setenv("TEST_HTTP_TOKEN", "tok-9f8e7d6c5b4a")
    r = await request(url=server.url + "/echo", auth="basic", username="ada",
                      password={"env": "TEST_HTTP_PASSWORD"})
    msg = one(r)
    sent = server.seen[-1]["headers"]["authorization"]
    assert sent == "Basic " + base64.b64encode(b"ada:pa55-word-from-env").decode()
    # The server echoed it; the debug event shows it masked.
    assert msg["payload"]["headers"]["authorization"] == "Basic ***"
    text = dump(r)
    assert "pa55-word-from-env" not in text and sent.split()[1] not in text

    r = await request(url=server.url + "/echo", auth="bearer", token={"env": "TEST_HTTP_TOKEN"},
                      headers={"Authorization": "Bearer designer-typed"})
    one(r)
    assert server.seen[-1]["headers"]["authorization"] == "Bearer tok-9f8e7d6c5b4a"
    assert "tok-9f8e7d6c5b4a" not in dump(r)

    monkeypatch.delenv("TEST_HTTP_TOKEN")
    text = error(await request(url=server.url + "/echo", auth="bearer",
                               token={"env": "TEST_HTTP_TOKEN"}))
    assert text == "param 'token': environment variable TEST_HTTP_TOKEN is not set"


async def test_redirects_followed_or_not(server):
    to = server.url + "/json"
    msg = one(await request(url=server.url + "/redirect", query={"to": to}))
    assert msg["status"] == 200 and msg["payload"] == {"ok": True}
    assert server.paths() == ["/redirect", "/json"]
    msg = one(await request(url=server.url + "/redirect", query={"to": to},
                            follow_redirects=False))
    assert msg["status"] == 302 and msg["response_headers"]["location"] == to
    assert server.paths() == ["/redirect", "/json", "/redirect"]


async def test_a_slow_server_hits_timeout_seconds(server):
    r = await request(url=server.url + "/slow?key=s3cr3t-in-query", timeout_seconds=0.2)
    assert server.slow_started.is_set()
    text = error(r)
    # The bound, not the time taken; the query (which may hold a key) is not shown.
    assert text == (f"GET {server.url}/slow?…: timed out: no complete answer within "
                    "timeout_seconds=0.2 s")
    server.release.set()


async def test_connection_refused_names_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = error(await request(url=f"http://user:pw@127.0.0.1:{port}/x?token=abc"))
    assert text == (f"GET http://127.0.0.1:{port}/x?…: cannot connect: connection refused "
                    "(is the server running?)")


async def test_a_large_body_is_cut_at_max_response_bytes(server, tmp_path):
    for length in ("1", "0"):  # announced by Content-Length, and streamed until close
        text = error(await request(url=server.url + "/big", query={"n": 5000, "length": length},
                                   max_response_bytes=1000))
        assert text == (f"GET {server.url}/big?…: the response body is larger than "
                        "max_response_bytes=1000; it was cut off")
    msg = one(await request(url=server.url + "/big", query={"n": 1000, "length": "0"},
                            max_response_bytes=1000))
    assert msg["payload"] == "x" * 1000
    target = tmp_path / "out" / "big.bin"
    error(await request(url=server.url + "/big", query={"n": 5000, "length": "0"},
                        max_response_bytes=1000, response_as="file", response_file=str(target)))
    assert list(tmp_path.rglob("*")) == [tmp_path / "out"]  # no partial file left


async def test_response_to_file(server, tmp_path):
    target = tmp_path / "dl" / "data.bin"
    msg = one(await request(url=server.url + "/big", query={"n": 200_000}, response_as="file",
                            response_file=str(target)))
    assert msg["payload"] == str(target) and msg["status"] == 200
    assert target.read_bytes() == b"x" * 200_000


async def test_bad_settings_are_named():
    from_msg = {"scope": "message", "path": "payload"}
    assert error(await request("ftp://example.com/x", url=from_msg)) == \
        "url: 'ftp://example.com/x' is not an http:// or https:// URL"
    assert error(await request("example.com/x", url=from_msg)) == \
        "url: 'example.com/x' is not an http:// or https:// URL"
    assert error(await request(url={"scope": "message", "path": "nothing"})) == \
        "url: no URL given"
    from runtime.flow import FlowError

    with pytest.raises(FlowError) as err:
        await request(url="ftp://x", timeout_seconds=0, allowed_hosts="a b")
    text = str(err.value)
    assert "params.url: url must start with http:// or https://" in text
    assert "params.timeout_seconds: timeout_seconds must be more than 0" in text
    assert "params.allowed_hosts: allowed_hosts: 'a b' is not a host" in text


async def test_allowed_hosts_also_binds_plain_messages(server, other):
    text = error(await request(url=other.url + "/json", allowed_hosts=f"127.0.0.1:{server.port}"))
    assert f"127.0.0.1:{other.port} is not in allowed_hosts (127.0.0.1:{server.port})" in text
    assert other.seen == []
    assert one(await request(url=other.url + "/json", allowed_hosts="127.0.0.1"))["status"] == 200


# -- http.request as an agent's tool -------------------------------------------------

def _tool_registry() -> Registry:
    return Registry([Inject, DebugNode, Agent, HttpRequest])


async def test_tool_reaches_allowed_hosts_only_and_redirects_cannot_escape(server, other):
    calls = [
        {"name": "http_request", "arguments": {"url": server.url + "/json"}},
        {"name": "http_request", "arguments": {"url": other.url + "/json"}},
        {"name": "http_request", "arguments": {"url": server.url + "/redirect",
                                               "query": {"to": other.url + "/json"}}},
        {"name": "http_request", "arguments": {"url": server.url + "/json",
                                               "allowed_hosts": "*"}},
    ]
    tool = {"id": "web", "type": "http.request",
            "params": {"url": {"scope": "ai"}, "query": {"scope": "ai"},
                       "allowed_hosts": fixed(f"127.0.0.1:{server.port}")}}
    flow = agent_flow(scripted([{"tool_calls": calls}, {"text": "done"}]), [tool])
    result, rec, _ = await run_agent(flow, reg=_tool_registry(), timeout=WAIT)
    assert result.status == "ok"
    [msg] = rec.debug_values()
    ok, off_list, redirected, smuggled = msg["agent"]["tool_calls"]  # in call order
    assert ok["status"] == "success"
    assert ok["data"]["response_body"] == {"ok": True} and ok["data"]["status"] == 200
    assert off_list["status"] == "error"
    assert off_list["error"] == (f"url: {other.url}/json: 127.0.0.1:{other.port} is not in "
                              f"allowed_hosts (127.0.0.1:{server.port}); only the designer can "
                              "add a host there")
    assert redirected["status"] == "error"
    assert f"redirected to {other.url}/json, and the redirect was not followed" \
        in redirected["error"]
    assert smuggled["status"] == "refused"
    assert "unknown argument 'allowed_hosts'" in smuggled["error"]
    # Nothing ever reached the other server.
    assert other.seen == []
    # The calls run concurrently, so the server may see them in either order.
    assert sorted(server.paths()) == ["/json", "/redirect"]


async def test_tool_with_empty_allowed_hosts_refuses_every_call(server):
    tool = {"id": "web", "type": "http.request", "params": {"url": {"scope": "ai"}}}
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "http_request", "arguments": {"url": server.url + "/json"}}]},
        {"text": "done"}]), [tool])
    _, rec, _ = await run_agent(flow, reg=_tool_registry(), timeout=WAIT)
    [res] = rec.of("tool.result")
    assert res.status == "error" and res.error.startswith("allowed_hosts is empty")
    assert server.seen == []


def test_tool_schema_holds_url_by_default_and_never_safety_settings():
    from runtime.flow import FlowNode
    from runtime.tools import tool_schema

    schema = tool_schema(HttpRequest.spec, FlowNode(id="w", type="http.request"))
    assert set(schema["properties"]) == {"url"} and schema["required"] == ["url"]
    allowed = {p.name for p in HttpRequest.spec.params if "ai" in
               [s.value for s in p.allowed_scopes]}
    assert allowed == {"url", "method", "query", "body"}


# -- trigger.webhook -> http.response ------------------------------------------------

class Served:
    """A run serving a webhook, started as a task; ``url`` once listening."""

    def __init__(self, nodes: list[dict], wires: list[str]) -> None:
        self.engine, self.events = engine_for(make_flow(nodes, wires))
        self.changed = asyncio.Event()
        self.engine.bus.subscribe(lambda e: self.changed.set())
        self.url = ""

    async def __aenter__(self) -> Served:
        self.task = asyncio.create_task(self.engine.run(timeout=30))
        await self.wait(lambda: any(e.type == "node.status" and e.text.startswith("listening on")
                                    for e in self.events))
        [status] = [e for e in self.events if e.type == "node.status"]
        self.url = status.text.removeprefix("listening on ")
        hook = self.engine.nodes["hook"].node
        assert self.url == hook.url and self.url.startswith(f"http://127.0.0.1:{hook.bound_port}/")
        return self

    async def wait(self, cond) -> None:
        async def loop():
            while not cond():
                if self.task.done():
                    raise AssertionError([getattr(e, "message", "") for e in self.events])
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(loop(), WAIT)

    def debug(self) -> list:
        return [e.value for e in self.events if e.type == "debug"]

    async def __aexit__(self, *exc: Any) -> None:
        self.engine.stop("test done")
        self.result = await asyncio.wait_for(self.task, WAIT)


def hook(**params: Any) -> dict:
    return N("hook", "trigger.webhook", port=0, path="/orders", **params)


async def test_webhook_to_change_to_response_answers_the_caller():
    nodes = [hook(), N("mark", "core.change", rules=[
        {"action": "copy", "from": "req.query.id", "path": "payload.id"},
        {"action": "copy", "from": "req.method", "path": "payload.method"}]),
        N("reply", "http.response", status=201, headers={"X-Flow": "yes"})]
    async with Served(nodes, ["hook->mark", "mark->reply"]) as s, httpx.AsyncClient() as c:
        r = await c.post(s.url + "?id=7", json={"item": "book"})
        assert r.status_code == 201
        assert r.json() == {"item": "book", "id": "7", "method": "POST"}
        assert r.headers["x-flow"] == "yes"
        assert r.headers["content-type"] == "application/json"
        # keep-alive: a second request on the same connection is served too
        r = await c.post(s.url, json={"item": "pen"})
        assert r.status_code == 201 and r.json() == {"item": "pen", "method": "POST"}
    assert s.result.reason == "interrupted"


async def test_webhook_payload_kinds_and_req():
    nodes = [hook(method="ANY"), N("show", "core.debug", path="msg"),
             N("reply", "http.response", body={"scope": "message", "path": "payload"})]
    async with Served(nodes, ["hook->show", "hook->reply"]) as s, httpx.AsyncClient() as c:
        r = await c.post(s.url, content="hello there", headers={"X-Thing": "1"})
        assert r.status_code == 200 and r.text == "hello there"
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        r = await c.put(s.url, data={"a": "1", "b": "2"})
        assert r.json() == {"a": "1", "b": "2"}
        r = await c.get(s.url, params={"q": "x", "tag": ["a", "b"]})
        assert r.json() == {"q": "x", "tag": ["a", "b"]}
        await s.wait(lambda: len(s.debug()) == 3)
        first = s.debug()[0]
        assert first["req"]["method"] == "POST" and first["req"]["path"] == "/orders"
        assert first["req"]["headers"]["x-thing"] == "1"
        assert "_http_res" in first


async def test_no_response_node_gets_504_after_response_timeout():
    nodes = [hook(response_timeout_seconds=0.2), N("show", "core.debug")]
    async with Served(nodes, ["hook->show"]) as s, httpx.AsyncClient() as c:
        r = await c.post(s.url, json={"n": 1})
        assert r.status_code == 504
        assert r.text == "the flow did not answer within response_timeout_seconds=0.2"
        assert s.debug() == [{"n": 1}]


async def test_a_response_after_the_timeout_is_a_node_error():
    # test.gate holds the message until the test opens it: after the 504.
    nodes = [hook(response_timeout_seconds=0.1), N("gate", "test.gate"),
             N("reply", "http.response")]
    async with Served(nodes, ["hook->gate", "gate->reply"]) as s, httpx.AsyncClient() as c:
        assert (await c.post(s.url, json={})).status_code == 504
        s.engine.nodes["gate"].node.open.set()
        await s.wait(lambda: any(e.type == "node.error" for e in s.events))
    [err] = [e for e in s.events if e.type == "node.error"]
    assert err.node == "reply" and "no longer waiting" in err.message


async def test_secret_header_check(monkeypatch):
    monkeypatch.setenv("TEST_HOOK_SECRET", "hook-secret-31337")
    nodes = [hook(secret_header="X-Hook-Secret", secret={"env": "TEST_HOOK_SECRET"}),
             N("show", "core.debug", path="msg"), N("reply", "http.response")]
    async with Served(nodes, ["hook->show", "hook->reply"]) as s, httpx.AsyncClient() as c:
        assert (await c.post(s.url, json={"n": 1})).status_code == 401
        r = await c.post(s.url, json={"n": 2}, headers={"X-Hook-Secret": "wrong"})
        assert r.status_code == 401 and r.text == "missing or wrong secret"
        r = await c.post(s.url, json={"n": 3}, headers={"X-Hook-Secret": "hook-secret-31337"})
        assert r.status_code == 200 and r.json() == {"n": 3}
        [msg] = s.debug()
    assert msg["payload"] == {"n": 3} and "x-hook-secret" not in msg["req"]["headers"]
    assert "hook-secret-31337" not in "\n".join(e.model_dump_json() for e in s.events)


async def test_bounds_and_wrong_requests_get_4xx_and_no_message():
    nodes = [hook(max_body_bytes=100), N("show", "core.debug"), N("reply", "http.response")]
    async with Served(nodes, ["hook->show", "hook->reply"]) as s, httpx.AsyncClient() as c:
        r = await c.post(s.url, content=b"x" * 1000)
        assert r.status_code == 413 and r.text == "the body is larger than max_body_bytes=100"

        async def chunks():
            for _ in range(10):
                yield b"y" * 50

        assert (await c.post(s.url, content=chunks())).status_code == 413  # chunked
        assert (await c.get(s.url)).status_code == 405
        assert (await c.post(s.url.replace("/orders", "/other"), json={})).status_code == 404
        r = await c.post(s.url, content=b"{bad", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.text == "the body is not valid JSON"
        assert s.debug() == []
        r = await c.post(s.url, content=b"z" * 100)
        assert r.status_code == 200 and r.text == "z" * 100


async def test_chunked_body_within_the_bound_is_read():
    nodes = [hook(), N("reply", "http.response")]
    async with Served(nodes, ["hook->reply"]) as s, httpx.AsyncClient() as c:
        async def chunks():
            yield b'{"a": '
            yield b"[1, 2]}"

        r = await c.post(s.url, content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 200 and r.json() == {"a": [1, 2]}


async def test_stopping_the_run_answers_waiting_requests_with_503():
    nodes = [hook(), N("show", "core.debug")]
    s = Served(nodes, ["hook->show"])
    async with s, httpx.AsyncClient() as c:
        pending = asyncio.create_task(c.post(s.url, json={"wait": True}))
        await s.wait(lambda: len(s.debug()) == 1)
        s.engine.stop("test")
        r = await asyncio.wait_for(pending, WAIT)
        assert r.status_code == 503 and r.text == "the flow stopped before answering"
    with pytest.raises(httpx.ConnectError):  # the port is closed with the run
        async with httpx.AsyncClient() as c:
            await c.post(s.url, json={})


async def test_http_response_outside_a_webhook_flow_says_why():
    r = await run(make_flow([N("src", "core.inject"), N("reply", "http.response")],
                            ["src->reply"]), timeout=WAIT)
    [e] = r.of("node.error")
    assert "did not come from a Webhook trigger" in e.message


async def test_webhook_port_in_use_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = await run(make_flow([N("hook", "trigger.webhook", port=port)]), timeout=WAIT)
    [e] = r.of("node.error")
    assert e.message.startswith(f"port: cannot listen on 127.0.0.1:{port}")
    assert "0 for any free one" in e.message


# -- docs/nodes-http.md -------------------------------------------------------------

def test_the_examples_in_the_docs_load_and_run(tmp_path):
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from runtime.flow import parse_flow, validate_flow

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "nodes-http.md").read_text(encoding="utf-8")
    flows = re.findall(r"```json\n(.*?)```", text, re.S)
    assert len(flows) == 2
    for data in flows:
        problems = validate_flow(parse_flow(json.loads(data)), Registry.default())
        assert [p for p in problems if p.severity == "error"] == []
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    expected = [line[2:] for line in code.splitlines() if line.startswith("# ")
                and line[2:].split(" ", 1)[0] in ("200", "success", "error")]
    assert out.stdout.splitlines() == expected


async def test_malformed_and_oversized_heads_get_400_and_431():
    nodes = [hook(), N("show", "core.debug")]
    async with Served(nodes, ["hook->show"]) as s:
        port = int(s.url.split(":")[2].split("/")[0])

        async def raw(data: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(data)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), WAIT)
            writer.close()
            return answer

        assert (await raw(b"NOT HTTP\r\n\r\n")).startswith(b"HTTP/1.1 400 Bad Request\r\n")
        big = b"POST /orders HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 40_000 + b"\r\n\r\n"
        assert (await raw(big)).startswith(b"HTTP/1.1 431 ")
        assert (await raw(b"POST /orders HTTP/2.0\r\n\r\n")).startswith(b"HTTP/1.1 505 ")
        assert s.debug() == []


def test_webhook_settings_are_checked_when_the_flow_loads():
    from runtime.flow import FlowError

    with pytest.raises(FlowError) as err:
        engine_for(make_flow([N("hook", "trigger.webhook", port=70000, path="orders",
                                secret_header="X-Secret")]))
    text = str(err.value)
    assert "params.port: port must be 0-65535" in text
    assert "params.path: path must start with /" in text
    assert "params.secret_header: set both secret_header and secret, or neither" in text

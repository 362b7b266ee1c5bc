"""Browser nodes against the real thing: Debian's Chromium driven by
Playwright, loading pages (tests/pages/) from an HTTP server on loopback
that this module starts. Tests that need no browser (refusals before one
starts, the catalog) always run; the others skip, saying why, only when no
Chromium is installed (CI installs it: apt install chromium)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from nodes.ai import Agent
from nodes.browser import BROWSER_NODES
from nodes.browser.session import DEFAULT_EXECUTABLE, EXECUTABLE_ENV, INSTALL_HINT, session_for
from nodes.core.inject_debug import DebugNode, Inject
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import parse_flow, validate_flow
from runtime.node import CUSTOM, Node, Param, node
from runtime.registry import Registry
from runtime.spec import Scope
from runtime.tools import agent_tool_specs
from tests.runtime_fixtures import N, make_flow, run

ROOT = Path(__file__).resolve().parents[1]
PAGES = Path(__file__).resolve().parent / "pages"
ICONS = ROOT / "resources" / "icons"
CHROMIUM = os.environ.get(EXECUTABLE_ENV) or DEFAULT_EXECUTABLE

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no Chromium at {CHROMIUM}: install it with `apt install chromium` (CI does)")


# -- a browser probe: what a test needs to see of a session -------------------

@node("test.browser_probe", name="Browser probe", category="Test")
class Probe(Node):
    """Records its session, the browser's process id (asked of Chromium
    itself over CDP) and the page's viewport, then sets ``reached``."""

    session = Param(str, "Session", default="main", allow=CUSTOM)
    seen: list[dict] = []
    reached: asyncio.Event | None = None

    async def on_message(self, msg):
        s = session_for(self, self.session.get())
        async with s.lock:
            page = await s.get_page()
            cdp = await s.browser.new_browser_cdp_session()
            info = await cdp.send("SystemInfo.getProcessInfo")
            await cdp.detach()
        pid = next(p["id"] for p in info["processInfo"] if p["type"] == "browser")
        Probe.seen.append({"session": s, "pid": pid, "viewport": page.viewport_size,
                           "url": page.url})
        if Probe.reached is not None:
            Probe.reached.set()


REG = Registry([Inject, DebugNode, Agent, *BROWSER_NODES, Probe])


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    Probe.seen = []
    Probe.reached = None


def _process_gone(pid: int) -> bool:
    """No such process, or only a zombie left for init to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


# -- the site ---------------------------------------------------------------

class _Pages(SimpleHTTPRequestHandler):
    """tests/pages/, plus /redirect?to=URL (a 302 to anywhere)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Pages, directory=str(PAGES)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def flow_of(*nodes: dict, debug: str = "msg"):
    """inject -> each node in turn -> debug ("show")."""
    chain = [N("src", "core.inject", payload="go"), *nodes,
             N("show", "core.debug", path=debug)]
    ids = [n["id"] for n in chain]
    return make_flow(chain, [f"{a}->{b}" for a, b in zip(ids, ids[1:], strict=False)])


def errors(r) -> list[str]:
    return [e.message for e in r.of("node.error")]


def png_size(path: str) -> tuple[int, int]:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", data[16:24])


# -- the catalog --------------------------------------------------------------

def test_every_browser_node_is_a_tool_with_an_icon_and_safe_scopes():
    never_ai = {"session", "timeout_seconds", "executable", "headless", "viewport",
                "allowed_hosts", "file_base_dir", "folder", "max_chars", "max_matches"}
    names = set()
    for cls in BROWSER_NODES:
        spec = cls.spec
        assert spec.category == "Browser" and spec.color and spec.description
        assert spec.tool is not None and spec.tool.name.startswith("browser_")
        names.add(spec.tool.name)
        icon = ICONS / f"{spec.icon}.svg"
        assert icon.is_file(), f"{spec.type}: no icon {icon.name}"
        for p in spec.params:
            assert p.description, f"{spec.type}.{p.name} has no description"
            if p.name in never_ai:
                assert Scope.AI not in p.allowed_scopes, f"{spec.type}.{p.name} allows AI"
    assert names == {"browser_open", "browser_goto", "browser_click", "browser_fill",
                     "browser_text", "browser_attribute", "browser_wait",
                     "browser_screenshot", "browser_close"}
    ai = {cls.spec.type: {p.name for p in cls.spec.params if Scope.AI in p.allowed_scopes}
          for cls in BROWSER_NODES}
    assert ai["browser.goto"] == {"url"}
    assert ai["browser.fill"] == {"selector", "text"}
    assert ai["browser.close"] == set()


def test_the_package_imports_no_playwright():
    # The designer's palette imports every node package: Playwright must
    # wait until a session starts.
    code = "import sys, nodes.browser; print('playwright' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_flow_checks_name_the_param():
    flow = flow_of(N("t", "browser.text", selector="h1", timeout_seconds=0, max_matches=0),
                   N("o", "browser.open", viewport="huge", allowed_hosts="http://x/y"))
    problems = {(p.node, p.field): p.message for p in validate_flow(flow, REG)}
    assert any(k[0] == "t" and "timeout_seconds" in (k[1] or "") for k in problems)
    assert any(k[0] == "t" and "max_matches" in (k[1] or "") for k in problems)
    assert any(k[0] == "o" and "viewport" in (k[1] or "") for k in problems)
    assert any(k[0] == "o" and "allowed_hosts" in (k[1] or "") for k in problems)


# -- refusals before any browser starts (no Chromium needed) -------------------

async def test_missing_executable_says_where_and_how_to_install(monkeypatch):
    monkeypatch.delenv(EXECUTABLE_ENV, raising=False)
    r = await run(flow_of(N("open", "browser.open", executable="/nowhere/chromium")), reg=REG,
                  timeout=30)
    [text] = errors(r)
    assert "executable: no Chromium at /nowhere/chromium" in text
    assert "apt install chromium" in text

    monkeypatch.setenv(EXECUTABLE_ENV, "/elsewhere/chrome")  # the machine's setting wins
    r = await run(flow_of(N("open", "browser.open")), reg=REG, timeout=30)
    [text] = errors(r)
    assert "/elsewhere/chrome (from $SWITCHBOARD_CHROMIUM)" in text


async def test_missing_playwright_names_the_extra(monkeypatch):
    # None in sys.modules makes `import playwright` fail as an absent package does.
    monkeypatch.setitem(sys.modules, "playwright", None)
    monkeypatch.setenv(EXECUTABLE_ENV, sys.executable)  # any executable file passes the path check
    r = await run(flow_of(N("open", "browser.open")), reg=REG, timeout=30)
    assert errors(r) == [INSTALL_HINT]
    assert "pip install -e '.[browser]'" in INSTALL_HINT


@pytest.mark.parametrize(("url", "params", "expected"), [
    ("http://127.0.0.1:1/x", {"allowed_hosts": "example.org, *.example.com"},
     "url: host '127.0.0.1' is not in allowed_hosts (example.org, *.example.com)"),
    ("http://example.org:8080/", {"allowed_hosts": "example.org:443"},
     "url: host 'example.org' is not in allowed_hosts"),
    ("javascript:alert(1)", {}, "only http, https and file URLs can be opened"),
    ("file:///etc/passwd", {}, "file URLs are refused: file_base_dir is not set"),
    ("file:///etc/passwd", {"file_base_dir": str(PAGES)}, "/etc/passwd is outside file_base_dir"),
    (f"file://{PAGES}/../test_browser_nodes.py", {"file_base_dir": str(PAGES)},
     "is outside file_base_dir"),
    ("http://x/" + "a" * 9000, {}, "more than the 8192 allowed"),
])
async def test_goto_refuses_urls_outside_its_rules(url, params, expected, monkeypatch):
    # A missing browser proves none was needed: the URL is refused first.
    monkeypatch.setenv(EXECUTABLE_ENV, "/nowhere/chromium")
    r = await run(flow_of(N("go", "browser.goto", url=url, **params)), reg=REG, timeout=30)
    [text] = errors(r)
    assert expected in text


# -- with Chromium -------------------------------------------------------------

@needs_chromium
async def test_fill_a_form_submit_it_and_read_the_result(site):
    r = await run(flow_of(
        N("open", "browser.open", url=f"{site}/form.html"),
        N("name", "browser.fill", selector="#name", text="Ada"),
        # The city comes from the message, as an RPA flow would pass it on.
        N("city", "browser.fill", selector="input[name=city]",
          text={"scope": "message", "path": "payload"}),
        N("send", "browser.click", selector="#submit"),
        N("read", "browser.text", selector="#greeting"),
    ), reg=REG, timeout=30)
    assert errors(r) == []
    [msg] = r.debug("show")
    assert msg["payload"] == "Hello, Ada from go!"
    assert msg["browser"]["count"] == 1 and msg["browser"]["truncated"] is False
    assert msg["browser"]["title"] == "Sign up"  # open's outputs, under browser.*
    assert msg["browser"]["url"] == f"{site}/form.html"


@needs_chromium
async def test_attributes_and_texts_of_all_matches_are_bounded(site):
    links = N("links", "browser.attribute", selector="a.doc", attribute="href", match="all",
              max_matches=4)
    links["outputs"] = {"result": "links", "count": "link_count", "truncated": "links_cut"}
    first = N("first", "browser.attribute", selector="a.doc")
    first["outputs"] = {"result": "first_link"}
    long = N("long", "browser.text", selector="#long", max_chars=11)
    long["outputs"] = {"result": "long", "truncated": "long_cut"}
    items = N("items", "browser.text", selector="#links li", match="all")
    # A relative href, as read, is taken against the current page.
    follow = N("follow", "browser.goto", url={"scope": "message", "path": "first_link"})
    r = await run(flow_of(N("open", "browser.open", url=f"{site}/links.html"),
                          links, first, long, items, follow), reg=REG, timeout=30)
    assert errors(r) == []
    [msg] = r.debug("show")
    assert msg["browser"]["url"] == f"{site}/form.html"
    assert msg["browser"]["title"] == "Sign up" and msg["browser"]["status"] == 200
    assert msg["links"] == ["form.html", "article.html", "delayed.html", "https://example.org/"]
    assert msg["link_count"] == 5 and msg["links_cut"] is True  # 5 matched, 4 returned
    assert msg["first_link"] == "form.html"
    assert msg["long"] == "Lorem ipsum…" and msg["long_cut"] is True
    assert msg["payload"] == ["The form", "An article", "Late content", "Elsewhere",
                              "No link at all"]


@needs_chromium
async def test_wait_for_an_element_to_appear_and_to_disappear(site):
    late = N("late", "browser.text", selector="#late")
    late["outputs"] = {"result": "late"}
    r = await run(flow_of(
        N("open", "browser.open", url=f"{site}/delayed.html"),
        N("reveal", "browser.click", selector="#show"),
        N("appear", "browser.wait", selector="#late"),
        late,
        N("hide", "browser.click", selector="#hide"),
        N("gone", "browser.wait", selector="#banner", until="disappear"),
        # Read right after the wait: without it the banner would still be there.
        N("body", "browser.text", selector="body"),
    ), reg=REG, timeout=30)
    assert errors(r) == []
    [msg] = r.debug("show")
    assert msg["late"] == "Arrived late"
    assert "Loading" not in msg["payload"] and "Arrived late" in msg["payload"]


@pytest.mark.parametrize(("step", "expected"), [
    (N("f", "browser.fill", selector="#name", text="x" * 100_001),
     "text: 100001 characters, more than the 100000 a field may be filled with"),
    (N("c", "browser.click", selector="a" * 2001),
     "selector: 2001 characters, more than the 2000 allowed"),
    (N("c", "browser.click", selector=" "), "selector: no selector given"),
    (N("a", "browser.attribute", selector="a", attribute="href onclick"),
     "attribute: 'href onclick' is not an attribute name"),
    (N("t", "browser.text", match="some"), "match: 'some' is not 'first' or 'all'"),
    (N("w", "browser.wait", seconds=1000), "seconds: a number from 0 to 300"),
    (N("w", "browser.wait", selector="#x", until="later"),
     "until: 'later' is not 'appear' or 'disappear'"),
    (N("o", "browser.open", viewport="20x20"), "viewport: each side must be 100 to 10000"),
])
async def test_bounds_are_checked_before_any_browser_starts(step, expected, monkeypatch):
    monkeypatch.setenv(EXECUTABLE_ENV, "/nowhere/chromium")  # a browser would fail otherwise
    # A flow that passes validation on the node's own checks still gets the
    # runtime ones (values can come from messages and the AI).
    r = await run(flow_of(step), reg=REG, timeout=30, validated=True)
    [text] = errors(r)
    assert text.startswith(expected)


@needs_chromium
async def test_screenshots_are_pngs_in_the_folder_and_shown_in_the_inspector(site, tmp_path):
    shots = tmp_path / "shots"
    view = N("view", "browser.screenshot", folder=str(shots), filename="sub/view.png")
    view["outputs"] = {"path": "view"}
    full = N("full", "browser.screenshot", folder=str(shots), filename="full.png",
             full_page=True)
    full["outputs"] = {"path": "full"}
    top = N("top", "browser.screenshot", folder=str(shots), selector="#top")
    r = await run(flow_of(N("open", "browser.open", url=f"{site}/tall.html", viewport="400x300"),
                          view, full, top), reg=REG, timeout=30)
    assert errors(r) == []
    [msg] = r.debug("show")
    assert msg["view"] == str(shots / "sub" / "view.png")
    assert png_size(msg["view"]) == (400, 300)
    assert png_size(msg["full"]) == (400, 16384)  # 30,120 px tall, cut at the bound
    assert Path(msg["payload"]).parent == shots and msg["payload"].endswith(".png")
    assert png_size(msg["payload"]) == (400, 120)  # just the element
    shown = [v["screenshot"] for v in r.debug() if isinstance(v, dict) and "screenshot" in v]
    assert shown == [msg["view"], msg["full"], msg["payload"]]


async def test_screenshot_names_stay_inside_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(EXECUTABLE_ENV, "/nowhere/chromium")  # refused before any browser
    for name, expected in [("../escape.png", "leads outside the base folder"),
                           ("/tmp/abs.png", "is an absolute path"),
                           ("shot.jpg", "must end in .png")]:
        r = await run(flow_of(N("s", "browser.screenshot", folder=str(tmp_path),
                                filename=name)), reg=REG, timeout=30)
        [text] = errors(r)
        assert text.startswith("filename: ") and expected in text
    assert list(tmp_path.iterdir()) == []


@needs_chromium
async def test_sessions_are_shared_by_name_and_closed_when_the_run_ends(site):
    nodes = [N("src", "core.inject", payload="go"),
             N("open1", "browser.open", session="one", viewport="640x480"),
             N("go1", "browser.goto", session="one", url=f"{site}/article.html"),
             N("probe1", "test.browser_probe", session="one"),
             N("open2", "browser.open", session="two", url=f"{site}/links.html"),
             N("probe2", "test.browser_probe", session="two"),
             # A node failing in session two must not keep any browser open.
             N("bad", "browser.click", session="two", selector="#nothing", timeout_seconds=0.2)]
    flow = make_flow(nodes, ["src->open1", "open1->go1", "go1->probe1", "src->open2",
                             "open2->probe2", "probe2->bad"])
    r = await run(flow, reg=REG, timeout=30)
    assert r.result.status == "error" and len(errors(r)) == 1
    by = {s["session"].name: s for s in Probe.seen}
    one, two = by["one"], by["two"]
    # One browser per session name, shared by the nodes naming it: the probe
    # sees the page that open1 sized and go1 loaded.
    assert one["pid"] != two["pid"]
    assert one["viewport"] == {"width": 640, "height": 480}
    assert one["url"] == f"{site}/article.html" and two["url"] == f"{site}/links.html"
    for s in (one, two):
        assert _process_gone(s["pid"]), f"browser of session {s['session'].name} still runs"
        assert s["session"].ended and s["session"].browser is None
        assert s["session"].driver.closed


@needs_chromium
async def test_a_stopped_run_closes_its_browser(site):
    Probe.reached = asyncio.Event()
    flow = flow_of(N("open", "browser.open", url=f"{site}/article.html"),
                   N("probe", "test.browser_probe"),
                   N("wait", "browser.wait", selector="#never", timeout_seconds=120))
    bus = EventBus()
    engine = Engine(flow, REG, bus)
    task = asyncio.ensure_future(engine.run(timeout=60))
    await asyncio.wait_for(Probe.reached.wait(), 30)
    engine.stop("test")
    result = await asyncio.wait_for(task, 30)
    assert result.reason == "interrupted"
    [seen] = Probe.seen
    assert _process_gone(seen["pid"])


@needs_chromium
async def test_close_node_closes_and_a_later_node_reopens(site):
    r = await run(flow_of(
        N("open", "browser.open", url=f"{site}/article.html"),
        N("p1", "test.browser_probe"),
        N("close", "browser.close"),
        N("go", "browser.goto", url=f"{site}/form.html"),
        N("p2", "test.browser_probe"),
        N("read", "browser.text", selector="h1"),
    ), reg=REG, timeout=30)
    assert errors(r) == []
    first, second = Probe.seen
    assert first["pid"] != second["pid"] and _process_gone(first["pid"])
    assert r.debug("show")[0]["payload"] == "Sign up"


@needs_chromium
async def test_timeouts_and_bad_selectors_name_the_selector(site):
    # Three failures on one page (the open node fans out to each).
    nodes = [N("src", "core.inject", payload="go"),
             N("open", "browser.open", url=f"{site}/article.html"),
             N("missing", "browser.click", selector="#missing", timeout_seconds=0.3),
             N("invalid", "browser.text", selector="p[", timeout_seconds=0.3),
             N("hidden", "browser.click", selector="#hidden", timeout_seconds=0.3)]
    flow = make_flow(nodes, ["src->open", "open->missing", "open->invalid", "open->hidden"])
    r = await run(flow, reg=REG, timeout=30)
    by_node = {e.node: e.message for e in r.of("node.error")}
    assert by_node["missing"] == ("selector '#missing': no element matched within 0.3 s "
                                  f"(timeout_seconds) on {site}/article.html")
    assert by_node["invalid"].startswith("selector 'p[' is not valid: ")
    # Matched, but hidden: the error says so rather than "no element".
    assert by_node["hidden"].startswith(
        "selector '#hidden': 1 element matched but could not be clicked")
    assert len(by_node) == 3


@needs_chromium
async def test_redirects_off_the_allow_list_are_blocked_and_file_urls_need_a_base(site):
    port = urlsplit(site).port
    r = await run(flow_of(N("go", "browser.goto", allowed_hosts=f"127.0.0.1:{port}",
                            url=f"{site}/redirect?to=http://localhost:{port}/article.html")),
                  reg=REG, timeout=30)
    [text] = errors(r)
    assert f"led to http://localhost:{port}/article.html, which is refused: host " \
           "'localhost' is not in allowed_hosts" in text

    r = await run(flow_of(N("go", "browser.goto", file_base_dir=str(PAGES),
                            url=(PAGES / "article.html").as_uri()),
                          N("read", "browser.text", selector="#hours")), reg=REG, timeout=30)
    assert errors(r) == []
    [msg] = r.debug("show")
    assert msg["payload"].startswith("The museum is open")
    assert msg["browser"]["title"] == "Opening hours"


# -- as an agent's tools ---------------------------------------------------------

@needs_chromium
async def test_an_agent_reads_a_page_with_browser_tools(site):
    port = urlsplit(site).port
    script = [
        {"tool_calls": [{"name": "browser_goto", "arguments": {"url": "http://example.org/"}}]},
        {"tool_calls": [{"name": "goto_unlisted", "arguments": {"url": f"{site}/article.html"}}]},
        {"tool_calls": [{"name": "browser_goto",
                         "arguments": {"url": f"{site}/article.html", "allowed_hosts": []}}]},
        {"tool_calls": [{"name": "browser_goto", "arguments": {"url": f"{site}/article.html"}}]},
        {"tool_calls": [{"name": "browser_text", "arguments": {"selector": "#hours"}}]},
        {"text": "From the page: {last_result}"},
    ]
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "browse",
        "nodes": [
            {"id": "ask", "type": "core.inject",
             "params": {"payload": {"scope": "custom", "value": "When is the museum open?"}}},
            {"id": "agent", "type": "ai.agent",
             "params": {"provider": {"scope": "custom", "value": "scripted"},
                        "script": {"scope": "custom", "value": script}}},
            {"id": "show", "type": "core.debug"},
            {"id": "goto", "type": "browser.goto",
             "params": {"url": {"scope": "ai"},
                        "allowed_hosts": {"scope": "custom", "value": f"127.0.0.1:{port}"}}},
            {"id": "text", "type": "browser.text", "params": {"selector": {"scope": "ai"}}},
            # No allow-list: as a tool it opens nothing (as HTTP Request does).
            {"id": "unlisted", "type": "browser.goto", "tool": {"name": "goto_unlisted"},
             "params": {"url": {"scope": "ai"}}},
        ],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]},
                  {"from": ["agent", "tools"], "to": ["goto", "in"]},
                  {"from": ["agent", "tools"], "to": ["text", "in"]},
                  {"from": ["agent", "tools"], "to": ["unlisted", "in"]}]})
    tools = {t["function"]["name"]: t["function"]["parameters"]
             for t in agent_tool_specs(flow, REG)["agent"]}
    assert set(tools["browser_goto"]["properties"]) == {"url"}
    assert set(tools["browser_text"]["properties"]) == {"selector"}

    r = await run(flow, reg=REG, timeout=30)
    [answer] = r.debug("show")
    assert answer.startswith("From the page: ")
    data = json.loads(answer.removeprefix("From the page: "))
    assert data["result"] == "The museum is open from 10:00 to 18:00, closed on Mondays."
    calls = [(e.tool, e.status, e.error or "") for e in r.of("tool.result")]
    assert calls[0][:2] == ("browser_goto", "error")
    assert "host 'example.org' is not in allowed_hosts" in calls[0][2]
    assert calls[1][:2] == ("goto_unlisted", "error")
    assert "allowed_hosts is empty: as an agent's tool this node opens only" in calls[1][2]
    assert calls[2][:2] == ("browser_goto", "refused")  # the AI cannot widen the list
    assert "allowed_hosts" in calls[2][2]
    assert [c[:2] for c in calls[3:]] == [("browser_goto", "success"), ("browser_text", "success")]


# -- the documentation's example runs as written -------------------------------------

@needs_chromium
def test_docs_example_runs(tmp_path, monkeypatch, capsys):
    doc = (ROOT / "docs" / "nodes-browser.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/nodes-browser.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "Hello, Ada from Oslo!" in out
    assert re.search(r"screenshot.*\.png", out)

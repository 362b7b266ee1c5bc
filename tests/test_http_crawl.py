"""http.crawl against a real HTTP server on loopback and real files: pages
read breadth first on the same site, bounds kept, the designer's hosts and
folder enforced, progress reported, and as an agent's tool it runs in the
background (the agent gets a tracking id at once, the pages when it ends)."""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.http import HttpCrawl
from runtime.flow import parse_flow
from runtime.registry import Registry
from tests.servers.flows import agent_flow, fixed, run, scripted

SITE = Path(__file__).resolve().parents[1] / "resources" / "examples" / "site"
REG = Registry([Inject, DebugNode, Agent, HttpCrawl])


class _Quiet(SimpleHTTPRequestHandler):
    requested: list[str] = []

    def log_message(self, *args):  # no noise in the test output
        pass

    def do_GET(self):  # noqa: N802 - the stdlib's name
        _Quiet.requested.append(self.path)
        super().do_GET()


@pytest.fixture
def site_server(tmp_path):
    """The example shop site, plus a page off the folder and one elsewhere."""
    root = tmp_path / "www"
    (root / "shop").mkdir(parents=True)
    for page in SITE.iterdir():
        (root / "shop" / page.name).write_bytes(page.read_bytes())
    index = root / "shop" / "index.html"
    index.write_text(index.read_text().replace(
        "</ul>", '<li><a href="/admin.html">Admin</a></li>'
                 '<li><a href="http://elsewhere.invalid/x.html">Partner</a></li>'
                 '<li><a href="missing.html">Gone</a></li></ul>'))
    (root / "admin.html").write_text("<title>Admin</title>secret")
    _Quiet.requested = []
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def crawl_flow(params: dict) -> object:
    return parse_flow({"format": "switchboard.flow/1", "name": "crawl", "nodes": [
        {"id": "go", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "crawl", "type": "http.crawl",
         "params": {"delay_seconds": fixed(0), **{k: fixed(v) for k, v in params.items()}}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["go", "out"], "to": ["crawl", "in"]},
                 {"from": ["crawl", "out"], "to": ["show", "in"]}]})


async def test_reads_the_site_breadth_first_within_its_folder(site_server):
    result, rec, _ = await run(crawl_flow({"url": f"{site_server}/shop/index.html"}), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    msg = rec.debug_values()[0]
    titles = [p["title"] for p in msg["payload"]]
    assert titles[0] == "Harbor Kitchen: all products"
    assert set(titles[1:]) == {"Stainless kettle 1.7 l", "Two-slot toaster", "Glass jug blender",
                               "Burr coffee grinder", "Kitchen scale", "Shipping and returns"}
    toaster = next(p for p in msg["payload"] if p["title"] == "Two-slot toaster")
    assert "Availability: out of stock" in toaster["text"]
    assert "<" not in toaster["text"] and "font-family" not in toaster["text"]  # no markup, no CSS
    # The missing page failed alone; nothing outside the folder or host was asked for.
    assert msg["failed"] == [{"url": f"{site_server}/shop/missing.html", "error": "HTTP 404"}]
    assert msg["count"] == 7
    assert "/admin.html" not in _Quiet.requested
    assert all(p.startswith("/shop/") for p in _Quiet.requested)
    assert len(_Quiet.requested) == len(set(_Quiet.requested))  # each page once


async def test_max_pages_bounds_the_crawl(site_server):
    result, rec, _ = await run(crawl_flow({"url": f"{site_server}/shop/index.html",
                                           "max_pages": 3}), reg=REG)
    assert result.status == "ok"
    assert len(rec.debug_values()[0]["payload"]) == 3
    assert len(_Quiet.requested) == 3


async def test_whole_site_when_same_folder_is_off(site_server):
    result, rec, _ = await run(crawl_flow({"url": f"{site_server}/shop/index.html",
                                           "same_folder": False}), reg=REG)
    assert result.status == "ok"
    assert "/admin.html" in _Quiet.requested
    assert not any("elsewhere" in p["url"] for p in rec.debug_values()[0]["payload"])


async def test_file_urls_only_under_file_base_dir(tmp_path):
    start = f"file://{SITE}/index.html"
    result, rec, _ = await run(crawl_flow({"url": start, "file_base_dir": str(SITE)}), reg=REG)
    assert result.status == "ok"
    assert rec.debug_values()[0]["count"] == 7
    result, rec, _ = await run(crawl_flow({"url": start}), reg=REG)
    [error] = rec.of("node.error")
    assert "file_base_dir is not set" in error.message


@pytest.mark.parametrize("max_pages, why", [(0, "outside 1 to 500"), (501, "outside 1 to 500")])
async def test_bad_settings_name_the_param(site_server, max_pages, why):
    _, rec, _ = await run(crawl_flow({"url": f"{site_server}/shop/index.html",
                                      "max_pages": max_pages}), reg=REG)
    [error] = rec.of("node.error")
    assert "max_pages" in error.message and why in error.message


async def test_a_start_page_that_cannot_be_read_is_an_error(site_server):
    _, rec, _ = await run(crawl_flow({"url": f"{site_server}/shop/nothing.html"}), reg=REG)
    [error] = rec.of("node.error")
    assert "could not read" in error.message and "HTTP 404" in error.message


async def test_as_a_tool_it_runs_in_the_background_and_reports_progress(site_server):
    host = site_server.removeprefix("http://")
    crawl = {"id": "crawl", "type": "http.crawl",
             "params": {"delay_seconds": fixed(0), "allowed_hosts": fixed(host)}}
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "crawl_site",
                         "arguments": {"url": f"{site_server}/shop/index.html"}}]},
        {"text": "Started: {last_result}"},
        {"text": "Crawled: {last_result}"}], wake_on_background=True), [crawl])
    result, rec, _ = await run(flow, reg=REG)
    assert result.status == "ok", rec.of("node.error")
    # The call answered at once with a tracking id (what the LLM read next)...
    tool_msg = next(m for m in rec.of("llm.request")[1].messages if m["role"] == "tool")
    started = json.loads(tool_msg["content"])
    assert started["status"] == "started" and started["tracking_id"].startswith("task-")
    # ...and the one result, when the crawl ended, carries that id and the pages.
    [final] = [e for e in rec.of("tool.result") if e.tool == "crawl_site"]
    assert final.status == "success" and final.tracking_id == started["tracking_id"]
    assert len(final.data["pages"]) == 7
    progress = [e.text for e in rec.of("tool.status") if e.phase == "progress"]
    assert progress and progress[0].startswith("page 1 of")
    # The agent was woken for the end: the pages reached its conversation.
    answer = rec.debug_values()[-1]["payload"]
    assert "Two-slot toaster" in answer


async def test_as_a_tool_no_host_is_allowed_unless_the_designer_lists_it(site_server):
    crawl = {"id": "crawl", "type": "http.crawl", "params": {"delay_seconds": fixed(0)}}
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "crawl_site",
                         "arguments": {"url": f"{site_server}/shop/index.html"}}]},
        {"text": "{last_result}"}, {"text": "{last_result}"}], wake_on_background=True), [crawl])
    result, rec, _ = await run(flow, reg=REG)
    final = [e for e in rec.of("tool.result") if e.tool == "crawl_site"][-1]
    assert final.status == "error" and "allowed_hosts is empty" in final.error
    assert _Quiet.requested == []


def test_the_crawl_tool_is_background_by_its_author():
    assert HttpCrawl.background is True
    assert REG.spec("http.crawl").tool.name == "crawl_site"

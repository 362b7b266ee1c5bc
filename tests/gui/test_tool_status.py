"""A tool call's live status in the designer (issue 14, item 4): while a
tool node works, its canvas badge and its line in the inspector's Tools tab
show the progress it reports ("page 2 of 5 (40%)"); its result replaces it.

A real run: inject -> scripted agent -> a crawl tool that reports progress
and then waits for the test to let it finish (no timing involved)."""

from __future__ import annotations

import asyncio

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.flow import parse_flow
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures

GATE: dict[str, asyncio.Event] = {}


@node("test.gui_crawl", name="Crawl", category="Test", tool=Tool("crawl", "Crawl a site"))
class GuiCrawl(Node):
    site = Param(str, "The site", scope=AI, allow=AI | CUSTOM)
    pages = Output(int, "Pages crawled")

    async def on_message(self, msg):
        self.progress(0.4, "page 2 of 5")
        await GATE["open"].wait()
        self.pages.set(msg, 5)


def fixed(v):
    return {"scope": "custom", "value": v}


def crawl_flow(*, background: bool = False):
    script = [{"tool_calls": [{"name": "crawl", "arguments": {"site": "example.org"}}]},
              {"text": "Crawled."}]
    crawl = {"id": "crawl", "type": "test.gui_crawl"}
    if background:
        crawl["tool"] = {"background": True}
    return parse_flow({"format": "switchboard.flow/1", "name": "Crawl", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("Crawl it")}},
        {"id": "agent", "type": "ai.agent",
         "params": {"provider": fixed("scripted"), "script": fixed(script)}},
        {"id": "show", "type": "core.debug"},
        crawl], "wires": [
        {"from": ["ask", "out"], "to": ["agent", "in"]},
        {"from": ["agent", "out"], "to": ["show", "in"]},
        {"from": ["agent", "tools"], "to": ["crawl", "in"]}]})


def start(fake_window, flow):
    GATE["open"] = asyncio.Event()
    window = fake_window(flow)
    window.session.controller.registry = Registry([Inject, DebugNode, Agent, GuiCrawl])
    window.run_action.trigger()
    return window


def test_progress_shows_on_the_badge_and_in_the_tools_tab(fake_window, qtbot):
    window = start(fake_window, crawl_flow())
    session = window.session
    badge = window.scene.nodes["crawl"]
    tools = session.inspector.tools
    qtbot.waitUntil(lambda: any(t == "page 2 of 5 (40%)" for _, _, t in badge.states),
                    timeout=5000)
    assert badge.states[-1][0] == "running"
    tools.refresh()
    [call] = tools.calls_shown()
    item = tools._call_items[call.caller_id]
    assert item.text(2) == "… page 2 of 5 (40%)"
    assert tools.live_status(call.caller_id) == "page 2 of 5 (40%)"
    GATE["open"].set()  # the crawl ends: its result replaces the progress
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=5000)
    tools.refresh()
    assert item.text(2).startswith("✓ ") and '"pages": 5' in item.text(2)
    assert tools.live_status(call.caller_id) == ""
    assert badge.states[-1][0] == "done"


def test_a_background_call_shows_that_it_goes_on(fake_window, qtbot):
    window = start(fake_window, crawl_flow(background=True))
    session = window.session
    badge = window.scene.nodes["crawl"]
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=5000)
    texts = [t for _, _, t in badge.states]
    # It ran in the background and reported progress; the run's end
    # cancelled it (the gate never opened), and the badge says so.
    assert "in background" in texts and "page 2 of 5 (40%)" in texts
    assert badge.states[-1][0] == "error"
    tools = session.inspector.tools
    tools.refresh()
    [call] = tools.calls_shown()
    assert call.status == "error" and "run stopped" in call.error

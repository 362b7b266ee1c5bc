"""A run's cost in the designer: the status bar after the run, the Cost
column of the history list and the Agent tab. A priced run asks a provider
that is really called (the local OpenAI-compatible server); the scripted
provider is offline, and says so instead of a price (issue T3 2/10, item 8)."""

from __future__ import annotations

import json

import pytest

from runtime.flow import parse_flow
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures
from tests.servers.llm import LlmServer, openai_reply

PRICES = {"models": {"test-model": {"input": 2.0, "output": 10.0}}}
# 1000 in, 100 out, then 3000 in, 200 out: $0.003 + $0.008 at the prices above
USAGE = [(1000, 100), (3000, 200)]


def fixed(value):
    return {"scope": "custom", "value": value}


def agent_flow(agent: dict):
    nodes = [{"id": "ask", "type": "core.inject", "params": {"payload": fixed("hi")}},
             {"id": "agent", "type": "ai.agent", "params": agent},
             {"id": "show", "type": "core.debug"}]
    wires = [{"from": ["ask", "out"], "to": ["agent", "in"]},
             {"from": ["agent", "out"], "to": ["show", "in"]}]
    return parse_flow({"format": "switchboard.flow/1", "name": "Paid", "nodes": nodes,
                       "wires": wires})


def scripted_agent(model: str) -> dict:
    script = [{"tool_calls": [{"name": "nothing_here", "arguments": {}}],
               "usage": {"input_tokens": 1000, "output_tokens": 100}},
              {"text": "done", "usage": {"input_tokens": 3000, "output_tokens": 200}}]
    return {"provider": fixed("scripted"), "script": fixed(script), "model": fixed(model)}


@pytest.fixture
def served(monkeypatch):
    """An agent that asks the local server, which answers two turns."""
    monkeypatch.setenv("TEST_KEY", "sk-test-cost")
    with LlmServer() as llm:
        def agent(model: str) -> dict:
            llm.replies = [openai_reply(tool_calls=[("nothing_here", {})], model=model,
                                        usage=USAGE[0]),
                           openai_reply("done", model=model, usage=USAGE[1])]
            return {"provider": fixed("openai"), "base_url": fixed(llm.openai_url),
                    "api_key_env": fixed("TEST_KEY"), "model": fixed(model)}
        yield agent


@pytest.fixture
def prices(data_dir):
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "prices.json").write_text(json.dumps(PRICES), encoding="utf-8")


def _run(fake_window, qtbot, flow):
    window = fake_window(flow)
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.session.controller.is_running, timeout=60000)
    return window.session


def test_status_bar_and_history_show_the_runs_cost(fake_window, qtbot, prices, served):
    session = _run(fake_window, qtbot, agent_flow(served("test-model")))
    status = session.status.text()
    assert "Finished" in status and "$0.011 · 4,300 tokens" in status
    tab = session.inspector.history_tab
    tab.refresh()
    item = tab.tree.topLevelItem(0)
    assert tab.tree.headerItem().text(5) == "Cost"
    assert item.text(5) == "$0.011"
    assert "4,300 tokens" in item.toolTip(5)


def test_a_model_without_a_price_shows_tokens_and_no_usd(fake_window, qtbot, served):
    session = _run(fake_window, qtbot, agent_flow(served("mystery-model")))
    assert "4,300 tokens" in session.status.text() and "$" not in session.status.text()
    tab = session.inspector.history_tab
    tab.refresh()
    assert tab.tree.topLevelItem(0).text(5) == "4,300 tok"


def test_a_scripted_run_shows_offline_and_no_price(fake_window, qtbot, prices):
    """Against a priced model (as the site-crawl example plays gpt-4o-mini),
    a scripted run is offline: no USD in the status bar, the history or the
    Agent tab, whose header says "offline"."""
    from designer.panels.inspector.agent_tab import usage_text

    session = _run(fake_window, qtbot, agent_flow(scripted_agent("test-model")))
    status = session.status.text()
    assert "offline · 4,300 tokens" in status and "$" not in status
    tab = session.inspector.history_tab
    tab.refresh()
    item = tab.tree.topLevelItem(0)
    assert item.text(5) == "offline" and "$" not in item.toolTip(5)
    [conv] = session.inspector.live.conversations
    header = usage_text(conv)
    assert header.endswith("·  offline") and "$" not in header

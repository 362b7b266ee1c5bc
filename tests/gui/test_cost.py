"""A run's cost in the designer: the status bar after the run and the Cost
column of the history list (runtime.cost prices the scripted usage)."""

from __future__ import annotations

import json

from runtime.flow import parse_flow
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures

PRICES = {"models": {"test-model": {"input": 2.0, "output": 10.0}}}


def fixed(value):
    return {"scope": "custom", "value": value}


def agent_flow(model: str):
    # 1000 in, 100 out, then 3000 in, 200 out: $0.003 + $0.008 at the prices above
    script = [{"tool_calls": [{"name": "nothing_here", "arguments": {}}],
               "usage": {"input_tokens": 1000, "output_tokens": 100}},
              {"text": "done", "usage": {"input_tokens": 3000, "output_tokens": 200}}]
    nodes = [{"id": "ask", "type": "core.inject", "params": {"payload": fixed("hi")}},
             {"id": "agent", "type": "ai.agent",
              "params": {"provider": fixed("scripted"), "script": fixed(script),
                         "model": fixed(model)}},
             {"id": "show", "type": "core.debug"}]
    wires = [{"from": ["ask", "out"], "to": ["agent", "in"]},
             {"from": ["agent", "out"], "to": ["show", "in"]}]
    return parse_flow({"format": "switchboard.flow/1", "name": "Paid", "nodes": nodes,
                       "wires": wires})


def _run(fake_window, qtbot, flow):
    window = fake_window(flow)
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.session.controller.is_running, timeout=10000)
    return window.session


def test_status_bar_and_history_show_the_runs_cost(fake_window, qtbot, data_dir):
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "prices.json").write_text(json.dumps(PRICES), encoding="utf-8")
    session = _run(fake_window, qtbot, agent_flow("test-model"))
    status = session.status.text()
    assert "Finished in" in status and "$0.011 · 4,300 tokens" in status
    tab = session.inspector.history_tab
    tab.refresh()
    item = tab.tree.topLevelItem(0)
    assert tab.tree.headerItem().text(5) == "Cost"
    assert item.text(5) == "$0.011"
    assert "4,300 tokens" in item.toolTip(5)


def test_a_model_without_a_price_shows_tokens_and_no_usd(fake_window, qtbot, data_dir):
    session = _run(fake_window, qtbot, agent_flow("mystery-model"))
    assert "4,300 tokens" in session.status.text() and "$" not in session.status.text()
    tab = session.inspector.history_tab
    tab.refresh()
    assert tab.tree.topLevelItem(0).text(5) == "4,300 tok"

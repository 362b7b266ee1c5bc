"""The Agent tab shows the answer growing while it streams in: the local
LLM server holds the last piece until the test has seen the partial text."""

from __future__ import annotations

import threading

from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures
from tests.servers.flows import agent_flow, fixed
from tests.servers.llm import LlmServer, Stream, openai_reply

PIECES = ["The parcel ", "left the depot ", "this morning ", "and arrives ", "on Friday."]


def test_the_agent_tab_shows_partial_text_before_the_stream_ends(fake_window, qtbot,
                                                                   monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-gui-stream")
    release = threading.Event()
    with LlmServer() as llm:
        llm.replies = [Stream(openai_reply("".join(PIECES)), pieces=PIECES, hold=release)]
        flow = agent_flow({"provider": fixed("openai"), "model": fixed("gpt-test"),
                           "base_url": fixed(llm.openai_url),
                           "api_key_env": fixed("TEST_OPENAI_KEY")}, [], prompt="Where is it?")
        window = fake_window(flow)
        session = window.session
        tab = session.inspector.agent
        try:
            window.run_action.trigger()
            # Everything but the held last piece shows while the run goes on.
            partial = "".join(PIECES[:-1]).strip()
            qtbot.waitUntil(lambda: partial in tab.view.toPlainText(), timeout=10000)
            assert session.controller.is_running
            shown = tab.view.toPlainText()
            assert "on Friday." not in shown
            assert "waiting for the LLM" not in shown
        finally:
            release.set()
        qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)
        qtbot.waitUntil(lambda: "".join(PIECES) in tab.view.toPlainText(), timeout=5000)
        # The whole answer replaced the growing one: it shows once, not marked partial.
        assert tab.view.toPlainText().count("The parcel") == 1
        assert "on Friday. …" not in tab.view.toPlainText()


def test_the_site_crawl_example_shows_the_running_tool_and_the_cost(fake_window, qtbot):
    """Issue 14's example in the designer: while the background crawl goes
    on, the Agent tab has a line for it over the prompt ("Crawl shop site:
    page 2 of 7 (14%)") under the first answer; at the end the line is gone
    and the conversation's tokens show, with "offline" for a cost: its model
    is scripted, and only a model really called has a price (T3 2/10 item 8)."""
    from pathlib import Path

    from tests.gui.inspector_fixtures import load_example

    path = Path(__file__).resolve().parents[2] / "resources" / "examples" / "site-crawl.flow.json"
    flow = load_example(path)
    for value in flow.node("crawl").params.values():  # no document path: say where the site is
        if isinstance(value.value, str):
            value.value = value.value.replace("{flow_dir}", str(path.parent))
    window = fake_window(flow)
    session = window.session
    tab = session.inspector.agent
    window.run_action.trigger()
    qtbot.waitUntil(lambda: any(line.startswith("Crawl shop site: page ")
                                for line in tab.activity_text()), timeout=20000)
    assert not tab.activity.isHidden()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=30000)
    qtbot.waitUntil(lambda: "out of stock" in tab.view.toPlainText(), timeout=5000)
    assert tab.activity_text() == [] and tab.activity.isHidden()
    assert "3,320 tokens in" in tab.usage.text() and "offline" in tab.usage.text()
    assert "$" not in tab.usage.text()
    answers = [d.value for d in session.inspector.ctx.model.debug]
    assert len(answers) == 2 and "started reading" in answers[0]

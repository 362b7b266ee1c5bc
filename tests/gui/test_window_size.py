"""Nothing widens the window (issue T3 2/10, item 1): at 1440x900, with long
values (a 2,000-character body, a 300-character subject, 50 recipients),
every card, dialog and panel a run or a menu opens leaves the main window
at 1440x900 with each of its controls whole inside it; dialogs fit the
screen. Real runs of real flows, real widgets, nothing mocked.

Set SWITCHBOARD_SHOTS=/some/folder to keep a screenshot of each screen."""

from __future__ import annotations

import json

from PySide6.QtCore import QRect
from PySide6.QtWidgets import QWidget

from tests.gui.layout_checks import assert_dialog_fits, assert_fits, settle, shot
from tests.gui.long_values import *  # noqa: F403 - open_window and the flows
from tests.gui.long_values import BODY, RECIPIENTS, SUBJECT, ask_flow, email_flow, mcp_flow


def wait_cards(qtbot, window, n: int = 1) -> list:
    cards = window.run_session.inspector.cards
    qtbot.waitUntil(lambda: len(cards.cards()) == n, timeout=10000)
    settle()
    return cards.cards()


def geometry_in(window, widget) -> QRect:
    return QRect(widget.mapTo(window, widget.rect().topLeft()), widget.size())


# -- cards ------------------------------------------------------------------------------------
def test_an_approval_card_with_long_arguments_leaves_the_window_as_it_was(open_window, qtbot,
                                                                          tmp_path):
    window = open_window(email_flow(tmp_path, approval={"mode": "always"}))
    window.run_action.trigger()
    [card] = wait_cards(qtbot, window)
    shot(window, "approval-card")
    assert_fits(window)
    cards = window.run_session.inspector.cards
    # The column lives in the inspector's area, beside the tabs, never over Properties.
    inspector = geometry_in(window, window.inspector_dock)
    assert inspector.contains(geometry_in(window, cards))
    assert not geometry_in(window, cards).intersects(geometry_in(window, window.properties_dock))
    # Its buttons are in reach: scrolled to, they are inside the column.
    cards.scroll.ensureWidgetVisible(card.approve_button)
    settle()
    assert geometry_in(window, cards.scroll.viewport()).contains(
        geometry_in(window, card.approve_button))
    card.approve_button.click()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=10000)
    assert_fits(window)


def test_an_agents_long_question_leaves_the_window_as_it_was(open_window, qtbot, tmp_path):
    choices = [f"Ship with carrier number {i} using the slow but cheap ground service"
               for i in range(6)]
    window = open_window(ask_flow(tmp_path, {"question": BODY[:600], "choices": choices}))
    window.run_action.trigger()
    [card] = wait_cards(qtbot, window)
    shot(window, "question-card")
    assert_fits(window)
    assert [b.text() for b in card.choice_buttons] == choices  # each whole, wrapped if need be
    card.choice_buttons[-1].click()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=10000)
    assert_fits(window)


def test_a_paused_tool_call_with_long_arguments_leaves_the_window_as_it_was(open_window, qtbot,
                                                                            tmp_path):
    window = open_window(email_flow(tmp_path))
    debugging = window.run_session.debugging
    debugging.store.set_node("mail")  # a breakpoint on the tool node holds the agent's call
    window.run_action.trigger()
    qtbot.waitUntil(lambda: len(debugging.held()) == 1 and debugging.tab.current() is not None,
                    timeout=10000)
    settle()
    shot(window, "paused-call")
    assert_fits(window)
    assert debugging.tab.editor.value()["subject"] == SUBJECT
    debugging.continue_all()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=10000)
    assert_fits(window)


# -- the inspector's tabs after a run with long values -----------------------------------------
def test_every_inspector_tab_after_a_long_run_leaves_the_window_as_it_was(open_window, qtbot,
                                                                          tmp_path):
    window = open_window(email_flow(tmp_path))
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=10000)
    inspector = window.run_session.inspector
    for index in range(inspector.tabs.count()):
        inspector.tabs.setCurrentIndex(index)
        settle()
        shot(window, f"tab-{index}-{inspector.tabs.tabText(index).split(' ')[0].lower()}")
        assert_fits(window)


# -- panels in Properties ------------------------------------------------------------------------
def test_the_turns_editor_with_long_arguments_leaves_the_window_as_it_was(open_window, qtbot,
                                                                          tmp_path):
    window = open_window(email_flow(tmp_path))
    window.select_node("agent")
    settle()
    panel = window.properties
    editor = panel.findChild(QWidget, "turnsEditor")
    assert editor is not None and editor.isVisibleTo(window)
    panel.scroll.ensureWidgetVisible(editor)
    settle()
    shot(window, "turns-editor")
    assert_fits(window)


def test_mcp_tools_with_long_names_leave_the_window_as_it_was(open_window, qtbot, tmp_path):
    window = open_window(mcp_flow(tmp_path))
    window.select_node("mcp")
    settle()
    section = window.properties.findChild(QWidget, "mcpTools")
    assert section is not None and section.isVisibleTo(window)
    section.table.selectRow(0)
    settle()
    shot(window, "mcp-tools")
    assert_fits(window)


# -- dialogs ----------------------------------------------------------------------------------
def test_dialogs_with_long_values_fit_the_screen_and_leave_the_window(open_window, qtbot,
                                                                      tmp_path, monkeypatch):
    from runtime import cost, credentials

    monkeypatch.setenv("SWITCHBOARD_CREDENTIALS", "file")
    window = open_window(email_flow(tmp_path))
    long_key = ("openai-production-key-for-the-customer-support-assistant-of-the-northern-"
                "region-escalations-team-")[:128]
    credentials.set(long_key, "sk-" + "x" * 300)
    opened = []

    def check(dialog, name: str) -> None:
        qtbot.waitExposed(dialog)
        size = (dialog.width(), dialog.height())
        settle()
        shot(dialog, name)
        assert (dialog.width(), dialog.height()) == size
        assert_dialog_fits(dialog)
        assert_fits(window)
        opened.append(dialog)

    check(window.show_credentials(), "credentials")
    prices = cost.user_prices_path()
    prices.parent.mkdir(parents=True, exist_ok=True)
    prices.write_text(json.dumps({"models": {
        "meta-llama/Llama-3.1-405B-Instruct-Turbo-with-a-very-long-deployment-name-"
        "in-the-north-europe-region": {"input": 3.5, "output": 3.5}}}))
    check(window.show_prices(), "prices")
    from designer.panels.pin_dialog import open_pin_dialog

    check(open_pin_dialog(window.document, "mail", window, value={"out": [
        {"payload": {"to": RECIPIENTS, "subject": SUBJECT, "body": BODY}}]}), "pin")
    monkeypatch.setenv("SWITCHBOARD_BROKER", "redis://127.0.0.1:9/0?" + "x" * 200)
    workers = window.run_session.queue.show_workers()
    qtbot.waitUntil(lambda: "Cannot reach" in workers.summary.text()
                    or "Queue mode" in workers.summary.text(), timeout=20000)
    check(workers, "workers")
    for dialog in opened:
        dialog.close()

"""Nothing moves or overlaps (issue T3 2/10, item 6), in the main window at
1440x900 with real runs and real clicks: an agent's run line stays clear of
the wires leaving its bottom edge (tools, hooks), a call waiting for
approval shows a clock the font can draw, a click on a Debug row selects
its node without panning the canvas away (unless the node is out of view),
and opening a dropdown in Properties moves nothing."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QPoint, QRectF, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QComboBox

from designer.canvas.items import NODE_W, NodeItem
from designer.canvas.wires import WireItem
from designer.panels.inspector.inspector import TAB_AGENT, TAB_DEBUG
from tests.gui.layout_checks import settle, shot
from tests.gui.long_values import *  # noqa: F403 - open_window and the flows
from tests.gui.long_values import EMAIL_ASSISTANT
from tests.gui.test_text_fits import click_item

EXAMPLES = EMAIL_ASSISTANT.parent


def run(window, qtbot) -> None:
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=15000)
    settle()


def email(tmp_path, mail_at: tuple[int, int] | None = None, approval: dict | None = None):
    data = json.loads(EMAIL_ASSISTANT.read_text())
    nodes = {n["id"]: n for n in data["nodes"]}
    nodes["mail"]["params"]["outbox_dir"] = {"scope": "custom", "value": str(tmp_path / "out")}
    if mail_at is not None:
        nodes["mail"]["position"] = list(mail_at)
    if approval is not None:
        nodes["mail"]["tool"] = {"approval": approval}
    path = tmp_path / "email.flow.json"
    path.write_text(json.dumps(data))
    return path


# -- the run line ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mail_at", [None, (320, 300), (100, 240), (560, 220)],
                         ids=["as-shipped", "below", "below-left", "close-right"])
def test_an_agents_run_line_stays_clear_of_its_tools_wire(open_window, qtbot, tmp_path,
                                                          mail_at):
    window = open_window(email(tmp_path, mail_at))
    run(window, qtbot)
    agent = window.scene.item_for_node("agent")
    assert agent.run_state != "idle" and agent.run_state_text()
    line = agent.mapRectToScene(agent.run_line_rect())
    [tools] = [w for w in agent.wires if w.source is agent and w.tools]
    shot(window, f"run-line-{mail_at}")
    # The wire's outline, 6 px either side of its line, never crosses the text.
    assert not tools.mapToScene(tools.shape()).intersects(line)
    # Nor does any other wire, nor another node's card.
    for item in window.scene.items():
        if isinstance(item, WireItem):
            assert not item.mapToScene(item.shape()).intersects(line)
        elif isinstance(item, NodeItem) and item is not agent:
            assert not item.mapRectToScene(QRectF(0, 0, NODE_W, item.height)).intersects(line)


def test_the_hooks_examples_run_line_stays_clear_of_its_hook_and_tools_wires(
        open_window, qtbot, tmp_path):
    window = open_window(EXAMPLES / "hooks-audit.flow.json")
    run(window, qtbot)
    agent = window.scene.item_for_node("agent")
    assert agent.run_state != "idle"
    line = agent.mapRectToScene(agent.run_line_rect())
    down = [w for w in agent.wires if w.source is agent and w.down]
    assert len(down) == 2  # the tools wire and the on_tool hook's
    shot(window, "run-line-hooks")
    for wire in down:
        assert not wire.mapToScene(wire.shape()).intersects(line)


def test_two_agents_run_lines_stay_clear_of_every_wire(open_window, qtbot, tmp_path):
    """The triage example: the mail agent sits below the triage agent, whose
    tools wire comes down into it from above."""
    data = json.loads((EXAMPLES / "triage-delegation.flow.json").read_text())
    for n in data["nodes"]:
        if n["type"] == "mail.send":
            n["params"]["outbox_dir"] = {"scope": "custom", "value": str(tmp_path / "out")}
            n["tool"] = {"approval": {"mode": "never"}}
    path = tmp_path / "triage.flow.json"
    path.write_text(json.dumps(data))
    window = open_window(path)
    run(window, qtbot)
    shot(window, "run-line-triage")
    wires = [i for i in window.scene.items() if isinstance(i, WireItem)]
    agents = [window.scene.item_for_node(n["id"]) for n in data["nodes"]
              if n["type"] == "ai.agent"]
    assert len(agents) == 2
    for agent in agents:
        assert agent.run_state != "idle"
        line = agent.mapRectToScene(agent.run_line_rect())
        crossed = [f"{w.source.node_id}.{w.sport}" for w in wires
                   if w.mapToScene(w.shape()).intersects(line)]
        assert not crossed, f"{agent.node_id}'s run line is crossed by {crossed}"


def test_a_run_line_under_a_node_stays_under_it(open_window, qtbot, tmp_path):
    window = open_window(email(tmp_path))
    run(window, qtbot)
    mail = window.scene.item_for_node("mail")
    line = mail.run_line_rect()
    assert line.top() >= mail.height and mail.boundingRect().contains(line)
    agent = window.scene.item_for_node("agent")  # its tools wire leaves below: above
    assert agent.run_line_rect().bottom() <= 0 and agent.boundingRect().contains(
        agent.run_line_rect())


# -- waiting for approval -------------------------------------------------------------------------
def test_a_call_waiting_for_approval_shows_a_clock_the_font_can_draw(open_window, qtbot,
                                                                     tmp_path):
    window = open_window(email(tmp_path, approval={"mode": "always"}))
    window.run_action.trigger()
    cards = window.run_session.inspector.cards
    qtbot.waitUntil(lambda: len(cards.cards()) == 1, timeout=10000)
    inspector = window.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_AGENT)
    tree = inspector.agent.calls.tree
    qtbot.waitUntil(lambda: bool(calls_in(tree)), timeout=5000)
    settle()
    [item] = calls_in(tree)
    shot(window, "waiting-for-approval")
    text = item.text(3)
    assert "waiting for approval" in text
    metrics = QFontMetrics(item.font(3))
    missing = [ch for ch in text if ord(ch) > 127 and not metrics.inFontUcs4(ord(ch))]
    assert not missing, f"drawn as empty boxes: {missing}"
    assert not item.icon(3).isNull()  # the clock
    cards.cards()[0].approve_button.click()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=10000)
    settle()
    [item] = calls_in(tree)
    assert item.icon(3).isNull()  # decided: no clock


def calls_in(tree) -> list:
    out = []

    def walk(item):
        for i in range(item.childCount()):
            child = item.child(i)
            if "send_email" in child.text(0):
                out.append(child)
            walk(child)

    walk(tree.invisibleRootItem())
    return out


# -- selecting from the inspector -----------------------------------------------------------------
def test_a_debug_row_selects_its_node_and_the_canvas_stays_put(open_window, qtbot, tmp_path):
    window = open_window(email(tmp_path))
    run(window, qtbot)
    view = window.view
    inspector = window.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_DEBUG)
    settle()
    debug = inspector.debug
    [row] = [debug.list.topLevelItem(i) for i in range(debug.list.topLevelItemCount())
             if debug.list.topLevelItem(i).text(1) == "Answer"]
    # The user works near the Ask node, the Answer node still in view.
    view.centerOn(window.scene.item_for_node("ask").sceneBoundingRect().center()
                  + QPoint(250, 60))
    settle()
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    assert seen.contains(window.scene.item_for_node("show").sceneBoundingRect())
    where = (view.horizontalScrollBar().value(), view.verticalScrollBar().value())
    click_item(qtbot, debug.list, row, 1)
    settle()
    assert window.scene.selected_node_ids() == ["show"]
    assert (view.horizontalScrollBar().value(), view.verticalScrollBar().value()) == where
    # A node out of view is brought in.
    view.centerOn(QRectF(seen).center() + QPoint(3000, 3000))
    settle()
    window.scene.clearSelection()
    click_item(qtbot, debug.list, row, 1)
    settle()
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    assert window.scene.selected_node_ids() == ["show"]
    assert seen.contains(window.scene.item_for_node("show").sceneBoundingRect())


# -- dropdowns in Properties ----------------------------------------------------------------------
def test_opening_a_dropdown_in_properties_moves_nothing(open_window, qtbot, tmp_path):
    window = open_window(email(tmp_path))
    panel = window.properties
    for node in ("agent", "mail", "ask", "show"):
        window.select_node(node)
        settle()
        for combo in [c for c in panel.findChildren(QComboBox) if c.isVisibleTo(window)]:
            panel.scroll.ensureWidgetVisible(combo)
            settle()
            where = {id(w): w.mapTo(window, QPoint(0, 0)) for w in panel.findChildren(QComboBox)}
            scrolled = panel.scroll.verticalScrollBar().value()
            QTest.mouseClick(combo, Qt.MouseButton.LeftButton, pos=combo.rect().center())
            settle()
            popup = QApplication.activePopupWidget()
            assert popup is not None, f"{node}: {combo.currentText()} did not open"
            moved = {w.currentText(): (where[id(w)], w.mapTo(window, QPoint(0, 0)))
                     for w in panel.findChildren(QComboBox)
                     if w.mapTo(window, QPoint(0, 0)) != where[id(w)]}
            assert not moved and panel.scroll.verticalScrollBar().value() == scrolled
            QTest.keyClick(popup, Qt.Key.Key_Escape)
            settle()
            assert panel.scroll.verticalScrollBar().value() == scrolled


def test_the_folded_inspectors_tabs_all_read_muted_the_paused_tab_too(open_window, tmp_path):
    from PySide6.QtGui import QColor

    from designer.look import theme

    window = open_window(email(tmp_path))
    inspector = window.run_session.inspector
    assert inspector.collapsed
    bar = inspector.tabs.tabBar()
    names = [bar.tabText(i) for i in range(bar.count())]
    assert names[-1] == "Paused"  # added by the debugger, after the others
    colors = {bar.tabText(i): bar.tabTextColor(i).name() for i in range(bar.count())}
    assert set(colors.values()) == {QColor(theme.current().muted).name()}, colors

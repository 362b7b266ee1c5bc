"""Issue 12, items 4-6, as a newcomer meets them in the real window: the
inspector folded to its tab strip until a run (or a click) opens it, at the
height it had last time; run results that grey or go when the flow they
describe is edited, replaced or closed; and an empty canvas that says how
to begin, whose keys really work."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.model.commands import MoveNodes, SetParam
from designer.model.document import FlowDocument
from runtime.flow import Flow, FlowNode, Wire, save_flow
from runtime.spec import ParamValue, Scope
from tests.gui.editor_fixtures import body_point, drag, port_point, show_all
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, ORDER_TRIAGE, history, qt_loop  # noqa: F401

V = Qt.Orientation.Vertical


@pytest.fixture
def fresh_settings():
    """No remembered inspector height: the first session of a new user."""
    from designer.look.settings import settings
    from designer.panels.inspector.dock import HEIGHT_KEY

    settings().remove(HEIGHT_KEY)
    yield settings
    settings().remove(HEIGHT_KEY)


@pytest.fixture
def open_window(qtbot, qt_loop, history, monkeypatch, data_dir, dialogs):  # noqa: F811
    """Main windows over the real node registry, 1440x900, each closed at
    the end without a save prompt."""
    from designer.window.main_window import MainWindow

    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    windows = []

    def make(path: Path | None = None, restore_layout: bool = False) -> MainWindow:
        doc = FlowDocument.open(path) if path else FlowDocument()
        w = MainWindow(doc, restore_layout=restore_layout, autosave_interval_ms=3_600_000)
        w.resize(1440, 900)
        w.show()
        qtbot.waitExposed(w)
        windows.append(w)
        return w

    yield make
    for w in windows:
        if w.run_session.controller.is_running:
            w.run_session.controller.stop()
            qtbot.waitUntil(lambda w=w: not w.run_session.controller.is_running, timeout=10000)
        w.document.undo_stack.setClean()
        w.close()
        w.deleteLater()
    QApplication.processEvents()


@pytest.fixture
def dialogs(monkeypatch):
    """Unsaved changes: discard, without a dialog."""
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setattr(QMessageBox, "question",
                        staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard))


def strip_height(window) -> int:
    return window.run_session.inspector.strip_height()


def click_tab(window, index: int) -> None:
    bar = window.run_session.inspector.tabs.tabBar()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     bar.tabRect(index).center())


def run(window, qtbot) -> None:
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=15000)


# -- 4. the inspector starts as a strip ------------------------------------------------

def test_the_inspector_is_a_strip_until_clicked_and_reopens_at_the_users_height(
        open_window, fresh_settings, qtbot):
    from designer.panels.inspector.dock import HEIGHT_KEY
    from designer.panels.inspector.inspector import TAB_HISTORY, TAB_TOOLS

    window = open_window()
    dock, inspector = window.inspector_dock, window.run_session.inspector
    # One line at the bottom: the tab names, nothing under them, and the
    # canvas has the height.
    assert dock.isVisible() and inspector.collapsed
    assert dock.height() <= strip_height(window) + 2
    assert inspector.tabs.tabBar().isVisible() and not inspector.body.isVisible()
    assert window.view.height() > 700
    assert "F5" in inspector.hint.text() and inspector.hint.isVisible()
    # Beside a wide Properties panel the hint is cut at its end, never at its start.
    inspector.hint.resize(220, inspector.hint.height())
    qtbot.waitUntil(lambda: inspector.hint.text().endswith("…"))
    assert inspector.hint.text().startswith("Run the flow")
    inspector.hint.resize(2000, inspector.hint.height())
    qtbot.waitUntil(lambda: not inspector.hint.text().endswith("…"))
    # The dock's own title bar would be a second line: there is none.
    assert dock.titleBarWidget() is not None and dock.titleBarWidget().height() == 0

    # A click on a tab opens the inspector on that tab, about a third high.
    click_tab(window, TAB_TOOLS)
    qtbot.waitUntil(lambda: dock.height() > 200)
    assert not inspector.collapsed and inspector.tabs.currentIndex() == TAB_TOOLS
    assert inspector.body.isVisible() and not inspector.hint.isVisible()
    assert abs(dock.height() - int(window.height() * 0.36)) <= 8
    assert window.run_session.dock.toggle_action.isChecked()

    # The user drags it higher; the strip's button folds it; Ctrl+J (or
    # View > Inspector) opens it again at the user's height.
    window.resizeDocks([dock], [333], V)
    qtbot.waitUntil(lambda: dock.height() == 333)
    assert int(fresh_settings().value(HEIGHT_KEY)) == 333
    QTest.mouseClick(inspector.toggle_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.height() <= strip_height(window) + 2)
    assert inspector.collapsed and not window.run_session.dock.toggle_action.isChecked()
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert window.run_session.dock.toggle_action in view_menu.actions()
    assert dock.toggleViewAction() not in view_menu.actions()  # one Inspector entry, not two
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    QTest.keyClick(window, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: dock.height() == 333)
    # A tab clicked while open just switches tabs.
    click_tab(window, TAB_HISTORY)
    assert inspector.tabs.currentIndex() == TAB_HISTORY and not inspector.collapsed
    # A double-click on the strip (not on a tab) folds it, and opens it.
    empty_spot = QPoint(inspector.hint.geometry().center().x(), strip_height(window) // 2)
    QTest.mouseDClick(inspector.strip, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier, empty_spot)
    assert inspector.collapsed
    QTest.mouseDClick(inspector.strip, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier, empty_spot)
    qtbot.waitUntil(lambda: dock.height() == 333)

    # Next session (a new window, its layout restored): a strip again, and
    # opened, it has the height the user gave it.
    window.close()
    again = open_window(restore_layout=True)
    dock2, inspector2 = again.inspector_dock, again.run_session.inspector
    assert inspector2.collapsed and dock2.height() <= strip_height(again) + 2
    click_tab(again, TAB_TOOLS)
    qtbot.waitUntil(lambda: dock2.height() == 333)


def test_a_run_opens_the_inspector_and_new_folds_it_again(open_window, fresh_settings, qtbot):
    window = open_window(ORDER_TRIAGE)
    dock, inspector = window.inspector_dock, window.run_session.inspector
    assert inspector.collapsed
    run(window, qtbot)
    assert not inspector.collapsed and dock.height() > 200
    assert len(inspector.debug.entries()) == 3
    # New: the run's results go, and the inspector the run opened folds.
    window.new_action.trigger()
    qtbot.waitUntil(lambda: inspector.collapsed)
    assert dock.height() <= strip_height(window) + 2
    # A flow that cannot run opens it too, on the reasons.
    window.document.reset(Flow(nodes=[FlowNode(id="x", type="no.such.type")]), None)
    window.run_action.trigger()
    assert not inspector.collapsed
    assert inspector.tabs.currentWidget() is inspector.problems


def test_an_inspector_the_user_opened_stays_open_across_new(open_window, fresh_settings, qtbot):
    window = open_window(ORDER_TRIAGE)
    inspector = window.run_session.inspector
    click_tab(window, 0)
    run(window, qtbot)
    window.new_action.trigger()
    assert not inspector.collapsed  # the user opened it, the user folds it
    assert inspector.debug.entries() == []


# -- 5. results of an old run -------------------------------------------------------------

def grey(item) -> bool:
    return item.font(0).italic()


def test_edits_grey_what_the_last_run_says_about_changed_nodes(open_window, qtbot):
    window = open_window(EMAIL_ASSISTANT)
    doc, scene = window.document, window.scene
    inspector = window.run_session.inspector
    run(window, qtbot)
    mail, agent, calls = (scene.item_for_node(n) for n in ("mail", "agent", "calls"))
    assert mail.run_state == "done" and not mail.run_stale
    assert not inspector.stale_banner.isVisible()
    tools_wire = scene.item_for_wire(3)
    assert tools_wire.activity == 1 and not tools_wire.stale

    # Moving nodes changes nothing the run showed.
    doc.undo_stack.push(MoveNodes(doc, {"mail": (doc.node("mail").position, (600.0, 400.0))}))
    assert not mail.run_stale and not inspector.stale_banner.isVisible()

    # Editing Send Mail (a param, as the properties panel does) greys its
    # badge and the count on its wire; the agent's badge stays as it was.
    doc.undo_stack.push(SetParam(doc, "mail", "sender",
                                 ParamValue(scope=Scope.CUSTOM, value="orders@example.com")))
    assert mail.run_stale and mail.run_state == "done"
    assert mail.run_state_text().startswith("before edit:")
    assert "before you edited this node" in mail.toolTip()
    assert tools_wire.stale and not agent.run_stale
    assert inspector.stale_banner.isVisible()
    assert "From the previous run" in inspector.stale_banner.text()
    tools_tab = inspector.tools
    call_item = next(iter(tools_tab._call_items.values()))
    assert grey(call_item) and "edited since" in call_item.toolTip(0)

    # Deleting a debug node (click it, press Delete) takes its badge away
    # and greys its lines in the Debug tab; the other debug node's stay.
    show_all(window)
    QTest.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton,
                     Qt.KeyboardModifier.NoModifier, body_point(window, "calls"))
    assert scene.selected_node_ids() == ["calls"]
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_Delete)
    assert doc.node("calls") is None and scene.item_for_node("calls") is None
    debug_rows = [inspector.debug.list.topLevelItem(i) for i in range(2)]
    by_node = {row.data(0, Qt.ItemDataRole.UserRole + 10).node: row for row in debug_rows}
    assert grey(by_node["calls"]) and not grey(by_node["show"])
    assert by_node["calls"].text(1) == "Tool calls"  # still named, from the run's flow
    assert "deleted since" in by_node["calls"].toolTip(1)

    # Undo both: the flow is the one that ran again, and nothing is grey.
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    calls = scene.item_for_node("calls")
    assert calls.run_state == "done" and not calls.run_stale  # its badge came back
    assert not mail.run_stale and not tools_wire.stale
    assert not inspector.stale_banner.isVisible()
    assert not grey(call_item) and not any(grey(r) for r in debug_rows)

    # A new run starts from a clean slate.
    doc.undo_stack.push(SetParam(doc, "mail", "sender",
                                 ParamValue(scope=Scope.CUSTOM, value="orders@example.com")))
    assert mail.run_stale
    run(window, qtbot)
    assert not mail.run_stale and mail.run_state == "done"
    assert not inspector.stale_banner.isVisible()


def test_a_wires_messages_follow_it_when_an_earlier_wire_is_deleted(open_window, qtbot):
    window = open_window(EMAIL_ASSISTANT)
    doc, scene = window.document, window.scene
    inspector = window.run_session.inspector
    run(window, qtbot)
    # Delete wire 0 (Ask -> Assistant, which carried the prompt): the
    # Assistant -> Answer wire becomes wire 0, and selecting it shows what
    # it carried, the agent's answer, not the prompt.
    from designer.model.commands import RemoveItems

    doc.undo_stack.push(RemoveItems(doc, [], [0]))
    assert (doc.flow.wires[0].source, doc.flow.wires[0].target) == (("agent", "out"),
                                                                    ("show", "in"))
    scene.clearSelection()
    scene.item_for_wire(0).setSelected(True)
    messages = inspector.messages
    assert "Answer" in messages.header.text()
    assert messages.note.text().startswith("1 message carried")
    shown = messages.incoming.tree.topLevelItem(0).data(0, Qt.ItemDataRole.UserRole + 1)
    assert shown["payload"].startswith("I emailed john@example.com")
    # A wire drawn after the run has carried nothing, whatever its ends did.
    doc.undo_stack.push(__import__("designer.model.commands", fromlist=["AddWire"]).AddWire(
        doc, Wire(source=("ask", "out"), target=("show", "in"))))
    scene.clearSelection()
    scene.item_for_wire(len(doc.flow.wires) - 1).setSelected(True)
    assert "added after the run" in messages.note.text()


def test_new_and_open_clear_the_last_run(open_window, qtbot, tmp_path):
    window = open_window(EMAIL_ASSISTANT)
    inspector = window.run_session.inspector
    run(window, qtbot)
    assert inspector.tools.calls_shown() and inspector.agent.current_conversation() is not None
    assert inspector.debug.filter.count() == 3  # all, Answer, Tool calls

    # Open another flow: nothing of the email assistant's run is left to
    # mistake for this flow's (both have a node with id "agent"...).
    other = tmp_path / "other.flow.json"
    flow = Flow(name="Other", nodes=[FlowNode(id="agent", type="ai.agent", position=(0, 0)),
                                     FlowNode(id="show", type="core.debug", position=(300, 0))],
                wires=[Wire(source=("agent", "out"), target=("show", "in"))])
    save_flow(flow, other)
    assert window.open_path(other)
    assert window.scene.item_for_node("agent").run_state == "idle"
    assert window.scene.item_for_wire(0).activity == 0
    assert inspector.debug.entries() == [] and inspector.debug.filter.count() == 1
    assert inspector.tools.calls_shown() == []
    assert inspector.agent.current_conversation() is None
    assert inspector.live.run_id == "" and not inspector.stale_banner.isVisible()
    assert window.run_session.status.text() == "Ready"
    # History still has the run.
    assert inspector.history_tab.run_ids()


def test_opening_another_flow_stops_a_run_and_drops_its_late_events(open_window, qtbot,
                                                                     tmp_path):
    slow = tmp_path / "slow.flow.json"
    save_flow(Flow(name="Slow", nodes=[
        FlowNode(id="go", type="core.inject", position=(0, 0)),
        FlowNode(id="wait", type="core.delay", position=(250, 0),
                 params={"seconds": ParamValue(scope=Scope.CUSTOM, value=30)}),
        FlowNode(id="show", type="core.debug", position=(500, 0))],
        wires=[Wire(source=("go", "out"), target=("wait", "in")),
               Wire(source=("wait", "out"), target=("show", "in"))]), slow)
    window = open_window(slow)
    controller = window.run_session.controller
    window.run_action.trigger()
    qtbot.waitUntil(lambda: window.scene.item_for_node("wait").run_state == "running",
                    timeout=10000)
    window.new_action.trigger()
    qtbot.waitUntil(lambda: not controller.is_running, timeout=10000)
    assert controller.last_result.status == "stopped"
    inspector = window.run_session.inspector
    assert inspector.live.run_id == "" and inspector.debug.entries() == []
    assert window.document.flow.nodes == []


# -- 6. the empty canvas -------------------------------------------------------------------

def drop_from_palette(window, type_id: str, at: QPointF) -> None:
    palette = window.palette
    mime = palette.tree.mimeData([palette.item_for_type(type_id)])
    vp = window.view.viewport()
    QApplication.sendEvent(vp, QDragEnterEvent(at.toPoint(), Qt.DropAction.CopyAction, mime,
                                               Qt.MouseButton.LeftButton,
                                               Qt.KeyboardModifier.NoModifier))
    QApplication.sendEvent(vp, QDropEvent(at, Qt.DropAction.CopyAction, mime,
                                          Qt.MouseButton.LeftButton,
                                          Qt.KeyboardModifier.NoModifier))


def test_an_empty_canvas_says_how_to_begin_and_its_keys_work(open_window, qtbot):
    from designer.look import theme

    window = open_window()
    view, doc = window.view, window.document
    hint = view.empty_hint
    assert hint.isVisible()
    text = hint.text()
    for words in ("Nodes", "Tab", "drop it on empty canvas"):
        assert words in text
    assert theme.current().muted in text  # in the theme's muted colour
    # Centred over the canvas, and the canvas still gets the mouse.
    assert hint.geometry() == view.viewport().geometry()
    label = hint.label.geometry()
    assert abs(label.center().x() - hint.width() / 2) <= 2
    assert abs(label.center().y() - hint.height() / 2) <= 2
    centre = view.viewport().geometry().center()
    assert view.childAt(centre) is view.viewport()

    # "press Tab": a search opens on the canvas; Enter adds the node.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    assert QApplication.focusWidget() is view  # a new window's keys go to the canvas
    QTest.keyClick(view, Qt.Key.Key_Tab)
    popup = window.editor._quick_add
    assert popup is not None and popup.isVisible()
    QTest.keyClicks(popup.edit, "inject")
    QTest.keyClick(popup.edit, Qt.Key.Key_Return)
    assert [n.type for n in doc.flow.nodes] == ["core.inject"]
    assert not hint.isVisible()

    # "drop a wire on empty canvas": pick the next node, it comes wired.
    show_all(window)
    start = port_point(window, doc.flow.nodes[0].id, "out")
    drag(window, start, start + QPoint(260, 40))
    picker = window.editor._quick_add
    assert picker.isVisible()
    picker.edit.setText("debug")
    QTest.keyClick(picker.edit, Qt.Key.Key_Return)
    assert [n.type for n in doc.flow.nodes] == ["core.inject", "core.debug"]
    assert len(doc.flow.wires) == 1

    # Delete everything: the hint is back; undo: gone again.
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(view, Qt.Key.Key_Delete)
    assert doc.flow.nodes == [] and hint.isVisible()
    doc.undo_stack.undo()
    assert len(doc.flow.nodes) == 2 and not hint.isVisible()

    # New: back. "drag a node from the palette": gone.
    window.new_action.trigger()
    assert hint.isVisible()
    drop_from_palette(window, "core.debug", QPointF(view.viewport().rect().center()))
    assert [n.type for n in doc.flow.nodes] == ["core.debug"] and not hint.isVisible()


def test_the_empty_canvas_hint_follows_the_theme(open_window, qtbot):
    from designer.look import theme

    window = open_window()
    try:
        window.set_theme("dark")
        assert theme.DARK.muted in window.view.empty_hint.text()
        window.set_theme("light")
        assert theme.LIGHT.muted in window.view.empty_hint.text()
    finally:
        window.set_theme("light")

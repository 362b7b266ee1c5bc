"""Breakpoints in the designer: real runs in the main window, set with a
click in an input's gutter (or the node and wire menus), the held message
shown and edited in the inspector's Paused tab, let go with the tab's
buttons. A test waits for what the run does (a message held, the run
ending), never for a clock."""

from __future__ import annotations

import json
from email import message_from_bytes

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QToolButton

from designer.canvas.breakpoint_marks import GUTTER_X, WIRE_AT, WIRE_DOT_HINT, input_ports
from designer.canvas.items import NODE_W
from designer.model.document import FlowDocument
from runtime.flow import load_flow, parse_flow
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, EXAMPLES, qt_loop  # noqa: F401
from tests.servers.flows import Recorder

HELLO = EXAMPLES / "hello.flow.json"


@pytest.fixture
def registry():
    return Registry.default()


@pytest.fixture
def open_window(make_window, qt_loop, registry):  # noqa: F811 - the fixtures above
    def make(flow):
        w = make_window(FlowDocument(flow, registry))
        w.view.reset_zoom()
        return w

    return make


def debugging(window):
    return window.run_session.debugging


def click_gutter(window, qtbot, node_id: str) -> None:
    """A real left click in the gutter left of the node's input."""
    item = window.scene.item_for_node(node_id)
    window.view.centerOn(item)
    port = input_ports(item)[0]
    at = window.view.mapFromScene(item.mapToScene(QPointF(GUTTER_X, port.pos.y())))
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=at)


def start(window) -> Recorder:
    assert window.run_session.run()
    rec = Recorder()
    window.run_session.controller.engine.bus.subscribe(rec)
    return rec


def wait_held(qtbot, window, n: int = 1) -> list:
    qtbot.waitUntil(lambda: len(debugging(window).held()) >= n and
                    debugging(window).tab.current() is not None, timeout=15000)
    return debugging(window).held()


def wait_done(qtbot, window):
    controller = window.run_session.controller
    qtbot.waitUntil(lambda: not controller.is_running, timeout=15000)
    return controller.last_result


def button(window, name: str) -> QToolButton:
    return debugging(window).tab.findChild(QToolButton, f"paused_{name}")


def type_json(window, value) -> None:
    editor = debugging(window).tab.editor.text_edit
    editor.setPlainText(json.dumps(value, indent=2))


def test_a_gutter_click_stops_the_message_and_the_edit_reaches_the_next_node(
        open_window, qtbot):
    window = open_window(load_flow(HELLO))
    dbg = debugging(window)
    click_gutter(window, qtbot, "greet")
    assert dbg.store.for_node("greet") is not None
    assert [d.state for d in dbg.marks.dots("greet")] == ["set"]  # the red dot
    rec = start(window)
    [held] = wait_held(qtbot, window)
    assert (held.node, held.reason) == ("greet", "breakpoint")
    # The inspector shows it in the Paused tab, the canvas with an amber halo.
    inspector = window.run_session.inspector
    assert inspector.tabs.currentIndex() == dbg.tab_index
    assert inspector.tabs.tabText(dbg.tab_index) == "Paused (1)"
    assert dbg.marks.halo("greet") is not None and dbg.marks.halo("greet").isVisible()
    shown = dbg.tab.editor.value()
    assert shown["payload"] == {"name": "World"}
    assert rec.debug_values("show") == []  # not on yet
    type_json(window, {**shown, "payload": {"name": "Ann"}})
    qtbot.mouseClick(button(window, "continue"), Qt.MouseButton.LeftButton)
    result = wait_done(qtbot, window)
    assert result.status == "ok"
    assert rec.debug_values("show") == ["Hello, Ann!"]
    assert [e.action for e in rec.of("debug.resumed")] == ["edited"]
    assert dbg.held() == [] and dbg.marks.halo("greet") is None
    assert inspector.tabs.tabText(dbg.tab_index) == "Paused"
    # A second click in the gutter takes the breakpoint away.
    click_gutter(window, qtbot, "greet")
    assert dbg.store.for_node("greet") is None and dbg.marks.dots("greet") == []


def test_step_then_skip_and_json_that_does_not_parse(open_window, qtbot):
    window = open_window(load_flow(HELLO))
    dbg = debugging(window)
    dbg.store.set_node("greet")
    rec = start(window)
    wait_held(qtbot, window)
    dbg.step_action.trigger()
    qtbot.waitUntil(lambda: [h.node for h in dbg.held()] == ["show"], timeout=15000)
    assert dbg.held()[0].reason == "step"
    # The tab shows the stepped message once the inspector's next batch lands.
    qtbot.waitUntil(lambda: isinstance(dbg.tab.editor.value(), dict)
                    and dbg.tab.editor.value().get("payload") == "Hello, World!",
                    timeout=5000)  # the template ran on it
    dbg.tab.editor.text_edit.setPlainText("{ not json")
    dbg.continue_action.trigger()
    assert "does not parse" in dbg.tab.error.text() and dbg.tab.error.isVisibleTo(dbg.tab)
    assert len(dbg.held()) == 1  # still waiting
    qtbot.mouseClick(button(window, "skip"), Qt.MouseButton.LeftButton)
    assert wait_done(qtbot, window).status == "ok"
    assert rec.debug_values("show") == []  # skipped: the debug node never got it


def test_a_tool_call_is_held_with_its_arguments_editable(open_window, qtbot, tmp_path):
    flow = load_flow(EMAIL_ASSISTANT)
    flow.node("mail").params["outbox_dir"] = ParamValue(scope=Scope.CUSTOM, value=str(tmp_path))
    window = open_window(flow)
    dbg = debugging(window)
    menu = window.build_node_menu("mail")
    [add] = [a for a in menu.actions() if a.text() == "Add Breakpoint"]
    add.trigger()
    menu.deleteLater()
    start(window)
    [held] = wait_held(qtbot, window)
    assert held.is_tool and held.tool == "send_email"
    assert not dbg.step_action.isEnabled()  # a tool call goes back to its agent: no step
    args = dbg.tab.editor.value()
    assert set(args) == {"to", "subject", "body"}
    type_json(window, {**args, "to": ["not", "text"]})
    dbg.continue_action.trigger()
    assert "do not fit the tool" in dbg.tab.error.text()
    type_json(window, {**args, "subject": "Shipped: A-1001 (edited)"})
    dbg.continue_action.trigger()
    assert wait_done(qtbot, window).status == "ok"
    [eml] = tmp_path.glob("*.eml")
    assert message_from_bytes(eml.read_bytes())["Subject"] == "Shipped: A-1001 (edited)"


def test_a_wire_breakpoint_a_condition_and_stop(open_window, qtbot):
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "Split",
        "nodes": [
            {"id": "src", "type": "core.inject", "position": [0, 0],
             "params": {"payload": {"scope": "custom", "value": [1, 7, 9]}}},
            {"id": "each", "type": "core.split", "position": [240, 0]},
            {"id": "show", "type": "core.debug", "position": [480, 0]}],
        "wires": [{"from": ["src", "out"], "to": ["each", "in"]},
                  {"from": ["each", "out"], "to": ["show", "in"]}]})
    window = open_window(flow)
    dbg = debugging(window)
    dbg.store.set_wire(1, "msg.payload > 5")
    assert dbg.marks.wire_mark(1).dot == "conditional"
    rec = start(window)
    held = wait_held(qtbot, window, 2)
    assert [h.view()["payload"] for h in held] == [7, 9] and held[0].wire == 1
    assert dbg.marks.wire_mark(1).held == 2
    assert rec.debug_values("show") == [1]
    window.run_session.stop()
    result = wait_done(qtbot, window)
    assert result.reason == "interrupted"
    assert dbg.held() == [] and dbg.marks.wire_mark(1).held == 0
    assert [e.action for e in rec.of("debug.resumed")] == ["stopped", "stopped"]


def test_a_breakpoint_set_while_the_flow_runs_and_pause_all(open_window, qtbot):
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "Ticks",
        "nodes": [
            {"id": "tick", "type": "core.inject", "position": [0, 0],
             "params": {"payload": {"scope": "custom", "value": 1},
                        "repeat_seconds": {"scope": "custom", "value": 0.01},
                        "count": {"scope": "custom", "value": 0}}},
            {"id": "show", "type": "core.debug", "position": [240, 0]},
            {"id": "other", "type": "core.debug", "position": [240, 120]}],
        "wires": [{"from": ["tick", "out"], "to": ["show", "in"]},
                  {"from": ["tick", "out"], "to": ["other", "in"]}]})
    window = open_window(flow)
    dbg = debugging(window)
    dbg.pause_all_action.setChecked(True)
    start(window)
    assert dbg.debugger is not None  # pause all alone attaches one
    dbg.store.set_node("show")  # while it runs
    held = wait_held(qtbot, window, 2)
    assert {(h.node, h.reason) for h in held} >= {("show", "breakpoint"), ("other", "paused")}
    dbg.continue_all_action.trigger()
    qtbot.waitUntil(lambda: dbg.held() == [], timeout=15000)
    assert not dbg.debugger.armed
    window.run_session.stop()
    wait_done(qtbot, window)
    dbg.pause_all_action.setChecked(False)


def chain(spacing: float):
    """inject -> split -> debug, the last wire ``spacing`` long from card to card."""
    return parse_flow({
        "format": "switchboard.flow/1", "name": "Split",
        "nodes": [
            {"id": "src", "type": "core.inject", "position": [0, 0],
             "params": {"payload": {"scope": "custom", "value": [1, 7, 9]}}},
            {"id": "each", "type": "core.split", "position": [240, 0]},
            {"id": "show", "type": "core.debug", "position": [240 + NODE_W + spacing, 0]}],
        "wires": [{"from": ["src", "out"], "to": ["each", "in"]},
                  {"from": ["each", "out"], "to": ["show", "in"]}]})


def on_wire(window, index: int, at: float) -> QPoint:
    """Where, in the viewport, the point ``at`` (0..1) along a wire is."""
    path = debugging(window).marks.wire_mark(index).path()
    window.view.centerOn(path.pointAtPercent(at))
    return window.view.mapFromScene(path.pointAtPercent(at))


def test_a_click_on_a_wire_dot_removes_its_breakpoint_a_click_beside_it_selects(
        open_window, qtbot):
    window = open_window(chain(spacing=240))
    dbg = debugging(window)
    dbg.store.set_wire(1, "msg.payload > 5")
    stack = window.document.undo_stack
    done = stack.count()
    # Elsewhere on the wire: selected, as always; the breakpoint stays.
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=on_wire(window, 1, 0.3))
    assert window.scene.selected_wire_indices() == [1]
    assert dbg.store.for_wire(1) is not None and dbg.marks.wire_mark(1).dot == "conditional"
    # Over the dot, the status bar says what a click does.
    dot = on_wire(window, 1, WIRE_AT)
    qtbot.mouseMove(window.view.viewport(), dot)
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == WIRE_DOT_HINT, timeout=5000)
    assert WIRE_DOT_HINT.startswith("Click to remove this breakpoint")
    window.scene.clearSelection()
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=dot)
    assert dbg.store.for_wire(1) is None and dbg.marks.wire_mark(1) is None
    assert window.scene.selected_wire_indices() == []  # the click went to the dot only
    assert window.statusBar().currentMessage() == ""  # the hint no longer applies
    # Breakpoints are the session's, not the flow's (as the wire menu's Remove
    # Breakpoint): the click is no edit of the document and undo has nothing to do
    # with it.
    assert stack.count() == done and stack.isClean()
    # With no dot there any more, a click there selects the wire.
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=dot)
    assert window.scene.selected_wire_indices() == [1] and dbg.store.for_wire(1) is None


def test_a_wire_dot_in_the_target_gutter_is_removed_not_the_input_toggled(open_window, qtbot):
    window = open_window(chain(spacing=72))  # the dot falls in the gutter of show's input
    dbg = debugging(window)
    dbg.store.set_wire(1)
    dot = on_wire(window, 1, WIRE_AT)
    assert dbg.gutter.hit(window.view.mapToScene(dot))[0] is window.scene.item_for_node("show")
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=dot)
    assert dbg.store.for_wire(1) is None and dbg.store.for_node("show") is None
    # The dot gone, the gutter there is the input's again.
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=dot)
    assert dbg.store.for_node("show") is not None

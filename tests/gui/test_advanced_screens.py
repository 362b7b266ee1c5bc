"""Advanced screens tried with the mouse and keyboard at 1440x900 (issue
T3 2/10, item 16): the MCP Server node's Args, the Paused tab, pins, a
stored run on the canvas, queue mode's Workers view and History, the MCP
tools section, breakpoint dots and Compare Runs. Real windows, real runs,
real servers; nothing mocked.

Set SWITCHBOARD_SHOTS=/some/folder to keep a screenshot of each screen."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QPlainTextEdit, QWidget

from runtime.spec import Scope
from tests.gui.layout_checks import assert_fits, settle, shot
from tests.gui.long_values import *  # noqa: F403 - open_window and the flows

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "tests" / "servers" / "mcp_demo.py")


def fixed(value):
    return {"scope": "custom", "value": value}


def write_flow(tmp_path: Path, data: dict, name: str = "flow") -> Path:
    path = tmp_path / f"{name}.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", **data}))
    return path


def mcp_desk(tmp_path: Path, args=None) -> Path:
    """An order desk: an agent whose tools port is wired to an MCP Server
    node that starts the demo server (tests/servers/mcp_demo.py)."""
    params = {"command": fixed(sys.executable)}
    if args is not None:
        params["args"] = fixed(args)
    return write_flow(tmp_path, {"name": "Order desk", "nodes": [
        {"id": "ask", "type": "core.inject", "name": "Question", "position": [60, 160],
         "params": {"payload": fixed("Where is order A-17?")}},
        {"id": "agent", "type": "ai.agent", "name": "Order agent", "position": [320, 160],
         "params": {"provider": fixed("scripted")}},
        {"id": "show", "type": "core.debug", "name": "Answer", "position": [600, 160]},
        {"id": "orders", "type": "mcp.server", "name": "Order system", "position": [600, 320],
         "params": params}],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]},
                  {"from": ["agent", "tools"], "to": ["orders", "in"]}]}, "desk")


def args_input(window) -> QWidget:
    """The text box of the MCP Server node's Args row, whatever its kind."""
    row = window.properties.form.rows["args"]
    box = row.value_editor.findChild(QLineEdit) or row.value_editor.findChild(QPlainTextEdit)
    assert box is not None
    return box


def row_text(window, name: str) -> str:
    row = window.properties.form.rows[name]
    return " ".join(w.text() for w in row.findChildren(QLabel) if w.isVisibleTo(row))


def type_into(qtbot, box: QWidget, text: str) -> None:
    """Click into the box, select what it holds and type ``text`` over it."""
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    qtbot.keyClick(box, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(box, Qt.Key.Key_Delete)
    qtbot.keyClicks(box, text)
    settle()


# -- the MCP Server node's Args ----------------------------------------------------------------
def test_mcp_args_take_a_plain_command_line_and_the_server_starts_with_it(open_window, qtbot,
                                                                          tmp_path):
    window = open_window(mcp_desk(tmp_path))
    doc = window.document
    window.select_node("orders")
    settle()
    box = args_input(window)
    window.properties.scroll.ensureWidgetVisible(box)
    line = f"{shlex.quote(DEMO)} stdio"
    type_into(qtbot, box, line)
    assert "Expecting value" not in row_text(window, "args")
    assert "Not applied" not in row_text(window, "args")
    assert doc.node("orders").params["args"].value == line  # kept as typed
    assert f'2 arguments: ["{DEMO}", "stdio"]' in row_text(window, "args")
    assert not [p for p in doc.problems_for("orders") if p.field.endswith("args")]
    shot(window, "mcp-args-line")
    assert_fits(window)

    # The server starts with the line split like a shell splits it.
    section = window.properties.form.mcp_tools
    qtbot.mouseClick(section.list_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.task is not None and section.task.done(), timeout=60_000)
    assert section.error.isHidden(), section.error.text()
    assert section.status.text() == "Listed: 5 tools."

    # A JSON list is still read as one.
    type_into(qtbot, box, json.dumps([DEMO, "stdio"]))
    assert doc.node("orders").params["args"].value == [DEMO, "stdio"]
    # An open quote is not applied (the line keeps what it was before the
    # quote was typed), and the line under the box says why.
    type_into(qtbot, box, "-m 'my server")
    assert doc.node("orders").params["args"].value == "-m "
    text = row_text(window, "args")
    assert "Not applied" in text and "no closing quotation" in text and "close the quote" in text


def test_a_flow_file_with_an_args_line_that_cannot_be_split_is_refused_by_name(tmp_path):
    import pytest

    from runtime.flow import FlowError, load_flow

    with pytest.raises(FlowError) as refused:
        load_flow(mcp_desk(tmp_path, "-m 'my server"))
    [problem] = [p for p in refused.value.problems if p.node == "orders"]
    assert problem.field == "params.args"
    assert "args cannot be split like a shell line: no closing quotation" in problem.message


# -- the Paused tab ------------------------------------------------------------------------------
def order_checks(tmp_path: Path) -> Path:
    """Three orders, one message each, through a template that a breakpoint
    stops, to a Debug node."""
    orders = [{"order": "A-1001", "total": 42.5}, {"order": "A-1002", "total": 17},
              {"order": "A-1003", "total": 230}]
    return write_flow(tmp_path, {"name": "Order checks", "nodes": [
        {"id": "orders", "type": "core.inject", "name": "Orders", "position": [60, 160],
         "params": {"payload": fixed(orders)}},
        {"id": "each", "type": "core.split", "name": "Each order", "position": [280, 160]},
        {"id": "check", "type": "core.template", "name": "Check order", "position": [500, 160],
         "params": {"template": fixed("Order {{ payload.order }}: {{ payload.total }} EUR"),
                    "to": fixed("summary")}},
        {"id": "show", "type": "core.debug", "name": "Show", "position": [720, 160]}],
        "wires": [{"from": ["orders", "out"], "to": ["each", "in"]},
                  {"from": ["each", "out"], "to": ["check", "in"]},
                  {"from": ["check", "out"], "to": ["show", "in"]}]}, "orders")


def held_at_check(open_window, qtbot, tmp_path):
    window = open_window(order_checks(tmp_path))
    debugging = window.run_session.debugging
    debugging.store.set_node("check")
    window.run_action.trigger()
    qtbot.waitUntil(lambda: len(debugging.held()) == 3 and debugging.tab.current() is not None,
                    timeout=15000)
    settle()
    return window, debugging


def finish(qtbot, window) -> None:
    window.run_session.debugging.continue_all()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=15000)


def test_the_paused_editor_stays_put_while_the_waiting_time_counts(open_window, qtbot,
                                                                   tmp_path):
    import time

    from PySide6.QtWidgets import QSplitter

    window, debugging = held_at_check(open_window, qtbot, tmp_path)
    tab = debugging.tab
    edit = tab.editor.text_edit
    # The person edits the message: a click into the editor, keys typed.
    qtbot.mouseClick(edit.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(40, 20))
    qtbot.keyClick(edit, Qt.Key.Key_End)
    qtbot.keyClicks(edit, "  ")  # spaces after a comma: the JSON means the same
    typed = edit.toPlainText()
    split = tab.findChild(QSplitter)
    total = sum(split.sizes())
    moved = []
    for right in range(300, total - 220, 6):  # every width the tab's right side may have
        split.setSizes([total - right, right])
        settle()
        tops = set()
        for waited in (9.5, 10.5, 59.5, 60.5, 599.5, 600.5, 3600.5, 36000.5):
            tab.current().since = time.monotonic() - waited
            tab._clock.timeout.emit()  # the clock's second ticks
            settle()
            tops.add(edit.mapTo(window, QPoint(0, 0)).y())
        if len(tops) > 1:
            moved.append((right, sorted(tops)))
    assert not moved, f"the editor moved as the waiting time grew: {moved[:5]}"
    assert edit.toPlainText() == typed and edit.hasFocus()  # the edit is untouched
    assert "waiting 10 h 00 min" in " ".join(w.text() for w in tab.findChildren(QLabel))
    split.setSizes([300, total - 300])
    settle()
    shot(window, "paused-clock")
    assert_fits(window)
    finish(qtbot, window)


def test_after_step_the_tab_follows_the_stepped_message(open_window, qtbot, tmp_path):
    window, debugging = held_at_check(open_window, qtbot, tmp_path)
    tab = debugging.tab
    first = tab.list.item(0)
    qtbot.mouseClick(tab.list.viewport(), Qt.MouseButton.LeftButton,
                     pos=tab.list.visualItemRect(first).center())
    stepped = tab.current()
    assert stepped.msg["payload"]["order"] == "A-1001"
    step = next(b for b in tab.findChildren(QWidget, "paused_step"))
    qtbot.mouseClick(step, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(h.node == "show" for h in debugging.held()), timeout=15000)
    settle()
    now = tab.current()
    assert now is not None and (now.node, now.reason) == ("show", "step")
    assert now.msgid == stepped.msgid
    assert tab.editor.value()["summary"] == "Order A-1001: 42.5 EUR"
    assert tab.list.currentItem().text().startswith("Show")
    shot(window, "paused-after-step")
    assert_fits(window)
    # Continue lets it go on: the oldest message still held is shown next.
    qtbot.keyClick(window, Qt.Key.Key_F8)
    qtbot.waitUntil(lambda: len(debugging.held()) == 2, timeout=15000)
    settle()
    assert tab.current().msg["payload"]["order"] == "A-1002"
    finish(qtbot, window)


# -- pins -----------------------------------------------------------------------------------------
def pin_through_the_dialog(window, qtbot, node_id: str) -> None:
    """Node menu > Pin Data…, then the dialog's Pin, with the mouse."""
    from PySide6.QtWidgets import QApplication

    menu = window.build_node_menu(node_id)
    next(a for a in menu.actions() if a.text() == "Pin Data…").trigger()
    menu.deleteLater()
    dialog = next(w for w in QApplication.topLevelWidgets()
                  if type(w).__name__ == "PinDialog" and w.isVisible())
    qtbot.mouseClick(dialog.pin_button, Qt.MouseButton.LeftButton)
    settle()


def test_unpin_in_properties_leaves_the_focus_off_the_node_name(open_window, qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    window = open_window(order_checks(tmp_path))
    doc = window.document
    window.select_node("check")
    settle()
    pin_through_the_dialog(window, qtbot, "check")
    assert doc.node("check").pin == {"out": [{"payload": ""}]}
    banner = window.properties.form.pin_banner
    assert banner.isVisible()
    shot(window, "pinned-banner")
    window.activateWindow()  # the dialog closed: the person is back in the window
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)

    # The banner's Unpin, with the mouse; then keys, as a person goes on typing.
    qtbot.mouseClick(banner.unpin_button, Qt.MouseButton.LeftButton)
    settle()
    assert doc.node("check").pin is None
    focus = QApplication.focusWidget()
    assert focus is not None
    assert not (isinstance(focus, QLineEdit) and focus.hasSelectedText()), \
        f"focus went to {focus.objectName() or type(focus).__name__} with its text selected"
    qtbot.keyClicks(focus, "x")
    qtbot.keyClick(focus, Qt.Key.Key_Return)
    window.select_node("show")  # leaving the form ends any edit in it
    settle()
    assert doc.node("check").name == "Check order"
    window.select_node("check")
    settle()
    shot(window, "after-unpin")
    assert_fits(window)


def test_pin_then_unpin_leaves_a_saved_flow_unmodified(open_window, qtbot, tmp_path):
    window = open_window(order_checks(tmp_path))
    doc = window.document
    assert not doc.modified
    window.select_node("check")
    settle()
    pin_through_the_dialog(window, qtbot, "check")
    assert doc.modified and window.isWindowModified()
    menu = window.build_node_menu("check")
    next(a for a in menu.actions() if a.text() == "Unpin").trigger()
    menu.deleteLater()
    settle()
    assert doc.node("check").pin is None
    assert not doc.modified and not window.isWindowModified()
    # Undo still brings the pin back (and the flow differs from the file again).
    doc.undo_stack.undo()
    assert doc.node("check").pin == {"out": [{"payload": ""}]} and doc.modified
    doc.undo_stack.redo()
    assert doc.node("check").pin is None and not doc.modified
    # A pin kept, saved, and then removed is an edit of the saved flow.
    pin_through_the_dialog(window, qtbot, "check")
    assert window.save()
    window.run_session.pins.unpin("check")
    assert doc.modified and doc.undo_stack.undoText() == "Unpin node"
    doc.undo_stack.undo()
    assert doc.node("check").pin == {"out": [{"payload": ""}]} and not doc.modified


# -- a stored run on the canvas ----------------------------------------------------------------
def run_and_wait(qtbot, window) -> None:
    with qtbot.waitSignal(window.run_session.controller.run_finished, timeout=20000):
        window.run_action.trigger()
    settle()


def badges(window) -> dict[str, str]:
    return {n.id: window.scene.item_for_node(n.id).run_state_text()
            for n in window.document.flow.nodes}


def test_a_stored_run_opened_from_history_shows_its_own_badges(open_window, qtbot, tmp_path):
    from PySide6.QtWidgets import QPushButton

    from designer.panels.inspector.inspector import TAB_HISTORY

    window = open_window(order_checks(tmp_path))
    session = window.run_session
    run_and_wait(qtbot, window)
    first = badges(window)
    assert first["check"] == "done · 3"
    # The live run: Check order pinned, so it sends its pin instead of running.
    pin_through_the_dialog(window, qtbot, "check")
    run_and_wait(qtbot, window)
    live = badges(window)
    assert live["check"] == "pinned · 3"

    # History > the older run > Open.
    inspector = session.inspector
    inspector.tabs.setCurrentIndex(TAB_HISTORY)
    settle()
    history = inspector.history_tab
    older = history.tree.topLevelItem(1)
    qtbot.mouseClick(history.tree.viewport(), Qt.MouseButton.LeftButton,
                     pos=history.tree.visualItemRect(older).center())
    qtbot.mouseClick(history.open_button, Qt.MouseButton.LeftButton)
    settle()
    assert inspector.viewing_stored
    assert badges(window) == first, "the canvas still shows the live run's badges"
    # A node edited since is greyed, as for the live run.
    window.select_node("each")
    settle()
    name = window.properties.findChild(QLineEdit, "nodeName") or next(
        e for e in window.properties.findChildren(QLineEdit) if e.text() == "Each order")
    type_into(qtbot, name, "Each order line")
    qtbot.keyClick(name, Qt.Key.Key_Return)
    settle()
    assert window.document.node("each").name == "Each order line"
    assert window.scene.item_for_node("each").run_stale
    assert not window.scene.item_for_node("show").run_stale
    assert badges(window)["check"] == "done · 3"
    shot(window, "stored-run-badges")
    assert_fits(window)

    # Back to the live run: its badges again.
    back = next(b for b in inspector.findChildren(QPushButton)
                if b.text() == "Back to the live run")
    qtbot.mouseClick(back, Qt.MouseButton.LeftButton)
    settle()
    assert not inspector.viewing_stored
    assert {k: v.removeprefix("before edit: ") for k, v in badges(window).items()} == live
    assert window.scene.item_for_node("each").run_stale


# -- queue mode: the Workers view and History ------------------------------------------------
def test_the_workers_view_and_history_follow_a_queued_run(open_window, qtbot, tmp_path,
                                                          monkeypatch):
    import os

    import pytest

    from designer.panels.inspector.inspector import TAB_HISTORY
    from tests.servers.redis import RedisServer, available
    from tests.test_queue import Proc, gate, start_worker
    from tests.test_queue import write_flow as write_queue_flow

    if not available():
        pytest.skip("needs Debian's redis-server")
    go = tmp_path / "go"
    path = write_queue_flow(tmp_path / "remote.flow.json", "Nightly report", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed("from the worker")}},
        gate(go), {"id": "show", "type": "core.debug"}], [("start", "gate"), ("gate", "show")])
    workers: list[Proc] = []
    opened: list = []
    with RedisServer() as server:
        monkeypatch.setenv("SWITCHBOARD_BROKER", server.url)
        env = dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path / "worker-data"),
                   PYTHONUNBUFFERED="1")
        try:
            start_worker(workers, env)
            window = open_window(path)
            queue = window.run_session.queue
            dialog = queue.show_workers()
            opened.append(dialog)
            queue.run_action.trigger()  # Run > Run on Queue
            assert queue.watching
            run_id = queue.remote.run_id

            def state() -> str | None:
                for row in range(dialog.runs.rowCount()):
                    if dialog.runs.item(row, 0).text() == run_id:
                        return dialog.runs.item(row, 1).text()
                return None

            qtbot.waitUntil(lambda: state() == "running", timeout=90_000)
            go.touch()
            qtbot.waitUntil(lambda: not queue.watching, timeout=90_000)
            settle()
            # Back finished: the view says so at once, not at its next look.
            assert state() in (None, "finished · ok"), f"the Workers view says {state()!r}"
            assert " 0 running" in dialog.summary.text()
            assert all(dialog.workers.item(r, 1).text().startswith("0 of")
                       for r in range(dialog.workers.rowCount()))
            shot(dialog, "workers-after-run")
            qtbot.waitUntil(lambda: state() is None, timeout=90_000)  # Redis agrees soon

            # History names the worker that ran it.
            inspector = window.run_session.inspector
            inspector.tabs.setCurrentIndex(TAB_HISTORY)
            settle()
            tree = inspector.history_tab.tree
            [item] = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
                      if tree.topLevelItem(i).toolTip(0) == f"run {run_id}"]
            flow_text = item.text(1)
            assert flow_text.startswith("Nightly report · on ")
            assert flow_text.endswith(f"@{os.uname().nodename}")
            assert "Run from the queue by the worker" in item.toolTip(1)
            shot(window, "history-worker")
            assert_fits(window)
        finally:
            for w in opened:
                w.close()
            for p in workers:
                p.stop()


# -- the MCP Server node's tools ----------------------------------------------------------------
def listed_desk(open_window, qtbot, tmp_path):
    """The order desk's MCP Server selected, its tools listed by the real
    List tools (the demo server), lookup_order selected with the mouse."""
    window = open_window(mcp_desk(tmp_path, [DEMO, "stdio"]))
    window.select_node("orders")
    settle()
    section = window.properties.form.mcp_tools
    window.properties.scroll.ensureWidgetVisible(section.list_button)
    qtbot.mouseClick(section.list_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: section.task is not None and section.task.done(), timeout=60_000)
    settle()
    table = section.table
    row = next(r for r in range(table.rowCount())
               if table.item(r, 0).data(Qt.ItemDataRole.UserRole) == "lookup_order")
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualItemRect(table.item(row, 0)).center())
    settle()
    return window, section


def test_choosing_custom_for_a_tool_argument_does_not_move_the_panel(open_window, qtbot,
                                                                     tmp_path):
    window, section = listed_desk(open_window, qtbot, tmp_path)
    doc = window.document
    region = section.arg_rows["region"]
    window.properties.scroll.ensureWidgetVisible(region, 0, 200)
    settle()
    custom = region.switch.buttons[Scope.CUSTOM]

    def where() -> tuple[int, int]:
        return (custom.mapTo(window, QPoint(0, 0)).y(),
                section.table.mapTo(window, QPoint(0, 0)).y())

    before = where()
    qtbot.mouseClick(custom, Qt.MouseButton.LeftButton)
    settle()
    doc.revalidate()  # what the edit's validation (150 ms later) finds
    settle()
    assert where() == before, f"the panel moved from {before} to {where()}"
    assert region.switch.scope() is Scope.CUSTOM
    assert not doc.problems_for("orders"), [p.message for p in doc.problems_for("orders")]
    assert "No value yet" in region.note.text()
    shot(window, "mcp-custom-argument")
    # The value typed is the pin; the panel still does not move.
    qtbot.mouseClick(region.value_editor.edit, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(region.value_editor.edit, "eu-west")
    doc.revalidate()
    settle()
    assert where() == before
    from nodes.mcp.entries import parse_entries

    [entry] = [e for e in parse_entries(doc.node("orders").params["tools"].value)[0]
               if e.name == "lookup_order"]
    assert entry.pinned == {"region": "eu-west"}
    assert not doc.problems_for("orders")
    assert_fits(window)


def test_the_tools_table_shows_each_description_whole_and_its_header_uncrowded(
        open_window, qtbot, tmp_path):
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QFontMetrics

    from nodes.mcp.entries import parse_entries

    window, section = listed_desk(open_window, qtbot, tmp_path)
    table = section.table
    header = table.horizontalHeader()
    metrics = QFontMetrics(header.font())
    for col in range(table.columnCount()):
        text = table.horizontalHeaderItem(col).text()
        assert metrics.horizontalAdvance(text) + 16 <= header.sectionSize(col), \
            f"header {text!r} is crowded into {header.sectionSize(col)} px"
    tools = {e.name: e.description
             for e in parse_entries(window.document.node("orders").params["tools"].value)[0]}
    assert "Look up an order by its id in one region's order system." in tools.values()
    font = QFontMetrics(table.font())
    for row in range(table.rowCount()):
        name = table.item(row, 0).data(Qt.ItemDataRole.UserRole)
        desc = tools[name]
        cells = [c for c in range(table.columnCount()) if any(
            table.item(row, c).data(role) == desc
            for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.UserRole + 2))]
        assert cells, f"{name}: its description is not in the table"
        # Whole: wrapped at the room its cell gives text, it fits the row.
        room = table.columnWidth(cells[0]) - 40
        needed = font.boundingRect(QRect(0, 0, room, 10_000),
                                   int(Qt.TextFlag.TextWordWrap), desc).height()
        assert needed + font.height() <= table.rowHeight(row) + 2, \
            f"{name}: {desc!r} needs {needed} px of a {table.rowHeight(row)} px row"
    assert table.horizontalScrollBar().maximum() == 0
    # The check box is where it is drawn: a click there stops offering the tool.
    row = next(r for r in range(table.rowCount())
               if table.item(r, 0).data(Qt.ItemDataRole.UserRole) == "crash")
    box = table.visualItemRect(table.item(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(box.left() + 12, box.top() + 13))
    assert not [e for e in parse_entries(window.document.node("orders").params["tools"].value)[0]
                if e.name == "crash"][0].enabled
    window.properties.scroll.ensureWidgetVisible(table, 0, 40)
    settle()
    shot(window, "mcp-tools-table")
    assert_fits(window)


# -- a breakpoint's dot ---------------------------------------------------------------------------
def red_width(window, node_id: str) -> int:
    """How many pixels across the breakpoint's red dot left of the node's
    input is on screen (its widest row of red)."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QColor

    from designer.canvas.breakpoint_marks import GUTTER_X, input_ports
    from designer.look import theme

    item = window.scene.item_for_node(node_id)
    port = input_ports(item)[0]
    center = window.view.mapFromScene(item.mapToScene(QPointF(GUTTER_X, port.pos.y())))
    image = window.view.viewport().grab().toImage()
    red = QColor(theme.current().error)
    widest = 0
    for y in range(center.y() - 12, center.y() + 13):
        xs = [x for x in range(center.x() - 16, center.x() + 17)
              if abs(QColor(image.pixel(x, y)).red() - red.red()) < 40
              and abs(QColor(image.pixel(x, y)).green() - red.green()) < 40
              and abs(QColor(image.pixel(x, y)).blue() - red.blue()) < 40]
        if xs:
            widest = max(widest, max(xs) - min(xs) + 1)
    return widest


def test_a_breakpoint_dot_is_easy_to_see_at_the_zoom_an_example_opens_with(open_window, qtbot):
    from PySide6.QtCore import QPointF

    from designer.canvas import view
    from designer.canvas.breakpoint_marks import GUTTER_X, input_ports
    from tests.gui.inspector_fixtures import EXAMPLES

    readable = getattr(view, "READABLE_ZOOM", 0.8)  # the least zoom a flow opens at

    window = open_window(EXAMPLES / "order-triage.flow.json")
    settle()
    opened_at = window.view.zoom()
    assert readable <= opened_at <= 1.0
    node = "triage" if window.document.node("triage") is not None else next(
        n.id for n in window.document.flow.nodes
        if input_ports(window.scene.item_for_node(n.id)))
    item = window.scene.item_for_node(node)
    port = input_ports(item)[0]
    at = window.view.mapFromScene(item.mapToScene(QPointF(GUTTER_X, port.pos.y())))
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=at)  # sets it
    settle()
    assert window.run_session.debugging.store.for_node(node) is not None
    sizes = {opened_at: red_width(window, node)}
    shot(window, "breakpoint-dot")
    for zoom in (readable, 0.6, 1.0, 1.5):
        window.view.set_zoom(zoom)
        window.view.centerOn(item)
        settle()
        sizes[zoom] = red_width(window, node)
    assert all(width >= 11 for zoom, width in sizes.items() if zoom >= 0.6), \
        f"red dot widths by zoom: {sizes}"
    assert sizes[1.5] > sizes[1.0]  # closer in, it grows with the card
    # A click on it removes it, at a zoom where it would have been 7 px.
    window.view.set_zoom(readable)
    window.view.centerOn(item)
    settle()
    at = window.view.mapFromScene(item.mapToScene(QPointF(GUTTER_X, port.pos.y())))
    qtbot.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert window.run_session.debugging.store.for_node(node) is None


# -- Compare Runs ---------------------------------------------------------------------------------
def test_compare_runs_tints_a_duration_that_differs(open_window, qtbot, tmp_path):
    from PySide6.QtWidgets import QApplication

    from designer.panels.inspector.diff_view import Page
    from designer.panels.inspector.inspector import TAB_HISTORY

    path = write_flow(tmp_path, {"name": "Warehouse check", "nodes": [
        {"id": "orders", "type": "core.inject", "name": "Orders", "position": [60, 160],
         "params": {"payload": fixed({"order": "A-1001"})}},
        {"id": "wait", "type": "core.delay", "name": "Warehouse", "position": [300, 160],
         "params": {"seconds": fixed(0.05)}},
        {"id": "show", "type": "core.debug", "name": "Show", "position": [540, 160]}],
        "wires": [{"from": ["orders", "out"], "to": ["wait", "in"]},
                  {"from": ["wait", "out"], "to": ["show", "in"]}]}, "warehouse")
    window = open_window(path)
    run_and_wait(qtbot, window)
    # The warehouse got slow: the same flow, its delay 0.8 s.
    window.select_node("wait")
    settle()
    seconds = window.properties.form.rows["seconds"].value_editor.edit
    type_into(qtbot, seconds, "0.8")
    assert window.document.node("wait").params["seconds"].value == 0.8
    run_and_wait(qtbot, window)

    inspector = window.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_HISTORY)
    settle()
    history = inspector.history_tab
    tree = history.tree
    for i in range(2):
        qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton,
                         Qt.KeyboardModifier.ControlModifier,
                         pos=tree.visualItemRect(tree.topLevelItem(i)).center())
    assert len(tree.selectedItems()) == 2
    qtbot.mouseClick(history.compare_button, Qt.MouseButton.LeftButton)
    dialog = next(w for w in QApplication.topLevelWidgets()
                  if w.objectName() == "CompareRunsDialog" and w.isVisible())
    try:
        page = Page(dialog.view.pair)
        html = page.build()
        tinted = [row for row in html.split("<tr") if page.tint_row in row]
        assert any("Warehouse (wait)" in row and "(+" in row for row in tinted), \
            "the Warehouse's duration differs (50 ms against 800 ms) and is not tinted"
        assert any("Duration" in row for row in tinted)  # the run's, in the summary
        assert not any("Show (show)" in row for row in tinted)  # the same, give or take
        text = dialog.view.text()
        assert "Durations" in text and "(+" in text
        dialog.view.browser.verticalScrollBar().setValue(
            dialog.view.browser.verticalScrollBar().maximum())
        settle()
        shot(dialog, "compare-durations")
    finally:
        dialog.close()

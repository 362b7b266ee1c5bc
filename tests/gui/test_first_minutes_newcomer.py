"""Issue T3 2/10, "What a new user still trips over": each trip, through the
real window at 1440x900 on a first start (no settings, no key), driven by
real mouse and keyboard events.

2. an empty prompt is an error before a run, and a new Inject before an
   agent gets a sample prompt to type over;
3. "Use" in Credentials sets the key, the tested base URL and the picked
   model in one undo step, and says so;
4. a run whose tool call failed ends in the warning colour, saying so, in
   the status bar, on the agent's badge and in History; the Agent tab marks
   the call red;
7. an opened flow is shown at a readable zoom, scrolling instead of
   shrinking, and the examples fit with every wire on screen;
9. shortcuts work as soon as a dialog closes;
10. a refused call's arguments show as an object, as any call's do.
(Item 8, offline cost, is in tests/gui/test_cost.py and tests/test_cost.py.)

``python -m tests.gui.test_first_minutes_newcomer /tmp/shots`` saves the
screens these tests look at."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit

from tests.gui.inspector_fixtures import history, qt_loop  # noqa: F401
from tests.gui.test_first_five_minutes import Actions, new_user, out_port, pick  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "resources" / "examples"


def fixed(value):
    return {"scope": "custom", "value": value}


def make_window(path: Path | None = None):
    from designer.window.main_window import MainWindow

    window = MainWindow(restore_layout=False, autosave_interval_ms=3_600_000)
    window.resize(1440, 900)
    window.show()
    QApplication.processEvents()
    if path is not None:
        assert window.open_path(path, ask=False)
    window.activateWindow()
    QApplication.processEvents()
    return window


def close(window, qtbot) -> None:
    window.editor._close_quick_add()
    controller = window.run_session.controller
    if controller.is_running:
        controller.stop()
        qtbot.waitUntil(lambda: not controller.is_running, timeout=10000)
    window.document.undo_stack.setClean()
    window.close()
    window.deleteLater()
    QApplication.processEvents()


@pytest.fixture
def window(new_user, qt_loop, history, monkeypatch, qtbot):  # noqa: F811
    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    made = []

    def make(path: Path | None = None):
        made.append(make_window(path))
        qtbot.waitExposed(made[-1])
        return made[-1]

    yield make
    for w in made:
        close(w, qtbot)


def settle(window, qtbot) -> None:
    """After a popup (the node picker) closed: the offscreen platform may
    leave no window active, where X hands the focus back to the window (the
    designer asks it to: CanvasEditor._refocus); activate it as X would."""
    qtbot.wait(50)
    if QApplication.activeWindow() is not window:
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)


def run_to_end(window, qtbot) -> None:
    controller = window.run_session.controller
    window.run_action.trigger()
    qtbot.waitUntil(lambda: controller.last_result is not None and not controller.is_running,
                    timeout=30000)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_flow(tmp_path: Path, nodes: list, wires: list, name: str = "t") -> Path:
    path = tmp_path / f"{name}.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": name, "nodes": nodes,
                                "wires": [{"from": a, "to": b} for a, b in wires]}),
                    encoding="utf-8")
    return path


# -- 2. an empty prompt --------------------------------------------------------------------

def test_a_new_inject_before_an_agent_gets_a_sample_prompt_and_an_empty_one_is_an_error(
        window, qtbot):
    from designer.canvas.wiring import SAMPLE_PROMPT
    from designer.panels.inspector.inspector import TAB_PROBLEMS

    w = window()
    w.new_action.trigger()
    act = Actions(w)
    doc = w.document
    inject = act.drag_from_palette("core.inject", QPoint(140, 200))
    form = w.properties.form
    edit = form.rows["payload"].value_editor.edit
    assert edit.toPlainText() == ""
    start = out_port(w, inject)
    act.drag_wire(start, start + QPoint(220, 0), "wire the inject to empty canvas")
    pick(act, "AI Agent")
    # The wire brought a sample prompt, as text, in the same undo step.
    assert doc.node(inject).params["payload"].value == SAMPLE_PROMPT
    assert "sample prompt" in w.statusBar().currentMessage()
    assert doc.undo_stack.undoText() == "Add AI Agent and connect"
    doc.revalidate()
    assert [p for p in doc.problems if p.severity == "error"] == []

    # Shown selected in the inject's payload field: one click and typing replaces it.
    settle(w, qtbot)
    w.scene.select_nodes([inject])
    edit = w.properties.form.rows["payload"].value_editor.edit
    assert edit.textCursor().selectedText() == SAMPLE_PROMPT
    QTest.mouseClick(edit.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPoint(30, 8))
    assert edit.hasFocus() and edit.textCursor().selectedText() == SAMPLE_PROMPT
    QTest.keyClick(edit, Qt.Key.Key_Delete)
    assert "payload" not in doc.node(inject).params or not doc.node(inject).params["payload"].value

    # Empty: an error at once (Problems, the inject's marker, the status bar), before any run.
    qtbot.waitUntil(lambda: any(p.severity == "error" for p in doc.problems), timeout=5000)
    [problem] = [p for p in doc.problems if p.severity == "error"]
    assert (problem.node, problem.field) == (inject, "params.payload")
    assert problem.message.startswith("empty prompt:")
    look = w.scene.item_for_node(inject).look
    assert look.errors and look.errors[0].startswith("empty prompt:")
    assert "1 error" in w.problems_label.text()
    inspector = w.run_session.inspector
    assert any("empty prompt" in inspector.problems.tree.topLevelItem(i).text(3)
               for i in range(inspector.problems.count()))
    # F5 does not start a run that would fail on it; it shows the problem.
    QTest.keyClick(QApplication.focusWidget() or w, Qt.Key.Key_F5)
    assert not w.run_session.controller.is_running
    assert inspector.tabs.currentIndex() == TAB_PROBLEMS
    assert "Not run: 1 problem" in w.run_session.status.text()


def test_a_new_inject_picked_before_an_agent_takes_the_keys_over_its_sample(window, qtbot,
                                                                            tmp_path):
    """A wire dropped from the agent's input: the picker offers Inject first,
    and the new Inject's payload field has the sample selected, with the
    keyboard: typing replaces it."""
    from designer.canvas.wiring import SAMPLE_PROMPT

    w = window(write_flow(tmp_path, [
        {"id": "agent", "type": "ai.agent", "position": [300, 100],
         "params": {"provider": fixed("scripted"), "script": fixed([{"text": "{prompt}"}])}}], []))
    act = Actions(w)
    doc = w.document
    agent = "agent"
    item = w.scene.item_for_node(agent)
    start = w.view.mapFromScene(item.port_scene_pos("in", "in"))
    act.drag_wire(start, start - QPoint(260, 0), "a wire from the agent's input, back")
    popup = w.editor._quick_add
    assert popup.visible_types()[0] == "core.inject"  # suggested first
    pick(act, "Inject")
    [inject] = [n.id for n in doc.flow.nodes if n.type == "core.inject"]
    assert doc.node(inject).params["payload"].value == SAMPLE_PROMPT
    settle(w, qtbot)
    edit = w.properties.form.rows["payload"].value_editor.edit
    qtbot.waitUntil(edit.hasFocus, timeout=5000)  # once the picker has gone
    assert edit.textCursor().selectedText() == SAMPLE_PROMPT
    QTest.keyClicks(edit, "What is new today?")
    assert doc.node(inject).params["payload"].value == "What is new today?"


def test_wiring_an_empty_inject_to_an_agent_port_to_port_gives_it_the_sample(window, qtbot,
                                                                                 tmp_path):
    from designer.canvas.wiring import SAMPLE_PROMPT

    path = write_flow(tmp_path, [
        {"id": "ask", "type": "core.inject", "position": [0, 100]},
        {"id": "agent", "type": "ai.agent", "position": [320, 100],
         "params": {"provider": fixed("scripted"), "script": fixed([{"text": "{prompt}"}])}}],
        [])
    w = window(path)
    act = Actions(w)
    start = out_port(w, "ask")
    end = w.view.mapFromScene(w.scene.item_for_node("agent").port_scene_pos("in", "in"))
    act.drag_wire(start, end, "wire the inject to the agent")
    assert [(x.source, x.target) for x in w.document.flow.wires] == [
        (("ask", "out"), ("agent", "in"))]
    assert w.document.node("ask").params["payload"].value == SAMPLE_PROMPT
    w.document.undo_stack.undo()  # one step: wire and sample
    assert w.document.flow.wires == [] and "payload" not in w.document.node("ask").params


# -- 3. Credentials: Use sets key, base URL and model -------------------------------------

@pytest.fixture
def store(data_dir, monkeypatch):
    from runtime import credentials

    monkeypatch.setenv("SWITCHBOARD_CREDENTIALS", "file")
    return credentials


def test_use_after_test_connection_sets_key_base_url_and_model_in_one_step(window, store, qtbot,
                                                                           tmp_path):
    from tests.servers.llm import LlmServer

    store.set("openai", "sk-other")
    store.set("local", "sk-local")
    path = write_flow(tmp_path, [
        {"id": "agent", "type": "ai.agent", "position": [0, 0],
         "params": {"provider": fixed("scripted"), "script": fixed([{"text": "hi"}])}}], [])
    w = window(path)
    doc = w.document
    w.scene.select_nodes(["agent"])
    form = w.properties.form
    seen = {}
    with LlmServer() as server:
        server.api_key = "sk-local"
        server.models = ["llama3", "qwen2.5"]

        def in_dialog():
            dialog = QApplication.activeModalWidget()
            dialog.base_url_edit.selectAll()
            QTest.keyClicks(dialog.base_url_edit, server.openai_url)
            combo = dialog.key_combo
            combo.setCurrentIndex(combo.findText("local"))
            with qtbot.waitSignal(dialog.test_finished, timeout=20000):
                QTest.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
            seen["said"] = dialog.test_result.text()
            [model] = dialog.models.findItems("qwen2.5", Qt.MatchFlag.MatchExactly)
            qtbot.waitUntil(lambda: not dialog.models.visualItemRect(model).isEmpty())
            row = dialog.models.visualItemRect(model)
            QTest.mouseClick(dialog.models.viewport(), Qt.MouseButton.LeftButton,
                             Qt.KeyboardModifier.NoModifier, row.center())
            QTest.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)

        QTimer.singleShot(0, in_dialog)
        QTest.mouseClick(form.agent_credentials_button, Qt.MouseButton.LeftButton)
    params = doc.node("agent").params
    assert params["api_key"].value == {"keyring": "switchboard", "username": "local"}
    assert params["base_url"].value == server.openai_url
    assert params["model"].value == "qwen2.5"
    assert params["provider"].value == "openai"
    assert "Use gives the agent this key, this base URL and that model" in seen["said"]
    said = w.statusBar().currentMessage()
    assert said == (f"AI Agent now uses credential local, base URL {server.openai_url}, "
                    "model qwen2.5")
    assert doc.undo_stack.undoText() == \
        f"Use credential local, base URL {server.openai_url}, model qwen2.5"
    doc.undo_stack.undo()  # one step takes back all four
    params = doc.node("agent").params
    assert set(params) == {"provider", "script"} and params["provider"].value == "scripted"


# -- 4. a failed tool call is not a green "Finished" ---------------------------------------

def failing_mail_flow(tmp_path: Path) -> Path:
    """An agent whose send_email call fails: no SMTP server on the port."""
    script = [{"tool_calls": [{"name": "send_email", "arguments": {
                  "to": "ada@example.com", "subject": "Report", "body": "It is ready."}}]},
              {"text": "I sent the mail to Ada."}]
    return write_flow(tmp_path, [
        {"id": "ask", "type": "core.inject", "position": [0, 0],
         "params": {"payload": fixed("Tell Ada the report is ready")}},
        {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [220, 0],
         "params": {"provider": fixed("scripted"), "script": fixed(script)}},
        {"id": "show", "type": "core.debug", "position": [460, 0]},
        {"id": "mail", "type": "mail.send", "position": [460, 160],
         "params": {"smtp_host": fixed("127.0.0.1"), "smtp_port": fixed(closed_port())},
         "tool": {"approval": {"mode": "never"}}}],
        [(["ask", "out"], ["agent", "in"]), (["agent", "out"], ["show", "in"]),
         (["agent", "tools"], ["mail", "in"])], name="Failing mail")


def test_a_failed_tool_call_ends_in_the_warning_colour_everywhere(window, qtbot, tmp_path):
    from designer.panels.inspector.common import COLORS, color

    w = window(failing_mail_flow(tmp_path))
    run_to_end(w, qtbot)
    session = w.run_session
    status = session.status.text()
    assert "Finished with 1 failed tool call in" in status
    assert COLORS["warning"] in status and COLORS["ok"] not in status
    result = session.controller.last_result
    assert (result.status, result.failed_tool_calls) == ("ok", 1)
    agent = w.scene.item_for_node("agent")
    assert agent.run_state == "warning"
    assert agent.run_state_text().startswith("1 failed tool call")
    assert w.scene.item_for_node("mail").run_state == "error"

    inspector = session.inspector
    tab = inspector.history_tab
    tab.refresh()
    row = tab.tree.topLevelItem(0)
    assert row.text(3) == "finished with 1 failed tool call"
    assert row.foreground(3).color() == color("warning")

    agent_tab = inspector.agent
    agent_tab.set_view("transcript")
    shown = agent_tab.view.toHtml()
    assert "✕ failed" in shown and QColor(COLORS["error"]).name() in shown
    agent_tab.set_view("tree")
    calls = agent_tab.calls.tree
    turn = calls.topLevelItem(0)
    call = turn.child(0)
    assert call.text(0) == "✕ send_email" and call.foreground(0).color() == color("error")


# -- 7. a readable zoom on open --------------------------------------------------------------

def on_screen(window) -> tuple[list[str], list[str]]:
    """(what is not wholly inside the canvas's view, the node titles cut)."""
    from PySide6.QtCore import Qt as _Qt

    from designer.canvas.items import ICON_BOX, NODE_W, NodeItem, style

    vp = window.view.viewport().rect()
    off, cut = [], []
    width = NODE_W - (12 + ICON_BOX + 10) - 12
    for item in window.scene.node_and_wire_items():
        if isinstance(item, NodeItem):
            rect = item.sceneBoundingRect()
            title = item.look.title
            if style().title_fm.elidedText(title, _Qt.TextElideMode.ElideRight, width) != title:
                cut.append(title)
            what = item.node_id
        else:  # the curve as drawn
            rect = item.mapRectToScene(item.shape().boundingRect())
            what = f"wire {item.source.node_id} -> {item.target.node_id}"
        if not vp.contains(window.view.mapFromScene(rect).boundingRect()):
            off.append(what)
    return off, cut


@pytest.mark.parametrize("name", ["invoice-clerk.flow.json", "price-scraper.flow.json"])
def test_the_examples_open_readable_with_every_wire_on_screen(window, name):
    w = window(EXAMPLES / name)
    assert w.view.zoom() >= 0.8
    off, cut = on_screen(w)
    assert off == [] and cut == []


def test_every_example_opens_at_a_readable_zoom_with_all_on_screen(window):
    for path in sorted(EXAMPLES.glob("*.flow.json")):
        w = window(path)
        assert w.view.zoom() >= 0.8, path.name
        off, _cut = on_screen(w)
        assert off == [], (path.name, off)


def test_a_flow_too_big_to_read_whole_opens_at_80_percent_from_its_top_left(window, tmp_path):
    nodes = [{"id": f"n{i}", "type": "core.change", "position": [i * 220, 0]}
             for i in range(12)]
    wires = [([f"n{i}", "out"], [f"n{i + 1}", "in"]) for i in range(11)]
    w = window(write_flow(tmp_path, nodes, wires, name="long"))
    assert w.view.zoom() == pytest.approx(0.8)
    vp = w.view.viewport().rect()
    first = w.view.mapFromScene(w.scene.item_for_node("n0").sceneBoundingRect()).boundingRect()
    assert vp.contains(first) and first.left() < 60
    assert "80%" in w.zoom_label.text()
    w.fit_action.trigger()  # F still shows the whole flow, however small
    assert w.view.zoom() < 0.8


# -- 9. shortcuts right after a dialog ------------------------------------------------------

def test_f5_works_as_soon_as_file_open_closes(window, qtbot):
    w = window()
    bar = w.menuBar()
    [file_menu] = [a for a in bar.actions() if a.text() == "&File"]

    def in_dialog():
        dialog = QApplication.activeModalWidget()
        edit = dialog.findChild(QLineEdit, "fileNameEdit")
        edit.setText(str(EXAMPLES / "hello.flow.json"))
        QTest.keyClick(edit, Qt.Key.Key_Return)

    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     bar.actionGeometry(file_menu).center())
    menu = file_menu.menu()
    QTimer.singleShot(0, in_dialog)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     menu.actionGeometry(w.open_action).center())
    qtbot.waitUntil(lambda: w.document.path is not None, timeout=10000)
    QApplication.processEvents()
    # The keys go where a person's would: to the focused widget of the active window.
    assert QApplication.activeWindow() is w
    target = QApplication.focusWidget()
    assert target is not None and target.window() is w
    QTest.keyClick(target, Qt.Key.Key_F5)
    controller = w.run_session.controller
    qtbot.waitUntil(lambda: controller.last_result is not None, timeout=20000)
    assert [e.value for e in w.run_session.inspector.debug.entries()] == ["Hello, World!"]


# -- 10. a refused call's arguments ----------------------------------------------------------

def test_the_refused_calls_arguments_show_as_an_object(window, qtbot):
    from designer.panels.inspector.inspector import TAB_TOOLS

    w = window(EXAMPLES / "hooks-audit.flow.json")
    run_to_end(w, qtbot)
    inspector = w.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_TOOLS)
    tools = inspector.tools
    [refused] = [c for c in tools.calls_shown() if c.status == "refused"]
    assert refused.args == {"to": "eve@elsewhere.org", "subject": "Copy: order A-1001 has shipped",
                            "body": "For your records: order A-1001 shipped today."}
    item = tools._call_items[refused.caller_id]
    assert item.text(1).startswith('{"to": "eve@elsewhere.org"')
    tools.tree.setCurrentItem(item)
    root = tools.detail.topLevelItem(0)
    assert root.text(0) == "arguments" and root.isExpanded()
    assert [root.child(i).text(0) for i in range(root.childCount())] == ["body", "subject", "to"] \
        or sorted(root.child(i).text(0) for i in range(root.childCount())) == \
        ["body", "subject", "to"]


# -- screenshots --------------------------------------------------------------------------

def save_screenshots(out_dir: str) -> None:
    """The screens above at 1440x900, light theme, to look at."""
    import os
    import tempfile

    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
    os.environ["SWITCHBOARD_CREDENTIALS"] = "file"
    from PySide6.QtCore import QCoreApplication
    from pytestqt.qt_compat import qt_api
    from pytestqt.qtbot import QtBot

    qt_api.set_qt_api("pyside6")
    QCoreApplication.setOrganizationName("switchboard-shots")
    app = QApplication.instance() or QApplication([])
    from designer.control.run_controller import qt_event_loop
    from designer.look import theme
    from designer.look.settings import settings
    from designer.panels.inspector.inspector import TAB_AGENT, TAB_HISTORY, TAB_TOOLS

    qt_event_loop()
    settings().clear()
    theme.apply(app, theme.LIGHT)
    bot = QtBot(app)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())

    def shot(w, name):
        bot.wait(150)
        w.grab().save(str(out / f"{name}.png"))
        print("saved", out / f"{name}.png")

    w = make_window(failing_mail_flow(tmp))
    run_to_end(w, bot)
    shot(w, "failed-call-status")
    ins = w.run_session.inspector
    ins.tabs.setCurrentIndex(TAB_AGENT)
    shot(w, "failed-call-agent-transcript")
    ins.agent.set_view("tree")
    shot(w, "failed-call-agent-tree")
    ins.tabs.setCurrentIndex(TAB_HISTORY)
    shot(w, "failed-call-history")
    close(w, bot)

    w = make_window(EXAMPLES / "hooks-audit.flow.json")
    run_to_end(w, bot)
    ins = w.run_session.inspector
    ins.tabs.setCurrentIndex(TAB_TOOLS)
    refused = [c for c in ins.tools.calls_shown() if c.status == "refused"][0]
    ins.tools.tree.setCurrentItem(ins.tools._call_items[refused.caller_id])
    shot(w, "hooks-audit-refused-call")
    close(w, bot)

    w = make_window()
    w.new_action.trigger()
    act = Actions(w)
    inject = act.drag_from_palette("core.inject", QPoint(140, 200))
    start = out_port(w, inject)
    act.drag_wire(start, start + QPoint(220, 0), "wire")
    pick(act, "AI Agent")
    w.scene.select_nodes([inject])
    shot(w, "sample-prompt")
    edit = w.properties.form.rows["payload"].value_editor.edit
    edit.setFocus()
    edit.selectAll()
    QTest.keyClick(edit, Qt.Key.Key_Delete)
    bot.waitUntil(lambda: any(p.severity == "error" for p in w.document.problems), timeout=5000)
    w.run_action.trigger()
    shot(w, "empty-prompt-error")
    close(w, bot)


if __name__ == "__main__":
    save_screenshots(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots-g2")
    sys.exit(0)

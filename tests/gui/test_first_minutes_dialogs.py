"""Issue 12, the dialogs part: the Credentials dialog, new agents that start
keyless, the scripted turns editor, paste that lands beside its original
with a numbered name, and file dialogs that start in the flow's folder.
Everything is driven through the real widgets, as a new user would."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QFileDialog, QLabel, QLineEdit, QListWidget

from designer.canvas.items import GRID
from designer.dialogs.credentials_dialog import CredentialsDialog, open_credentials_dialog
from designer.model.commands import KEYLESS_SCRIPT
from designer.panels.turns_editor import TEXT, TurnsEditor
from runtime.agent.scripted import ScriptedProvider, script_problems
from runtime.registry import Registry
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import add, body_point, show_all, wire
from tests.servers.llm import LlmServer

EXAMPLES = Path(__file__).resolve().parents[2] / "resources" / "examples"


@pytest.fixture
def store(data_dir, monkeypatch):
    """The real credential store, in the encrypted file of this test's own
    data dir (a developer's keyring is never touched)."""
    from runtime import credentials

    monkeypatch.setenv("SWITCHBOARD_CREDENTIALS", "file")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return credentials


def _close(dialog) -> None:
    dialog.close()
    dialog.deleteLater()


def texts_on_screen(widget) -> list[str]:
    out = [w.text() for w in widget.findChildren(QLabel)]
    out += [w.text() for w in widget.findChildren(QLineEdit)
            if w.echoMode() == QLineEdit.EchoMode.Normal]
    for lw in widget.findChildren(QListWidget):
        out += [lw.item(i).text() for i in range(lw.count())]
    return out


def type_into(widget, text: str) -> None:
    widget.setFocus()
    QTest.keyClicks(widget, text)


# -- the Credentials dialog ------------------------------------------------------------

def test_credentials_are_added_replaced_and_deleted_and_never_shown(store, qtbot, dialogs):
    dialog = CredentialsDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.stored_names() == [] and dialog.empty_label.isVisible()
    assert "credentials.enc" in dialog.backend_label.text()  # where they are, said plainly

    type_into(dialog.name_edit, "openai")
    assert not dialog.store_button.isEnabled()  # no secret yet
    type_into(dialog.secret_edit, "sk-first-secret")
    assert dialog.store_button.text() == "Store"
    QTest.keyClick(dialog.secret_edit, Qt.Key.Key_Return)
    assert store.get("openai") == "sk-first-secret"
    assert dialog.stored_names() == ["openai"] and not dialog.empty_label.isVisible()
    assert dialog.secret_edit.text() == ""
    assert not any("sk-first-secret" in t for t in texts_on_screen(dialog))

    # Replace: the selected name fills the form, the secret is typed anew.
    dialog.name_edit.clear()
    dialog.names.setCurrentRow(0)
    assert dialog.name_edit.text() == ""  # selecting alone leaves the form for a new one
    qtbot.mouseClick(dialog.replace_button, Qt.MouseButton.LeftButton)
    assert dialog.name_edit.text() == "openai" and dialog.secret_edit.text() == ""
    type_into(dialog.secret_edit, "sk-second")
    assert dialog.store_button.text() == "Replace"
    qtbot.mouseClick(dialog.store_button, Qt.MouseButton.LeftButton)
    assert store.get("openai") == "sk-second" and dialog.stored_names() == ["openai"]
    assert "Replaced" in dialog.form_message.text()

    # A name the store refuses is said at once, and nothing is stored.
    dialog.name_edit.clear()
    type_into(dialog.name_edit, " bad")
    assert "cannot name a credential" in dialog.form_message.text()
    type_into(dialog.secret_edit, "x")
    qtbot.mouseClick(dialog.store_button, Qt.MouseButton.LeftButton)
    assert store.list_names() == ["openai"]

    # Delete asks first; Cancel keeps it, Yes deletes it.
    dialog.names.setCurrentRow(0)
    dialogs.answer = dialogs.answer.Cancel
    qtbot.mouseClick(dialog.delete_button, Qt.MouseButton.LeftButton)
    assert store.list_names() == ["openai"]
    dialogs.answer = dialogs.answer.Yes
    qtbot.mouseClick(dialog.delete_button, Qt.MouseButton.LeftButton)
    assert dialogs.calls[-1][0] == "question" and "openai" in dialogs.calls[-1][2]
    assert store.list_names() == [] and dialog.stored_names() == []
    assert not dialog.delete_button.isEnabled()


def test_the_run_menu_opens_credentials(window, store, qtbot):
    store.set("smtp-work", "hunter2")
    run_menu = window.menuBar().actions()[3].menu()
    titles = [a.text().replace("&", "") for a in run_menu.actions()]
    assert "Credentials…" in titles
    window.credentials_action.trigger()
    dialog = window.credentials_dialog
    qtbot.waitExposed(dialog)
    assert dialog.stored_names() == ["smtp-work"]
    assert dialog.use_button is None  # from the menu it manages, it does not pick
    store.set("openai", "sk-x")
    dialog.close()
    window.credentials_action.trigger()  # opened again, it reads the store again
    assert dialog.stored_names() == ["openai", "smtp-work"]
    _close(dialog)


def test_open_credentials_dialog_returns_the_chosen_name(store, qtbot):
    store.set("openai", "sk-a")
    store.set("local-llm", "sk-b")
    seen = {}

    def pick():
        dialog = QApplication.activeModalWidget()
        seen["title"] = dialog.windowTitle()
        seen["current"] = dialog.chosen_name()
        dialog.names.setCurrentRow(dialog.stored_names().index("openai"))
        qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, pick)
    assert open_credentials_dialog(None, select="local-llm") == "openai"
    assert seen == {"title": "Credentials", "current": "local-llm"}

    def add_then_use():
        dialog = QApplication.activeModalWidget()
        type_into(dialog.name_edit, "anthropic")
        type_into(dialog.secret_edit, "sk-ant")
        QTest.keyClick(dialog.secret_edit, Qt.Key.Key_Return)
        qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, add_then_use)
    assert open_credentials_dialog(None) == "anthropic"
    assert store.get("anthropic") == "sk-ant"

    QTimer.singleShot(0, lambda: QApplication.activeModalWidget().reject())
    assert open_credentials_dialog(None, select="openai") is None


def test_test_connection_lists_the_models_or_says_why_not(store, qtbot):
    store.set("local", "sk-right")
    with LlmServer() as server:
        server.api_key = "sk-right"
        server.models = ["llama3", "qwen2.5"]
        dialog = CredentialsDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        dialog.base_url_edit.clear()
        type_into(dialog.base_url_edit, server.openai_url)
        dialog.key_combo.setCurrentIndex(dialog.key_combo.findText("local"))
        with qtbot.waitSignal(dialog.test_finished) as got:
            qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
        assert got.args == [["llama3", "qwen2.5"], ""]
        assert [dialog.models.item(i).text() for i in range(dialog.models.count())] \
            == ["llama3", "qwen2.5"]
        assert dialog.models.isVisible() and "2 models" in dialog.test_result.text()
        assert server.requests[-1]["headers"]["authorization"] == "Bearer sk-right"

        # The wrong key: the server's refusal, without the key.
        store.set("local", "sk-wrong-key")
        with qtbot.waitSignal(dialog.test_finished) as got:
            qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
        assert got.args[0] == [] and "401" in dialog.test_result.text()
        assert "sk-wrong-key" not in dialog.test_result.text()
        assert not dialog.models.isVisible() and dialog.test_button.isEnabled()
    _close(dialog)


class _StalledModels(http.server.BaseHTTPRequestHandler):
    """Answers GET /models only once the test lets it."""

    release = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.release.wait(30)
        body = json.dumps({"object": "list", "data": [{"id": "slow-model", "object": "model",
                                                        "created": 0, "owned_by": "t"}]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


def test_a_slow_server_does_not_freeze_the_window(store, qtbot):
    _StalledModels.release = threading.Event()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StalledModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dialog = CredentialsDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        dialog.base_url_edit.setText(f"http://127.0.0.1:{server.server_port}/v1")
        qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
        # The server holds the answer: the window still takes typing.
        assert dialog.test_button.text() == "Testing…" and not dialog.test_button.isEnabled()
        type_into(dialog.name_edit, "still-typing")
        QApplication.processEvents()
        assert dialog.name_edit.text() == "still-typing"
        with qtbot.waitSignal(dialog.test_finished, timeout=20_000) as got:
            _StalledModels.release.set()
        assert got.args == [["slow-model"], ""]
        assert dialog.test_button.isEnabled()
    finally:
        _StalledModels.release.set()
        server.shutdown()
        server.server_close()
    _close(dialog)


# -- new agents start keyless ----------------------------------------------------------------

@pytest.fixture
def real_window(qtbot, data_dir):
    """A main window over the real node catalog (the palette as a user sees it)."""
    from PySide6.QtCore import QEvent

    from designer.model.document import FlowDocument
    from designer.window.main_window import MainWindow

    w = MainWindow(FlowDocument(registry=Registry.default()), restore_layout=False,
                   autosave_interval_ms=3_600_000)
    w.resize(1440, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.document.undo_stack.setClean()
    w.close()
    w.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def add_from_palette(window, type_id: str) -> str:
    """Search the palette for the node's name and press Enter."""
    palette = window.palette
    palette.search.clear()
    QTest.keyClicks(palette.search, window.document.registry.spec(type_id).name)
    before = {n.id for n in window.document.flow.nodes}
    QTest.keyClick(palette.search, Qt.Key.Key_Return)
    (new,) = [n.id for n in window.document.flow.nodes if n.id not in before]
    assert window.document.node(new).type == type_id
    return new


def drop_from_palette(window, type_id: str, at: QPointF) -> str:
    from PySide6.QtGui import QDragEnterEvent, QDropEvent

    palette = window.palette
    mime = palette.tree.mimeData([palette.item_for_type(type_id)])
    vp = window.view.viewport()
    QApplication.sendEvent(vp, QDragEnterEvent(at.toPoint(), Qt.DropAction.CopyAction, mime,
                                               Qt.MouseButton.LeftButton,
                                               Qt.KeyboardModifier.NoModifier))
    QApplication.sendEvent(vp, QDropEvent(at, Qt.DropAction.CopyAction, mime,
                                          Qt.MouseButton.LeftButton,
                                          Qt.KeyboardModifier.NoModifier))
    return window.document.flow.nodes[-1].id


def test_a_new_agent_without_a_key_starts_scripted_and_runs(real_window, store, qtbot):
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import FlowNode, Wire

    doc = real_window.document
    agent = add_from_palette(real_window, "ai.agent")
    params = doc.node(agent).params
    assert params["provider"].value == "scripted"
    assert params["script"].value == KEYLESS_SCRIPT
    assert doc.undo_stack.count() == 1  # one step: undo removes the agent, not half of it

    # inject -> agent -> debug runs at once, with no key anywhere.
    doc.insert_node(FlowNode(id="ask", type="core.inject", position=(-300, 0), params={
        "payload": {"scope": "custom", "value": "hello"}}))
    doc.insert_node(FlowNode(id="show", type="core.debug", position=(300, 0)))
    doc.insert_wire(Wire(source=("ask", "out"), target=(agent, "in")))
    doc.insert_wire(Wire(source=(agent, "out"), target=("show", "in")))
    assert [p for p in doc.revalidate() if p.severity == "error"] == []
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    result = asyncio.run(Engine(doc.flow, doc.registry, bus).run(timeout=20))
    debug = [e.value for e in seen if e.type == "debug"]
    assert result.reason == "completed", result
    assert debug == ["Scripted answer (no API key is set up yet) to: hello"]


def test_with_a_stored_key_a_new_agent_keeps_its_provider(real_window, store, qtbot,
                                                          monkeypatch):
    store.set("openai", "sk-stored")
    agent = drop_from_palette(real_window, "ai.agent", QPointF(300, 200))
    assert real_window.document.node(agent).type == "ai.agent"
    assert "provider" not in real_window.document.node(agent).params  # the spec's default
    store.delete("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    again = add_from_palette(real_window, "ai.agent")
    assert "provider" not in real_window.document.node(again).params


def test_quick_add_starts_an_agent_keyless_too(real_window, store, qtbot):
    view = real_window.view
    view.setFocus()
    QTest.keyClick(view.viewport(), Qt.Key.Key_A)  # typing on the canvas opens the search
    popup = real_window.editor._quick_add
    assert popup is not None and popup.edit.text() == "a"
    QTest.keyClicks(popup.edit, "i agent")
    assert popup.visible_types()[0] == "ai.agent"
    QTest.keyClick(popup.edit, Qt.Key.Key_Return)
    agents = [n for n in real_window.document.flow.nodes if n.type == "ai.agent"]
    assert len(agents) == 1 and agents[0].params["provider"].value == "scripted"


# -- the scripted turns editor -------------------------------------------------------------

@pytest.fixture
def turns(qtbot):
    def make(value=None, tools=("send_email", "lookup")):
        editor = TurnsEditor(value, list(tools))
        editor.resize(360, 320)
        qtbot.addWidget(editor)
        editor.show()
        qtbot.waitExposed(editor)
        editor.activateWindow()
        return editor
    return make


def type_in_cell(editor: TurnsEditor, text: str) -> None:
    """Type into the cell editor the table opened, and commit with Enter."""
    (cell,) = [w for w in editor.table.findChildren(QLineEdit) if w.isVisible()]
    cell.selectAll()
    QTest.keyClicks(cell, text)
    QTest.keyClick(cell, Qt.Key.Key_Return)
    QApplication.processEvents()  # the view commits a cell on Enter through its event queue
    assert editor.table.state() != editor.table.State.EditingState


def test_turns_editor_builds_the_script_the_provider_plays(turns, qtbot):
    editor = turns()
    changes = []
    editor.changed.connect(changes.append)
    assert editor.value() == []

    qtbot.mouseClick(editor.add_call_button, Qt.MouseButton.LeftButton)
    type_in_cell(editor, '{"to": "john@example.com", "subject": "Shipped"}')
    qtbot.mouseClick(editor.add_joined_button, Qt.MouseButton.LeftButton)  # same turn
    type_in_cell(editor, '{"query": "order 42"}')
    combo = editor.table.cellWidget(1, 1)
    combo.setFocus()
    QTest.keyClick(combo, Qt.Key.Key_Down)  # send_email -> lookup
    qtbot.mouseClick(editor.add_text_button, Qt.MouseButton.LeftButton)
    type_in_cell(editor, "Done: {last_result}")

    script = [
        {"tool_calls": [{"name": "send_email",
                         "arguments": {"to": "john@example.com", "subject": "Shipped"}},
                        {"name": "lookup", "arguments": {"query": "order 42"}}]},
        {"text": "Done: {last_result}"},
    ]
    assert editor.value() == script
    assert changes[-1] == script
    assert [editor.table.item(r, 0).text() for r in range(3)] == ["1", "↳", "2"]
    assert script_problems(script) == []

    # The scripted provider plays exactly what the table says.
    provider = ScriptedProvider(script=changes[-1])
    first = asyncio.run(provider.complete(system="", messages=[{"role": "user", "content": "hi"}],
                                          tools=[], model="", temperature=None, max_tokens=10,
                                          turn=0))
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("send_email", {"to": "john@example.com", "subject": "Shipped"}),
        ("lookup", {"query": "order 42"})]
    second = asyncio.run(provider.complete(
        system="", messages=[{"role": "user", "content": "hi"},
                             {"role": "tool", "content": "sent"}],
        tools=[], model="", temperature=None, max_tokens=10, turn=1))
    assert second.text == "Done: sent" and not second.tool_calls


def test_turns_reorder_and_remove(turns, qtbot):
    editor = turns([{"text": "first"}, {"tool_calls": [{"name": "lookup", "arguments": {}}]},
                    {"text": "last"}])
    editor.table.selectRow(2)
    qtbot.mouseClick(editor.up_button, Qt.MouseButton.LeftButton)
    assert [t.get("text") for t in editor.value()] == ["first", "last", None]
    qtbot.mouseClick(editor.up_button, Qt.MouseButton.LeftButton)
    assert editor.value()[0] == {"text": "last"}
    assert not editor.up_button.isEnabled()  # at the top
    qtbot.mouseClick(editor.down_button, Qt.MouseButton.LeftButton)
    assert editor.value()[1] == {"text": "last"}
    editor.table.selectRow(2)
    qtbot.mouseClick(editor.remove_button, Qt.MouseButton.LeftButton)
    assert editor.value() == [{"text": "first"}, {"text": "last"}]


def test_turns_editor_keeps_what_it_does_not_show(turns):
    script = [{"tool_calls": [{"name": "send_email", "arguments": {"to": "a@b.c"}, "id": "c1"},
                              {"name": "gone_tool", "arguments": '{"broken": '}],
               "usage": {"input_tokens": 5, "output_tokens": 2}},
              {"text": "Said and called", "tool_calls": [{"name": "lookup",
                                                          "arguments": {"q": 1}}]}]
    editor = turns(script)
    assert editor.value() == script
    # A tool no longer wired keeps its name and says so; bad JSON is flagged.
    combo = editor.table.cellWidget(1, 1)
    assert combo.currentText() == "gone_tool (not wired)"
    assert editor.status.isVisible() and "Row 2: Not JSON" in editor.status.text()
    editor.set_tool_names(["send_email"])
    assert editor.value() == script


def test_turns_editor_without_tools_offers_text_only(turns):
    editor = turns(None, tools=())
    assert not editor.add_call_button.isEnabled()
    assert "tools port" in editor.add_call_button.toolTip()
    editor.set_value(KEYLESS_SCRIPT)
    assert editor.reply(0) == TEXT and editor.value() == KEYLESS_SCRIPT
    editor.set_value({"not": "a list"})
    assert editor.value() == [] and "not a list" in editor.status.text()


# -- paste ----------------------------------------------------------------------------------

def click_node(window, node_id: str) -> None:
    QTest.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton,
                     Qt.KeyboardModifier.NoModifier, body_point(window, node_id))


def key(window, sequence: str) -> None:
    from PySide6.QtGui import QKeySequence

    combo = QKeySequence(sequence)[0]
    QTest.keyClick(window.view.viewport(), combo.key(), combo.keyboardModifiers())


def test_paste_lands_beside_the_original_and_cascades(window, qtbot):
    doc = window.document
    add(doc, "mail", "test.tool", 200, 200)
    show_all(window)
    window.view.setFocus()
    click_node(window, "mail")
    assert window.scene.selected_node_ids() == ["mail"]
    key(window, "Ctrl+C")
    # The mouse rests on the original, as it does after clicking it.
    QTest.mouseMove(window.view.viewport(), body_point(window, "mail"))
    key(window, "Ctrl+V")
    key(window, "Ctrl+V")
    nodes = {n.id: n for n in doc.flow.nodes}
    assert len(nodes) == 3
    copies = [n for n in doc.flow.nodes if n.id != "mail"]
    assert [n.name for n in copies] == ["Lookup 2", "Lookup 3"]
    # A column below the original: same x, each fully below the one before,
    # one grid step apart, so every copy is readable and none covers another.
    column = [doc.node("mail"), *copies]
    for above, below in zip(column, column[1:], strict=False):
        height = window.scene.item_for_node(above.id).height
        assert below.position[0] == above.position[0] == 200.0
        assert height < below.position[1] - above.position[1] <= height + 2 * GRID
    assert doc.node("mail").name is None  # the original is untouched
    assert window.scene.item_for_node(copies[1].id).look.title == "Lookup 3"
    assert window.scene.selected_node_ids() == [copies[1].id]
    doc.undo_stack.undo()
    assert len(doc.flow.nodes) == 2


def test_paste_steps_over_a_node_below_the_original(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 240, 0)
    wire(doc, "a", "out", "b")
    add(doc, "under", "test.sink", 240, 100)
    show_all(window)
    window.scene.select_nodes(["a", "b"])
    window.copy_action.trigger()
    window.paste_action.trigger()
    a2, b2 = doc.flow.nodes[-2:]
    assert (a2.name, b2.name) == ("Source 2", "Step 2")
    assert [(w.source, w.target) for w in doc.flow.wires][-1] == ((a2.id, "out"), (b2.id, "in"))
    under = window.scene.item_for_node("under")
    assert b2.position[0] == 240.0 and b2.position[1] >= 100 + under.height


def test_duplicate_cascades_and_numbers_named_nodes(window, qtbot):
    doc = window.document
    add(doc, "ask", "test.source", 0, 0, name="Ask")
    show_all(window)
    for _ in range(2):
        window.scene.select_nodes(["ask"])
        window.duplicate_action.trigger()
    copies = [n for n in doc.flow.nodes if n.id != "ask"]
    assert [(n.name, n.position) for n in copies] == [("Ask 2", (40.0, 40.0)),
                                                      ("Ask 3", (80.0, 80.0))]
    window.scene.select_nodes([copies[1].id])  # a copy of "Ask 3" is "Ask 4"
    window.duplicate_action.trigger()
    assert doc.flow.nodes[-1].name == "Ask 4"


def test_cut_and_paste_moves_without_renaming(window, qtbot):
    doc = window.document
    add(doc, "a", "test.step", 100, 100)
    show_all(window)
    window.scene.select_nodes(["a"])
    window.cut_action.trigger()
    window.paste_action.trigger()
    (node,) = doc.flow.nodes
    assert node.name is None and node.position == (100.0, 100.0)


def test_paste_out_of_sight_comes_into_view(window, qtbot):
    doc = window.document
    add(doc, "far", "test.step", 5000, 5000)
    window.scene.select_nodes(["far"])
    window.copy_action.trigger()
    window.view.set_zoom(1.0)
    window.view.centerOn(0, 0)
    window.paste_action.trigger()
    copy = doc.flow.nodes[-1]
    seen = window.view.mapToScene(window.view.viewport().rect()).boundingRect()
    assert seen.contains(QPointF(*copy.position)) and copy.name == "Step 2"


# -- file dialogs start in the flow's folder ---------------------------------------------------

def dialog_folder_of(window, trigger) -> str:
    """Trigger a file dialog, read where it starts, and cancel it."""
    seen = {}

    def look():
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, QFileDialog)
        seen["folder"] = dialog.directory().absolutePath()
        seen["file"] = dialog.selectedFiles()
        dialog.reject()

    QTimer.singleShot(0, look)
    trigger()
    return seen


@pytest.fixture
def no_recent():
    from designer.look.settings import settings

    settings().setValue("recent_files", [])
    yield
    settings().setValue("recent_files", [])


def test_a_new_user_opens_from_the_examples(window, no_recent, qtbot):
    seen = dialog_folder_of(window, window.open_action.trigger)
    assert Path(seen["folder"]) == EXAMPLES.resolve()


def test_file_dialogs_start_in_the_flows_folder(window, no_recent, tmp_path, qtbot):
    folder = tmp_path / "my flows"
    folder.mkdir()
    flow = folder / "orders.flow.json"
    window.document.save(flow)
    assert Path(dialog_folder_of(window, window.open_action.trigger)["folder"]) == folder
    seen = dialog_folder_of(window, window.save_as_action.trigger)
    assert Path(seen["folder"]) == folder
    assert [Path(f).name for f in seen["file"]] == ["orders.flow.json"]


def test_an_unsaved_flow_starts_where_the_user_last_was(window, no_recent, tmp_path, qtbot):
    folder = tmp_path / "work"
    folder.mkdir()
    window.add_recent(folder / "earlier.flow.json")
    window.document.flow.name = "Order triage"
    assert Path(dialog_folder_of(window, window.open_action.trigger)["folder"]) == folder
    seen = dialog_folder_of(window, window.save_as_action.trigger)
    assert Path(seen["folder"]) == folder
    assert [Path(f).name for f in seen["file"]] == ["order-triage.flow.json"]


def test_a_new_flow_is_never_saved_into_the_examples(window, no_recent, qtbot):
    seen = dialog_folder_of(window, window.save_as_action.trigger)
    assert Path(seen["folder"]).resolve() != EXAMPLES.resolve()
    assert Path(seen["folder"]).is_dir()

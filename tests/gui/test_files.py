"""Files in the designer: save/open round trip, bad files, drops of flow
files, recent files, unsaved-changes prompts, autosave and crash recovery."""

from __future__ import annotations

import json
import os

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from designer.autosave import RECOVERY_FORMAT, find_recoverable
from designer.commands import AddNode, new_node
from runtime.flow import load_flow
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import add, wire


def build_flow(doc):
    add(doc, "a", "test.agent", 0, 0, name="Helper")
    add(doc, "t", "test.tool", 300, 200)
    add(doc, "s", "test.sink", 300, 0)
    wire(doc, "a", "tools", "t")
    wire(doc, "a", "out", "s")


def test_save_then_open_gives_the_same_flow(make_window, tmp_path, registry, qtbot):
    w1 = make_window()
    build_flow(w1.document)
    w1.document.undo_stack.push(AddNode(w1.document, new_node(w1.document, "test.step", (0, 300))))
    assert w1.isWindowModified()
    path = tmp_path / "round.flow.json"
    assert w1._save_to(path)
    assert not w1.isWindowModified()
    assert "round.flow.json" in w1.windowTitle()
    w2 = make_window()
    assert w2.open_path(path)
    assert w2.document.flow.dumps() == w1.document.flow.dumps()
    assert w2.document.path == path
    assert not w2.document.modified
    assert len(w2.scene.node_items()) == 4
    assert str(path.resolve()) == w2.recent_files()[0]
    # The file is what the runtime reads.
    assert load_flow(path, registry).dumps() == w1.document.flow.dumps()


def test_title_shows_unsaved_changes(window, qtbot):
    doc = window.document
    assert not window.isWindowModified()
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    assert window.isWindowModified()
    assert "[*]" in window.windowTitle()
    doc.undo_stack.undo()
    assert not window.isWindowModified()


def test_bad_json_opens_a_dialog_and_keeps_the_flow(window, tmp_path, dialogs, qtbot):
    build_flow(window.document)
    before = window.document.flow.dumps()
    bad = tmp_path / "broken.flow.json"
    bad.write_text('{"format": "switchboard.flow/1", "nodes": [', encoding="utf-8")
    assert not window.open_path(bad)
    kind, title, text = dialogs.calls[-1]
    assert kind == "warning" and "broken.flow.json" in text
    assert "invalid JSON" in text and "line 1" in text
    assert "Traceback" not in text
    assert window.document.flow.dumps() == before


def test_bad_structure_names_node_and_field(window, tmp_path, dialogs, qtbot):
    bad = tmp_path / "bad.flow.json"
    bad.write_text(json.dumps({"format": "switchboard.flow/9", "nodes": [
        {"id": "x", "type": "test.step", "colour": "red"}]}), encoding="utf-8")
    assert not window.open_path(bad)
    text = dialogs.calls[-1][2]
    assert "unknown format" in text
    assert "node 'x'" in text and "colour" in text


def test_missing_file(window, tmp_path, dialogs, qtbot):
    assert not window.open_path(tmp_path / "nope.flow.json")
    assert "file not found" in dialogs.calls[-1][2]


def test_flow_with_unknown_node_type_opens_with_a_problem(window, tmp_path, dialogs, qtbot):
    path = tmp_path / "unknown.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "U", "nodes": [
        {"id": "x", "type": "vendor.gone", "position": [0, 0]}], "wires": []}), encoding="utf-8")
    assert window.open_path(path)
    window.document.revalidate()
    item = window.scene.item_for_node("x")
    assert any("unknown node type" in e for e in item.look.errors)
    assert "error" in window.problems_label.text()


def test_dropping_a_flow_file_opens_it(window, tmp_path, registry, qtbot):
    other = tmp_path / "dropped.flow.json"
    from designer.document import FlowDocument

    d = FlowDocument(registry=registry)
    build_flow(d)
    d.save(other)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(other))])
    vp = window.view.viewport()
    enter = QDragEnterEvent(QPoint(200, 200), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(200, 200), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, drop)
    assert window.document.path == other
    assert len(window.document.flow.nodes) == 3


def test_opening_over_unsaved_changes_asks(window, tmp_path, dialogs, registry, qtbot):
    path = tmp_path / "other.flow.json"
    from designer.document import FlowDocument

    FlowDocument(registry=registry).save(path)
    doc = window.document
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    dialogs.answer = QMessageBox.StandardButton.Cancel
    assert not window.open_path(path)
    assert dialogs.calls[-1][0] == "question"
    assert len(doc.flow.nodes) == 1
    dialogs.answer = QMessageBox.StandardButton.Discard
    assert window.open_path(path)
    assert doc.flow.nodes == []


def test_closing_with_unsaved_changes_asks(make_window, dialogs, qtbot):
    w = make_window()
    doc = w.document
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    dialogs.answer = QMessageBox.StandardButton.Cancel
    assert not w.close()
    assert w.isVisible()
    dialogs.answer = QMessageBox.StandardButton.Discard
    assert w.close()
    assert [c[0] for c in dialogs.calls] == ["question", "question"]


def test_autosave_writes_only_unsaved_work(window, qtbot, data_dir):
    auto = window.autosave
    assert not auto.tick()  # nothing changed
    doc = window.document
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    assert auto.tick()
    data = json.loads(auto.path.read_text(encoding="utf-8"))
    assert data["format"] == RECOVERY_FORMAT
    assert data["flow"]["nodes"][0]["type"] == "test.step"
    assert not auto.tick()  # nothing new since
    doc.undo_stack.undo()  # back to clean: the recovery file goes
    assert not auto.path.exists()


def test_saving_removes_the_recovery_file(window, tmp_path, qtbot):
    doc = window.document
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    window.autosave.tick()
    assert window.autosave.path.exists()
    window._save_to(tmp_path / "saved.flow.json")
    assert not window.autosave.path.exists()


def fake_crash(window, tmp_path, registry) -> None:
    """Leave a recovery file as a crashed process would: written, then the
    process gone (a pid that is not running)."""
    doc = window.document
    build_flow(doc)
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 300))))
    doc.path = tmp_path / "work.flow.json"
    window.autosave.tick()
    dead_pid = 2 ** 22 + 12345
    while True:
        try:
            os.kill(dead_pid, 0)
            dead_pid += 1
        except ProcessLookupError:
            break
    crashed = window.autosave.path.with_name(f"recovery-{dead_pid}-1.json")
    window.autosave.path.rename(crashed)


def test_recovery_after_a_crash(make_window, tmp_path, registry, dialogs, qtbot):
    w1 = make_window()
    fake_crash(w1, tmp_path, registry)
    expected = w1.document.flow.dumps()
    found = find_recoverable(w1.autosave.directory)
    assert len(found) == 1 and found[0].original == tmp_path / "work.flow.json"

    w2 = make_window()
    dialogs.answer = QMessageBox.StandardButton.Yes
    assert w2.offer_recovery()
    assert "Recover" in dialogs.calls[-1][1]
    assert w2.document.flow.dumps() == expected
    assert w2.document.path == tmp_path / "work.flow.json"
    assert w2.document.modified and w2.isWindowModified()
    assert find_recoverable(w2.autosave.directory) == []
    # The recovered work is itself protected by this window's autosave.
    assert w2.autosave.path.exists()


def test_declined_recovery_is_discarded(make_window, tmp_path, registry, dialogs, qtbot):
    w1 = make_window()
    fake_crash(w1, tmp_path, registry)
    w2 = make_window()
    dialogs.answer = QMessageBox.StandardButton.No
    assert not w2.offer_recovery()
    assert w2.document.flow.nodes == []
    assert find_recoverable(w2.autosave.directory) == []
    assert not w2.offer_recovery()


def test_live_and_damaged_recovery_files_are_left_alone(window, qtbot):
    auto = window.autosave
    doc = window.document
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    auto.tick()  # our own, live process: not offered
    (auto.directory / "recovery-1-1.json").write_text("{ damaged", encoding="utf-8")
    assert find_recoverable(auto.directory) == []

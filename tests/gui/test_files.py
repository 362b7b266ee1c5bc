"""Files in the designer: save/open round trip, bad files, drops of flow
files, recent files, unsaved-changes prompts, autosave and crash recovery."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from designer.look import theme
from designer.model.autosave import RECOVERY_FORMAT, find_recoverable
from designer.model.commands import AddNode, new_node
from designer.window.files import FLOW_FILTER
from runtime.flow import load_flow, parse_flow
from runtime.registry import Registry
from tests.conftest import EXAMPLES, ROOT
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
    from designer.model.document import FlowDocument

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
    from designer.model.document import FlowDocument

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


# -- recovery when the crashed file is opened again ---------------------------------

CRASH_SCRIPT = """
import os, signal, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from designer.model.commands import AddNode, new_node
from designer.window.main_window import MainWindow
w = MainWindow(restore_layout=False)
w.show()
assert w.open_path(sys.argv[1], ask=False)
doc = w.document
doc.undo_stack.push(AddNode(doc, new_node(doc, "core.debug", (700, 400))))
assert w.autosave.tick()  # what the autosave timer does every few seconds
print(w.autosave.path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def edited_then_killed(flow_file: Path) -> tuple[Path, str]:
    """Open ``flow_file`` in a real designer process, add a node, let the
    autosave write, then kill -9 the process. Returns the recovery file and
    the unsaved flow it holds (as Flow.dumps())."""
    # The file is older than anything the designer writes, whatever the clock.
    old = time.time() - 3600
    os.utime(flow_file, (old, old))
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(flow_file)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    recovery = Path(proc.stdout.strip())
    data = json.loads(recovery.read_text(encoding="utf-8"))
    assert data["path"] == str(flow_file)
    unsaved = parse_flow(data["flow"])
    assert len(unsaved.nodes) == len(load_flow(flow_file, validate=False).nodes) + 1
    return recovery, unsaved.dumps()


@pytest.fixture
def hello(tmp_path) -> Path:
    path = tmp_path / "hello.flow.json"
    shutil.copy(EXAMPLES / "hello.flow.json", path)
    return path


@pytest.fixture
def real_window(make_window):
    """A main window over the real node registry."""
    from designer.model.document import FlowDocument

    return make_window(FlowDocument(registry=Registry.default()))


def open_with_file_dialog(window, path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(path), FLOW_FILTER)))
    window.open_action.trigger()


def open_from_recent_menu(window, path, monkeypatch):
    window.add_recent(path)
    menu = window.recent_menu
    menu.aboutToShow.emit()  # what showing the menu does: fill it
    [action] = [a for a in menu.actions() if a.statusTip() == str(path.resolve())]
    action.trigger()


def open_by_path(window, path, monkeypatch):
    assert window.open_path(path)


@pytest.mark.parametrize("how", [open_with_file_dialog, open_from_recent_menu, open_by_path])
def test_opening_a_crashed_file_offers_its_autosave(how, real_window, hello, dialogs,
                                                   monkeypatch, qtbot):
    recovery, unsaved = edited_then_killed(hello)
    dialogs.answer = QMessageBox.StandardButton.Yes
    how(real_window, hello, monkeypatch)
    [(kind, title, text)] = dialogs.calls
    assert kind == "question" and title == "Recover unsaved work"
    assert "hello.flow.json" in text and "Recover" in text
    doc = real_window.document
    assert doc.flow.dumps() == unsaved
    assert doc.path == hello and doc.modified and real_window.isWindowModified()
    assert not recovery.exists()
    assert real_window.autosave.path.exists()  # the recovered work is protected again


def test_declining_keeps_the_saved_file_and_deletes_the_copy(real_window, hello, dialogs,
                                                            qtbot):
    recovery, unsaved = edited_then_killed(hello)
    saved = load_flow(hello, validate=False).dumps()
    dialogs.answer = QMessageBox.StandardButton.No
    assert real_window.open_path(hello)
    assert dialogs.calls[-1][1] == "Recover unsaved work"
    assert real_window.document.flow.dumps() == saved != unsaved
    assert not real_window.document.modified
    assert not recovery.exists()
    # Asked once: opening it again asks nothing.
    assert real_window.open_path(hello)
    assert len(dialogs.calls) == 1


def test_an_autosave_older_than_the_file_is_not_offered(real_window, hello, dialogs, qtbot):
    recovery, unsaved = edited_then_killed(hello)
    # The file was saved after the autosave (by another window, say).
    flow = load_flow(hello, validate=False)
    flow.name = "Saved later"
    hello.write_text(flow.dumps(), encoding="utf-8")
    later = json.loads(recovery.read_text(encoding="utf-8"))["saved_at"] + 60
    os.utime(hello, (later, later))
    assert real_window.open_path(hello)
    assert dialogs.calls == []
    assert real_window.document.flow.name == "Saved later"
    assert not real_window.document.modified
    assert recovery.exists()  # not offered, not deleted either
    assert not real_window.offer_recovery()  # nor on a plain start
    assert dialogs.calls == []


def test_opening_another_file_does_not_offer_the_autosave(real_window, hello, tmp_path,
                                                          dialogs, qtbot):
    recovery, _ = edited_then_killed(hello)
    other = tmp_path / "other.flow.json"
    shutil.copy(hello, other)
    assert real_window.open_path(other)
    assert dialogs.calls == []
    assert recovery.exists()


def test_design_file_on_the_command_line_offers_its_autosave(hello, dialogs, data_dir,
                                                             monkeypatch, qtbot):
    """`switchboard design FILE` after a kill -9: the window opens on the
    file, then offers the autosave; yes restores the unsaved work."""
    import designer.app as app_module
    from designer.app import run_designer
    from designer.window.main_window import MainWindow

    recovery, unsaved = edited_then_killed(hello)
    dialogs.answer = QMessageBox.StandardButton.Yes
    seen = {}

    def event_loop(app):
        # Stands in for the real event loop: let it run until the offer came.
        qtbot.waitUntil(lambda: bool(dialogs.calls), timeout=10_000)
        [window] = [w for w in QApplication.topLevelWidgets()
                    if isinstance(w, MainWindow) and w.isVisible()]
        seen.update(flow=window.document.flow.dumps(), path=window.document.path,
                    modified=window.document.modified, calls=list(dialogs.calls))
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()
        return 0

    monkeypatch.setattr(app_module, "_exec", event_loop)
    args = argparse.Namespace(command="design", flow=str(hello), screenshot=None, size=None,
                              theme="light")
    try:
        assert run_designer(args) == 0
    finally:
        theme.apply(QApplication.instance(), theme.LIGHT)
    [(kind, title, text)] = seen["calls"]
    assert kind == "question" and "hello.flow.json" in text
    assert seen["flow"] == unsaved
    assert Path(seen["path"]).resolve() == hello.resolve() and seen["modified"]
    assert not recovery.exists()


def test_the_open_dialog_names_a_node_by_its_place_when_its_id_cannot():
    from designer.window.files import describe_problems
    from runtime.flow import Problem

    text = describe_problems([Problem(file="f.flow.json", node_index=1, field="id",
                                      message="Input should be a valid string")])
    assert text == "• node #1, id: Input should be a valid string"

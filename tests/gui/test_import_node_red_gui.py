"""File > Import > Node-RED Flow… with real widgets: only the file dialog's
answer is patched. The imported flow opens as a new unsaved flow on the
canvas and a dialog shows the importer's table; a bad file is a message
naming what is wrong. Writes docs/img/import-node-red.png (1440x900)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog

from runtime.registry import Registry
from tests.conftest import ROOT
from tests.gui.editor_fixtures import *  # noqa: F401,F403

DATA = ROOT / "tests" / "data" / "node-red"


def _menu_action(window, *labels):
    menu = window.menuBar()
    action = None
    for label in labels:
        for a in (menu.actions() if hasattr(menu, "actions") else []):
            if a.text().replace("&", "") == label:
                action = a
                menu = a.menu() or menu
                break
        else:
            raise AssertionError(f"no menu entry {label!r} in {[a.text() for a in menu.actions()]}")
    return action


def _real_window(make_window):
    from designer.model.document import FlowDocument

    return make_window(FlowDocument(registry=Registry.default()))


def _combined(tmp_path) -> Path:
    """Two of the test exports in one file: a tab with a subflow instance,
    link, junction, group and comment, and one with a function and an
    unknown type."""
    data = json.loads((DATA / "subflow-env.json").read_text())
    for n in json.loads((DATA / "function-unknown.json").read_text()):
        if n["type"] != "tab" and isinstance(n.get("y"), (int, float)):
            n["y"] += 260
        if n.get("z") == "t4" or n["type"] == "tab":
            n["z"] = "t2" if n["type"] != "tab" else None
        if n["type"] != "tab":
            data.append({k: v for k, v in n.items() if v is not None})
    # A node to review inside the subflow: listed as the definition's.
    data.append({"id": "fn9", "type": "function", "z": "sf1", "name": "inside",
                 "func": "msg.x = 1;\nreturn msg;", "x": 380, "y": 160, "wires": [[]]})
    path = tmp_path / "greeting-flows.json"
    path.write_text(json.dumps(data))
    return path


def test_import_node_red_menu_opens_the_flow_and_the_table(make_window, tmp_path, monkeypatch,
                                                            qtbot):
    window = _real_window(make_window)
    path = _combined(tmp_path)
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(path), "")))
    action = _menu_action(window, "File", "Import", "Node-RED Flow…")
    action.trigger()
    dialog = window.import_report_dialog
    qtbot.waitExposed(dialog)
    doc = window.document
    assert doc.path is None and doc.modified  # new, unsaved
    ids = {n.id for n in doc.flow.nodes}
    assert {"in2", "inst1", "out2", "fn4", "btn4", "dbg5"} <= ids
    assert [d.name for d in doc.flow.subflows] == ["Greeter"]  # the subflow: a definition
    rows = {r[0]: r[1:] for r in dialog.rows()}
    assert rows["ui_button"] == ["0", "0", "1"]
    assert rows["subflow:Greeter"] == ["1", "0", "0"]
    assert rows["function"] == ["1", "2", "0"]
    entries = len(json.loads(path.read_text()))
    assert rows["Total"] == [str(x) for x in (13, 4, 1)] and sum(map(int, rows["Total"])) == entries
    assert "does not run until they are replaced" in dialog.summary.text()
    # The canvas shows the nodes.
    assert len(window.scene.node_items()) == len(ids)
    # The screenshot for docs/import-node-red.md: the canvas and the table, 1440x900.
    window.resize(1440, 900)
    window.show()
    qtbot.waitExposed(window)
    # The flow's check runs after a quiet moment; then the tab strip and the
    # status bar make room for its counts ("Problems (2)", "1 error").
    qtbot.waitUntil(lambda: bool(window.document.problems))
    QApplication.processEvents()
    QApplication.processEvents()
    window.view.fit_readable()
    geo = window.geometry()
    dialog.adjustSize()
    dialog.move(geo.x() + geo.width() - dialog.width() - 12, geo.y() + 70)
    # The canvas a little smaller and to the left: all of it clear of the dialog.
    window.view.scale(0.85, 0.85)
    bar = window.view.horizontalScrollBar()
    bar.setValue(bar.value() + 60)
    QApplication.processEvents()
    out = os.environ.get("SWITCHBOARD_DOC_IMAGES")
    if out:
        from PySide6.QtGui import QPainter, QPixmap

        shot = QPixmap(window.size())
        shot.fill()
        window.render(shot)
        painter = QPainter(shot)
        painter.drawPixmap(dialog.x() - geo.x(), dialog.y() - geo.y(), dialog.grab())
        painter.end()
        Path(out).mkdir(parents=True, exist_ok=True)
        assert shot.save(str(Path(out) / "import-node-red.png"))
    # What to review: the nodes' REVIEW/PLACEHOLDER notes; a click selects the node.
    todo = dialog.todo
    texts = [todo.item(i).text() for i in range(todo.count())]
    assert any(t.startswith("Big button (btn4): PLACEHOLDER") for t in texts)
    assert any(t.startswith("double (fn4): REVIEW: a function node") for t in texts)
    assert any(t.startswith("inside (subflows.Greeter/fn9): REVIEW: a function node")
               for t in texts)
    assert dialog.tabs.tabText(1) == f"To review ({todo.count()})"
    row = next(i for i, t in enumerate(texts) if t.startswith("double (fn4)"))
    dialog.tabs.setCurrentIndex(1)
    QApplication.processEvents()
    rect = todo.visualItemRect(todo.item(row))
    qtbot.mouseClick(todo.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert [i.node_id for i in window.scene.selectedItems() if hasattr(i, "node_id")] == ["fn4"]
    dialog.tabs.setCurrentIndex(0)
    dialog.accept()


def test_import_of_a_bad_file_says_what_is_wrong(make_window, tmp_path, monkeypatch, dialogs):
    window = _real_window(make_window)
    before = window.document.flow
    bad = tmp_path / "flows.json"
    bad.write_text('{"flows": 3}')
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(bad), "")))
    _menu_action(window, "File", "Import", "Node-RED Flow…").trigger()
    assert [c[:2] for c in dialogs.calls] == [("warning", "Cannot import Node-RED flow")]
    text = dialogs.calls[0][2]
    assert "flows.json" in text and "this is a JSON object" in text and "Traceback" not in text
    assert window.document.flow is before  # the current flow stays
    assert getattr(window, "import_report_dialog", None) is None

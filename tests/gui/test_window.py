"""The main window: actions and shortcuts, docks, the contract the run
integration relies on, themes, layout persistence and screenshot mode."""

from __future__ import annotations

import argparse

import pytest
from PySide6.QtGui import QAction, QImage, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget

from designer.app import parse_size, run_designer, welcome_flow
from designer.canvas.items import NodeItem
from designer.canvas.wires import WireItem
from designer.look import theme
from designer.model.commands import AddNode, new_node
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import add, wire


def shortcuts(action: QAction) -> set[str]:
    return {s.toString() for s in action.shortcuts()}


def test_standard_actions_and_shortcuts(window, qtbot):
    assert "Ctrl+N" in shortcuts(window.new_action)
    assert "Ctrl+O" in shortcuts(window.open_action)
    assert "Ctrl+S" in shortcuts(window.save_action)
    assert "Ctrl+Shift+S" in shortcuts(window.save_as_action)
    assert "Ctrl+Z" in shortcuts(window.undo_action)
    assert "Ctrl+Shift+Z" in shortcuts(window.redo_action)
    assert "Ctrl+D" in shortcuts(window.duplicate_action)
    assert "Del" in shortcuts(window.delete_action)
    assert "F" in shortcuts(window.fit_action)
    assert shortcuts(window.run_action) == {"F5"}
    assert shortcuts(window.stop_action) == {"Shift+F5"}
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus[:4] == ["File", "Edit", "View", "Run"]
    file_menu = window.menuBar().actions()[0].menu()
    texts = [a.text().replace("&", "") for a in file_menu.actions()]
    assert "Open Recent" in texts and "Save As…" in texts


def test_undo_redo_actions_follow_the_stack(window, qtbot):
    doc = window.document
    assert not window.undo_action.isEnabled()
    doc.undo_stack.push(AddNode(doc, new_node(doc, "test.step", (0, 0))))
    assert window.undo_action.isEnabled()
    assert "Add Step" in window.undo_action.text()
    window.undo_action.trigger()
    assert doc.flow.nodes == [] and window.redo_action.isEnabled()
    window.redo_action.trigger()
    assert len(doc.flow.nodes) == 1


def test_run_integration_contract(window, qtbot):
    assert isinstance(window.inspector_dock, QDockWidget)
    assert isinstance(window.run_action, QAction) and isinstance(window.stop_action, QAction)
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 900, 600)
    wire(doc, "a", "out", "b")
    assert isinstance(window.scene.item_for_node("a"), NodeItem)
    assert isinstance(window.scene.item_for_wire(0), WireItem)
    window.select_node("b")
    assert window.scene.selected_node_ids() == ["b"]
    centre = window.view.view_center()
    assert window.scene.item_for_node("b").sceneBoundingRect().contains(centre)


def test_node_context_menu_appends_integration_actions(window, qtbot):
    add(window.document, "a", "test.step", 0, 0)
    seen = []

    def run_from_here(node_id):
        seen.append(node_id)
        return QAction("Run from here", window)

    window.node_context_actions.append(run_from_here)
    window.node_context_actions.append(lambda node_id: None)
    menu = window.build_node_menu("a")
    texts = [a.text() for a in menu.actions()]
    assert "Run from here" in texts and "Disable" in texts
    assert seen == ["a"]
    menu.deleteLater()


def test_disable_from_the_menu_is_undoable(window, qtbot):
    add(window.document, "a", "test.step", 0, 0)
    menu = window.build_node_menu("a")
    next(a for a in menu.actions() if a.text() == "Disable").trigger()
    assert window.document.node("a").disabled
    window.document.undo_stack.undo()
    assert not window.document.node("a").disabled
    menu.deleteLater()


def test_selection_drives_the_properties_panel(window, qtbot, monkeypatch):
    add(window.document, "a", "test.step", 0, 0)
    add(window.document, "b", "test.step", 300, 0)
    calls = []
    monkeypatch.setattr(window.properties, "set_nodes", calls.append, raising=False)
    window.scene.select_nodes(["a"])
    window.scene.select_nodes(["a", "b"])
    window.scene.clearSelection()
    assert calls[0] == ["a"] and sorted(calls[-2]) == ["a", "b"] and calls[-1] == []


def test_a_multiple_selection_shows_a_summary_not_a_form(window, qtbot):
    add(window.document, "a", "test.step", 0, 0)
    add(window.document, "b", "test.step", 300, 0)
    panel = window.properties
    if not hasattr(panel, "set_nodes"):
        pytest.skip("the properties panel is the placeholder")
    window.scene.select_nodes(["a"])
    assert panel.form is not None and panel.form.node_id == "a"
    window.scene.select_nodes(["a", "b"])
    assert panel.form is None and sorted(panel.selection) == ["a", "b"]


def test_theme_switch_repaints_everything(make_window, qtbot, monkeypatch):
    window = make_window()
    add(window.document, "a", "test.tool", 0, 0)
    try:
        window.set_theme("dark")
        assert theme.current() is theme.DARK
        assert QApplication.palette().window().color().name() == theme.DARK.window
        window.view.viewport().repaint()
        window.set_theme("light")
        assert theme.current() is theme.LIGHT
    finally:
        theme.apply(QApplication.instance(), theme.LIGHT)


def test_layout_and_recent_files_persist(make_window, tmp_path, qtbot):
    from designer.look.settings import settings

    w1 = make_window()
    w1.palette_dock.hide()
    w1.add_recent(tmp_path / "x.flow.json")
    w1.close()
    assert settings().value("window/state") is not None
    from designer.window.main_window import MainWindow

    w2 = MainWindow(w1.document.__class__(registry=w1.document.registry))
    try:
        assert w2.palette_dock.isHidden()
        assert w2.recent_files()[0].endswith("x.flow.json")
        w2._fill_recent_menu()
        assert "x.flow.json" in [a.text() for a in w2.recent_menu.actions()]
    finally:
        w2.close()
        w2.deleteLater()
        settings().remove("window/state")


def test_screenshot_mode_writes_png_and_returns(tmp_path, qtbot, data_dir):
    png = tmp_path / "shot.png"
    args = argparse.Namespace(command="design", flow=str(welcome_flow()), screenshot=str(png),
                              size="900x600", theme="light")
    try:
        assert run_designer(args) == 0
    finally:
        theme.apply(QApplication.instance(), theme.LIGHT)
    img = QImage(str(png))
    assert (img.width(), img.height()) == (900, 600)


def test_screenshot_of_a_bad_flow_exits_2(tmp_path, qtbot, data_dir, dialogs):
    bad = tmp_path / "bad.flow.json"
    bad.write_text("{", encoding="utf-8")
    args = argparse.Namespace(command="design", flow=str(bad), screenshot=str(tmp_path / "x.png"),
                              size="900x600", theme="light")
    assert run_designer(args) == 2
    assert "invalid JSON" in dialogs.calls[-1][2]


def test_parse_size():
    assert parse_size("1440x900") == (1440, 900)


def test_welcome_flow_exists():
    assert welcome_flow() is not None and welcome_flow().exists()


def test_key_sequence_for_delete_is_view_local(window, qtbot):
    # Canvas shortcuts must not fire while the user types in a panel.
    from PySide6.QtCore import Qt

    assert window.delete_action.shortcutContext() == Qt.ShortcutContext.WidgetWithChildrenShortcut
    assert window.delete_action in window.view.actions()
    assert QKeySequence("Ctrl+D") in window.duplicate_action.shortcuts()

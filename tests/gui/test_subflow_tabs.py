"""Subflow definitions in tabs of their own, and the Subflow menu (#25 item
3), with real widgets: an instance opens its definition by double-click and
by Enter, the breadcrumb, editing inside (the flow's definition changes, the
file is modified and saved with it), an undo stack per tab, Convert
Selection to Subflow and Expand Subflow from the menu as one undo step each
(undo gives the flow back exactly), Save to Library (the file written, the
instances pinned), a library subflow's tab saving a new version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from designer.model.document import FlowDocument
from runtime.flow import Flow, load_flow, parse_flow
from runtime.flow.subflow_edit import convert_selection
from runtime.flow.subflows import IN_TYPE, OUT_TYPE, port_names, read_library_file, save_to_library
from runtime.registry import Registry
from tests.gui.editor_fixtures import *  # noqa: F401,F403 - the make_window fixture
from tests.gui.subflow_fixtures import center, registry  # noqa: F401 - the fixture


def fixed(value):
    return {"scope": "custom", "value": value}


def orders() -> Flow:
    """inject -> price -> stock switch -> (ok: tag -> debug) (else: miss -> debug)."""
    def node(id, type, x, y, **params):
        return {"id": id, "type": type, "position": [x, y],
                "params": {k: fixed(v) for k, v in params.items()}}

    def change(path, value):
        return [{"action": "set", "path": path, "value": value}]

    return parse_flow({"format": "switchboard.flow/1", "name": "Orders", "nodes": [
        node("src", "core.inject", 0, 100, payload={"sku": "A-1", "qty": 3}),
        node("calc", "core.template", 240, 100, template="{{ payload.qty }}", to="payload.n"),
        node("check", "core.switch", 480, 100, path="payload.qty",
             rules=[{"op": "gt", "value": 0}, {"op": "else"}]),
        node("tag", "core.change", 720, 40, rules=change("payload.status", "ok")),
        node("miss", "core.change", 720, 200, rules=change("payload.status", "backorder")),
        node("d_ok", "core.debug", 960, 40),
        node("d_miss", "core.debug", 960, 200)],
        "wires": [{"from": [a, p], "to": [b, "in"]} for a, p, b in [
            ("src", "out", "calc"), ("calc", "out", "check"), ("check", "out0", "tag"),
            ("check", "out1", "miss"), ("tag", "out", "d_ok"), ("miss", "out", "d_miss")]]})


@pytest.fixture
def converted() -> Flow:
    """orders() with check and tag as the subflow check_stock (label "Check
    stock"), and inside it tag as a nested subflow label_it."""
    flow = convert_selection(orders(), ["check", "tag", "miss"], "check_stock", "Check stock")
    return convert_selection(flow, ["tag"], "label_it", "Label it", within="check_stock")


def window_on(make_window, flow: Flow, path: Path | None = None):
    doc = FlowDocument(flow, Registry.default(), path)
    return make_window(doc)


def answer(window, fill, *, ok: bool = True) -> None:
    """When the Subflow action's dialog shows: ``fill(dialog)``, then OK."""
    def go():
        dialog = window.subflow_actions.dialog
        if dialog is None or not dialog.isVisible():
            QTimer.singleShot(10, go)
            return
        fill(dialog)
        button = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok if ok
                                       else QDialogButtonBox.StandardButton.Cancel)
        button.click()
    QTimer.singleShot(0, go)


# -- opening --------------------------------------------------------------------------------
def test_double_click_on_an_instance_opens_its_definition_in_a_tab(make_window, converted):
    w = window_on(make_window, converted)
    assert not w.tabs.bar.isVisible()  # a flow alone: no tab strip
    vp = w.view.viewport()
    QTest.mouseDClick(vp, Qt.MouseButton.LeftButton, pos=center(w.view, w.scene, "check_stock"))
    tab = w.tabs.current()
    assert tab is not None and tab.definition is w.document.flow.subflow("check_stock")
    assert w.current_definition() is w.document.flow.subflows[0]
    assert w.tabs.bar.isVisible() and w.tabs.bar.count() == 2
    assert w.tabs.bar.tabText(0) == "Orders" and w.tabs.bar.tabText(1) == "Check stock"
    assert w.tabs.breadcrumb_text() == "Orders › Check stock"
    assert "Check stock" in w.tabs.crumbs.text() and w.tabs.crumb_row.isVisible()
    assert w.tabs.stack.currentWidget() is tab.view and tab.view.isVisible()
    assert {n.id for n in tab.doc.flow.nodes} >= {"check", "miss", "label_it"}
    assert tab.doc.definition is tab.definition  # what sfdes's panels read
    assert w.properties_dock.widget() is w.active_properties() is not w.properties


def test_enter_opens_it_and_nested_subflows_add_to_the_breadcrumb(make_window, converted):
    w = window_on(make_window, converted)
    w.scene.select_nodes(["check_stock"])
    w.view.setFocus()
    QTest.keyClick(w.view, Qt.Key.Key_Return)
    tab = w.tabs.current()
    assert tab.name == "check_stock"
    tab.scene.select_nodes(["label_it"])
    tab.view.setFocus()
    QTest.keyClick(tab.view, Qt.Key.Key_Enter)
    inner = w.tabs.current()
    assert inner.name == "label_it" and w.tabs.bar.count() == 3
    assert w.tabs.breadcrumb_text() == "Orders › Check stock › Label it"
    w.tabs._crumb_clicked("1")  # the breadcrumb's middle part
    assert w.tabs.current() is tab
    w.tabs._crumb_clicked("0")
    assert w.tabs.current() is None and w.tabs.stack.currentWidget() is w.view
    # Enter on a node that is no instance shows its properties, as a double-click does.
    w.scene.select_nodes(["calc"])
    QTest.keyClick(w.view, Qt.Key.Key_Return)
    assert w.tabs.current() is None and w.properties.node_id == "calc"


# -- editing inside ---------------------------------------------------------------------
def test_an_edit_in_a_tab_changes_the_definition_and_has_its_own_undo(make_window, converted,
                                                                   tmp_path):
    path = tmp_path / "orders.flow.json"
    w = window_on(make_window, converted, path)
    main = w.document
    main.undo_stack.push(_move(main, "src", (0, 300)))  # an edit of the flow itself
    w.document.undo_stack.setClean()
    tab = w.tabs.open_definition(main.flow.subflow("check_stock"))
    defn = main.flow.subflows[0]
    before = len(defn.nodes)
    new_id = tab.editor.add_node("core.delay")
    assert new_id in {n.id for n in defn.nodes} and len(defn.nodes) == before + 1
    assert w.isWindowModified() and main.modified  # the flow file's edit
    assert "Add" in w.undo_action.text()
    w.undo_action.trigger()  # the tab's edit, not the flow's move
    assert len(defn.nodes) == before
    assert main.flow.node("src").position == (0.0, 300.0)
    assert not w.isWindowModified()  # back where it was saved
    w.redo_action.trigger()
    assert len(defn.nodes) == before + 1 and w.isWindowModified()
    w.tabs.bar.setCurrentIndex(0)
    assert w.tabs.undo_group.activeStack() is main.undo_stack
    w.undo_action.trigger()  # on the flow's tab: the flow's move
    assert main.flow.node("src").position == (0.0, 100.0)
    assert len(defn.nodes) == before + 1
    # Saving writes the definition with the flow, and both are clean.
    w.save()
    assert not w.isWindowModified() and tab.doc.undo_stack.isClean()
    saved = load_flow(path, Registry.default(), validate=False)
    assert new_id in {n.id for n in saved.subflow("check_stock").nodes}


def _move(doc, node_id, pos):
    from designer.model.commands import MoveNodes

    return MoveNodes(doc, {node_id: (doc.node(node_id).position, pos)})


def test_copy_paste_and_delete_work_in_a_tab(make_window, converted):
    w = window_on(make_window, converted)
    w.scene.select_nodes(["calc"])
    w.copy_action.trigger()  # copied on the flow's tab
    defn = w.document.flow.subflow("check_stock")
    tab = w.tabs.open_definition(defn)
    w.paste_action.trigger()  # pasted into the subflow's
    assert "calc" in {n.id for n in defn.nodes} and "calc" in {n.id for n in w.document.flow.nodes}
    assert tab.scene.selected_node_ids() == ["calc"]
    tab.scene.select_nodes(["miss"])
    w.delete_action.trigger()
    assert "miss" not in {n.id for n in defn.nodes}
    assert not any("miss" in (x.source[0], x.target[0]) for x in defn.wires)
    assert tab.doc.undo_stack.count() == 2 and w.document.undo_stack.count() == 0
    w.undo_action.trigger()
    assert "miss" in {n.id for n in defn.nodes}


def test_closing_a_tab_keeps_its_edits_and_history(make_window, converted):
    w = window_on(make_window, converted)
    defn = w.document.flow.subflow("check_stock")
    tab = w.tabs.open_definition(defn)
    node = tab.editor.add_node("core.delay")
    w.subflow_actions.close_tab_action.trigger()
    assert w.tabs.current() is None and w.tabs.bar.count() == 1 and not w.tabs.bar.isVisible()
    assert node in {n.id for n in defn.nodes} and w.isWindowModified()
    again = w.tabs.open_definition(defn)
    assert again is tab and w.undo_action.isEnabled()
    w.undo_action.trigger()
    assert node not in {n.id for n in defn.nodes}


def test_the_palette_offers_subflow_ports_inside_a_definition(make_window, converted):
    w = window_on(make_window, converted)
    assert w.palette.item_for_type(IN_TYPE) is None
    assert w.palette.item_for_type("subflow:check_stock") is not None
    w.tabs.open_definition(w.document.flow.subflow("check_stock"))
    assert w.palette.item_for_type(IN_TYPE) is not None
    assert w.palette.item_for_type(OUT_TYPE) is not None
    # Not itself: an instance of check_stock inside check_stock would be a cycle.
    assert w.palette.item_for_type("subflow:check_stock") is None
    w.tabs.bar.setCurrentIndex(0)
    assert w.palette.item_for_type(IN_TYPE) is None
    assert w.palette.item_for_type("subflow:check_stock") is not None
    # Placed from the palette inside the tab, a new output becomes a port of the instances.
    w.tabs.bar.setCurrentIndex(1)
    w.palette.add_requested.emit(OUT_TYPE)
    defn = w.document.flow.subflow("check_stock")
    assert len(port_names(defn, OUT_TYPE)) == 3


# -- Convert and Expand -----------------------------------------------------------------
def test_convert_selection_from_the_menu_is_one_undo_step(make_window):
    w = window_on(make_window, orders())
    original = w.document.flow.to_json()
    w.scene.select_nodes(["calc", "check", "tag", "miss"])
    w.subflow_actions.update_actions()
    assert w.subflow_actions.convert_action.isEnabled()
    assert "Ctrl+Shift+G" in {s.toString() for s in w.subflow_actions.convert_action.shortcuts()}

    def fill(dialog):
        dialog.name_edit.setText("check stock")  # refused: the dialog says why and stays
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
        assert dialog.isVisible() and "cannot name a subflow" in dialog.error.text()
        dialog.name_edit.setText("check_stock")
        dialog.label_edit.setText("Check stock")

    answer(w, fill)
    count = w.document.undo_stack.count()
    w.subflow_actions.convert_action.trigger()
    flow = w.document.flow
    assert w.document.undo_stack.count() == count + 1
    assert [d.name for d in flow.subflows] == ["check_stock"]
    assert flow.node("check_stock").type == "subflow:check_stock"
    assert w.scene.selected_node_ids() == ["check_stock"]
    assert w.scene.item_for_node("calc") is None
    assert w.scene.item_for_node("check_stock") is not None
    converted = flow.to_json()
    assert w.undo_action.text().replace("&", "") == "Undo Convert to subflow check_stock"
    w.undo_action.trigger()
    assert w.document.flow.to_json() == original  # exactly: order, ids, positions, wires
    assert {i.node_id for i in w.scene.node_items()} == {n["id"] for n in original["nodes"]}
    w.redo_action.trigger()
    assert w.document.flow.to_json() == converted


def test_convert_with_a_shortcut_inside_a_definition_tab(make_window, converted):
    w = window_on(make_window, converted)
    tab = w.tabs.open_definition(w.document.flow.subflow("check_stock"))
    tab.scene.select_nodes(["miss"])
    tab.view.setFocus()
    QApplication.processEvents()  # the tab shown, its canvas has the keys
    assert QApplication.focusWidget() is tab.view
    answer(w, lambda d: d.name_edit.setText("backorder"))
    main_count = w.document.undo_stack.count()
    QTest.keyClick(tab.view, Qt.Key.Key_G,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    flow = w.document.flow
    assert [d.name for d in flow.subflows] == ["check_stock", "label_it", "backorder"]
    assert "backorder" in {n.id for n in flow.subflow("check_stock").nodes}
    assert tab.scene.item_for_node("backorder") is not None
    assert w.document.undo_stack.count() == main_count and tab.doc.undo_stack.count() == 1
    w.undo_action.trigger()
    assert [d.name for d in flow.subflows] == ["check_stock", "label_it"]
    assert tab.scene.item_for_node("miss") is not None


def test_a_refused_conversion_says_why(make_window, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "warning",
                        staticmethod(lambda parent, title, text, *a: shown.append(text)))
    w = window_on(make_window, orders())
    assert w.subflow_actions.convert() is None  # nothing selected
    assert "Select the nodes" in w.statusBar().currentMessage()
    w.scene.select_nodes(["calc"])
    w.subflow_actions.convert("9")
    assert shown and "cannot name a subflow" in shown[0]
    assert w.document.undo_stack.count() == 0


def test_expand_from_the_menu_is_one_undo_step(make_window, converted):
    w = window_on(make_window, converted)
    before = w.document.flow.to_json()
    w.scene.select_nodes(["check_stock"])
    w.subflow_actions.update_actions()
    assert w.subflow_actions.expand_action.isEnabled()
    w.subflow_actions.expand_action.trigger()
    flow = w.document.flow
    assert flow.node("check_stock") is None
    assert {"check", "miss", "label_it"} <= {n.id for n in flow.nodes}
    assert set(w.scene.selected_node_ids()) == {"check", "miss", "label_it"}
    assert [d.name for d in flow.subflows] == ["check_stock", "label_it"]  # kept
    assert ("calc", "out", "check", "in") in {(*x.source, *x.target) for x in flow.wires}
    assert w.document.undo_stack.count() == 1
    w.undo_action.trigger()
    assert w.document.flow.to_json() == before


# -- Save to Library ----------------------------------------------------------------------
def test_save_to_library_writes_the_file_and_pins_the_instances(make_window, converted,
                                                              tmp_path):
    path = tmp_path / "orders.flow.json"
    path.write_text(converted.dumps())
    w = window_on(make_window, load_flow(path, Registry.default(), validate=False), path)
    tab = w.tabs.open_definition(w.document.flow.subflow("label_it"))
    assert tab is w.tabs.current()
    lib = tmp_path / "subflows"

    def fill(dialog):
        assert dialog.folder.currentData() == str(lib)
        assert dialog.version_edit.text() == "1.0.0"
        dialog.version_edit.setText("1.2.0")

    answer(w, fill)
    w.tabs.save_button.click()
    saved = read_library_file(lib / "label_it.subflow.json")
    assert saved.version == "1.2.0" and saved.label == "Label it"
    flow = w.document.flow
    assert [d.name for d in flow.subflows] == ["check_stock"]
    inner = next(n for n in flow.subflow("check_stock").nodes if n.id == "label_it")
    assert inner.subflow.version == "1.2.0" and inner.subflow.hash == saved.content_hash()
    assert w.tabs.current() is None and tab not in w.tabs.all_tabs()  # its tab went
    assert w.document.undo_stack.count() == 1
    w.undo_action.trigger()
    assert [d.name for d in w.document.flow.subflows] == ["check_stock", "label_it"]
    assert inner.subflow is None or next(
        n for n in w.document.flow.subflow("check_stock").nodes if n.id == "label_it"
    ).subflow is None
    assert (lib / "label_it.subflow.json").is_file()  # a written file stays written


def test_save_to_library_from_a_selected_instance(make_window, tmp_path):
    path = tmp_path / "orders.flow.json"
    flow = convert_selection(orders(), ["check", "tag", "miss"], "check_stock")
    path.write_text(flow.dumps())
    w = window_on(make_window, load_flow(path, Registry.default(), validate=False), path)
    w.scene.select_nodes(["check_stock"])
    w.subflow_actions.update_actions()
    assert w.subflow_actions.save_action.isEnabled()
    saved = w.subflow_actions.save_to_library(tmp_path / "subflows", "2.0.0")
    assert saved == tmp_path / "subflows" / "check_stock.subflow.json" and saved.is_file()
    assert w.document.flow.subflows == []
    assert w.document.flow.node("check_stock").subflow.version == "2.0.0"
    errors = [p for p in w.document.revalidate() if p.severity == "error"]
    assert not errors, errors  # the flow finds the pinned library file


def test_a_library_subflow_opens_as_a_copy_and_saves_a_new_version(make_window, tmp_path):
    path = tmp_path / "orders.flow.json"
    lib = tmp_path / "subflows"
    flow = convert_selection(orders(), ["check", "tag", "miss"], "check_stock", "Check stock")
    defn = flow.subflows[0].model_copy(deep=True)
    defn.version = "1.0.0"
    save_to_library(defn, lib)
    from runtime.flow.model import SubflowPin

    flow.subflows = []
    flow.node("check_stock").subflow = SubflowPin(version="1.0.0", hash=defn.content_hash())
    path.write_text(flow.dumps())
    w = window_on(make_window, load_flow(path, Registry.default(), validate=False), path)
    before = w.document.flow.to_json()
    w.scene.select_nodes(["check_stock"])
    QTest.keyClick(w.view, Qt.Key.Key_Return)
    tab = w.tabs.current()
    assert tab is not None and tab.library is not None
    assert w.tabs.breadcrumb_text() == "Orders › Check stock (library v1.0.0)"
    assert not w.tabs.save_button.isEnabled()  # nothing to save yet
    tab.editor.add_node("core.delay")
    assert w.document.flow.to_json() == before and not w.isWindowModified()  # a copy
    assert w.tabs.save_button.isEnabled() and w.tabs.bar.tabText(1).endswith("•")

    answer(w, lambda d: d.version_edit.text() == "1.0.1" or pytest.fail(d.version_edit.text()))
    w.tabs.save_button.click()
    current = read_library_file(lib / "check_stock.subflow.json")
    assert current.version == "1.0.1"
    assert "delay" in {n.type.split(".")[-1] for n in current.nodes}
    assert read_library_file(lib / "check_stock@1.0.0.subflow.json").version == "1.0.0"
    assert tab.doc.undo_stack.isClean() and w.tabs.bar.tabText(1) == "Check stock v1.0.1"
    assert w.document.flow.node("check_stock").subflow.version == "1.0.0"  # until Update


def test_help_lists_the_subflow_shortcuts():
    from designer.window.main_window import SHORTCUTS

    assert "Ctrl+Shift+G — convert the selection to a subflow" in SHORTCUTS
    assert "Enter or double-click — open a subflow instance's definition" in SHORTCUTS
    assert "Ctrl+Shift+E" in SHORTCUTS


def test_opening_another_flow_closes_the_tabs(make_window, converted, tmp_path):
    w = window_on(make_window, converted)
    w.tabs.open_definition(w.document.flow.subflow("check_stock"))
    w.document.undo_stack.setClean()
    for t in w.tabs.all_tabs():
        t.doc.undo_stack.setClean()
    w.new_flow()
    assert w.tabs.all_tabs() == [] and w.tabs.bar.count() == 1 and w.current_definition() is None
    assert json.loads(w.document.flow.dumps())["nodes"] == []

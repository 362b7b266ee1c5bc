"""Issue #25's done-when, end to end in the designer with real widgets: a
flow with two instances of a LIBRARY subflow (its file in the flow's own
subflows/ folder). The user double-clicks an instance (its definition opens
in a tab, as a copy of the library file), edits a node's param in the tab's
Properties, saves it to the library as a new version (Subflow > Save to
Library… and its dialog), goes back to the flow and presses "Update
all instances in this flow" in an instance's Properties: both instances pin
the new version and its hash, one undo step puts both old pins back (and
redo the new ones), and the designer's run (the real engine) of the
updated flow shows the new text in its debug output, where the run before
the edit showed the old one."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox

from designer.model.document import FlowDocument
from runtime.flow import Flow
from runtime.flow.model import SubflowDef, SubflowPin
from runtime.flow.subflows import IN_TYPE, OUT_TYPE, read_library_file, save_to_library
from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.gui.inspector_fixtures import qt_loop  # noqa: F401 - the fixture
from tests.gui.subflow_fixtures import center, registry  # noqa: F401 - the fixture
from tests.subflow_fixtures import P, W, _own_library  # noqa: F401 - the autouse fixture

OLD_TEXT = "{{ subflow.greeting }}, {{ payload.name }}"
NEW_TEXT = "{{ subflow.greeting }}, {{ payload.name }}! (v2)"


def greet() -> SubflowDef:
    """The library subflow greet 1.0.0: its input -> a Template writing
    'GREETING, NAME' to payload.text -> its output."""
    return SubflowDef.model_validate({
        "name": "greet", "label": "Greet", "version": "1.0.0",
        "description": "Greets the person named in payload.name",
        "params": [{"name": "greeting", "type": "str", "default": "Hello"}],
        "nodes": [
            {"id": "in", "type": IN_TYPE, "position": [60, 100], "params": {"name": P("in")}},
            {"id": "say", "type": "core.template", "name": "Say it", "position": [300, 100],
             "params": {"template": P(OLD_TEXT), "to": P("payload.text")}},
            {"id": "out", "type": OUT_TYPE, "position": [560, 100], "params": {"name": P("out")}}],
        "wires": [W("in", "say"), W("say", "out")]})


@pytest.fixture
def flow_file(tmp_path) -> Path:
    """orders.flow.json: one inject feeding two pinned instances of greet
    (greeting Hello and Hi), each into a Debug node; greet 1.0.0 in the
    flow's own subflows/ folder."""
    folder = tmp_path / "flows"
    defn = greet()
    save_to_library(defn, folder / "subflows")
    pin = SubflowPin(version="1.0.0", hash=defn.content_hash()).model_dump()
    flow = Flow.model_validate({
        "format": "switchboard.flow/1", "name": "Greetings",
        "nodes": [
            {"id": "src", "type": "core.inject", "name": "Go", "position": [60, 200],
             "params": {"payload": P({"name": "Ada"}), "payload_type": P("JSON")}},
            {"id": "hello", "type": "subflow:greet", "name": "Hello", "position": [300, 80],
             "subflow": pin, "params": {"greeting": P("Hello")}},
            {"id": "hi", "type": "subflow:greet", "name": "Hi", "position": [300, 320],
             "subflow": pin, "params": {"greeting": P("Hi")}},
            {"id": "d_hello", "type": "core.debug", "name": "Out hello", "position": [560, 80]},
            {"id": "d_hi", "type": "core.debug", "name": "Out hi", "position": [560, 320]}],
        "wires": [W("src", "hello"), W("src", "hi"), W("hello", "d_hello"), W("hi", "d_hi")]})
    path = folder / "orders.flow.json"
    path.write_text(flow.dumps())
    return path


def run_texts(qtbot, w) -> dict[str, str]:
    """Run the flow in the designer (F5's action), to the end; what each
    Debug node showed, from the inspector's Debug tab."""
    session = w.run_session
    w.run_action.trigger()
    qtbot.waitUntil(lambda: session.controller.last_result is not None
                    and not session.controller.is_running, timeout=15000)
    assert session.controller.last_result.errors == 0
    debug = session.inspector.debug
    qtbot.waitUntil(lambda: len(debug.entries()) == 2, timeout=5000)
    return {e.node: e.value["text"] for e in debug.entries()}


def test_edit_a_library_subflow_save_a_version_update_all_and_run(
        make_window, flow_file, qtbot):  # noqa: F811
    w = make_window(FlowDocument.open(flow_file))
    w.complete_start()
    doc = w.document
    assert run_texts(qtbot, w) == {"d_hello": "Hello, Ada", "d_hi": "Hi, Ada"}
    old_pin = doc.node("hello").subflow

    # Double-click an instance: its definition opens in a tab of its own, a
    # copy of the library file.
    QTest.mouseDClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                      pos=center(w.view, w.scene, "hello"))
    tab = w.tabs.current()
    assert tab is not None and tab.library is not None and tab.name == "greet"
    assert w.tabs.breadcrumb_text() == "Greetings › Greet (library v1.0.0)"

    # Edit the Template's text in the tab's own Properties.
    QTest.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=center(tab.view, tab.scene, "say"))
    props = w.active_properties()
    assert props is not w.properties and props.node_id == "say"
    edit = props.form.rows["template"].value_editor.edit
    edit.setFocus()
    edit.selectAll()
    QTest.keyClicks(edit, NEW_TEXT)
    assert tab.doc.node("say").params["template"].value == NEW_TEXT
    assert doc.flow.to_json()["nodes"][1]["subflow"] == old_pin.model_dump()  # a copy

    # Subflow > Save to Library…: the dialog proposes 1.0.1.
    def fill() -> None:
        dialog = w.subflow_actions.dialog
        if dialog is None or not dialog.isVisible():
            QTimer.singleShot(10, fill)
            return
        assert dialog.version_edit.text() == "1.0.1"
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()

    QTimer.singleShot(0, fill)
    assert w.tabs.save_button.isEnabled()  # the same, at the breadcrumb's right
    w.subflow_actions.update_actions()  # as the menu does when it opens
    assert w.subflow_actions.save_action.isEnabled()
    w.subflow_actions.save_action.trigger()
    lib = flow_file.parent / "subflows"
    saved = read_library_file(lib / "greet.subflow.json")
    assert saved.version == "1.0.1"
    assert read_library_file(lib / "greet@1.0.0.subflow.json").version == "1.0.0"
    new_pin = SubflowPin(version="1.0.1", hash=saved.content_hash())
    assert new_pin.hash != old_pin.hash
    assert [doc.node(n).subflow for n in ("hello", "hi")] == [old_pin, old_pin]  # until Update

    # Back on the flow's tab, the instance offers Update all (both pin 1.0.0).
    w.tabs.bar.setCurrentIndex(0)
    assert w.tabs.current() is None
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=center(w.view, w.scene, "hi"))
    assert w.properties.node_id == "hi"
    assert w.scene.item_for_node("hi").newer_badge_text() == "v1.0.1 available"
    section = w.properties.form.subflow_section
    assert section.update_all_button.isVisible()
    assert section.update_all_button.text() == "Update all instances in this flow (2)"
    steps = doc.undo_stack.count()
    QTest.mouseClick(section.update_all_button, Qt.MouseButton.LeftButton)
    assert [doc.node(n).subflow for n in ("hello", "hi")] == [new_pin, new_pin]
    assert doc.undo_stack.count() == steps + 1  # one step for both

    # One undo puts both old pins back; redo both new ones.
    w.undo_action.trigger()
    assert [doc.node(n).subflow for n in ("hello", "hi")] == [old_pin, old_pin]
    assert w.scene.item_for_node("hello").newer_badge_text() == "v1.0.1 available"
    w.redo_action.trigger()
    assert [doc.node(n).subflow for n in ("hello", "hi")] == [new_pin, new_pin]
    assert w.scene.item_for_node("hello").newer_badge_text() == ""

    # The designer's run of the updated flow runs the new version in both.
    assert run_texts(qtbot, w) == {"d_hello": "Hello, Ada! (v2)", "d_hi": "Hi, Ada! (v2)"}
    # Saved, the flow file keeps the new pins (a run tomorrow is this run).
    w.save()
    kept = Flow.model_validate_json(flow_file.read_text())
    assert [kept.node(n).subflow for n in ("hello", "hi")] == [new_pin, new_pin]

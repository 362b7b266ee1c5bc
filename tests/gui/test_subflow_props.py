"""Subflow > Subflow Properties… (#25, docs/subflows.md "Declaring params"),
with real widgets on the example order-subflows.flow.json: a param added
in the dialog is the definition's and an instance's Properties shows it
(AI where allowed); one undo restores the definition exactly; a bad name
is said in the dialog and changes nothing; a secret's AI box is disabled
and its default is an environment variable's name; a renamed param
carries the instances' settings over; a library copy is edited as a copy."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QDialogButtonBox

from designer.model.document import FlowDocument
from designer.window.subflow_props import SubflowPropsDialog, parse_default
from runtime.flow import Flow, load_flow
from runtime.flow.subflows import find_library, save_to_library
from runtime.registry import Registry
from runtime.spec import Scope
from tests.gui.editor_fixtures import *  # noqa: F401,F403 - the make_window fixture
from tests.gui.subflow_fixtures import registry  # noqa: F401 - the fixture

EXAMPLE = Path(__file__).resolve().parents[2] / "resources" / "examples" / \
    "order-subflows.flow.json"


def open_example(make_window, path: Path = EXAMPLE):
    return make_window(FlowDocument(load_flow(path), Registry.default(), path))


def run_dialog(window, fill, *, ok: bool = True) -> dict:
    """Trigger Subflow Properties…; when its dialog shows, ``fill(dialog)``
    then OK (or Cancel). A dialog still open after OK (a refusal) is
    recorded, then cancelled. Returns what happened."""
    seen: dict = {}

    def go():
        dialog = window.subflow_actions.dialog
        if dialog is None or not dialog.isVisible():
            QTimer.singleShot(10, go)
            return
        try:
            fill(dialog)
        except BaseException as exc:  # a failed check: close, then fail the test
            seen["raised"] = exc
            dialog.reject()
            return
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok if ok
                              else QDialogButtonBox.StandardButton.Cancel).click()
        if dialog.isVisible():
            seen["error"] = dialog.error.text() if dialog.error.isVisible() else ""
            dialog.reject()

    QTimer.singleShot(0, go)
    window.subflow_actions.update_actions()
    assert window.subflow_actions.props_action.isEnabled()
    window.subflow_actions.props_action.trigger()
    if "raised" in seen:
        raise seen.pop("raised")
    return seen


def test_add_an_int_param_instances_show_it_and_one_undo_restores(make_window):
    w = open_example(make_window)
    w.subflow_actions.update_actions()
    assert not w.subflow_actions.props_action.isEnabled()  # the flow's tab: no definition
    defn = w.document.flow.subflow("shipping")
    tab = w.tabs.open_definition(defn)
    assert w.tabs.props_button.isVisible()
    before = defn.to_json()

    def fill(d: SubflowPropsDialog):
        assert [r.name.text() for r in d.rows] == ["carrier", "days"]
        row = d.add_row(None)
        row.name.setText("retries")
        row.label.setText("Retries")
        row.type.setCurrentText("int")
        row.default.setText("3")
        row.ai.setChecked(True)

    assert run_dialog(w, fill) == {}
    p = defn.param("retries")
    assert p is not None and p.type.value == "int" and p.default == 3 and p.ai_allowed
    assert [q.name for q in defn.params] == ["carrier", "days", "retries"]
    # An instance's Properties shows it, with the AI switch enabled.
    w.tabs.bar.setCurrentIndex(0)
    w.select_node("ship_express")
    form = w.properties.form
    assert form is not None and "retries" in form.rows
    assert form.rows["retries"].switch.buttons[Scope.AI].isEnabled()
    # One undo restores the definition exactly.
    w.tabs.bar.setCurrentIndex(1)
    assert w.tabs.current() is tab
    w.undo_action.trigger()
    assert defn.to_json() == before
    w.tabs.bar.setCurrentIndex(0)
    w.select_node("ship_express")
    assert "retries" not in w.properties.form.rows


def test_a_bad_name_is_said_in_the_dialog_and_changes_nothing(make_window):
    w = open_example(make_window)
    defn = w.document.flow.subflow("shipping")
    tab = w.tabs.open_definition(defn)
    before = defn.to_json()

    def fill(d):
        d.add_row(None).name.setText("1x")

    seen = run_dialog(w, fill)
    assert "Param 3 '1x'" in seen["error"] and "name" in seen["error"]
    assert "Traceback" not in seen["error"]
    assert defn.to_json() == before and tab.doc.undo_stack.count() == 0


def test_a_secret_has_no_ai_and_its_default_names_an_env_var(make_window):
    w = open_example(make_window)
    defn = w.document.flow.subflow("shipping")
    w.tabs.open_definition(defn)

    def fill(d):
        row = d.add_row(None)
        row.name.setText("api_key")
        row.ai.setChecked(True)
        row.type.setCurrentText("secret")
        assert not row.ai.isEnabled() and not row.ai.isChecked()
        row.default.setText("SHIP_API_KEY")

    assert run_dialog(w, fill) == {}
    p = defn.param("api_key")
    assert p.secret and not p.ai_allowed and p.default == {"env": "SHIP_API_KEY"}

    def leak(d):
        row = [r for r in d.rows if r.name.text() == "api_key"][0]
        row.default.setText("sk-live 123")  # the secret itself: refused

    seen = run_dialog(w, leak)
    assert "never the secret itself" in seen["error"]
    assert defn.param("api_key").default == {"env": "SHIP_API_KEY"}


def test_renaming_carries_settings_and_the_header_changes(make_window):
    w = open_example(make_window)
    defn = w.document.flow.subflow("shipping")
    w.tabs.open_definition(defn)

    def fill(d):
        d.rows[0].name.setText("courier")
        d.label_edit.setText("Ship it")
        d.result_box.setCurrentIndex(1)
        d.table.setCurrentCell(1, 0)
        d.move_row(1, -1)  # days first, then the renamed carrier: removed
        d.remove_row(1)

    run_dialog(w, fill)
    assert [p.name for p in defn.params] == ["days"]
    assert defn.label == "Ship it" and defn.result == "list"
    node = w.document.node("ship_express")
    assert set(node.params) == {"days"}  # the removed param's setting went
    w.undo_action.trigger()

    def rename(d):
        d.rows[0].name.setText("courier")

    run_dialog(w, rename)
    assert [p.name for p in defn.params] == ["courier", "days"]
    node = w.document.node("ship_express")
    assert node.params["courier"].value == "courier" and "carrier" not in node.params


def test_a_library_copy_is_edited_as_a_copy(make_window, tmp_path):
    defn = load_flow(EXAMPLE).subflow("shipping")
    lib = tmp_path / "subflows"
    lib.mkdir()
    save_to_library(defn.model_copy(update={"version": "1.0.0"}), lib)
    path = tmp_path / "uses.flow.json"
    w = make_window(FlowDocument(Flow(name="Uses"), Registry.default(), path))
    entry = find_library("shipping", str(path))
    assert entry is not None
    tab = w.tabs.open_library(entry)

    def fill(d):
        d.label_edit.setText("Shipping (edited)")

    run_dialog(w, fill)
    assert tab.definition.label == "Shipping (edited)"
    assert entry.definition.label != "Shipping (edited)"  # the file's is untouched
    assert w.tabs.save_button.isEnabled()  # Save to Library now has something to write
    w.undo_action.trigger()
    assert tab.definition.label == entry.definition.label


def test_parse_default_per_type():
    assert parse_default("int", " 3 ") == 3 and parse_default("float", "1.5") == 1.5
    assert parse_default("bool", "yes") is True and parse_default("json", '{"a": [1]}') == {
        "a": [1]}
    assert parse_default("str", "") is None and parse_default("secret", "KEY") == {"env": "KEY"}
    for kind, text in (("int", "x"), ("json", "{"), ("bool", "maybe"), ("secret", "a b")):
        try:
            parse_default(kind, text)
        except ValueError:
            continue
        raise AssertionError((kind, text))

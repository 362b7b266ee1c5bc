"""Approval and limits of a tool node, through real widgets: every edit is
one command on the undo stack that changes the flow's ``tool`` object, undo
shows in the widgets, a rule that is not one is never applied, and what is
set survives a save and a load."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from designer.model.commands import SetToolSettings
from designer.model.document import FlowDocument
from designer.panels.tool_settings import (
    ToolSettingsSection,
    default_text,
    policy_line,
    rule_from_fields,
)
from runtime.approval import ApprovalPolicy, Rule
from runtime.flow import ToolOverride, load_flow, parse_flow, save_flow
from runtime.registry import Registry

from .properties_fixtures import real_email_flow

REG = Registry.default()


@pytest.fixture
def doc():
    flow = real_email_flow(REG)
    if flow is None:
        pytest.skip("ai.agent and mail.send are not installed")
    return FlowDocument(flow, REG)


@pytest.fixture
def section(qtbot, doc):
    s = ToolSettingsSection(doc, "mail", None, opened=True)
    doc.node_changed.connect(lambda nid: s.sync() if nid == "mail" else None)
    qtbot.addWidget(s)
    s.resize(340, 700)
    s.show()
    return s


def tool(doc) -> ToolOverride | None:
    return doc.node("mail").tool


def pick(combo, key):
    index = combo.findData(key)
    assert index >= 0, key
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_default_says_what_it_is_for_this_tool(doc, section):
    # send_email looks sensitive: by default every call asks.
    assert section.mode.currentData() == "default"
    assert section.mode.currentText() == "Default (asks: looks sensitive (send))"
    assert section.policy_text.text().startswith("Default: asks for every call")
    assert "waits 5 min" in section.policy_text.text()
    # The closed header says it in a few words (the whole line is its tooltip).
    assert section.summary.text() == "default: asks"
    assert section.summary.toolTip() == section.policy_text.text()
    assert tool(doc) is None  # showing is not editing
    # A harmless tool name makes the default "never"; the node type still
    # decides for a mail node (mail.send), so use the agent-as-tool rule too.
    agent = doc.spec("agent")
    assert default_text(agent, doc.node("agent")) == "never"


def test_each_mode_is_one_undoable_edit_of_the_tool_object(doc, section):
    stack = doc.undo_stack
    pick(section.mode, "never")
    assert tool(doc).approval.mode == "never"
    assert stack.count() == 1 and stack.undoText() == "Approval: never ask"
    assert section.policy_text.text() == "Never asks"
    assert not section.wait_field.isVisibleTo(section)  # nothing waits: no wait to set
    pick(section.mode, "always")
    assert tool(doc).approval.mode == "always"
    stack.undo()
    assert tool(doc).approval.mode == "never"
    assert section.mode.currentData() == "never"  # undo shows in the widget
    stack.undo()
    assert tool(doc) is None and section.mode.currentData() == "default"
    stack.redo()
    stack.redo()
    pick(section.mode, "default")
    assert tool(doc) is None  # back to the default: no tool object at all


def test_a_rule_for_outside_recipients(doc, section):
    pick(section.mode, "rules")
    assert section.rules_box.isVisibleTo(section)
    section.add_rule_button.click()
    [row] = section.rule_rows
    row.arg.setCurrentText("to")
    row.arg.activated.emit(0)
    pick(row.op, "not_endswith")
    row.value.setText("@ourcompany.com")
    row.value.editingFinished.emit()
    policy = tool(doc).approval
    assert policy.mode == "rules"
    assert policy.rules == [Rule(arg="to", op="not_endswith", value="@ourcompany.com")]
    assert section.policy_text.text().startswith('Asks when to does not end with "@ourcompany.com"')
    # Each step was its own command; undo walks back through them.
    n = doc.undo_stack.count()
    # "does not end with" and no value yet was not a rule: op and value
    # went in together, as one step.
    assert row.error.text() == ""
    doc.undo_stack.undo()
    assert tool(doc).approval.rules == [Rule(arg="to", op="present")]
    assert section.rule_rows[0].op.currentData() == "present"
    assert section.rule_rows[0].value.text() == ""
    doc.undo_stack.redo()
    assert doc.undo_stack.count() == n
    assert section.rule_rows[0].value.text() == "@ourcompany.com"


def test_a_rule_that_is_not_one_is_not_applied_and_says_why(doc, section):
    pick(section.mode, "rules")
    section.add_rule_button.click()
    row = section.rule_rows[0]
    pick(row.op, "gt")  # "amount > ..." with no number
    before = tool(doc).approval.model_copy(deep=True)
    row.value.setText("a lot")
    row.value.editingFinished.emit()
    assert tool(doc).approval == before
    assert row.error.isVisibleTo(section)
    assert "compares numbers" in row.error.text() and "not applied" in row.error.text()
    assert row.value.property("invalid") is True
    row.value.setText("100")
    row.value.editingFinished.emit()
    assert tool(doc).approval.rules[0] == Rule(arg="to", op="gt", value=100)
    assert not row.error.isVisibleTo(section)
    pick(row.op, "matches")
    row.value.setText("([a-z")
    row.value.editingFinished.emit()
    assert "not a regular expression" in row.error.text()
    assert tool(doc).approval.rules[0].op == "matches"  # the op change itself applied
    assert tool(doc).approval.rules[0].value == "100"  # the text as it stood


def test_rules_from_fields():
    assert rule_from_fields("amount", "ge", "99.5") == Rule(arg="amount", op="ge", value=99.5)
    assert rule_from_fields("to", "in", "a@x.com, b@x.com") == Rule(
        arg="to", op="in", value=["a@x.com", "b@x.com"])
    assert rule_from_fields("cc", "present", "ignored") == Rule(arg="cc", op="present")
    for arg, op, text in (("", "equals", "x"), ("to", "equals", " "), ("to", "in", ","),
                          ("n", "lt", "ten"), ("to", "matches", "(")):
        with pytest.raises(ValueError):
            rule_from_fields(arg, op, text)


def test_remove_a_rule_keeps_the_others_in_order(doc, section):
    policy = ApprovalPolicy(mode="rules", rules=[
        Rule(arg="to", op="endswith", value="@a.com"), Rule(arg="to", op="endswith", value="@b.com"),
        Rule(arg="to", op="endswith", value="@c.com")])
    doc.undo_stack.push(SetToolSettings(doc, "mail", "set", approval=policy))
    assert [r.value.text() for r in section.rule_rows] == ["@a.com", "@b.com", "@c.com"]
    section.rule_rows[1].remove.click()
    assert [r.value for r in tool(doc).approval.rules] == ["@a.com", "@c.com"]
    assert [r.value.text() for r in section.rule_rows] == ["@a.com", "@c.com"]
    doc.undo_stack.undo()
    assert [r.value.text() for r in section.rule_rows] == ["@a.com", "@b.com", "@c.com"]


def test_confirm_checkboxes_are_the_ai_arguments(doc, section):
    # In this flow the AI fills to and subject (body comes from the message).
    assert list(section.confirm_checks) == ["to", "subject"]
    section.confirm_checks["subject"].click()
    # Default made explicit, so that it can carry the confirmation.
    policy = tool(doc).approval
    assert (policy.mode, policy.confirm) == ("always", ["subject"])
    pick(section.mode, "never")
    assert tool(doc).approval.confirm == ["subject"]
    assert section.policy_text.text().startswith("Never asks · a person confirms subject · waits")
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert tool(doc) is None and not section.confirm_checks["subject"].isChecked()


def test_wait_and_limits(qtbot, doc, section):
    pick(section.mode, "always")
    section.wait.setFocus()
    section.wait.selectAll()
    qtbot.keyClicks(section.wait, "900")
    assert tool(doc).approval.timeout_seconds == 900
    assert section.wait_note.text() == "15 min"
    # Typing is one step, whatever the keystrokes.
    assert doc.undo_stack.undoText() == "Change the wait for approval"
    doc.undo_stack.undo()
    assert tool(doc).approval.timeout_seconds == 300
    section.per_run.setValue(3)
    section.per_turn.setValue(1)
    assert (tool(doc).max_calls_per_run, tool(doc).max_calls_per_turn) == (3, 1)
    assert section.policy_text.text().endswith("at most 3 per run, 1 per answer")
    assert section.summary.text() == "asks always · limits"
    section.per_run.setValue(0)
    assert tool(doc).max_calls_per_run is None and section.per_run.text() == "no limit"
    doc.undo_stack.undo()
    assert section.per_run.value() == 3


def test_the_name_and_the_approval_live_side_by_side(doc, section):
    doc.undo_stack.push(SetToolSettings(doc, "mail", "name", name="send_customer_mail"))
    pick(section.mode, "never")
    doc.undo_stack.push(SetToolSettings(doc, "mail", "desc", description="Mail a customer"))
    t = tool(doc)
    assert (t.name, t.description, t.approval.mode) == ("send_customer_mail",
                                                        "Mail a customer", "never")
    with pytest.raises(ValidationError):  # a bad value never reaches the flow
        SetToolSettings(doc, "mail", "bad", max_calls_per_turn=0)
    with pytest.raises(TypeError):
        SetToolSettings(doc, "mail", "bad", approve="yes")


def test_settings_round_trip_through_the_file(tmp_path, doc, section):
    pick(section.mode, "rules")
    section.add_rule_button.click()
    row = section.rule_rows[0]
    row.arg.setCurrentText("to")
    pick(row.op, "not_endswith")
    row.value.setText("@ourcompany.com")
    row.value.editingFinished.emit()
    section.confirm_checks["subject"].click()
    section.per_turn.setValue(2)
    path = tmp_path / "mail.flow.json"
    save_flow(doc.flow, path)
    saved = json.loads(path.read_text())
    [mail] = [n for n in saved["nodes"] if n["id"] == "mail"]
    assert mail["tool"] == {"approval": {
        "mode": "rules", "rules": [{"arg": "to", "op": "not_endswith", "value": "@ourcompany.com"}],
        "confirm": ["subject"], "timeout_seconds": 300.0}, "max_calls_per_turn": 2}
    again = load_flow(path)
    assert again.node("mail").tool == doc.node("mail").tool
    # And a flow opened from the file shows the same in a fresh section.
    doc2 = FlowDocument(parse_flow(saved), REG)
    s2 = ToolSettingsSection(doc2, "mail", None)
    try:
        assert s2.mode.currentData() == "rules"
        assert s2.rule_rows[0].value.text() == "@ourcompany.com"
        assert s2.confirm_checks["subject"].isChecked()
        assert s2.per_turn.value() == 2
        assert s2.policy_text.text() == section.policy_text.text()
    finally:
        s2.deleteLater()


def test_policy_line_words():
    flow = real_email_flow(REG)
    if flow is None:
        pytest.skip("no mail.send")
    spec, fnode = REG.spec("mail.send"), flow.node("mail")
    assert policy_line(spec, fnode) == "Default: asks for every call: looks sensitive (send) · " \
                                       "waits 5 min"
    fnode.tool = ToolOverride(approval=ApprovalPolicy(mode="always", timeout_seconds=7200),
                              max_calls_per_run=5)
    assert policy_line(spec, fnode) == "Asks for every call · waits 2 h · at most 5 per run"
    fnode.tool = ToolOverride(approval=ApprovalPolicy(mode="rules", rules=[
        Rule(arg="to", op="endswith", value="@x.com"), Rule(arg="amount", op="gt", value=100)]))
    assert policy_line(spec, fnode).startswith("Asks when any of 2 rules matches")
    assert Qt  # keeps the Qt import honest for offscreen runs


# -- in the properties panel ------------------------------------------------------------

def test_the_panel_has_the_section_closed_and_the_previews_say_the_policy(qtbot, doc):
    from designer.panels import PropertiesPanel

    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(360, 860)
    panel.show()
    panel.set_node("mail")
    box = panel.form.tool_settings
    assert box.isVisibleTo(panel) and not box.is_open()  # compact: closed like advanced ones
    assert box.policy_text.text().startswith("Default: asks for every call")
    pick(box.mode, "never")
    assert "Approval: Never asks" in panel.form.tool_summary.text()
    # Renaming the tool keeps the approval it has (one object, two editors).
    panel.form.tool_name_edit.setText("send_customer_mail")
    panel.form.tool_name_edit.editingFinished.emit()
    assert (tool(doc).name, tool(doc).approval.mode) == ("send_customer_mail", "never")
    doc.undo_stack.undo()
    assert tool(doc).name is None and tool(doc).approval.mode == "never"
    # The agent's tool cards carry the same line.
    panel.set_node("agent")
    [card_line] = [w.text() for w in panel.form.cards_box.findChildren(QLabel)
                   if w.objectName() == "toolPolicy"]
    assert card_line == "Never asks"
    # A top-level agent is nobody's tool: no approval section for it.
    assert not panel.form.tool_settings.isVisibleTo(panel)


def test_run_in_the_background_is_one_undoable_switch(qtbot, doc, section):
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest

    box = section.background
    assert not box.isChecked()  # Send Mail's author did not make it a background tool
    QTest.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))
    assert box.isChecked() and tool(doc).background is True
    assert doc.undo_stack.undoText() == "Run in the background"
    doc.undo_stack.undo()
    assert not box.isChecked() and (tool(doc) is None or tool(doc).background is None)

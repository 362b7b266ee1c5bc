"""The properties panel, through real widgets: every edit must land in the
flow as a command on the undo stack, and undo must show up in the editors."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from designer.model.commands import AddWire, RemoveItems, SetParam
from designer.model.document import FlowDocument
from designer.panels import PropertiesPanel
from runtime.flow import Flow, FlowNode, Wire, check_param_value
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope

from .properties_fixtures import fake_flow, fake_registry, real_email_flow


@pytest.fixture
def doc():
    return FlowDocument(fake_flow(), fake_registry())


@pytest.fixture
def panel(qtbot, doc):
    p = PropertiesPanel(doc)
    qtbot.addWidget(p)
    p.resize(380, 860)
    p.show()
    return p


def params(doc, node_id):
    return doc.node(node_id).params


def agent_args(panel, index=0):
    return set(panel.form.functions[index]["function"]["parameters"]["properties"])


def type_into(qtbot, edit, text):
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)


# -- every node type ------------------------------------------------------------------

@pytest.mark.parametrize("spec", Registry.default().specs(), ids=lambda s: s.type)
def test_form_opens_for_every_builtin_node_type(qtbot, spec):
    registry = Registry.default()
    doc = FlowDocument(Flow(nodes=[FlowNode(id="n", type=spec.type)]), registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("n")
    assert panel.form is not None and panel.stack.currentIndex() == 2
    # A node that offers several tools (an MCP server) edits its tools param
    # in a section of its own, which replaces the one-tool section.
    several = hasattr(registry.get(spec.type), "tool_entries")
    rows = [p for p in spec.params if not (several and p.name == "tools")]
    assert list(panel.form.rows) == [p.name for p in rows]
    # Only the scopes the author allowed can be picked.
    for p in rows:
        row = panel.form.rows[p.name]
        for scope, button in row.switch.buttons.items():
            assert button.isEnabled() == p.allows(scope)
    assert (panel.form.preview_box is not None) == spec.has_tools_port
    assert (panel.form.tool_box is not None) == (spec.tool is not None and not several)
    assert (panel.form.mcp_tools is not None) == several


def test_empty_and_multiple_selection(panel, doc):
    assert panel.stack.currentIndex() == 0
    panel.set_nodes(["agent", "mail"])
    assert panel.stack.currentIndex() == 1 and panel.form is None
    texts = [w.text() for w in panel.summary_page.findChildren(QLabel)]
    assert any("2 nodes selected" in t for t in texts)
    panel.set_node(None)
    assert panel.stack.currentIndex() == 0


# -- values --------------------------------------------------------------------------

def test_typing_pushes_one_merged_setparam_and_undo_shows_old_value(qtbot, panel, doc):
    panel.set_node("mail")
    form = panel.form
    edit = form.rows["smtp_host"].value_editor.edit
    before = doc.undo_stack.count()
    type_into(qtbot, edit, "smtp.example.com")
    assert params(doc, "mail")["smtp_host"].value == "smtp.example.com"
    assert doc.undo_stack.count() == before + 1  # typing merges into one step
    assert panel.form is form  # not rebuilt while typing
    assert edit.hasFocus() and edit.cursorPosition() == len("smtp.example.com")
    doc.undo_stack.undo()
    assert params(doc, "mail")["smtp_host"].value == "127.0.0.1"
    assert edit.text() == "127.0.0.1"
    doc.undo_stack.redo()
    assert edit.text() == "smtp.example.com"


def test_clearing_a_value_falls_back_to_the_default_placeholder(qtbot, panel, doc):
    panel.set_node("mail")
    edit = panel.form.rows["smtp_host"].value_editor.edit
    assert edit.placeholderText() == "localhost"
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Delete)
    assert "smtp_host" not in params(doc, "mail")  # the spec default applies
    assert edit.text() == ""


def test_number_editor_applies_numbers_only(qtbot, panel, doc):
    panel.set_node("mail")
    editor = panel.form.rows["smtp_port"].value_editor
    type_into(qtbot, editor.edit, "2525")
    assert params(doc, "mail")["smtp_port"] == ParamValue(scope=Scope.CUSTOM, value=2525)
    qtbot.keyClicks(editor.edit, "x")
    assert params(doc, "mail")["smtp_port"].value == 2525
    assert editor.error.isVisibleTo(panel)
    timeout = panel.form.rows["timeout"].value_editor
    type_into(qtbot, timeout.edit, "2.5")
    assert params(doc, "mail")["timeout"].value == 2.5


def test_checkbox_and_enum(qtbot, panel, doc):
    panel.set_node("mail")
    box = panel.form.rows["starttls"].value_editor.box
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert params(doc, "mail")["starttls"].value is True
    combo = panel.form.rows["priority"].value_editor.combo
    i = combo.findData("high")
    combo.setCurrentIndex(i)
    combo.activated.emit(i)
    assert params(doc, "mail")["priority"].value == "high"
    doc.undo_stack.undo()
    assert combo.currentData() == "normal"


def test_multiline_text(qtbot, panel, doc):
    panel.set_node("agent")
    edit = panel.form.rows["instructions"].value_editor.edit
    edit.setFocus()
    qtbot.keyClicks(edit, "Be brief.")
    assert params(doc, "agent")["instructions"].value == "Be brief."
    doc.undo_stack.undo()
    assert edit.toPlainText() == ""


# -- scopes -------------------------------------------------------------------------------

def test_scope_toggle_changes_flow_and_agent_preview(qtbot, panel, doc):
    panel.set_node("agent")
    assert agent_args(panel) == {"to", "subject"}
    panel.set_node("mail")
    row = panel.form.rows["to"]
    assert row.ai_box.isVisibleTo(panel) and not row.value_editor.isVisibleTo(panel)
    before = doc.undo_stack.count()
    qtbot.mouseClick(row.switch.buttons[Scope.CUSTOM], Qt.MouseButton.LeftButton)
    assert params(doc, "mail")["to"].scope is Scope.CUSTOM
    assert row.value_editor.isVisibleTo(panel) and not row.ai_box.isVisibleTo(panel)
    assert doc.undo_stack.count() == before + 1
    type_into(qtbot, row.value_editor.edit, "ops@example.com")
    qtbot.mouseClick(row.switch.buttons[Scope.MESSAGE], Qt.MouseButton.LeftButton)
    assert params(doc, "mail")["to"] == ParamValue(scope=Scope.MESSAGE, path="to")
    assert doc.undo_stack.count() == before + 3  # scope, value, scope: three steps
    panel.set_node("agent")
    assert agent_args(panel) == {"subject"}
    doc.undo_stack.undo()  # back to custom, with the typed value
    assert params(doc, "mail")["to"] == ParamValue(scope=Scope.CUSTOM, value="ops@example.com")
    assert agent_args(panel) == {"subject"}
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert params(doc, "mail")["to"].scope is Scope.AI
    assert agent_args(panel) == {"to", "subject"}


def test_preview_follows_edits_made_elsewhere_and_tool_wires(qtbot, panel, doc):
    panel.set_node("agent")
    form = panel.form
    doc.undo_stack.push(SetParam(doc, "mail", "priority", ParamValue(scope=Scope.AI),
                                 merge=False))
    assert agent_args(panel) == {"to", "subject", "priority"}
    assert "priority" in form.preview_text.toPlainText()
    wire_index = next(i for i, w in enumerate(doc.flow.wires) if w.source == ("agent", "tools"))
    doc.undo_stack.push(RemoveItems(doc, [], [wire_index]))
    assert form.functions == [] and "No tools yet" in form.preview_summary.text()
    doc.undo_stack.undo()
    assert [f["function"]["name"] for f in form.functions] == ["send_email"]
    assert panel.form is form


def test_ai_description_reaches_the_schema(qtbot, panel, doc):
    panel.set_node("mail")
    row = panel.form.rows["to"]
    assert row.ai_desc.placeholderText() == "Recipient address"
    type_into(qtbot, row.ai_desc, "Who gets the mail")
    assert params(doc, "mail")["to"] == ParamValue(scope=Scope.AI, description="Who gets the mail")
    props = panel.form._tool_text
    assert "Who gets the mail" in props


def test_param_without_ai_offers_no_ai_scope(panel):
    panel.set_node("mail")
    for name in ("smtp_host", "timeout", "password"):
        button = panel.form.rows[name].switch.buttons[Scope.AI]
        assert not button.isEnabled()
        assert "did not allow AI" in button.toolTip() or "neither the AI" in button.toolTip()
    assert panel.form.rows["timeout"].switch.buttons[Scope.MESSAGE].isEnabled() is False


def test_single_scope_params_of_plain_nodes_have_no_switch(panel):
    panel.set_node("rules")
    assert not panel.form.rows["rules"].switch.isVisibleTo(panel)


# -- secrets -------------------------------------------------------------------------------

def test_secret_editor_stores_only_references(qtbot, panel, doc):
    panel.set_node("mail")
    editor = panel.form.rows["password"].value_editor
    assert all(e.echoMode() == e.EchoMode.Normal for e in (editor.env, editor.service))
    type_into(qtbot, editor.env, "SMTP_PASSWORD")
    assert "password" not in params(doc, "mail")  # applied when editing finishes
    qtbot.keyClick(editor.env, Qt.Key.Key_Return)
    assert params(doc, "mail")["password"].value == {"env": "SMTP_PASSWORD"}
    # The secret typed into the name field by mistake: refused whole, and no
    # prefix of it was stored on the way.
    type_into(qtbot, editor.env, "hunter2 is my password!")
    qtbot.keyClick(editor.env, Qt.Key.Key_Return)
    assert params(doc, "mail")["password"].value == {"env": "SMTP_PASSWORD"}
    assert "Not applied" in editor.status.text()
    editor.kind.setCurrentIndex(1)
    editor.kind.activated.emit(1)
    type_into(qtbot, editor.service, "switchboard-smtp")
    qtbot.keyClick(editor.service, Qt.Key.Key_Tab)
    type_into(qtbot, editor.username, "mailer")
    qtbot.keyClick(editor.username, Qt.Key.Key_Return)
    value = params(doc, "mail")["password"].value
    assert value == {"keyring": "switchboard-smtp", "username": "mailer"}
    spec = doc.spec("mail").param("password")
    seen = []
    for i in range(doc.undo_stack.count()):
        c = doc.undo_stack.command(i)
        if isinstance(c, SetParam) and c.name == "password" and c.new is not None:
            seen.append(c.new.value)
            assert check_param_value(spec, c.new.value) is None  # never a literal
    assert not any("hunter2" in str(v) for v in seen)
    doc.undo_stack.undo()
    assert params(doc, "mail")["password"].value == {"keyring": "switchboard-smtp",
                                                     "username": ""}
    assert editor.kind.currentData() == "keyring" and editor.username.text() == ""
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert params(doc, "mail")["password"].value == {"env": "SMTP_PASSWORD"}
    assert editor.kind.currentData() == "env" and editor.env.text() == "SMTP_PASSWORD"


# -- JSON ---------------------------------------------------------------------------------

def test_invalid_json_is_not_applied_and_shows_where(qtbot, panel, doc):
    panel.set_node("rules")
    editor = panel.form.rows["rules"].value_editor.editor
    editor.text_edit.setFocus()
    qtbot.keyClicks(editor.text_edit, '[{"op": "eq", "value": 3}')
    assert "rules" not in params(doc, "rules")
    assert "Not applied" in editor.status.text() and "Line 1, column" in editor.status.text()
    qtbot.keyClicks(editor.text_edit, "]")
    assert params(doc, "rules")["rules"].value == [{"op": "eq", "value": 3}]
    assert editor.status.text() == "Valid JSON"
    doc.undo_stack.undo()
    assert "rules" not in params(doc, "rules") and editor.text_edit.toPlainText() == ""


def test_problems_show_inline_and_at_the_top(qtbot, panel, doc):
    panel.set_node("rules")
    editor = panel.form.rows["rules"].value_editor.editor
    editor.text_edit.setFocus()
    qtbot.keyClicks(editor.text_edit, '{"a": 1}')
    doc.revalidate()
    row = panel.form.rows["rules"]
    assert row.problem.isVisibleTo(panel) and "must be a list" in row.problem.text()
    assert panel.form.problem_banner.isVisibleTo(panel)
    doc.undo_stack.undo()
    doc.revalidate()
    assert not row.problem.isVisibleTo(panel)


# -- node fields ----------------------------------------------------------------------------

def test_rename(qtbot, panel, doc):
    panel.set_node("mail")
    edit = panel.form.name_edit
    type_into(qtbot, edit, "Notify ops")
    assert doc.node("mail").name is None  # applied when editing finishes
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert doc.node("mail").name == "Notify ops"
    assert panel.form.title.text() == "Notify ops"
    doc.undo_stack.undo()
    assert doc.node("mail").name is None and edit.text() == ""


def test_tool_name_override_and_wired_note(qtbot, panel, doc):
    panel.set_node("mail")
    form = panel.form
    assert "Test Agent" in form.wired_label.text()
    type_into(qtbot, form.tool_name_edit, "bad name")
    qtbot.keyClick(form.tool_name_edit, Qt.Key.Key_Return)
    assert doc.node("mail").tool is None and form.tool_problem.isVisibleTo(panel)
    type_into(qtbot, form.tool_name_edit, "notify_ops")
    qtbot.keyClick(form.tool_name_edit, Qt.Key.Key_Return)
    assert doc.node("mail").tool.name == "notify_ops"
    panel.set_node("agent")
    assert [f["function"]["name"] for f in panel.form.functions] == ["notify_ops"]
    doc.undo_stack.undo()
    assert [f["function"]["name"] for f in panel.form.functions] == ["send_email"]


def test_selected_node_removed_and_flow_reset(panel, doc):
    panel.set_node("mail")
    doc.undo_stack.push(RemoveItems(doc, ["mail"]))
    assert panel.form is None and panel.stack.currentIndex() == 0
    doc.undo_stack.undo()
    panel.set_node("agent")
    doc.reset(fake_flow())
    assert panel.form is not None and panel.node_id == "agent"
    doc.reset(Flow())
    assert panel.form is None


def test_undo_after_switching_nodes(qtbot, panel, doc):
    panel.set_node("mail")
    qtbot.mouseClick(panel.form.rows["subject"].switch.buttons[Scope.CUSTOM],
                     Qt.MouseButton.LeftButton)
    panel.set_node("rules")
    doc.undo_stack.undo()
    panel.set_node("mail")
    assert panel.form.rows["subject"].switch.scope() is Scope.AI
    assert panel.form.rows["subject"].ai_desc.text() == "A short subject line"


# -- the real nodes ---------------------------------------------------------------------------

def test_real_email_assistant_scopes(qtbot):
    registry = Registry.default()
    flow = real_email_flow(registry)
    if flow is None:
        pytest.skip("ai.agent and mail.send are not installed")
    doc = FlowDocument(flow, registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_node("agent")
    assert {"to", "subject"} <= agent_args(panel)
    assert "smtp_host" not in agent_args(panel) and "password" not in agent_args(panel)
    panel.set_node("mail")
    assert not panel.form.rows["password"].switch.buttons[Scope.AI].isEnabled()
    qtbot.mouseClick(panel.form.rows["subject"].switch.buttons[Scope.CUSTOM],
                     Qt.MouseButton.LeftButton)
    panel.set_node("agent")
    assert "subject" not in agent_args(panel)
    doc.undo_stack.undo()
    assert "subject" in agent_args(panel)
    doc.undo_stack.push(AddWire(doc, Wire.model_validate(
        {"from": ["agent", "tools"], "to": ["show", "in"]})))  # refused by validation only
    assert len(panel.form.functions) == 1  # a debug node declares no tool


def test_a_hand_edited_disallowed_scope_is_shown_inline_and_fixable(qtbot, doc):
    doc.node("mail").params["smtp_host"] = ParamValue(scope=Scope.AI)  # as if from a file
    doc.revalidate()
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_node("mail")
    row = panel.form.rows["smtp_host"]
    assert row.problem.isVisibleTo(panel) and "not allowed" in row.problem.text()
    assert "SMTP host" in panel.form.problem_banner.findChildren(QLabel)[0].text()
    qtbot.mouseClick(row.switch.buttons[Scope.CUSTOM], Qt.MouseButton.LeftButton)
    doc.revalidate()
    # No value typed yet: the param goes back to its spec default (custom).
    assert "smtp_host" not in params(doc, "mail")
    assert row.value_editor.isVisibleTo(panel) and not row.problem.isVisibleTo(panel)


def test_preview_is_exactly_what_switchboard_tools_prints(qtbot, panel, doc):
    from runtime.tools import agent_tool_specs

    panel.set_node("agent")
    assert panel.form.functions == agent_tool_specs(doc.flow, doc.registry)["agent"]
    doc.undo_stack.push(SetParam(doc, "mail", "subject", ParamValue(scope=Scope.CUSTOM,
                                                                     value="Hi"), merge=False))
    assert panel.form.functions == agent_tool_specs(doc.flow, doc.registry)["agent"]


def test_output_path_override_is_one_undo_step(qtbot):
    registry = Registry.default()
    flow = real_email_flow(registry)
    if flow is None:
        pytest.skip("mail.send is not installed")
    doc = FlowDocument(flow, registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_node("mail")
    edit = panel.form.output_edits["message_id"]
    assert edit.placeholderText() == doc.spec("mail").output("message_id").path
    edit.setText("msg.result.id")
    edit.editingFinished.emit()
    assert doc.node("mail").outputs == {"message_id": "result.id"}
    edit.setText("bad..path")
    edit.editingFinished.emit()
    assert doc.node("mail").outputs == {"message_id": "result.id"}  # not applied
    assert edit.property("invalid") is True
    doc.undo_stack.undo()
    assert doc.node("mail").outputs == {}
    assert edit.text() == ""


def test_theme_flips_restyle_the_panel_once_and_do_not_recurse(qtbot, qapp, panel, doc):
    """Flipping the app palette at run time (View > Theme, or the system
    theme changing) used to re-style the panel forever and crash."""
    from designer.look import theme

    panel.set_node("mail")
    try:
        theme.apply(qapp, theme.DARK)
        qapp.processEvents()
        assert panel._dark is True
        theme.apply(qapp, theme.LIGHT)
        qapp.processEvents()
        assert panel._dark is False
    finally:
        theme.apply(qapp, theme.LIGHT)


@pytest.mark.parametrize("width", [300, 330, 380])
def test_a_param_whose_label_wraps_gets_the_height_it_needs(qtbot, width):
    # At some dock widths "Subject required" wraps to two lines; the row kept
    # its one-line height and squeezed the line edit under the label.
    flow = real_email_flow(Registry.default())
    if flow is None:
        pytest.skip("the email example is not available")
    doc = FlowDocument(flow, Registry.default())
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(width, 860)
    panel.show()
    panel.set_node("mail")
    qtbot.waitUntil(lambda: panel.form is not None and panel.form.isVisible())
    for _ in range(5):
        qtbot.wait(1)  # let the layout settle after the scroll bar shows
    for name, row in panel.form.rows.items():
        assert row.height() >= row.heightForWidth(row.width()), name
        editor = row.value_editor
        if editor.isVisible():
            assert editor.height() >= editor.minimumSizeHint().height(), name

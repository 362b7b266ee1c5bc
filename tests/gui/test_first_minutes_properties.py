"""Issue 12, items 3, 8 and 9, through the real properties panel: params in
collapsible sections, previews closed until asked for, the wheel scrolling
the panel rather than an inner box, human labels in undo texts and problems,
and params that the current choice makes meaningless hidden (live, with undo)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from designer.model.commands import SetParam
from designer.model.document import FlowDocument
from designer.panels import PropertiesPanel, form_rules
from runtime.flow import Flow, FlowNode
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope

from .editor_fixtures import make_window  # noqa: F401,F811 - a fixture (uses registry below)
from .properties_fixtures import fake_flow, fake_registry, real_email_flow


@pytest.fixture(autouse=True)
def _fresh_section_memory():
    """Open/closed is remembered for the session; each test starts afresh."""
    form_rules._open_sections.clear()
    yield
    form_rules._open_sections.clear()


@pytest.fixture
def registry():
    registry = Registry.default()
    if "ai.agent" not in registry or "mail.send" not in registry:
        pytest.skip("ai.agent and mail.send are not installed")
    return registry


@pytest.fixture
def doc(registry):
    flow = real_email_flow(registry)
    flow.nodes.append(FlowNode(id="mail2", type="mail.send", position=(560, 400)))
    return FlowDocument(flow, registry)


@pytest.fixture
def panel(qtbot, doc):
    p = PropertiesPanel(doc)
    qtbot.addWidget(p)
    p.resize(320, 700)
    p.show()
    return p


def shown(widget: QWidget, panel: QWidget) -> bool:
    return widget.isVisibleTo(panel)


def click(qtbot, widget: QWidget) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)
    QApplication.processEvents()  # lay out what the click showed, as the event loop would


def choose(combo, value) -> None:
    """Pick an item of a combo box as a user does: the popup's activated."""
    i = combo.findData(value)
    assert i >= 0, value
    combo.setCurrentIndex(i)
    combo.activated.emit(i)


def wheel(widget: QWidget, steps: int = -1) -> None:
    """One notch of the mouse wheel over ``widget`` (negative: scroll down)."""
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(0, 0),
                        QPoint(0, 120 * steps), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


# -- item 3: sections ---------------------------------------------------------------

def test_send_mail_shows_main_params_first_and_closed_connection_and_advanced(panel):
    panel.set_node("mail")
    form = panel.form
    assert list(form.sections) == ["connection", "advanced"]
    connection, advanced = form.sections["connection"], form.sections["advanced"]
    for box in (connection, advanced):
        assert shown(box.header, panel) and not shown(box.body, panel)
    # Main params are in view; the SMTP server and limits wait behind a click.
    for name in ("to", "subject", "body", "delivery"):
        assert shown(form.rows[name], panel), name
    for name in ("smtp_host", "smtp_port", "password"):
        assert not shown(form.rows[name], panel), name
    assert not shown(form.rows["max_recipients"], panel)
    # Top to bottom: main params, then Connection, then Advanced.
    y = {name: form.rows[name].mapTo(form, QPoint(0, 0)).y() for name in ("to", "delivery")}
    assert y["to"] < y["delivery"] < connection.y() < advanced.y()
    # The closed header still says what it holds (the example set two of them).
    assert connection.summary.text() == "2 of 5 changed"


def test_one_click_opens_a_section_and_the_choice_is_remembered_per_node_type(qtbot, panel):
    panel.set_node("mail")
    connection = panel.form.sections["connection"]
    click(qtbot, connection.toggle)
    assert shown(panel.form.rows["smtp_host"], panel)
    assert panel.form.rows["smtp_host"].value_editor.edit.text() == "127.0.0.1"
    # Another Send Mail opens with Connection open, Advanced still closed.
    panel.set_node("mail2")
    assert panel.form.sections["connection"].is_open()
    assert shown(panel.form.rows["smtp_host"], panel)
    assert not panel.form.sections["advanced"].is_open()
    # Closing it again is remembered too.
    click(qtbot, panel.form.sections["connection"].toggle)
    panel.set_node("mail")
    assert not panel.form.sections["connection"].is_open()
    assert not shown(panel.form.rows["smtp_host"], panel)


def test_a_click_anywhere_on_the_header_line_opens_it(qtbot, panel):
    panel.set_node("mail")
    box = panel.form.sections["advanced"]
    qtbot.mouseClick(box.header, Qt.MouseButton.LeftButton,
                     pos=QPoint(box.header.width() - 5, box.header.height() // 2))
    assert box.is_open() and shown(panel.form.rows["max_recipients"], panel)


def test_agent_preview_and_tool_preview_start_closed_and_open_with_one_click(qtbot, panel):
    panel.set_node("agent")
    form = panel.form
    assert form.preview_box is not None and not form.preview_box.is_open()
    assert not shown(form.preview_text, panel)
    assert form.preview_box.summary.text() == "1 tool"
    # The provider is right under the closed preview, not below a tall JSON box.
    assert shown(form.rows["provider"], panel)
    assert form.rows["provider"].mapTo(form, QPoint(0, 0)).y() < 400
    click(qtbot, form.preview_box.toggle)
    assert shown(form.preview_text, panel) and '"send_email"' in form.preview_text.toPlainText()

    panel.set_node("mail")
    box = panel.form.tool_preview_box
    assert not box.is_open() and not shown(panel.form.tool_preview, panel)
    assert box.summary.text() == "AI fills 2"
    click(qtbot, box.toggle)
    assert shown(panel.form.tool_preview, panel)
    assert '"subject"' in panel.form.tool_preview.toPlainText()


def test_a_problem_inside_a_closed_section_shows_on_its_header(qtbot, panel, doc):
    panel.set_node("mail")
    doc.undo_stack.push(SetParam(doc, "mail", "smtp_port",
                                 ParamValue(scope=Scope.CUSTOM, value=70000), merge=False))
    doc.revalidate()
    connection = panel.form.sections["connection"]
    assert not connection.is_open()
    assert shown(connection.marker, panel) and connection.marker.text() == "✖ 1 problem"
    banner = " ".join(w.text() for w in panel.form.problem_banner.findChildren(QLabel))
    assert "SMTP port" in banner and "smtp_port" not in banner
    doc.undo_stack.undo()
    doc.revalidate()
    assert not shown(connection.marker, panel)


# -- item 3: the wheel ------------------------------------------------------------------

@pytest.fixture
def rules_panel(qtbot):
    """A short panel over a node with a long JSON param, so both scroll."""
    doc = FlowDocument(fake_flow(), fake_registry())
    doc.node("rules").params["rules"] = ParamValue(
        scope=Scope.CUSTOM, value=[{"op": "eq", "value": i} for i in range(40)])
    p = PropertiesPanel(doc)
    qtbot.addWidget(p)
    p.resize(320, 300)
    p.show()
    p.set_node("rules")
    return p


def test_wheel_over_an_unfocused_json_box_scrolls_the_panel(qtbot, rules_panel):
    panel = rules_panel
    text = panel.form.rows["rules"].value_editor.editor.text_edit
    outer, inner = panel.scroll.verticalScrollBar(), text.verticalScrollBar()
    assert outer.maximum() > 0 and inner.maximum() > 0  # both could scroll
    assert not text.hasFocus()
    wheel(text.viewport())
    assert outer.value() > 0 and inner.value() == 0


def test_wheel_over_the_focused_json_box_scrolls_the_box(qtbot, rules_panel):
    panel = rules_panel
    text = panel.form.rows["rules"].value_editor.editor.text_edit
    panel.scroll.ensureWidgetVisible(text)
    text.setFocus()
    assert text.hasFocus()
    outer, inner = panel.scroll.verticalScrollBar(), text.verticalScrollBar()
    before = outer.value()
    wheel(text.viewport())
    assert inner.value() > 0 and outer.value() == before


def test_wheel_over_an_unfocused_combo_scrolls_and_never_changes_the_value(qtbot):
    doc = FlowDocument(fake_flow(), fake_registry())
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(320, 300)
    panel.show()
    panel.set_node("mail")
    combo = panel.form.rows["priority"].value_editor.combo
    panel.scroll.ensureWidgetVisible(combo)
    bar = panel.scroll.verticalScrollBar()
    before_scroll, before_undo = bar.value(), doc.undo_stack.count()
    wheel(combo, steps=-1)
    assert combo.currentData() == "normal" and "priority" not in doc.node("mail").params
    assert doc.undo_stack.count() == before_undo
    assert bar.value() > before_scroll


# -- item 9: visible_if -------------------------------------------------------------------

def test_outbox_delivery_hides_the_smtp_settings_live_and_undo_brings_them_back(qtbot, panel,
                                                                               doc):
    panel.set_node("mail")
    form = panel.form
    click(qtbot, form.sections["connection"].toggle)
    assert shown(form.rows["smtp_host"], panel)
    assert not shown(form.rows["outbox_dir"], panel)  # only for outbox
    choose(form.rows["delivery"].value_editor.combo, "outbox")
    assert doc.node("mail").params["delivery"].value == "outbox"
    assert panel.form is form  # updated in place, not rebuilt
    for name in ("smtp_host", "smtp_port", "username", "password", "starttls"):
        assert not shown(form.rows[name], panel), name
    assert not shown(form.sections["connection"], panel)  # nothing left in it
    assert shown(form.rows["outbox_dir"], panel)
    note = form.rows["delivery"].note
    assert shown(note, panel)
    assert note.text() == ("Not used with “outbox”, so hidden: SMTP host, SMTP port, "
                           "Username, Password, STARTTLS.")
    # The AI's view agrees: what is hidden is not "fixed by you" either.
    click(qtbot, form.tool_preview_box.toggle)
    assert "SMTP" not in form.tool_summary.text()

    assert doc.undo_stack.undoText() == "Change Delivery"
    doc.undo_stack.undo()
    assert shown(form.rows["smtp_host"], panel) and shown(form.sections["connection"], panel)
    assert not shown(form.rows["outbox_dir"], panel)
    assert note.text() == "Not used with “smtp”, so hidden: Outbox folder."
    doc.undo_stack.redo()
    assert not shown(form.rows["smtp_host"], panel) and shown(form.rows["outbox_dir"], panel)


def test_a_choice_read_from_the_message_hides_nothing(panel, doc):
    # delivery only allows Custom; use the HTTP Request's auth-free body_type.
    flow = Flow(nodes=[FlowNode(id="req", type="http.request", params={
        "body_type": ParamValue(scope=Scope.MESSAGE, path="payload.kind")})])
    doc.reset(flow)
    panel.set_node("req")
    assert shown(panel.form.rows["body"], panel)
    doc.undo_stack.push(SetParam(doc, "req", "body_type",
                                 ParamValue(scope=Scope.CUSTOM, value="none"), merge=False))
    assert not shown(panel.form.rows["body"], panel)
    assert "hidden: Body" in panel.form.rows["body_type"].note.text()
    doc.undo_stack.push(SetParam(doc, "req", "body_type",
                                 ParamValue(scope=Scope.CUSTOM, value="file"), merge=False))
    assert shown(panel.form.rows["body_file"], panel) and not shown(panel.form.rows["body"], panel)


def test_http_auth_shows_only_the_fields_of_the_chosen_method(qtbot, panel, doc):
    doc.reset(Flow(nodes=[FlowNode(id="req", type="http.request")]))
    panel.set_node("req")
    form = panel.form
    box = form.sections["authentication"]
    click(qtbot, box.toggle)
    assert [n for n in ("username", "password", "token") if shown(form.rows[n], panel)] == []
    choose(form.rows["auth"].value_editor.combo, "bearer")
    assert [n for n in ("username", "password", "token") if shown(form.rows[n], panel)] == \
        ["token"]
    choose(form.rows["auth"].value_editor.combo, "basic")
    assert [n for n in ("username", "password", "token") if shown(form.rows[n], panel)] == \
        ["username", "password"]


# -- item 8: human labels ----------------------------------------------------------------------

def test_undo_texts_use_labels_not_ids(qtbot, panel, doc):
    panel.set_node("mail")
    form = panel.form
    click(qtbot, form.sections["connection"].toggle)
    edit = form.rows["smtp_port"].value_editor.edit
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "587")
    assert doc.node("mail").params["smtp_port"].value == 587
    assert doc.undo_stack.undoText() == "Change SMTP port"
    click(qtbot, form.rows["subject"].switch.buttons[Scope.CUSTOM])
    assert doc.undo_stack.undoText() == "Change Subject"
    qtbot.mouseClick(form.disabled_box, Qt.MouseButton.LeftButton,
                     pos=QPoint(6, form.disabled_box.height() // 2))  # on the box itself
    assert doc.undo_stack.undoText() == "Disable Send Mail"
    form.name_edit.setFocus()
    form.name_edit.selectAll()
    qtbot.keyClicks(form.name_edit, "Notify")
    qtbot.keyClick(form.name_edit, Qt.Key.Key_Return)
    assert doc.undo_stack.undoText() == "Rename Send Mail"
    texts = [doc.undo_stack.text(i) for i in range(doc.undo_stack.count())]
    assert not any("_" in t for t in texts), texts


def test_the_header_and_tooltips_name_things_as_the_user_knows_them(panel):
    panel.set_node("mail")
    form = panel.form
    assert form.type_label.text() == "Mail · tool"  # no "mail.send"
    assert "mail.send" in form.type_label.toolTip()  # still findable
    assert form.wired_label.text() == "A tool of <b>Mail assistant</b>."
    tip = form.rows["smtp_port"].label.toolTip()
    assert tip.startswith("A whole number") and "smtp_port" in tip
    panel.set_node("agent")
    card = panel.form.cards_box.findChildren(QLabel)
    summary = next(c.text() for c in card if "Fixed by you" in c.text())
    assert "Sender" in summary and "sender" not in summary.replace("Sender", "")


# -- integrations: Credentials… and the turns editor ----------------------------------------

@pytest.fixture
def store(data_dir, monkeypatch):
    """The real credential store, in an encrypted file of this test's data dir."""
    from runtime import credentials

    monkeypatch.setenv("SWITCHBOARD_CREDENTIALS", "file")
    credentials.set("smtp-work", "pw-1")
    credentials.set("openai", "sk-1")
    return credentials


def use_in_dialog(qtbot, name: str, seen: dict) -> None:
    """When the Credentials dialog opens (modal), pick ``name`` and click Use."""
    from PySide6.QtCore import QTimer

    def pick():
        dialog = QApplication.activeModalWidget()
        seen["preselected"] = dialog.chosen_name()
        dialog.names.setCurrentRow(dialog.stored_names().index(name))
        qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, pick)


def test_a_secret_param_names_a_stored_credential_through_the_dialog(qtbot, panel, doc, store):
    panel.set_node("mail")
    click(qtbot, panel.form.sections["connection"].toggle)
    editor = panel.form.rows["password"].value_editor
    assert shown(editor.credentials_button, panel) and editor.credentials_button.text() == \
        "Credentials…"
    seen: dict = {}
    use_in_dialog(qtbot, "smtp-work", seen)
    click(qtbot, editor.credentials_button)
    assert doc.node("mail").params["password"].value == {"keyring": "switchboard",
                                                         "username": "smtp-work"}
    assert doc.undo_stack.undoText() == "Change Password"
    assert editor.kind.currentData() == "stored" and editor.stored.text() == "smtp-work"
    assert shown(editor.stored, panel) and not shown(editor.env, panel)
    # Opened again, the dialog starts on the name the param holds.
    use_in_dialog(qtbot, "openai", seen)
    click(qtbot, editor.credentials_button)
    assert seen["preselected"] == "smtp-work"
    doc.undo_stack.undo()
    assert editor.stored.text() == "smtp-work"
    doc.undo_stack.undo()
    assert "password" not in doc.node("mail").params
    assert editor.kind.currentData() == "stored" and editor.stored.text() == ""


def test_closing_the_dialog_changes_nothing(qtbot, panel, doc, store):
    from PySide6.QtCore import QTimer

    panel.set_node("mail")
    click(qtbot, panel.form.sections["connection"].toggle)
    before = doc.undo_stack.count()
    QTimer.singleShot(0, lambda: QApplication.activeModalWidget().reject())
    click(qtbot, panel.form.rows["password"].value_editor.credentials_button)
    assert doc.undo_stack.count() == before and "password" not in doc.node("mail").params


def scripted_agent_doc(registry):
    flow = real_email_flow(registry)
    agent = flow.node("agent")
    agent.params = {"provider": ParamValue(scope=Scope.CUSTOM, value="scripted")}
    return FlowDocument(flow, registry)


def test_credentials_beside_the_provider_turn_a_scripted_agent_into_a_real_one(qtbot, registry,
                                                                               store):
    doc = scripted_agent_doc(registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(320, 700)
    panel.show()
    panel.set_node("agent")
    form = panel.form
    button = form.agent_credentials_button
    assert shown(button, panel)  # in view, beside the provider: no section to open
    assert not shown(form.rows["api_key"], panel)  # scripted needs no key
    use_in_dialog(qtbot, "openai", {})
    click(qtbot, button)
    params = doc.node("agent").params
    assert params["api_key"].value == {"keyring": "switchboard", "username": "openai"}
    assert params["provider"].value == "openai"
    assert form.rows["provider"].value_editor.combo.currentData() == "openai"
    assert doc.undo_stack.undoText() == "Use credential openai"
    doc.undo_stack.undo()  # one step takes back both
    assert "api_key" not in doc.node("agent").params
    assert doc.node("agent").params["provider"].value == "scripted"


def test_the_agents_script_is_edited_as_a_table_of_turns_with_undo(qtbot, registry):
    from PySide6.QtWidgets import QLineEdit

    from designer.model.commands import RemoveItems

    doc = scripted_agent_doc(registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(320, 900)
    panel.show()
    panel.set_node("agent")
    row = panel.form.rows["script"]
    editor = row.value_editor.editor
    assert shown(editor, panel) and editor.tool_names() == ["send_email"]
    assert row.value_editor.width() <= panel.form.width()  # fits the dock, nothing clipped
    assert editor.add_call_button.x() + editor.remove_button.geometry().right() > 0

    qtbot.mouseClick(editor.add_call_button, Qt.MouseButton.LeftButton)
    (cell,) = [w for w in editor.table.findChildren(QLineEdit) if w.isVisible()]
    cell.selectAll()
    qtbot.keyClicks(cell, '{"to": "john@example.com"}')
    qtbot.keyClick(cell, Qt.Key.Key_Return)
    QApplication.processEvents()  # the view commits a cell on Enter through its queue
    assert doc.node("agent").params["script"].value == [
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "john@example.com"}}]}]
    assert doc.undo_stack.undoText() == "Change Script"
    qtbot.mouseClick(editor.add_text_button, Qt.MouseButton.LeftButton)
    assert len(doc.node("agent").params["script"].value) == 2
    doc.undo_stack.undo()
    assert editor.value() == doc.node("agent").params["script"].value
    assert len(editor.value()) == 1

    # The turns offer the tools wired now: unwire the mail tool, it is marked.
    wire = next(i for i, w in enumerate(doc.flow.wires) if w.source == ("agent", "tools"))
    doc.undo_stack.push(RemoveItems(doc, [], [wire]))
    assert editor.tool_names() == []
    assert editor.table.cellWidget(0, 1).currentText() == "send_email (not wired)"


# -- nothing clipped at 1440x900 ------------------------------------------------------------

def test_no_form_is_wider_than_the_dock_at_1440x900(make_window, registry):  # noqa: F811
    """Every built-in node's form, in the real window with its theme: the
    form fits the properties dock (the panel never scrolls sideways, so a
    wider form is cut off at the right edge)."""
    from PySide6.QtWidgets import QApplication

    doc = FlowDocument(Flow(nodes=[FlowNode(id=f"n{i}", type=s.type, position=(0, 90 * i))
                                   for i, s in enumerate(registry.specs())]), registry)
    window = make_window(doc)
    window.set_theme("light")
    window.resize(1440, 900)
    too_wide = []
    try:
        for fnode in doc.flow.nodes:
            window.properties.set_node(fnode.id)
            form = window.properties.form
            for box in form.sections.values():
                box.set_open(True)  # every param laid out
            QApplication.processEvents()
            viewport = window.properties.scroll.viewport().width()
            if form.width() > viewport:
                too_wide.append((fnode.type, form.width(), viewport))
    finally:
        window.set_theme("system")
    assert too_wide == [], too_wide


def test_wheel_over_an_unfocused_template_box_scrolls_the_panel(qtbot):
    doc = FlowDocument(fake_flow(), fake_registry())
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(320, 300)
    panel.show()
    panel.set_node("mail")
    row = panel.form.rows["subject"]
    click(qtbot, row.switch.buttons[Scope.EXPRESSION])
    assert doc.node("mail").params["subject"].scope is Scope.EXPRESSION
    box = row.expression_editor.edit
    box.setPlainText("\n".join(f"line {i} {{{{ msg.payload }}}}" for i in range(30)))
    QApplication.processEvents()
    panel.scroll.ensureWidgetVisible(box)
    box.clearFocus()
    outer, inner = panel.scroll.verticalScrollBar(), box.verticalScrollBar()
    assert inner.maximum() > 0  # the box could scroll
    before = outer.value()
    wheel(box.viewport())
    assert outer.value() != before and inner.value() == 0

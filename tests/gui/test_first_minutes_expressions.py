"""Issue 12, item 11, through the real widgets: the template editor with its
live preview (against the last message into the node), the {{ }} scope in
the properties panel, and a real run whose last message the preview uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.model.document import FlowDocument
from designer.panels.expression_editor import ExpressionEditor, message_paths
from runtime.spec import ParamSpec, ParamType, ParamValue, Scope
from tests.gui.inspector_fixtures import history, qt_loop  # noqa: F401

ORDER = {"_msgid": "m7", "topic": "orders",
         "payload": {"order": "B-2002", "name": "Bob", "email": "bob@example.com",
                     "items": ["Label printer"], "count": 3}}


def spec(type_: str = "str", name: str = "subject", **kw) -> ParamSpec:
    return ParamSpec(name=name, type=ParamType(type_), label=name.title(),
                     allowed_scopes=[Scope.CUSTOM], default_scope=Scope.CUSTOM, **kw)


@pytest.fixture
def editor(qtbot):
    def make(type_: str = "str", message: dict | None = ORDER, **kw) -> ExpressionEditor:
        e = ExpressionEditor(spec(type_, **kw), last_message=lambda: message)
        qtbot.addWidget(e)
        e.resize(320, 300)
        e.show()
        return e
    return make


def type_into(qtbot, e: ExpressionEditor, text: str) -> None:
    e.edit.setFocus()
    qtbot.keyClicks(e.edit, text)


def test_the_preview_follows_each_keystroke(editor, qtbot):
    e = editor()
    emitted: list[str] = []
    e.text_changed.connect(emitted.append)
    type_into(qtbot, e, "Hi {{ msg.payload.name }}")
    assert emitted[-1] == "Hi {{ msg.payload.name }}"
    assert len(emitted) == len("Hi {{ msg.payload.name }}")  # one per keystroke
    assert e.preview.text() == "Hi Bob" and e.preview.isVisible()
    assert e.kind.text() == "text, 6 characters"
    assert not e.problem.isVisible()
    assert e.source.text() == "last message in"
    assert '"name": "Bob"' in e.source.toolTip()  # what the preview rendered against
    assert not e.note.isVisible()
    # While typed half-way, the preview says what is wrong, never a traceback.
    QTest.keyClick(e.edit, Qt.Key.Key_Backspace)
    QTest.keyClick(e.edit, Qt.Key.Key_Backspace)
    assert e.problem.isVisible() and not e.preview.isVisible()
    assert e.problem.text().startswith("template syntax: unexpected end of template")


def test_a_typo_shows_what_the_message_has(editor, qtbot):
    e = editor()
    type_into(qtbot, e, "{{ msg.payload.nmae }}")
    assert e.problem.isVisible()
    assert e.problem.text() == ("'msg.payload' has no attribute 'nmae' "
                                "(it has: order, name, email, items, count)")
    assert e.error == e.problem.text() and e.value is None


def test_one_expression_previews_as_the_params_type(editor, qtbot):
    e = editor("int")
    type_into(qtbot, e, "{{ msg.payload.count * 2 }}")
    assert (e.value, e.preview.text(), e.kind.text()) == (6, "6", "number")
    j = editor("json")
    type_into(qtbot, j, "{{ msg.payload.items }}")
    assert j.value == ["Label printer"] and j.kind.text() == "JSON list"
    assert j.preview.text() == '["Label printer"]'
    b = editor("bool")
    type_into(qtbot, b, "{{ msg.payload.count > 5 }}")
    assert (b.value, b.preview.text(), b.kind.text()) == (False, "false", "true/false")
    d = editor("str", default="switchboard@localhost", has_default=True)
    type_into(qtbot, d, "{{ msg.payload.cc | default(none) }}")
    assert d.value is None
    assert d.kind.text() == 'nothing: the param\'s default applies ("switchboard@localhost")'


def test_before_any_run_the_preview_says_so_and_env_works(editor, qtbot, monkeypatch,
                                                          data_dir):
    monkeypatch.setenv("SHOP_NAME", "Northwind")
    monkeypatch.setenv("SHOP_API_TOKEN", "tok-123456")
    # env is an allow-list: the user's settings name SHOP_NAME (and even the
    # token: its name still hides it).
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "settings.json").write_text(
        json.dumps({"env_readable": ["SHOP_NAME", "SHOP_API_TOKEN"]}), encoding="utf-8")
    e = editor(message=None)
    assert e.source.text() == "no run yet" and not e.note.isVisible()
    type_into(qtbot, e, "{{ env.SHOP_NAME }}")
    assert e.preview.text() == "Northwind" and not e.note.isVisible()
    e.edit.clear()
    type_into(qtbot, e, "{{ msg.payload.name }}")
    assert e.note.isVisible() and e.note.text().startswith("No message has reached this node")
    assert "flow variable" not in e.note.text()
    assert e.problem.text() == "'msg' has no attribute 'payload' (it is empty)"
    e.edit.clear()
    type_into(qtbot, e, "{{ env.SHOP_API_TOKEN }}")
    assert "env.SHOP_API_TOKEN is hidden from templates" in e.problem.text()
    assert "tok-123456" not in e.problem.text()
    # No run holds flow variables for the preview: each shows as ‹flow.name›,
    # and a number made from one says why there is none.
    e.edit.clear()
    type_into(qtbot, e, "{{ flow.shop }}: {{ env.SHOP_NAME }}")
    assert e.preview.text() == "‹flow.shop›: Northwind"
    assert "stands for a flow variable" in e.note.text() and e.note.isVisible()
    n = editor("int", message=None)
    type_into(qtbot, n, "{{ flow.count + 1 }}")
    assert n.problem.text() == ("flow.count is a flow variable, and those exist only while "
                                "the flow runs: the preview has none")


def test_the_models_text_is_shown_without_echoing_an_edit(editor):
    e = editor()
    emitted: list[str] = []
    e.text_changed.connect(emitted.append)
    e.set_text("{{ msg.topic }}")
    assert emitted == [] and e.text() == "{{ msg.topic }}" and e.preview.text() == "orders"
    e.set_text(None)
    assert e.text() == "" and e.kind.text() == "Empty: the param's default applies"


def test_insert_offers_the_last_messages_values(editor, qtbot):
    assert message_paths(ORDER)[:3] == ["msg.topic", "msg.payload", "msg.payload.order"]
    assert "msg._msgid" not in message_paths(ORDER)
    e = editor()
    menu = e.insert.menu()
    menu.aboutToShow.emit()
    labels = [a.text() for a in menu.actions()]
    assert "msg.payload.name" in labels and "msg.payload.items[0]" in labels
    next(a for a in menu.actions() if a.text() == "msg.payload.name").trigger()
    assert e.text() == "{{ msg.payload.name }}" and e.preview.text() == "Bob"


# -- in the real window, with a real run ------------------------------------------------

ORDER_MAILS = Path(__file__).resolve().parents[2] / "resources" / "examples" / \
    "order-mails.flow.json"


@pytest.fixture
def open_window(qtbot, qt_loop, history, monkeypatch, tmp_path, data_dir):  # noqa: F811
    """The main window over the real node registry at 1440x900; the flow's
    outbox lands in tmp_path. Closed at the end without a save prompt."""
    from designer.window.main_window import MainWindow

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    windows = []

    def make(path: Path | None = None) -> MainWindow:
        doc = FlowDocument.open(path) if path else FlowDocument()
        w = MainWindow(doc, restore_layout=False, autosave_interval_ms=3_600_000)
        w.resize(1440, 900)
        w.show()
        qtbot.waitExposed(w)
        windows.append(w)
        return w

    yield make
    for w in windows:
        if w.run_session.controller.is_running:
            w.run_session.controller.stop()
            qtbot.waitUntil(lambda w=w: not w.run_session.controller.is_running, timeout=10000)
        w.document.undo_stack.setClean()
        w.close()
        w.deleteLater()
    QApplication.processEvents()


def run(window, qtbot) -> None:
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=15000)


def test_a_run_feeds_the_preview_and_typing_edits_the_flow_with_undo(open_window, qtbot):
    window = open_window(ORDER_MAILS)
    doc = window.document
    window.select_node("mail")
    row = window.properties.form.rows["subject"]
    assert row.switch.buttons[Scope.EXPRESSION].isChecked()
    editor = row.expression_editor
    assert editor is not None and editor.isVisible() and not row.value_editor.isVisible()
    # Before any run: msg is empty, and the preview says so.
    assert editor.source.text() == "no run yet"
    assert editor.problem.text().startswith("'msg' has no attribute 'payload'")

    run(window, qtbot)
    # The last order that reached Send Mail is Bob's; flow variables are
    # gone with the run, so the shop's name shows as a placeholder.
    assert editor.source.text() == "last message in"
    assert editor.preview.text() == "‹flow.shop›: order B-2002 shipped (1 item)"
    assert editor.kind.text() == f"text, {len(editor.preview.text())} characters"

    # Typing: the preview follows each key, and the flow gets the text as
    # one undo step.
    edit = editor.edit
    edit.setFocus()
    edit.selectAll()
    QTest.keyClick(edit, Qt.Key.Key_Delete)
    qtbot.keyClicks(edit, "Hi {{ msg.payload.nmae }}")
    assert editor.problem.text().startswith("'msg.payload' has no attribute 'nmae' (it has: "
                                            "order, name, email, items")
    for _ in range(len("nmae }}")):
        QTest.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, "name }}, your order shipped")
    assert editor.preview.text() == "Hi Bob, your order shipped"
    setting = doc.node("mail").params["subject"]
    assert setting == ParamValue(scope=Scope.EXPRESSION,
                                 value="Hi {{ msg.payload.name }}, your order shipped")
    doc.undo_stack.undo()
    assert doc.node("mail").params["subject"].value.startswith("{{ flow.shop }}: order")
    assert editor.text().startswith("{{ flow.shop }}: order")


def test_the_scope_switch_turns_a_fixed_value_into_a_template_and_back(open_window, qtbot):
    window = open_window(ORDER_MAILS)
    doc = window.document
    run(window, qtbot)
    window.select_node("mail")
    row = window.properties.form.rows["sender"]
    assert doc.node("mail").params["sender"].value == "orders@example.com"
    QTest.mouseClick(row.switch.buttons[Scope.EXPRESSION], Qt.MouseButton.LeftButton)
    # The fixed text carries over: as a template it gives itself.
    assert doc.node("mail").params["sender"] == ParamValue(scope=Scope.EXPRESSION,
                                                           value="orders@example.com")
    editor = row.expression_editor
    assert editor.isVisible() and editor.preview.text() == "orders@example.com"
    editor.edit.setFocus()
    editor.edit.moveCursor(editor.edit.textCursor().MoveOperation.Start)
    qtbot.keyClicks(editor.edit, "{{ msg.payload.order | lower }}-")
    assert editor.preview.text() == "b-2002-orders@example.com"
    QTest.mouseClick(row.switch.buttons[Scope.CUSTOM], Qt.MouseButton.LeftButton)
    assert doc.node("mail").params["sender"] == ParamValue(scope=Scope.CUSTOM,
                                                           value="orders@example.com")
    assert not editor.isVisible() and row.value_editor.isVisible()
    # Back to {{ }}: the template typed before is still there.
    QTest.mouseClick(row.switch.buttons[Scope.EXPRESSION], Qt.MouseButton.LeftButton)
    assert doc.node("mail").params["sender"].value == \
        "{{ msg.payload.order | lower }}-orders@example.com"


def test_a_fixed_only_param_gets_a_template_toggle_and_a_secret_none(open_window, qtbot):
    window = open_window(ORDER_MAILS)
    doc = window.document
    # Inject's payload is fixed-only: one {{ }} toggle, no AI/Message switch.
    window.select_node("orders")
    row = window.properties.form.rows["payload"]
    assert not row.switch.isVisibleTo(window.properties)
    toggle = row.expression_toggle
    assert toggle is not None and toggle.isVisibleTo(window.properties)
    button = toggle.buttons[Scope.EXPRESSION]
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert doc.node("orders").params["payload"] == ParamValue(scope=Scope.EXPRESSION, value="")
    assert button.isChecked() and row.expression_editor.isVisible()
    qtbot.keyClicks(row.expression_editor.edit, "{{ [1, 2, 3] }}")
    assert row.expression_editor.value == [1, 2, 3]
    assert row.expression_editor.kind.text() == "JSON list"
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)  # off: back to the fixed value
    assert doc.node("orders").params["payload"].scope is Scope.CUSTOM
    assert isinstance(doc.node("orders").params["payload"].value, list)
    # A secret never offers {{ }}: it names where it is kept.
    window.select_node("mail")
    password = window.properties.form.rows["password"]
    assert password.expression_toggle is None
    assert not password.switch.buttons[Scope.EXPRESSION].isEnabled()
    assert "a secret is never computed" in password.switch.buttons[Scope.EXPRESSION].toolTip()


def test_the_preview_hides_env_vars_the_flows_secrets_name(open_window, qtbot, monkeypatch):
    monkeypatch.setenv("SHOP_NAME", "visible-value")  # the example's settings.env_readable
    monkeypatch.setenv("SHOP_MOTTO", "not-named")
    monkeypatch.setenv("MAIL_PW", "hunter2-pw")
    window = open_window(ORDER_MAILS)
    doc = window.document
    from designer.model.commands import SetParam

    doc.undo_stack.push(SetParam(doc, "mail", "password",
                                 ParamValue(scope=Scope.CUSTOM, value={"env": "MAIL_PW"})))
    window.select_node("mail")
    editor = window.properties.form.rows["subject"].expression_editor
    editor.set_text("{{ env.SHOP_NAME }}")
    assert editor.preview.text() == "visible-value"
    editor.set_text("{{ env.SHOP_MOTTO }}")
    assert "env.SHOP_MOTTO is not readable by templates" in editor.problem.text()
    editor.set_text("{{ env.MAIL_PW }}")
    assert "env.MAIL_PW is hidden from templates" in editor.problem.text()
    assert "hunter2" not in editor.problem.text() + editor.preview.text()

"""Issue 12, the runtime's part in the designer: the Agent tab shows JSON
indented, and the inject's payload editor takes plain text."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from runtime.flow import load_flow
from runtime.spec import ParamValue, Scope
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT


@pytest.fixture
def email_flow(tmp_path):
    flow = load_flow(EMAIL_ASSISTANT)
    flow.node("mail").params["outbox_dir"] = ParamValue(scope=Scope.CUSTOM,
                                                        value=str(tmp_path / "outbox"))
    return flow


def test_the_agent_tab_shows_tool_arguments_and_results_as_indented_json(fake_window, email_flow,
                                                                         qtbot):
    window = fake_window(email_flow)
    session = window.session
    session.run()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)
    assert session.controller.last_result.status == "ok"
    text = session.inspector.agent.view.toPlainText()
    lines = text.splitlines()
    # The call's arguments, one key a line, indented under their braces.
    assert '  "to": "john@example.com",' in lines
    assert '  "subject": "Your order A-1001 has shipped",' in lines
    # The tool's answer too, nested one level deeper where it nests.
    assert '  "accepted": [' in lines and '    "john@example.com"' in lines


def test_the_payload_editor_takes_plain_text_typed_with_the_keyboard(qtbot):
    from designer.panels.payload_editor import PayloadValueEditor
    from nodes.core.inject_debug import Inject

    editor = PayloadValueEditor(Inject.spec.param("payload"))
    qtbot.addWidget(editor)
    editor.show()
    seen = []
    editor.value_changed.connect(seen.append)
    editor.set_value(None)
    editor.edit.setFocus()
    qtbot.keyClicks(editor.edit, "hello")
    assert seen[-1] == "hello" and editor.value() == "hello"

    # An old flow's JSON payload stays JSON while it still parses ...
    editor.set_value({"name": "World"})
    assert editor.edit.toPlainText() == '{"name": "World"}'
    editor.edit.moveCursor(editor.edit.textCursor().MoveOperation.End)
    for _ in range(len('World"}')):
        qtbot.keyClick(editor.edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(editor.edit, 'Ada"}')
    assert seen[-1] == {"name": "Ada"}
    qtbot.keyClicks(editor.edit, ", more")  # ... and is text once it does not
    assert seen[-1] == '{"name": "Ada"}, more'

"""The inspector with an agent: Tools and Agent tabs from a scripted-LLM run,
the chat box, Try as Tool, and the real main window."""

from __future__ import annotations

import json

import pytest

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


def test_an_agent_run_fills_the_tools_and_agent_tabs(fake_window, email_flow, qtbot, tmp_path):
    window = fake_window(email_flow)
    session = window.session
    inspector = session.inspector
    session.run()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)
    assert session.controller.last_result.status == "ok"

    [call] = inspector.tools.calls_shown()
    assert call.tool == "send_email" and call.status == "success"
    assert call.args == {"to": "john@example.com", "subject": "Your order A-1001 has shipped",
                         "body": "Hello John,\n\nyour order A-1001 shipped today.\n\nBest regards"}
    assert call.data["accepted"] == ["john@example.com"]
    assert call.node == "mail" and call.agent == "agent" and call.caller_id
    item = inspector.tools.tree.topLevelItem(0).child(0)
    assert item.text(0) == "send_email" and "john@example.com" in item.text(1)
    assert item.text(2).startswith("✓")
    inspector.tools.tree.itemClicked.emit(item, 0)
    assert window.selected[-1] == "mail"
    assert list((tmp_path / "outbox").iterdir())  # the mail really was written

    agent = inspector.agent
    assert agent.current_agent() == "agent"
    conv = agent.current_conversation()
    roles = [m["role"] for m in conv.transcript]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]  # as the LLM saw it
    text = agent.view.toPlainText()
    assert "Tell john@example.com" in text  # the prompt
    assert "send_email" in text  # the tool call, with its arguments
    assert "Your order A-1001 has shipped" in text
    assert "I emailed john@example.com" in text  # the final answer
    assert "You are a helpful assistant" in text  # the instructions the LLM saw
    assert "440 tokens in" in agent.usage.text() and "66 out" in agent.usage.text()

    # the timeline has rows for the agent and the mail node, and paints
    rows = inspector.ctx.model.timeline_rows()
    assert "agent" in rows and "mail" in rows
    assert not inspector.timeline.canvas.grab().isNull()
    # the tools wire shows one call, the agent's badge is done
    tools_wire = next(i for i, w in enumerate(email_flow.wires) if w.source[1] == "tools")
    assert window.scene.wires[tools_wire].activity[-1] == 1
    assert window.scene.nodes["agent"].states[-1][0] == "done"


def test_the_chat_box_sends_a_prompt_into_the_agent(fake_window, email_flow, qtbot):
    window = fake_window(email_flow)
    inspector = window.session.inspector
    agent = inspector.agent
    assert agent.current_agent() == "agent"
    agent.prompt.setText("Please tell ada@example.com her invoice is ready")
    agent.send.click()
    qtbot.waitUntil(lambda: not window.session.controller.is_running, timeout=10000)
    assert inspector.tabs.currentWidget() is agent
    conv = agent.current_conversation()
    first_user = next(m for m in conv.transcript if m["role"] == "user")
    assert first_user["content"] == "Please tell ada@example.com her invoice is ready"
    assert "Please tell ada@example.com" in agent.view.toPlainText()
    # the flow's own inject did not fire: one conversation, one answer
    assert len(inspector.ctx.model.conversations) == 1
    assert [e.node for e in inspector.debug.entries()].count("show") == 1


def test_try_as_tool_shows_a_result_and_refuses_bad_arguments(qt_loop, email_flow, qtbot, tmp_path):
    from designer.panels.try_tool import TryToolDialog

    dialog = TryToolDialog(email_flow, "mail")
    qtbot.addWidget(dialog)
    assert set(dialog.fields) == {"to", "subject", "body"}
    assert "smtp_host" not in dialog.fields  # fixed by the designer, not the AI's
    dialog.set_args({"to": "grace@example.com", "subject": "Hi", "body": "Hello Grace"})
    with qtbot.waitSignal(dialog.finished_call, timeout=10000) as got:
        dialog.call_button.click()
    result = got.args[0]
    assert result.status == "success"
    assert result.data["accepted"] == ["grace@example.com"]
    assert result.response["__message_type__"] == "tool_response"
    assert result.response["__tool_status__"] == "success"
    assert "success" in dialog.status.text()
    assert dialog.response.topLevelItem(0).text(0) == "tool_response"
    written = list((tmp_path / "outbox").iterdir())
    assert len(written) == 1

    # an argument outside the schema, as a confused or hostile LLM might send
    dialog.set_raw(json.dumps({"to": "x@example.com", "subject": "s", "body": "b",
                               "smtp_host": "evil.example.com"}))
    with qtbot.waitSignal(dialog.finished_call, timeout=10000) as got:
        dialog.call_button.click()
    assert got.args[0].status == "refused"
    assert "smtp_host" in got.args[0].error
    assert "refused" in dialog.status.text()
    # a missing required argument, from the form
    dialog.input_tabs.setCurrentIndex(0)
    dialog.fields["to"].set_text("")
    with qtbot.waitSignal(dialog.finished_call, timeout=10000) as got:
        dialog.call_button.click()
    assert got.args[0].status == "refused" and "to" in got.args[0].error
    assert len(list((tmp_path / "outbox").iterdir())) == 1  # the node never ran


def test_with_the_real_main_window(qt_loop, qtbot, history, monkeypatch):
    from designer.model.document import FlowDocument
    from designer.window.main_window import MainWindow
    from tests.gui.inspector_fixtures import ORDER_TRIAGE

    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    window = MainWindow(FlowDocument.open(ORDER_TRIAGE), restore_layout=False)
    qtbot.addWidget(window)
    window.resize(1440, 900)
    window.show()
    session = window.run_session
    assert window.inspector_dock.widget() is session.inspector
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)
    assert len(session.inspector.debug.entries()) == 3
    assert window.scene.item_for_node("report").run_state == "done"
    assert window.scene.item_for_node("bad").run_state == "error"
    assert window.inspector_dock.isVisible()
    # selecting a node on the canvas shows its messages
    window.select_node("size")
    assert session.inspector.messages.node_id == "size"
    assert session.inspector.messages.incoming.tree.topLevelItemCount() == 3
    # a tool node gets "Try as Tool" in its context menu; others do not
    assert history.runs()[0].flow == "Order triage"
    menu = window.build_node_menu("report")
    assert not any("Try as Tool" in a.text() for a in menu.actions())


def test_try_as_tool_shows_the_designer_the_whole_error_the_llm_gets_only_in_short(
        qt_loop, email_flow, tmp_path, qtbot):
    # An unexpected exception reaches the LLM as its type and a generic
    # reason (paths and host names stay out of the model's context); the
    # person trying the tool sees the whole text.
    from designer.panels.try_tool import call_tool

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    email_flow.node("mail").params["outbox_dir"] = ParamValue(
        scope=Scope.CUSTOM, value=str(blocker / "outbox"))
    task = qt_loop.create_task(call_tool(
        email_flow, "mail", {"to": "grace@example.com", "subject": "Hi", "body": "Hello"}))
    qtbot.waitUntil(task.done, timeout=10000)
    result = task.result()
    assert result.status == "error"
    assert str(blocker) in result.error and "the tool failed unexpectedly" not in result.error
    assert "the tool failed unexpectedly" in result.response["__tool_error__"]
    assert str(blocker) not in result.response["__tool_error__"]


def test_a_screenshot_a_debug_value_points_to_is_shown_under_it(qtbot, tmp_path):
    from PySide6.QtGui import QColor, QImage

    from designer.panels.inspector import Inspector
    from runtime.events import Debug, RunStarted

    png = tmp_path / "page.png"
    image = QImage(320, 200, QImage.Format.Format_RGB32)
    image.fill(QColor("#3366cc"))
    assert image.save(str(png))
    inspector = Inspector()
    qtbot.addWidget(inspector)
    inspector.resize(1200, 400)
    inspector.show()
    inspector.apply_events([RunStarted(run_id="r1"),
                            Debug(run_id="r1", node="shot", value={"screenshot": str(png)}),
                            Debug(run_id="r1", node="shot", value={"screenshot": "/no/such.png"})])
    debug = inspector.debug
    debug.list.setCurrentItem(debug.list.topLevelItem(0))
    assert debug.image.isVisible() and not debug.image.pixmap().isNull()
    debug.list.setCurrentItem(debug.list.topLevelItem(1))  # a path that is not there
    assert not debug.image.isVisible()

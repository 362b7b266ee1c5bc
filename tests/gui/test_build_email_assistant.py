"""Issue 4's "done when", as a user does it: build the email-assistant flow
from an empty canvas with the mouse (palette drops, port drags), set scopes
and values in the properties panel, undo every step back to nothing, redo
them all, save, reopen, and see the same flow. Real node types, real
window, real panel."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.model.document import FlowDocument
from runtime.flow import load_flow
from runtime.registry import Registry
from runtime.spec import Scope
from runtime.tools import agent_tool_specs
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import drag, port_point


def drop_from_palette(window, type_id: str, at: QPointF) -> str:
    palette = window.palette
    mime = palette.tree.mimeData([palette.item_for_type(type_id)])
    vp = window.view.viewport()
    enter = QDragEnterEvent(at.toPoint(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, enter)
    QApplication.sendEvent(vp, QDropEvent(at, Qt.DropAction.CopyAction, mime,
                                          Qt.MouseButton.LeftButton,
                                          Qt.KeyboardModifier.NoModifier))
    return window.document.flow.nodes[-1].id


def click_scope(row, scope: Scope) -> None:
    QTest.mouseClick(row.switch.buttons[scope], Qt.MouseButton.LeftButton)


def type_text(qtbot, line_edit, text: str) -> None:
    line_edit.setFocus()
    line_edit.selectAll()
    qtbot.keyClicks(line_edit, text)
    line_edit.editingFinished.emit()


def test_build_the_email_assistant_by_mouse_undo_everything_save_and_reopen(
        make_window, qtbot, tmp_path):
    doc = FlowDocument(registry=Registry.default())
    window = make_window(doc)
    window.view.set_zoom(1.0)
    stack = doc.undo_stack

    ask = drop_from_palette(window, "core.inject", QPointF(120, 120))
    agent = drop_from_palette(window, "ai.agent", QPointF(380, 120))
    show = drop_from_palette(window, "core.debug", QPointF(640, 120))
    mail = drop_from_palette(window, "mail.send", QPointF(640, 320))
    assert [n.type for n in doc.flow.nodes] == ["core.inject", "ai.agent", "core.debug",
                                                "mail.send"]

    drag(window, port_point(window, ask, "out"), port_point(window, agent, "in", "in"))
    drag(window, port_point(window, agent, "out"), port_point(window, show, "in", "in"))
    drag(window, port_point(window, agent, "tools", "tools"), port_point(window, mail, "in", "in"))
    assert [(w.source, w.target) for w in doc.flow.wires] == [
        ((ask, "out"), (agent, "in")), ((agent, "out"), (show, "in")),
        ((agent, "tools"), (mail, "in"))]

    # The agent answers offline with the scripted provider.
    window.select_node(agent)
    form = window.properties.form
    assert form is not None and form.node_id == agent
    provider = form.rows["provider"].value_editor
    provider.set_value("scripted")
    provider.value_changed.emit("scripted")
    assert doc.node(agent).params["provider"].value == "scripted"

    # Send Mail: the AI fills `to` and `subject`, the message supplies the
    # body, and the designer fixes the server and delivery.
    window.select_node(mail)
    form = window.properties.form
    click_scope(form.rows["body"], Scope.MESSAGE)
    type_text(qtbot, form.rows["body"].path_edit, "payload.body")
    type_text(qtbot, form.rows["subject"].ai_desc, "A short subject line")
    type_text(qtbot, form.rows["smtp_host"].value_editor.edit, "127.0.0.1")
    assert not form.rows["smtp_host"].switch.buttons[Scope.AI].isEnabled()
    params = doc.node(mail).params
    assert params["body"].scope is Scope.MESSAGE and params["body"].path == "payload.body"
    assert params["subject"].description == "A short subject line"
    assert params["smtp_host"].value == "127.0.0.1"

    # What the LLM will see follows the scopes: to and subject, not body.
    [tool] = agent_tool_specs(doc.flow)[agent]
    props = tool["function"]["parameters"]["properties"]
    assert set(props) == {"to", "subject"}
    assert props["subject"]["description"] == "A short subject line"

    built = doc.flow.dumps()
    steps = stack.count()
    assert steps >= 10  # 4 drops, 3 wires, provider, scope, path, description, host

    # Undo every step: back to an empty canvas, and the scene agrees.
    for _ in range(steps):
        stack.undo()
    assert doc.flow.nodes == [] and doc.flow.wires == []
    assert window.scene.item_for_node(ask) is None
    # Redo them all: exactly the flow that was built.
    for _ in range(steps):
        stack.redo()
    assert doc.flow.dumps() == built
    assert window.scene.item_for_node(mail) is not None

    path = tmp_path / "assistant.flow.json"
    doc.save(path)
    assert not doc.modified
    assert load_flow(path).dumps() == built  # the runtime accepts it as it is
    reopened = make_window(FlowDocument.open(path, Registry.default()))
    assert reopened.document.flow.dumps() == built
    for node_id in (ask, agent, show, mail):
        assert reopened.scene.item_for_node(node_id) is not None
    assert reopened.scene.item_for_wire(2).tools  # the tools wire is drawn as one

"""Pinned data in the designer: pin a node's last output from a run (an
agent talking to the local OpenAI-compatible server through the openai
SDK), type a pin, edit it, unpin; the canvas badge, the Properties banner,
undo and redo, save and load, Run > Use Pinned Data, and the dialog's checks."""

from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from designer.canvas.items import NodeItem
from designer.model.document import FlowDocument
from designer.panels.pin_dialog import PinDialog, check_pin
from runtime.flow import parse_flow
from runtime.pins import MAX_PIN_BYTES
from runtime.registry import Registry
from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.servers.llm import LlmServer, openai_reply


@pytest.fixture
def registry():
    return Registry.default()


@pytest.fixture
def llm(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-pins-gui")
    with LlmServer() as server:
        server.replies = lambda kind, body: openai_reply("Order A-1001 shipped today.")
        yield server


def fixed(value):
    return {"scope": "custom", "value": value}


def agent_flow(llm: LlmServer):
    return parse_flow({
        "format": "switchboard.flow/1", "name": "Pins",
        "nodes": [
            {"id": "ask", "type": "core.inject", "name": "Ask", "position": [0, 0],
             "params": {"payload": fixed("Did order A-1001 ship?")}},
            {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [240, 0],
             "params": {"provider": fixed("openai"), "model": fixed("gpt-test"),
                        "base_url": fixed(llm.openai_url),
                        "api_key_env": fixed("TEST_OPENAI_KEY")}},
            {"id": "show", "type": "core.debug", "name": "Answer", "position": [480, 0],
             "params": {"path": fixed("payload")}}],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]}]})


def chats(llm: LlmServer) -> int:
    return sum(1 for r in llm.requests if r["kind"] == "openai")


@pytest.fixture
def pin_window(make_window, llm, registry):  # noqa: F811 - the fixture above
    doc = FlowDocument(agent_flow(llm), registry)
    window = make_window(doc)
    window.run_session.pins.use_action.setChecked(True)
    yield window
    window.run_session.pins.use_action.setChecked(True)  # the setting outlives the test


def run_once(window, qtbot) -> None:
    session = window.run_session
    with qtbot.waitSignal(session.controller.run_finished, timeout=20000) as done:
        window.run_action.trigger()
    assert done.args[0].status == "ok", done.args[0]


def menu_texts(window, node_id: str) -> dict[str, object]:
    menu = window.build_node_menu(node_id)
    out = {a.text(): a for a in menu.actions() if a.text()}
    menu.deleteLater()
    return out


def answers(window) -> list:
    return [e.value for e in window.run_session.inspector.debug.entries()]


def test_pin_the_agents_last_output_then_runs_make_no_llm_request(pin_window, qtbot, llm,
                                                                  tmp_path):
    window, doc = pin_window, pin_window.document
    # Before any run there is nothing to pin from.
    assert not menu_texts(window, "agent")["Pin Last Output"].isEnabled()
    run_once(window, qtbot)
    assert chats(llm) == 1
    assert answers(window) == ["Order A-1001 shipped today."]

    actions = menu_texts(window, "agent")
    assert "Unpin" not in actions and "Pin Data…" in actions
    actions["Pin Last Output"].trigger()
    pin = doc.node("agent").pin
    assert pin is not None and list(pin) == ["out"]
    assert pin["out"][0]["payload"] == "Order A-1001 shipped today."
    assert not any(k.startswith("_") for k in pin["out"][0])  # no ids of that run
    item = window.scene.item_for_node("agent")
    assert isinstance(item, NodeItem) and item.look.pinned
    assert "Pinned:" in item.toolTip()
    window.select_node("agent")
    banner = window.properties.form.pin_banner
    assert banner.isVisible() and "does not run" in banner.title.text()
    assert "1 message on out" in banner.detail.text()
    assert "Pin last output" in window.undo_action.text()

    # The next run sends the pin: the server gets no request.
    run_once(window, qtbot)
    assert chats(llm) == 1
    assert answers(window) == ["Order A-1001 shipped today."]
    assert window.scene.item_for_node("agent").run_text == "pinned"

    # Run > Use Pinned Data off: the agent runs again.
    use = window.run_session.pins.use_action
    run_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    assert use in run_menu.actions() and use.isChecked()
    use.setChecked(False)
    run_once(window, qtbot)
    assert chats(llm) == 2
    use.setChecked(True)

    # Saved and opened again, the pin is there.
    path = tmp_path / "pins.flow.json"
    doc.save(path)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert next(n for n in saved["nodes"] if n["id"] == "agent")["pin"] == pin
    assert FlowDocument.open(path).node("agent").pin == pin

    # Undo unpins, redo pins again; Unpin from the menu is one undo step too.
    doc.undo_stack.undo()
    assert doc.node("agent").pin is None and not window.scene.item_for_node("agent").look.pinned
    assert not banner.isVisible()
    doc.undo_stack.redo()
    assert doc.node("agent").pin == pin and window.scene.item_for_node("agent").look.pinned
    menu_texts(window, "agent")["Unpin"].trigger()
    assert doc.node("agent").pin is None
    doc.undo_stack.undo()
    assert doc.node("agent").pin == pin


def test_type_a_pin_from_scratch_edit_it_and_unpin_in_the_dialog(pin_window, qtbot, llm):
    window, doc = pin_window, pin_window.document
    assert "Pin Data…" not in menu_texts(window, "show")  # sends nothing: nothing to pin
    menu_texts(window, "ask")["Pin Data…"].trigger()
    dialog = next(w for w in window.findChildren(PinDialog))
    assert dialog.unpin_button is None
    assert dialog.value() == {"out": [{"payload": ""}]}
    dialog.text.setPlainText('[{"payload": "Was order B-7 sent?"}]')  # a bare list
    assert dialog.pin_button.isEnabled()
    assert dialog.status.text() == "Ready to pin: 1 message on out"
    dialog.pin_button.click()
    assert doc.node("ask").pin == {"out": [{"payload": "Was order B-7 sent?"}]}
    assert not dialog.isVisible()

    # Edit it: the dialog opens on the pin and offers Unpin.
    menu_texts(window, "ask")["Edit Pinned Data…"].trigger()
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(PinDialog)))
    dialog = next(d for d in window.findChildren(PinDialog) if d.isVisible())
    assert dialog.value() == {"out": [{"payload": "Was order B-7 sent?"}]}
    dialog.text.setPlainText('{"out": [{"payload": "one"}, {"payload": "two"}]}')
    dialog.pin_button.click()
    assert doc.node("ask").pin == {"out": [{"payload": "one"}, {"payload": "two"}]}
    doc.undo_stack.undo()
    assert doc.node("ask").pin == {"out": [{"payload": "Was order B-7 sent?"}]}

    dialog = PinDialog(doc, "ask", parent=window)
    qtbot.addWidget(dialog)
    assert dialog.unpin_button is not None
    dialog.unpin_button.click()
    assert doc.node("ask").pin is None
    doc.undo_stack.undo()
    assert doc.node("ask").pin is not None


@pytest.mark.parametrize("text, why", [
    ("{nope", "Not valid JSON. Line 1, column 2"),
    ('{"tools": [{"payload": 1}]}', "tools: 'tools' carries no results of the node"),
    ('{"nope": [{"payload": 1}]}', "nope: unknown output port 'nope' (has: out, tools"),
    ('{"out": ["text"]}', "out[0]: a message must be a JSON object"),
    ('{"out": []}', "The pin holds no message; unpin the node instead"),
    ('{"out": [{"__tool_caller_id__": "c1"}]}', "out[0]: '__tool_caller_id__' belongs to one"),
    ('"just text"', "Expected an object of output ports"),
])
def test_the_dialog_refuses_what_the_flow_would_refuse(pin_window, qtbot, text, why):
    dialog = PinDialog(pin_window.document, "agent", parent=pin_window)
    qtbot.addWidget(dialog)
    dialog.text.setPlainText(text)
    assert not dialog.pin_button.isEnabled()
    assert dialog.status.text().startswith(why), dialog.status.text()
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Cancel).click()
    assert pin_window.document.node("agent").pin is None


def test_an_oversized_pin_is_refused_naming_the_bound(pin_window):
    doc = pin_window.document
    pin, why = check_pin(doc, "agent", {"out": [{"payload": "x" * MAX_PIN_BYTES}]})
    assert pin is None and why == "The pin is 1.0 MB of JSON; a pin may be at most 1.0 MB"


def test_a_shortened_last_output_opens_the_editor_instead_of_pinning(pin_window, qtbot):
    window = pin_window
    pins = window.run_session.pins
    model = window.run_session.inspector.ctx.model
    model.last = {"agent": {"in": [], "out": [{"payload": "x" * 4000 + "…"}]}}
    assert pins.pin_last_output("agent") is False
    assert window.document.node("agent").pin is None
    dialog = next(d for d in window.findChildren(PinDialog) if d.isVisible())
    assert dialog.note.isVisibleTo(dialog) and "shortened" in dialog.note.text()
    dialog.reject()

"""A person in the loop, in the designer: real runs of flows with scripted
agents, real mail to a local SMTP server (or the outbox), and the cards'
real widgets clicked and typed into. Nothing here waits for a clock: a test
waits for what the run does (a card comes, the run ends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from email import message_from_bytes

import pytest
from PySide6.QtCore import Qt

from designer.panels.inspector.approvals import ApprovalCard, PersonCards, QuestionCard
from nodes.ai import Agent
from nodes.ai.human import AskHuman
from nodes.core.inject_debug import DebugNode, Inject
from runtime.flow import load_flow
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures
from tests.gui.inspector_fixtures import EXAMPLES, ROOT
from tests.servers.flows import AI_SCOPE, EchoTool, Recorder, agent_flow, fixed, scripted
from tests.servers.smtp import SmtpServer

OUTSIDE_ONLY = {"mode": "rules", "rules": [
    {"arg": "to", "op": "not_endswith", "value": "@ourcompany.com"}]}
TRIAGE = EXAMPLES / "triage-delegation.flow.json"


def mail_tool(smtp: SmtpServer, approval: dict | None = None) -> dict:
    node = {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE,
        "sender": fixed("assistant@ourcompany.com"), "smtp_host": fixed("127.0.0.1"),
        "smtp_port": fixed(smtp.port)}}
    if approval is not None:
        node["tool"] = {"approval": approval}
    return node


def send(to: str, subject: str = "Your order") -> dict:
    return {"name": "send_email", "arguments": {"to": to, "subject": subject,
                                                "body": "It shipped."}}


def mail_flow(smtp: SmtpServer, *calls: dict, approval: dict | None = None):
    turns = [{"tool_calls": list(calls)}, {"text": "done: {last_result}"}]
    return agent_flow(scripted(turns), [mail_tool(smtp, approval)])


def start(window) -> Recorder:
    """Run the window's flow; every event of the run is recorded."""
    session = window.session
    assert session.run()
    rec = Recorder()
    session.controller.engine.bus.subscribe(rec)
    return rec


def cards_of(window) -> PersonCards:
    return window.session.inspector.cards


def wait_cards(qtbot, cards: PersonCards, n: int = 1) -> list:
    qtbot.waitUntil(lambda: len(cards.cards()) == n, timeout=10000)
    return cards.cards()


def wait_done(qtbot, controller) -> None:
    qtbot.waitUntil(lambda: not controller.is_running, timeout=10000)


def agent_calls(rec: Recorder) -> list[dict]:
    [out] = rec.debug_values("show")
    return out["agent"]["tool_calls"]


# -- approval -------------------------------------------------------------------------
def test_a_call_waits_on_a_card_and_runs_when_approved(fake_window, qtbot):
    with SmtpServer() as smtp:
        window = fake_window(mail_flow(smtp, send("eve@example.com"), approval=OUTSIDE_ONLY))
        rec = start(window)
        [card] = wait_cards(qtbot, cards_of(window))
        # The inspector opened itself with the card in view, and the status bar says why.
        assert window.session.dock.is_open and cards_of(window).isVisibleTo(window)
        assert window.statusBar().currentMessage() == "Waiting for approval: send_email, asked by AI Agent (agent)"
        assert isinstance(card, ApprovalCard)
        assert "<b>send_email</b>" in card.title.text()
        assert card.reason.text() == 'Why: rule: to does not end with "@ourcompany.com"'
        assert {n: f.text() for n, f in card.fields.items()} == {
            "to": "eve@example.com", "subject": "Your order", "body": "It shipped."}
        # No argument to confirm: the form is read-only until Edit.
        assert all(f.editor.isReadOnly() for f in card.fields.values())
        assert card.edit_button.isVisibleTo(card) and not card.edit_approve_button.isVisibleTo(card)
        assert "left" in card.left.text()
        assert not smtp.messages  # nothing ran while it waited
        qtbot.mouseClick(card.approve_button, Qt.MouseButton.LeftButton)
        wait_done(qtbot, window.session.controller)
        assert [m["To"] for m in smtp.messages] == ["eve@example.com"]
    assert cards_of(window).cards() == [] and not cards_of(window).isVisibleTo(window)
    assert window.statusBar().currentMessage() == ""
    [decision] = rec.of("tool.decision")
    assert (decision.decision, decision.by) == ("approved", "designer")
    assert [c["status"] for c in agent_calls(rec)] == ["success"]


def test_an_edited_argument_is_what_the_node_gets(fake_window, qtbot):
    with SmtpServer() as smtp:
        policy = {"mode": "always", "confirm": ["subject"]}
        window = fake_window(mail_flow(smtp, send("eve@example.com"), approval=policy))
        rec = start(window)
        [card] = wait_cards(qtbot, cards_of(window))
        # The argument to confirm is editable at once; the others are not.
        assert not card.fields["subject"].editor.isReadOnly()
        assert card.fields["to"].editor.isReadOnly()
        assert not card.edit_approve_button.isEnabled()  # nothing changed yet
        card.fields["subject"].editor.clear()
        qtbot.keyClicks(card.fields["subject"].editor, "Order A-1001: corrected")
        assert card.edit_approve_button.isEnabled()
        assert not card.approve_button.isEnabled()  # it would drop the edit
        qtbot.mouseClick(card.edit_approve_button, Qt.MouseButton.LeftButton)
        wait_done(qtbot, window.session.controller)
        [mail] = smtp.messages
    assert mail["Subject"] == "Order A-1001: corrected" and mail["To"] == "eve@example.com"
    [decision] = rec.of("tool.decision")
    assert (decision.decision, decision.by) == ("edited", "designer")
    assert decision.args["subject"] == "Order A-1001: corrected"


def test_a_rejection_reason_reaches_the_llm_and_the_mail_is_not_sent(fake_window, qtbot):
    with SmtpServer() as smtp:
        window = fake_window(mail_flow(smtp, send("eve@example.com"), approval=OUTSIDE_ONLY))
        rec = start(window)
        [card] = wait_cards(qtbot, cards_of(window))
        qtbot.keyClicks(card.reject_reason, "not this customer")
        qtbot.mouseClick(card.reject_button, Qt.MouseButton.LeftButton)
        wait_done(qtbot, window.session.controller)
        assert not smtp.messages
    [call] = agent_calls(rec)
    assert call["status"] == "rejected"
    assert call["error"] == "rejected by designer: not this customer"
    # The LLM's next turn read that error as the tool's result.
    [answer] = rec.debug_values("show")
    assert "rejected by designer: not this customer" in answer["payload"]


def test_several_waiting_calls_stack_and_are_decided_one_by_one(fake_window, qtbot):
    with SmtpServer() as smtp:
        window = fake_window(mail_flow(smtp, send("ann@ourcompany.com"), send("eve@example.com"),
                                       send("bob@example.org"), approval=OUTSIDE_ONLY))
        rec = start(window)
        first, second = wait_cards(qtbot, cards_of(window), 2)
        assert [c.fields["to"].text() for c in (first, second)] == [
            "eve@example.com", "bob@example.org"]  # the inside one never asked
        assert "2 calls to approve" in cards_of(window).header.text()
        qtbot.mouseClick(second.approve_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: cards_of(window).cards() == [first])
        first.reject()
        wait_done(qtbot, window.session.controller)
        assert sorted(m["To"] for m in smtp.messages) == ["ann@ourcompany.com",
                                                          "bob@example.org"]
    assert [c["status"] for c in agent_calls(rec)] == ["success", "rejected", "success"]


def test_a_bad_edit_keeps_the_button_disabled_and_names_the_field(controller, qtbot):
    controller.registry = Registry([Inject, DebugNode, Agent, EchoTool])
    echo = {"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE, "count": AI_SCOPE},
            "tool": {"approval": {"mode": "always"}}}
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "ab", "count": 1}}]},
             {"text": "{last_result}"}]
    cards = PersonCards()
    qtbot.addWidget(cards)
    cards.attach(controller.people)
    assert controller.run(agent_flow(scripted(turns), [echo]))
    rec = Recorder()
    controller.engine.bus.subscribe(rec)
    [card] = wait_cards(qtbot, cards)
    assert card.fields["count"].editor.isReadOnly()
    qtbot.mouseClick(card.edit_button, Qt.MouseButton.LeftButton)
    assert not card.fields["count"].editor.isReadOnly() and not card.edit_button.isVisibleTo(card)
    count = card.fields["count"]
    count.editor.setText("two")
    assert not card.edit_approve_button.isEnabled()
    assert count.error.isVisibleTo(card) and count.error.text() == "'two' is not of type 'integer'"
    assert not card.fields["text"].error.isVisibleTo(card)
    card.edit_and_approve()  # Enter or a stray click: nothing goes
    assert controller.is_running and card.pending.open
    count.editor.setText("3")
    assert card.edit_approve_button.isEnabled() and not count.error.isVisibleTo(card)
    qtbot.mouseClick(card.edit_approve_button, Qt.MouseButton.LeftButton)
    wait_done(qtbot, controller)
    [answer] = rec.debug_values("show")
    assert json.loads(answer["payload"]) == {"echoed": "ABABAB"}


def test_no_decision_in_time_rejects_the_call_and_the_card_goes(fake_window, qtbot):
    with SmtpServer() as smtp:
        policy = {"mode": "always", "timeout_seconds": 0.3}
        window = fake_window(mail_flow(smtp, send("eve@example.com"), approval=policy))
        came = []
        cards_of(window).attention.connect(came.append)
        rec = start(window)
        wait_done(qtbot, window.session.controller)
        assert not smtp.messages
    assert came == ["Waiting for approval: send_email, asked by AI Agent (agent)"]  # it was shown...
    assert cards_of(window).cards() == []  # ...and went when the policy rejected it
    [call] = agent_calls(rec)
    assert call["status"] == "rejected" and call["error"] == "no decision within 0.3 s; not run"
    assert rec.of("tool.decision")[0].decision == "timeout"


def test_stop_clears_the_cards(fake_window, qtbot):
    with SmtpServer() as smtp:
        window = fake_window(mail_flow(smtp, send("eve@example.com"), send("bob@example.org"),
                                       approval=OUTSIDE_ONLY))
        start(window)
        wait_cards(qtbot, cards_of(window), 2)
        window.session.stop()
        wait_done(qtbot, window.session.controller)
        assert not smtp.messages
    assert cards_of(window).cards() == [] and window.session.controller.people.pending == []
    assert window.session.controller.last_result.status == "stopped"
    assert window.statusBar().currentMessage() == ""


# -- ask human --------------------------------------------------------------------------
def ask_flow(arguments: dict):
    ask = {"id": "human", "type": "ai.ask_human", "params": {
        "question": AI_SCOPE, "choices": AI_SCOPE}}
    turns = [{"tool_calls": [{"name": "ask_human", "arguments": arguments}]},
             {"text": "The person said: {last_result}"}]
    return agent_flow(scripted(turns), [ask])


@pytest.mark.parametrize("choices", [["DHL", "UPS", "Pick-up"], None])
def test_an_agents_question_is_answered_on_its_card(controller, qtbot, choices):
    controller.registry = Registry([Inject, DebugNode, Agent, AskHuman])
    cards = PersonCards(name_of=lambda node_id: {"agent": "Shop agent"}.get(node_id, node_id))
    qtbot.addWidget(cards)
    cards.attach(controller.people)
    args = {"question": "Which carrier for order A-1001?"}
    if choices:
        args["choices"] = choices
    assert controller.run(ask_flow(args))
    rec = Recorder()
    controller.engine.bus.subscribe(rec)
    [card] = wait_cards(qtbot, cards)
    assert isinstance(card, QuestionCard)
    assert card.question.text() == "Which carrier for order A-1001?"
    assert "Shop agent" in card.title.text()
    if choices:
        assert [b.text() for b in card.choice_buttons] == choices and card.answer is None
        qtbot.mouseClick(card.choice_buttons[1], Qt.MouseButton.LeftButton)
    else:
        assert card.choice_buttons == [] and not card.send_button.isEnabled()
        qtbot.keyClicks(card.answer, "UPS, please")
        assert card.send_button.isEnabled()
        qtbot.keyClick(card.answer, Qt.Key.Key_Return)
    wait_done(qtbot, controller)
    assert cards.cards() == []
    [answer] = rec.debug_values("show")
    said = json.loads(answer["payload"].removeprefix("The person said: "))
    assert said == {"answer": "UPS" if choices else "UPS, please", "by": "designer"}


# -- the example: a triage agent delegating to a mail agent ----------------------------------
def triage_flow(outbox):
    flow = load_flow(TRIAGE)
    flow.node("mail").params["outbox_dir"] = ParamValue(scope=Scope.CUSTOM, value=str(outbox))
    return flow


def test_the_triage_example_asks_only_for_the_outside_recipient(fake_window, qtbot, tmp_path):
    window = fake_window(triage_flow(tmp_path / "outbox"))
    came = []
    cards_of(window).attention.connect(came.append)
    rec = start(window)
    [card] = wait_cards(qtbot, cards_of(window))
    assert card.fields["to"].text() == "eve@example.com"
    assert "Mail agent" in card.title.text()
    assert card.pending.request.agent == "mailer"
    # The inside mail went at once, while the outside one waits.
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1
    qtbot.mouseClick(card.approve_button, Qt.MouseButton.LeftButton)
    wait_done(qtbot, window.session.controller)
    assert window.session.controller.last_result.status == "ok"
    assert came == ["Waiting for approval: send_email, asked by Mail agent"]
    mails = [message_from_bytes(p.read_bytes()) for p in (tmp_path / "outbox").glob("*.eml")]
    assert sorted(m["To"] for m in mails) == ["ann@ourcompany.com", "eve@example.com"]
    # The decision belongs to the child agent's call, under the triage agent's.
    [decision] = rec.of("tool.decision")
    assert (decision.agent, decision.by, decision.decision) == ("mailer", "designer", "approved")
    top = next(e for e in rec.of("tool.call") if e.tool == "mail_agent")
    assert decision.parent == top.caller_id


@pytest.mark.parametrize("approve, sent", [("auto", 2), ("deny", 1)])
def test_the_triage_example_runs_headless(tmp_path, approve, sent):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(TRIAGE), "--approve",
                        approve], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    mails = [message_from_bytes(p.read_bytes()) for p in (tmp_path / "outbox").glob("*.eml")]
    assert len(mails) == sent
    assert "ann@ourcompany.com" in [m["To"] for m in mails]  # inside: never asked
    answer = next(json.loads(line)["value"] for line in r.stdout.splitlines()
                  if line.startswith('{"node": "answer"'))
    if approve == "deny":
        assert "rejected by deny: approval was denied (--approve deny)" in answer
    else:
        assert "eve@example.com" in answer and "rejected" not in answer

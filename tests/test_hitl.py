"""A person in the loop and agents as tools, in real runs: the openai SDK
against the local OpenAI-compatible server for the top agent, scripted
turns for the agents below it, real mail to a local SMTP server, a real CSV
in the run's workspace."""

from __future__ import annotations

import asyncio
import json

import pytest

from nodes.ai import Agent
from nodes.ai.human import Think
from nodes.core.inject_debug import DebugNode, Inject
from nodes.files.csv_nodes import WriteCsv
from nodes.mail import SendMail
from runtime.approval import Decision, People
from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry
from tests.servers.flows import AI_SCOPE, EchoTool, agent_flow, fixed, run, scripted
from tests.servers.llm import LlmServer, openai_reply
from tests.servers.smtp import SmtpServer

REG = Registry([Inject, DebugNode, Agent, SendMail, WriteCsv, Think, EchoTool])
OUTSIDE_ONLY = {"mode": "rules", "rules": [
    {"arg": "to", "op": "not_endswith", "value": "@ourcompany.com"}]}


class DecidingPeople(People):
    """Stands in for the person at the designer's approval card: decides
    each request in turn, and keeps what it was asked."""

    def __init__(self, *decisions: Decision | None) -> None:
        super().__init__()
        self.decisions = list(decisions)
        self.asked = []

        class Card:
            async def decide(card, request):  # noqa: N805 - the card's own self
                self.asked.append(request)
                d = self.decisions.pop(0)
                if d is None:
                    await asyncio.Event().wait()  # nobody answers
                return d

        self.approver = Card()


def mail_tool(smtp: SmtpServer, approval: dict | None = None) -> dict:
    node = {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE,
        "sender": fixed("assistant@ourcompany.com"), "smtp_host": fixed("127.0.0.1"),
        "smtp_port": fixed(smtp.port)}}
    if approval is not None:
        node["tool"] = {"approval": approval}
    return node


def send(to: str) -> tuple[str, dict]:
    return ("send_email", {"to": to, "subject": "Your order", "body": "It shipped."})


# -- approval -------------------------------------------------------------------
async def test_a_rule_asks_only_for_outside_recipients_and_a_rejection_reaches_the_llm():
    people = DecidingPeople(Decision(False, by="designer", reason="not this customer"))
    with SmtpServer() as smtp:
        turns = [{"tool_calls": [{"name": n, "arguments": a}
                                 for n, a in (send("ann@ourcompany.com"), send("eve@example.com"))]},
                 {"text": "done"}]
        flow = agent_flow(scripted(turns), [mail_tool(smtp, OUTSIDE_ONLY)])
        result, rec, _ = await run(flow, reg=REG, people=people)
        assert result.status == "ok", rec.of("node.error")
        sent = [m["To"] for m in smtp.messages]
    assert sent == ["ann@ourcompany.com"]  # the inside one ran at once, the outside one never
    [asked] = people.asked
    assert asked.args["to"] == "eve@example.com"
    assert asked.reason == 'rule: to does not end with "@ourcompany.com"'
    calls = rec.debug_values()[0]["agent"]["tool_calls"]
    assert [c["status"] for c in calls] == ["success", "rejected"]
    assert calls[1]["error"] == "rejected by designer: not this customer"
    [approval] = rec.of("tool.approval")
    assert approval.args["to"] == "eve@example.com" and approval.node == "mail"
    [decision] = rec.of("tool.decision")
    assert (decision.decision, decision.by, decision.reason) == (
        "rejected", "designer", "not this customer")
    # While it waited, the tool node said so.
    assert any(e.node == "mail" and e.text == "waiting for approval"
               for e in rec.of("node.status"))


async def test_an_edited_call_runs_with_the_edited_value_and_the_edit_is_checked():
    people = DecidingPeople(
        Decision(True, by="designer", args={"to": "eve@example.com", "subject": "Corrected",
                                            "body": "It shipped."}),
        Decision(True, by="designer", args={"to": 42, "subject": "x", "body": "y"}))
    with SmtpServer() as smtp:
        turns = [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in
                 (send("eve@example.com"), send("eve@example.com"))] + [{"text": "done"}]
        flow = agent_flow(scripted(turns), [mail_tool(smtp, {"mode": "always",
                                                             "confirm": ["subject"]})])
        result, rec, _ = await run(flow, reg=REG, people=people)
        subjects = [m["Subject"] for m in smtp.messages]
    assert subjects == ["Corrected"]  # the node got the person's value
    assert people.asked[0].confirm == ["subject"]
    calls = rec.debug_values()[0]["agent"]["tool_calls"]
    assert [c["status"] for c in calls] == ["success", "rejected"]
    assert calls[1]["error"].startswith("the edited arguments do not fit the tool: argument "
                                        "'to': 42 is not of type 'string'")
    assert [d.decision for d in rec.of("tool.decision")] == ["edited", "edited"]


async def test_no_decision_in_time_rejects_the_call():
    people = DecidingPeople(None)
    with SmtpServer() as smtp:
        turns = [{"tool_calls": [{"name": "send_email", "arguments": send("eve@x.com")[1]}]},
                 {"text": "done"}]
        flow = agent_flow(scripted(turns), [mail_tool(smtp, {"mode": "always",
                                                             "timeout_seconds": 0.2})])
        result, rec, _ = await run(flow, reg=REG, people=people)
        assert not smtp.messages
    [call] = rec.debug_values()[0]["agent"]["tool_calls"]
    assert call["status"] == "rejected" and call["error"] == "no decision within 0.2 s; not run"
    assert rec.of("tool.decision")[0].decision == "timeout"


async def test_a_sensitive_tool_asks_by_default_and_a_designer_can_turn_it_off():
    with SmtpServer() as smtp:
        turns = [{"tool_calls": [{"name": "send_email", "arguments": send("eve@x.com")[1]}]},
                 {"text": "done"}]
        people = DecidingPeople(Decision(True, by="designer"))
        flow = agent_flow(scripted(turns), [mail_tool(smtp)])  # no policy: send looks sensitive
        await run(flow, reg=REG, people=people)
        assert len(people.asked) == 1
        quiet = DecidingPeople()
        flow = agent_flow(scripted(turns), [mail_tool(smtp, {"mode": "never"})])
        result, rec, _ = await run(flow, reg=REG, people=quiet)
        assert quiet.asked == [] and not rec.of("tool.approval")
        assert len(smtp.messages) == 2


# -- limits -----------------------------------------------------------------------
async def test_per_tool_limits_per_turn_and_per_run():
    echo = {"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE},
            "tool": {"max_calls_per_turn": 2, "max_calls_per_run": 3}}
    call = {"name": "echo", "arguments": {"text": "x"}}
    turns = [{"tool_calls": [call, call, call]}, {"tool_calls": [call, call]}, {"text": "done"}]
    result, rec, _ = await run(agent_flow(scripted(turns), [echo]), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    calls = rec.debug_values()[0]["agent"]["tool_calls"]
    assert [c["status"] for c in calls] == ["success", "success", "refused", "success", "refused"]
    assert "at most 2 times in one answer (max_calls_per_turn)" in calls[2]["error"]
    assert "called 3 times in this run, its limit (max_calls_per_run)" in calls[4]["error"]


async def test_an_agents_tool_calls_per_message_are_bounded():
    call = {"name": "echo", "arguments": {"text": "x"}}
    turns = [{"tool_calls": [call, call]}, {"tool_calls": [call]}, {"text": "done"}]
    flow = agent_flow(scripted(turns, max_tool_calls_per_run=2),
                      [{"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE}}])
    result, rec, _ = await run(flow, reg=REG)
    calls = rec.debug_values()[0]["agent"]["tool_calls"]
    assert [c["status"] for c in calls] == ["success", "success", "refused"]
    assert "limit (max_tool_calls_per_run)" in calls[2]["error"]


# -- agents as tools ----------------------------------------------------------------
def nested_flow(llm: LlmServer, smtp: SmtpServer, tmp_csv_rows: list[dict]):
    """triage (openai) -> mail agent (scripted) -> reporter agent (scripted),
    the reporter writing a CSV into the workspace and handing it up."""
    nodes = [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("Tell the customers")}},
        {"id": "triage", "type": "ai.agent", "name": "Triage", "params": {
            "provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY")}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
        {"id": "mailer", "type": "ai.agent", "name": "Mail agent", "params": scripted([
            {"tool_calls": [{"name": "reporter", "arguments": {"task": "List the orders"}}]},
            {"tool_calls": [{"name": "send_email", "arguments": send("eve@example.com")[1]},
                            {"name": "think", "arguments": {"thought": "Report is ready."}}]},
            {"tool_calls": [{"name": "handoff", "arguments": {
                "result": "Mailed eve; report attached", "documents": ["orders.csv"]}}]}]),
         "tool": {"description": "Sends customer mail"}},
        {"id": "reporter", "type": "ai.agent", "name": "Reporter", "params": scripted([
            {"tool_calls": [{"name": "write_csv", "arguments": {
                "path": "orders.csv", "rows": tmp_csv_rows}}]},
            {"tool_calls": [{"name": "handoff", "arguments": {
                "result": "2 orders", "documents": ["orders.csv"]}}]}])},
        mail_tool(smtp, OUTSIDE_ONLY),
        # Writing inside the run's workspace needs nobody's approval here.
        {"id": "csv", "type": "csv.write", "params": {
            "path": AI_SCOPE, "rows": AI_SCOPE, "base_folder": fixed("{workspace}")},
         "tool": {"approval": {"mode": "never"}}},
        {"id": "note", "type": "ai.think"},
    ]
    wires = [(("ask", "out"), ("triage", "in")), (("triage", "out"), ("show", "in")),
             (("triage", "tools"), ("mailer", "in")), (("mailer", "tools"), ("reporter", "in")),
             (("mailer", "tools"), ("mail", "in")), (("mailer", "tools"), ("note", "in")),
             (("reporter", "tools"), ("csv", "in"))]
    return parse_flow({"format": "switchboard.flow/1", "name": "Triage", "nodes": nodes,
                       "wires": [{"from": list(a), "to": list(b)} for a, b in wires]})


async def test_parent_child_grandchild_with_a_handoff_carrying_a_csv(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-hitl-test")
    rows = [{"order": "A-1", "total": 120}, {"order": "A-2", "total": 80}]
    people = DecidingPeople(Decision(True, by="designer"))
    with LlmServer() as llm, SmtpServer() as smtp:
        llm.replies = [openai_reply(tool_calls=[("mail_agent", {"task": "Mail eve, with a report"})]),
                       openai_reply("All done.")]
        flow = nested_flow(llm, smtp, rows)
        assert not [p for p in validate_flow(flow, REG) if p.severity == "error"]
        result, rec, engine = await run(flow, reg=REG, people=people)
        assert result.status == "ok", rec.of("node.error")
        first, second = (r["body"] for r in llm.requests)
        assert [m["To"] for m in smtp.messages] == ["eve@example.com"]
    # The triage agent saw the mail agent as a tool taking a task.
    [tool] = first["tools"]
    assert tool["function"]["name"] == "mail_agent"
    assert tool["function"]["description"] == "Sends customer mail"
    assert set(tool["function"]["parameters"]["properties"]) == {"task", "documents"}
    # Its answer: the child's handed-off result, with the grandchild's CSV inline.
    [answer] = [json.loads(m["content"]) for m in second["messages"] if m["role"] == "tool"]
    assert answer["result"] == "Mailed eve; report attached"
    [doc] = answer["documents"]
    assert doc["path"] == "orders.csv" and doc["mime"] == "text/csv"
    # Recorded by the node that wrote it, with the agent and tool that asked.
    assert doc["created_by"] == {"node": "csv", "agent": "reporter", "tool": "write_csv"}
    assert doc["summary"] == "CSV, columns: order,total"
    assert doc["content"].splitlines() == ["order,total", "A-1,120", "A-2,80"]
    # The outside recipient waited for approval, inside the child agent.
    assert people.asked[0].agent == "mailer"
    # The timeline nests: every event of a child carries the call that runs it.
    calls = {e.caller_id: e for e in rec.of("tool.call")}
    top = next(e for e in calls.values() if e.tool == "mail_agent")
    assert top.parent == ""
    mid = next(e for e in calls.values() if e.tool == "reporter")
    assert mid.parent == top.caller_id and mid.agent == "mailer"
    csv_call = next(e for e in calls.values() if e.tool == "write_csv")
    assert csv_call.parent == mid.caller_id and csv_call.agent == "reporter"
    assert {e.parent for e in rec.of("llm.request") if e.agent == "reporter"} == {mid.caller_id}
    assert any(e.tool == "think" and e.parent == top.caller_id for e in calls.values())


def test_agents_calling_each_other_in_a_ring_are_refused():
    flow = parse_flow({"format": "switchboard.flow/1", "name": "ring", "nodes": [
        {"id": "a", "type": "ai.agent", "params": scripted([])},
        {"id": "b", "type": "ai.agent", "params": scripted([])},
        {"id": "c", "type": "ai.agent", "params": scripted([])}],
        "wires": [{"from": ["a", "tools"], "to": ["b", "in"]},
                  {"from": ["b", "tools"], "to": ["c", "in"]},
                  {"from": ["c", "tools"], "to": ["a", "in"]}]})
    [p] = [p for p in validate_flow(flow, REG) if "ring" in p.message]
    assert p.severity == "error"
    assert "a -> b -> c -> a" in p.message


async def test_a_child_that_hands_off_a_document_it_does_not_have_is_told(tmp_path):
    child = {"id": "child", "type": "ai.agent", "name": "Helper", "params": scripted([
        {"tool_calls": [{"name": "handoff", "arguments": {"result": "x",
                                                          "documents": ["nope.csv"]}}]},
        {"tool_calls": [{"name": "handoff", "arguments": {"result": "no documents then"}}]}])}
    parent = scripted([{"tool_calls": [{"name": "helper", "arguments": {"task": "t"}}]},
                       {"text": "{last_result}"}])
    result, rec, _ = await run(agent_flow(parent, [child]), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    handoffs = [e for e in rec.of("tool.result") if e.tool == "handoff"]
    assert [h.status for h in handoffs] == ["refused", "success"]
    assert "no document 'nope.csv' in this run's workspace" in handoffs[0].error
    [final] = rec.debug_values()
    assert json.loads(final["payload"]) == {"result": "no documents then"}


@pytest.mark.parametrize("depth, ok", [(9, True), (10, False)])  # a top agent and 8 or 9 below
async def test_agents_nest_to_a_bounded_depth(depth, ok):
    nodes, wires = [], []
    for i in range(depth):
        script = ([{"tool_calls": [{"name": f"level_{i + 1}", "arguments": {"task": "go"}}]},
                   {"text": f"level {i} done"}] if i < depth - 1 else [{"text": "bottom"}])
        nodes.append({"id": f"a{i}", "type": "ai.agent", "name": f"Level {i}",
                      "params": scripted(script)})
        if i:
            wires.append({"from": [f"a{i - 1}", "tools"], "to": [f"a{i}", "in"]})
    nodes += [{"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
              {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}}]
    wires += [{"from": ["ask", "out"], "to": ["a0", "in"]},
              {"from": ["a0", "out"], "to": ["show", "in"]}]
    flow = parse_flow({"format": "switchboard.flow/1", "name": "deep", "nodes": nodes,
                       "wires": wires})
    result, rec, _ = await run(flow, reg=REG)
    errors = [e.message for e in rec.of("node.error")]
    if ok:
        assert result.status == "ok", errors
    else:
        assert any("agents call agents 9 deep; at most 8" in m for m in errors), errors


# -- headless: switchboard run --approve ----------------------------------------------
def test_a_policy_file_decides_headless_and_the_decision_is_in_the_history(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from runtime.history import History

    root = Path(__file__).resolve().parents[1]
    example = root / "resources" / "examples" / "triage-delegation.flow.json"
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"rules": [
        {"tool": "send_email", "when": [{"arg": "to", "op": "endswith",
                                         "value": "@partner.example"}], "decision": "approve"},
        {"tool": "send_email", "decision": "deny", "reason": "no outside mail from CI"}]}))
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(example), "--approve",
                          str(policy)], capture_output=True, text=True, timeout=60, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # ann@ourcompany.com needed no approval; eve@example.com met the policy's deny.
    assert len(list((tmp_path / "data" / "outbox").glob("*.eml"))) == 1
    with History(tmp_path / "data" / "history.sqlite3") as history:
        [run_info] = history.runs()
        events = history.events(run_info.id)
    [approval] = [e for e in events if e.type == "tool.approval"]
    assert approval.args["to"] == "eve@example.com"
    assert approval.reason == 'rule: to does not end with "@ourcompany.com"'
    assert approval.parent  # asked inside the mail agent, a tool of the triage agent
    [decision] = [e for e in events if e.type == "tool.decision"]
    assert decision.decision == "rejected" and decision.by == f"policy:{policy}#2"
    assert decision.ts > 0  # when
    [result] = [e for e in events if e.type == "tool.result" and e.status == "rejected"]
    assert result.error.endswith("no outside mail from CI")


def test_the_example_in_docs_agents_md_runs(tmp_path):
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    [code] = re.findall(r"```python\n(.*?)```", (root / "docs" / "agents.md").read_text(), re.S)
    script = tmp_path / "agents_example.py"
    script.write_text(code)
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('Got it: {"result": "1 order", "documents": [{"path": '
                                 '"orders.csv", "mime": "text/csv"')
    assert "A-1,120" in out.stdout  # the document's text came inline


async def test_an_agent_past_its_wall_time_fails_naming_the_bound():
    from tests.servers.flows import SleepTool

    sleeper = {"id": "zz", "type": "test.sleep", "params": {"tag": AI_SCOPE,
                                                             "seconds": fixed(-1)}}
    turns = [{"tool_calls": [{"name": "sleep", "arguments": {"tag": "forever"}}]},
             {"text": "never"}]
    flow = agent_flow(scripted(turns, max_seconds=0.3), [sleeper])
    result, rec, _ = await run(flow, reg=Registry([Inject, DebugNode, Agent, SleepTool]))
    [err] = rec.of("node.error")
    assert err.node == "agent"
    assert err.message == "the agent did not finish within 0.3 s (max_seconds)"

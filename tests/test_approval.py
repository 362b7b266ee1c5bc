"""Approval policies and approvers on their own (runtime/approval.py); the
tool bridge's use of them is tested with real agent runs elsewhere."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import threading

import pytest

from runtime.approval import (
    ApprovalPolicy,
    ApprovalRequest,
    AutoApprover,
    DenyApprover,
    PolicyApprover,
    Rule,
    TerminalApprover,
    approver_for,
    default_policy,
    looks_sensitive,
    no_terminal_note,
)

OUTSIDE = Rule(arg="to", op="not_endswith", value="@ourcompany.com")


@pytest.mark.parametrize("args, asks", [
    ({"to": "ann@ourcompany.com"}, False),
    ({"to": "ANN@OurCompany.com"}, False),  # text compares ignore case
    ({"to": "eve@example.com"}, True),
    ({"to": ["ann@ourcompany.com", "eve@example.com"]}, True),  # any outside recipient
    ({"to": ["ann@ourcompany.com", "bob@ourcompany.com"]}, False),
    ({"subject": "no recipient"}, False),
])
def test_a_rule_asks_only_for_outside_recipients(args, asks):
    policy = ApprovalPolicy(mode="rules", rules=[OUTSIDE])
    reason = policy.reason(args)
    assert (reason is not None) == asks
    if asks:
        assert reason == 'rule: to does not end with "@ourcompany.com"'


@pytest.mark.parametrize("op, value, arg, asks", [
    ("gt", 100, 150, True), ("gt", 100, 100, False), ("le", 5, 5, True),
    ("gt", 100, "not a number", True),  # cannot judge: a person should see it
    ("in", ["EUR", "USD"], "eur", True), ("not_in", ["EUR"], "GBP", True),
    ("matches", r"^\d{4}-", "2026-11", True), ("not_matches", r"^\d{4}-", "2026-11", False),
    ("contains", "urgent", "Not URGENT at all", True), ("equals", 3, 3, True),
])
def test_rule_operators(op, value, arg, asks):
    assert Rule(arg="x", op=op, value=value).matches({"x": arg}) is asks


def test_rules_reach_into_nested_arguments():
    rule = Rule(arg="order.amount", op="gt", value=100)
    assert rule.matches({"order": {"amount": 250}})
    assert not rule.matches({"order": {}})
    assert Rule(arg="items.0", op="equals", value="a").matches({"items": ["a"]})


def test_modes_and_confirmed_arguments():
    assert ApprovalPolicy(mode="never").reason({"to": "x"}) is None
    assert ApprovalPolicy(mode="always").reason({}) == "every call of this tool needs approval"
    confirm = ApprovalPolicy(mode="never", confirm=["to", "amount"])
    assert confirm.reason({"to": "x", "body": "y"}) == "a person confirms to"
    with pytest.raises(ValueError):
        ApprovalPolicy(timeout_seconds=0)
    with pytest.raises(ValueError):
        ApprovalPolicy(rules=[{"arg": "x", "op": "sounds_like", "value": 1}])


@pytest.mark.parametrize("tool, node_type, sensitive", [
    ("send_email", "mail.send", True), ("delete_file", "files.delete", True),
    ("pay_invoice", "acme.pay", True), ("post_message", "http.request", True),
    ("write_text", "files.write_text", True), ("slugify", "text.slugify", False),
    ("word_count", "text.word_count", False), ("lookup_order", "db.query", False),
    ("sender_name", "x.lookup", False),  # a word inside another is not the word
])
def test_sensitive_looking_tools_ask_by_default(tool, node_type, sensitive):
    assert looks_sensitive(tool, node_type) is sensitive
    assert default_policy(tool, node_type).mode == ("always" if sensitive else "never")


def request(**args) -> ApprovalRequest:
    return ApprovalRequest(caller_id="c1", agent="agent", node="mail", tool="send_email",
                           args=args, reason="rule", confirm=["to"], schema={}, timeout=60)


async def test_auto_and_deny():
    assert (await AutoApprover().decide(request(to="x"))).kind == "approved"
    d = await DenyApprover().decide(request(to="x"))
    assert d.kind == "rejected" and "--approve deny" in d.reason


async def test_a_policy_file_decides_by_its_first_matching_rule(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"rules": [
        {"tool": "send_email", "when": [{"arg": "to", "op": "endswith",
                                         "value": "@ourcompany.com"}], "decision": "approve"},
        {"tool": "send_email", "decision": "deny", "reason": "no outside mail from CI"},
    ], "default": "approve"}))
    approver = approver_for(str(path))
    inside = await approver.decide(request(to="ann@ourcompany.com"))
    assert inside.approved and inside.by.endswith("policy.json#1")
    outside = await approver.decide(request(to="eve@example.com"))
    assert not outside.approved and outside.reason == "no outside mail from CI"
    other = await approver.decide(ApprovalRequest("c", "a", "n", "pay", {}, "r", [], {}, 1))
    assert other.approved  # the default


def test_a_bad_policy_file_is_named_with_its_field(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"rules": [{"tool": "x", "decision": "maybe"}]}))
    with pytest.raises(ValueError, match=r"p.json: rules.0.decision"):
        PolicyApprover(path)
    with pytest.raises(ValueError, match="expected ask, auto, deny or a policy .json file"):
        approver_for("sometimes")


async def test_no_terminal_means_a_clear_rejection(tmp_path):
    d = await TerminalApprover(str(tmp_path / "no-tty")).decide(request(to="x"))
    assert not d.approved and "no terminal to ask on" in d.reason
    not_a_tty = tmp_path / "file"
    not_a_tty.write_text("")
    approver = TerminalApprover(str(not_a_tty))
    d = await approver.decide(request(to="x"))
    assert not d.approved and "no terminal to ask on" in d.reason
    await approver.decide(request(to="y"))
    # Counted per tool, for the run's one closing line.
    assert approver.unasked == {"send_email": 2}
    note = no_terminal_note(approver)
    assert note.startswith("2 calls of send_email needed approval and did not run")
    assert "--approve auto" in note and "--approve POLICY.json" in note
    assert no_terminal_note(AutoApprover()) == ""


class FakeUser:
    """A person at a real pseudo-terminal: answers each prompt in turn."""

    def __init__(self, answers: list[str]) -> None:
        self.master, slave = pty.openpty()
        self.path = os.ttyname(slave)
        self.slave = slave
        self.answers = list(answers)
        self.seen = ""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.answers:
            chunk = os.read(self.master, 4096).decode(errors="replace")
            self.seen += chunk
            if chunk.rstrip().endswith(("?", ":", "]:")):
                os.write(self.master, (self.answers.pop(0) + "\n").encode())

    def close(self) -> None:
        os.close(self.slave)
        os.close(self.master)


@pytest.mark.parametrize("answers, kind, args, reason", [
    (["a"], "approved", None, ""),
    (["r", "not this customer"], "rejected", None, "not this customer"),
    (["e", '"ann@ourcompany.com"'], "edited", {"to": "ann@ourcompany.com", "body": "hi"}, ""),
])
async def test_the_terminal_prompt(answers, kind, args, reason):
    user = FakeUser(answers)
    try:
        d = await asyncio.wait_for(
            TerminalApprover(user.path).decide(request(to="eve@example.com", body="hi")), 30)
    finally:
        user.thread.join(5)
        user.close()
    assert d.kind == kind and d.by == "terminal"
    assert d.args == args
    assert d.reason == reason
    assert "approval needed: tool 'send_email'" in user.seen
    assert 'to = "eve@example.com"' in user.seen

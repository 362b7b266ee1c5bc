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
    policy_warnings,
    read_policy,
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
    with pytest.raises(ValueError, match=r'p.json: rules\[0\].decision: "maybe" is not one of: '
                                         r"approve, deny$"):
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


# -- policy files ------------------------------------------------------------------------


def docs_policy() -> str:
    """The complete example of docs/tools.md, "Approval policy files"."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "tools.md").read_text()
    [example] = re.findall(r"<!-- runnable: save approvals.json -->\n```json\n(.*?)```", text, re.S)
    return example


async def test_the_documented_policy_file_decides_as_the_docs_say(tmp_path):
    path = tmp_path / "approvals.json"
    path.write_text(docs_policy())
    policy, problems = read_policy(path)
    assert policy is not None and problems == []
    approver = PolicyApprover(path)
    customer = await approver.decide(request(to="eve@example.com", subject="Your order"))
    assert customer.approved and customer.by == f"policy:{path}#1"
    refund = await approver.decide(request(to="eve@example.com", subject="Your REFUND"))
    assert not refund.approved and refund.by == f"policy:{path}#2"
    # Every recipient must be one the rule approves: one outside is enough to deny.
    both = await approver.decide(request(to="eve@example.com, mallory@evil.test", subject="x"))
    assert not both.approved
    other = await approver.decide(ApprovalRequest("c", "a", "n", "pay", {}, "r", [], {}, 1))
    assert not other.approved and other.by == f"policy:{path}"  # the default: deny


def test_every_problem_of_a_policy_file_is_named_with_its_place(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"rules": [
        {"tool": "send_email", "when": [{"arg": "to", "op": "ends_with", "value": "@x.com"}],
         "decision": "approve", "when_": []},
        {"decision": "deny"}], "defualt": "approve"}))
    policy, problems = read_policy(path)
    assert policy is None
    assert [str(p).removeprefix(f"{path}: ") for p in problems] == [
        'rules[0].when[0].op: "ends_with" is not one of: contains, endswith, equals, ge, gt, '
        "in, le, lt, matches, not_contains, not_endswith, not_equals, not_in, not_matches, "
        "not_startswith, present, startswith",
        "rules[0].when_: unknown field (a rule has: tool, when, decision, reason)",
        "defualt: unknown field (a policy file has: rules, default)"]
    # What the fields cannot show: a pattern, a number, a rule never reached.
    path.write_text(json.dumps({"rules": [
        {"tool": "pay", "when": [{"arg": "amount", "op": "gt", "value": "a lot"},
                                 {"arg": "memo", "op": "matches", "value": "(unclosed"}],
         "decision": "deny"},
        {"decision": "deny"},
        {"tool": "send_email", "decision": "approve"}]}))
    policy, problems = read_policy(path)
    assert [(p.severity, p.field) for p in problems] == [
        ("error", "rules[0].when[0].value"), ("error", "rules[0].when[1].value"),
        ("warning", "rules[2]")]
    assert "never used: rules[1] decides every call before it" in str(problems[2])
    with pytest.raises(ValueError) as bad:
        PolicyApprover(path)
    assert str(bad.value).splitlines() == [str(p) for p in problems[:2]]
    path.write_text('{"rules": [')
    assert str(read_policy(path)[1][0]).endswith("not JSON: Expecting value at line 1 column 12")
    assert str(read_policy(tmp_path / "none.json")[1][0]).endswith("No such file or directory")


def test_a_policy_is_checked_against_the_flows_tools(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"rules": [
        {"tool": "send_mail", "decision": "approve"},
        {"tool": "send_email", "when": [{"arg": "recipient", "op": "present"}],
         "decision": "approve"}]}))
    policy, problems = read_policy(path)
    assert problems == []
    tools = {"send_email": {"properties": {"to": {}, "subject": {}}}, "lookup": {}}
    assert [str(p).removeprefix(f"{path}: ") for p in policy_warnings(policy, str(path), tools)] == [
        "rules[0].tool: warning: the flow has no tool 'send_mail' (its tools: lookup, send_email)",
        "rules[1].when[0].arg: warning: no argument 'recipient': send_email takes subject, to"]


@pytest.mark.parametrize("to, asks", [
    ("eve@example.com, ann@ourcompany.com", True),  # one outside recipient in a list text
    ("ann@ourcompany.com; bob@ourcompany.com", False),
    ("Ann <ann@ourcompany.com>", False),
    ('"ann@ourcompany.com" <mallory@evil.test>', True),  # the address, not the display name
])
def test_a_text_of_several_addresses_is_judged_address_by_address(to, asks):
    assert OUTSIDE.matches({"to": to}) is asks


def test_an_approving_rule_needs_every_value_and_a_judgeable_one():
    inside = Rule(arg="to", op="endswith", value="@ourcompany.com")
    assert inside.matches({"to": "ann@ourcompany.com, eve@example.com"})  # asks: any
    assert not inside.matches({"to": "ann@ourcompany.com, eve@example.com"}, approving=True)
    assert inside.matches({"to": ["ann@ourcompany.com"]}, approving=True)
    assert not inside.matches({"to": []}, approving=True)
    small = Rule(arg="amount", op="lt", value=100)
    assert small.matches({"amount": "unknown"})  # a person should see it
    assert not small.matches({"amount": "unknown"}, approving=True)

"""A person in the loop of a tool call: when a call must wait for approval,
and who decides.

A tool node's approval policy (the flow's ``tool.approval``) says *when*:
never, always, or when an argument matches a rule (``to`` does not end with
``@ourcompany.com``, ``amount`` > 100); and which AI arguments a person
confirms and may edit. Tools whose name or node type looks sensitive (send,
delete, pay, post, write) ask always unless the designer says otherwise.

An ``Approver`` says *what*: the designer's approval card, a terminal
prompt, a policy file, or a blanket auto / deny (``switchboard run
--approve``). Every request and decision is an event, so the inspector, the
events file and the history show who decided what, and when.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from email.utils import getaddresses
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Longest a call may wait for a person, whatever the policy says.
MAX_WAIT_SECONDS = 7 * 24 * 3600
DEFAULT_WAIT_SECONDS = 300.0
MAX_RULES = 50

Op = Literal["equals", "not_equals", "contains", "not_contains", "startswith",
             "not_startswith", "endswith", "not_endswith", "matches", "not_matches", "in",
             "not_in", "gt", "ge", "lt", "le", "present"]

_OP_TEXT = {
    "equals": "is", "not_equals": "is not", "contains": "contains",
    "not_contains": "does not contain", "startswith": "starts with",
    "not_startswith": "does not start with", "endswith": "ends with",
    "not_endswith": "does not end with", "matches": "matches", "not_matches": "does not match",
    "in": "is one of", "not_in": "is not one of", "gt": ">", "ge": ">=", "lt": "<", "le": "<=",
    "present": "is given",
}


class Rule(BaseModel):
    """``arg op value``: true for a call whose argument ``arg`` (a dotted
    path into the arguments) satisfies it. Text comparisons ignore case; a
    list argument (several recipients) matches when any item does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arg: str = Field(min_length=1, max_length=200)
    op: Op
    value: Any = None

    def text(self) -> str:
        if self.op == "present":
            return f"{self.arg} is given"
        return f"{self.arg} {_OP_TEXT[self.op]} {json.dumps(self.value, ensure_ascii=False)}"

    def matches(self, args: dict, *, approving: bool = False) -> bool:
        """Whether the call's arguments satisfy the rule. Several values (a
        list, or a text of several mail addresses, "a@x.com, b@y.com") match
        when any one does: "to does not end with X" asks for a person when
        any recipient is outside. ``approving`` (a policy file's rule that
        approves) asks more: every value must match, and one the rule cannot
        judge (a number test on a text) does not, so that a rule approves no
        call it was not written for."""
        value = _lookup(args, self.arg)
        if value is _ABSENT:
            return False
        if self.op == "present":
            return True
        items: list[Any] = []
        for item in value if isinstance(value, list) else [value]:
            items += _addresses(item)
        if approving:
            return bool(items) and all(self._one(item, False) for item in items)
        return any(self._one(item, True) for item in items)

    def _one(self, item: Any, unsure: bool = True) -> bool:
        op, want = self.op, self.value
        negative = op.startswith("not_")
        base = op[4:] if negative else op
        try:
            if base in ("gt", "ge", "lt", "le"):
                a, b = float(item), float(want)
                result = {"gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[base]
            elif base == "in":
                wanted = want if isinstance(want, list) else [want]
                result = _norm(item) in [_norm(w) for w in wanted]
            elif base == "equals":
                result = _norm(item) == _norm(want)
            elif base == "matches":
                result = re.search(str(want), str(item)) is not None
            else:
                a, b = str(item).casefold(), str(want).casefold()
                result = {"contains": b in a, "startswith": a.startswith(b),
                          "endswith": a.endswith(b)}[base]
        except (TypeError, ValueError, re.error):
            return unsure  # a value the rule cannot judge
        return not result if negative else result


_ABSENT = object()
#: Longest text a rule reads as a list of mail addresses (a mail node bounds
#: its recipients the same way); a longer one is judged as one value.
MAX_ADDRESS_TEXT = 20_000


def _addresses(item: Any) -> list[Any]:
    """A text of several mail addresses ("Ann <ann@x.com>, bob@y.com") as
    its bare addresses, as a mail node reads it; anything else as itself."""
    if not isinstance(item, str) or "@" not in item or len(item) > MAX_ADDRESS_TEXT \
            or not any(c in item for c in ",;<"):
        return [item]
    found = [addr for _name, addr in getaddresses([item.replace(";", ",")]) if "@" in addr]
    return found or [item]


def _lookup(args: dict, path: str) -> Any:
    value: Any = args
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _ABSENT
    return value


def _norm(v: Any) -> Any:
    return v.casefold() if isinstance(v, str) else v


class ApprovalPolicy(BaseModel):
    """When a tool's calls wait for a person (a tool node's setting)."""

    model_config = ConfigDict(extra="forbid")

    #: never: run at once; always: every call waits; rules: a call waits
    #: when any rule matches its arguments.
    mode: Literal["never", "always", "rules"] = "always"
    rules: list[Rule] = Field(default_factory=list, max_length=MAX_RULES)
    #: AI arguments a person must confirm, and may edit, before the call
    #: runs: a call with any of them waits, whatever the mode.
    confirm: list[str] = Field(default_factory=list, max_length=100)
    #: How long a call waits for a decision; then it is rejected.
    timeout_seconds: float = Field(DEFAULT_WAIT_SECONDS, gt=0, le=MAX_WAIT_SECONDS)

    def reason(self, args: dict) -> str | None:
        """Why this call must wait for a person, or None to run it at once."""
        if self.mode == "always":
            return "every call of this tool needs approval"
        if self.mode == "rules":
            for rule in self.rules:
                if rule.matches(args):
                    return f"rule: {rule.text()}"
        given = [a for a in self.confirm if a in args]
        if given:
            return f"a person confirms {', '.join(given)}"
        return None


# Words in a tool's name or node type that make a call one a person should
# see before it runs (seed 003's sensitive-tool detection).
_SENSITIVE = re.compile(
    r"(^|[._\-\s])(send|mail|email|sms|delete|remove|rm|erase|pay|payment|charge|refund|"
    r"transfer|purchase|buy|post|publish|tweet|upload|write|overwrite|move|rename|"
    r"exec|execute|shell|command|drop|truncate|deploy)(?=$|[._\-\s])",
    re.I)


def looks_sensitive(tool_name: str, node_type: str) -> bool:
    return bool(_SENSITIVE.search(tool_name) or _SENSITIVE.search(node_type))


def default_policy(tool_name: str, node_type: str) -> ApprovalPolicy:
    """The policy of a tool node whose designer set none: always ask for a
    sensitive-looking tool, never for the rest."""
    return ApprovalPolicy(mode="always" if looks_sensitive(tool_name, node_type) else "never")


# -- requests and decisions --------------------------------------------------
@dataclass(slots=True)
class ApprovalRequest:
    caller_id: str
    agent: str
    node: str
    tool: str
    args: dict
    reason: str
    confirm: list[str]
    schema: dict
    timeout: float
    asked_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class Decision:
    approved: bool
    by: str  # "designer", "terminal", "policy:FILE", "auto", "timeout", ...
    reason: str = ""
    args: dict | None = None  # the edited arguments, when a person edited them
    at: float = field(default_factory=time.time)

    @property
    def kind(self) -> str:
        if not self.approved:
            return "timeout" if self.by == "timeout" else "rejected"
        return "edited" if self.args is not None else "approved"


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision: ...


class AutoApprover:
    """Approves everything (``--approve auto``): for trusted, tested flows."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True, by="auto")


class DenyApprover:
    """Rejects every call that needs approval (``--approve deny``)."""

    def __init__(self, reason: str = "approval was denied (--approve deny)") -> None:
        self.reason = reason

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(False, by="deny", reason=self.reason)


class PolicyRule(BaseModel):
    """One rule of a policy file: for calls of ``tool`` (or any, ``*``) whose
    arguments satisfy every condition of ``when``, ``decision``."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field("*", min_length=1, max_length=200)  # a tool name, or * for any
    when: list[Rule] = Field(default_factory=list, max_length=MAX_RULES)  # all must match
    decision: Literal["approve", "deny"]
    reason: str = Field("", max_length=1000)


class PolicyFile(BaseModel):
    """``--approve POLICY.json``: the first rule whose tool and conditions
    match decides; else ``default``. The format: docs/tools.md, "Approval
    policy files"."""

    model_config = ConfigDict(extra="forbid")

    rules: list[PolicyRule] = Field(default_factory=list, max_length=1000)
    default: Literal["approve", "deny"] = "deny"


MAX_POLICY_BYTES = 1024 * 1024
#: Most problems of one policy file that are listed.
MAX_POLICY_PROBLEMS = 20
#: The fields each part of a policy file has, for "unknown field" errors.
_POLICY_FIELDS = {"policy file": "rules, default", "rule": "tool, when, decision, reason",
                  "condition": "arg, op, value"}
_NUMBER_OPS = ("gt", "ge", "lt", "le")


@dataclass(slots=True)
class PolicyProblem:
    """One thing wrong with a policy file, where it is (``rules[1].when[0].op``)."""

    file: str
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {'warning: ' if self.severity == 'warning' else ''}{self.message}"


class PolicyError(ValueError):
    """A policy file that cannot be used; ``problems`` lists why, one a line."""

    def __init__(self, problems: list[PolicyProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


def _place(loc: tuple) -> str:
    """``('rules', 0, 'when', 1, 'op')`` as ``rules[0].when[1].op``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _part(loc: tuple) -> str:
    """Which part of the file a place is in: the policy file, a rule or a condition."""
    if "when" in loc[:-1]:
        return "condition"
    return "rule" if "rules" in loc[:-1] else "policy file"


def _say(error: dict) -> str:
    kind, given = error["type"], error.get("input")
    shown = json.dumps(given, ensure_ascii=False, default=str)[:100]
    if kind == "literal_error":
        field = error["loc"][-1]
        allowed = (", ".join(sorted(_OP_TEXT)) if field == "op"
                   else error.get("ctx", {}).get("expected", "").replace("'", "")
                   .replace(" or ", ", "))
        return f"{shown} is not one of: {allowed}"
    if kind == "extra_forbidden":
        return f"unknown field (a {_part(error['loc'])} has: {_POLICY_FIELDS[_part(error['loc'])]})"
    if kind == "missing":
        return "missing" + (" (approve or deny)" if error["loc"][-1] == "decision" else "")
    return f"{error['msg']} (given: {shown})"


def _number(value: Any) -> bool:
    """Whether a rule can compare with ``value`` as a number (as Rule does)."""
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def check_policy(data: Any, file: str) -> tuple[PolicyFile | None, list[PolicyProblem]]:
    """The policy in ``data`` (a parsed policy file) and every problem found
    in it, each naming its place: the fields (as the model checks them), then
    what the model cannot see: a pattern that is no regular expression, a
    number comparison with no number, a rule that comes after one that
    takes every call (never reached)."""
    try:
        policy = PolicyFile.model_validate(data)
    except ValidationError as exc:
        return None, [PolicyProblem(file, _place(e["loc"]) or "(top)", _say(e))
                      for e in exc.errors()[:MAX_POLICY_PROBLEMS]]
    problems: list[PolicyProblem] = []
    star: int | None = None  # the first rule that decides every call
    every: dict[str, int] = {}  # per tool, the first rule that decides its every call
    for i, rule in enumerate(policy.rules):
        before = star if star is not None else every.get(rule.tool)
        if before is not None:
            of = "" if policy.rules[before].tool == "*" else f" of {rule.tool}"
            problems.append(PolicyProblem(file, f"rules[{i}]", f"never used: rules[{before}] "
                                          f"decides every call{of} before it", "warning"))
        for j, cond in enumerate(rule.when):
            where = f"rules[{i}].when[{j}].value"
            base = cond.op.removeprefix("not_")
            if base == "matches":
                try:
                    re.compile(str(cond.value))
                except re.error as exc:
                    problems.append(PolicyProblem(file, where, f"not a regular expression: {exc}"))
            elif base in _NUMBER_OPS and not _number(cond.value):
                problems.append(PolicyProblem(file, where, f"{cond.op} compares numbers: give "
                                              "a number"))
            elif cond.op != "present" and cond.value is None:
                problems.append(PolicyProblem(file, where, f"{cond.op} needs a value"))
        if not rule.when:
            if rule.tool == "*":
                star = i if star is None else star
            else:
                every.setdefault(rule.tool, i)
    return policy, problems[:MAX_POLICY_PROBLEMS]


def read_policy(path: str | Path) -> tuple[PolicyFile | None, list[PolicyProblem]]:
    """The policy file at ``path`` and its problems (check_policy); a file
    that cannot be read or is no JSON is one problem saying so."""
    file = str(path)
    try:
        raw = Path(path).read_bytes()
        if len(raw) > MAX_POLICY_BYTES:
            return None, [PolicyProblem(file, "", f"over {MAX_POLICY_BYTES // 1024} KB")]
        data = json.loads(raw)
    except OSError as exc:
        return None, [PolicyProblem(file, "", exc.strerror or str(exc))]
    except UnicodeDecodeError:
        return None, [PolicyProblem(file, "", "not UTF-8 text")]
    except json.JSONDecodeError as exc:
        return None, [PolicyProblem(file, "", f"not JSON: {exc.msg} at line {exc.lineno} "
                                              f"column {exc.colno}")]
    return check_policy(data, file)


def policy_warnings(policy: PolicyFile, file: str,
                    tools: dict[str, dict[str, Any]]) -> list[PolicyProblem]:
    """What a policy file says that a flow's tools (name -> the JSON schema
    its LLM sees) cannot match: a rule's tool the flow has not, a condition
    on an argument that tool does not take. Warnings: the same file may
    serve several flows."""
    out: list[PolicyProblem] = []
    names = ", ".join(sorted(tools)) or "none"
    for i, rule in enumerate(policy.rules):
        if rule.tool != "*" and rule.tool not in tools:
            out.append(PolicyProblem(file, f"rules[{i}].tool", f"the flow has no tool "
                                     f"'{rule.tool}' (its tools: {names})", "warning"))
            continue
        schemas = [tools[rule.tool]] if rule.tool != "*" else list(tools.values())
        for j, cond in enumerate(rule.when):
            top = cond.arg.split(".")[0]
            if schemas and not any(top in (s.get("properties") or {}) for s in schemas):
                taken = sorted({a for s in schemas for a in (s.get("properties") or {})})
                whose = f"{rule.tool} takes" if rule.tool != "*" else "the flow's tools take"
                out.append(PolicyProblem(file, f"rules[{i}].when[{j}].arg", f"no argument "
                                         f"'{top}': {whose} {', '.join(taken) or 'none'}",
                                         "warning"))
    return out[:MAX_POLICY_PROBLEMS]


class PolicyApprover:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        policy, problems = read_policy(path)
        errors = [p for p in problems if p.severity == "error"]
        if policy is None or errors:
            raise PolicyError(errors)
        self.policy = policy

    async def decide(self, request: ApprovalRequest) -> Decision:
        for i, rule in enumerate(self.policy.rules):
            if rule.tool not in ("*", request.tool):
                continue
            approving = rule.decision == "approve"
            if all(cond.matches(request.args, approving=approving) for cond in rule.when):
                return Decision(rule.decision == "approve", by=f"policy:{self.path}#{i + 1}",
                                reason=rule.reason or (
                                    "" if rule.decision == "approve"
                                    else f"denied by rule {i + 1} of {self.path}"))
        return Decision(self.policy.default == "approve", by=f"policy:{self.path}",
                        reason="" if self.policy.default == "approve"
                        else f"no rule of {self.path} approves it (default: deny)")


class TerminalApprover:
    """Asks on the controlling terminal (``--approve ask``), one call at a
    time; with no terminal, rejects saying how to decide instead."""

    #: What the LLM (and the tool.decision event) reads for each such call;
    #: how to decide without a terminal is said once, at the end of the run
    #: (no_terminal_note).
    NO_TTY = "approval needed, but there is no terminal to ask on; the call did not run"

    def __init__(self, tty_path: str = "/dev/tty") -> None:
        self.tty_path = tty_path
        self._lock = threading.Lock()
        #: Per tool, the calls rejected because there was no terminal.
        self.unasked: dict[str, int] = {}
        self._count = threading.Lock()

    async def decide(self, request: ApprovalRequest) -> Decision:
        import asyncio

        return await asyncio.to_thread(self._ask, request)

    def _no_tty(self, req: ApprovalRequest) -> Decision:
        with self._count:
            self.unasked[req.tool] = self.unasked.get(req.tool, 0) + 1
        return Decision(False, by="terminal", reason=self.NO_TTY)

    def _ask(self, req: ApprovalRequest) -> Decision:
        try:
            # Not "r+": a terminal is not seekable, which text mode "r+" needs.
            fd = os.open(self.tty_path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return self._no_tty(req)
        tty = open(fd, "r+b", buffering=0)  # noqa: SIM115 - closed by the with below
        tty = io.TextIOWrapper(tty, encoding="utf-8", errors="replace", line_buffering=True,
                               write_through=True)
        with self._lock, tty:
            if not tty.isatty():
                return self._no_tty(req)
            w = tty.write
            w(f"\n--- approval needed: tool '{req.tool}' (agent {req.agent}, node {req.node})\n")
            w(f"    why: {req.reason}\n")
            for k, v in req.args.items():
                w(f"    {k} = {json.dumps(v, ensure_ascii=False)[:500]}\n")
            tty.flush()
            while True:
                w("[a]pprove, [e]dit, [r]eject? ")
                tty.flush()
                answer = tty.readline().strip().lower()
                if answer in ("a", "approve", "y", "yes"):
                    return Decision(True, by="terminal")
                if answer in ("r", "reject", "n", "no", ""):
                    w("reason (the LLM sees it): ")
                    tty.flush()
                    reason = tty.readline().strip() or "rejected at the terminal"
                    return Decision(False, by="terminal", reason=reason)
                if answer in ("e", "edit"):
                    edited = dict(req.args)
                    for key in (req.confirm or list(req.args)):
                        current = json.dumps(edited.get(key), ensure_ascii=False)
                        w(f"{key} [{current}]: ")
                        tty.flush()
                        text = tty.readline().rstrip("\n")
                        if text.strip():
                            try:
                                edited[key] = json.loads(text)
                            except ValueError:
                                edited[key] = text
                    return Decision(True, by="terminal", args=edited)


def no_terminal_note(approver: Any) -> str:
    """The closing line of a run (``switchboard run``, ``mcp serve``) in which
    calls needed approval and there was no terminal to ask on: said once per
    run, naming the ways to decide without one; "" when nothing was refused
    so."""
    unasked = dict(getattr(approver, "unasked", None) or {})
    if not unasked:
        return ""
    n = sum(unasked.values())
    tools = ", ".join(sorted(unasked)[:5]) + (" ..." if len(unasked) > 5 else "")
    return (f"{n} call{'s' if n != 1 else ''} of {tools} needed approval and did not run: "
            "there is no terminal to ask on. To decide without one: --approve auto (approve "
            "every call), --approve POLICY.json (its rules decide; "
            "docs/tools.md#approval-policy-files), or set the tool's approval to never "
            "('Ask a person before a call' on the tool node)")


def approver_for(option: str) -> Approver:
    """The approver ``switchboard run --approve OPTION`` names; ValueError
    naming the option otherwise."""
    if option == "ask":
        return TerminalApprover()
    if option == "auto":
        return AutoApprover()
    if option == "deny":
        return DenyApprover()
    if option.endswith(".json") or Path(option).is_file():
        return PolicyApprover(option)
    raise ValueError(f"--approve {option!r}: expected ask, auto, deny or a policy .json file")


# -- asking a person a question (ai.ask_human) ---------------------------------
@dataclass(slots=True)
class Reply:
    answer: str | None  # None: no answer (timeout, no one to ask)
    by: str
    reason: str = ""


class People:
    """Who a run asks: for approval of tool calls and for answers
    (``ai.ask_human``). The CLI makes one from ``--approve``; the designer
    puts its approval cards and chat panel behind the same two methods.
    ``engine.people`` holds a run's; ``people_of`` gives the default (the
    terminal) when none was set."""

    def __init__(self, approver: Approver | None = None, tty_path: str = "/dev/tty") -> None:
        self.tty_path = tty_path
        self.approver = approver or TerminalApprover(tty_path)
        self._lock = threading.Lock()

    async def approve(self, request: ApprovalRequest) -> Decision:
        """The decision on a call, or a rejection when none came in time."""
        import asyncio

        try:
            return await asyncio.wait_for(self.approver.decide(request), request.timeout)
        except TimeoutError:
            return Decision(False, by="timeout", reason=f"no decision within "
                                                        f"{request.timeout:g} s; not run")

    async def ask(self, question: str, choices: list[str] | None, *, timeout: float,
                  node: str = "", agent: str = "") -> Reply:
        import asyncio

        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._ask_terminal, question, choices), timeout)
        except TimeoutError:
            return Reply(None, by="timeout", reason=f"no answer within {timeout:g} s")

    def _ask_terminal(self, question: str, choices: list[str] | None) -> Reply:
        try:
            fd = os.open(self.tty_path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return Reply(None, by="terminal", reason="no one to ask: there is no terminal "
                         "(give the Ask Human node a fixed answer for unattended runs)")
        raw = open(fd, "r+b", buffering=0)  # noqa: SIM115 - closed below
        tty = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", line_buffering=True,
                               write_through=True)
        with self._lock, tty:
            if not tty.isatty():
                return Reply(None, by="terminal", reason="no one to ask: not a terminal")
            tty.write(f"\n--- the agent asks: {question}\n")
            if choices:
                for i, c in enumerate(choices, 1):
                    tty.write(f"    {i}. {c}\n")
            while True:
                tty.write("answer: ")
                text = tty.readline().strip()
                if choices and text.isdigit() and 1 <= int(text) <= len(choices):
                    text = choices[int(text) - 1]
                if text and (not choices or text in choices):
                    return Reply(text[:10_000], by="terminal")
                if choices:
                    tty.write(f"    pick 1-{len(choices)} or type one of the choices\n")


_DEFAULT_PEOPLE: People | None = None


def people_of(engine: Any) -> People:
    global _DEFAULT_PEOPLE
    people = getattr(engine, "people", None)
    if people is not None:
        return people
    if _DEFAULT_PEOPLE is None:
        _DEFAULT_PEOPLE = People()
    return _DEFAULT_PEOPLE

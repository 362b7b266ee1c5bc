"""Running one test case: its flow built fresh, its mocks swapped in for
the nodes' code, its message injected at its input node (``Engine.entry``,
as a rerun from a node), and what the run's events say judged against its
expectations."""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import (
    AnswerExpect,
    Case,
    DebugExpect,
    EndExpect,
    Match,
    Mock,
    NoNodeErrorExpect,
    OutputExpect,
    TestFileError,
    ToolCallsExpect,
)
from .scorers import ScoreExpect, judge_score


@dataclass
class CaseResult:
    name: str
    ok: bool
    ms: float
    #: Per failed expectation: (what was expected, what happened, a diff or "").
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: The scores of its ``score`` expectations (``similarity 0.93``), for its line.
    scores: list[str] = field(default_factory=list)


@dataclass
class Happened:
    """What a run did, gathered from its events."""

    debug: list[tuple[str, Any]] = field(default_factory=list)
    sent: list[tuple[str, str, Any]] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    reason: str = ""
    exit_code: int = 0


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def _diff(expected: Any, actual: Any) -> str:
    a = _show(expected).splitlines()
    b = _show(actual).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "expected", "actual", lineterm="", n=2))


def _contains(value: Any, part: Any) -> bool:
    if isinstance(value, str):
        return isinstance(part, str) and part in value
    if isinstance(value, dict):
        if isinstance(part, dict):
            return all(k in value and (value[k] == v or _contains(value[k], v))
                       for k, v in part.items())
        return part in value
    if isinstance(value, list):
        return part in value or any(_contains(v, part) for v in value
                                    if isinstance(v, (dict, list)))
    return value == part


def _expr_true(expr: str, msg: Any) -> bool:
    from runtime.expressions import ExpressionError, compile_template
    from runtime.expressions.rendering import _render

    try:
        return bool(_render(compile_template("{{ (" + expr + ") }}"), {"msg": msg}))
    except ExpressionError:
        raise
    except Exception:
        return False


def _holds(m: Match, value: Any) -> bool:
    fields = m.model_fields_set
    if "equals" in fields and value != m.equals:
        return False
    if "contains" in fields and not _contains(value, m.contains):
        return False
    if m.matches is not None and not (isinstance(value, str) and re.search(m.matches, value)):
        return False
    return m.expr is None or _expr_true(m.expr, value)


def _closest(m: Match, values: list[Any]) -> Any:
    target = m.equals if "equals" in m.model_fields_set else m.contains
    if target is None:
        return values[-1]
    want = _show(target)
    return max(values, key=lambda v: difflib.SequenceMatcher(None, want, _show(v)).ratio())


def _ops(m: Match) -> str:
    return ", ".join(f"{k} {json.dumps(getattr(m, k), ensure_ascii=False, default=str)}"
                     for k in ("equals", "contains", "matches", "expr")
                     if k in m.model_fields_set)


def judge(exp: Any, h: Happened) -> tuple[str, str, str] | None:
    """None when ``exp`` holds; else (expected, happened, diff)."""
    if isinstance(exp, (DebugExpect, OutputExpect)):
        if isinstance(exp, DebugExpect):
            values = [v for n, v in h.debug if exp.node is None or n == exp.node]
            what = f"debug{' ' + exp.node if exp.node else ''}: {_ops(exp)}"
        else:
            values = [v for n, p, v in h.sent if n == exp.node and p == exp.port]
            what = f"output {exp.node} [{exp.port}]: {_ops(exp)}"
        if any(_holds(exp, v) for v in values):
            return None
        if not values:
            return what, "nothing was shown" if isinstance(exp, DebugExpect) else \
                "the node sent nothing there", ""
        best = _closest(exp, values)
        target = exp.equals if "equals" in exp.model_fields_set else exp.contains
        return (what, f"{len(values)} value{'s' * (len(values) != 1)}, none matching; closest: "
                f"{json.dumps(best, ensure_ascii=False, default=str)}",
                _diff(target, best) if target is not None else "")
    if isinstance(exp, ToolCallsExpect):
        names = [t for t, _ in h.calls]
        got = f"calls: {json.dumps(names)}"
        bad = [t for t in exp.never if t in names]
        if bad:
            return f"tool_calls: never {json.dumps(exp.never)}", got, ""
        if exp.count is not None and len(names) != exp.count:
            return f"tool_calls: count {exp.count}", got, ""
        if exp.tools is not None:
            ok = names == exp.tools if exp.order == "exact" else sorted(names) == sorted(exp.tools)
            if not ok:
                return f"tool_calls: {json.dumps(exp.tools)} (order {exp.order})", got, \
                    _diff(exp.tools, names)
        for i, want in enumerate(exp.args or []):
            if want is None:
                continue
            if i >= len(h.calls):
                return f"tool_calls: args of call {i + 1}", got, ""
            args = h.calls[i][1]
            if (want.equals is not None and args != want.equals) or \
                    (want.contains is not None and not _contains(args, want.contains)):
                target = want.equals if want.equals is not None else want.contains
                return f"tool_calls: args of call {i + 1} ({names[i]})", \
                    f"args {json.dumps(args, ensure_ascii=False, default=str)}", _diff(target, args)
        return None
    if isinstance(exp, AnswerExpect):
        texts = [t for a, t in h.answers if exp.agent is None or a == exp.agent]
        m = Match.model_construct(**{k: getattr(exp, k) for k in ("equals", "contains", "matches")
                                     if getattr(exp, k) is not None})
        if texts and _holds(m, texts[-1]):
            return None
        what = "answer: " + _ops(m)
        if not texts:
            return what, "no agent answered", ""
        target = exp.equals if exp.equals is not None else exp.contains
        return what, f"answer {json.dumps(texts[-1], ensure_ascii=False)}", \
            _diff(target, texts[-1]) if target is not None else ""
    if isinstance(exp, EndExpect):
        if exp.reason is not None and h.reason != exp.reason:
            return f"end: reason {exp.reason}", f"the run ended {h.reason}" + (
                f" ({h.errors[0][0]}: {h.errors[0][1]})" if h.errors else ""), ""
        if exp.exit_code is not None and h.exit_code != exp.exit_code:
            return f"end: exit_code {exp.exit_code}", f"exit code {h.exit_code}", ""
        return None
    if isinstance(exp, NoNodeErrorExpect):
        if h.errors:
            return "no_node_error", "; ".join(f"node {n}: {t}" for n, t in h.errors[:5]), ""
        return None
    if isinstance(exp, ScoreExpect):
        return judge_score(exp, h.answers, h.debug)[1]
    raise AssertionError(exp)  # pragma: no cover: the models allow no other kind


class MockError(RuntimeError):
    """The error a mock with ``error`` raises in place of its node's work
    (the run shows it as ``MockError: TEXT``)."""


def _mock(engine: Any, node_id: str, mock: Mock) -> None:
    """Swap the node's code for the mock's answer (runtime.pins' way)."""
    from runtime.pins import PinnedOutput, _nothing

    rt = engine.nodes[node_id]
    node = rt.node
    node.start = node.close = _nothing
    node.blocking = False
    if mock.output is not None:
        pinned = PinnedOutput(rt, mock.output)
        node.generate = pinned.generate
        rt.on_message = pinned.on_message
    else:
        text = mock.error

        def fail(msg: dict) -> Any:
            raise MockError(text)

        async def generate() -> None:
            raise MockError(text)

        node.generate = generate
        rt.on_message = fail
    rt.gate -= rt.is_async
    rt.is_async = False
    rt.sem = None


def _gather(bus: Any, h: Happened) -> None:
    seen: set[tuple[str, str, str]] = set()

    def on(e: Any) -> None:
        t = e.type
        if t == "debug":
            h.debug.append((e.node, e.value))
        elif t == "message.sent":
            msgid = str(e.msg.get("_msgid", "")) if isinstance(e.msg, dict) else ""
            key = (e.source, e.port, msgid)
            if not msgid or key not in seen:
                seen.add(key)
                h.sent.append((e.source, e.port, e.msg))
        elif t == "tool.call":
            h.calls.append((e.tool, e.args))
        elif t == "llm.response" and not e.tool_calls:
            h.answers.append((e.agent, e.text))
        elif t == "node.error" and not e.caught:
            h.errors.append((e.node, e.message))

    bus.subscribe(on)


def run_case(flow_file: str, case: Case, tape: Any = None) -> CaseResult:
    """Run one case on a fresh engine of the flow at ``flow_file``;
    TestFileError for a case that names what the flow lacks. ``tape``: the
    case's cassette.Tape, which its agents' LLM requests go through."""
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import FlowError, load_flow

    try:
        flow = load_flow(flow_file, None, validate=True)
    except FlowError as exc:
        raise TestFileError(f"{flow_file}: the flow does not load: "
                            + "; ".join(str(p) for p in exc.problems[:3])) from None
    except OSError as exc:
        raise TestFileError(f"{flow_file}: cannot be read ({exc.strerror or exc})") from None
    bus = EventBus()
    h = Happened()
    _gather(bus, h)
    engine = Engine(flow, bus=bus, trace=True, record=False, file=flow_file, validated=True)
    for where, node_id in [("input.node", case.input.node)] + \
            [(f"mocks.{n}", n) for n in case.mocks]:
        if node_id not in engine.nodes:
            raise TestFileError(f"case '{case.name}': {where}: no node '{node_id}' in {flow_file} "
                                f"(its nodes: {', '.join(engine.nodes)})")
    for node_id, mock in case.mocks.items():
        _mock(engine, node_id, mock)

    async def inject(engine: Any) -> None:
        from runtime.message import Message, deep_copy

        if tape is not None:
            from .cassette import RESOURCE

            engine.resource(RESOURCE, lambda: tape)
        engine.inject(case.input.node, Message(deep_copy(case.input.message)))

    engine.entry = inject
    engine.from_node = case.input.node
    t0 = time.perf_counter()
    result = asyncio.run(engine.run(case.timeout_seconds))
    ms = (time.perf_counter() - t0) * 1000
    h.reason = result.reason
    h.exit_code = 1 if result.reason == "failed" or (result.reason == "timeout" and result.errors) \
        else 124 if result.reason == "timeout" and result.in_flight else 0
    failures = [f for f in (judge(e, h) for e in case.expect) if f is not None]
    if tape is not None and tape.problem is not None:
        failures.insert(0, ("LLM answers as recorded", *tape.problem))
    scores = [n for e in case.expect if isinstance(e, ScoreExpect)
              for n in [judge_score(e, h.answers, h.debug)[0]] if n]
    return CaseResult(case.name, not failures, ms, failures, scores)


def run_file(tests_file: str | Path, pattern: str | None = None,
             record: str | None = None) -> list[CaseResult]:
    """Every case of a test file (whose names match ``pattern``, a
    substring or a regex), one after another. Their agents' LLM answers
    come from the cassette beside it; ``record`` "new" records the cases
    it has none for through the real model, "all" records every case again
    (the cassette is written after the last case)."""
    from .cassette import Cassette, cassette_beside
    from .reading import read_tests

    tests_file = Path(tests_file)
    tests = read_tests(tests_file)
    flow_file = flow_beside(tests_file, tests.flow)
    cassette = Cassette(cassette_beside(tests_file))
    out = []
    for case in tests.cases:
        if pattern and pattern not in case.name and not _search(pattern, case.name):
            continue
        tape = cassette.tape(case.name, record == "all" or (
            record == "new" and case.name not in cassette.cases))
        out.append(run_case(str(flow_file), case, tape))
        tape.keep()
    if cassette.changed:
        cassette.save()
    return out


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False  # not a regex: matched as text only


def flow_beside(tests_file: Path, named: str | None = None) -> Path:
    """The flow a test file tests: its ``flow`` field (relative to it), else
    ``NAME.flow.json`` (or ``NAME.json``) for ``NAME.tests.json``."""
    if named:
        return tests_file.parent / named
    stem = tests_file.name.removesuffix(".tests.json")
    for candidate in (f"{stem}.flow.json", f"{stem}.json"):
        if (tests_file.parent / candidate).exists():
            return tests_file.parent / candidate
    raise TestFileError(f"{tests_file}: no flow beside it ({stem}.flow.json); name it with "
                        "the field 'flow'")

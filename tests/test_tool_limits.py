"""Bounds on what the AI controls (issue 5, "Hardening"): argument depth and
size, tool calls per turn, the tool timeout for blocking plain-function
nodes, how much of a value an error quotes, and what an unexpected
exception tells the LLM. Driven through the scripted provider (no network),
real engine, real nodes; docs/tools.md, "Limits", describes them."""

from __future__ import annotations

import json
import threading

import pytest

from runtime.arguments import (
    MAX_ARG_BYTES,
    MAX_ARG_DEPTH,
    argument_problem,
    parse_arguments,
    preview,
)
from runtime.node import AI, CUSTOM, Node, NodeConfigError, Output, Param, Tool, node
from runtime.registry import Registry
from tests.servers.flows import AI_SCOPE, EchoTool, agent_flow, registry, run, scripted

MAIN_THREAD = threading.get_ident()


@pytest.fixture(autouse=True)
def _reset():
    EchoTool.calls = []
    BlockTool.threads = []
    InlineTool.threads = []
    yield
    BlockTool.release.set()  # let a thread a test left waiting end
    BlockTool.release = threading.Event()


@node("test.block", name="Block", category="Test", tool=Tool("block", "Blocks"))
class BlockTool(Node):
    """A plain function that blocks (waits for the test to release it, at
    most 5 s) and says so."""

    blocking = True
    how = Param(str, "wait | quick | oserror", scope=AI, allow=AI | CUSTOM)
    done = Output(str, "What it did")

    release = threading.Event()
    threads: list[int] = []

    def on_message(self, msg):
        BlockTool.threads.append(threading.get_ident())
        how = self.how.get(msg)
        if how == "wait":
            BlockTool.release.wait(5)
        elif how == "oserror":
            raise OSError("/home/alice/secret/path db.internal.example")
        self.done.set(msg, how)


@node("test.inline", name="Inline", category="Test", tool=Tool("inline", "Returns at once"))
class InlineTool(Node):
    """A plain function that does not block: it runs inline."""

    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)
    threads: list[int] = []

    def on_message(self, msg):
        InlineTool.threads.append(threading.get_ident())


@node("test.crash", name="Crash", category="Test", tool=Tool("crash", "Fails"))
class CrashTool(Node):
    kind = Param(str, "oserror | config", scope=AI, allow=AI | CUSTOM)

    async def on_message(self, msg):
        if self.kind.get(msg) == "config":
            raise NodeConfigError("crash: the widget needs a name")
        raise OSError("/home/alice/secret/path db.internal.example")


def reg() -> Registry:
    return Registry([*registry(), BlockTool, InlineTool, CrashTool])


def echo(params: dict | None = None) -> dict:
    return {"id": "echo", "type": "test.echo", "params": params or {}}


def nested(depth: int, leaf=1):
    """A list nested ``depth`` levels deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def one_call(arguments, name: str = "echo", **agent) -> dict:
    return scripted([{"tool_calls": [{"name": name, "arguments": arguments}]},
                     {"text": "gave up"}], **agent)


def assert_refused_and_bounded(rec, why: str) -> None:
    """Refused naming the bound, the node never ran, and every event holds a
    bounded preview, never the original (which pydantic could not even
    serialise past a few hundred levels)."""
    assert EchoTool.calls == []
    [result] = rec.of("tool.result")
    assert result.status == "refused"
    assert why in result.error
    [call] = rec.of("tool.call")
    assert isinstance(call.args, str) and len(call.args) <= 201
    dump = rec.dump()  # every event serialises
    # run.replay carries the flow file as the designer wrote it (here a
    # script holding the oversized call: the designer's text, bounded by the
    # flow file's own limits, not the LLM's); everything else is bounded.
    [replay] = rec.of("run.replay")
    assert len(dump) - len(json.dumps(replay.flow, separators=(",", ":"))) < 20_000
    # The model is told why, and its own oversized call is not sent back.
    tool_msg = rec.of("llm.request")[1].messages[-1]
    assert tool_msg["role"] == "tool" and why in tool_msg["content"]
    assistant = rec.of("llm.request")[1].messages[-2]
    assert assistant["tool_calls"][0]["arguments"] == "{}"
    [msg] = rec.debug_values()
    assert msg["agent"]["tool_calls"][0]["status"] == "refused"
    assert len(json.dumps(msg["agent"])) < 2000


# -- 6. depth and size of arguments --------------------------------------------

DEEP = [
    pytest.param('{"text": ' + "[" * 300 + "]" * 300 + "}", id="text-300-deep"),
    # json.loads itself would raise RecursionError on this one
    pytest.param('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}", id="text-100000-deep"),
]
# (An object 300 deep, as the anthropic SDK hands it over, is in
# test_agent_anthropic.py: a flow file cannot even hold one for the scripted
# provider.)


@pytest.mark.parametrize("arguments", DEEP)
async def test_arguments_nested_too_deep_are_refused_before_any_node_runs(arguments):
    result, rec, _ = await run(agent_flow(one_call(arguments), [echo()]), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert_refused_and_bounded(rec, f"nested more than {MAX_ARG_DEPTH} levels deep")


LARGE = [
    pytest.param(json.dumps({"text": "x" * 300_000}), id="text-300KB"),
    pytest.param({"text": "x" * 300_000}, id="object-300KB"),
    pytest.param({"text": "hi", "count": list(range(200_000))}, id="object-200000-items"),
]


@pytest.mark.parametrize("arguments", LARGE)
async def test_arguments_larger_than_the_limit_are_refused(arguments):
    result, rec, _ = await run(agent_flow(one_call(arguments), [echo({"count": AI_SCOPE})]),
                               reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert_refused_and_bounded(rec, f"more than the {MAX_ARG_BYTES // 1024} KB")


def test_depth_bound_is_exact_for_text_and_objects():
    def text(depth: int) -> str:  # the object is level 1
        return '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    assert parse_arguments(text(MAX_ARG_DEPTH)) == ({"a": nested(MAX_ARG_DEPTH - 2, [])}, None)
    value, why = parse_arguments(text(MAX_ARG_DEPTH + 1))
    assert why == "the arguments are nested more than 32 levels deep (the limit is 32)"
    assert isinstance(value, str) and len(value) <= 201
    assert argument_problem({"a": nested(MAX_ARG_DEPTH - 2, [])}) is None
    assert "32 levels" in argument_problem({"a": nested(MAX_ARG_DEPTH - 1, [])})
    # Brackets inside strings do not count as depth.
    assert parse_arguments(json.dumps({"a": "[" * 1000}))[1] is None


def test_limit_checks_never_recurse():
    deep = nested(200_000)  # far past the interpreter's recursion limit
    assert "32 levels" in argument_problem(deep)
    assert preview(deep).startswith("[[[[") and len(preview(deep)) <= 201
    value, why = parse_arguments(deep)
    assert "32 levels" in why and len(value) <= 201
    value, why = parse_arguments("[" * 200_000)
    assert "32 levels" in why or "not valid JSON" in why


def test_size_is_measured_in_utf8_bytes():
    text = json.dumps({"a": "é" * (MAX_ARG_BYTES // 2)}, ensure_ascii=False)
    assert len(text) < MAX_ARG_BYTES < len(text.encode())
    assert "KB" in parse_arguments(text)[1]
    assert parse_arguments(json.dumps({"a": "é" * 1000}, ensure_ascii=False))[1] is None


# -- 7b. tool calls per turn -----------------------------------------------------

@pytest.mark.parametrize(("limit", "ran"), [(None, 16), (3, 3)])
async def test_calls_past_max_tool_calls_per_turn_are_refused(limit, ran):
    calls = [{"name": "echo", "arguments": {"text": f"t{i}"}} for i in range(20)]
    extra = {} if limit is None else {"max_tool_calls_per_turn": limit}
    flow = agent_flow(scripted([{"tool_calls": calls}, {"text": "done"}], **extra), [echo()])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert [c["text"] for c in EchoTool.calls] == [f"t{i}" for i in range(ran)]
    results = rec.of("tool.result")
    assert [r.status for r in results] == ["success"] * ran + ["refused"] * (20 - ran)
    assert f"max_tool_calls_per_turn={ran}" in results[-1].error
    assert "did not run" in results[-1].error
    assert len(rec.of("tool.call")) == 20
    # Every call gets an answer the model can read, in call order.
    tool_msgs = [m for m in rec.of("llm.request")[1].messages if m["role"] == "tool"]
    assert len(tool_msgs) == 20 and "max_tool_calls_per_turn" in tool_msgs[-1]["content"]


def test_agent_refuses_a_zero_call_limit():
    from runtime.flow import validate_flow

    flow = agent_flow(scripted([], max_tool_calls_per_turn=0), [echo()])
    problems = validate_flow(flow, reg())
    assert any(p.field == "params.max_tool_calls_per_turn" for p in problems)


# -- 7c. the tool timeout and blocking plain-function nodes ------------------------

async def test_a_blocking_plain_function_node_times_out_on_time():
    flow = agent_flow(one_call({"how": "wait"}, name="block", tool_timeout_seconds=0.05),
                      [{"id": "b", "type": "test.block"}])
    result, rec, _ = await run(flow, reg=reg())
    # The run ended while the node still waits: the timeout fired although
    # a thread cannot be interrupted.
    assert not BlockTool.release.is_set()
    assert result.status == "ok", rec.of("node.error")
    [r] = rec.of("tool.result")
    assert r.status == "error" and "did not finish within 0.05 s" in r.error
    assert BlockTool.threads and BlockTool.threads[0] != MAIN_THREAD


async def test_a_blocking_node_in_a_thread_returns_its_outputs_and_errors():
    flow = agent_flow(scripted([{"tool_calls": [
        {"name": "block", "arguments": {"how": "quick"}},
        {"name": "block", "arguments": {"how": "oserror"}}]}, {"text": "ok"}],
        tool_timeout_seconds=5), [{"id": "b", "type": "test.block"}])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    quick, failed = rec.of("tool.result")
    assert quick.status == "success" and quick.data == {"done": "quick"}
    assert failed.status == "error" and failed.error.startswith("OSError: ")
    assert all(t != MAIN_THREAD for t in BlockTool.threads)


async def test_a_plain_function_node_that_does_not_block_runs_inline():
    flow = agent_flow(one_call({"x": 1}, name="inline"), [{"id": "i", "type": "test.inline"}])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert InlineTool.threads == [MAIN_THREAD]
    assert rec.of("tool.result")[0].status == "success"


# -- 8. how much of a value an error quotes ----------------------------------------

BIG = 200_000  # under the size bound, so the value itself is checked
QUOTED = [
    pytest.param({"text": "hi", "count": "x" * BIG}, "is not of type 'integer'", id="wrong-type"),
    pytest.param({"text": "hi", "mode": "x" * BIG}, "is not one of", id="enum"),
    pytest.param({"text": "hi", "x" * BIG: 1}, "unknown argument", id="unknown-argument"),
    pytest.param({"text": "x" * 1_000_000}, "KB", id="1MB-string"),
    pytest.param({"text": 5, "count": "x" * (BIG // 2), "mode": "x" * (BIG // 2)},
                 "argument 'count'", id="several"),
]


@pytest.mark.parametrize(("arguments", "why"), QUOTED)
async def test_refusals_quote_at_most_200_characters_of_a_value(arguments, why):
    flow = agent_flow(one_call(arguments), [echo({"count": AI_SCOPE, "mode": AI_SCOPE})])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok"
    [r] = rec.of("tool.result")
    assert r.status == "refused" and why in r.error
    assert r.error.count("x") <= 5 * 201 and len(r.error) < 1500
    if len(arguments) == 2:  # one problem: one quote
        assert r.error.count("x") <= 201
    seen = rec.of("llm.request")[1].messages[-1]["content"]  # what the LLM reads
    assert len(seen) < 1600 and why in seen


async def test_an_unknown_tool_name_is_quoted_short():
    flow = agent_flow(one_call({}, name="t" * BIG), [echo()])
    _, rec, _ = await run(flow, reg=reg())
    [r] = rec.of("tool.result")
    assert r.status == "refused" and "unknown tool" in r.error
    assert r.error.count("t") < 250 and len(r.tool) <= 101
    assert len(rec.of("tool.call")[0].tool) <= 101


def test_preview_shows_the_start_of_any_value():
    assert preview("abc") == '"abc"'
    assert preview({"to": "a@example.com", "n": [1, 2]}) == '{"to": "a@example.com", "n": [1, 2]}'
    long = preview({"k": "x" * 10_000})
    assert long.startswith('{"k": "xxx') and long.endswith("…") and len(long) == 201
    many = preview(list(range(100_000)))
    assert many.startswith("[0, 1, 2") and len(many) <= 201


# -- 12. what the LLM learns of an unexpected exception --------------------------------

async def test_an_unexpected_exception_reaches_the_llm_without_its_text():
    flow = agent_flow(scripted([{"tool_calls": [
        {"name": "crash", "arguments": {"kind": "oserror"}},
        {"name": "crash", "arguments": {"kind": "config"}}]}, {"text": "sorry"}]),
        [{"id": "c", "type": "test.crash"}])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok"
    crash, config = rec.of("tool.result")
    assert crash.error == ("OSError: the tool failed unexpectedly; details are in the run's "
                           "events")
    assert config.error == "crash: the widget needs a name"  # written for users: shown
    seen = json.dumps(rec.of("llm.request")[1].messages)
    assert "/home/alice" not in seen and "db.internal" not in seen
    assert "the widget needs a name" in seen
    [msg] = rec.debug_values()
    assert "/home/alice" not in json.dumps(msg["agent"])
    # The full text is in the run's events, for the person looking.
    errors = [e.message for e in rec.of("node.error")]
    assert "OSError: /home/alice/secret/path db.internal.example" in errors

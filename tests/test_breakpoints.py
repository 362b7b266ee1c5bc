"""Breakpoints (runtime.debugger) in real engine runs: a held message waits
while the rest of the run goes on; what the person edits is what the next
node gets; step, skip, conditions, pause all; tool calls held before their
node with edited arguments checked against the schema; a stop ends a run
that holds messages. Nothing waits on a clock: the tests wait for the
debugger's own state, with a count of loop turns as the bound."""

from __future__ import annotations

import asyncio

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.approval import AutoApprover, People
from runtime.debugger import Breakpoint, BreakpointError, Debugger, parse_target
from runtime.engine import Engine
from runtime.events import EventBus, parse_event
from runtime.registry import Registry
from tests.runtime_fixtures import REGISTRY, N, engine_for, make_flow, until
from tests.servers.flows import AI_SCOPE, EchoTool, agent_flow, scripted

TOOL_REG = Registry([Inject, DebugNode, Agent, EchoTool])


class Session:
    """One run with a debugger, driven from the test."""

    def __init__(self, flow, *breakpoints: Breakpoint, reg=REGISTRY, people=None,
                 **debugger_kw) -> None:
        self.engine, self.events = engine_for(flow, reg=reg)
        if people is not None:
            self.engine.people = people
        self.debugger = Debugger(list(breakpoints), **debugger_kw).attach(self.engine)
        self.task: asyncio.Task | None = None

    def start(self) -> Session:
        self.task = asyncio.get_running_loop().create_task(self.engine.run(timeout=60))
        return self

    async def held(self, n: int = 1, turns: int = 20_000) -> list:
        await until(lambda: len(self.debugger.held) >= n, turns)
        return sorted(self.debugger.held.values(), key=lambda h: h.id)

    async def finish(self):
        assert self.task is not None
        return await asyncio.wait_for(self.task, 30)

    def seen(self, node_id: str) -> list:
        return self.engine.nodes[node_id].node.seen

    def of(self, kind: str) -> list:
        return [e for e in self.events if e.type == kind]


def bp(target: str, flow, condition: str = "") -> Breakpoint:
    return parse_target(target, flow, REGISTRY, condition)


# -- one message held, the rest flowing ---------------------------------------------
async def test_a_held_message_waits_while_others_flow_and_the_edit_goes_on():
    flow = make_flow([N("one", "core.inject", payload="first"), N("a", "test.inc"),
                      N("sink", "test.sink"),
                      N("many", "core.inject", payload=7, count=50), N("count", "test.sink")],
                     ["one->a", "a->sink", "many->count"])
    flow.nodes[0].params["payload"].value = 1
    s = Session(flow, bp("a", flow)).start()
    [held] = await s.held()
    assert (held.node, held.reason, held.msg["payload"]) == ("a", "breakpoint", 1)
    await until(lambda: len(s.seen("count")) == 50)
    assert s.seen("sink") == []  # still held while the other 50 went through
    assert s.engine.in_flight() == {"a": 1}
    assert s.debugger.resume(held.id, "continue", {**held.view(), "payload": 41}) is None
    result = await s.finish()
    assert result.status == "ok"
    [got] = s.seen("sink")
    assert got["payload"] == 42  # the edit, then a's increment
    assert got["_msgid"] == held.msgid
    [paused] = s.of("debug.paused")
    [resumed] = s.of("debug.resumed")
    assert (paused.node, paused.port, paused.msg["payload"]) == ("a", "in", 1)
    assert (resumed.action, resumed.edited, resumed.msg["payload"]) == ("edited", True, 41)
    # The events are valid in their JSON form too (the events file, history).
    assert parse_event(paused.model_dump_json()).hold == held.id


async def test_set_a_path_on_the_held_message():
    flow = make_flow([N("src", "core.inject", payload={"user": {"name": "ann"}}),
                      N("sink", "test.sink")], ["src->sink"])
    s = Session(flow, bp("sink.in", flow)).start()
    [held] = await s.held()
    held.set("payload.user.name", "bob")
    assert s.debugger.resume(held.id) is None
    await s.finish()
    assert s.seen("sink")[0]["payload"] == {"user": {"name": "bob"}}
    assert s.of("debug.resumed")[0].action == "edited"


async def test_an_edit_keeps_what_the_person_was_shown_only_in_part():
    long_text = "x" * 10_000
    flow = make_flow([N("src", "core.inject", payload={"text": long_text}),
                      N("sink", "test.sink")], ["src->sink"])
    s = Session(flow, bp("sink", flow)).start()
    [held] = await s.held()
    view = held.view()
    assert len(view["payload"]["text"]) < 5000  # shown cut
    assert s.debugger.resume(held.id, "continue", {**view, "topic": "t"}) is None
    await s.finish()
    got = s.seen("sink")[0]
    assert got["payload"]["text"] == long_text and got["topic"] == "t"


async def test_an_edit_must_be_an_object():
    flow = make_flow([N("src", "core.inject", payload=1), N("sink", "test.sink")], ["src->sink"])
    s = Session(flow, bp("sink", flow)).start()
    [held] = await s.held()
    assert "must be a JSON object" in s.debugger.resume(held.id, "continue", [1, 2])
    assert held.id in s.debugger.held  # still waiting
    assert "nothing is held as #999999" in s.debugger.resume(999999)
    assert "unknown action" in s.debugger.resume(held.id, "jump")
    s.debugger.resume(held.id)
    await s.finish()
    assert len(s.seen("sink")) == 1


# -- step and skip ----------------------------------------------------------------
async def test_step_stops_at_the_next_node_after_the_held_one_ran():
    flow = make_flow([N("src", "core.inject", payload=1), N("a", "test.inc"), N("b", "test.inc"),
                      N("sink", "test.sink")], ["src->a", "a->b", "b->sink"])
    s = Session(flow, bp("a", flow)).start()
    [first] = await s.held()
    assert s.debugger.resume(first.id, "step") is None
    [second] = await s.held()
    assert (second.node, second.reason) == ("b", "step")
    assert second.msg["payload"] == 2  # a ran on it
    assert second.msgid == first.msgid
    assert s.seen("sink") == []
    s.debugger.resume(second.id, "continue")
    result = await s.finish()
    assert result.status == "ok" and s.seen("sink")[0]["payload"] == 3
    assert [e.reason for e in s.of("debug.paused")] == ["breakpoint", "step"]
    # The one-shot step is spent: only the breakpoint's node is gated again.
    assert s.debugger._gated == {"a"}


async def test_skip_drops_the_message():
    flow = make_flow([N("src", "core.inject", payload=1), N("a", "test.inc"),
                      N("sink", "test.sink")], ["src->a", "a->sink"])
    s = Session(flow, bp("a", flow)).start()
    [held] = await s.held()
    assert s.debugger.resume(held.id, "skip") is None
    result = await s.finish()
    assert result.status == "ok" and s.seen("sink") == []
    assert s.of("debug.resumed")[0].action == "skip"


async def test_a_wire_breakpoint_holds_a_copy_on_that_wire_only():
    flow = make_flow([N("src", "core.inject", payload={"v": 1}), N("left", "test.sink"),
                      N("right", "test.sink")], ["src->left", "src->right"])
    s = Session(flow, bp("wire:1", flow)).start()
    [held] = await s.held()
    assert (held.wire, held.node) == (1, "right")
    await until(lambda: len(s.seen("left")) == 1)
    held.set("payload.v", 2)
    s.debugger.resume(held.id)
    await s.finish()
    assert s.seen("left")[0]["payload"] == {"v": 1}  # a copy was held: left never saw the edit
    assert s.seen("right")[0]["payload"] == {"v": 2}
    assert s.engine.stats().wires == {"0": 1, "1": 1}


async def test_a_wire_breakpoint_on_a_chain_loop_wire():
    # src -> a has exactly one wire: the chain loop's fast path, taken off
    # while the breakpoint is there and given back when it goes.
    flow = make_flow([N("src", "core.inject", payload=1, count=3), N("a", "test.inc"),
                      N("sink", "test.sink")], ["src->a", "a->sink"])
    s = Session(flow, bp("wire:1", flow))
    a = s.engine.nodes["a"]
    wire = a.next
    assert wire is None  # the breakpoint took it off
    s.start()
    held = await s.held(3)
    assert {h.wire for h in held} == {1}
    s.debugger.continue_all()
    await s.finish()
    assert [m["payload"] for m in s.seen("sink")] == [2, 2, 2]
    s.debugger.detach()
    assert a.next is not None and s.engine.debugger is None


# -- conditions ---------------------------------------------------------------------
async def test_a_conditional_breakpoint_stops_only_what_it_matches():
    flow = make_flow([N("src", "core.inject", payload=list(range(1, 11))),
                      N("split", "core.split"), N("sink", "test.sink")],
                     ["src->split", "split->sink"])
    s = Session(flow, bp("sink", flow, "msg.payload > 5")).start()
    held = await s.held(5)
    await until(lambda: len(s.seen("sink")) == 5)
    assert [h.msg["payload"] for h in held] == [6, 7, 8, 9, 10]
    assert [m["payload"] for m in s.seen("sink")] == [1, 2, 3, 4, 5]
    s.debugger.continue_all()
    await s.finish()
    assert sorted(m["payload"] for m in s.seen("sink")) == list(range(1, 11))


async def test_a_condition_that_cannot_be_evaluated_stops_and_says_why():
    flow = make_flow([N("src", "core.inject", payload="text"), N("sink", "test.sink")],
                     ["src->sink"])
    s = Session(flow, bp("sink", flow, "msg.payload.count > 2")).start()
    [held] = await s.held()
    assert "could not be evaluated" in held.note
    s.debugger.resume(held.id)
    await s.finish()


def test_bad_targets_and_conditions_are_named():
    flow = make_flow([N("src", "core.inject"), N("sink", "test.sink")], ["src->sink"])
    with pytest.raises(BreakpointError, match="no node 'nope'"):
        parse_target("nope", flow, REGISTRY)
    with pytest.raises(BreakpointError, match="has no input"):
        parse_target("src", flow, REGISTRY)
    with pytest.raises(BreakpointError, match="no input 'other'"):
        parse_target("sink.other", flow, REGISTRY)
    with pytest.raises(BreakpointError, match="wires 0 to 0"):
        parse_target("wire:3", flow, REGISTRY)
    with pytest.raises(BreakpointError, match="the condition 'msg.payload >'"):
        parse_target("sink", flow, REGISTRY, "msg.payload >")
    with pytest.raises(BreakpointError, match="unknown name 'payload'"):
        parse_target("sink", flow, REGISTRY, "payload > 5")
    assert parse_target("sink.in", flow, REGISTRY).key == "sink.in"


# -- pause all, continue all, bounds, stop ------------------------------------------------
async def test_pause_all_holds_every_other_message_until_the_hit_goes_on():
    flow = make_flow([N("one", "core.inject", payload=1), N("a", "test.sink"),
                      N("many", "test.yield_any"), N("two", "core.inject",
                                                       payload={"turns": 50}),
                      N("b", "test.sink")],
                     ["one->a", "two->many", "many->b"])
    s = Session(flow, bp("a", flow))
    s.debugger.set_pause_all(True)
    s.start()
    held = await s.held(2)
    assert [(h.node, h.reason) for h in held] == [("a", "breakpoint"), ("many", "paused")]
    assert s.seen("b") == []
    hit = next(h for h in held if h.reason == "breakpoint")
    s.debugger.resume(hit.id)
    result = await s.finish()
    assert result.status == "ok"
    assert len(s.seen("a")) == 1 and len(s.seen("b")) == 1


async def test_continue_all_releases_everything_and_stops_nothing_more():
    flow = make_flow([N("src", "core.inject", payload=1, count=20), N("sink", "test.sink")],
                     ["src->sink"])
    s = Session(flow, bp("sink", flow)).start()
    await s.held(20)
    s.debugger.continue_all()
    await s.finish()
    assert len(s.seen("sink")) == 20
    assert s.debugger._gated == set() and not s.debugger.armed


async def test_past_the_bound_a_hit_passes_with_a_warning(caplog):
    flow = make_flow([N("src", "core.inject", payload=1, count=5), N("sink", "test.sink")],
                     ["src->sink"])
    s = Session(flow, bp("sink", flow), max_held=2).start()
    await until(lambda: len(s.seen("sink")) == 3)
    assert len(s.debugger.held) == 2
    assert "2 messages are held at breakpoints" in caplog.text
    s.debugger.continue_all()
    await s.finish()
    assert len(s.seen("sink")) == 5


async def test_a_stop_ends_a_run_that_holds_messages():
    flow = make_flow([N("src", "core.inject", payload=1, count=3), N("a", "test.inc"),
                      N("sink", "test.sink")], ["src->a", "a->sink"])
    s = Session(flow, bp("a", flow)).start()
    await s.held(3)
    s.engine.stop("stopped by the test")
    result = await s.finish()
    assert result.reason == "interrupted" and result.in_flight == {"a": 3}
    assert s.debugger.held == {}
    assert [e.action for e in s.of("debug.resumed")] == ["stopped"] * 3
    assert s.seen("sink") == []


async def test_no_debugger_leaves_the_engine_as_it_was():
    flow = make_flow([N("src", "core.inject", payload=1), N("a", "test.inc"),
                      N("sink", "test.sink")], ["src->a", "a->sink"])
    engine, _ = engine_for(flow, subscribe=False)
    gates = {rt.id: rt.gate for rt in engine.nodes.values()}
    nexts = {rt.id: rt.next for rt in engine.nodes.values()}
    debugger = Debugger([bp("a", flow), bp("wire:1", flow)]).attach(engine)
    assert engine.nodes["a"].gate == gates["a"] + 1 and engine.nodes["a"].next is None
    debugger.remove("a.in")
    debugger.remove("wire:1")
    assert {rt.id: rt.gate for rt in engine.nodes.values()} == gates
    assert {rt.id: rt.next for rt in engine.nodes.values()} == nexts
    assert Engine(flow, REGISTRY, EventBus()).debugger is None


# -- tool calls ---------------------------------------------------------------------
def echo_flow(*args: dict):
    turns = [{"tool_calls": [{"name": "echo", "arguments": a} for a in args]},
             {"text": "done"}]
    echo = {"id": "echo", "type": "test.echo",
            "params": {"text": AI_SCOPE, "count": AI_SCOPE, "prefix": {"scope": "custom",
                                                                       "value": ">"}}}
    return agent_flow(scripted(turns), [echo])


def tool_session(flow, target: str, condition: str = "") -> Session:
    EchoTool.calls.clear()
    return Session(flow, parse_target(target, flow, TOOL_REG, condition), reg=TOOL_REG,
                   people=People(AutoApprover()))


async def test_a_tool_call_waits_before_its_node_and_runs_with_the_edited_arguments():
    flow = echo_flow({"text": "hi", "count": 1})
    s = tool_session(flow, "echo").start()
    [held] = await s.held()
    assert held.is_tool and (held.tool, held.agent, held.node) == ("echo", "agent", "echo")
    assert held.msg == {"text": "hi", "count": 1}
    assert EchoTool.calls == []  # not run yet
    # An edit the schema refuses is said at once, and the call still waits.
    why = s.debugger.resume(held.id, "continue", {"text": "hi", "count": "many"})
    assert "do not fit the tool" in why and "count" in why
    assert held.id in s.debugger.held and held.msg["count"] == 1
    assert s.debugger.resume(held.id, "continue", {"text": "edited", "count": 2}) is None
    result = await s.finish()
    assert result.status == "ok"
    assert EchoTool.calls == [{"text": "edited", "prefix": ">"}]
    [res] = s.of("tool.result")
    assert res.status == "success" and res.data == {"echoed": ">EDITEDEDITED"}
    [paused] = s.of("debug.paused")
    assert (paused.caller_id, paused.tool, paused.msg) == (held.caller_id, "echo",
                                                           {"text": "hi", "count": 1})
    calls = s.of("debug")[-1].value["agent"]["tool_calls"]
    assert calls[0]["args"] == {"text": "edited", "count": 2}


async def test_the_tools_wire_breakpoint_and_a_condition_over_the_arguments():
    flow = echo_flow({"text": "a", "count": 1}, {"text": "b", "count": 3})
    tools_wire = next(i for i, w in enumerate(flow.wires) if w.source[1] == "tools")
    s = tool_session(flow, f"wire:{tools_wire}", "msg.args.count > 2").start()
    [held] = await s.held()
    assert held.msg == {"text": "b", "count": 3} and held.wire == tools_wire
    await until(lambda: len(EchoTool.calls) == 1)  # the other call ran meanwhile
    held.set("text", "c")  # as the terminal's `set` does
    s.debugger.resume(held.id)
    await s.finish()
    assert [c["text"] for c in EchoTool.calls] == ["a", "c"]


async def test_a_skipped_tool_call_is_answered_as_rejected():
    flow = echo_flow({"text": "hi", "count": 1})
    s = tool_session(flow, "echo.in").start()
    [held] = await s.held()
    s.debugger.resume(held.id, "skip")
    result = await s.finish()
    assert result.status == "ok" and EchoTool.calls == []
    [res] = s.of("tool.result")
    assert res.status == "rejected" and "skipped at a breakpoint" in res.error


async def test_a_stop_cancels_a_held_tool_call():
    flow = echo_flow({"text": "hi", "count": 1})
    s = tool_session(flow, "echo").start()
    await s.held()
    s.engine.stop()
    result = await s.finish()
    assert result.reason == "interrupted" and EchoTool.calls == []
    assert s.debugger.held == {}

"""The lean way of a tool call (issue 32, goal 2): a call of a tool that asks
no one runs its checks, events, request and node in one frame
(ToolBridge.call), a plain-function node awaited at once. It must do all
the general way (``_begin``) does: the same checks and refusals, the same
events, its own copy of the agent's message, progress as live status.

Real engine, real nodes; the general way is forced where a test compares
the two (the bridge's per-tool ``_quick`` entry set to None)."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.message import PARAMETERS, TOOL_DATA, TOOL_STATUS, Message
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from runtime.tools import ToolBridge
from tests.runtime_fixtures import agent_with_tool


@node("test.lean_mutate", name="Mutate", category="Test", tool=Tool("mutate", "Mutates"))
class MutateTool(Node):
    """Changes the message it gets, deep inside, and reports what it saw."""

    tag = Param(str, "A tag", scope=AI, allow=AI | CUSTOM)
    seen = Output(dict, "What the request held")

    seen_by_call: list[dict] = []

    def on_message(self, msg):
        MutateTool.seen_by_call.append({"items": list(msg["payload"]["items"]),
                                        "keys": sorted(msg)})
        msg["payload"]["items"].append(self.tag.get(msg))
        msg["meta"]["by"] = self.tag.get(msg)
        msg["payload"]["nested"][0]["n"] += 1
        self.seen.set(msg, {"n": msg["payload"]["nested"][0]["n"]})


@node("test.lean_progress", name="Progress", category="Test", tool=Tool("prog", "Reports"))
class ProgressTool(Node):
    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)

    def on_message(self, msg):
        self.progress(0.5, "half way")


@node("test.lean_async", name="Async", category="Test", tool=Tool("anoop", "Async no-op"))
class AsyncTool(Node):
    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)
    twice = Output(int, "x * 2")

    async def on_message(self, msg):
        if self.x.get(msg) < 0:
            await asyncio.sleep(0.01)  # goes on past its first step
        self.twice.set(msg, self.x.get(msg) * 2)


REGISTRY = Registry([Inject, DebugNode, Agent, MutateTool, ProgressTool, AsyncTool])


def bridge_for(tool_type: str) -> tuple[ToolBridge, list]:
    flow = agent_with_tool(tool_type)
    events: list = []
    bus = EventBus()
    bus.subscribe(events.append)
    return ToolBridge(Engine(flow, REGISTRY, bus, record=False), "agent"), events


def general_way_only(monkeypatch) -> list[str]:
    """Record every call that goes the general way (ToolBridge._begin)."""
    taken: list[str] = []
    begin = ToolBridge._begin

    def spy(self, base, call_id, name, *a, **kw):
        taken.append(name)
        return begin(self, base, call_id, name, *a, **kw)

    monkeypatch.setattr(ToolBridge, "_begin", spy)
    return taken


def comparable(events: list) -> list[dict]:
    """Events without what differs from call to call (ids, times)."""
    out = []
    for e in events:
        d = e.model_dump()
        for k in ("ts", "caller_id", "ms", "run_id"):
            d.pop(k, None)
        out.append(d)
    return out


async def test_a_call_of_a_tool_that_asks_no_one_takes_the_lean_way(monkeypatch):
    taken = general_way_only(monkeypatch)
    bridge, _ = bridge_for("test.lean_progress")
    out = await bridge.call(Message.new("go"), "c1", "prog", {"x": 1}, 60)
    assert out.status == "success"
    abridge, _ = bridge_for("test.lean_async")
    out = await abridge.call(Message.new("go"), "c2", "anoop", {"x": 2}, 60)
    assert (out.status, out.data) == ("success", {"twice": 4})
    assert taken == []  # neither went through _begin
    # What needs the general way still takes it: an unknown tool, bad arguments.
    assert (await bridge.call(Message.new("go"), "c3", "nope", {}, 60)).status == "refused"
    assert (await bridge.call(Message.new("go"), "c4", "prog", {"x": "1"}, 60)).status \
        == "refused"
    assert taken == ["nope", "prog"]


def _deep(n: int):
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


@pytest.mark.parametrize("args", [{"x": 3}, '{"x": 3}', {"x": "three"}, '{"x": ', {"y": 1},
                                  {"x": _deep(40)}, "", None])
async def test_the_lean_way_answers_and_tells_as_the_general_way(args):
    lean, lean_events = bridge_for("test.lean_async")
    general, general_events = bridge_for("test.lean_async")
    general._quick["anoop"] = None  # the general way for every call of it
    a = await lean.call(Message.new("go"), "c1", "anoop", args, 60)
    b = await general.call(Message.new("go"), "c1", "anoop", args, 60)
    assert (a.status, a.data, a.error, a.args, a.bounded) \
        == (b.status, b.data, b.error, b.args, b.bounded)
    assert a.content() == b.content()
    assert comparable(lean_events) == comparable(general_events)
    assert [e.type for e in lean_events][:1] == ["tool.call"]


async def test_a_call_that_goes_on_past_its_first_step_is_timed_and_shown_running():
    bridge, events = bridge_for("test.lean_async")
    out = await bridge.call(Message.new("go"), "c1", "anoop", {"x": -1}, 60)
    assert (out.status, out.data) == ("success", {"twice": -2})
    phases = [e.phase for e in events if e.type == "tool.status"]
    assert phases == ["queued", "running", "succeeded"]
    out = await bridge.call(Message.new("go"), "c2", "anoop", {"x": -1}, 0.001)
    assert out.status == "error" and "did not finish within 0.001 s" in out.error


async def test_progress_of_a_plain_function_tool_is_live_status_after_running():
    bridge, events = bridge_for("test.lean_progress")
    out = await bridge.call(Message.new("go"), "c1", "prog", {"x": 1}, 60)
    assert out.status == "success"
    statuses = [(e.phase, e.progress, e.text) for e in events if e.type == "tool.status"]
    assert statuses == [("queued", None, ""), ("running", None, ""),
                        ("progress", 0.5, "half way"), ("succeeded", None, "")]


async def test_each_request_is_its_own_copy_of_the_agents_message():
    MutateTool.seen_by_call = []
    bridge, _ = bridge_for("test.lean_mutate")
    base = Message.new({"items": ["a"], "nested": [{"n": 1}], "text": "t"}, meta={"k": "v"},
                       topic="x")
    # Keys of a tool call the agent's own message may carry (an agent used
    # as a tool): never passed on to its tools' requests.
    base[TOOL_STATUS] = "success"
    base[TOOL_DATA] = {"old": 1}
    base[PARAMETERS] = {"tag": "not these"}
    first = await bridge.call(base, "c1", "mutate", {"tag": "one"}, 60)
    second = await bridge.call(base, "c2", "mutate", {"tag": "two"}, 60)
    assert first.data == second.data == {"seen": {"n": 2}}
    # Each call started from the message as the agent had it...
    assert [s["items"] for s in MutateTool.seen_by_call] == [["a"], ["a"]]
    # ... which no call changed.
    assert base["payload"] == {"items": ["a"], "nested": [{"n": 1}], "text": "t"}
    assert base["meta"] == {"k": "v"}
    assert base[PARAMETERS] == {"tag": "not these"} and base[TOOL_DATA] == {"old": 1}
    keys = MutateTool.seen_by_call[0]["keys"]
    assert {"_msgid", "payload", "meta", "topic"} <= set(keys)
    assert TOOL_STATUS not in keys and TOOL_DATA not in keys
    assert PARAMETERS in keys  # the call's own arguments, under the reserved key


# -- the agent turn around the calls ------------------------------------------

async def test_a_reply_without_input_tokens_has_its_conversation_counted_never(monkeypatch):
    """The share of a request's input tokens each tool result cost needs the
    characters of the whole request; a reply that reports no input tokens
    (the scripted provider's, unless its script says) shares none out, so
    the conversation is not counted, and each result's share is 0 as
    before."""
    from runtime.agent import loop
    from tests.servers.flows import agent_flow, run, scripted

    counted: list[int] = []
    count = loop._Chars.count

    def spy(self, conversation):
        counted.append(len(conversation))
        count(self, conversation)

    monkeypatch.setattr(loop._Chars, "count", spy)
    call = {"name": "echo", "arguments": {"text": "hi"}}
    echo = [{"id": "echo", "type": "test.echo", "params": {}}]
    flow = agent_flow(scripted([{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "ok"}]),
                      echo)
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.dump()
    out = rec.debug_values()[0]["agent"]
    assert [c["result_tokens"] for c in out["tool_calls"]] == [0, 0]
    assert counted == []
    # With input tokens reported, each result gets its share as before.
    flow = agent_flow(scripted([{"tool_calls": [call]}, {"tool_calls": [call],
                                "usage": {"input_tokens": 1000, "output_tokens": 1}},
                                {"text": "ok", "usage": {"input_tokens": 2000, "output_tokens": 1}}]),
                      echo)
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.dump()
    out = rec.debug_values()[0]["agent"]
    text = '{"echoed": "HI"}'
    args = len(str({"text": "hi"}))  # the call as the model made it
    first_request = len("Hello") + args + len(text)  # the prompt, the call, its result
    second_request = first_request + args + len(text)
    assert [c["result_tokens"] for c in out["tool_calls"]] == [
        round(1000 * len(text) / first_request), round(2000 * len(text) / second_request)]
    assert counted == [3, 5]


def test_a_scripts_problems_name_their_turns():
    """script_problems writes "turn N" only for a turn with a problem (a
    script of thousands of turns is checked as each run starts); what it
    says is as before."""
    from runtime.agent.scripted import script_problems

    ok = {"tool_calls": [{"name": "echo", "arguments": {}}], "text": "t", "usage": {},
          "seconds": 1}
    assert script_problems([ok] * 3000) == []
    assert script_problems([ok, 1, {"seconds": True}, {"seconds": 31}, {"text": 3},
                            {"tool_calls": {}}, {"tool_calls": [{}, {"name": "x"}]},
                            {"bad": 1}]) == [
        "turn 2: a turn is an object with text and/or tool_calls (and usage, seconds)",
        "turn 3: seconds must be a number from 0 to 30",
        "turn 4: seconds must be a number from 0 to 30",
        "turn 5: text must be a string",
        "turn 6: tool_calls must be a list",
        "turn 7, call 1: a call needs a name (and arguments)",
        "turn 8: a turn is an object with text and/or tool_calls (and usage, seconds)"]


_scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-10**30,
                                                                    max_value=10**30)
            | st.floats() | st.text())
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4),
                       max_leaves=12)


@given(st.dictionaries(st.text(max_size=8), _scalars, max_size=6) | _values)
@settings(max_examples=400)
def test_a_results_text_is_json_dumps_text(value):
    """A tool result's text for the LLM (runtime.tools.calls.result_json,
    its flat-object loop and the C encoder called directly) is exactly
    json.dumps(value, ensure_ascii=False, default=str): NaN and infinities,
    booleans, big numbers, keys that are not strings, escapes."""
    from runtime.tools.calls import result_json

    assert result_json(value) == json.dumps(value, ensure_ascii=False, default=str)


def test_a_results_text_of_odd_values_is_json_dumps_text():
    from runtime.tools.calls import result_json

    class Odd:
        def __str__(self) -> str:
            return "odd"

    for value in ({"status": "completed"}, {"a": float("nan")}, {"a": Odd()}, {"a": 2**70},
                  {1: "x"}, {"a": {"b": [1, "é\n\"", None]}}, "text", 3, None, [True, 1.5]):
        assert result_json(value) == json.dumps(value, ensure_ascii=False, default=str)

"""The live status of a tool call that goes on past its first step (issue
32, goal 4): made and shown (``tool.status`` queued, running, ...) when
someone listens to the run's events; with no one listening it is made only
when its node reports progress, and whoever subscribes meanwhile sees the
call from then on as before.

Real engine, real nodes, a real event bus."""

from __future__ import annotations

import asyncio

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.message import Message
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from runtime.tools import ToolBridge
from tests.runtime_fixtures import agent_with_tool


@node("test.ls_gate", name="Gate", category="Test", tool=Tool("gate", "Waits at a gate"))
class GateTool(Node):
    """Waits until the test opens its gate, reports progress, waits again."""

    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)
    done = Output(bool, "Done")
    gates: list[asyncio.Event] = []

    async def on_message(self, msg):
        await GateTool.gates[0].wait()
        self.progress(0.5, "half way")
        await GateTool.gates[1].wait()
        self.done.set(msg, True)


REGISTRY = Registry([Inject, DebugNode, Agent, GateTool])


def bridge_for(bus: EventBus) -> ToolBridge:
    flow = agent_with_tool("test.ls_gate")
    return ToolBridge(Engine(flow, REGISTRY, bus, record=False), "agent")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_with_a_listener_a_suspended_call_is_shown_queued_running_and_its_end():
    GateTool.gates = [asyncio.Event(), asyncio.Event()]
    events: list = []
    bus = EventBus()
    bus.subscribe(events.append)
    bridge = bridge_for(bus)
    task = asyncio.ensure_future(bridge.call(Message.new("go"), "c1", "gate", {"x": 1}, 60))
    await _settle()
    assert [e.phase for e in events if e.type == "tool.status"] == ["queued", "running"]
    assert list(bridge._live)  # kept until its result is published
    for gate in GateTool.gates:
        gate.set()
    out = await task
    assert out.status == "success"
    assert [(e.phase, e.progress) for e in events if e.type == "tool.status"] == [
        ("queued", None), ("running", None), ("progress", 0.5), ("succeeded", None)]
    assert not bridge._live


async def test_with_no_listener_no_live_status_is_made_until_someone_can_see_progress():
    GateTool.gates = [asyncio.Event(), asyncio.Event()]
    bus = EventBus()
    bridge = bridge_for(bus)
    task = asyncio.ensure_future(bridge.call(Message.new("go"), "c1", "gate", {"x": 1}, 60))
    await _settle()
    assert not bridge._live  # suspended, and nothing made for no one to see
    # The designer attaches while the call is going: it sees the call from its
    # progress on, with the phases so far, and its end.
    events: list = []
    bus.subscribe(events.append)
    GateTool.gates[0].set()
    await _settle()
    assert [e.phase for e in events if e.type == "tool.status"] == [
        "queued", "running", "progress"]
    GateTool.gates[1].set()
    out = await task
    assert (out.status, out.data) == ("success", {"done": True})
    assert [e.phase for e in events if e.type == "tool.status"] == [
        "queued", "running", "progress", "succeeded"]
    assert not bridge._live

"""The timeouts of tool calls that go on past their first step (issue 32,
goal 4): one timer per bridge for all its calls (``_Deadlines``), not an
``asyncio.timeout`` (a TimerHandle on the loop's heap) per call. Each call
must still end at its own deadline with the timeout's error, its node
cancelled and cleaned up; a cancellation from outside (the run stopping)
must stay a cancellation, even when it comes with the timeout; a call that
ends in time must not be touched.

Real engine, real nodes, real event loop; nothing patched but a counter on
the loop's ``call_at`` where a test counts timers."""

from __future__ import annotations

import asyncio
import gc
import weakref

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.message import Message
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from runtime.tools import ToolBridge
from tests.runtime_fixtures import agent_with_tool


@node("test.dl_wait", name="Wait", category="Test", tool=Tool("wait", "Waits"))
class WaitTool(Node):
    """Sleeps ``seconds``; records how it ended."""

    seconds = Param(float, "How long", scope=AI, allow=AI | CUSTOM)
    slept = Output(float, "How long it slept")
    log: list[str] = []

    async def on_message(self, msg):
        s = self.seconds.get(msg)
        try:
            await asyncio.sleep(s)
        except asyncio.CancelledError:
            WaitTool.log.append(f"cancelled {s:g}")
            raise
        self.slept.set(msg, s)


@node("test.dl_stubborn", name="Stubborn", category="Test", tool=Tool("stubborn", "Ignores"))
class StubbornTool(Node):
    """Swallows the first cancellation and answers anyway."""

    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)
    said = Output(str, "What it says")

    async def on_message(self, msg):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.said.set(msg, "finished anyway")


REGISTRY = Registry([Inject, DebugNode, Agent, WaitTool, StubbornTool])


def bridge_for(tool_type: str) -> ToolBridge:
    flow = agent_with_tool(tool_type)
    return ToolBridge(Engine(flow, REGISTRY, EventBus(), record=False), "agent")


async def test_each_call_ends_at_its_own_deadline_the_others_in_time():
    WaitTool.log = []
    bridge = bridge_for("test.dl_wait")
    base = Message.new("go")
    # A long timeout first (the timer is set for it), then shorter ones: the
    # timer must be set again, sooner, for them.
    calls = [("a", 0.3, 60), ("b", 0.3, 0.05), ("c", 0.01, 0.2), ("d", 0.3, 0.1)]
    outs = await asyncio.gather(*(bridge.call(base, cid, "wait", {"seconds": s}, t)
                                  for cid, s, t in calls))
    got = {o.call_id: (o.status, o.data, o.error) for o in outs}
    assert got["a"] == ("success", {"slept": 0.3}, "")
    assert got["c"] == ("success", {"slept": 0.01}, "")
    assert got["b"][0] == "error" and "did not finish within 0.05 s" in got["b"][2]
    assert got["d"][0] == "error" and "did not finish within 0.1 s" in got["d"][2]
    assert not any(o.cancelled for o in outs)
    assert sorted(WaitTool.log) == ["cancelled 0.3", "cancelled 0.3"]  # b's and d's nodes
    assert bridge._deadlines is not None and not bridge._deadlines.due


async def test_many_calls_in_flight_share_one_timer(monkeypatch):
    bridge = bridge_for("test.dl_wait")
    base = Message.new("go")
    loop = asyncio.get_running_loop()
    timers = []
    call_at = loop.call_at

    def counted(when, callback, *args, **kw):
        handle = call_at(when, callback, *args, **kw)
        if getattr(callback, "__module__", "") in ("asyncio.timeouts", "runtime.tools.calls"):
            timers.append(handle)  # a timeout's, not the nodes' own sleeps
        return handle

    monkeypatch.setattr(loop, "call_at", counted)
    outs = await asyncio.gather(*(bridge.call(base, f"c{i}", "wait", {"seconds": 0.001}, 60)
                                  for i in range(50)))
    assert all(o.status == "success" for o in outs)
    # One for the earliest deadline, not one per call (an asyncio.timeout each: 50).
    assert len(timers) == 1


async def test_a_cancellation_from_outside_stays_a_cancellation():
    WaitTool.log = []
    bridge = bridge_for("test.dl_wait")
    base = Message.new("go")
    task = asyncio.ensure_future(bridge.call(base, "c1", "wait", {"seconds": 5}, 60))
    await asyncio.sleep(0.02)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the run stopping must cancel the call, not answer it")
    assert WaitTool.log == ["cancelled 5"]
    assert not bridge._deadlines.due  # forgotten, its timer cannot touch the task


async def test_a_cancellation_that_comes_with_the_timeout_is_not_taken_for_it():
    bridge = bridge_for("test.dl_wait")
    base = Message.new("go")
    task = asyncio.ensure_future(bridge.call(base, "c1", "wait", {"seconds": 5}, 0.05))
    await asyncio.sleep(0.01)
    deadlines = bridge._deadlines
    (running,) = deadlines.due
    task.cancel()  # the run stops ...
    deadlines.due[running] = 0.0
    deadlines.expire()  # ... as the timeout fires, before the task runs again
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("a stopped run's call must end cancelled, not timed out")


async def test_a_node_that_swallows_the_timeouts_cancellation_answers_and_its_task_goes_on():
    bridge = bridge_for("test.dl_stubborn")
    out = await bridge.call(Message.new("go"), "c1", "stubborn", {"x": 1}, 0.02)
    assert (out.status, out.data) == ("success", {"said": "finished anyway"})
    # The timeout's cancellation was taken back: this task is not being cancelled.
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)


async def test_a_timer_left_set_does_not_keep_the_bridge_alive():
    bridge = bridge_for("test.dl_wait")
    out = await bridge.call(Message.new("go"), "c1", "wait", {"seconds": 0.001}, 60)
    assert out.status == "success"
    assert bridge._deadlines.timer is not None  # set for a deadline 60 s away
    ref = weakref.ref(bridge)
    del bridge, out
    gc.collect()
    assert ref() is None

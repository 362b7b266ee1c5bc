"""Background tools and live tool status (issue 14, items 1-4).

A background tool's call returns at once with a tracking id while its node
goes on as a task of the run; the agent gets task_status / task_cancel, learns
of the end on its next turn or is woken for it; the run's end cancels what is
still going. Every call publishes tool.status phases, and a node's
``self.progress()`` becomes progress events of its call.

Ordering is by asyncio events, never by sleeping: the test provider below
waits for what it needs (the node reached its progress, the task ended)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.agent.base import LlmReply, Provider, ToolCallRequest
from runtime.events import EventBus
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from runtime.tools import PROGRESS_INTERVAL, CallStatus, ToolBridge
from tests.servers.flows import TEST_NODES, agent_flow, fixed, run, scripted


@node("test.crawl", name="Crawl", category="Test",
      tool=Tool("crawl", "Crawl a site page by page", background=True))
class CrawlTool(Node):
    """Reports "page 2 of 5", then waits for ``gate`` (a test opens it) and
    answers with the pages; records its cancellation."""

    site = Param(str, "The site", scope=AI, allow=AI | CUSTOM)
    pages = Output(int, "Pages crawled")

    gate: asyncio.Event | None = None
    reached: asyncio.Event | None = None
    cancelled: list[str] = []

    async def on_message(self, msg):
        self.progress(0.4, "page 2 of 5")
        CrawlTool.reached.set()
        try:
            await CrawlTool.gate.wait()
        except asyncio.CancelledError:
            CrawlTool.cancelled.append(self.site.get(msg))
            raise
        self.pages.set(msg, 5)


def registry() -> Registry:
    return Registry([Inject, DebugNode, Agent, *TEST_NODES, CrawlTool])


@pytest.fixture(autouse=True)
def _fresh():
    CrawlTool.gate = asyncio.Event()
    CrawlTool.reached = asyncio.Event()
    CrawlTool.cancelled = []
    yield


CRAWL = {"id": "crawl", "type": "test.crawl"}


class Reactive(Provider):
    """A deterministic LLM for these tests: ``play(messages, turn)`` (may be
    a coroutine) gives each turn's reply from the conversation so far, so a
    later turn can name the tracking id an earlier call returned."""

    name = "reactive"

    def __init__(self, play: Callable[[list[dict], int], Any]) -> None:
        self.play = play
        self.seen: list[list[dict]] = []

    async def complete(self, *, system, messages, tools, model, temperature, max_tokens,
                       turn=0, on_delta=None) -> LlmReply:
        self.seen.append([dict(m) for m in messages])
        out = self.play(messages, turn)
        if asyncio.iscoroutine(out):
            out = await out
        return out


def call(name: str, args: dict, n: int = 1) -> LlmReply:
    return LlmReply(tool_calls=[ToolCallRequest(id=f"c{n}", name=name, arguments=args)])


def tracking_id(messages: list[dict]) -> str:
    started = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
    return next(d["tracking_id"] for d in started if d.get("status") == "started")


def hook(provider: Provider, *, wake: bool = False, cap: int | None = None):
    """Give the agent node ``provider`` and a bridge with these settings."""
    def setup(engine):
        agent = engine.nodes["agent"].node
        agent._provider = provider
        bridge = ToolBridge(engine, "agent")
        bridge.wake_on_background = wake
        if cap is not None:
            bridge.max_background = cap
        agent._bridge = bridge
    return setup


def statuses(rec, tool: str) -> list:
    return [e for e in rec.of("tool.status") if e.tool == tool]


async def test_background_call_returns_tracking_id_at_once_and_run_end_cancels_it():
    flow = agent_flow(scripted([{"tool_calls": [{"name": "crawl",
                                                 "arguments": {"site": "example.org"}}]},
                                {"text": "Started: {last_result}"}]), [CRAWL])
    result, rec, _ = await run(flow, reg=registry(), timeout=30)
    # The agent answered while the crawl waited on its gate (never opened).
    answer = rec.debug_values()[0]["payload"]
    started = json.loads(answer.removeprefix("Started: "))
    assert started["status"] == "started" and started["tracking_id"].startswith("task-")
    assert "background" in started["message"]
    # The run's end cancelled it; the node saw CancelledError; it is recorded.
    assert CrawlTool.cancelled == ["example.org"]
    final = [e for e in rec.of("tool.result") if e.tool == "crawl"]
    assert len(final) == 1 and final[0].tracking_id == started["tracking_id"]
    assert final[0].status == "error" and "run stopped" in final[0].error
    phases = [e.phase for e in statuses(rec, "crawl")]
    assert phases == ["queued", "running", "progress", "cancelled"]
    progress = statuses(rec, "crawl")[2]
    assert progress.progress == pytest.approx(0.4) and progress.text == "page 2 of 5"
    assert all(e.tracking_id == started["tracking_id"] for e in statuses(rec, "crawl")[1:])
    assert result.status == "ok"


async def test_task_status_and_task_cancel():
    answers: dict[str, Any] = {}

    async def play(messages, turn):
        if turn == 0:
            return call("crawl", {"site": "a.example"})
        tid = tracking_id(messages)
        if turn == 1:
            await CrawlTool.reached.wait()  # the node has reported its progress
            return call("task_status", {"tracking_id": tid}, 2)
        if turn == 2:
            answers["status"] = json.loads(messages[-1]["content"])
            return call("task_cancel", {"tracking_id": tid}, 3)
        if turn == 3:
            answers["cancel"] = json.loads(messages[-1]["content"])
            return call("task_status", {"tracking_id": "task-nope"}, 4)
        answers["unknown"] = json.loads(messages[-1]["content"])
        return LlmReply(text="ok")

    provider = Reactive(play)
    flow = agent_flow(scripted([]), [CRAWL])
    _, rec, _ = await run(flow, reg=registry(), engine_hook=hook(provider), timeout=30)
    assert answers["status"]["status"] == "running"
    assert answers["status"]["progress"] == pytest.approx(0.4)
    assert answers["status"]["text"] == "page 2 of 5"
    assert answers["cancel"]["status"] == "cancelled"
    assert "task_cancel" in answers["cancel"]["error"]
    assert CrawlTool.cancelled == ["a.example"]
    assert "no background task" in answers["unknown"]["error"]
    # The task tools were offered only once there was a task.
    offered = [e.tools for e in rec.of("llm.request")]
    assert "task_status" not in offered[0] and {"task_status", "task_cancel"} <= set(offered[1])
    # task_cancel already told the agent: no second note about it.
    assert not any("[background task" in str(m.get("content")) for m in provider.seen[-1])
    assert [e.phase for e in statuses(rec, "crawl")][-1] == "cancelled"


async def test_wake_up_turn_reports_the_result_in_the_same_conversation():
    async def play(messages, turn):
        if turn == 0:
            return call("crawl", {"site": "b.example"})
        if turn == 1:
            CrawlTool.gate.set()  # the crawl may end once the agent has answered
            return LlmReply(text="I started the crawl; I will report when it ends.")
        note = messages[-1]["content"]
        return LlmReply(text=f"The crawl ended: {note}")

    provider = Reactive(play)
    flow = agent_flow(scripted([]), [CRAWL])
    _, rec, _ = await run(flow, reg=registry(), engine_hook=hook(provider, wake=True),
                          timeout=30)
    answer = rec.debug_values()[0]["payload"]
    assert answer.startswith("The crawl ended: [background task task-")
    assert "succeeded" in answer and '"pages": 5' in answer
    # One conversation: the woken turn sees the first answer, then the note.
    last = provider.seen[-1]
    assert last[0]["content"] == "Hello"
    assert last[-2] == {"role": "assistant",
                        "content": "I started the crawl; I will report when it ends."}
    assert last[-1]["role"] == "user" and "[background task" in last[-1]["content"]
    assert [e.phase for e in statuses(rec, "crawl")][-1] == "succeeded"
    final = [e for e in rec.of("tool.result") if e.tool == "crawl"]
    assert final[0].status == "success" and final[0].tracking_id


async def test_without_wake_the_agent_learns_on_its_next_turn():
    CrawlTool.gate.set()

    async def play(messages, turn):
        if turn == 0:
            return call("crawl", {"site": "c.example"})
        if turn == 1:
            bridge = engine_ref["engine"].nodes["agent"].node._bridge
            await asyncio.wait([j.task for j in bridge.jobs.values()])
            return call("echo", {"text": "meanwhile"}, 2)
        return LlmReply(text="done")

    engine_ref: dict[str, Any] = {}
    provider = Reactive(play)
    setup = hook(provider)

    def both(engine):
        engine_ref["engine"] = engine
        setup(engine)

    flow = agent_flow(scripted([]), [CRAWL, {"id": "echo", "type": "test.echo"}])
    await run(flow, reg=registry(), engine_hook=both, timeout=30)
    third = provider.seen[2]
    notes = [m for m in third if m["role"] == "user" and "[background task" in m["content"]]
    assert len(notes) == 1 and "succeeded" in notes[0]["content"]
    assert not any("[background task" in str(m.get("content")) for m in provider.seen[1])


async def test_stopping_a_woken_wait_cancels_the_task():
    async def play(messages, turn):
        if turn == 0:
            return call("crawl", {"site": "d.example"})
        await CrawlTool.reached.wait()
        engine_ref["engine"].stop("stopped by the test")
        return LlmReply(text="started")

    engine_ref: dict[str, Any] = {}
    provider = Reactive(play)
    setup = hook(provider, wake=True)

    def both(engine):
        engine_ref["engine"] = engine
        setup(engine)

    flow = agent_flow(scripted([]), [CRAWL])
    result, rec, _ = await run(flow, reg=registry(), engine_hook=both, timeout=30)
    assert CrawlTool.cancelled == ["d.example"]
    final = [e for e in rec.of("tool.result") if e.tool == "crawl"]
    assert len(final) == 1 and "run stopped" in final[0].error
    assert [e.phase for e in statuses(rec, "crawl")][-1] == "cancelled"
    assert result.status != "ok"


async def test_background_tasks_are_capped_per_agent():
    def play(messages, turn):
        if turn == 0:
            return LlmReply(tool_calls=[
                ToolCallRequest(id="c1", name="crawl", arguments={"site": "one"}),
                ToolCallRequest(id="c2", name="crawl", arguments={"site": "two"})])
        return LlmReply(text="ok")

    provider = Reactive(play)
    flow = agent_flow(scripted([]), [CRAWL])
    await run(flow, reg=registry(), engine_hook=hook(provider, cap=1), timeout=30)
    results = [json.loads(m["content"]) for m in provider.seen[1] if m["role"] == "tool"]
    assert results[0]["status"] == "started"
    assert "max_background_tasks=1" in results[1]["error"]
    assert CrawlTool.cancelled == ["one"]  # only the first ever ran


async def test_the_flow_can_make_a_tool_background():
    """tool.background on a node whose author did not declare it."""
    sleep = {"id": "sleep", "type": "test.sleep", "params": {"seconds": fixed(-1)},
             "tool": {"background": True}}
    flow = agent_flow(scripted([{"tool_calls": [{"name": "sleep", "arguments": {"tag": "x"}}]},
                                {"text": "{last_result}"}]), [sleep])
    from tests.servers.flows import SleepTool

    SleepTool.cancelled = []
    _, rec, _ = await run(flow, reg=registry(), timeout=30)
    assert json.loads(rec.debug_values()[0]["payload"])["status"] == "started"
    assert SleepTool.cancelled == ["x"]


async def test_every_call_that_waits_publishes_its_phases():
    flow = agent_flow(scripted([{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}},
                                                {"name": "fail", "arguments": {"why": "x"}},
                                                {"name": "sleep", "arguments": {"tag": "t"}}]},
                                {"text": "done"}]),
                      [{"id": "echo", "type": "test.echo",
                        "tool": {"approval": {"mode": "always"}}},
                       {"id": "fail", "type": "test.fail"},
                       {"id": "sleep", "type": "test.sleep", "params": {"seconds": fixed(0.01)}}])
    _, rec, _ = await run(flow, reg=registry(), timeout=30)
    # Waited for a person: every phase.
    assert [e.phase for e in statuses(rec, "echo")] == [
        "queued", "waiting_approval", "running", "succeeded"]
    # Went on past its first step (an await): shown running, then its end.
    assert [e.phase for e in statuses(rec, "sleep")] == ["queued", "running", "succeeded"]
    # Failed within its first step: nothing was ever live, tool.result says it.
    assert statuses(rec, "fail") == []
    assert [e.status for e in rec.of("tool.result") if e.tool == "fail"] == ["error"]
    assert all(e.tracking_id == "" for e in rec.of("tool.status"))


def test_progress_is_throttled_per_call(monkeypatch):
    bus = EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    now = [100.0]
    monkeypatch.setattr(CallStatus, "clock", staticmethod(lambda: now[0]))
    status = CallStatus(bus, "agent", "crawl", "crawl", "id-1")
    for i in range(50):  # fifty reports within one interval: one event
        status.progress(i / 50, f"page {i}")
    now[0] += PROGRESS_INTERVAL
    status.progress(0.9, "page 45")
    # The first report shows the call (its phase so far, queued) first.
    assert seen[0].phase == "queued"
    progress = [e for e in seen if e.phase == "progress"]
    assert [(e.progress, e.text) for e in progress] == [(0.0, "page 0"), (0.9, "page 45")]
    # The latest report is kept for task_status even when not published.
    status.progress(0.95, "page 48")
    assert (status.fraction, status.text) == (0.95, "page 48") and len(seen) == 3


async def test_progress_outside_a_tool_call_is_the_node_status():
    @node("test.progress_plain", name="P", category="Test")
    class Plain(Node):
        def on_message(self, msg):
            self.progress(0.25, "step 1 of 4")

    flow_dict = {"format": "switchboard.flow/1", "name": "p", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "p", "type": "test.progress_plain"}],
        "wires": [{"from": ["ask", "out"], "to": ["p", "in"]}]}
    from runtime.flow import parse_flow

    _, rec, _ = await run(parse_flow(flow_dict), reg=Registry([Inject, Plain]), timeout=30)
    assert any(e.node == "p" and e.text == "25% step 1 of 4" for e in rec.of("node.status"))


@node("test.wake_agent", name="Waking agent", category="Test", tools_port=True)
class WakingAgent(Agent):
    """An agent with the two background settings as params (as the AI Agent
    node declares them once it has them)."""

    wake_on_background = Param(bool, "Wake when a background task ends", default=False,
                               allow=CUSTOM)
    max_background_tasks = Param(int, "Background tasks at once", default=4, allow=CUSTOM)


async def test_the_agent_nodes_params_set_wake_and_the_cap():
    script = [{"tool_calls": [{"name": "crawl", "arguments": {"site": "e.example"}},
                              {"name": "crawl", "arguments": {"site": "f.example"}}]},
              {"text": "started"},
              {"text": "woken: {prompt}"}]
    flow = agent_flow(scripted(script, wake_on_background=True, max_background_tasks=1),
                      [CRAWL])
    flow.node("agent").type = "test.wake_agent"
    reg = Registry([Inject, DebugNode, WakingAgent, CrawlTool])

    def setup(engine):
        bridge = engine.nodes["agent"].node._get_bridge()
        assert bridge.wake_on_background is True and bridge.max_background == 1
        CrawlTool.gate.set()

    result, rec, _ = await run(flow, reg=reg, engine_hook=setup, timeout=30)
    results = [e for e in rec.of("tool.result") if e.tool == "crawl"]
    assert [r.status for r in results] == ["refused", "success"]  # the cap, then the end
    assert "max_background_tasks=1" in results[0].error
    # Woken after "started": a third turn, in the same conversation.
    assert [e.turn for e in rec.of("llm.request")] == [1, 2, 3]
    # "started" answered the user at once; the woken turn's answer followed.
    assert [d["payload"] for d in rec.debug_values()] == ["started", "woken: Hello"]


@node("test.blocking_crawl", name="Blocking crawl", category="Test",
      tool=Tool("slow_crawl", "Crawl with a blocking library"))
class BlockingCrawl(Node):
    """A plain-function tool that blocks (runs in a worker thread) and
    reports progress from there."""

    site = Param(str, "The site", scope=AI, allow=AI | CUSTOM)
    blocking = True

    def on_message(self, msg):
        self.progress(0.5, "page 1 of 2")


async def test_progress_from_a_worker_thread_reaches_the_bus_on_the_loop():
    import threading

    flow = agent_flow(scripted([{"tool_calls": [{"name": "slow_crawl",
                                                 "arguments": {"site": "g"}}]},
                                {"text": "done"}]), [{"id": "slow", "type": "test.blocking_crawl"}])
    threads: list[str] = []
    main = threading.current_thread().name

    def watch(engine):
        engine.bus.subscribe(lambda e: threads.append(threading.current_thread().name)
                             if e.type == "tool.status" and e.phase == "progress" else None)

    _, rec, _ = await run(flow, reg=Registry([Inject, DebugNode, Agent, BlockingCrawl]),
                          engine_hook=watch, timeout=30)
    [progress] = [e for e in statuses(rec, "slow_crawl") if e.phase == "progress"]
    assert (progress.progress, progress.text) == (0.5, "page 1 of 2")
    assert threads == [main]  # published on the loop's thread, not the worker's
    phases = [e.phase for e in statuses(rec, "slow_crawl")]
    assert phases.index("progress") < phases.index("succeeded")


@pytest.mark.parametrize("wait_for_the_person", [True, False])
async def test_task_cancel_while_the_call_waits_for_approval(wait_for_the_person):
    """Cancelled while a person is asked, or before its task even began
    (a task cancelled then never runs: the cancellation is still recorded)."""
    answers: dict[str, Any] = {}
    asked = asyncio.Event()

    async def play(messages, turn):
        if turn == 0:
            return call("crawl", {"site": "h.example"})
        if turn == 1:
            if wait_for_the_person:
                await asked.wait()
            return call("task_cancel", {"tracking_id": tracking_id(messages)}, 2)
        answers["cancel"] = json.loads(messages[-1]["content"])
        return LlmReply(text="ok")

    from runtime.approval import People

    class Never:
        """A person who is never there: the call waits until cancelled."""

        async def decide(self, request):
            asked.set()
            await asyncio.Event().wait()

    provider = Reactive(play)
    crawl = {**CRAWL, "tool": {"approval": {"mode": "always"}}}
    flow = agent_flow(scripted([]), [crawl])
    _, rec, _ = await run(flow, reg=registry(), engine_hook=hook(provider),
                          people=People(Never()), timeout=30)
    assert answers["cancel"]["status"] == "cancelled"
    assert "task_cancel" in answers["cancel"]["error"]
    assert not CrawlTool.reached.is_set()  # the node never ran
    phases = [e.phase for e in statuses(rec, "crawl")]
    assert phases[0] == "queued" and phases[-1] == "cancelled"
    if wait_for_the_person:
        assert phases == ["queued", "waiting_approval", "cancelled"]
    final = [e for e in rec.of("tool.result") if e.tool == "crawl"]
    assert len(final) == 1 and "task_cancel" in final[0].error


def test_the_agent_node_offers_the_background_settings():
    from nodes.ai import Agent

    spec = Agent.spec
    assert spec.param("wake_on_background").default is False
    assert spec.param("max_background_tasks").default == 4
    assert spec.param("wake_on_background").group == "advanced"


async def test_with_wake_the_agent_answers_the_user_at_once_then_reports():
    """What the agent says while its task goes on leaves the agent at once,
    marked interim; the crawl ends only after the user has that answer, and
    the report follows as the message's own answer."""
    script = [{"tool_calls": [{"name": "crawl", "arguments": {"site": "g.example"}}]},
              {"text": "I started the crawl; I will report when it ends."},
              {"text": "Crawl done: {last_result}"}]
    flow = agent_flow(scripted(script, wake_on_background=True), [CRAWL])
    reg = registry()

    def setup(engine):
        def open_gate_on_first_answer(event):
            if event.type == "debug" and "started the crawl" in str(event.value):
                CrawlTool.gate.set()  # only now may the crawl end
        engine.bus.subscribe(open_gate_on_first_answer)

    result, rec, _ = await run(flow, reg=reg, engine_hook=setup, timeout=30)
    assert result.status == "ok", rec.of("node.error")
    first, second = rec.debug_values()
    assert first["payload"] == "I started the crawl; I will report when it ends."
    assert first["agent"]["interim"] is True
    assert first["agent"]["background_tasks"][0].startswith("task-")
    assert second["payload"].startswith("Crawl done: [background task task-")
    assert '"pages": 5' in second["payload"]
    assert "interim" not in second["agent"]

"""Cost of the tool path, next to a bare asyncio future round trip measured
in the same run (the goals are ratios to it):

- a tool call proper (ToolBridge.call: parse, bound and check the
  arguments, copy the agent's message, run the node, answer) on a
  plain-function no-op node, with an event subscriber attached, and on an
  async no-op node: goal <= 1.5x each (issue 32; the subscriber and async
  goals were 2x before it);
- the same inside whole agent turns (scripted provider): one call per LLM
  turn (goal: <= 2.5x a plain tool call), and 2,000 calls in one turn;
- throughput with 1, 16 and 256 calls in flight (a tool that yields once);
- 100 parallel calls of a tool that sleeps 0.1 s;
- an agent run of 10, 100 and 500 one-call turns with an event
  subscriber, CPU time per turn: constant if a run's cost is linear in its
  turns (each llm.request event carries what its turn added, masked once;
  it grew with the square of the turns while each carried the whole
  conversation; the 10-turn figure holds the run's own start).

    python benchmarks/tool_calls.py [--calls N] [--repeat R]

Prints figures; never fails on a time."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodes.ai import Agent  # noqa: E402
from nodes.core.inject_debug import DebugNode, Inject  # noqa: E402
from runtime.engine import Engine  # noqa: E402
from runtime.events import EventBus  # noqa: E402
from runtime.flow import parse_flow  # noqa: E402
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node  # noqa: E402
from runtime.registry import Registry  # noqa: E402


@node("bench.noop", name="No-op", category="Bench", tool=Tool("noop", "Does nothing"))
class NoopTool(Node):
    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)

    def on_message(self, msg):
        return None


@node("bench.anoop", name="Async no-op", category="Bench", tool=Tool("anoop", "Does nothing"))
class AsyncNoopTool(Node):
    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)

    async def on_message(self, msg):
        return None


@node("bench.yield", name="Yield once", category="Bench", tool=Tool("yield_once", "Yields"))
class YieldTool(Node):
    x = Param(int, "A number", scope=AI, allow=AI | CUSTOM)

    async def on_message(self, msg):
        await asyncio.sleep(0)


@node("bench.sleep", name="Sleep", category="Bench", tool=Tool("sleep", "Sleeps"))
class SleepTool(Node):
    seconds = Param(float, "How long", scope=AI, allow=AI | CUSTOM)
    slept = Output(float, "How long it slept")

    async def on_message(self, msg):
        s = self.seconds.get(msg)
        await asyncio.sleep(s)
        self.slept.set(msg, s)


REGISTRY = Registry([Inject, DebugNode, Agent, NoopTool, AsyncNoopTool, YieldTool, SleepTool])


def flow_for(script: list[dict], tool_type: str, max_turns: int):
    def fixed(v):
        return {"scope": "custom", "value": v}

    return parse_flow({"format": "switchboard.flow/1", "name": "bench", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": fixed("scripted"), "script": fixed(script), "max_turns": fixed(max_turns),
            "tool_timeout_seconds": fixed(60),
            # Every call is run, not refused past the default caps (16 a turn,
            # 100 a message): the figures are of calls, not of refusals.
            "max_tool_calls_per_turn": fixed(max(len(t.get("tool_calls", [])) for t in script)),
            "max_tool_calls_per_run": fixed(sum(len(t.get("tool_calls", [])) for t in script))}},
        {"id": "show", "type": "core.debug"},
        {"id": "tool", "type": tool_type},
    ], "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                 {"from": ["agent", "out"], "to": ["show", "in"]},
                 {"from": ["agent", "tools"], "to": ["tool", "in"]}]})


async def run_flow(flow, *, events: bool = False) -> float:
    bus = EventBus()
    if events:
        bus.subscribe(lambda e: None)
    engine = Engine(flow, REGISTRY, bus, record=False)
    t0 = time.perf_counter()
    result = await engine.run()
    elapsed = time.perf_counter() - t0
    assert result.status == "ok", result
    return elapsed


async def future_round_trip(n: int) -> float:
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    for _ in range(n):
        fut = loop.create_future()
        loop.call_soon(fut.set_result, None)
        await fut
    return (time.perf_counter() - t0) / n


def best_of(values: list[float]) -> float:
    return min(values)


async def bridge_call(tool_type: str, name: str, n: int, *, events: bool) -> float:
    """Per call: ToolBridge.call alone, n times, on one engine (no LLM turn)."""
    from runtime.message import Message
    from runtime.tools import ToolBridge

    flow = flow_for([{"tool_calls": [{"name": name, "arguments": {}}]}, {"text": "x"}],
                    tool_type, 2)
    bus = EventBus()
    if events:
        bus.subscribe(lambda e: None)
    bridge = ToolBridge(Engine(flow, REGISTRY, bus, record=False), "agent")
    base, args = Message.new("go"), {"x": 1}
    for _ in range(200):
        await bridge.call(base, "c1", name, args, 60)
    t0 = time.perf_counter()
    for _ in range(n):
        await bridge.call(base, "c1", name, args, 60)
    return (time.perf_counter() - t0) / n


async def main(calls: int, repeat: int) -> None:
    call = {"name": "noop", "arguments": {"x": 1}}
    one_per_turn = flow_for([{"tool_calls": [call]}] * calls + [{"text": "done"}], "bench.noop",
                            calls + 1)
    parallel = flow_for([{"tool_calls": [call] * calls}, {"text": "done"}], "bench.noop", 2)
    acall = {"name": "anoop", "arguments": {"x": 1}}
    async_seq = flow_for([{"tool_calls": [acall]}] * calls + [{"text": "done"}], "bench.anoop",
                         calls + 1)

    await run_flow(parallel)  # warm up imports and caches
    fut = best_of([await future_round_trip(calls * 5) for _ in range(repeat)])
    plain = best_of([await bridge_call("bench.noop", "noop", calls * 5, events=False)
                     for _ in range(repeat)])
    heard = best_of([await bridge_call("bench.noop", "noop", calls * 5, events=True)
                     for _ in range(repeat)])
    anoop = best_of([await bridge_call("bench.anoop", "anoop", calls * 5, events=False)
                     for _ in range(repeat)])
    seq = best_of([await run_flow(one_per_turn) for _ in range(repeat)]) / calls
    par = best_of([await run_flow(parallel) for _ in range(repeat)]) / calls
    par_events = best_of([await run_flow(parallel, events=True) for _ in range(repeat)]) / calls
    aseq = best_of([await run_flow(async_seq) for _ in range(repeat)]) / calls

    us = 1e6
    print(f"tool calls: best of {repeat}, Python {sys.version.split()[0]}")
    print(f"  bare asyncio future round trip           {fut * us:7.2f} us")
    print(f"  tool call, plain-function no-op node     {plain * us:7.2f} us  {plain / fut:4.2f}x"
          "  (goal <= 1.5x)")
    print(f"    same, with an event subscriber         {heard * us:7.2f} us  {heard / fut:4.2f}x"
          "  (goal <= 1.5x)")
    print(f"  tool call, async no-op node              {anoop * us:7.2f} us  {anoop / fut:4.2f}x"
          "  (goal <= 1.5x)")
    print("  agent turns (scripted LLM), per call:")
    print(f"    1 call per LLM turn                    {seq * us:7.2f} us  {seq / fut:4.2f}x"
          f"  ({seq / plain:4.2f}x a plain tool call; goal <= 2.5x)")
    print(f"    1 async call per LLM turn              {aseq * us:7.2f} us  {aseq / fut:4.2f}x")
    print(f"    {calls:>5} calls in one turn              {par * us:7.2f} us  {par / fut:4.2f}x")
    print(f"      same, with an event subscriber       {par_events * us:7.2f} us  "
          f"{par_events / fut:4.2f}x")

    print("  calls in flight at once (a tool that yields once), calls per second:")
    for width in (1, 16, 256):
        turns = max(1, calls // width)
        flow = flow_for([{"tool_calls": [{"name": "yield_once", "arguments": {"x": 1}}] * width}]
                        * turns + [{"text": "done"}], "bench.yield", turns + 1)
        t = best_of([await run_flow(flow) for _ in range(repeat)])
        print(f"    {width:>3} in flight                         {turns * width / t:9,.0f} /s")

    print("  an agent run with an event subscriber, CPU time per turn (one call a turn):")
    for turns in (10, 100, 500):
        flow = flow_for([{"tool_calls": [call]}] * turns + [{"text": "done"}], "bench.noop",
                        turns + 1)
        used = []
        for _ in range(2):
            c0 = time.process_time()
            await run_flow(flow, events=True)
            used.append(time.process_time() - c0)
        print(f"    {turns:>4} turns                            "
              f"{min(used) / turns * 1e6:9.1f} us a turn")

    sleepers = flow_for([{"tool_calls": [{"name": "sleep", "arguments": {"seconds": 0.1}}] * 100},
                         {"text": "done"}], "bench.sleep", 2)
    times = [await run_flow(sleepers) for _ in range(3)]
    print(f"  100 parallel calls of a tool sleeping 0.1 s: {statistics.median(times):.3f} s total "
          f"(sequential would be 10 s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(main(args.calls, args.repeat))

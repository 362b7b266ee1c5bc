"""Message throughput: inject -> 10 x core.change -> counting sink.

Prints msg/s and µs per hop for the engine without and with an event
subscriber attached (tracing off), the ratio to a bare chain of 10 awaited
coroutines measured in the same run, and the same chain with one async node
(core.delay, seconds=0) in it, to show what a task per message costs.

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/throughput.py [--n 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.engine import Engine  # noqa: E402
from runtime.events import EventBus  # noqa: E402
from runtime.flow import Flow  # noqa: E402
from runtime.node import DROP, Node, node  # noqa: E402
from runtime.registry import Registry  # noqa: E402

HOPS = 11  # inject -> c0 ... c9 -> sink: 11 wires


@node("bench.sink", name="Counting sink", category="Bench", outputs=())
class CountingSink(Node):
    """Counts what arrives; sends nothing on."""

    count = 0

    def on_message(self, msg):
        CountingSink.count += 1
        return DROP


def chain_flow(n: int, *, async_at: int | None = None) -> Flow:
    """inject -> 10 x core.change (set payload) -> sink; with async_at, the
    change at that position is a core.delay with seconds=0."""
    nodes = [{"id": "src", "type": "core.inject",
              "params": {"count": {"scope": "custom", "value": n},
                         "payload": {"scope": "custom", "value": 0}}}]
    wires = []
    prev = "src"
    for i in range(10):
        nid = f"c{i}"
        if i == async_at:
            nodes.append({"id": nid, "type": "core.delay",
                          "params": {"seconds": {"scope": "custom", "value": 0}}})
        else:
            nodes.append({"id": nid, "type": "core.change", "params": {"rules": {
                "scope": "custom", "value": [{"action": "set", "path": "payload", "value": i}]}}})
        wires.append({"from": [prev, "out"], "to": [nid, "in"]})
        prev = nid
    nodes.append({"id": "sink", "type": "bench.sink"})
    wires.append({"from": [prev, "out"], "to": ["sink", "in"]})
    return Flow.model_validate({"format": "switchboard.flow/1", "name": "bench",
                                "nodes": nodes, "wires": wires})


def run_engine(flow: Flow, registry: Registry, *, subscribe: bool, n: int) -> float:
    bus = EventBus()
    seen = [0]
    if subscribe:
        bus.subscribe(lambda event: seen.__setitem__(0, seen[0] + 1))
    CountingSink.count = 0
    engine = Engine(flow, registry, bus, trace=False)
    t0 = time.perf_counter()
    result = asyncio.run(engine.run())
    elapsed = time.perf_counter() - t0
    if CountingSink.count != n or result.status != "ok":
        raise SystemExit(f"benchmark broken: sink saw {CountingSink.count} of {n} ({result})")
    return elapsed


async def _bare_chain(n: int) -> float:
    """The floor: the same work as 10 awaited coroutines per message."""

    async def step(msg: dict, i: int) -> None:
        msg["payload"] = i

    count = 0
    t0 = time.perf_counter()
    for _ in range(n):
        msg = {"payload": 0}
        for i in range(10):
            await step(msg, i)
        count += 1
    elapsed = time.perf_counter() - t0
    assert count == n
    return elapsed


def line(label: str, n: int, seconds: float, hops: int = HOPS, bare: float | None = None) -> str:
    rate = n / seconds
    text = f"{label:<42} {rate:>11,.0f} msg/s  {seconds / n / hops * 1e6:6.3f} µs/hop"
    if bare is not None:
        text += f"  {rate / (n / bare):5.2f} x bare"
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="messages per measurement")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is shown")
    args = ap.parse_args()
    n, repeat = args.n, max(1, args.repeat)

    registry = Registry([*Registry.default(), CountingSink])
    flow = chain_flow(n)
    async_flow = chain_flow(n, async_at=5)

    def best(fn) -> float:
        return min(fn() for _ in range(repeat))

    bare = best(lambda: asyncio.run(_bare_chain(n)))
    quiet = best(lambda: run_engine(flow, registry, subscribe=False, n=n))
    heard = best(lambda: run_engine(flow, registry, subscribe=True, n=n))
    mixed = best(lambda: run_engine(async_flow, registry, subscribe=True, n=n))

    print(f"throughput: {n:,} messages, inject -> 10 x core.change -> sink "
          f"({HOPS} hops), best of {repeat}, Python {sys.version.split()[0]}")
    print(line("bare chain of 10 awaited coroutines", n, bare, hops=10))
    print(line("engine, no subscriber", n, quiet, bare=bare))
    print(line("engine, subscriber attached (no trace)", n, heard, bare=bare))
    print(line("engine, subscriber, c5 = core.delay(0)", n, mixed, bare=bare))
    target = "meets" if n / heard >= 100_000 else "misses"
    print(f"target >= 100,000 msg/s with a subscriber: {target} it on this machine")


if __name__ == "__main__":
    main()

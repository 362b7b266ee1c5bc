"""A subflow costs nothing at run time: the 10-change chain of
benchmarks/throughput.py (inject -> 10 x core.change -> counting sink)
inline, against the same 10 nodes inside one subflow instance (inject ->
instance -> sink), in the same process, alternating, process CPU time.

A run expands the instance into its nodes (ids ``chain.c0`` ...) and wires
straight through its input and output (runtime.flow.expand), so both runs
take the same 11 hops; the issue's goal is a ratio of at least 0.9.

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/subflows.py [--n 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import CountingSink, chain_flow  # noqa: E402

from runtime.engine import Engine  # noqa: E402
from runtime.events import EventBus  # noqa: E402
from runtime.flow import Flow  # noqa: E402
from runtime.registry import Registry  # noqa: E402


def subflow_flow(n: int) -> Flow:
    """The same chain with c0 ... c9 inside a subflow 'chain' (in-flow)."""
    inline = chain_flow(n).to_json()
    changes = [node for node in inline["nodes"] if node["type"] == "core.change"]
    inner = [{"id": "i", "type": "subflow.in"}, *changes, {"id": "o", "type": "subflow.out"}]
    ids = ["i", *[c["id"] for c in changes], "o"]
    wires = [{"from": [a, "out"], "to": [b, "in"]} for a, b in zip(ids, ids[1:], strict=False)]
    return Flow.model_validate({
        "format": "switchboard.flow/1", "name": "bench-subflow",
        "subflows": [{"name": "chain", "nodes": inner, "wires": wires}],
        "nodes": [inline["nodes"][0], {"id": "chain", "type": "subflow:chain"},
                  {"id": "sink", "type": "bench.sink"}],
        "wires": [{"from": ["src", "out"], "to": ["chain", "in"]},
                  {"from": ["chain", "out"], "to": ["sink", "in"]}]})


def cpu_run(flow: Flow, registry: Registry, n: int) -> float:
    """Process CPU seconds of one run (the engine built outside the time)."""
    CountingSink.count = 0
    engine = Engine(flow, registry, EventBus(), trace=False)
    t0 = time.process_time()
    result = asyncio.run(engine.run())
    spent = time.process_time() - t0
    if CountingSink.count != n or result.status != "ok":
        raise SystemExit(f"benchmark broken: sink saw {CountingSink.count} of {n} ({result})")
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="messages per run")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    args = ap.parse_args()
    registry = Registry([*Registry.default(), CountingSink])
    inline, nested = chain_flow(args.n), subflow_flow(args.n)
    flat = Engine(nested, registry).flow
    assert [x.id for x in flat.nodes][1:-1] == [f"chain.c{i}" for i in range(10)]
    assert len(flat.wires) == len(inline.wires)
    cpu_run(chain_flow(1000), registry, 1000)  # warm: imports, caches
    cpu_run(subflow_flow(1000), registry, 1000)
    times: dict[str, list[float]] = {"inline": [], "subflow": []}
    ratios = []
    for _ in range(args.rounds):
        a = cpu_run(inline, registry, args.n)
        b = cpu_run(nested, registry, args.n)
        times["inline"].append(a)
        times["subflow"].append(b)
        ratios.append(a / b)
    print(f"subflows: {args.n:,} messages through 10 core.change nodes, process CPU time, "
          f"{args.rounds} alternating rounds, Python {sys.version.split()[0]}")
    for name, spent in times.items():
        best = min(spent)
        print(f"  {name:8} {args.n / best:>10,.0f} msg/s (best)   "
              f"{args.n / statistics.median(spent):>10,.0f} msg/s (median)")
    print(f"  subflow / inline throughput: median {statistics.median(ratios):.3f}x "
          f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)}); goal >= 0.9x")


if __name__ == "__main__":
    main()

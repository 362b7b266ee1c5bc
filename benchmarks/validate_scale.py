"""Load + validate time of long chains: inject -> N-2 x core.change -> debug.

Each flow is built as JSON, written to a temp file and read back with
``load_flow`` (parse, pydantic model, validate_flow). Linear validation
makes the 100k/10k ratio about 10; a quadratic one makes it about 100.

Beside it, in the same run and alternating with it: the baseline, a plain
read, ``json.loads`` and ``Flow.model_validate`` of the same file (goal:
load_flow at most 3x it), and ``validate_flow`` alone on the parsed flow
(goal: 100,000 nodes in under 1 s on a quiet machine).

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/validate_scale.py [--sizes 1000 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.flow import Flow, load_flow, validate_flow  # noqa: E402
from runtime.registry import Registry  # noqa: E402


def chain(n: int) -> dict:
    """A flow of n nodes in one line: inject, n-2 changes, debug."""
    ids = [f"n{i}" for i in range(n)]
    nodes = [{"id": ids[0], "type": "core.inject", "position": [0, 0],
              "params": {"payload": {"scope": "custom", "value": 1}}}]
    for i in range(1, n - 1):
        nodes.append({"id": ids[i], "type": "core.change", "position": [i * 10, 0],
                      "params": {"rules": {"scope": "custom", "value": [
                          {"action": "set", "path": "payload.step", "value": i}]}}})
    nodes.append({"id": ids[-1], "type": "core.debug", "position": [n * 10, 0]})
    wires = [{"from": [ids[i], "out"], "to": [ids[i + 1], "in"]} for i in range(n - 1)]
    return {"format": "switchboard.flow/1", "name": f"chain {n}", "nodes": nodes, "wires": wires}


def measure(n: int, repeat: int, registry: Registry, tmp: Path) -> tuple[float, float, float]:
    """Best of ``repeat`` (CPU seconds): load_flow, the plain baseline, and
    validate_flow alone; the three alternate within each round."""
    path = tmp / f"chain-{n}.flow.json"
    path.write_text(json.dumps(chain(n)), encoding="utf-8")
    load = base = check = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        flow = load_flow(path, registry)
        load = min(load, time.process_time() - t0)
        assert len(flow.nodes) == n
        # Collector off, as load_flow has it: a plain loop with it on spends
        # more time collecting than parsing, which would flatter the ratio.
        gc.disable()
        try:
            t0 = time.process_time()
            plain = Flow.model_validate(json.loads(path.read_text(encoding="utf-8")))
            base = min(base, time.process_time() - t0)
        finally:
            gc.enable()
        # With the collector back on, its next allocation makes it walk every
        # object load_flow and the baseline built (0.4-0.8 s at 100,000
        # nodes): outside the timings, not in validate_flow's as it once was.
        gc.collect()
        t0 = time.process_time()
        problems = validate_flow(plain, registry)
        check = min(check, time.process_time() - t0)
        assert not [p for p in problems if p.severity == "error"], problems[:3]
        del flow, plain, problems  # freed here, not in the next round's timings
        gc.collect()
    return load, base, check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per size")
    args = ap.parse_args()

    registry = Registry.default()

    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="switchboard-validate-") as d:
        measure(10, 1, registry, Path(d))
        print(f"validate_scale: CPU seconds, best of {args.repeat}, Python {sys.version.split()[0]}")
        print("               load_flow   (per node)   baseline   ratio   validate_flow alone")
        print("                                        (json.loads + Flow.model_validate)")
        for n in args.sizes:
            load, base, check = measure(n, args.repeat, registry, Path(d))
            times[n] = load
            print(f"{n:>9,} nodes {load:8.3f} s {load / n * 1e6:7.1f} us  {base:8.3f} s  "
                  f"{load / base:5.2f}x  {check:8.3f} s", flush=True)
    for small, big in zip(args.sizes, args.sizes[1:], strict=False):
        if times[small] > 0:
            print(f"ratio {big:,}/{small:,}: {times[big] / times[small]:.1f} "
                  f"(linear ~{big / small:g})")


if __name__ == "__main__":
    main()

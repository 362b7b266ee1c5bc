"""Load + validate time of long chains: inject -> N-2 x core.change -> debug.

Each flow is built as JSON, written to a temp file and read back with
``load_flow`` (parse, pydantic model, validate_flow). Linear validation
makes the 100k/10k ratio about 10; a quadratic one makes it about 100.

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/validate_scale.py [--sizes 1000 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.flow import load_flow  # noqa: E402
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


def measure(n: int, repeat: int, registry: Registry, tmp: Path) -> float:
    path = tmp / f"chain-{n}.flow.json"
    path.write_text(json.dumps(chain(n)), encoding="utf-8")
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        flow = load_flow(path, registry)
        best = min(best, time.perf_counter() - t0)
        assert len(flow.nodes) == n
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per size")
    args = ap.parse_args()

    registry = Registry.default()

    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="switchboard-validate-") as d:
        measure(10, 1, registry, Path(d))
        print(f"validate_scale: load_flow (read, parse, validate) of a chain, best of {args.repeat}, "
              f"Python {sys.version.split()[0]}")
        for n in args.sizes:
            times[n] = measure(n, args.repeat, registry, Path(d))
            print(f"{n:>9,} nodes  {times[n]:9.3f} s  {times[n] / n * 1e6:8.1f} µs/node", flush=True)
    for small, big in zip(args.sizes, args.sizes[1:], strict=False):
        if times[small] > 0:
            print(f"ratio {big:,}/{small:,}: {times[big] / times[small]:.1f} "
                  f"(linear ~{big / small:g})")


if __name__ == "__main__":
    main()

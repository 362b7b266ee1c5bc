"""How cost grows with work: the scaling table of docs/performance.md.

Prints, each figure the best of --repeat runs:

- msg/s through chains of 1, 10 and 100 core.change nodes (inject -> chain
  -> counting sink), and µs per hop;
- msg/s of a fan-out to 1, 10 and 100 wires (each branch after the first
  gets its own deep copy), and µs per delivered copy;
- the cost of a message's payload of 100 B, 10 KB and 1 MB (a list of
  100-byte records) on a linear chain (never copied) and through a fan-out
  of 2 (copied once), next to what deep_copy alone costs for it;
- designer open-to-first-paint for generated flows of 100, 2,000 and
  20,000 nodes (--designer; needs PySide6).

Tool calls with 1, 16 and 256 in flight are in benchmarks/tool_calls.py.
Prints figures; never fails on a time.

    .venv/bin/python benchmarks/scaling.py [--n 50000] [--repeat 3] [--designer]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import CountingSink  # noqa: E402

from runtime.engine import Engine  # noqa: E402
from runtime.events import EventBus  # noqa: E402
from runtime.flow import Flow  # noqa: E402
from runtime.message import deep_copy  # noqa: E402
from runtime.registry import Registry  # noqa: E402


def fixed(v):
    return {"scope": "custom", "value": v}


def make(nodes: list[dict], wires: list[tuple[str, str]]) -> Flow:
    return Flow.model_validate({"format": "switchboard.flow/1", "name": "scaling", "nodes": nodes,
                                "wires": [{"from": [a, "out"], "to": [b, "in"]} for a, b in wires]})


def source(n: int, payload) -> dict:
    return {"id": "src", "type": "core.inject", "params": {"count": fixed(n), "payload": fixed(payload)}}


def change(i: int) -> dict:
    return {"id": f"c{i}", "type": "core.change",
            "params": {"rules": fixed([{"action": "set", "path": "step", "value": i}])}}


def chain(length: int, n: int, payload=0) -> Flow:
    nodes = [source(n, payload), *(change(i) for i in range(length)),
             {"id": "sink", "type": "bench.sink"}]
    ids = [x["id"] for x in nodes]
    return make(nodes, list(zip(ids, ids[1:], strict=False)))


def fan_out(width: int, n: int, payload=0) -> Flow:
    nodes = [source(n, payload), change(0)]
    wires = [("src", "c0")]
    for i in range(width):
        nodes.append({"id": f"sink{i}", "type": "bench.sink"})
        wires.append(("c0", f"sink{i}"))
    return make(nodes, wires)


def run(flow: Flow, registry: Registry, expect: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        bus = EventBus()
        bus.subscribe(lambda e: None)
        CountingSink.count = 0
        engine = Engine(flow, registry, bus)
        t0 = time.perf_counter()
        result = asyncio.run(engine.run())
        best = min(best, time.perf_counter() - t0)
        if CountingSink.count != expect or result.reason != "completed":
            raise SystemExit(f"benchmark broken: {CountingSink.count} of {expect} ({result})")
    return best


def records(total_bytes: int) -> list[dict]:
    """About total_bytes of JSON: 100-byte records."""
    return [{"id": i, "name": f"item {i:06d}", "note": "x" * 64} for i in range(total_bytes // 100)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50_000, help="messages per measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--designer", action="store_true", help="also time the designer")
    args = ap.parse_args()
    n, repeat = args.n, args.repeat
    registry = Registry([*Registry.default(), CountingSink])

    print(f"scaling: best of {repeat}, subscriber attached, Python {sys.version.split()[0]}")
    print("chain length (change nodes)      msg/s     µs/hop")
    for length in (1, 10, 100):
        m = max(1000, n * 10 // max(length, 10))
        t = run(chain(length, m), registry, m, repeat)
        print(f"  {length:>4}                     {m / t:>10,.0f}   {t / m / (length + 1) * 1e6:7.3f}")

    print("fan-out (wires from one node)    msg/s     µs per delivered copy")
    for width in (1, 10, 100):
        m = max(1000, n * 10 // (width + 10))
        t = run(fan_out(width, m), registry, m * width, repeat)
        print(f"  {width:>4}                     {m / t:>10,.0f}   {t / (m * width) * 1e6:7.3f}")

    print("payload (100-byte records)       chain of 10, µs/msg   fan-out 2, µs/msg   "
          "deep_copy alone, µs")
    for size, label in ((100, "100 B"), (10_000, "10 KB"), (1_000_000, "1 MB")):
        payload = records(size)
        m = max(20, min(n, 2_000_000_000 // (size * 200)))
        t_chain = run(chain(10, m, payload), registry, m, repeat)
        t_fan = run(fan_out(2, m, payload), registry, 2 * m, repeat)
        k = max(3, m // 10)
        t0 = time.perf_counter()
        for _ in range(k):
            deep_copy(payload)
        t_copy = (time.perf_counter() - t0) / k
        print(f"  {label:<7}                  {t_chain / m * 1e6:12.1f}   {t_fan / m * 1e6:16.1f}"
              f"   {t_copy * 1e6:15.1f}")

    if args.designer:
        designer(repeat)


def designer(repeat: int) -> None:
    import json
    import os
    import tempfile

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from designer_scale import generate
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from designer.look import theme
    from designer.window.main_window import MainWindow

    theme.apply(app, theme.LIGHT)
    tmp = Path(tempfile.mkdtemp(prefix="switchboard-scaling-"))
    os.environ["SWITCHBOARD_DATA_DIR"] = str(tmp / "data")
    print("designer: open to first paint    ms      ms per node")
    for size in (100, 2000, 20000):
        path = tmp / f"scale-{size}.flow.json"
        path.write_text(json.dumps(generate(size, size)), encoding="utf-8")
        best = float("inf")
        for _ in range(repeat):
            window = MainWindow(restore_layout=False)
            window.resize(1440, 900)
            window.show()
            app.processEvents()
            t0 = time.perf_counter()
            window.open_path(path, ask=False)
            window.view.viewport().repaint()
            best = min(best, time.perf_counter() - t0)
            window.document.undo_stack.setClean()
            window.close()
            window.deleteLater()
            app.processEvents()
        print(f"  {size:>6} nodes            {best * 1000:8.0f}   {best * 1000 / size:8.3f}")


if __name__ == "__main__":
    main()

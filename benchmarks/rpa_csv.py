"""CSV through the nodes: csv.read and csv.write of n rows in a real flow,
against the csv module alone (csv.DictReader / csv.DictWriter) on the same
file in the same run.

Flows (base_folder: a temporary folder):
  read:        inject -> csv.read (source.csv)
  read+write:  inject -> csv.read (source.csv) -> csv.write (copy.csv)
The write figure is the difference of the two (the rows it writes come from
csv.read, so no inject has to deep-copy 100,000 dicts first). Each figure is
the median of a few alternating runs; the ratio is nodes / csv module in
rows per second (1.0: as fast as the csv module; the goal is >= 0.5).

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/rpa_csv.py [--n 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.engine import Engine  # noqa: E402
from runtime.events import EventBus  # noqa: E402
from runtime.flow import Flow  # noqa: E402
from runtime.registry import Registry  # noqa: E402

COLUMNS = ["id", "name", "email", "city", "amount", "date"]
CITIES = ["Oslo", "Köln", "Lyon", "Porto", "Graz", "Cork", "Turku", "Brno"]


def make_rows(n: int) -> list[dict]:
    return [{"id": i, "name": f"Customer {i}", "email": f"customer{i}@example.com",
             "city": CITIES[i % len(CITIES)], "amount": round(i * 1.37 % 1000, 2),
             "date": f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}"} for i in range(n)]


def _fixed(value) -> dict:
    return {"scope": "custom", "value": value}


def _flow(folder: Path, n: int, write: bool) -> Flow:
    common = {"base_folder": _fixed(str(folder)), "max_rows": _fixed(n)}
    nodes = [{"id": "go", "type": "core.inject", "params": {"payload": _fixed("go")}},
             {"id": "read", "type": "csv.read",
              "params": {"path": _fixed("source.csv"), **common}}]
    wires = [{"from": ["go", "out"], "to": ["read", "in"]}]
    last = "read"
    if write:
        nodes.append({"id": "write", "type": "csv.write",
                      "params": {"path": _fixed("copy.csv"), "rows": {"scope": "message",
                                                                      "path": "payload"},
                                 **common}})
        wires.append({"from": ["read", "out"], "to": ["write", "in"]})
        last = "write"
    nodes.append({"id": "show", "type": "core.debug", "params": {"path": _fixed("count")}})
    wires.append({"from": [last, "out"], "to": ["show", "in"]})
    return Flow.model_validate({"format": "switchboard.flow/1", "name": "csv bench",
                                "nodes": nodes, "wires": wires})


def _run_flow(flow: Flow, registry: Registry) -> tuple[float, list]:
    bus = EventBus()
    seen: list = []
    bus.subscribe(lambda e: seen.append(getattr(e, "value", None)) if e.type == "debug"
                  else (seen.append(e.message) if e.type == "node.error" else None))
    engine = Engine(flow, registry, bus)
    start = time.perf_counter()
    result = asyncio.run(engine.run())
    elapsed = time.perf_counter() - start
    if result.status != "ok":
        raise SystemExit(f"the flow failed: {seen}")
    return elapsed, seen


def _csv_read(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    return time.perf_counter() - start, len(rows)


def _csv_write(path: Path, rows: list[dict]) -> float:
    start = time.perf_counter()
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return time.perf_counter() - start


def csv_rows(n: int = 100_000, runs: int = 5) -> list[str]:
    """Printable result lines: rows/s of csv.read and csv.write through the
    engine against the csv module alone, measured in this run. Runs its own
    event loops (asyncio.run): call it from plain code, not from a coroutine."""
    registry = Registry.default()
    with tempfile.TemporaryDirectory(prefix="switchboard-csv-bench-") as tmp:
        folder = Path(tmp)
        rows = make_rows(n)
        _csv_write(folder / "source.csv", rows)
        size = (folder / "source.csv").stat().st_size
        read_flow, both_flow = _flow(folder, n, False), _flow(folder, n, True)
        # The module's write gets the rows as csv.read gives them (all text),
        # as the nodes' write does.
        with open(folder / "source.csv", newline="", encoding="utf-8") as f:
            text_rows = list(csv.DictReader(f))
        base_read, base_write, node_read, node_both = [], [], [], []
        _run_flow(both_flow, registry)  # warm-up: imports, first thread
        for _ in range(runs):
            t, count = _csv_read(folder / "source.csv")
            assert count == n
            base_read.append(t)
            base_write.append(_csv_write(folder / "module-copy.csv", text_rows))
            t, seen = _run_flow(read_flow, registry)
            assert seen == [n], seen
            node_read.append(t)
            t, seen = _run_flow(both_flow, registry)
            node_both.append(t)
        copy = (folder / "copy.csv").read_text(encoding="utf-8")
        assert copy == (folder / "module-copy.csv").read_text(encoding="utf-8"), \
            "csv.write wrote something else than csv.DictWriter"

    def rate(seconds: float) -> float:
        return n / seconds if seconds > 0 else float("inf")

    m = statistics.median
    br, bw, nr, nb = m(base_read), m(base_write), m(node_read), m(node_both)
    nw = max(nb - nr, 1e-9)
    lines = [
        f"csv: {n:,} rows x {len(COLUMNS)} columns ({size / 1e6:.1f} MB), median of {runs} runs",
        f"{'':12} {'csv module':>16} {'nodes':>16} {'ratio':>7}",
    ]
    for label, base, nodes in (("read", br, nr), ("write", bw, nw),
                               ("read+write", br + bw, nb)):
        lines.append(f"{label:12} {rate(base):>11,.0f} r/s {rate(nodes):>11,.0f} r/s "
                     f"{base / nodes:>6.2f}x")
    lines.append(f"(nodes: whole engine runs incl. start and stop; read+write flow "
                 f"{nb * 1000:.0f} ms, csv module {(br + bw) * 1000:.0f} ms)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="rows (default 100,000)")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    args = parser.parse_args()
    for line in csv_rows(args.n, args.runs):
        print(line)


if __name__ == "__main__":
    main()

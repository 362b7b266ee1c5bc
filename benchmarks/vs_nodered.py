"""Switchboard against Node-RED 4 on the same shape, back to back.

Alternates, round by round, ``../shared/bench/nodered/run.sh`` (Node-RED,
default asynchronous delivery: source -> 10 change nodes -> counting sink)
and this repository's ``benchmarks/throughput.py`` (inject -> 10 core.change
-> counting sink, an event subscriber attached), then prints the median
msg/s of each and their ratio (goal: >= 5x). Needs Node.js and npm (the
script installs node-red@4 into a temporary folder on its first run); says
so and stops if they are missing. Never fails on a time.

    .venv/bin/python benchmarks/vs_nodered.py [--rounds 5] [--n 200000]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODERED = ROOT.parent / "shared" / "bench" / "nodered" / "run.sh"


def nodered(n: int) -> float:
    out = subprocess.run(["bash", str(NODERED), str(n), "3"], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"change-10\s+N=\d+\s+median [\d.]+ s\s+(\d+) msg/s", out)
    if not m:
        raise SystemExit(f"unexpected Node-RED output:\n{out}")
    return float(m.group(1))


def switchboard(n: int) -> float:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--n",
                          str(n), "--repeat", "3"], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"engine, subscriber attached \(no trace\)\s+([\d,]+) msg/s", out)
    if not m:
        raise SystemExit(f"unexpected throughput.py output:\n{out}")
    return float(m.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    if not NODERED.exists() or not shutil.which("node") or not shutil.which("npm"):
        print(f"Node-RED benchmark not available (needs {NODERED} and node/npm); nothing measured")
        return
    red, sb = [], []
    for i in range(args.rounds):
        red.append(nodered(args.n))
        sb.append(switchboard(args.n))
        print(f"  round {i + 1}: Node-RED {red[-1]:>9,.0f} msg/s   Switchboard {sb[-1]:>9,.0f} msg/s",
              flush=True)
    r, s = statistics.median(red), statistics.median(sb)
    print(f"10-node change chain, {args.n:,} messages, {args.rounds} alternating rounds, medians:")
    print(f"  Node-RED 4 (default delivery)      {r:>9,.0f} msg/s")
    print(f"  Switchboard, subscriber attached   {s:>9,.0f} msg/s")
    print(f"  ratio                              {s / r:9.2f} x   (goal >= 5x)")


if __name__ == "__main__":
    main()

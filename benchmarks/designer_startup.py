"""Designer start-up against a bare PySide6 window, measured back to back.

Each round starts two fresh processes, alternating: a bare QMainWindow
(1440x900, shown, one event pass) and ``switchboard design FLOW
--screenshot`` on the email-assistant example. Prints, as medians over the
rounds: process start to a shown window, peak RSS at that moment, and the
designer's ratio to the bare window for both (goals: <= 2x time, <= 1.5x
RSS). Never fails on a time.

    .venv/bin/python benchmarks/designer_startup.py [--rounds 7] [--flow FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "resources" / "examples" / "email-assistant.flow.json"

BARE = """
import resource, sys, time
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv)
w = QMainWindow()
w.resize(1440, 900)
w.show()
app.processEvents()
print(f"switchboard-timing shown {time.time():.6f}", file=sys.stderr)
print(f"switchboard-timing rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}",
      file=sys.stderr)
"""


def _measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    shown = rss = float("nan")
    for line in proc.stderr.splitlines():
        if line.startswith("switchboard-timing shown "):
            shown = float(line.split()[2]) - start
        elif line.startswith("switchboard-timing rss "):
            rss = int(line.split()[2]) / 1024
    if shown != shown:
        raise SystemExit(f"no timing from {cmd[:3]}: {proc.stderr[-500:]}")
    return shown, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--flow", type=Path, default=EXAMPLE)
    args = ap.parse_args()
    bare_t, bare_m, des_t, des_m = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
                   SWITCHBOARD_TIMING="1", SWITCHBOARD_DATA_DIR=tmp, XDG_CONFIG_HOME=tmp)
        shot = str(Path(tmp) / "shot.png")
        # One unmeasured round of each: the first start pays for a cold disk cache.
        _measure([sys.executable, "-c", BARE], env)
        designer = [sys.executable, "-m", "runtime.cli", "design", str(args.flow),
                    "--screenshot", shot]
        _measure(designer, env)
        for _ in range(args.rounds):
            t, m = _measure([sys.executable, "-c", BARE], env)
            bare_t.append(t)
            bare_m.append(m)
            t, m = _measure(designer, env)
            des_t.append(t)
            des_m.append(m)
    med = statistics.median
    print(f"designer start-up: {args.flow.name}, {args.rounds} alternating rounds, medians, "
          f"Qt platform {env['QT_QPA_PLATFORM']}")
    print(f"  bare PySide6 window     {med(bare_t) * 1000:6.0f} ms  {med(bare_m):6.0f} MB")
    print(f"  switchboard design      {med(des_t) * 1000:6.0f} ms  {med(des_m):6.0f} MB")
    print(f"  ratio                   {med(des_t) / med(bare_t):6.2f} x   {med(des_m) / med(bare_m):5.2f} x"
          "   (goals: <= 2x time, <= 1.5x memory)")


if __name__ == "__main__":
    main()

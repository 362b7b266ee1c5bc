"""Designer start-up against a bare PySide6 window, measured back to back.

Each round starts three fresh processes, alternating: a bare QMainWindow
(1440x900, shown, one event pass), the floor (the same window showing the
flow read by ``load_flow`` as a plain box and label per node: what the first
frame of a flow cannot do without) and ``switchboard design FLOW
--screenshot`` on the email-assistant example (or a generated flow of
``--nodes N``). Prints, as medians over the rounds: process start to a
shown window, the process's own CPU time to that moment (steadier than
the wall clock on a busy machine), peak RSS at that moment, the time to
the designer's complete window (the inspector, properties and run
integration built after the first paint) and its RSS then, and the
designer's ratio to the bare window (goals: <= 2x time, <= 1.5x RSS).
Never fails on a time.

Python's bytecode cache is on, in a temporary PYTHONPYCACHEPREFIX (an
installed package has its .pyc files; with PYTHONDONTWRITEBYTECODE set, as
in some shells and CI, every start compiled the designer's and runtime's
~450 modules from source, ~1 s). ``--xvfb`` runs both under an Xvfb
server (Qt's xcb platform) instead of the offscreen platform.

    .venv/bin/python benchmarks/designer_startup.py [--rounds 7] [--flow FILE]
        [--nodes N] [--xvfb]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "resources" / "examples" / "email-assistant.flow.json"

#: Shows the window ``w`` of the scripts below and prints what was measured.
SHOWN = """
w.resize(1440, 900)
w.show()
app.processEvents()
print(f"switchboard-timing shown {time.time():.6f}", file=sys.stderr)
print(f"switchboard-timing cpu {time.process_time():.6f}", file=sys.stderr)
print(f"switchboard-timing rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}",
      file=sys.stderr)
"""

BARE = """
import resource, sys, time
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv)
w = QMainWindow()
""" + SHOWN

#: The floor under the goal: the bare window plus what the first frame of a
#: flow cannot do without in this design, the flow read through the
#: runtime's models and checks (``load_flow``) and drawn as one plain box and
#: label per node in a QGraphicsView. No palette, menus, theme, ports, wires
#: or properties: if this is over a goal, the designer cannot meet it by
#: trimming its own work.
FLOOR = """
import resource, sys, time
from runtime.flow import load_flow
flow = load_flow(sys.argv[1])
from PySide6.QtWidgets import QApplication, QGraphicsScene, QGraphicsView, QMainWindow
app = QApplication(sys.argv[:1])
w = QMainWindow()
scene = QGraphicsScene()
for i, node in enumerate(flow.nodes):
    x, y = node.position
    scene.addRect(x, y, 160, 60)
    scene.addText(f"{node.name or node.id}\\n{node.type}").setPos(x, y)
w.setCentralWidget(QGraphicsView(scene))
""" + SHOWN

NAN = float("nan")


def _measure(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    out = {"shown": NAN, "cpu": NAN, "rss": NAN, "ready": NAN, "ready_rss": NAN}
    for line in proc.stderr.splitlines():
        if not line.startswith("switchboard-timing "):
            continue
        _, key, value = (line.split(maxsplit=2) + [""])[:3]
        if key in ("shown", "ready"):
            out[key] = float(value) - start
        elif key == "cpu":
            out["cpu"] = float(value)
        elif key in ("rss", "ready_rss"):
            out[key] = int(value) / 1024
    if out["shown"] != out["shown"]:
        raise SystemExit(f"no timing from {cmd[:3]}: {proc.stderr[-500:]}")
    return out


def _xvfb() -> tuple[subprocess.Popen, str]:
    exe = shutil.which("Xvfb")
    if exe is None:
        raise SystemExit("--xvfb: Xvfb is not installed (apt-get install xvfb)")
    read, write = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(write), "-screen", "0", "1920x1080x24",
                             "-nolisten", "tcp"], pass_fds=(write,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        raise SystemExit("--xvfb: Xvfb did not start")
    return proc, f":{number}"


def _generated(n: int, folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from designer_scale import generate

    path = folder / f"generated-{n}.flow.json"
    path.write_text(json.dumps(generate(n, n)), encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--flow", type=Path, default=EXAMPLE)
    ap.add_argument("--nodes", type=int, default=0,
                    help="open a generated flow of this many nodes and wires instead")
    ap.add_argument("--xvfb", action="store_true", help="run under Xvfb (xcb), not offscreen")
    args = ap.parse_args()
    series: dict[str, dict[str, list[float]]] = {"bare": {}, "floor": {}, "design": {}}
    xvfb = None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SWITCHBOARD_TIMING="1", SWITCHBOARD_DATA_DIR=tmp,
                   XDG_CONFIG_HOME=tmp, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if args.xvfb:
            xvfb, display = _xvfb()
            env.pop("QT_QPA_PLATFORM", None)
            env.pop("WAYLAND_DISPLAY", None)
            env["DISPLAY"] = display
            platform = f"xcb (Xvfb {display})"
        else:
            env["QT_QPA_PLATFORM"] = os.environ.get("QT_QPA_PLATFORM", "offscreen")
            platform = env["QT_QPA_PLATFORM"]
        flow = _generated(args.nodes, Path(tmp)) if args.nodes else args.flow
        shot = str(Path(tmp) / "shot.png")
        bare = [sys.executable, "-c", BARE]
        floor = [sys.executable, "-c", FLOOR, str(flow)]
        designer = [sys.executable, "-m", "runtime.cli", "design", str(flow), "--screenshot", shot]
        try:
            # One unmeasured round of each: the first start pays for a cold
            # disk cache and writes the bytecode cache.
            _measure(bare, env)
            _measure(floor, env)
            _measure(designer, env)
            for _ in range(args.rounds):
                for name, cmd in (("bare", bare), ("floor", floor), ("design", designer)):
                    for key, value in _measure(cmd, env).items():
                        series[name].setdefault(key, []).append(value)
        finally:
            if xvfb is not None:
                xvfb.terminate()
                xvfb.wait()

    def med(name: str, key: str) -> float:
        return statistics.median(series[name][key])

    label = f"{args.nodes:,} generated nodes" if args.nodes else flow.name
    print(f"designer start-up: {label}, {args.rounds} alternating rounds, medians, "
          f"Qt platform {platform}")
    print("                          shown ms  CPU ms   RSS MB   complete ms  RSS MB")
    for name, title in (("bare", "bare PySide6 window"), ("floor", "floor (see FLOOR)"),
                        ("design", "switchboard design")):
        print(f"  {title:<22} {med(name, 'shown') * 1000:8.0f} {med(name, 'cpu') * 1000:7.0f} "
              f"{med(name, 'rss'):8.0f}   {med(name, 'ready') * 1000:10.0f} "
              f"{med(name, 'ready_rss'):7.0f}")
    for name, title in (("floor", "floor / bare"), ("design", "design / bare")):
        print(f"  {title:<22} {med(name, 'shown') / med('bare', 'shown'):7.2f}x "
              f"{med(name, 'cpu') / med('bare', 'cpu'):6.2f}x "
              f"{med(name, 'rss') / med('bare', 'rss'):7.2f}x")
    print("  (goals for the designer: <= 2x time, <= 1.5x RSS; the floor is the bare window, "
          "load_flow and a plain box per node)")


if __name__ == "__main__":
    main()

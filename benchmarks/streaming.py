"""Streaming answers: a local OpenAI-compatible server streams one answer of
5,000 pieces as fast as it can write them.

Prints, with coalescing (``llm.delta`` at most every 50 ms per agent, as
shipped) and without (every piece an event):
- the events reaching a bus subscriber, per second of stream and in all;
- the designer's frame time while the stream runs: a real main window
  (offscreen) runs the flow on Qt's event loop as the designer does, and a
  16 ms QTimer records the gaps between its ticks; the worst gap and the
  median.
Never fails on a time; it prints figures.

    .venv/bin/python benchmarks/streaming.py [--pieces 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SWITCHBOARD_DATA_DIR", tempfile.mkdtemp(prefix="switchboard-bench-"))
os.environ["BENCH_OPENAI_KEY"] = "sk-bench"

from runtime.agent import base  # noqa: E402
from tests.servers.flows import agent_flow, fixed, run  # noqa: E402
from tests.servers.llm import LlmServer, Stream, openai_reply  # noqa: E402

TICK_MS = 16


def agent(llm: LlmServer) -> dict:
    return {"provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(llm.openai_url), "api_key_env": fixed("BENCH_OPENAI_KEY")}


def pieces(n: int) -> list[str]:
    return [f"w{i} " for i in range(n)]


def bus_figures(n: int) -> dict:
    """Deltas reaching a subscriber of a headless run."""
    with LlmServer() as llm:
        words = pieces(n)
        llm.replies = [Stream(openai_reply("".join(words)), pieces=words)]
        t0 = time.perf_counter()
        result, rec, _ = asyncio.run(run(agent_flow(agent(llm), []), timeout=300))
        total = time.perf_counter() - t0
    assert result.status == "ok", rec.of("node.error")
    deltas = rec.of("llm.delta")
    span = (deltas[-1].ts - deltas[0].ts) if len(deltas) > 1 else 0.0
    assert "".join(d.text for d in deltas) == "".join(words)
    return {"events": len(deltas), "span_s": span, "run_s": total,
            "per_s": len(deltas) / span if span else float("nan")}


def frame_figures(n: int) -> dict:
    """The designer's frame gaps while the stream arrives."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from designer.control.run_controller import qt_event_loop
    from designer.model.document import FlowDocument
    from designer.panels.inspector.inspector import TAB_NAMES

    app = QApplication.instance() or QApplication([])
    qt_event_loop()
    from designer.window.main_window import MainWindow

    with LlmServer() as llm:
        words = pieces(n)
        # A short answer first warms the run path up (the SDK's import, the
        # client, the inspector's first conversation); the second is measured.
        llm.replies = [Stream(openai_reply("warm up"), pieces=2),
                       Stream(openai_reply("".join(words)), pieces=words)]
        document = FlowDocument(agent_flow(agent(llm), []))
        window = MainWindow(document, restore_layout=False, autosave_interval_ms=3_600_000)
        window.resize(1440, 900)
        window.show()
        session = window.run_session
        session.inspector.tabs.setCurrentIndex(TAB_NAMES.index("Agent"))
        for _ in range(20):
            app.processEvents()
        seen = {"deltas": 0}
        session.controller.events.connect(
            lambda evs: seen.__setitem__("deltas", seen["deltas"] + sum(
                1 for e in evs if e.type == "llm.delta")))
        gaps: list[float] = []
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            gaps.append((now - last[0]) * 1000)
            last[0] = now

        window.run_action.trigger()
        while session.controller.is_running:
            app.processEvents()
        for _ in range(20):
            app.processEvents()
        seen["deltas"] = 0
        timer = QTimer()
        timer.setInterval(TICK_MS)
        timer.timeout.connect(tick)
        window.run_action.trigger()
        last[0] = time.perf_counter()
        timer.start()
        t0 = time.perf_counter()
        while session.controller.is_running and time.perf_counter() - t0 < 300:
            app.processEvents()
        timer.stop()
        elapsed = time.perf_counter() - t0
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()
        app.processEvents()
    gaps = gaps[1:] or [0.0]  # the first gap includes the run's start
    return {"worst_ms": max(gaps), "median_ms": statistics.median(gaps), "ticks": len(gaps),
            "over_50ms": sum(1 for g in gaps if g > 50),
            "run_s": elapsed, "gui_deltas": seen["deltas"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, default=5000)
    args = parser.parse_args()
    modes = (("coalesced (50 ms)", base.DELTA_INTERVAL), ("every piece", 0.0))
    shipped = base.DELTA_INTERVAL
    figures: dict[str, list[dict]] = {label: [] for label, _ in modes}
    # Headless runs first: once Qt's loop is asyncio's, asyncio.run is refused.
    for step in (bus_figures, frame_figures):
        for label, interval in modes:
            base.DELTA_INTERVAL = interval
            try:
                figures[label].append(step(args.pieces))
            finally:
                base.DELTA_INTERVAL = shipped
    rows = [(label, *figures[label]) for label, _ in modes]
    print(f"{args.pieces} streamed pieces, one answer; Qt platform "
          f"{os.environ.get('QT_QPA_PLATFORM')}, timer {TICK_MS} ms")
    print(f"{'':20} {'llm.delta':>10} {'events/s':>10} {'stream s':>9} "
          f"{'GUI worst':>10} {'GUI median':>11} {'GUI run s':>10} {'to GUI':>7}")
    for label, bus, gui in rows:
        print(f"{label:20} {bus['events']:>10} {bus['per_s']:>10.0f} {bus['span_s']:>9.2f} "
              f"{gui['worst_ms']:>8.1f}ms {gui['median_ms']:>9.1f}ms {gui['run_s']:>10.2f} "
              f"{gui['gui_deltas']:>7} {gui['over_50ms']:>4} of {gui['ticks']:<4}")
    print("events/s: llm.delta events over the time from the first to the last; "
          "GUI: gaps between ticks of a 16 ms QTimer while the measured stream ran "
          "(after a warm-up run); to GUI: llm.delta events in the batches the designer got")


if __name__ == "__main__":
    main()

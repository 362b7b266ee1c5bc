"""The designer's two-phase start (docs/performance.md, "Designer start-up
and memory"): the window shows the canvas with the flow first, and builds
the properties panel, the inspector and the run integration on the event
loop's first turn. A user who acts at once finds the whole window: F5, a
selection and the inspector's keys work before or right after that turn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.model.document import FlowDocument
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, ORDER_TRIAGE, history, qt_loop  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def staged_window(qtbot, qt_loop, history, monkeypatch, data_dir):  # noqa: F811
    """``MainWindow(staged=True)`` as ``switchboard design`` makes it, not
    shown and no event processed yet: its second phase has not run."""
    from designer.window.main_window import MainWindow

    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    windows = []

    def make(path: Path) -> MainWindow:
        w = MainWindow(FlowDocument.open(path), restore_layout=False, staged=True,
                       autosave_interval_ms=3_600_000)
        w.resize(1440, 900)
        windows.append(w)
        return w

    yield make
    for w in windows:
        session = w.__dict__.get("run_session")
        if session is not None and session.controller.is_running:
            session.controller.stop()
            qtbot.waitUntil(lambda s=session: not s.controller.is_running, timeout=10000)
        w.document.undo_stack.setClean()
        w.close()
        w.deleteLater()
    QApplication.processEvents()


def test_f5_before_the_second_phase_builds_it_and_runs_the_flow(staged_window, qtbot):
    window = staged_window(ORDER_TRIAGE)
    assert "run_session" not in window.__dict__ and "properties" not in window.__dict__
    window.run_action.trigger()  # what F5 does
    session = window.run_session
    assert session.controller.is_running
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)
    values = [e.value for e in session.inspector.debug.entries()]
    assert "Order A-1001 for Ada: 2 lines, small" in values
    assert "Finished" in session.status.text()


def test_a_selection_before_the_second_phase_shows_the_nodes_form(staged_window):
    window = staged_window(EMAIL_ASSISTANT)
    agent = next(n.id for n in window.document.flow.nodes if n.type == "ai.agent")
    window.scene.select_nodes([agent])
    assert window.properties.form is not None and window.properties.form.node_id == agent
    assert window.properties_dock.widget() is window.properties


def test_the_first_event_loop_turn_completes_the_window_and_its_keys_work(staged_window, qtbot):
    from designer.app import show_staged

    window = staged_window(ORDER_TRIAGE)
    show_staged(window)
    assert "run_session" not in window.__dict__  # shown: the canvas only
    QApplication.processEvents()  # the event loop's first turn
    assert "run_session" in window.__dict__ and "properties" in window.__dict__
    session, dock = window.run_session, window.inspector_dock
    assert dock.isVisible() and session.inspector.collapsed
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    QTest.keyClick(window, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not session.inspector.collapsed)
    QTest.keyClick(window, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: session.inspector.debug.list.topLevelItemCount() == 3, timeout=10000)
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=10000)


def test_switchboard_design_shows_the_canvas_before_the_engine_and_pictures_the_whole_window(
        tmp_path):
    shot = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SWITCHBOARD_TIMING="1",
               SWITCHBOARD_DATA_DIR=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path))
    starts = []
    for _ in range(2):  # the first start writes the node catalog cache; the second reads it
        proc = subprocess.run([sys.executable, "-m", "runtime.cli", "design",
                               str(EMAIL_ASSISTANT), "--screenshot", str(shot)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        starts.append(dict(line.split(" ", 2)[1:] for line in proc.stderr.splitlines()
                           if line.startswith("switchboard-timing ")))
    marks = starts[1]
    assert marks["second-phase-modules"] == ""  # none of them before the first paint
    # Nor a node package once the catalog is cached: the canvas draws from
    # its specs, and the flow's check (which imports the packages of its
    # nodes) waits for the second phase.
    assert marks["node-packages"] == ""
    # No LLM client, gRPC or asyncio either (asyncio alone is ~0.5x a bare
    # window's start): the event loop is the second phase's.
    assert marks["modules"] == ""
    assert float(marks["ready"]) >= float(marks["shown"])
    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1440, 900)


def test_the_flows_problems_are_found_in_the_second_phase_not_before_the_first_paint(
        staged_window, qtbot, tmp_path):
    import json

    flow = json.loads(ORDER_TRIAGE.read_text(encoding="utf-8"))
    flow["nodes"].append({"id": "loose", "type": "core.debug", "position": [900, 600]})
    path = tmp_path / "loose.flow.json"
    path.write_text(json.dumps(flow), encoding="utf-8")
    window = staged_window(ORDER_TRIAGE)
    # As ``switchboard design FLOW`` opens it: into the staged window.
    assert window.open_path(path, ask=False, recover=False)
    qtbot.wait(400)  # well past the validation delay (150 ms): held, nothing ran
    assert not [p for p in window.document.problems if p.node == "loose"]
    window.complete_start()  # what the first event-loop turn does
    problems = [p for p in window.document.problems if p.node == "loose"]
    assert problems and "not connected" in problems[0].message
    assert "warning" in window.problems_label.text()  # the status bar says so


def test_the_staged_window_loads_no_engine():
    """Before the first paint the window needs the flow's model and checks,
    never the engine (a run builds it): its import is start-up time the
    user waits through. A fresh process, since this one has loaded it."""
    code = ("import sys\n"
            "from PySide6.QtWidgets import QApplication\n"
            "app = QApplication([])\n"
            "from designer.window.main_window import MainWindow\n"
            "w = MainWindow(restore_layout=False, staged=True)\n"
            "print(sorted(m for m in sys.modules if m.startswith('runtime.engine')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"

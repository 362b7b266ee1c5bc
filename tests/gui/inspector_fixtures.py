"""Fixtures for the run and inspector tests.

How asyncio runs in these tests: the designer runs the engine on a qasync
``QEventLoop`` created with ``already_running=True`` (see
``designer.control.run_controller.qt_event_loop``), which registers itself as the
running asyncio loop of the GUI thread without calling ``run_forever``. Then
Qt's own event processing drives asyncio: ``qtbot.waitUntil`` /
``qtbot.waitSignal`` spin Qt events, qasync's timers and socket notifiers
fire inside them, and the run advances. The tests stay plain (sync)
functions, so pytest-asyncio never meets the qasync loop; the ``qt_loop``
fixture unregisters the loop after each test so that async tests in other
files get a clean slate, and keeps the one loop for the session.

Import the fixtures with ``from tests.gui.inspector_fixtures import *``
(``qt_loop``, ``controller``, ``fake_window``) or by name.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "resources" / "examples"
ORDER_TRIAGE = EXAMPLES / "order-triage.flow.json"
EMAIL_ASSISTANT = EXAMPLES / "email-assistant.flow.json"

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


_LOOP = None


@pytest.fixture
def qt_loop(qapp):
    """The qasync loop, registered as this thread's running asyncio loop for
    the test and unregistered after it. One loop serves the whole session:
    stopping a qasync loop made with ``already_running=True`` calls
    ``QApplication.exit()``, and a second loop made after that never ran its
    callbacks here."""
    global _LOOP
    import qasync

    try:
        existing = asyncio.get_running_loop()
    except RuntimeError:
        existing = None
    if existing is not None:  # someone (the app under test) made one: use it
        yield existing
        return
    if _LOOP is None:
        _LOOP = qasync.QEventLoop(qapp, already_running=True)
    loop = _LOOP
    asyncio.events._set_running_loop(loop)
    asyncio.set_event_loop(loop)
    yield loop
    # Let cancelled tasks finish their cleanup before the test's objects go.
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        from pytestqt.qtbot import QtBot

        QtBot(qapp).waitUntil(lambda: all(t.done() for t in pending), timeout=5000)
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


@pytest.fixture
def history(tmp_path):
    from runtime.history import History

    h = History(tmp_path / "history.sqlite3")
    yield h
    h.close()


@pytest.fixture
def controller(qt_loop, history):
    from designer.control.run_controller import RunController

    ctl = RunController(history=history)
    yield ctl
    if ctl.is_running:
        ctl.stop()


def load_example(path: Path = ORDER_TRIAGE):
    from runtime.flow import load_flow

    return load_flow(path)


class FakeItem:
    """Stands in for the canvas's node and wire items: records what it was told."""

    def __init__(self) -> None:
        self.states: list[tuple[str, int, str]] = []
        self.activity: list[int] = []

    def set_run_state(self, state: str, count: int = 0, text: str = "") -> None:
        self.states.append((state, count, text))

    def clear_run_state(self) -> None:
        self.states.append(("idle", 0, ""))

    def set_activity(self, count: int) -> None:
        self.activity.append(count)


class FakeScene:
    def __init__(self, flow) -> None:
        self.nodes = {n.id: FakeItem() for n in flow.nodes}
        self.wires = {i: FakeItem() for i in range(len(flow.wires))}

    def item_for_node(self, node_id):
        return self.nodes.get(node_id)

    def item_for_wire(self, index):
        return self.wires.get(index)


def make_fake_window(flow, history=None):
    """A QMainWindow with the attributes the run integration relies on
    (document, scene, run/stop actions, inspector dock, select_node), for
    testing the integration without the editor."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QAction, QKeySequence
    from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow

    from designer.model.document import FlowDocument
    from designer.running.run_integration import RunSession

    window = QMainWindow()
    window.resize(1440, 900)
    window.setCentralWidget(QLabel("canvas"))
    window.document = FlowDocument(flow)
    window.scene = FakeScene(flow)
    menu = window.menuBar().addMenu("&Run")
    window.run_action = QAction("Run", window)
    window.run_action.setShortcut(QKeySequence("F5"))
    window.stop_action = QAction("Stop", window)
    window.stop_action.setShortcut(QKeySequence("Shift+F5"))
    menu.addAction(window.run_action)
    menu.addAction(window.stop_action)
    window.inspector_dock = QDockWidget("Inspector", window)
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, window.inspector_dock)
    window.selected = []
    window.select_node = window.selected.append
    window.session = RunSession(window, history=history)
    return window


@pytest.fixture
def fake_window(qt_loop, history, qtbot):
    def make(flow):
        window = make_fake_window(flow, history)
        qtbot.addWidget(window)
        return window

    return make

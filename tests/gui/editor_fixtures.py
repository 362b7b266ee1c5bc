"""Fixtures for the editor tests: a small fake node registry (a source, a
step, an agent with a tools port, a tool node), a document and a main
window over it, dialogs that answer instead of blocking, and helpers that
drive the canvas with real mouse events.

Use with ``from tests.gui.editor_fixtures import *  # noqa: F401,F403``."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from runtime.flow import FlowNode, Wire
from runtime.node import AI, CUSTOM, MESSAGE, Node, Param, Tool, node
from runtime.registry import Registry


@node("test.source", name="Source", category="Test", icon="play", color="#5b8def", inputs=())
class FakeSource(Node):
    """Sends one message."""

    payload = Param("json", "What to send", default="", allow=CUSTOM)


@node("test.step", name="Step", category="Test", icon="edit", color="#e2a03f")
class FakeStep(Node):
    """Passes the message on."""

    label = Param(str, "A label", default="", allow=CUSTOM | MESSAGE)
    count = Param(int, "A number", default=1, allow=CUSTOM)


@node("test.fork", name="Fork", category="Test", icon="switch", color="#e2a03f",
      outputs=("yes", "no"))
class FakeFork(Node):
    """Two outputs."""


@node("test.agent", name="Agent", category="AI", icon="agent", color="#9b59b6", tools_port=True)
class FakeAgent(Node):
    """An agent with a tools port."""

    model = Param(str, "Model", default="m", allow=CUSTOM)


@node("test.tool", name="Lookup", category="Test", icon="mail", color="#2e86c1",
      tool=Tool("lookup", "Look something up"))
class FakeTool(Node):
    """A node that can be a tool."""

    query = Param(str, "What to look up", scope=AI, allow=AI | CUSTOM | MESSAGE)
    limit = Param(int, "How many", default=3, allow=AI | CUSTOM)


@node("test.sink", name="Sink", category="Test", icon="bug", color="#7a869a", outputs=())
class FakeSink(Node):
    """Takes messages, sends nothing."""


FAKE_NODES = [FakeSource, FakeStep, FakeFork, FakeAgent, FakeTool, FakeSink]


@pytest.fixture
def registry() -> Registry:
    return Registry(FAKE_NODES)


@pytest.fixture
def doc(qapp, registry):
    from designer.model.document import FlowDocument

    return FlowDocument(registry=registry)


def add(doc, node_id: str, type_id: str, x: float, y: float, **fields) -> None:
    """Put a node in the document directly (setup, not under test)."""
    doc.insert_node(FlowNode(id=node_id, type=type_id, position=(x, y), **fields))


def wire(doc, src: str, sport: str, dst: str, dport: str = "in") -> None:
    doc.insert_wire(Wire(source=(src, sport), target=(dst, dport)))


@pytest.fixture
def make_window(qtbot, registry, data_dir):
    """Build main windows over fresh documents; each is closed (without a
    save prompt) at the end of the test."""
    from designer.model.document import FlowDocument
    from designer.window.main_window import MainWindow

    windows = []

    def make(document=None):
        document = document or FlowDocument(registry=registry)
        w = MainWindow(document, restore_layout=False, autosave_interval_ms=3_600_000)
        # Not qtbot.addWidget: qtbot closes its widgets before this fixture's
        # teardown, and a window with unsaved changes would ask (and block).
        w.resize(1200, 800)
        w.show()
        qtbot.waitExposed(w)
        windows.append(w)
        return w

    yield make
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    for w in windows:
        w.document.undo_stack.setClean()
        w.close()
        w.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    # Collect the windows' Python objects now, not in a long GC pause during
    # some later (timing-sensitive) test.
    import gc

    gc.collect()


@pytest.fixture
def window(make_window):
    return make_window()


@pytest.fixture
def dialogs(monkeypatch):
    """Record QMessageBox calls instead of showing them. Set
    ``dialogs.answer`` to the button a question returns."""
    from PySide6.QtWidgets import QMessageBox

    class Recorder:
        answer = QMessageBox.StandardButton.Discard
        calls: list[tuple[str, str, str]] = []

    rec = Recorder()
    rec.calls = []

    def fake(kind):
        def show(parent, title, text, *args, **kwargs):
            rec.calls.append((kind, title, text))
            if kind == "question":
                return rec.answer
            return QMessageBox.StandardButton.Ok
        return show

    for kind in ("question", "warning", "information", "critical"):
        monkeypatch.setattr(QMessageBox, kind, staticmethod(fake(kind)))
    monkeypatch.setattr(QMessageBox, "about", staticmethod(fake("about")))
    return rec


# -- driving the canvas ---------------------------------------------------------

def view_point(window, scene_pos: QPointF) -> QPoint:
    return window.view.mapFromScene(scene_pos)


def port_point(window, node_id: str, port: str, kind: str = "out") -> QPoint:
    item = window.scene.item_for_node(node_id)
    return view_point(window, item.port_scene_pos(port, kind))


def body_point(window, node_id: str) -> QPoint:
    item = window.scene.item_for_node(node_id)
    return view_point(window, item.mapToScene(QPointF(item.boundingRect().width() / 2, 30)))


def drag(window, start: QPoint, end: QPoint, steps: int = 4,
         modifiers=Qt.KeyboardModifier.NoModifier, release: bool = True) -> None:
    vp = window.view.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, modifiers, start)
    for i in range(1, steps + 1):
        p = start + (end - start) * (i / steps)
        QTest.mouseMove(vp, QPoint(round(p.x()), round(p.y())))
    if release:
        QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, modifiers, end)


def show_all(window) -> None:
    """Zoom to 1:1 centred on the flow, so that ports are large targets."""
    window.view.set_zoom(1.0)
    window.view.centerOn(window.scene.nodes_rect().center())

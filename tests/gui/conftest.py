"""GUI tests: offscreen Qt, and no test may leave a top-level widget behind
(a leaked window means a test forgot to close what it opened)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_leaked_windows(qapp):
    from PySide6.QtWidgets import QApplication

    before = {id(w) for w in QApplication.topLevelWidgets()}
    yield
    QApplication.processEvents()
    leaked = [w for w in QApplication.topLevelWidgets()
              if id(w) not in before and w.isVisible()]
    for w in leaked:
        w.close()
        w.deleteLater()
    QApplication.processEvents()
    assert not leaked, f"test left windows open: {[type(w).__name__ for w in leaked]}"


@pytest.fixture(autouse=True)
def _no_running_loop_left():
    """A window that ran a flow registered a qasync loop as this thread's
    running loop (designer.run_controller.qt_event_loop); left there, every
    later asyncio test fails with "cannot be called from a running event
    loop". The qt_loop fixture unregisters its own; this catches the rest."""
    import asyncio

    yield
    loop = asyncio.events._get_running_loop()
    if loop is None:
        return
    from PySide6.QtWidgets import QApplication

    for task in [t for t in asyncio.all_tasks(loop) if not t.done()]:
        task.cancel()
    QApplication.processEvents()
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)

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
def _no_unexpected_message_box(monkeypatch):
    """A QMessageBox nobody expected would block an offscreen test for ever
    (its modal loop waits for a click that never comes), and CI with it.
    Shown here, it is answered at once with its most careful button and the
    test fails naming it. A test that expects one patches QMessageBox
    itself (the ``dialogs`` fixture), which takes precedence."""
    from PySide6.QtWidgets import QMessageBox

    shown: list[str] = []

    def guard(kind: str):
        def show(parent, title, text, *args, **kwargs):
            shown.append(f"QMessageBox.{kind}({title!r}, {str(text)[:300]!r})")
            return (QMessageBox.StandardButton.Cancel if kind == "question"
                    else QMessageBox.StandardButton.Ok)
        return staticmethod(show)

    for kind in ("question", "warning", "information", "critical"):
        monkeypatch.setattr(QMessageBox, kind, guard(kind))
    yield
    assert not shown, f"the test showed a message box it did not expect: {shown}"


@pytest.fixture(autouse=True)
def _no_running_loop_left():
    """A window that ran a flow registered a qasync loop as this thread's
    running loop (designer.control.run_controller.qt_event_loop); left there, every
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

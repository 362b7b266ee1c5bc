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

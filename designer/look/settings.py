"""Where the designer keeps what it remembers between sessions (layout,
recent files, theme, the canvas's recent picks): one QSettings store, shared
by the window, the canvas and the run session without importing each other."""

from __future__ import annotations

from PySide6.QtCore import QSettings


def settings() -> QSettings:
    return QSettings("Switchboard", "Switchboard")

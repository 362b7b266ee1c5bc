"""Checks that a window keeps its size and shows every control whole, for
the tests that open cards, dialogs and panels with long values at 1440x900.

``offenders(top)`` lists each visible control that lies (even in part)
outside ``top``, or outside an ancestor that clips it: a scroll area's
viewport clips sideways only (a control below the fold is scrolled to, a
control cut at the right is just cut), every other parent clips both ways."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QRect
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTabBar,
    QTextEdit,
    QWidget,
)

SCREEN_W, SCREEN_H = 1440, 900
CONTROLS = (QAbstractButton, QAbstractItemView, QAbstractSpinBox, QComboBox, QLabel, QLineEdit,
            QPlainTextEdit, QTabBar, QTextEdit)


def settle() -> None:
    """Let posted layout requests and resizes run (no clock involved)."""
    for _ in range(4):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()


def _is_viewport(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    return isinstance(parent, QAbstractScrollArea) and parent.viewport() is widget


def _inside_a_control(widget: QWidget, top: QWidget) -> bool:
    """Parts of a compound control (a spin box's line edit, a combo's view,
    a tab bar's scroll buttons): the control is checked, not its parts."""
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        if isinstance(parent, (QAbstractSpinBox, QComboBox, QTabBar, QAbstractItemView)):
            return True
        parent = parent.parentWidget()
    return False


def offenders(top: QWidget) -> list[str]:
    out = []
    for w in top.findChildren(QWidget):
        if not isinstance(w, CONTROLS) or not w.isVisibleTo(top) or w.isWindow():
            continue
        if w.width() <= 0 or w.height() <= 0 or _inside_a_control(w, top):
            continue
        problem = _clipped(w, top)
        if problem:
            out.append(f"{_name(w)} at {_r(QRect(w.mapTo(top, QPoint(0, 0)), w.size()))}: "
                       f"{problem}")
    return out


def _clipped(w: QWidget, top: QWidget) -> str:
    """Why ``w`` is not whole on screen, or ""."""
    rect = QRect(w.mapTo(top, QPoint(0, 0)), w.size())
    parent = w.parentWidget()
    while parent is not None:
        area = QRect(parent.mapTo(top, QPoint(0, 0)), parent.size())
        if _is_viewport(parent):
            if rect.left() < area.left() - 1 or rect.right() > area.right() + 1:
                return f"cut sideways by the scroll area of {_name(parent.parentWidget())}"
            # Above and below the fold is scrolled to: what is in view goes on.
            top_y, bottom_y = max(rect.top(), area.top()), min(rect.bottom(), area.bottom())
            if bottom_y < top_y:
                return ""
            rect = QRect(rect.left(), top_y, rect.width(), bottom_y - top_y + 1)
        elif not area.adjusted(-1, -1, 1, 1).contains(rect):
            return f"outside {_name(parent)} at {_r(area)}"
        if parent is top:
            return ""
        parent = parent.parentWidget()
    return ""


def _name(w: QWidget | None) -> str:
    if w is None:
        return "?"
    text = ""
    for attr in ("text", "placeholderText"):
        get = getattr(w, attr, None)
        if callable(get):
            try:
                text = str(get())[:30]
            except TypeError:
                text = ""
            if text:
                break
    return f"{type(w).__name__}({w.objectName() or ''}{' ' + repr(text) if text else ''})"


def _r(r: QRect) -> str:
    return f"{r.x()},{r.y()} {r.width()}x{r.height()}"


def assert_fits(window: QWidget, size: tuple[int, int] = (SCREEN_W, SCREEN_H)) -> None:
    """The window has the size it had, and every control in it is whole."""
    settle()
    assert (window.width(), window.height()) == size, (
        f"{type(window).__name__} is {window.width()}x{window.height()}, was {size[0]}x{size[1]}; "
        f"its minimum is {window.minimumSizeHint().width()}x{window.minimumSizeHint().height()}")
    bad = offenders(window)
    assert not bad, "controls not whole inside the window:\n" + "\n".join(bad)


def assert_dialog_fits(dialog: QWidget) -> None:
    """A dialog fits on a 1440x900 screen and shows its controls whole."""
    settle()
    assert dialog.width() <= SCREEN_W and dialog.height() <= SCREEN_H, (
        f"{type(dialog).__name__} is {dialog.width()}x{dialog.height()}")
    bad = offenders(dialog)
    assert not bad, "controls not whole inside the dialog:\n" + "\n".join(bad)


def shot(widget: QWidget, name: str) -> None:
    """With SWITCHBOARD_SHOTS set to a folder, save what ``widget`` shows
    there (to look at; the tests never compare pictures)."""
    folder = os.environ.get("SWITCHBOARD_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(Path(folder) / f"{name}.png"))

"""A small JSON editor for params of type json (switch rules, inject payload).

Text that does not parse is never applied: the model keeps its last valid
value and the status line names the line and column of the error, so a
half-typed rule never reaches the flow."""

from __future__ import annotations

import json
import math
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QTextOption
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

#: What ``JsonEditor.value()`` returns while the text does not parse.
INVALID = object()


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None) for valid JSON, (INVALID, why) otherwise; blank text is
    (None, None): the param is unset and takes its default."""
    if not text.strip():
        return None, None
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return INVALID, f"Line {exc.lineno}, column {exc.colno}: {exc.msg}"


def format_json(value: Any, indent: int = 0, width: int = 60) -> str:
    """Indented JSON that keeps short parts on one line, so a list of switch
    rules reads as one rule per line instead of five lines each."""
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if not isinstance(value, (dict, list)) or not value or len(compact) + indent <= width:
        return compact
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {format_json(v, indent + 2, width)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + format_json(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def fit_height(edit: QPlainTextEdit, min_lines: int = 3, max_lines: int = 16) -> None:
    """Size a text box to its content, wrapped lines included (within
    bounds), so that the form scrolls rather than each box."""
    fm = edit.fontMetrics()
    doc = edit.document()
    width = edit.viewport().width() - 2 * doc.documentMargin() - 4
    text = edit.toPlainText() or edit.placeholderText()
    lines = 0
    for line in text.split("\n"):
        advance = fm.horizontalAdvance(line)
        # Word wrap breaks a little before the edge: count a line that is
        # nearly full as two.
        lines += 1 if width <= 0 else max(1, math.ceil(advance * 1.06 / width))
    lines = min(max(lines, min_lines), max_lines)
    margins = edit.contentsMargins()
    frame = int(doc.documentMargin() * 2) + margins.top() + margins.bottom() + 6
    edit.setFixedHeight(lines * fm.lineSpacing() + frame)


class AutoHeightText(QPlainTextEdit):
    """A QPlainTextEdit as tall as its wrapped text, between two bounds."""

    def __init__(self, parent: QWidget | None = None, min_lines: int = 3,
                 max_lines: int = 16) -> None:
        super().__init__(parent)
        self.min_lines, self.max_lines = min_lines, max_lines
        self.textChanged.connect(self.refit)
        self.refit()

    def refit(self) -> None:
        fit_height(self, self.min_lines, self.max_lines)

    def setPlaceholderText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setPlaceholderText(text)
        self.refit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.refit()


def mono_font():
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setStyleHint(font.StyleHint.Monospace)
    return font


class JsonEditor(QWidget):
    """Emits ``value_changed(value)`` for each edit that leaves valid JSON
    (None when the text is blank)."""

    value_changed = Signal(object)

    def __init__(self, placeholder: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text_edit = AutoHeightText(self)
        self.text_edit.setObjectName("jsonText")
        self.text_edit.setFont(mono_font())
        self.text_edit.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.text_edit.setTabChangesFocus(True)
        if placeholder is not None:
            self.text_edit.setPlaceholderText(format_json(placeholder))
        fit_height(self.text_edit)

        self.status = QLabel(self)
        self.status.setObjectName("jsonStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.format_button = QToolButton(self)
        self.format_button.setText("Format")
        self.format_button.setToolTip("Indent the JSON neatly")
        self.format_button.setAutoRaise(True)
        self.format_button.clicked.connect(self.reformat)

        bottom = QHBoxLayout()
        bottom.setContentsMargins(0, 0, 0, 0)
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.format_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.text_edit)
        layout.addLayout(bottom)

        self.error: str | None = None
        self.text_edit.textChanged.connect(self._on_text_changed)
        self._show_status()

    # -- model -> editor --------------------------------------------------
    def value(self) -> Any:
        return parse_json(self.text_edit.toPlainText())[0]

    def set_value(self, value: Any) -> None:
        """Show ``value`` unless the text already means it (so the user's own
        formatting and cursor survive a round trip through the model)."""
        current = self.value()
        if current is not INVALID and _same(current, value):
            return
        self.text_edit.blockSignals(True)
        self.text_edit.setPlainText("" if value is None else format_json(value))
        self.text_edit.blockSignals(False)
        self.text_edit.refit()
        self.error = None
        self._show_status()

    def reformat(self) -> None:
        value = self.value()
        if value is INVALID or value is None:
            return
        self.text_edit.setPlainText(format_json(value))

    # -- editor -> model --------------------------------------------------
    def _on_text_changed(self) -> None:
        value, self.error = parse_json(self.text_edit.toPlainText())
        self._show_status()
        if value is not INVALID:
            self.value_changed.emit(value)

    def _show_status(self) -> None:
        if self.error:
            self.status.setText(f"Not applied. {self.error}")
            self.status.setProperty("state", "error")
        elif not self.text_edit.toPlainText().strip():
            self.status.setText("Empty: the default applies")
            self.status.setProperty("state", "")
        else:
            self.status.setText("Valid JSON")
            self.status.setProperty("state", "ok")
        self.format_button.setEnabled(not self.error and bool(self.text_edit.toPlainText().strip()))
        # Re-polish so that the [state=...] style rules take effect.
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 and True differ as JSON does."""
    return type(a) is type(b) and a == b if not isinstance(a, (dict, list)) else \
        json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

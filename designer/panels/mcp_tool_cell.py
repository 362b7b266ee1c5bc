"""How the MCP tools table draws one tool (``ToolCell``): its check box,
its name on the server and the name the AI calls it, and what it does,
over the table's one column."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QRect, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPalette, QTextLayout
from PySide6.QtWidgets import (
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
)

from .json_editor import mono_font

#: The table's one column: each tool's check box, names and description.
COL_TOOL = 0
#: Lines of a tool's description in the table (the rest: its tooltip, and
#: whole under the table once selected).
DESC_LINES = 3
#: Item data: the name the AI calls the tool, and what it does.
OFFERED_ROLE = Qt.ItemDataRole.UserRole + 1
DESC_ROLE = Qt.ItemDataRole.UserRole + 2


class ToolCell(QStyledItemDelegate):
    """One tool in the table, over the whole width: its check box (offered
    to the AI or not), its name on the server (and, renamed, the name the
    AI calls it: ``lookup_order → find_order``), and under them what it
    does, muted, wrapped over up to DESC_LINES lines. Three columns in a
    320 px dock cut the description to "Look up o…" and crowded the
    headers."""

    PAD = 6

    def _check_rect(self, option: QStyleOptionViewItem) -> QRect:
        style = option.widget.style() if option.widget is not None else None
        size = style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth) if style else 13
        return QRect(option.rect.left() + self.PAD, option.rect.top() + self.PAD + 1,
                     size, size)

    def _text_left(self, option: QStyleOptionViewItem) -> int:
        return self._check_rect(option).right() + 1 + self.PAD

    def _lines(self, text: str, font: Any, width: int) -> list[str]:
        """``text`` wrapped at ``width``, at most DESC_LINES lines, the last
        one ended with "…" when some is left out."""
        if not text or width <= 0:
            return []
        layout = QTextLayout(text, font)
        layout.beginLayout()
        lines: list[str] = []
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            lines.append(text[line.textStart():line.textStart() + line.textLength()])
        layout.endLayout()
        if len(lines) > DESC_LINES:
            rest = "".join(lines[DESC_LINES - 1:]).strip()
            lines = lines[:DESC_LINES - 1] + [QFontMetrics(font).elidedText(
                rest, Qt.TextElideMode.ElideRight, width)]
        return [line.rstrip() for line in lines]

    def sizeHint(self, option: QStyleOptionViewItem, index: Any) -> QSize:  # noqa: N802
        width = option.rect.width() or 280
        mono = QFontMetrics(mono_font())
        desc = self._lines(str(index.data(DESC_ROLE) or ""), option.font,
                           width - self._text_left(option) + option.rect.left() - self.PAD)
        height = self.PAD + mono.height() + len(desc) * QFontMetrics(option.font).lineSpacing() \
            + (2 if desc else 0) + self.PAD
        return QSize(width, height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Any) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        widget = opt.widget
        style = widget.style() if widget is not None else None
        opt.text = ""
        if style is not None:
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter,
                                widget)
            check = QStyleOptionViewItem(opt)
            check.rect = self._check_rect(option)
            check.state = (check.state & ~QStyle.StateFlag.State_HasFocus) | (
                QStyle.StateFlag.State_On if index.data(Qt.ItemDataRole.CheckStateRole)
                == Qt.CheckState.Checked.value or index.data(Qt.ItemDataRole.CheckStateRole)
                == Qt.CheckState.Checked else QStyle.StateFlag.State_Off)
            style.drawPrimitive(QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck, check,
                                painter, widget)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        palette = option.palette
        text_color = palette.color(QPalette.ColorRole.HighlightedText if selected
                                   else QPalette.ColorRole.Text)
        muted = text_color if selected else palette.color(QPalette.ColorRole.PlaceholderText)
        left = self._text_left(option)
        width = option.rect.right() - self.PAD - left
        painter.save()
        font = mono_font()
        metrics = QFontMetrics(font)
        name = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        offered = str(index.data(OFFERED_ROLE) or "")
        head = f"{name} → {offered}" if offered and offered != name else name
        painter.setFont(font)
        painter.setPen(text_color)
        top = option.rect.top() + self.PAD
        painter.drawText(QRect(left, top, width, metrics.height()),
                         int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         metrics.elidedText(head, Qt.TextElideMode.ElideRight, width))
        painter.setFont(option.font)
        painter.setPen(muted)
        y = top + metrics.height() + 2
        spacing = QFontMetrics(option.font).lineSpacing()
        for line in self._lines(str(index.data(DESC_ROLE) or ""), option.font, width):
            painter.drawText(QRect(left, y, width, spacing),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), line)
            y += spacing
        painter.restore()

    def editorEvent(self, event: QEvent, model: Any, option: QStyleOptionViewItem,  # noqa: N802
                    index: Any) -> bool:
        """The check box is where it is drawn (top left, by the name), not
        where the style would centre it in a tall row."""
        if not index.flags() & Qt.ItemFlag.ItemIsUserCheckable:
            return False
        kind = event.type()
        if kind in (QEvent.Type.MouseButtonRelease, QEvent.Type.MouseButtonDblClick):
            if event.button() != Qt.MouseButton.LeftButton or \
                    not self._check_rect(option).adjusted(-3, -3, 3, 3).contains(
                        event.position().toPoint()):
                return False
            if kind == QEvent.Type.MouseButtonDblClick:
                return True  # a double click on the box is two clicks, not a rename
        elif kind == QEvent.Type.KeyPress:
            if event.key() not in (Qt.Key.Key_Space, Qt.Key.Key_Select):
                return False
        else:
            return False
        on = index.data(Qt.ItemDataRole.CheckStateRole) in (Qt.CheckState.Checked,
                                                            Qt.CheckState.Checked.value)
        return model.setData(index, Qt.CheckState.Unchecked if on else Qt.CheckState.Checked,
                             Qt.ItemDataRole.CheckStateRole)

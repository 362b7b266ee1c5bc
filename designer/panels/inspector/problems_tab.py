"""Problems: what keeps the flow from running (validation) and what went
wrong while it ran (node errors), each linked to its node."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QBrush, QKeySequence
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from runtime.flow import Problem

from .common import COLORS, WrapDelegate, color, copy_text, fmt_seconds, hint_or

if TYPE_CHECKING:
    from .context import InspectorContext

NODE_ROLE = Qt.ItemDataRole.UserRole + 30
TIP_ROLE = Qt.ItemDataRole.UserRole + 31


class ProblemsTab(QWidget):
    node_selected = Signal(str)
    count_changed = Signal(int)

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.validation: list[Problem] = []
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["", "Node", "Where", "Problem"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        # A problem reads whole: its row as tall as its wrapped text.
        self.wrap = WrapDelegate(self.tree, columns=(1, 2, 3))
        for col, width in enumerate((90, 180, 160)):
            self.tree.setColumnWidth(col, width)
        self.tree.itemClicked.connect(self._clicked)
        self.tree.itemActivated.connect(self._clicked)
        self.tree.currentItemChanged.connect(self._show_detail)
        copy = QAction("Copy problem", self.tree)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(lambda: copy_text(self.detail.text()))
        self.tree.addAction(copy)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        # The selected problem below the list, its text selectable (to copy
        # a package name, a command to install it).
        self.detail = QLabel()
        self.detail.setObjectName("ProblemDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                            | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.detail.setCursor(Qt.CursorShape.IBeamCursor)
        self.detail.setStyleSheet(f"#ProblemDetail {{ padding: 6px 8px; border-top: 1px solid "
                                  f"{COLORS['muted']}; }}")
        self.detail.hide()
        content = QWidget()
        box = QVBoxLayout(content)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(self.tree, 1)
        box.addWidget(self.detail)
        self.empty, self.stack = hint_or(self, "No problems. Validation problems and errors "
                                         "from runs show up here, each linked to its node.",
                                         content)

    def set_validation(self, problems: list[Problem]) -> None:
        self.validation = list(problems)
        self.refresh()

    def refresh(self) -> None:
        self.tree.clear()
        self._show_detail(None)
        for p in sorted(self.validation, key=lambda p: p.severity != "error"):
            self._add(p.severity, p.node or "", p.field or "", p.message,
                      "Not run: fix this first" if p.severity == "error" else "")
        for e in self.ctx.model.node_errors:
            where = f"run, at {fmt_seconds(max(0.0, e.ts - self.ctx.model.started))}"
            self._add("caught" if e.caught else "run error", e.node, where, e.message,
                      "A catch node handled it" if e.caught else "")
        for log in self.ctx.model.logs:
            if log.level == "error":
                self._add("run error", log.node, "run", log.text, "")
        n = self.tree.topLevelItemCount()
        self.stack.setCurrentIndex(1 if n else 0)
        self.count_changed.emit(n)

    def count(self) -> int:
        return self.tree.topLevelItemCount()

    def _add(self, kind: str, node: str, where: str, message: str, tip: str) -> None:
        item = QTreeWidgetItem(self.tree)
        item.setText(0, kind)
        tint = {"error": "error", "run error": "error", "warning": "warning",
                "caught": "warning"}.get(kind, "muted")
        item.setForeground(0, QBrush(color(tint)))
        item.setText(1, self.ctx.name_of(node) if node else "flow")
        item.setToolTip(1, node)
        item.setText(2, where)
        item.setText(3, message)
        item.setToolTip(3, message + (f"\n{tip}" if tip else ""))
        item.setData(0, NODE_ROLE, node)
        item.setData(0, TIP_ROLE, tip)

    def _show_detail(self, item: QTreeWidgetItem | None, _prev: object = None) -> None:
        if item is None:
            self.detail.clear()
            self.detail.hide()
            return
        where = " · ".join(t for t in (item.text(1), item.text(2)) if t)
        tip = item.data(0, TIP_ROLE) or ""
        self.detail.setText(f"{item.text(0)} · {where}\n{item.text(3)}"
                            + (f"\n{tip}" if tip else ""))
        self.detail.show()

    def _clicked(self, item: QTreeWidgetItem) -> None:
        node = item.data(0, NODE_ROLE)
        if node:
            self.node_selected.emit(node)

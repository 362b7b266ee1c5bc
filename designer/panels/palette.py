"""The node catalog: a searchable list grouped by category, and the
quick-add popup that opens when you type on the canvas.

Both read ``Registry.specs()``; a node package installed with pip appears
here with no designer change. Dragging carries the type id as
``NODE_MIME``; the canvas creates the node where it is dropped."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .. import icons, theme
from ..canvas.view import NODE_MIME

TYPE_ROLE = Qt.ItemDataRole.UserRole + 1


def summary(spec) -> str:
    return " ".join(spec.description.split("\n\n")[0].split())


def matches(spec, words: list[str]) -> bool:
    hay = " ".join([spec.name, spec.type, spec.category, spec.description,
                    spec.tool.name if spec.tool else ""]).lower()
    return all(w in hay for w in words)


def node_icon(spec):
    return icons.icon(spec.icon or "generic", spec.color or "#7a869a", 18)


#: Categories in the order a flow is usually built: what starts it, what
#: shapes messages, then what reaches the world. Others follow, A to Z.
CATEGORY_ORDER = ["Triggers", "Core", "Sequence", "Variables", "AI", "HTTP", "Browser", "Files",
                  "Tables", "Mail"]


def category_order(spec) -> tuple:
    try:
        rank = CATEGORY_ORDER.index(spec.category)
    except ValueError:
        rank = len(CATEGORY_ORDER)
    return (rank, spec.category, spec.name)


class _CatalogTree(QTreeWidget):
    def mimeTypes(self) -> list[str]:  # noqa: N802 - Qt override
        return [NODE_MIME]

    def mimeData(self, items) -> QMimeData:  # noqa: N802 - Qt override
        mime = QMimeData()
        for item in items:
            type_id = item.data(0, TYPE_ROLE)
            if type_id:
                mime.setData(NODE_MIME, type_id.encode("utf-8"))
                mime.setText(type_id)
                break
        return mime


class Palette(QWidget):
    """Emits ``add_requested(type_id)`` on Enter or double-click; the window
    places the node at the view centre."""

    add_requested = Signal(str)

    def __init__(self, registry, parent=None) -> None:
        super().__init__(parent)
        self.registry = registry
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search nodes")
        self.search.setClearButtonEnabled(True)
        self.search.addAction(icons.icon("search", theme.current().muted, 16),
                              QLineEdit.ActionPosition.LeadingPosition)
        self.tree = _CatalogTree()
        self.tree.setHeaderHidden(True)
        self.tree.setIconSize(QSize(18, 18))
        self.tree.setIndentation(10)
        self.tree.setRootIsDecorated(False)
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        self.tree.setUniformRowHeights(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 6)
        layout.setSpacing(8)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.search.textChanged.connect(self._filter)
        self.search.returnPressed.connect(self._add_current)
        self.search.installEventFilter(self)
        self.tree.itemActivated.connect(self._activated)
        self.populate()

    def populate(self) -> None:
        self.tree.clear()
        cats: dict[str, QTreeWidgetItem] = {}
        header_font = theme.ui_font(8.5)
        header_font.setBold(True)
        for spec in sorted(self.registry.specs(), key=category_order):
            cat = cats.get(spec.category)
            if cat is None:
                cat = QTreeWidgetItem([spec.category.upper()])
                cat.setFlags(Qt.ItemFlag.ItemIsEnabled)
                cat.setFont(0, header_font)
                cat.setForeground(0, theme.current().color("muted"))
                cat.setSizeHint(0, QSize(0, 30 if not cats else 36))
                self.tree.addTopLevelItem(cat)
                cats[spec.category] = cat
            item = QTreeWidgetItem([spec.name])
            item.setData(0, TYPE_ROLE, spec.type)
            item.setIcon(0, node_icon(spec))
            tip = f"<b>{spec.name}</b> <span style='opacity:.7'>{spec.type}</span>"
            if summary(spec):
                tip += f"<br>{summary(spec)}"
            if spec.tool:
                tip += f"<br>Can be an agent's tool: <b>{spec.tool.name}</b>"
            item.setToolTip(0, tip)
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                          | Qt.ItemFlag.ItemIsDragEnabled)
            item.setSizeHint(0, QSize(0, 30))
            cat.addChild(item)
        self.tree.expandAll()
        self._filter(self.search.text())

    def type_items(self) -> list[QTreeWidgetItem]:
        out = []
        for i in range(self.tree.topLevelItemCount()):
            cat = self.tree.topLevelItem(i)
            out.extend(cat.child(j) for j in range(cat.childCount()))
        return out

    def item_for_type(self, type_id: str) -> QTreeWidgetItem | None:
        for item in self.type_items():
            if item.data(0, TYPE_ROLE) == type_id:
                return item
        return None

    def _filter(self, text: str) -> None:
        words = text.lower().split()
        first = None
        for i in range(self.tree.topLevelItemCount()):
            cat = self.tree.topLevelItem(i)
            visible = 0
            for j in range(cat.childCount()):
                item = cat.child(j)
                spec = self.registry.spec(item.data(0, TYPE_ROLE))
                show = spec is not None and matches(spec, words)
                item.setHidden(not show)
                if show:
                    visible += 1
                    first = first or item
            cat.setHidden(visible == 0)
        if words and first is not None:
            self.tree.setCurrentItem(first)

    def _add_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None and not item.isHidden() and item.data(0, TYPE_ROLE):
            self.add_requested.emit(item.data(0, TYPE_ROLE))

    def _activated(self, item: QTreeWidgetItem, column: int = 0) -> None:
        type_id = item.data(0, TYPE_ROLE)
        if type_id:
            self.add_requested.emit(type_id)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.search and isinstance(event, QKeyEvent) \
                and event.type() == QKeyEvent.Type.KeyPress \
                and event.key() in (Qt.Key.Key_Down, Qt.Key.Key_Up):
            self.tree.setFocus()
            return False
        return super().eventFilter(obj, event)


class QuickAdd(QFrame):
    """A search popup at the cursor: type, arrow keys, Enter. Emits
    ``chosen(type_id)``; the canvas places the node where the popup opened."""

    chosen = Signal(str)

    def __init__(self, registry, parent=None, accept=None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.registry = registry
        # Optional filter (spec -> bool): a wire dropped on empty canvas only
        # offers nodes that can take it.
        self.accept = accept
        self.setFrameShape(QFrame.Shape.StyledPanel)
        t = theme.current()
        self.setStyleSheet(f"QuickAdd {{ background: {t.base}; border: 1px solid {t.border};"
                           " border-radius: 8px; }")
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Add a node…")
        self.list = QListWidget()
        self.list.setIconSize(QSize(18, 18))
        self.list.setFrameShape(QFrame.Shape.NoFrame)
        self.list.setStyleSheet(f"QListWidget {{ background: {t.base}; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.edit)
        layout.addWidget(self.list)
        self.resize(300, 320)
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        self.list.itemActivated.connect(self._choose)
        for spec in registry.specs():
            item = QListWidgetItem(node_icon(spec), f"{spec.name}")
            item.setSizeHint(QSize(0, 28))
            item.setData(TYPE_ROLE, spec.type)
            item.setToolTip(summary(spec))
            self.list.addItem(item)
        self._filter("")

    def open_at(self, global_pos: QPoint, text: str = "") -> None:
        self.move(global_pos)
        self.edit.setText(text)
        self.show()
        self.edit.setFocus()

    def _filter(self, text: str) -> None:
        words = text.lower().split()
        first = None
        for i in range(self.list.count()):
            item = self.list.item(i)
            spec = self.registry.spec(item.data(TYPE_ROLE))
            show = (spec is not None and matches(spec, words)
                    and (self.accept is None or self.accept(spec)))
            item.setHidden(not show)
            if show and first is None:
                first = item
        if first is not None:
            self.list.setCurrentItem(first)

    def visible_types(self) -> list[str]:
        return [self.list.item(i).data(TYPE_ROLE) for i in range(self.list.count())
                if not self.list.item(i).isHidden()]

    def _choose(self, item: QListWidgetItem | None = None) -> None:
        item = item or self.list.currentItem()
        if item is not None and not item.isHidden():
            type_id = item.data(TYPE_ROLE)
            self.close()
            self.chosen.emit(type_id)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.edit and event.type() == QKeyEvent.Type.KeyPress:
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self._choose()
                return True
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                rows = [i for i in range(self.list.count()) if not self.list.item(i).isHidden()]
                if rows:
                    cur = self.list.currentRow()
                    idx = rows.index(cur) if cur in rows else -1
                    idx = min(len(rows) - 1, idx + 1) if key == Qt.Key.Key_Down else max(0, idx - 1)
                    self.list.setCurrentRow(rows[idx])
                return True
            if key == Qt.Key.Key_Escape:
                self.close()
                return True
        return super().eventFilter(obj, event)

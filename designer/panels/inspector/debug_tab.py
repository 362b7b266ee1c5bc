"""Debug: what the debug nodes showed, newest at the bottom, as in Node-RED.

A Debug node inside a subflow instance is named by its instance
("Express › Shipped", its path ``ship_express.shipped`` in the tooltip),
and the Show list offers each instance that showed something ("Instance
Express: everything inside"), beside each node."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .common import (
    COLORS,
    JsonTree,
    WrapDelegate,
    copy_text,
    fmt_seconds,
    grey_rows,
    hint_label,
    mono_font,
    preview,
    to_json_text,
)
from .model import DebugEntry

if TYPE_CHECKING:
    from .context import InspectorContext

ENTRY_ROLE = Qt.ItemDataRole.UserRole + 10
LIST_LINES = 3  # lines of a value in the list
LIST_CHARS = 600  # characters of it there (three lines of a wide list)
ALL = ""
#: A Show entry for everything inside one subflow instance.
INSTANCE = "instance:"


def shows(wanted: str, node: str) -> bool:
    """Whether the Show entry ``wanted`` shows a line of ``node``."""
    if not wanted:
        return True
    if wanted.startswith(INSTANCE):
        return node.startswith(wanted[len(INSTANCE):] + ".")
    return node == wanted


class DebugTab(QWidget):
    node_selected = Signal(str)

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._shown_seq = 0
        self._nodes: list[str] = []

        self.filter = QComboBox()
        self.filter.setMinimumWidth(200)
        self.filter.addItem("All nodes", ALL)
        self.filter.currentIndexChanged.connect(self._apply_filter)
        self.count = QLabel()
        self.count.setStyleSheet(f"color: {COLORS['muted']};")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the selected value as JSON")
        self.copy_button.clicked.connect(self.copy_selected)
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.clear)
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 6)
        bar.setSpacing(8)
        bar.addWidget(QLabel("Show"))
        bar.addWidget(self.filter)
        bar.addStretch(1)
        bar.addWidget(self.count)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.clear_button)

        self.list = QTreeWidget()
        self.list.setHeaderLabels(["Time", "Node", "Value"])
        self.list.setRootIsDecorated(False)
        self.list.setAlternatingRowColors(True)
        # A value reads over up to three lines (an agent's answer, whole as
        # a rule); the detail pane beside it shows all of it.
        self.wrap = WrapDelegate(self.list, columns=(2,), max_lines=LIST_LINES, remember=True)
        self.list.setColumnWidth(0, 80)
        self.list.setColumnWidth(1, 170)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemClicked.connect(self._clicked)
        self._mono = mono_font()

        self.detail = JsonTree()
        # A browser.screenshot's debug value ({"screenshot": path}) shows
        # the picture under its value.
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.image.setVisible(False)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.detail)
        right.addWidget(self.image)
        right.setSizes([120, 340])
        self.empty = hint_label("Run the flow (F5). Values shown by Debug nodes appear here.")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.list)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([700, 460])
        self.stack.addWidget(split)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        self._update_count()

    # -- feeding ------------------------------------------------------------
    def refresh(self) -> None:
        """Append the entries the model got since the last refresh."""
        model = self.ctx.model
        new = [e for e in model.debug if e.seq > self._shown_seq]
        if not new:
            return
        at_bottom = self._at_bottom()
        wanted = self.filter.currentData()
        for entry in new:
            self._add_node(entry.node)
            item = QTreeWidgetItem(self.list)
            item.setText(0, fmt_seconds(entry.t))
            item.setText(2, preview(entry.value, LIST_CHARS))
            item.setFont(2, self._mono)
            item.setData(0, ENTRY_ROLE, entry)
            item.setHidden(not shows(wanted, entry.node))
            self._style(item, entry)
        self._shown_seq = model.debug_seq
        overflow = self.list.topLevelItemCount() - model.debug.maxlen  # type: ignore[operator]
        for _ in range(max(0, overflow)):
            self.list.takeTopLevelItem(0)
        if new:
            self.stack.setCurrentIndex(1)
        if at_bottom:
            self.list.scrollToBottom()
        self._update_count()

    def reset(self) -> None:
        """A new run (or a stored one) replaces what is shown."""
        self.list.clear()
        self.detail.clear()
        self._shown_seq = 0
        self._nodes.clear()
        self.filter.blockSignals(True)
        while self.filter.count() > 1:
            self.filter.removeItem(1)
        self.filter.setCurrentIndex(0)
        self.filter.blockSignals(False)
        self.stack.setCurrentIndex(0)
        self._update_count()

    def restyle(self) -> None:
        """The flow was edited: grey the lines of nodes that changed since."""
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            self._style(item, item.data(0, ENTRY_ROLE))

    def _style(self, item: QTreeWidgetItem, entry: DebugEntry) -> None:
        note = self.ctx.stale_note(entry.node)
        grey_rows(item, 3, bool(note))
        item.setText(1, self.ctx.name_of(entry.node))
        item.setToolTip(1, note or entry.node)
        item.setToolTip(2, note)

    def clear(self) -> None:
        self.list.clear()
        self.detail.clear()
        self.ctx.model.debug.clear()
        self._update_count()

    def _add_node(self, node: str) -> None:
        if node in self._nodes:
            return
        self._nodes.append(node)
        instance = self.ctx.instance_of(node)
        if instance is not None and INSTANCE + instance not in self._nodes:
            self._nodes.append(INSTANCE + instance)
            self.filter.addItem(f"Instance {self.ctx.name_of(instance)}: everything inside",
                                INSTANCE + instance)
        self.filter.addItem(self.ctx.name_of(node), node)

    # -- interaction --------------------------------------------------------
    def entries(self) -> list[DebugEntry]:
        return [self.list.topLevelItem(i).data(0, ENTRY_ROLE)
                for i in range(self.list.topLevelItemCount())
                if not self.list.topLevelItem(i).isHidden()]

    def copy_selected(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            copy_text(to_json_text(item.data(0, ENTRY_ROLE).value))

    def _apply_filter(self) -> None:
        wanted = self.filter.currentData()
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            item.setHidden(not shows(wanted, item.data(0, ENTRY_ROLE).node))
        self._update_count()

    def _current_changed(self, item: QTreeWidgetItem | None, _prev: object = None) -> None:
        if item is None:
            self.detail.clear()
            self._show_image(None)
            return
        entry: DebugEntry = item.data(0, ENTRY_ROLE)
        self.detail.set_roots([(self.ctx.name_of(entry.node), entry.value)])
        self._show_image(screenshot_path(entry.value))

    def _show_image(self, path: str | None) -> None:
        pixmap = QPixmap(path) if path else QPixmap()
        if pixmap.isNull():
            self.image.clear()
            self.image.setVisible(False)
            return
        width = max(120, self.image.width() - 16)
        self.image.setPixmap(pixmap.scaledToWidth(min(width, pixmap.width()),
                                                  Qt.TransformationMode.SmoothTransformation))
        self.image.setToolTip(path)
        self.image.setVisible(True)

    def _clicked(self, item: QTreeWidgetItem) -> None:
        self.node_selected.emit(item.data(0, ENTRY_ROLE).node)

    def _at_bottom(self) -> bool:
        bar = self.list.verticalScrollBar()
        return bar.value() >= bar.maximum() - 2

    def _update_count(self) -> None:
        shown = sum(1 for i in range(self.list.topLevelItemCount())
                    if not self.list.topLevelItem(i).isHidden())
        total = self.list.topLevelItemCount()
        self.count.setText(f"{shown} of {total}" if shown != total else
                           f"{total} message{'s' if total != 1 else ''}")


def screenshot_path(value: object) -> str | None:
    """The PNG a debug value points to ({"screenshot": path}), if it exists."""
    if isinstance(value, dict) and isinstance(value.get("screenshot"), str):
        path = value["screenshot"]
        if path.lower().endswith(".png") and Path(path).is_file():
            return path
    return None

"""The node catalog: a searchable list grouped by category, and the
quick-add popup that opens when you type on the canvas.

Both read ``Registry.specs()``; a node package installed with pip appears
here with no designer change, and so does a plugin package (a node served
by its own process, ``NodeSpec.plugin``), which carries a small "plugin"
tag. Dragging carries the type id as ``NODE_MIME``; the canvas creates the
node where it is dropped."""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QMimeData, QModelIndex, QPoint, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QKeyEvent, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from runtime.flow.subflows import CATEGORY as SUBFLOWS
from runtime.flow.subflows import IN_TYPE, OUT_TYPE, is_instance_type, subflow_name

from ..canvas.items import SUBFLOW_COLOR
from ..canvas.view import NODE_MIME
from ..look import icons, theme
from .node_words import plugin_note

TYPE_ROLE = Qt.ItemDataRole.UserRole + 1
#: The name of the plugin package that serves an entry's node, or None.
PLUGIN_ROLE = Qt.ItemDataRole.UserRole + 2
PLUGIN_TAG = "plugin"
#: The small tag an entry shows at its right edge, if any: "plugin", a
#: library subflow's version ("v1.2.0"), or "this flow" for the flow's own.
TAG_ROLE = Qt.ItemDataRole.UserRole + 3
OWN_SUBFLOW_TAG = "this flow"


def summary(spec) -> str:
    return " ".join(spec.description.split("\n\n")[0].split())


def matches(spec, words: list[str]) -> bool:
    # "plugin" and the plugin's name find a plugin's nodes, as the tag suggests.
    hay = " ".join([spec.name, spec.type, spec.category, spec.description,
                    spec.tool.name if spec.tool else "",
                    f"{PLUGIN_TAG} {spec.plugin}" if spec.plugin else ""]).lower()
    return all(w in hay for w in words)


def node_icon(spec):
    return icons.icon(spec.icon or "generic", node_color(spec), 18)


def node_color(spec) -> str:
    """A node's colour; a subflow instance, which has none of its own, the
    colour every subflow shares (its inputs and outputs too)."""
    return spec.color or (SUBFLOW_COLOR if is_instance_type(spec.type) else "#7a869a")


def offered(spec, registry) -> bool:
    """Whether the palette offers a node type: a subflow's input and output
    nodes only while a subflow's definition is edited (anywhere else the
    flow would refuse them)."""
    doc = getattr(registry, "document", None)
    editing = doc.definition if doc is not None else None
    if spec.type in (IN_TYPE, OUT_TYPE):
        return editing is not None
    if editing is not None and is_instance_type(spec.type):
        # Inside a definition, neither itself nor a subflow that uses it:
        # placed, either would be a cycle the flow refuses.
        return not _uses(registry, subflow_name(spec.type), editing.name)
    return True


def _uses(registry, name: str, target: str) -> bool:
    """Whether subflow ``name`` is ``target`` or has an instance of it inside,
    at any depth (as far as the registry knows the definitions)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current == target:
            return True
        if current in seen or len(seen) > 1000:
            continue
        seen.add(current)
        defn = registry.definition("subflow:" + current) if hasattr(registry, "definition") else None
        for n in defn.nodes if defn is not None else ():
            if is_instance_type(n.type):
                todo.append(subflow_name(n.type))
    return False


def subflow_tag(spec, registry) -> tuple[str, str]:
    """A subflow instance type's tag and the line its tooltip adds: the
    library's current version and file, or that the flow defines it."""
    if not is_instance_type(spec.type):
        return "", ""
    doc = getattr(registry, "document", None)
    name = subflow_name(spec.type)
    entry = doc.library_current(name) if doc is not None else None
    if entry is not None:
        version = entry.definition.version or ""
        return f"v{version}", f"Library subflow, version {version}: {entry.path}"
    defs = getattr(registry, "defs", {})
    if defs.get(name, (None, ""))[1] == "flow":
        return OWN_SUBFLOW_TAG, "Subflow defined in this flow file"
    return "", ""


def entry_tag(spec, registry) -> str | None:
    if spec.plugin:
        return PLUGIN_TAG
    return subflow_tag(spec, registry)[0] or None


#: Categories in the order a flow is usually built: what starts it, what
#: shapes messages, then what reaches the world. Others follow, A to Z.
#: Subflows (the team's own pieces, shown when there are any) come first,
#: as in Node-RED.
CATEGORY_ORDER = [SUBFLOWS, "Triggers", "Core", "Sequence", "Variables", "Text", "AI", "HTTP", "Browser", "Files",
                  "Tables", "Mail"]


_KNOWN = {c.casefold(): i for i, c in enumerate(CATEGORY_ORDER)}


def category_title(spec) -> str:
    """The category a node is listed under. A plugin may spell a known
    category its own way ("core", "HTTP "); it joins the known one. No
    category at all is "Other"."""
    cat = " ".join(spec.category.split()) or "Other"
    rank = _KNOWN.get(cat.casefold())
    return CATEGORY_ORDER[rank] if rank is not None else cat


def category_order(spec) -> tuple:
    cat = category_title(spec)
    rank = _KNOWN.get(cat.casefold(), len(CATEGORY_ORDER))
    return (rank, cat.casefold(), spec.name.casefold(), spec.type)


class PluginTagDelegate(QStyledItemDelegate):
    """Draws an entry as usual, and for a plugin's node a small "plugin"
    pill at its right edge; the name is elided before the pill, never under
    it. Serves the palette's tree and the quick-add list alike."""

    PAD_X, GAP = 6, 6

    def tag_rect(self, option: QStyleOptionViewItem, text: str = PLUGIN_TAG) -> QRect:
        fm = QFontMetrics(self.tag_font(option))
        w = fm.horizontalAdvance(text) + 2 * self.PAD_X
        h = fm.height() + 4
        r = option.rect
        return QRect(r.right() - w - self.GAP + 1, r.center().y() - h // 2 + 1, w, h)

    @staticmethod
    def tag_font(option: QStyleOptionViewItem) -> QFont:
        font = QFont(option.font)
        font.setPointSizeF(max(6.5, font.pointSizeF() * 0.8))
        return font

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        text = index.data(TAG_ROLE) or (PLUGIN_TAG if index.data(PLUGIN_ROLE) else "")
        if not text:
            super().paint(painter, option, index)
            return
        tag = self.tag_rect(option, text)
        # The selection and hover background spans the whole row; the text
        # and icon get the room left of the tag.
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter,
                                opt.widget)
        opt.rect = QRect(option.rect.left(), option.rect.top(),
                         max(0, tag.left() - self.GAP - option.rect.left()), option.rect.height())
        opt.state &= ~(QStyle.StateFlag.State_HasFocus)
        opt.backgroundBrush = Qt.BrushStyle.NoBrush
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        t = theme.current()
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        # On the selection's accent, the muted grey would not read.
        color = QColor(t.accent_text if selected else t.muted)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        fill = QColor(color)
        fill.setAlphaF(0.12)
        painter.setBrush(fill)
        edge = QColor(color)
        edge.setAlphaF(0.55)
        painter.setPen(QPen(edge, 1))
        painter.drawRoundedRect(QRectF(tag).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        painter.setPen(color)
        painter.setFont(self.tag_font(option))
        painter.drawText(tag, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _tooltip(spec, registry=None) -> str:
    tip = f"<b>{_esc(spec.name)}</b> <span style='opacity:.7'>{_esc(spec.type)}</span>"
    if summary(spec):
        tip += f"<br>{_esc(summary(spec))}"
    where = subflow_tag(spec, registry)[1]
    if where:
        tip += f"<br>{_esc(where)}"
    if spec.tool:
        tip += f"<br>Can be an agent's tool: <b>{_esc(spec.tool.name)}</b>"
    if spec.plugin:
        tip += f"<br>{_esc(plugin_note(spec))}"
    return tip


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
    places the node at the view centre.

    Given a document's registry (``FlowDocument.registry``), it lists that
    document's subflows too and lists them again when they change (a
    definition added, the library read again); ``set_document`` follows
    another document (a definition's tab)."""

    add_requested = Signal(str)

    def __init__(self, registry, parent=None) -> None:
        super().__init__(parent)
        self.registry = registry
        self._document = None
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
        self.tree.setItemDelegate(PluginTagDelegate(self.tree))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 6)
        layout.setSpacing(8)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.search.textChanged.connect(self._filter)
        self.search.returnPressed.connect(self._add_current)
        self.search.installEventFilter(self)
        self.tree.itemActivated.connect(self._activated)
        self._follow(getattr(registry, "document", None))
        self.populate()

    def set_document(self, document) -> None:
        """List what ``document`` can place (its registry), from now on."""
        if document is self._document:
            return
        self.registry = document.registry
        self._follow(document)
        self.populate()

    def _follow(self, document) -> None:
        if self._document is not None:
            try:
                self._document.subflows_changed.disconnect(self.populate)
            except (RuntimeError, TypeError):
                pass  # already gone
        self._document = document
        if document is not None:
            document.subflows_changed.connect(self.populate)

    def populate(self) -> None:
        self.tree.clear()
        cats: dict[str, QTreeWidgetItem] = {}
        header_font = theme.ui_font(8.5)
        header_font.setBold(True)
        current = self.tree.currentItem()
        current_type = current.data(0, TYPE_ROLE) if current is not None else None
        for spec in sorted(self.registry.specs(), key=category_order):
            if not offered(spec, self.registry):
                continue
            title = category_title(spec)
            cat = cats.get(title.casefold())
            if cat is None:
                cat = QTreeWidgetItem([title.upper()])
                cat.setFlags(Qt.ItemFlag.ItemIsEnabled)
                cat.setFont(0, header_font)
                cat.setForeground(0, theme.current().color("muted"))
                cat.setSizeHint(0, QSize(0, 30 if not cats else 36))
                self.tree.addTopLevelItem(cat)
                cats[title.casefold()] = cat
            item = QTreeWidgetItem([spec.name])
            item.setData(0, TYPE_ROLE, spec.type)
            item.setData(0, PLUGIN_ROLE, spec.plugin or None)
            item.setData(0, TAG_ROLE, entry_tag(spec, self.registry))
            item.setIcon(0, node_icon(spec))
            item.setToolTip(0, _tooltip(spec, self.registry))
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                          | Qt.ItemFlag.ItemIsDragEnabled)
            item.setSizeHint(0, QSize(0, 30))
            cat.addChild(item)
            if spec.type == current_type:
                self.tree.setCurrentItem(item)
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

    def event(self, event) -> bool:
        # The window comes back to the front: a subflow may have been saved
        # to the library meanwhile (another window, a colleague's commit).
        # Reading the folders again costs a stat per file when none changed.
        if event.type() == QEvent.Type.WindowActivate and self._document is not None:
            self._document.sync_subflows(rescan=True)
        return super().event(event)

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
        self.list.setItemDelegate(PluginTagDelegate(self.list))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.edit)
        layout.addWidget(self.list)
        self.resize(300, 320)
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        self.list.itemActivated.connect(self._choose)
        # One click picks, as in a menu: a newcomer clicks an entry once and
        # waits (activation alone wants a double click in most styles).
        self.list.itemClicked.connect(self._choose)
        for spec in registry.specs():
            if not offered(spec, registry):
                continue
            item = QListWidgetItem(node_icon(spec), f"{spec.name}")
            item.setSizeHint(QSize(0, 28))
            item.setData(TYPE_ROLE, spec.type)
            item.setData(PLUGIN_ROLE, spec.plugin or None)
            item.setData(TAG_ROLE, entry_tag(spec, registry))
            item.setToolTip("\n".join(filter(None, [summary(spec), plugin_note(spec),
                                                     subflow_tag(spec, registry)[1]])))
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

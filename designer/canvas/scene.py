"""The scene mirrors the flow document and owns no state of its own.

It answers the document's signals by creating, updating and deleting items,
and keeps lookup maps both ways (node id <-> item, wire index <-> item, as
orange-canvas-core's scene does). Every edit the user makes with the mouse
goes through an interaction object that pushes a command on the document's
undo stack; the document's signal then updates the items. The scene knows
no concrete interaction: a factory passed in (``interactions``, the
designer's ``canvas.interactions.MouseInteractions``) makes them; without
one the scene only shows the flow."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QGraphicsScene

from ..model.document import FlowDocument
from .items import (
    GRID,
    HEADER_H,
    ICON_BOX,
    LOD_OVERVIEW,
    NODE_W,
    NodeItem,
    PortInfo,
    look_for,
    refresh_style,
    style,
)
from .wires import WireItem

SCENE_MARGIN = 4000.0


class Interaction(Protocol):
    """A gesture in progress: it gets the scene's mouse and key events
    first (True: handled) and ends itself through ``interaction_ended``."""

    def mouse_press(self, event: Any) -> bool: ...
    def mouse_move(self, event: Any) -> bool: ...
    def mouse_release(self, event: Any) -> bool: ...
    def key_press(self, event: Any) -> bool: ...
    def cancel(self) -> None: ...


class InteractionFactory(Protocol):
    """Makes the gesture a mouse press starts."""

    def new_wire(self, scene: FlowScene, node: NodeItem, port: PortInfo) -> Interaction: ...
    def move_selection(self, scene: FlowScene, anchor: NodeItem,
                       press: QPointF) -> Interaction: ...
    def rubber_band(self, scene: FlowScene, press: QPointF, modifiers: Any) -> Interaction: ...


class FlowScene(QGraphicsScene):
    message = Signal(str)  # a status-bar sentence (why a wire was refused)
    # A new wire released on empty canvas: node id, port name, port kind,
    # scene QPointF, global QPoint. The editor offers a node to connect.
    wire_dropped = Signal(str, str, str, object, object)
    node_context_menu = Signal(str, object)  # node id, global QPoint
    canvas_context_menu = Signal(object, object)  # scene QPointF, global QPoint
    node_activated = Signal(str)  # double-click

    def __init__(self, document: FlowDocument, parent=None, *,
                 interactions: InteractionFactory | None = None) -> None:
        super().__init__(parent)
        self.doc = document
        self.interactions = interactions
        self.snap_to_grid = True
        self._nodes: dict[str, NodeItem] = {}
        self._wires: list[WireItem] = []
        self._problem_sig: dict[str, tuple] = {}
        self._interaction: Interaction | None = None
        self._overview = False
        self._overview_cache: tuple | None = None
        # The BSP index pays for itself once there are many items; its
        # depth is chosen for a few thousand.
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self.setBspTreeDepth(10)
        d = document
        d.flow_reset.connect(self._rebuild)
        d.node_added.connect(self._on_node_added)
        d.node_removed.connect(self._on_node_removed)
        d.node_moved.connect(self._on_node_moved)
        d.node_changed.connect(self._on_node_changed)
        d.wire_added.connect(self._on_wire_added)
        d.wire_removed.connect(self._on_wire_removed)
        d.problems_changed.connect(self._on_problems)
        self.selectionChanged.connect(self._on_selection_changed)
        self._raised: list[NodeItem] = []
        self._rebuild()

    # -- lookups (the run integration uses these) ---------------------------
    def item_for_node(self, node_id: str) -> NodeItem | None:
        return self._nodes.get(node_id)

    def item_for_wire(self, index: int) -> WireItem | None:
        return self._wires[index] if 0 <= index < len(self._wires) else None

    def wire_index(self, item: WireItem) -> int:
        return self._wires.index(item)

    def node_items(self) -> list[NodeItem]:
        return list(self._nodes.values())

    def node_and_wire_items(self) -> list:
        return [*self._nodes.values(), *self._wires]

    def clear_run_state(self) -> None:
        for item in self._nodes.values():
            item.set_run_state("idle")
            item.set_run_stale(False)
        for w in self._wires:
            if w is not None and (w.activity or w.flash):
                w.set_activity(0)
            if w is not None:
                w.set_stale(False)

    def set_run_stale(self, node_ids) -> None:
        """Grey the run badges of these nodes (edited since the run), and the
        message counts on their wires; every other badge is current."""
        ids = set(node_ids)
        for node_id, item in self._nodes.items():
            item.set_run_stale(node_id in ids)
        for w in self._wires:
            if w is not None:
                w.set_stale(w.source.node_id in ids or w.target.node_id in ids)

    def selected_node_items(self) -> list[NodeItem]:
        return [i for i in self.selectedItems() if isinstance(i, NodeItem)]

    def selected_node_ids(self) -> list[str]:
        # In document order, so copy/paste and delete are deterministic.
        chosen = {i.node_id for i in self.selectedItems() if isinstance(i, NodeItem)}
        return [n.id for n in self.doc.flow.nodes if n.id in chosen]

    def selected_wire_indices(self) -> list[int]:
        return sorted(self._wires.index(i) for i in self.selectedItems() if isinstance(i, WireItem))

    def select_nodes(self, node_ids) -> None:
        ids = set(node_ids)
        self.clearSelection()
        for nid in ids:
            item = self._nodes.get(nid)
            if item is not None:
                item.setSelected(True)

    def nodes_rect(self, node_ids=None) -> QRectF:
        """The area the nodes cover, from the model (cheap for any size)."""
        rect = QRectF()
        for item in self._nodes.values():
            if node_ids is None or item.node_id in node_ids:
                rect = rect.united(item.sceneBoundingRect())
        return rect

    def flow_rect(self) -> QRectF:
        """The area the nodes and their wires cover: a wire that loops back
        reaches past the nodes it joins."""
        rect = self.nodes_rect()
        for wire in self._wires:
            # The drawn curve, not its control points (they reach far out).
            rect = rect.united(wire.mapRectToScene(wire.shape().boundingRect()))
        return rect

    # -- building from the document -----------------------------------------
    def _make_node(self, node_id: str) -> NodeItem:
        item = NodeItem(node_id, look_for(self.doc, node_id))
        fnode = self.doc.node(node_id)
        item.setPos(fnode.position[0], fnode.position[1])
        if self._overview:
            item.setOpacity(0.0)
        self.addItem(item)
        self._nodes[node_id] = item
        return item

    def _make_wire(self, index: int) -> WireItem | None:
        wire = self.doc.flow.wires[index]
        src, dst = self._nodes.get(wire.source[0]), self._nodes.get(wire.target[0])
        if src is None or dst is None:
            return None
        kind = self.doc.port_kind(wire.source[0], wire.source[1])
        item = WireItem(src, wire.source[1], dst, wire.target[1], kind == "tools",
                        down=kind == "hook")
        if self._overview:
            item.setOpacity(0.0)
        self.addItem(item)
        return item

    def _rebuild(self) -> None:
        if self._interaction:
            self._interaction.cancel()
        for item in [*self._wires, *self._nodes.values()]:
            self.removeItem(item)
        self._nodes.clear()
        self._wires = []
        self._problem_sig = {}
        for fnode in self.doc.flow.nodes:
            if fnode.id not in self._nodes:
                self._make_node(fnode.id)
        for i in range(len(self.doc.flow.wires)):
            self._wires.append(self._make_wire(i))
        self._on_problems(self.doc.problems)
        self._update_scene_rect()

    def _on_node_added(self, node_id: str) -> None:
        self._make_node(node_id)
        self._update_scene_rect()

    def _on_node_removed(self, node_id: str, index: int) -> None:
        item = self._nodes.pop(node_id, None)
        if item is None:
            return
        for w in list(item.wires):  # only if wires were not removed first
            if w in self._wires:
                self._wires[self._wires.index(w)] = None
            w.detach()
            self.removeItem(w)
        self._problem_sig.pop(node_id, None)
        self.removeItem(item)
        self._invalidate_overview()

    def _on_node_moved(self, node_id: str) -> None:
        item = self._nodes.get(node_id)
        fnode = self.doc.node(node_id)
        if item is not None and fnode is not None:
            item.move_to(QPointF(*fnode.position))
        self._update_scene_rect()

    def _on_node_changed(self, node_id: str) -> None:
        item = self._nodes.get(node_id)
        if item is None:
            return
        item.set_look(look_for(self.doc, node_id))
        for w in item.wires:
            w.update_path()
        self._invalidate_overview()

    def _on_wire_added(self, index: int) -> None:
        self._wires.insert(index, self._make_wire(index))
        self._invalidate_overview()

    def _on_wire_removed(self, wire, index: int) -> None:
        item = self._wires.pop(index)
        if item is not None:
            item.detach()
            self.removeItem(item)
        self._invalidate_overview()

    def _on_problems(self, problems) -> None:
        by_node: dict[str, list] = {}
        for p in problems:
            if p.node:
                by_node.setdefault(p.node, []).append((p.severity, p.message))
        for node_id, item in self._nodes.items():
            sig = tuple(by_node.get(node_id, ()))
            if self._problem_sig.get(node_id, ()) != sig:
                self._problem_sig[node_id] = sig
                item.set_look(look_for(self.doc, node_id))
        self._invalidate_overview()

    def _update_scene_rect(self) -> None:
        # A generous margin so that the canvas can be panned past the flow.
        rect = QRectF()
        for fnode in self.doc.flow.nodes:
            rect = rect.united(QRectF(fnode.position[0], fnode.position[1], NODE_W, 120))
        if rect.isNull():
            rect = QRectF(0, 0, 800, 600)
        rect = rect.adjusted(-SCENE_MARGIN, -SCENE_MARGIN, SCENE_MARGIN, SCENE_MARGIN)
        if not self.sceneRect().contains(rect):
            self.setSceneRect(self.sceneRect().united(rect) if self._nodes else rect)
        self._invalidate_overview()

    def refresh_theme(self) -> None:
        refresh_style()
        for node_id, item in self._nodes.items():
            item.set_look(look_for(self.doc, node_id))
        self._overview_cache = None
        self.invalidate()
        self.update()

    # -- queries for interactions ---------------------------------------------
    def view_scale(self) -> float:
        views = self.views()
        return views[0].transform().m11() if views else 1.0

    def node_item_at(self, pos: QPointF) -> NodeItem | None:
        if self._overview:
            for item in reversed(list(self._nodes.values())):
                if item.sceneBoundingRect().contains(pos) and item.contains(item.mapFromScene(pos)):
                    return item
            return None
        for item in self.items(pos):
            if isinstance(item, NodeItem):
                return item
        return None

    def node_items_near(self, pos: QPointF, radius: float) -> list[NodeItem]:
        rect = QRectF(pos.x() - radius, pos.y() - radius, 2 * radius, 2 * radius)
        if self._overview:
            return [i for i in self._nodes.values() if i.sceneBoundingRect().intersects(rect)]
        return [i for i in self.items(rect) if isinstance(i, NodeItem)]

    def items_in_rect(self, rect: QRectF) -> list:
        if self._overview:
            nodes = [i for i in self._nodes.values() if i.sceneBoundingRect().intersects(rect)]
            return nodes + [w for w in self._wires if w is not None
                            and w.source in nodes and w.target in nodes]
        return [i for i in self.items(rect, Qt.ItemSelectionMode.IntersectsItemShape)
                if isinstance(i, (NodeItem, WireItem))]

    def wire_item_at(self, pos: QPointF) -> WireItem | None:
        if self._overview:
            return None
        for item in self.items(pos):
            if isinstance(item, WireItem):
                return item
        return None

    # -- interactions ---------------------------------------------------------
    def start_interaction(self, interaction: Interaction) -> None:
        if self._interaction is not None:
            self._interaction.cancel()
        self._interaction = interaction

    def interaction_ended(self, interaction: Interaction) -> None:
        if self._interaction is interaction:
            self._interaction = None

    @property
    def interaction(self) -> Interaction | None:
        return self._interaction

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._interaction and self._interaction.mouse_press(event):
            return
        if event.button() != Qt.MouseButton.LeftButton:
            if event.button() == Qt.MouseButton.RightButton:
                item = self.node_item_at(event.scenePos())
                if item is not None and not item.isSelected():
                    self.select_nodes([item.node_id])
                event.accept()
                return
            super().mousePressEvent(event)
            return
        pos = event.scenePos()
        mods = event.modifiers()
        item = self.node_item_at(pos)
        if item is not None:
            port = item.port_at(item.mapFromScene(pos)) if not self._overview else None
            if port is not None and self.interactions is not None:
                self.start_interaction(self.interactions.new_wire(self, item, port))
                event.accept()
                return
            if mods & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier):
                item.setSelected(not item.isSelected())
                event.accept()
                return
            if not item.isSelected():
                self.clearSelection()
                item.setSelected(True)
            if self.interactions is not None:
                self.start_interaction(self.interactions.move_selection(self, item, pos))
            event.accept()
            return
        wire = self.wire_item_at(pos)
        if wire is not None:
            if not mods & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier):
                self.clearSelection()
            wire.setSelected(True)
            event.accept()
            return
        if self.interactions is not None:
            self.start_interaction(self.interactions.rubber_band(self, pos, mods))
        event.accept()

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._interaction and self._interaction.mouse_move(event):
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._interaction and self._interaction.mouse_release(event):
            return
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 - Qt override
        item = self.node_item_at(event.scenePos())
        if item is not None and event.button() == Qt.MouseButton.LeftButton:
            self.node_activated.emit(item.node_id)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._interaction and self._interaction.key_press(event):
            return
        super().keyPressEvent(event)

    def contextMenuEvent(self, event) -> None:  # noqa: N802 - Qt override
        item = self.node_item_at(event.scenePos())
        if item is not None:
            self.node_context_menu.emit(item.node_id, event.screenPos())
        else:
            self.canvas_context_menu.emit(event.scenePos(), event.screenPos())
        event.accept()

    # -- drawing ----------------------------------------------------------------
    def set_overview(self, on: bool) -> None:
        """Far out, items are not painted one by one; drawForeground paints
        the whole flow in a few batched calls instead. Opacity 0 makes Qt
        skip an item before any Python call; items still keep positions and
        selection."""
        if on == self._overview:
            return
        self._overview = on
        opacity = 0.0 if on else 1.0
        for item in self._nodes.values():
            item.setOpacity(opacity)
        for w in self._wires:
            if w is not None:
                w.setOpacity(opacity)
        self._overview_cache = None
        self.update()

    @property
    def overview(self) -> bool:
        return self._overview

    def _on_selection_changed(self) -> None:
        # Selected nodes draw above the others.
        for item in self._raised:
            item.setZValue(0)
        self._raised = self.selected_node_items()
        for item in self._raised:
            item.setZValue(1)
        self._invalidate_overview()

    def _invalidate_overview(self, *args) -> None:
        self._overview_cache = None
        if self._overview:
            self.update()

    def _overview_geometry(self) -> tuple:
        if self._overview_cache is None:
            by_color: dict[str, list[QRectF]] = {}
            cards, selected = [], []
            for item in self._nodes.values():
                p = item.pos()
                rect = QRectF(p.x(), p.y(), NODE_W, item.height)
                cards.append(rect)
                tile = QRectF(p.x() + 12, p.y() + (HEADER_H - ICON_BOX) / 2, ICON_BOX, ICON_BOX)
                by_color.setdefault(item.look.color, []).append(tile)
                if item.isSelected():
                    selected.append(rect)
            lines, tools = [], []
            for w in self._wires:
                if w is None:
                    continue
                a, b = w.endpoints()
                (tools if w.tools else lines).append(QLineF(a, b))
            self._overview_cache = (cards, by_color, selected, lines, tools)
        return self._overview_cache

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802 - Qt override
        if not self._overview:
            return
        s = style()
        cards, by_color, selected, lines, tools = self._overview_geometry()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        pen = QPen(s.wire, 1)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.drawLines(lines)
        if tools:
            pen = QPen(s.tools, 1)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.drawLines(tools)
        pen = QPen(s.node_border, 1)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(s.node)
        painter.drawRects(cards)
        painter.setPen(Qt.PenStyle.NoPen)
        for color, tiles in by_color.items():
            painter.setBrush(QColor(color))
            painter.drawRects(tiles)
        if selected:
            pen = QPen(s.accent, 2)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRects(selected)

    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:  # noqa: N802 - Qt override
        s = style()
        painter.fillRect(rect, s.canvas)
        lod = painter.worldTransform().m11()
        if lod < LOD_OVERVIEW * 1.5:
            return
        step = GRID if lod >= 0.6 else GRID * 5
        left = int(rect.left() // step) * step
        top = int(rect.top() // step) * step
        points = []
        y = top
        while y < rect.bottom():
            x = left
            while x < rect.right():
                points.append(QPointF(x, y))
                x += step
            y += step
        pen = QPen(s.grid, 2 if lod >= 0.6 else 1.5)
        pen.setCosmetic(True)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        painter.drawPoints(points)

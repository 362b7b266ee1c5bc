"""Breakpoints on the canvas: a red dot in the gutter left of a node's input
(or on a wire, near its target end), and an amber halo with a "paused" pill
around a node, or along a wire, where a message is held.

Items of their own, laid over the editor's: a node's marks are its child
items (they move with it), a wire's follow it from the scene's ``changed``
signal. ``CanvasMarks`` keeps them in step with the window's breakpoints
and held messages; ``GutterFilter`` takes the clicks in the gutter and on a
wire's dot (and the right-click on a wire) before the scene's own handling,
so the editor's scene and items know nothing of debugging."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QEvent, QLineF, QObject, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene

from ..look import theme
from .items import NODE_W, PORT_HIT, NodeItem, style
from .wires import WireItem, wire_path

GUTTER_X = -19.0  # the dot's centre, left of the input port (which sits at x = 0)
GUTTER_R = 7.0  # the dot's radius in scene units: 14 px across at 100 %
# Zoomed out, the dot keeps DOT_MIN_PX across on screen (at 80 %, the zoom
# an example may open at, a 5-unit dot was 7 px of red: hard to see, harder
# to hit), up to GUTTER_R_MAX units, clear of the input port.
DOT_MIN_PX = 14.0
GUTTER_R_MAX = 11.0
GUTTER_LEFT = -31.0  # what a click hits: from here to the port's own hit disc
GUTTER_HALF_H = 8.0
WIRE_AT = 0.72  # where on a wire its dot sits: past the middle (its message count's chip)
WIRE_DOT_HIT = 3.0  # what a click on a wire's dot hits: the dot and this much around it
GUTTER_HINT = ("Click to stop messages at this input (a breakpoint); "
               "right-click for a conditional one")
WIRE_DOT_HINT = "Click to remove this breakpoint; right-click to edit its condition"
HALO_GAP = 7.0  # the halo's ring, outside the card and its ports


def breakpoint_color() -> QColor:
    return QColor(theme.current().error)


def held_color() -> QColor:
    return QColor(theme.current().warning)


def input_ports(item: NodeItem) -> list[Any]:
    return [p for p in item.ports if p.kind == "in"]


def gutter_port(item: NodeItem, scene_pos: QPointF) -> Any:
    """The input port whose gutter ``scene_pos`` is in, or None."""
    local = item.mapFromScene(scene_pos)
    if not GUTTER_LEFT <= local.x() < -PORT_HIT + 1:
        return None
    for p in input_ports(item):
        if abs(local.y() - p.pos.y()) <= GUTTER_HALF_H:
            return p
    return None


def dot_radius(scale: float) -> float:
    """The dot's radius in scene units at the view's ``scale`` (its zoom)."""
    if scale <= 0:
        return GUTTER_R
    return min(GUTTER_R_MAX, max(GUTTER_R, DOT_MIN_PX / 2 / scale))


def view_scale(scene: QGraphicsScene | None) -> float:
    views = scene.views() if scene is not None else []
    return views[0].transform().m11() if views else 1.0


def paint_dot(painter: QPainter, center: QPointF, state: str) -> None:
    """A breakpoint's dot: ``set``, ``conditional`` (a white bar across) or
    ``hover`` (faint: click to set). Its size follows the zoom (dot_radius);
    its ring is 1.5 px on screen whatever the zoom."""
    red = breakpoint_color()
    scale = painter.worldTransform().m11()
    r = dot_radius(scale)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    if state == "hover":
        red.setAlpha(110)
        painter.setPen(Qt.PenStyle.NoPen)
    else:
        ring = QPen(style().node, 1.5)
        ring.setCosmetic(True)
        painter.setPen(ring)
    painter.setBrush(red)
    painter.drawEllipse(center, r, r)
    if state == "conditional":
        bar = QPen(QColor("#ffffff"), 1.6)
        bar.setCosmetic(True)
        painter.setPen(bar)
        half, gap = r * 0.55, r * 0.27
        painter.drawLine(QPointF(center.x() - half, center.y() - gap),
                         QPointF(center.x() + half, center.y() - gap))
        painter.drawLine(QPointF(center.x() - half, center.y() + gap),
                         QPointF(center.x() + half, center.y() + gap))


class GutterDot(QGraphicsItem):
    """The dot left of one input port (a child of its node's item)."""

    def __init__(self, node: NodeItem, port_y: float) -> None:
        super().__init__(node)
        self.state = "set"
        self.setPos(GUTTER_X, port_y)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setZValue(2)

    def set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        r = GUTTER_R_MAX + 2
        return QRectF(-r, -r, 2 * r, 2 * r)

    def paint(self, painter: QPainter, option: Any, widget: Any = None) -> None:
        paint_dot(painter, QPointF(0, 0), self.state)


class HeldHalo(QGraphicsItem):
    """An amber ring around a node where messages wait, with a pill that
    says how many (a child of the node's item)."""

    def __init__(self, node: NodeItem) -> None:
        super().__init__(node)
        self.node = node
        self.count = 0
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setZValue(3)

    def set_count(self, count: int) -> None:
        if count != self.count:
            self.prepareGeometryChange()
            self.count = count
            self.update()

    def _label(self) -> str:
        return "paused" if self.count <= 1 else f"paused · {self.count}"

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        g = HALO_GAP + 4
        return QRectF(-g, -g - 6, NODE_W + 2 * g, self.node.height + 2 * g + 6)

    def paint(self, painter: QPainter, option: Any, widget: Any = None) -> None:
        s = style()
        amber = held_color()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        ring = QRectF(-HALO_GAP, -HALO_GAP, NODE_W + 2 * HALO_GAP,
                      self.node.height + 2 * HALO_GAP)
        glow = QColor(amber)
        glow.setAlpha(60)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(glow, 6))
        painter.drawRoundedRect(ring, 12, 12)
        painter.setPen(QPen(amber, 2))
        painter.drawRoundedRect(ring, 12, 12)
        # The pill on the ring's top edge, clear of a pinned or problem badge
        # (on the card's right).
        label = self._label()
        w = s.chip_fm.horizontalAdvance(label) + 16
        pill = QRectF(12, -HALO_GAP - 8, w, 16)
        painter.setPen(QPen(s.node, 2))
        painter.setBrush(amber)
        painter.drawRoundedRect(pill, 8, 8)
        painter.setFont(s.chip_font)
        painter.setPen(QColor("#1f2430") if not s.t.dark else QColor("#17191d"))
        painter.drawText(pill, int(Qt.AlignmentFlag.AlignCenter), label)


class WireMark(QGraphicsItem):
    """A wire's breakpoint dot and, while a message waits on it, its amber
    glow. Not a child of the wire (a wire's path changes under it), so it
    follows from CanvasMarks.follow()."""

    def __init__(self, wire: WireItem) -> None:
        super().__init__()
        self.wire = wire
        self.dot = ""  # "" | set | conditional
        self.held = 0
        self._rect = QRectF()
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setZValue(-0.5)  # above the wires, below the nodes
        self.follow()

    def path(self) -> QPainterPath:
        a, b = self.wire.endpoints()
        return wire_path(a, b, getattr(self.wire, "down", self.wire.tools))

    def dot_pos(self) -> QPointF:
        return self.path().pointAtPercent(WIRE_AT)

    def follow(self) -> None:
        pad = GUTTER_R_MAX + 4
        rect = self.path().controlPointRect().adjusted(-pad, -pad, pad, pad)
        if rect != self._rect:
            self.prepareGeometryChange()
            self._rect = rect

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._rect

    def shape(self) -> QPainterPath:
        return QPainterPath()  # never in the way of a click

    def paint(self, painter: QPainter, option: Any, widget: Any = None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        path = self.path()
        if self.held:
            glow = held_color()
            glow.setAlpha(120)
            pen = QPen(glow, 7)
            pen.setCapStyle(Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(path)
        if self.dot:
            paint_dot(painter, path.pointAtPercent(WIRE_AT), self.dot)


def _alive(item: Any) -> bool:
    return item is not None and shiboken6.isValid(item) and item.scene() is not None


class CanvasMarks:
    """The marks of one scene, made again from the breakpoints and the held
    messages each time either changes (both are few)."""

    def __init__(self, scene: QGraphicsScene) -> None:
        self.scene = scene
        self._dots: dict[str, list[GutterDot]] = {}
        self._halos: dict[str, HeldHalo] = {}
        self._wires: dict[int, WireMark] = {}
        self._hover: GutterDot | None = None
        scene.changed.connect(lambda *_: self.follow())

    def show(self, nodes: dict[str, str], wires: dict[int, str], held_nodes: dict[str, int],
             held_wires: dict[int, int]) -> None:
        """``nodes``/``wires``: each breakpoint's dot state (set or
        conditional) by node id and wire index; ``held_*``: how many
        messages wait there."""
        for node_id in list(self._dots):
            if node_id not in nodes or not all(_alive(d) for d in self._dots[node_id]):
                self._drop(self._dots.pop(node_id))
        for node_id, state in nodes.items():
            item = self.scene.item_for_node(node_id)
            if item is None:
                continue
            dots = self._dots.get(node_id)
            if dots is None or any(d.parentItem() is not item for d in dots):
                self._drop(dots or [])
                dots = self._dots[node_id] = [GutterDot(item, p.pos.y())
                                              for p in input_ports(item)]
            for d in dots:
                d.set_state(state)
        for node_id in list(self._halos):
            halo = self._halos[node_id]
            if node_id not in held_nodes or not _alive(halo) or \
                    halo.parentItem() is not self.scene.item_for_node(node_id):
                self._drop([self._halos.pop(node_id)])
        for node_id, count in held_nodes.items():
            item = self.scene.item_for_node(node_id)
            if item is None:
                continue
            halo = self._halos.get(node_id)
            if halo is None:
                halo = self._halos[node_id] = HeldHalo(item)
            halo.set_count(count)
        for index in list(self._wires):
            mark = self._wires[index]
            if (index not in wires and index not in held_wires) or not _alive(mark.wire) or \
                    self.scene.item_for_wire(index) is not mark.wire:
                self._drop([self._wires.pop(index)])
        for index in set(wires) | set(held_wires):
            wire = self.scene.item_for_wire(index)
            if wire is None:
                continue
            mark = self._wires.get(index)
            if mark is None:
                mark = self._wires[index] = WireMark(wire)
                self.scene.addItem(mark)
            mark.dot, mark.held = wires.get(index, ""), held_wires.get(index, 0)
            mark.follow()
            mark.update()

    def hover(self, item: NodeItem | None, port: Any = None) -> None:
        """The faint dot that says "click here" in a gutter with none."""
        if self._hover is not None:
            if _alive(self._hover) and self._hover.parentItem() is item and port is not None \
                    and self._hover.pos().y() == port.pos.y():
                return
            self._drop([self._hover])
            self._hover = None
        if item is None or port is None or item.node_id in self._dots:
            return
        self._hover = GutterDot(item, port.pos.y())
        self._hover.set_state("hover")

    def follow(self) -> None:
        for mark in self._wires.values():
            if _alive(mark.wire):
                mark.follow()

    def halo(self, node_id: str) -> HeldHalo | None:
        return self._halos.get(node_id)

    def dots(self, node_id: str) -> list[GutterDot]:
        return self._dots.get(node_id, [])

    def wire_mark(self, index: int) -> WireMark | None:
        return self._wires.get(index)

    def wire_dot_at(self, pos: QPointF) -> int | None:
        """The index of the wire whose breakpoint dot is under ``pos``, or
        None (a wire that only glows, with no breakpoint, has no dot)."""
        hit = dot_radius(view_scale(self.scene)) + WIRE_DOT_HIT
        for index, mark in self._wires.items():
            if mark.dot and _alive(mark.wire) and \
                    QLineF(mark.dot_pos(), pos).length() <= hit:
                return index
        return None

    def _drop(self, items: list[Any]) -> None:
        for it in items:
            if it is not None and shiboken6.isValid(it):
                if it.scene() is not None:
                    it.scene().removeItem(it)
                if it is self._hover:
                    self._hover = None


class GutterFilter(QObject):
    """Takes, before the scene: a left click in an input's gutter (toggle
    its breakpoint) or on a wire's dot (remove it), the mouse over either
    (the faint dot, a hint in the status bar), and a right-click on a wire
    (its breakpoint menu). A click elsewhere on a wire goes on to the scene,
    which selects it."""

    def __init__(self, scene: Any, marks: CanvasMarks, toggle: Callable[[str], None],
                 wire_menu: Callable[[int, Any], None], gutter_menu: Callable[[str, Any], None],
                 message: Callable[[str], None],
                 remove_wire: Callable[[int], None] | None = None) -> None:
        super().__init__(scene)
        self.scene, self.marks = scene, marks
        self.toggle, self.wire_menu, self.gutter_menu = toggle, wire_menu, gutter_menu
        self.message, self.remove_wire = message, remove_wire
        self._hint = ""
        scene.installEventFilter(self)

    def hit(self, pos: QPointF) -> tuple[NodeItem, Any] | tuple[None, None]:
        if getattr(self.scene, "overview", False):
            return None, None
        for item in self.scene.node_items_near(pos, -GUTTER_LEFT + 4):
            port = gutter_port(item, pos)
            if port is not None:
                return item, port
        return None, None

    def wire_dot(self, pos: QPointF) -> int | None:
        """The wire whose dot a click at ``pos`` removes, or None. Checked
        before the gutter: the dot is what the person sees under the
        pointer, where the gutter is only a strip that may be near it."""
        if self.remove_wire is None or getattr(self.scene, "overview", False) or \
                self.scene.node_item_at(pos) is not None:
            return None
        return self.marks.wire_dot_at(pos)

    def _set_hint(self, text: str) -> None:
        if text != self._hint:
            self._hint = text
            self.message(text)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        kind = event.type()
        if kind == QEvent.Type.GraphicsSceneMousePress:
            if event.button() == Qt.MouseButton.LeftButton and self.scene.interaction is None:
                index = self.wire_dot(event.scenePos())
                if index is not None and self.remove_wire is not None:
                    self.remove_wire(index)
                    self._set_hint("")
                    event.accept()
                    return True
                item, _port = self.hit(event.scenePos())
                if item is not None:
                    self.toggle(item.node_id)
                    self.marks.hover(None)
                    event.accept()
                    return True
        elif kind == QEvent.Type.GraphicsSceneMouseMove:
            if event.buttons() == Qt.MouseButton.NoButton:
                pos = event.scenePos()
                on_dot = self.wire_dot(pos) is not None
                item, port = (None, None) if on_dot else self.hit(pos)
                self.marks.hover(item, port)
                self._set_hint(WIRE_DOT_HINT if on_dot else GUTTER_HINT if item else "")
        elif kind == QEvent.Type.GraphicsSceneContextMenu:
            pos = event.scenePos()
            index = self.wire_dot(pos)
            if index is None:
                item, _port = self.hit(pos)
                if item is not None:
                    self.gutter_menu(item.node_id, event.screenPos())
                    event.accept()
                    return True
                wire = self.scene.wire_item_at(pos) if self.scene.node_item_at(pos) is None \
                    else None
                index = self.scene.wire_index(wire) if wire is not None else None
            if index is not None:
                self.wire_menu(index, event.screenPos())
                event.accept()
                return True
        return False

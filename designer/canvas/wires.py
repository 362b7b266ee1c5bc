"""Wires on the canvas: ``WireItem`` (a bezier from an output port to an
input port, with its run count and problem marks), ``wire_path`` and the
``DraftWire`` drawn while a wire is dragged."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
)
from PySide6.QtWidgets import QGraphicsItem, QStyle, QStyleOptionGraphicsItem

from .items import LOD_TEXT, NodeItem, style


class WireItem(QGraphicsItem):
    """A bezier from an output port to an input port. Wires from an agent's
    tools port leave the bottom edge, dashed, in the tools colour; wires from
    its hook ports leave the bottom edge too (``down``), drawn as any wire."""

    Type = QGraphicsItem.UserType + 2

    def __init__(self, source: NodeItem, sport: str, target: NodeItem, dport: str,
                 tools: bool = False, *, down: bool = False) -> None:
        super().__init__()
        self.source, self.sport, self.target, self.dport = source, sport, target, dport
        self.tools = tools
        self.down = tools or down
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setAcceptHoverEvents(True)
        self.setZValue(-1)
        self._hover = False
        self.activity = 0
        self.flash = False
        self.stale = False  # the count is from before an edit of an end node
        self._path = QPainterPath()
        self._shape = QPainterPath()
        self._rect = QRectF()
        source.wires.append(self)
        target.wires.append(self)
        if down and not tools:
            source.update()  # a hook port draws itself wired
        self.update_path()

    def type(self) -> int:
        return self.Type

    def detach(self) -> None:
        for item in (self.source, self.target):
            if self in item.wires:
                item.wires.remove(self)
            item.place_run_line()
        if self.down and not self.tools:
            self.source.update()

    def endpoints(self) -> tuple[QPointF, QPointF]:
        kind = "tools" if self.tools else "out"
        return (self.source.port_scene_pos(self.sport, kind),
                self.target.port_scene_pos(self.dport, "in"))

    def update_path(self) -> None:
        a, b = self.endpoints()
        self.prepareGeometryChange()
        self._path = wire_path(a, b, self.down)
        stroker = QPainterPathStroker()
        stroker.setWidth(12)
        self._shape = stroker.createStroke(self._path)
        self._rect = self._path.controlPointRect().adjusted(-6, -6, 6, 6)
        if self.activity:
            self._rect = self._rect.united(self._label_rect())
        for end in (self.source, self.target):
            if end.run_state != "idle":
                end.place_run_line()

    def crosses(self, rect: QRectF) -> bool:
        """The wire, or 6 px either side of it, crosses ``rect`` (scene)."""
        return self._rect.intersects(rect) and self._shape.intersects(rect)

    def set_activity(self, count: int) -> None:
        """Messages seen on this wire during a run; 0 clears the label."""
        changed = count != self.activity
        self.prepareGeometryChange()
        self.activity = count
        self.flash = count > 0 and changed
        self.update_path()
        self.update()

    def set_stale(self, stale: bool) -> None:
        if stale != self.stale:
            self.stale = stale
            if stale:
                self.flash = False
            self.update()

    def _label_rect(self) -> QRectF:
        mid = self._path.pointAtPercent(0.5)
        w = style().chip_fm.horizontalAdvance(str(self.activity)) + 12
        return QRectF(mid.x() - w / 2, mid.y() - 8, w, 16)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._rect

    def shape(self) -> QPainterPath:
        return self._shape

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._hover = True
        self.update()

    def hoverLeaveEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._hover = False
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        s = style()
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        color = s.tools if self.tools else s.wire
        width = 2.0
        if selected:
            color, width = (s.accent, 3.0)
        elif self.flash and not self.stale:
            color, width = (s.running, 3.0)
        elif self._hover:
            color = s.wire_hover if not self.tools else s.tools
            width = 2.6
        pen = QPen(color, width, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
        if self.tools:
            pen.setDashPattern([4, 3])
        if lod < LOD_TEXT:
            pen.setCosmetic(True)
            pen.setWidthF(1.5 if not selected else 2.5)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self._path)
        if self.activity and lod >= LOD_TEXT:
            rect = self._label_rect()
            painter.setPen(QPen(s.node_border if self.stale else color, 1))
            painter.setBrush(s.node)
            painter.drawRoundedRect(rect, 8, 8)
            painter.setFont(s.chip_font)
            painter.setPen(s.muted if self.stale else s.text)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, str(self.activity))


def wire_path(a: QPointF, b: QPointF, tools: bool = False) -> QPainterPath:
    """``tools``: the wire leaves a port on the bottom edge (tools, hooks)."""
    path = QPainterPath(a)
    dx = max(40.0, abs(b.x() - a.x()) * 0.5)
    if tools:
        dy = max(40.0, abs(b.y() - a.y()) * 0.6)
        path.cubicTo(QPointF(a.x(), a.y() + dy), QPointF(b.x() - dx, b.y()), b)
    else:
        if b.x() < a.x():  # a wire going back: loop out to the sides
            dx = max(dx, 80.0)
        path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
    return path


class DraftWire(QGraphicsItem):
    """The wire under the mouse while one is being drawn; over a refused port
    it turns red and says why, next to the cursor."""

    def __init__(self, start: QPointF, tools: bool, reverse: bool = False, *,
                 down: bool = False) -> None:
        super().__init__()
        self.start, self.end, self.tools, self.reverse = start, start, tools, reverse
        self.down = down  # from a hook port: leaves the bottom edge as a tools wire does
        self.ok: bool | None = None
        self.reason = ""
        self.setZValue(10)
        self._path = QPainterPath()
        self._rect = QRectF()

    def set_end(self, end: QPointF, ok: bool | None) -> None:
        self.prepareGeometryChange()
        self.end, self.ok = end, ok
        a, b = (self.end, self.start) if self.reverse else (self.start, self.end)
        self._path = wire_path(a, b, self.tools or self.down)
        self._rect = self._path.controlPointRect().adjusted(-4, -4, 4, 4)
        if self.reason:
            self._rect = self._rect.united(self._reason_rect())
        self.update()

    def _reason_rect(self) -> QRectF:
        w = style().sub_fm.horizontalAdvance(self.reason) + 16
        return QRectF(self.end.x() + 14, self.end.y() + 12, w, 20)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._rect

    def paint(self, painter: QPainter, option, widget=None) -> None:
        s = style()
        color = s.tools if self.tools else s.accent
        if self.ok is False:
            color = s.refused
        elif self.ok:
            color = s.done
        pen = QPen(color, 2, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
        if self.tools:
            pen.setDashPattern([4, 3])
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self._path)
        if self.reason:
            rect = self._reason_rect()
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(s.refused)
            painter.drawRoundedRect(rect, 6, 6)
            painter.setPen(s.white)
            painter.setFont(s.sub_font)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, self.reason)

"""Mouse gestures on the canvas, one object per gesture.

The scene hands its mouse and key events to the current interaction first;
an interaction ends finished (it pushed its command) or cancelled (Esc: it
put everything back), and only then does the scene go back to plain
selection. This keeps the scene free of "am I dragging a wire?" branches
(the orange-canvas-core pattern, document/interactions.py)."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsRectItem

from runtime.flow import Wire

from ..model.commands import MoveNodes
from ..model.document import FlowDocument
from .items import GRID, PORT_HIT, NodeItem, PortInfo, snap, style
from .wires import DraftWire
from .wiring import connect


class CanvasScene(Protocol):
    """What a gesture uses of the scene it runs on (``FlowScene``). The
    scene gets its gestures from ``MouseInteractions`` passed to it, so this
    module never imports the scene and the scene knows no concrete gesture."""

    doc: FlowDocument
    snap_to_grid: bool
    message: Any  # Signal(str): a status-bar sentence
    wire_dropped: Any  # Signal: a new wire released on empty canvas

    def addItem(self, item: QGraphicsItem) -> None: ...  # noqa: N802 - Qt's name
    def removeItem(self, item: QGraphicsItem) -> None: ...  # noqa: N802 - Qt's name
    def clearSelection(self) -> None: ...  # noqa: N802 - Qt's name
    def selectedItems(self) -> list: ...  # noqa: N802 - Qt's name
    def selected_node_items(self) -> list[NodeItem]: ...
    def node_and_wire_items(self) -> list: ...
    def node_items_near(self, pos: QPointF, radius: float) -> list[NodeItem]: ...
    def items_in_rect(self, rect: QRectF) -> list: ...
    def view_scale(self) -> float: ...
    def interaction_ended(self, interaction: Interaction) -> None: ...


class Interaction:
    def __init__(self, scene: CanvasScene) -> None:
        self.scene = scene
        self.finished = False
        self.cancelled = False

    def mouse_press(self, event) -> bool:
        return False

    def mouse_move(self, event) -> bool:
        return False

    def mouse_release(self, event) -> bool:
        return False

    def key_press(self, event) -> bool:
        if event.key() == Qt.Key.Key_Escape:
            self.cancel()
            return True
        return False

    def cleanup(self) -> None:
        """Remove whatever the gesture drew."""

    def end(self) -> None:
        self.finished = True
        self.cleanup()
        self.scene.interaction_ended(self)

    def cancel(self) -> None:
        self.cancelled = True
        self.end()


class NewWire(Interaction):
    """Drag from a port to a port of the other direction. The target under
    the mouse is checked with ``document.can_connect`` as it is hovered: an
    acceptable port turns green, a refused one red with the reason next to
    the cursor and in the status bar; releasing on a refused port creates
    nothing."""

    def __init__(self, scene: CanvasScene, node: NodeItem, port: PortInfo) -> None:
        super().__init__(scene)
        self.node, self.port = node, port
        self.reverse = port.kind == "in"  # dragged from an input, back to an output
        self.tools = port.kind == "tools"
        start = node.mapToScene(port.pos)
        self.draft = DraftWire(start, self.tools, self.reverse, down=port.kind == "hook")
        self.draft.set_end(start, None)
        scene.addItem(self.draft)
        self.target: tuple[NodeItem, PortInfo] | None = None
        self.ok = False
        self.reason = ""

    def _endpoints(self, other: NodeItem, oport: PortInfo) -> tuple[str, str, str, str]:
        if self.reverse:
            return other.node_id, oport.name, self.node.node_id, self.port.name
        return self.node.node_id, self.port.name, other.node_id, oport.name

    def find_target(self, pos: QPointF) -> tuple[NodeItem, PortInfo] | None:
        best = None
        best_d = PORT_HIT + 4
        for item in self.scene.node_items_near(pos, PORT_HIT + 4):
            if item is self.node:
                continue
            for p in item.ports:
                d = QLineF(item.mapToScene(p.pos), pos).length()
                if d < best_d:
                    best, best_d = (item, p), d
        return best

    def check(self, other: NodeItem, oport: PortInfo) -> tuple[bool, str]:
        want_input = not self.reverse
        if (oport.kind == "in") != want_input:
            return False, ("connect an output to an input" if want_input
                           else "connect an input to an output")
        if self.reverse and oport.kind == "tools" and not self.tools:
            pass  # an agent's tools port may be the source of a wire to an input
        return self.scene.doc.can_connect(*self._endpoints(other, oport))

    def mouse_move(self, event) -> bool:
        pos = event.scenePos()
        target = self.find_target(pos)
        if self.target and (target is None or target != self.target):
            self.target[0].set_mark(None)
        self.target = target
        if target is None:
            self.ok, self.reason = False, ""
            self.draft.tools = self.tools
            self.draft.down = self.port.kind == "hook"
            self.draft.set_end(pos, None)
            self.draft.reason = ""
            self.scene.message.emit("")
            return True
        other, oport = target
        self.ok, self.reason = self.check(other, oport)
        other.set_mark(oport.name, oport.kind == "in", self.ok)
        self.draft.tools = self.tools or oport.kind == "tools"
        self.draft.down = self.port.kind == "hook" or oport.kind == "hook"
        self.draft.reason = "" if self.ok else self.reason
        self.draft.set_end(other.mapToScene(oport.pos), self.ok)
        self.scene.message.emit("" if self.ok else f"Cannot connect: {self.reason}")
        return True

    def mouse_release(self, event) -> bool:
        self.mouse_move(event)
        if self.target and self.ok:
            src, sport, dst, dport = self._endpoints(*self.target)
            said = connect(self.scene.doc, Wire(source=(src, sport), target=(dst, dport)))
            self.scene.message.emit("; ".join(said))
        elif self.target:
            self.scene.message.emit(f"Not connected: {self.reason}")
        elif QLineF(self.node.mapToScene(self.port.pos), event.scenePos()).length() > PORT_HIT * 3:
            # Released on empty canvas: offer a node to connect (n8n-style).
            self.scene.wire_dropped.emit(self.node.node_id, self.port.name, self.port.kind,
                                         event.scenePos(), event.screenPos())
        self.end()
        return True

    def cleanup(self) -> None:
        if self.target:
            self.target[0].set_mark(None)
        self.scene.removeItem(self.draft)


class MoveSelection(Interaction):
    """Drag the selected nodes; positions snap to the grid (hold Alt to place
    freely). The items move as the mouse moves; the document learns the new
    positions once, as one MoveNodes command on release."""

    def __init__(self, scene: CanvasScene, anchor: NodeItem, press: QPointF) -> None:
        super().__init__(scene)
        self.anchor = anchor
        self.press = press
        self.start = {item: QPointF(item.pos()) for item in scene.selected_node_items()}
        if anchor not in self.start:
            self.start[anchor] = QPointF(anchor.pos())
        self.moved = False

    def mouse_move(self, event) -> bool:
        delta = event.scenePos() - self.press
        if not self.moved:
            view = event.widget()
            scale = self.scene.view_scale()
            if max(abs(delta.x()), abs(delta.y())) * scale < 3 and view is not None:
                return True
            self.moved = True
        origin = self.start[self.anchor]
        target = origin + delta
        if self.scene.snap_to_grid and not event.modifiers() & Qt.KeyboardModifier.AltModifier:
            target = QPointF(snap(target.x(), GRID), snap(target.y(), GRID))
        d = target - origin
        for item, pos in self.start.items():
            item.move_to(pos + d)
        return True

    def mouse_release(self, event) -> bool:
        if self.moved:
            moves = {}
            for item, pos in self.start.items():
                new = item.pos()
                if new != pos:
                    moves[item.node_id] = ((pos.x(), pos.y()), (new.x(), new.y()))
            if moves:
                self.scene.doc.undo_stack.push(MoveNodes(self.scene.doc, moves))
        self.end()
        return True

    def cancel(self) -> None:
        for item, pos in self.start.items():
            item.move_to(pos)
        super().cancel()


class RubberBand(Interaction):
    """Drag on empty canvas to select what the rectangle touches; with
    Ctrl or Shift the rectangle adds to the selection."""

    def __init__(self, scene: CanvasScene, press: QPointF, modifiers) -> None:
        super().__init__(scene)
        self.press = press
        additive = bool(modifiers & (Qt.KeyboardModifier.ControlModifier
                                     | Qt.KeyboardModifier.ShiftModifier))
        self.before = set(scene.selectedItems()) if additive else set()
        if not additive:
            scene.clearSelection()
        s = style()
        self.rect_item = QGraphicsRectItem()
        fill = QColor(s.accent)
        fill.setAlpha(28)
        self.rect_item.setBrush(fill)
        pen = QPen(s.accent, 1)
        pen.setCosmetic(True)
        self.rect_item.setPen(pen)
        self.rect_item.setZValue(20)
        self.rect_item.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, False)
        scene.addItem(self.rect_item)
        self.rect_item.setRect(QRectF(press, press))

    def mouse_move(self, event) -> bool:
        rect = QRectF(self.press, event.scenePos()).normalized()
        self.rect_item.setRect(rect)
        chosen = set(self.scene.items_in_rect(rect)) | self.before
        for item in self.scene.node_and_wire_items():
            want = item in chosen
            if item.isSelected() != want:
                item.setSelected(want)
        return True

    def mouse_release(self, event) -> bool:
        self.mouse_move(event)
        self.end()
        return True

    def cancel(self) -> None:
        self.scene.clearSelection()
        for item in self.before:
            item.setSelected(True)
        super().cancel()

    def cleanup(self) -> None:
        self.scene.removeItem(self.rect_item)


class MouseInteractions:
    """The gestures a mouse press starts on the canvas, handed to
    ``FlowScene(..., interactions=MouseInteractions())``: drag a wire from
    a port, move the selection, or draw a rubber band."""

    def new_wire(self, scene: CanvasScene, node: NodeItem, port: PortInfo) -> Interaction:
        return NewWire(scene, node, port)

    def move_selection(self, scene: CanvasScene, anchor: NodeItem,
                       press: QPointF) -> Interaction:
        return MoveSelection(scene, anchor, press)

    def rubber_band(self, scene: CanvasScene, press: QPointF, modifiers: Any) -> Interaction:
        return RubberBand(scene, press, modifiers)

"""Edit operations on the canvas selection: add, delete, copy, cut, paste,
duplicate, enable/disable. Each is one command on the document's undo
stack; the scene follows the document's signals.

The clipboard carries flow JSON (as text and under CLIPBOARD_MIME), so a
selection copied in one window pastes into another, or into an editor."""

from __future__ import annotations

import json

from PySide6.QtCore import QMimeData, QObject, QPoint, QPointF, QRect, QSize, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from runtime.flow import Wire, parse_flow

from ..look.settings import settings
from ..model.commands import (
    CLIPBOARD_MIME,
    AddNode,
    AddWire,
    RemoveItems,
    SetDisabled,
    fragment_json,
    new_node,
    paste_command,
    starting_params,
)
from .items import GRID, HEADER_H, NODE_W, snap
from .scene import FlowScene
from .view import FlowView
from .wiring import SAMPLE_PROMPT, wire_defaults

#: The height of a node not yet drawn (pasted from another window), for
#: placing copies; a plain node with one row of chips.
TYPICAL_NODE_H = 64.0


class CanvasEditor(QObject):
    #: A node just placed holds a sample value to type over (its payload).
    type_over = Signal(str)

    def __init__(self, scene: FlowScene, view: FlowView, parent=None) -> None:
        super().__init__(parent)
        self.scene, self.view = scene, view
        self.doc = scene.doc
        self._quick_add = None
        self._type_over_next: str | None = None  # a node placed to type over

    def node_origin(self, at: QPointF) -> tuple[float, float]:
        """Top-left of a new node whose header is centred on ``at``."""
        x, y = at.x() - NODE_W / 2, at.y() - HEADER_H / 2
        if self.scene.snap_to_grid:
            x, y = snap(x, GRID), snap(y, GRID)
        return (x, y)

    def add_node(self, type_id: str, at: QPointF | None = None) -> str | None:
        if self.doc.registry.spec(type_id) is None:
            return None
        if at is None:
            at = self.view.view_center()
        fnode = new_node(self.doc, type_id, self.node_origin(at))
        fnode.params.update(starting_params(self.doc, type_id))
        self.doc.undo_stack.push(AddNode(self.doc, fnode))
        self.scene.select_nodes([fnode.id])
        return fnode.id

    def delete_selection(self, label: str | None = None) -> bool:
        nodes = self.scene.selected_node_ids()
        wires = self.scene.selected_wire_indices()
        if not nodes and not wires:
            return False
        cmd = RemoveItems(self.doc, nodes, wires)
        if label:
            cmd.setText(label)
        self.doc.undo_stack.push(cmd)
        return True

    def copy_selection(self) -> bool:
        ids = self.scene.selected_node_ids()
        if not ids:
            return False
        text = fragment_json(self.doc, ids)
        mime = QMimeData()
        mime.setData(CLIPBOARD_MIME, text.encode("utf-8"))
        mime.setText(text)
        QGuiApplication.clipboard().setMimeData(mime)
        return True

    def cut_selection(self) -> bool:
        if not self.copy_selection():
            return False
        return self.delete_selection("Cut")

    def paste(self, at: QPointF | None = None) -> list[str]:
        mime = QGuiApplication.clipboard().mimeData()
        if mime is None:
            return []
        if mime.hasFormat(CLIPBOARD_MIME):
            text = bytes(mime.data(CLIPBOARD_MIME).data()).decode("utf-8")
        else:
            text = mime.text()
        return self.paste_text(text, at)

    def paste_text(self, text: str, at: QPointF | None = None, label: str = "Paste") -> list[str]:
        """Paste flow JSON. With ``at`` (the canvas menu's click point) the
        copy lands there; else just below its original, and below earlier
        copies (a column, each readable), as long as that is in sight;
        otherwise (pasted from another window, or scrolled away) at the
        mouse, or the view's centre. It never covers a node."""
        step = (0.0, self._fragment_height(text) + GRID)
        cmd = None
        if at is None:
            cmd = paste_command(self.doc, text, offset=step, size_of=self._size_of)
            if cmd is not None and not self._in_sight(cmd.nodes):
                at = self.view.cursor_scene_pos() or self.view.view_center()
        if at is not None:
            origin = (snap(at.x()), snap(at.y())) if self.scene.snap_to_grid else (at.x(), at.y())
            cmd = paste_command(self.doc, text, offset=step, at=origin, size_of=self._size_of)
        if cmd is None:
            return []
        cmd.setText(label)
        self.doc.undo_stack.push(cmd)
        ids = [n.id for n in cmd.nodes]
        self.scene.select_nodes(ids)
        return ids

    def _size_of(self, fnode) -> tuple[float, float]:
        """A node's size on the canvas: its item's, when a node of the same
        type is drawn under that id (the original of a copy), else a
        typical one."""
        item = self.scene.item_for_node(fnode.id)
        drawn = self.doc.node(fnode.id)
        if item is not None and drawn is not None and drawn.type == fnode.type:
            return (NODE_W, float(item.height))
        return (NODE_W, TYPICAL_NODE_H)

    def _fragment_height(self, text: str) -> float:
        try:
            nodes = parse_flow(json.loads(text)).nodes
        except Exception:
            return TYPICAL_NODE_H
        if not nodes:
            return TYPICAL_NODE_H
        top = min(n.position[1] for n in nodes)
        bottom = max(n.position[1] + self._size_of(n)[1] for n in nodes)
        return snap(bottom - top + GRID / 2, GRID)

    def _in_sight(self, nodes) -> bool:
        seen = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        return any(seen.contains(QPointF(n.position[0] + NODE_W / 2,
                                         n.position[1] + HEADER_H / 2)) for n in nodes)

    def duplicate_selection(self) -> list[str]:
        ids = self.scene.selected_node_ids()
        if not ids:
            return []
        cmd = paste_command(self.doc, fragment_json(self.doc, ids), offset=(GRID * 2, GRID * 2))
        if cmd is None:
            return []
        cmd.setText("Duplicate")
        self.doc.undo_stack.push(cmd)
        new_ids = [n.id for n in cmd.nodes]
        self.scene.select_nodes(new_ids)
        return new_ids

    def select_all(self) -> None:
        for item in self.scene.node_and_wire_items():
            if item is not None:
                item.setSelected(True)

    def toggle_disabled(self, node_id: str) -> None:
        fnode = self.doc.node(node_id)
        if fnode is not None:
            self.doc.undo_stack.push(SetDisabled(self.doc, node_id, not fnode.disabled))

    # -- quick add ------------------------------------------------------------
    def open_wire_picker(self, node_id: str, port: str, kind: str, at: QPointF,
                         global_pos):
        """A wire dropped on empty canvas: pick a node; it is placed there and
        connected, as one undo step. Only nodes that can take the wire are
        offered (for an agent's tools port: nodes that declare a tool)."""
        from ..panels.palette import QuickAdd

        if kind == "in":
            def accept(spec) -> bool:
                return any(p.kind == "out" for p in spec.outputs) or spec.dynamic_outputs
        elif kind == "tools":
            def accept(spec) -> bool:
                return spec.tool is not None and bool(spec.inputs)
        else:
            def accept(spec) -> bool:
                return bool(spec.inputs)
        self._close_quick_add()
        popup = QuickAdd(self.doc.registry, self.view, accept=accept)
        suggest_first(popup, suggestions(kind))
        popup.chosen.connect(lambda type_id: self._add_connected(type_id, at, node_id, port, kind))
        popup.chosen.connect(self._back_from_picker)
        self._quick_add = popup
        popup.open_at(inside_window(self.view.window(), global_pos, popup.size()))
        return popup

    def _add_connected(self, type_id: str, at: QPointF, node_id: str, port: str,
                       kind: str) -> str | None:
        spec = self.doc.registry.spec(type_id)
        if spec is None:
            return None
        remember_pick(kind, type_id)
        stack = self.doc.undo_stack
        stack.beginMacro(f"Add {spec.name} and connect")
        try:
            new_id = self.add_node(type_id, self._place_in_sight(at))
            if new_id is None:
                return None
            if kind == "in":
                outs = self.doc.output_ports(new_id)
                ends = (new_id, outs[0], node_id, port) if outs else None
            else:
                ends = (node_id, port, new_id, spec.inputs[0].name) if spec.inputs else None
            if ends and self.doc.can_connect(*ends)[0]:
                wire = Wire(source=ends[:2], target=ends[2:])
                stack.push(AddWire(self.doc, wire))
                said = wire_defaults(self.doc, wire)
                if said:
                    self.scene.message.emit("; ".join(said))
                if kind == "in" and self._sampled(new_id):
                    # A new Inject placed before an agent: its sample prompt
                    # waits in the payload field, selected, to be typed over
                    # (once the picker has gone: see _refocus).
                    self._type_over_next = new_id
            return new_id
        finally:
            stack.endMacro()

    def _place_in_sight(self, at: QPointF) -> QPointF:
        """Where a node whose header is centred on ``at`` lies wholly in the
        canvas's view: a wire dropped near its edge places the node inside,
        not half under a panel."""
        seen = self.view.mapToScene(self.view.viewport().rect()).boundingRect().adjusted(
            GRID, GRID, -GRID, -GRID)
        half = NODE_W / 2
        x = min(max(at.x(), seen.left() + half), seen.right() - half)
        y = min(max(at.y(), seen.top() + HEADER_H / 2),
                seen.bottom() - TYPICAL_NODE_H + HEADER_H / 2)
        if seen.width() < NODE_W or seen.height() < TYPICAL_NODE_H:
            return at  # a view too small for a node: leave it where it was dropped
        return QPointF(x, y)

    def _back_from_picker(self, _type_id: str = "") -> None:
        """The picker closed on a choice: it goes, and the keys come back to
        the window (a popup that closes leaves none active where no window
        manager hands them back), to the canvas unless a field took them."""
        self._close_quick_add()
        QTimer.singleShot(0, self, self._refocus)

    def _refocus(self) -> None:
        window = self.view.window()
        if window is not None and QApplication.activeWindow() is not window:
            window.activateWindow()
        node, self._type_over_next = self._type_over_next, None
        if node is not None:
            self.type_over.emit(node)
        focus = QApplication.focusWidget()
        if focus is None or focus.window() is not window:
            self.view.setFocus()

    def _sampled(self, node_id: str) -> bool:
        fnode = self.doc.node(node_id)
        payload = fnode.params.get("payload") if fnode is not None else None
        return payload is not None and payload.value == SAMPLE_PROMPT

    def _close_quick_add(self) -> None:
        if self._quick_add is not None:
            self._quick_add.close()
            self._quick_add.deleteLater()
            self._quick_add = None

    def open_quick_add(self, text: str, at: QPointF, global_pos) -> None:
        from ..panels.palette import QuickAdd

        self._close_quick_add()
        popup = QuickAdd(self.doc.registry, self.view)
        popup.chosen.connect(lambda type_id: self.add_node(type_id, at))
        popup.chosen.connect(self._back_from_picker)
        self._quick_add = popup
        popup.open_at(global_pos, text)
        return popup


# -- the wire-drop picker's order ---------------------------------------------------

#: What a dropped wire most likely wants next, by the kind of port it left:
#: an output shows its messages in a Debug node; an input is fed by an
#: Inject; an agent's first tool is often mail or a web request. The user's
#: own recent picks come before these.
SUGGESTED = {"out": ["core.debug"], "in": ["core.inject"],
             "tools": ["mail.send", "http.request"]}
RECENT_KEY = "canvas/recent_picks/{}"
MAX_RECENT = 3


def _settings():
    return settings()


def suggestions(kind: str) -> list[str]:
    """Types the picker lists first for a wire from a port of this kind:
    the user's recent picks, then SUGGESTED."""
    recent = _settings().value(RECENT_KEY.format(kind), [])
    if isinstance(recent, str):
        recent = [recent]
    out: list[str] = []
    for type_id in [*(recent or []), *SUGGESTED.get(kind, [])]:
        if isinstance(type_id, str) and type_id not in out:
            out.append(type_id)
    return out


def remember_pick(kind: str, type_id: str) -> None:
    key = RECENT_KEY.format(kind)
    recent = _settings().value(key, [])
    if isinstance(recent, str):
        recent = [recent]
    picks = [type_id] + [t for t in (recent or []) if t != type_id]
    _settings().setValue(key, picks[:MAX_RECENT])


def suggest_first(popup, type_ids: list[str]) -> None:
    """Move the suggested types to the top of a picker's list (those it
    offers), in order, and make the first shown entry the current one."""
    from ..panels.palette import TYPE_ROLE

    lst = popup.list
    for target, type_id in enumerate(t for t in type_ids if t in popup.visible_types()):
        for row in range(lst.count()):
            if lst.item(row).data(TYPE_ROLE) == type_id:
                if row != target:
                    lst.insertItem(target, lst.takeItem(row))
                break
    for row in range(lst.count()):
        if not lst.item(row).isHidden():
            lst.setCurrentRow(row)
            break


def inside_window(window, at: QPoint, size: QSize) -> QPoint:
    """Where a popup of ``size`` opened at ``at`` (global) lies wholly inside
    the window and its screen: moved left of a right edge, and above the
    point where it would run past the bottom."""
    area = window.frameGeometry() if window is not None else QRect()
    screen = QGuiApplication.screenAt(at) or QGuiApplication.primaryScreen()
    if screen is not None:
        area = area.intersected(screen.availableGeometry()) if not area.isEmpty() \
            else screen.availableGeometry()
    if area.isEmpty():
        return at
    x, y = at.x(), at.y()
    if x + size.width() > area.right():
        x = max(area.left(), area.right() - size.width())
    if y + size.height() > area.bottom():
        y = max(area.top(), min(area.bottom(), at.y()) - size.height())
    return QPoint(x, y)

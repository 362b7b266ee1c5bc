"""The canvas view: zoom (wheel, keys), pan (middle drag, Space+drag),
fit, drops from the palette and of flow files, and quick add by typing."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QCursor, QPainter
from PySide6.QtWidgets import QFrame, QGraphicsView, QLabel, QVBoxLayout, QWidget

from ..look import theme
from .items import LOD_OVERVIEW
from .scene import FlowScene

NODE_MIME = "application/x-switchboard-node-type"
MIN_ZOOM, MAX_ZOOM = 0.03, 3.0
#: The least zoom an opened flow is shown at: node titles and ports read well.
READABLE_ZOOM = 0.8


def flow_file_from_mime(mime) -> str | None:
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        path = url.toLocalFile()
        if path.endswith(".json"):
            return path
    return None


class EmptyCanvasHint(QWidget):
    """What an empty canvas says: how to put the first node on it, and how
    the next ones follow. It lies over the view, not in the scene, so it
    stays centred while the canvas pans and zooms, and mouse events and
    drops go through it to the canvas."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("EmptyCanvasHint")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.label = QLabel()
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setFixedWidth(480)  # a fixed width lets the wrapped text get its height
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        layout.addWidget(self.label, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(1)
        self.refresh_theme()

    def text(self) -> str:
        return self.label.text()

    def refresh_theme(self) -> None:
        t = theme.current()
        key = (f"<span style='color:{t.text}; background-color:{t.base}; font-weight:600;'>"
               "&nbsp;{}&nbsp;</span>")
        self.label.setText(
            f"<div style='color:{t.muted}; font-size:13px;'>"
            f"<p style='font-size:17px; font-weight:600; color:{t.text};'>Your flow is empty</p>"
            "<p>Drag a node here from the <b>Nodes</b> panel,<br>"
            f"or press {key.format('Tab')} on the canvas (or type a name) to search for one.</p>"
            "<p>Then drag a wire from a node's port and drop it on empty canvas<br>"
            "to pick the next node: it is placed there and connected.</p></div>")
        # Rich text that wraps gets no height of its own in a layout.
        self.label.setFixedHeight(self.label.heightForWidth(self.label.width()))

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh_theme()


class FlowView(QGraphicsView):
    zoom_changed = Signal(float)
    node_dropped = Signal(str, QPointF)  # type id, scene position
    file_dropped = Signal(str)
    quick_add_requested = Signal(str, QPointF, QPoint)  # typed text, scene pos, global pos

    def __init__(self, scene: FlowScene, parent=None) -> None:
        super().__init__(scene, parent)
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing
                            | QPainter.RenderHint.SmoothPixmapTransform)
        # Items draw inside their bounding rects (they include a margin), so
        # Qt need not widen every exposed rect for antialiasing.
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setDragMode(QGraphicsView.DragMode.NoDrag)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._pan_from: QPoint | None = None
        self._space = False
        self.empty_hint = EmptyCanvasHint(self)
        scene.doc.changed.connect(self._update_empty_hint)
        self._update_empty_hint()

    @property
    def flow_scene(self) -> FlowScene:
        return self.scene()

    # -- the empty canvas -----------------------------------------------------
    def _update_empty_hint(self) -> None:
        empty = not self.flow_scene.doc.flow.nodes
        if empty != self.empty_hint.isVisibleTo(self):
            self.empty_hint.setVisible(empty)
        if empty:
            self.empty_hint.setGeometry(self.viewport().geometry())
            self.empty_hint.raise_()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.empty_hint.setGeometry(self.viewport().geometry())

    # -- zoom and fit ------------------------------------------------------------
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, value: float, anchor_under_mouse: bool = False) -> None:
        value = max(MIN_ZOOM, min(MAX_ZOOM, value))
        factor = value / self.zoom()
        if abs(factor - 1.0) < 1e-6:
            return
        old = self.transformationAnchor()
        if not anchor_under_mouse:
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.scale(factor, factor)
        self.setTransformationAnchor(old)
        self._scale_changed()

    def zoom_in(self) -> None:
        self.set_zoom(self.zoom() * 1.25)

    def zoom_out(self) -> None:
        self.set_zoom(self.zoom() / 1.25)

    def reset_zoom(self) -> None:
        self.set_zoom(1.0)

    def fit_rect(self, rect: QRectF, max_zoom: float = 1.0, min_zoom: float = MIN_ZOOM) -> None:
        """Show ``rect`` whole, at most at ``max_zoom``; where that would take
        less than ``min_zoom``, show it at ``min_zoom`` from its top left
        (the rest is a scroll away)."""
        if rect.isNull() or rect.isEmpty():
            self.set_zoom(1.0)
            self.centerOn(0, 0)
            return
        rect = rect.adjusted(-40, -40, 40, 40)
        vp = self.viewport().rect()
        scale = min(vp.width() / rect.width(), vp.height() / rect.height())
        zoom = max(min_zoom, min(max_zoom, scale))
        self.set_zoom(zoom)
        if zoom <= scale + 1e-9:
            self.centerOn(rect.center())
            return
        # Too big to show whole at a readable zoom: start at its top left,
        # centred along a side that fits.
        half_w, half_h = vp.width() / 2 / zoom, vp.height() / 2 / zoom
        x = rect.center().x() if rect.width() * zoom <= vp.width() else rect.left() + half_w
        y = rect.center().y() if rect.height() * zoom <= vp.height() else rect.top() + half_h
        self.centerOn(x, y)

    def fit_all(self) -> None:
        """View > Fit to Window (F): the whole flow, however small."""
        self.fit_rect(self.flow_scene.flow_rect())

    def fit_readable(self) -> None:
        """How an opened flow is shown: whole if it fits at a zoom where
        node titles read well (READABLE_ZOOM or more), else at that zoom
        from its top left, to scroll, never shrunk past reading."""
        self.fit_rect(self.flow_scene.flow_rect(), min_zoom=READABLE_ZOOM)

    def center_on_node(self, node_id: str) -> None:
        item = self.flow_scene.item_for_node(node_id)
        if item is not None:
            if self.zoom() < 0.6:
                self.set_zoom(1.0)
            self.centerOn(item.sceneBoundingRect().center())

    def view_center(self) -> QPointF:
        return self.mapToScene(self.viewport().rect().center())

    def cursor_scene_pos(self) -> QPointF | None:
        local = self.viewport().mapFromGlobal(QCursor.pos())
        if self.viewport().rect().contains(local):
            return self.mapToScene(local)
        return None

    def _scale_changed(self) -> None:
        z = self.zoom()
        self.flow_scene.set_overview(z < LOD_OVERVIEW)
        self.zoom_changed.emit(z)

    # -- mouse ----------------------------------------------------------------
    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt override
        delta = event.angleDelta()
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier or delta.x():
            dx = delta.x() or delta.y()
            dy = delta.y() if delta.x() else 0
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - dx)
            if dy:
                self.verticalScrollBar().setValue(self.verticalScrollBar().value() - dy)
            event.accept()
            return
        if delta.y() == 0:
            return
        factor = 1.0015 ** delta.y()
        self.set_zoom(self.zoom() * factor, anchor_under_mouse=True)
        event.accept()

    def _start_pan(self, event) -> None:
        self._pan_from = event.position().toPoint()
        self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
        event.accept()

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.MiddleButton or (
                event.button() == Qt.MouseButton.LeftButton and self._space):
            self._start_pan(event)
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._pan_from is not None:
            pos = event.position().toPoint()
            d = pos - self._pan_from
            self._pan_from = pos
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - d.x())
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - d.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._pan_from is not None:
            self._pan_from = None
            self.viewport().setCursor(Qt.CursorShape.OpenHandCursor if self._space
                                      else Qt.CursorShape.ArrowCursor)
            event.accept()
            return
        super().mouseReleaseEvent(event)

    # -- keys -----------------------------------------------------------------
    def event(self, event) -> bool:
        if event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Tab \
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            self._request_quick_add("")
            return True
        return super().event(event)

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.viewport().setCursor(Qt.CursorShape.OpenHandCursor)
            event.accept()
            return
        scene = self.flow_scene
        if scene.interaction is not None:
            super().keyPressEvent(event)
            return
        if event.key() == Qt.Key.Key_Escape:
            scene.clearSelection()
            event.accept()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            # Enter does what a double-click does: opens a subflow
            # instance's definition, or the properties of any other node.
            ids = scene.selected_node_ids()
            if len(ids) == 1:
                scene.node_activated.emit(ids[0])
                event.accept()
                return
        text = event.text()
        mods = event.modifiers() & ~(Qt.KeyboardModifier.ShiftModifier
                                     | Qt.KeyboardModifier.KeypadModifier)
        if text and text.isprintable() and not text.isspace() and not mods:
            self._request_quick_add(text)
            event.accept()
            return
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = False
            if self._pan_from is None:
                self.viewport().setCursor(Qt.CursorShape.ArrowCursor)
            event.accept()
            return
        super().keyReleaseEvent(event)

    def _request_quick_add(self, text: str) -> None:
        pos = self.cursor_scene_pos()
        if pos is None:
            pos = self.view_center()
        global_pos = self.viewport().mapToGlobal(self.mapFromScene(pos))
        self.quick_add_requested.emit(text, pos, global_pos)

    # -- drops ------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        mime = event.mimeData()
        if mime.hasFormat(NODE_MIME) or flow_file_from_mime(mime):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        mime = event.mimeData()
        if mime.hasFormat(NODE_MIME) or flow_file_from_mime(mime):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragLeaveEvent(self, event) -> None:  # noqa: N802 - Qt override
        event.accept()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        mime = event.mimeData()
        if mime.hasFormat(NODE_MIME):
            type_id = bytes(mime.data(NODE_MIME).data()).decode("utf-8")
            self.node_dropped.emit(type_id, self.mapToScene(event.position().toPoint()))
            event.acceptProposedAction()
            return
        path = flow_file_from_mime(mime)
        if path:
            self.file_dropped.emit(path)
            event.acceptProposedAction()
            return
        event.ignore()

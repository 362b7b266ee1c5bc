"""Timeline: the run as a Gantt chart. One row per node in the order it first
did something; bars where it was busy, LLM turns on agent rows, tool calls
on the tool node's row (coloured by outcome), ticks for debug output and
errors. Painted with QPainter: a run of thousands of calls stays cheap.

A run of a flow with subflow instances groups the rows of the nodes inside
an instance under a row of the instance (its name, bold, and a bar from
the first to the last moment anything inside it was busy); the inner rows
follow it, indented, named without the instance's name."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QMouseEvent, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QScrollArea, QToolTip, QWidget

from .common import color, fmt_duration, fmt_seconds, preview

if TYPE_CHECKING:
    from .context import InspectorContext

GUTTER = 190
HEADER = 28
ROW = 28
BAR = 14
RIGHT = 24
#: The key of an instance's group row in the list of rows.
INSTANCE = "instance:"
INDENT = 14


def grouped_rows(rows: list[str], instance_of) -> list[str]:
    """``rows`` (node ids in the order they first did something) with the
    nodes inside each subflow instance (``instance_of(id)``: its top-level
    instance, or None) moved under a group row of that instance, placed
    where the first of them was."""
    groups: dict[str, list[str]] = {}
    order: list[str] = []
    for r in rows:
        inst = instance_of(r)
        if inst is None:
            order.append(r)
            continue
        if inst not in groups:
            groups[inst] = []
            order.append(INSTANCE + inst)
        groups[inst].append(r)
    if not groups:
        return rows
    out: list[str] = []
    for r in order:
        out.append(r)
        if r.startswith(INSTANCE):
            out += groups[r[len(INSTANCE):]]
    return out


@dataclass
class _Hit:
    rect: QRectF
    node: str
    tip: str


def nice_step(span: float, pixels: float, min_px: float = 90) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) at least min_px apart."""
    if span <= 0 or pixels <= 0:
        return 1.0
    raw = span * min_px / pixels
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


class TimelineCanvas(QWidget):
    node_selected = Signal(str)

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setMouseTracking(True)
        self._hits: list[_Hit] = []
        self._rows: list[str] = []
        self.setMinimumHeight(HEADER + ROW * 3)

    def sizeHint(self) -> QSize:
        return QSize(900, HEADER + ROW * max(3, len(self.rows())) + 8)

    def rows(self) -> list[str]:
        """The rows shown: node ids, and a group row (INSTANCE + id) above
        the nodes inside each subflow instance."""
        rows = self.ctx.model.timeline_rows()
        if self.ctx.run_map is None:
            return rows
        return grouped_rows(rows, self.ctx.instance_of)

    def _group_name(self, instance: str) -> str:
        """An instance's group row: its name and its subflow's ("Express ·
        Shipping"), since a node beside it may share the name."""
        name = self.ctx.name_of(instance)
        run_map = self.ctx.run_map
        inst = run_map.expansion.instances.get(instance) if run_map is not None else None
        if inst is None:
            return name
        return f"{name} · {inst.definition.label or inst.definition.name}"

    def refresh(self) -> None:
        rows = self.rows()
        height = HEADER + ROW * max(3, len(rows)) + 8
        if self.minimumHeight() != height:
            self.setMinimumHeight(height)
        self.update()

    # -- geometry -----------------------------------------------------------
    def _span(self) -> float:
        return max(self.ctx.model.end_t, 0.001)

    def _x(self, t: float) -> float:
        width = max(10.0, self.width() - GUTTER - RIGHT)
        return GUTTER + width * (t / self._span())

    # -- painting -----------------------------------------------------------
    def paintEvent(self, _event: object) -> None:
        model = self.ctx.model
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        base = pal.color(QPalette.ColorRole.Base)
        text = pal.color(QPalette.ColorRole.Text)
        grid = QColor(text)
        grid.setAlpha(28)
        faint = QColor(text)
        faint.setAlpha(140)
        alt = pal.color(QPalette.ColorRole.AlternateBase)
        p.fillRect(self.rect(), base)
        self._hits = []
        rows = self.rows()
        self._rows = rows
        fm = QFontMetrics(self.font())
        bold = self.font()
        bold.setBold(True)
        grouped = [r[len(INSTANCE):] for r in rows if r.startswith(INSTANCE)]

        # rows and labels
        for i, node in enumerate(rows):
            top = HEADER + i * ROW
            if i % 2:
                p.fillRect(QRectF(0, top, self.width(), ROW), alt)
            if node.startswith(INSTANCE):
                p.setFont(bold)
                p.setPen(text)
                label = QFontMetrics(bold).elidedText(
                    "▾ " + self._group_name(node[len(INSTANCE):]), Qt.TextElideMode.ElideRight,
                    GUTTER - 20)
                p.drawText(QRectF(8, top, GUTTER - 12, ROW),
                           Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, label)
                p.setFont(self.font())
                continue
            # A node edited since the run: its row is history, drawn faint.
            p.setPen(faint if self.ctx.stale_reason(node) else text)
            name = self.ctx.name_of(node)
            inset = 12
            if grouped and self.ctx.instance_of(node) is not None:
                inset += INDENT  # under its instance's row, named without it
                name = name.split(" › ", 1)[-1]
            label = fm.elidedText(name, Qt.TextElideMode.ElideRight, GUTTER - 8 - inset)
            p.drawText(QRectF(inset, top, GUTTER - 4 - inset, ROW),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, label)

        # time axis
        span = self._span()
        step = nice_step(span, self.width() - GUTTER - RIGHT)
        p.setPen(faint)
        t = 0.0
        while t <= span + 1e-9:
            x = self._x(t)
            p.setPen(QPen(grid, 1))
            p.drawLine(QPointF(x, HEADER - 4), QPointF(x, self.height()))
            p.setPen(faint)
            p.drawText(QRectF(x - 40, 4, 80, HEADER - 8), Qt.AlignmentFlag.AlignCenter,
                       fmt_seconds(t) if t else "0")
            t += step
        p.setPen(QPen(grid, 1))
        p.drawLine(QPointF(0, HEADER - 1), QPointF(self.width(), HEADER - 1))
        p.drawLine(QPointF(GUTTER - 1, 0), QPointF(GUTTER - 1, self.height()))

        if not rows:
            p.setPen(faint)
            p.drawText(self.rect().adjusted(GUTTER, HEADER, 0, 0), Qt.AlignmentFlag.AlignCenter,
                       "Run the flow to see what each node did, and when.")
            p.end()
            return
        index = {node: i for i, node in enumerate(rows)}

        def bar(node: str, t0: float, t1: float, tint: QColor, tip: str, lane: int = 0,
                lanes: int = 1) -> None:
            i = index.get(node)
            if i is None:
                return
            h = BAR if lanes == 1 else max(4.0, (ROW - 8) / lanes - 1)
            top = HEADER + i * ROW + (ROW - BAR) / 2 if lanes == 1 else \
                HEADER + i * ROW + 4 + lane * (h + 1)
            x0, x1 = self._x(t0), self._x(t1)
            rect = QRectF(x0, top, max(3.0, x1 - x0), h)
            path = QPainterPath()
            path.addRoundedRect(rect, 3, 3)
            p.fillPath(path, tint)
            self._hits.append(_Hit(rect.adjusted(-2, -2, 2, 2), node, tip))

        node_tint = color("node")
        node_tint.setAlpha(110)
        group_tint = color("node")
        group_tint.setAlpha(55)
        for inst in grouped:
            spans = [sp for n, sps in model.node_spans.items()
                     if self.ctx.instance_of(n) == inst for sp in sps]
            if spans:
                t0, t1 = min(a for a, _ in spans), max(b for _, b in spans)
                bar(INSTANCE + inst, t0, t1, group_tint,
                    f"{self.ctx.name_of(inst)}: busy inside {fmt_seconds(t0)} – {fmt_seconds(t1)}")
        for node, spans in model.node_spans.items():
            counts = model.node_stats.get(node, {})
            for t0, t1 in spans:
                bar(node, t0, t1, node_tint,
                    f"{self.ctx.name_of(node)} busy {fmt_seconds(t0)} – {fmt_seconds(t1)}\n"
                    f"{counts.get('in', 0)} in, {counts.get('out', 0)} out")
        end = model.end_t
        for span_ in model.llm_spans:
            t1 = span_.t1 if span_.t1 > span_.t0 else end
            bar(span_.row, span_.t0, t1, color("llm"),
                f"{self.ctx.name_of(span_.row)}: LLM {span_.label}, {fmt_duration((t1 - span_.t0) * 1000)}")

        # tool calls, in lanes where they overlap on one node
        by_node: dict[str, list] = {}
        for call in model.tool_calls.values():
            by_node.setdefault(call.node or call.agent, []).append(call)
        for node, calls in by_node.items():
            lanes_end: list[float] = []
            placed = []
            for call in sorted(calls, key=lambda c: c.t0):
                t1 = call.t1 if call.t1 is not None else end
                lane = next((k for k, e in enumerate(lanes_end) if e <= call.t0), len(lanes_end))
                if lane == len(lanes_end):
                    lanes_end.append(t1)
                else:
                    lanes_end[lane] = t1
                placed.append((call, t1, lane))
            for call, t1, lane in placed:
                result = call.error if call.status in ("error", "refused") else preview(call.data, 80)
                bar(node, call.t0, t1, color(call.status),
                    f"{call.tool} ({call.status}), {fmt_duration(call.ms)}\n"
                    f"args: {preview(call.args, 100)}\n→ {result}\ncaller {call.caller_id}",
                    lane, min(len(lanes_end), 4) if len(lanes_end) > 1 else 1)

        # ticks: arrivals (tracing on), debug output and errors
        hop_pen = QPen(color("node"), 1.5)
        p.setPen(hop_pen)
        for t, node in model.hops:
            i = index.get(node)
            if i is not None:
                x = self._x(t)
                cy = HEADER + i * ROW + ROW / 2
                p.drawLine(QPointF(x, cy - 5), QPointF(x, cy + 5))
        for t, node, kind in model.marks:
            i = index.get(node)
            if i is None:
                continue
            x = self._x(t)
            cy = HEADER + i * ROW + ROW / 2
            if kind == "error":
                tint = color("error")
                path = QPainterPath()
                path.moveTo(x, cy - 6)
                path.lineTo(x + 6, cy)
                path.lineTo(x, cy + 6)
                path.lineTo(x - 6, cy)
                path.closeSubpath()
                p.fillPath(path, tint)
                self._hits.append(_Hit(QRectF(x - 6, cy - 6, 12, 12), node,
                                       f"error at {fmt_seconds(t)}"))
            else:
                p.setPen(QPen(color("debug"), 2))
                p.drawLine(QPointF(x, cy - 8), QPointF(x, cy + 8))
        p.end()

    # -- interaction --------------------------------------------------------
    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        for hit in reversed(self._hits):
            if hit.rect.contains(pos):
                QToolTip.showText(event.globalPosition().toPoint(), hit.tip, self)
                return
        QToolTip.hideText()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        row = int((event.position().y() - HEADER) // ROW)
        if event.position().y() >= HEADER and 0 <= row < len(self._rows):
            node = self._rows[row]
            self.node_selected.emit(node[len(INSTANCE):] if node.startswith(INSTANCE) else node)


class Timeline(QScrollArea):
    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.canvas = TimelineCanvas(ctx)
        self.node_selected = self.canvas.node_selected
        self.setWidget(self.canvas)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)

    def refresh(self) -> None:
        self.canvas.refresh()

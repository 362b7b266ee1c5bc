"""Node and wire items: pictures of the document, nothing more.

A NodeItem draws its ports itself instead of owning a child item per port:
a 2,000-node flow then has 2,000 node items rather than 8,000 items, and
port hit-testing is a few comparisons. Text is laid out once per change
(QStaticText), never per frame, and each item draws less as the view zooms
out (level of detail); far out, the scene draws an overview instead and the
items are not painted at all (see scene.FlowScene.set_overview)."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPen,
    QPolygonF,
    QStaticText,
)
from PySide6.QtWidgets import QGraphicsItem, QStyle, QStyleOptionGraphicsItem

from ..look import icons, theme

# Geometry of a node, in scene units (1:1 = pixels).
NODE_W = 168.0
TOOLS_PORT_INSET = 28.0  # the tools port sits this far from the bottom-right corner
# An agent's hook ports (on_start, on_turn, ...) sit along the bottom edge
# from the left, this far apart, each named in a row of small labels just
# inside the card: a label outside would lie across the wire that leaves
# the port downwards.
HOOK_PORT_X = 20.0
HOOK_PORT_STEP = 29.0
HOOK_PORT_R = 3.5
HOOK_ROW_H = 17.0
HEADER_H = 42.0
ROW_H = 20.0
FOOTER_H = 24.0
RADIUS = 8.0
PORT_R = 5.0
PORT_HIT = 11.0
ICON_BOX = 26.0
# The run line ("LLM turn 1 · 2"): this far from the card's left and bottom
# edge (under an agent, below its port labels), this high; above a card,
# clear of the badges on its top edge.
RUN_LINE_X = 4.0
RUN_LINE_GAP = 3.0
RUN_LINE_GAP_PORTS = 22.0
RUN_LINE_GAP_ABOVE = 8.0
RUN_LINE_H = 16.0
GRID = 20.0
#: Every subflow's colour: its instances' and its inputs' and outputs'.
SUBFLOW_COLOR = "#8d6e63"
# A subflow instance: a second card peeks out behind its top-right corner
# (a stack: there is a flow inside), this far.
STACK_OFFSET = 5.0

# Zoom levels at which a node stops drawing text, and the scene switches to
# its batched overview.
LOD_TEXT = 0.42
LOD_OVERVIEW = 0.2


class Style:
    """QColors and fonts for the current theme, built once per theme change
    so that paint() never parses a colour or builds a font."""

    def __init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        t = theme.current()
        self.t = t
        for attr in t.__dataclass_fields__:
            if attr != "name":
                setattr(self, attr, QColor(getattr(t, attr)))
        self.title_font = theme.ui_font(9.5, QFont.Weight.DemiBold)
        self.sub_font = theme.ui_font(8)
        self.chip_font = theme.ui_font(7.5, QFont.Weight.DemiBold)
        self.port_font = theme.ui_font(7.5)
        self.title_fm = QFontMetricsF(self.title_font)
        self.sub_fm = QFontMetricsF(self.sub_font)
        self.chip_fm = QFontMetricsF(self.chip_font)
        self.port_fm = QFontMetricsF(self.port_font)
        self.white = QColor("#ffffff")


_style: Style | None = None


def style() -> Style:
    global _style
    if _style is None:
        _style = Style()
    return _style


def refresh_style() -> None:
    style().refresh()


def snap(v: float, grid: float = GRID) -> float:
    return round(v / grid) * grid


@dataclass
class PortInfo:
    name: str
    label: str
    kind: str  # in | out | tools | hook
    pos: QPointF  # local coordinates


@dataclass
class NodeLook:
    """Everything a node draws, derived from the document in one place."""

    title: str
    subtitle: str
    color: str
    icon: str
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    tools_port: str | None
    tool_name: str | None
    ai_count: int
    errors: list[str]
    warnings: list[str]
    disabled: bool
    tooltip: str
    #: An agent's lifecycle hook ports: (name, label), drawn along the bottom.
    hooks: list[tuple[str, str]] = field(default_factory=list)
    #: The node holds pinned data (runtime.pins): a badge on its top edge.
    pinned: bool = False
    #: An instance of a subflow: drawn as a small stack of cards.
    subflow: bool = False
    #: The library's newer version of the subflow it pins ("1.1.0"): a badge.
    newer: str | None = None


def look_for(doc, node_id: str) -> NodeLook:
    """Read the node's spec and settings from the document."""
    from runtime.flow import tool_name as flow_tool_name
    from runtime.spec import Scope

    fnode = doc.node(node_id)
    spec = doc.spec(node_id)
    problems = doc.problems_for(node_id)
    errors = [p.message for p in problems if p.severity == "error"]
    warnings = [p.message for p in problems if p.severity == "warning"]
    if spec is None:
        return NodeLook(fnode.name or fnode.id, fnode.type, "#888888", "generic",
                        [("in", "in")], [("out", "out")], None, None, 0,
                        errors or [f"unknown node type '{fnode.type}'"], warnings,
                        fnode.disabled, fnode.type)
    outs = doc.output_ports(node_id)
    kinds = {p.name: p for p in spec.outputs}
    regular = [(n, (kinds[n].label if n in kinds and kinds[n].label else n)) for n in outs
               if n not in kinds or kinds[n].kind not in ("tools", "hook")]
    tools = next((n for n in outs if n in kinds and kinds[n].kind == "tools"), None)
    hooks = [(n, kinds[n].label or n) for n in outs if n in kinds and kinds[n].kind == "hook"]
    ai_count = 0
    for p in spec.params:
        setting = fnode.params.get(p.name)
        scope = setting.scope if setting else p.default_scope
        if scope == Scope.AI:
            ai_count += 1
    summary = " ".join(spec.description.split("\n\n")[0].split())
    tip = f"<b>{spec.name}</b> <span style='opacity:.7'>{spec.type}</span>"
    if summary:
        tip += f"<br>{summary}"
    if hooks:
        tip += ("<br>Hooks along the bottom (start, turn, tool, end): wire a flow there to "
                "log, check or veto what the agent does.")
    if fnode.pin is not None:
        tip += ("<br><b>Pinned:</b> its output is fixed; it does not run while Run &gt; "
                "Use Pinned Data is on.")
    subtitle = spec.name if fnode.name and fnode.name != spec.name else spec.category
    instance = spec.type.startswith("subflow:")
    newer = None
    if instance:
        newer = doc.newer_version(node_id) if hasattr(doc, "newer_version") else None
        # The stacked card says "subflow"; the line under the title says
        # which one (when renamed) and the version it pins.
        version = f" v{fnode.subflow.version}" if fnode.subflow else ""
        subtitle = (spec.name + version if fnode.name and fnode.name != spec.name
                    else "Subflow" + version)
        tip += ("<br>A subflow: its inputs and outputs are its ports"
                + (f"; pins version {fnode.subflow.version} of the library's"
                   if fnode.subflow else "; defined in this flow") + ".")
        if newer:
            tip += (f"<br><b>Version {newer} is in the library.</b> Properties &gt; "
                    "Update brings this instance to it.")
    return NodeLook(
        title=fnode.name or spec.name,
        subtitle=subtitle,
        color=spec.color or (SUBFLOW_COLOR if instance else "#7a869a"),
        icon=spec.icon or "generic",
        inputs=[(p.name, p.label or p.name) for p in spec.inputs],
        outputs=regular,
        tools_port=tools,
        tool_name=flow_tool_name(spec, fnode) if spec.tool else None,
        ai_count=ai_count,
        errors=errors,
        warnings=warnings,
        disabled=fnode.disabled,
        tooltip=tip,
        hooks=hooks,
        pinned=fnode.pin is not None,
        subflow=instance,
        newer=newer,
    )


RUN_COLORS = {"running": "running", "done": "done", "error": "error", "warning": "warning"}


class NodeItem(QGraphicsItem):
    """One flow node. ``node_id`` is the only link to the model."""

    Type = QGraphicsItem.UserType + 1

    def __init__(self, node_id: str, look: NodeLook) -> None:
        super().__init__()
        self.node_id = node_id
        # No ItemSendsGeometryChanges/itemChange: a Python itemChange is
        # called a dozen times per item while a big flow opens. Whoever moves
        # a node calls move_to(), which drags its wires along.
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setAcceptHoverEvents(True)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.wires: list[QGraphicsItem] = []  # its WireItems (canvas.wires)
        self._hover = False
        self._hover_port: str | None = None
        self._mark: tuple[str, bool, bool] | None = None  # (port, is_input, ok) while wiring
        self.run_state = "idle"
        self.run_count = 0
        self.run_text = ""
        self.run_stale = False  # the badge is from before an edit of this node
        # More about the run state, for the tooltip (rich text): a subflow
        # instance lists the nodes inside it that ran.
        self.run_detail = ""
        self._line_above = False  # where the run line is (place_run_line)
        self.set_look(look)

    def type(self) -> int:
        return self.Type

    # -- model -> picture ---------------------------------------------------
    def set_look(self, look: NodeLook) -> None:
        self.prepareGeometryChange()
        self.look = look
        s = style()
        rows = max(len(look.inputs), len(look.outputs))
        self._body_rows = rows if rows > 1 else 0
        h = HEADER_H + (self._body_rows * ROW_H + 6 if self._body_rows else 0)
        self._chips = []
        if look.tool_name or look.ai_count:
            h += FOOTER_H
        self._footer_bottom = h
        if look.hooks:
            h += HOOK_ROW_H
        self.height = h
        self.ports: list[PortInfo] = []
        for i, (name, label) in enumerate(look.inputs):
            self.ports.append(PortInfo(name, label, "in", QPointF(0, self._row_y(i, len(look.inputs)))))
        for i, (name, label) in enumerate(look.outputs):
            self.ports.append(PortInfo(name, label, "out",
                                       QPointF(NODE_W, self._row_y(i, len(look.outputs)))))
        if look.tools_port:
            # Bottom-right: tool nodes usually sit below and to the right, so
            # tools wires leave clear of the run-state line on the left.
            self.ports.append(PortInfo(look.tools_port, "tools", "tools",
                                       QPointF(NODE_W - TOOLS_PORT_INSET, h)))
        for i, (name, label) in enumerate(look.hooks):
            # Bottom-left, clear of the tools port and its label.
            self.ports.append(PortInfo(name, label, "hook",
                                       QPointF(HOOK_PORT_X + i * HOOK_PORT_STEP, h)))
        # What a click hits: the card and a generous disc around every port.
        shape = QPainterPath()
        shape.addRoundedRect(QRectF(0, 0, NODE_W, h), RADIUS, RADIUS)
        for p in self.ports:
            shape.addEllipse(p.pos, PORT_HIT, PORT_HIT)
        shape.setFillRule(Qt.FillRule.WindingFill)
        self._shape = shape
        text_x = 12 + ICON_BOX + 10
        width = NODE_W - text_x - 12
        self._title = QStaticText(s.title_fm.elidedText(look.title, Qt.TextElideMode.ElideRight, width))
        self._title.setTextFormat(Qt.TextFormat.PlainText)
        self._sub = QStaticText(s.sub_fm.elidedText(look.subtitle, Qt.TextElideMode.ElideRight, width))
        self._sub.setTextFormat(Qt.TextFormat.PlainText)
        self._port_labels = [(p, QStaticText(p.label)) for p in self.ports
                             if p.kind == "out" and self._body_rows and len(look.outputs) > 1]
        # Footer chips: what makes this node special for agents.
        x = 10.0
        if look.tool_name:
            # A long tool name is cut with "…" inside its chip, never past the card.
            name = s.chip_fm.elidedText(look.tool_name, Qt.TextElideMode.ElideRight,
                                        NODE_W - 20 - 28)
            text = QStaticText(name)
            text.setTextFormat(Qt.TextFormat.PlainText)
            w = s.chip_fm.horizontalAdvance(name) + 28
            self._chips.append(("tool", QRectF(x, self._footer_bottom - FOOTER_H + 4, w, 16),
                                text))
            x += w + 6
        if look.ai_count:
            label = f"AI {look.ai_count}"
            w = s.chip_fm.horizontalAdvance(label) + 14
            self._chips.append(("ai", QRectF(x, self._footer_bottom - FOOTER_H + 4, w, 16),
                                QStaticText(label)))
        tip = look.tooltip
        if look.tool_name:
            tip += f"<br>Tool <b>{look.tool_name}</b>: wire it to an agent's tools port."
        if look.ai_count:
            tip += f"<br>{look.ai_count} parameter{'s' * (look.ai_count != 1)} filled by the AI."
        for e in look.errors:
            tip += f"<br><span style='color:{s.t.error}'>● {e}</span>"
        for w in look.warnings:
            tip += f"<br><span style='color:{s.t.warning}'>▲ {w}</span>"
        self._tip = tip
        self._update_tooltip()
        self.place_run_line()  # the card's height may have changed
        self.update()

    def _update_tooltip(self) -> None:
        tip = self._tip
        if self.run_detail and self.run_state != "idle":
            tip += f"<br><span style='opacity:.8'>{self.run_detail}</span>"
        if self.run_stale and self.run_state != "idle":
            tip += ("<br><span style='opacity:.7'>The grey run state is from before you "
                    "edited this node. Run again to refresh it.</span>")
        self.setToolTip(tip)

    def _row_y(self, i: int, n: int) -> float:
        if not self._body_rows:
            return HEADER_H / 2
        if n == 1:
            return HEADER_H + (self._body_rows * ROW_H + 6) / 2
        return HEADER_H + 3 + i * ROW_H + ROW_H / 2

    def port(self, name: str, kind: str | None = None) -> PortInfo | None:
        for p in self.ports:
            if p.name == name and (kind is None or (p.kind == "in") == (kind == "in")):
                return p
        return None

    def port_scene_pos(self, name: str, kind: str) -> QPointF:
        p = self.port(name, kind)
        if p is None:
            local = QPointF(0 if kind == "in" else NODE_W, HEADER_H / 2)
        else:
            local = p.pos
        return self.mapToScene(local)

    def port_at(self, local: QPointF) -> PortInfo | None:
        best, best_d = None, PORT_HIT
        for p in self.ports:
            d = QLineF(p.pos, local).length()
            if d <= best_d:
                best, best_d = p, d
        return best

    def set_mark(self, port: str | None, is_input: bool = True, ok: bool = True) -> None:
        """Highlight a port as a wiring target (green) or a refused one (red)."""
        mark = (port, is_input, ok) if port else None
        if mark != self._mark:
            self._mark = mark
            self.update()

    def set_run_state(self, state: str, count: int = 0, text: str = "") -> None:
        if (state, count, text) == (self.run_state, self.run_count, self.run_text):
            return
        self.prepareGeometryChange()
        self.run_state, self.run_count, self.run_text = state, count, text
        if state == "idle":
            self.run_detail = ""
        self.place_run_line()
        self._update_tooltip()
        self.update()

    def set_run_detail(self, detail: str) -> None:
        if detail != self.run_detail:
            self.run_detail = detail
            self._update_tooltip()

    def set_run_stale(self, stale: bool) -> None:
        """The node was edited since the run its badge is from: grey it."""
        if stale != self.run_stale:
            self.run_stale = stale
            self._update_tooltip()
            self.update()

    def run_state_text(self) -> str:
        """The line under the node, as drawn (before eliding)."""
        parts = [self.run_text or self.run_state]
        if self.run_count:
            parts.append(str(self.run_count))
        text = " · ".join(parts)
        return f"before edit: {text}" if self.run_stale else text

    def run_line_above(self) -> bool:
        return self._line_above

    def run_line_rect(self) -> QRectF:
        """The run line (dot and text) as drawn, in item coordinates."""
        return self._run_line_at(self._line_above)

    def _run_line_at(self, above: bool) -> QRectF:
        s = style()
        width = min(NODE_W - RUN_LINE_X, 13 + s.sub_fm.horizontalAdvance(self.run_state_text()))
        if above:
            y = -RUN_LINE_GAP_ABOVE - RUN_LINE_H
        else:
            y = self.height + (RUN_LINE_GAP_PORTS if self.look.tools_port else RUN_LINE_GAP)
        return QRectF(RUN_LINE_X, y, width, RUN_LINE_H)

    def place_run_line(self) -> None:
        """Put the run line where none of the node's wires crosses it:
        under the card, as in Node-RED, or above it. An agent tries above
        first: its tools and hook wires leave its bottom edge downwards.
        Where both are crossed it keeps its first place, and its backdrop
        keeps the text readable over the wire."""
        if self.run_state == "idle":
            return
        first = bool(self.look.tools_port or self.look.hooks)
        above = first
        for candidate in (first, not first):
            rect = self.mapRectToScene(self._run_line_at(candidate))
            if not any(w.crosses(rect) for w in self.wires):
                above = candidate
                break
        if above != self._line_above:
            self.prepareGeometryChange()
            self._line_above = above
            self.update()

    # -- QGraphicsItem ------------------------------------------------------
    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        top = PORT_HIT + 1
        bottom = 22 if self.look.tools_port else 0  # the tools port's label
        if self.run_state != "idle":
            line = self.run_line_rect()
            top = max(top, -line.top() + 1)
            bottom = max(bottom, line.bottom() + 1 - self.height - PORT_HIT)
        return QRectF(-PORT_HIT - 1, -top, NODE_W + 2 * PORT_HIT + 2,
                      self.height + top + PORT_HIT + 1 + bottom)

    def shape(self) -> QPainterPath:
        return self._shape

    def move_to(self, pos: QPointF) -> None:
        if pos != self.pos():
            self.setPos(pos)
            for w in self.wires:
                w.update_path()
            self.place_run_line()

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._hover = True
        self.update()

    def hoverMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = self.port_at(event.pos())
        name = p.name if p else None
        if name != self._hover_port:
            self._hover_port = name
            self.update()

    def hoverLeaveEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._hover = False
        self._hover_port = None
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        s = style()
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        look = self.look
        card = QRectF(0, 0, NODE_W, self.height)
        accent = QColor(look.color)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        if look.disabled:
            painter.setOpacity(0.5)

        if lod < LOD_TEXT:
            # Simplified: a card, its colour and its ports; no text.
            if look.subflow:
                self._paint_stack(painter, s)
            painter.setPen(QPen(s.accent, 3) if selected else QPen(s.node_border, 1.5))
            painter.setBrush(s.node)
            painter.drawRoundedRect(card, RADIUS, RADIUS)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(accent)
            painter.drawRoundedRect(QRectF(12, 8, ICON_BOX, ICON_BOX), 6, 6)
            self._paint_ports(painter, s, simple=True)
            self._paint_badges(painter, s, simple=True)
            return

        if look.subflow:
            self._paint_stack(painter, s)
        # Shadow, card, border.
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(s.node_shadow)
        painter.drawRoundedRect(card.translated(0, 2), RADIUS, RADIUS)
        painter.setBrush(s.node)
        if self.run_state in RUN_COLORS and not self.run_stale:
            border = QPen(getattr(s, RUN_COLORS[self.run_state]), 2)
        elif selected:
            border = QPen(s.accent, 2)
        elif self._hover:
            border = QPen(s.wire_hover, 1.2)
        else:
            border = QPen(s.node_border, 1)
        if look.disabled:
            border.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(border)
        painter.drawRoundedRect(card, RADIUS, RADIUS)
        if selected:
            halo = QColor(s.accent)
            halo.setAlpha(50)
            painter.setPen(QPen(halo, 4))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(card.adjusted(-3, -3, 3, 3), RADIUS + 3, RADIUS + 3)

        # Category colour: the icon's tile.
        tile = QRectF(12, (HEADER_H - ICON_BOX) / 2, ICON_BOX, ICON_BOX)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(accent)
        painter.drawRoundedRect(tile, 6, 6)
        dpr = painter.device().devicePixelRatioF() if painter.device() else 1.0
        scale = max(1.0, lod) * dpr
        size = 16
        img = icons.image(look.icon, "#ffffff", max(8, round(size * scale)))
        painter.drawImage(QRectF(tile.x() + 5, tile.y() + 5, size, size), img)

        # Title and subtitle.
        text_x = tile.right() + 10
        painter.setPen(s.text)
        painter.setFont(s.title_font)
        painter.drawStaticText(QPointF(text_x, 6), self._title)
        painter.setPen(s.muted)
        painter.setFont(s.sub_font)
        painter.drawStaticText(QPointF(text_x, 23), self._sub)

        if self._body_rows:
            painter.setPen(QPen(s.node_border, 1))
            painter.drawLine(QPointF(1, HEADER_H), QPointF(NODE_W - 1, HEADER_H))
            painter.setFont(s.port_font)
            painter.setPen(s.muted)
            for p, text in self._port_labels:
                w = s.port_fm.horizontalAdvance(p.label)
                painter.drawStaticText(QPointF(NODE_W - 12 - w, p.pos.y() - 7), text)

        if look.hooks:
            painter.setPen(QPen(s.node_border, 1))
            y = self._footer_bottom
            painter.drawLine(QPointF(1, y), QPointF(NODE_W - 1, y))
        if self._chips:
            y = self._footer_bottom - FOOTER_H
            painter.setPen(QPen(s.node_border, 1))
            painter.drawLine(QPointF(1, y), QPointF(NODE_W - 1, y))
            painter.setFont(s.chip_font)
            for kind, rect, text in self._chips:
                # The tool chip is a tint of the tools colour; the AI chip is
                # solid, in the colour the properties panel gives AI scope.
                color = s.tools if kind == "tool" else s.ai
                fill = QColor(color)
                if kind == "tool":
                    fill.setAlpha(38 if not s.t.dark else 60)
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(fill)
                painter.drawRoundedRect(rect, 8, 8)
                painter.setPen(color if kind == "tool" else (s.canvas if s.t.dark else s.white))
                if kind == "tool":
                    img = icons.image("wrench", color.name(), max(8, round(11 * scale)))
                    painter.drawImage(QRectF(rect.x() + 6, rect.y() + 2.5, 11, 11), img)
                    painter.drawStaticText(QPointF(rect.x() + 20, rect.y() + 1.5), text)
                else:
                    painter.drawStaticText(QPointF(rect.x() + 7, rect.y() + 1.5), text)

        self._paint_ports(painter, s, simple=False)
        self._paint_badges(painter, s, simple=False)
        if self.run_state != "idle":
            self._paint_run_state(painter, s)

    def _paint_ports(self, painter: QPainter, s: Style, simple: bool) -> None:
        for p in self.ports:
            if p.kind == "hook":
                self._paint_hook_port(painter, s, p, simple)
                continue
            color = s.tools if p.kind == "tools" else s.wire
            fill = s.node
            radius = PORT_R
            if self._mark and self._mark[0] == p.name and (p.kind == "in") == self._mark[1]:
                color = s.done if self._mark[2] else s.refused
                fill = color
                radius = PORT_R + 2
            elif self._hover_port == p.name and not simple:
                color = s.accent if p.kind != "tools" else s.tools
                fill = color
                radius = PORT_R + 1
            painter.setPen(QPen(color, 2))
            painter.setBrush(fill)
            if p.kind == "tools":
                r = radius + 1.5
                x, y = p.pos.x(), p.pos.y()
                painter.drawPolygon(QPolygonF([QPointF(x, y - r), QPointF(x + r, y),
                                               QPointF(x, y + r), QPointF(x - r, y)]))
                if not simple:
                    painter.setFont(s.port_font)
                    painter.setPen(s.tools)
                    label_w = s.port_fm.horizontalAdvance("tools")
                    painter.drawText(QPointF(x - r - 5 - label_w, y + 14), "tools")
            else:
                painter.drawEllipse(p.pos, radius, radius)

    def _paint_hook_port(self, painter: QPainter, s: Style, p: PortInfo, simple: bool) -> None:
        """A hook port: smaller than a data port, filled when wired, its
        short name just above it inside the card."""
        wired = any(w.source is self and w.sport == p.name for w in self.wires)
        color, fill, radius = s.muted, s.muted if wired else s.node, HOOK_PORT_R
        if self._mark and self._mark[0] == p.name and not self._mark[1]:
            color = fill = s.done if self._mark[2] else s.refused
            radius += 2
        elif self._hover_port == p.name and not simple:
            color = fill = s.accent
            radius += 1
        painter.setPen(QPen(color, 1.5))
        painter.setBrush(fill)
        painter.drawEllipse(p.pos, radius, radius)
        if not simple:
            painter.setFont(s.port_font)
            painter.setPen(s.accent if self._hover_port == p.name
                           else s.text if wired else s.muted)
            w = s.port_fm.horizontalAdvance(p.label)
            painter.drawText(QPointF(p.pos.x() - w / 2, p.pos.y() - 6), p.label)

    def _paint_stack(self, painter: QPainter, s: Style) -> None:
        """The card behind a subflow instance's card, up and to the right."""
        behind = QRectF(STACK_OFFSET, -STACK_OFFSET, NODE_W, self.height)
        edge = QColor(SUBFLOW_COLOR)
        edge.setAlpha(150)
        painter.setPen(QPen(edge, 1.2))
        painter.setBrush(s.node)
        painter.drawRoundedRect(behind, RADIUS, RADIUS)

    def newer_badge_text(self) -> str:
        """The newer-version badge's text ("" without one): short when the
        pinned badge shares the top edge."""
        newer = self.look.newer
        if not newer:
            return ""
        return f"↑ v{newer}" if self.look.pinned else f"v{newer} available"

    def newer_badge_rect(self) -> QRectF:
        s = style()
        return QRectF(10, -8, s.chip_fm.horizontalAdvance(self.newer_badge_text()) + 14, 16)

    def _paint_newer(self, painter: QPainter, s: Style, simple: bool) -> None:
        """The library has a newer version: a pill at the top-left edge."""
        rect = self.newer_badge_rect() if not simple else QRectF(10, -8, 16, 16)
        painter.setPen(QPen(s.node, 2))
        painter.setBrush(s.accent)
        painter.drawRoundedRect(rect, 8, 8)
        if simple:
            return
        painter.setFont(s.chip_font)
        painter.setPen(s.white)
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), self.newer_badge_text())

    def _paint_badges(self, painter: QPainter, s: Style, simple: bool) -> None:
        look = self.look
        if look.newer:
            self._paint_newer(painter, s, simple)
        if look.pinned:
            self._paint_pin(painter, s, simple)
        if not (look.errors or look.warnings):
            return
        color = s.error if look.errors else s.warning
        center = QPointF(NODE_W - 2, 0)
        painter.setPen(QPen(s.node, 2))
        painter.setBrush(color)
        painter.drawEllipse(center, 8, 8)
        if not simple:
            painter.setPen(QPen(s.white, 2, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            painter.drawLine(QPointF(center.x(), center.y() - 4), QPointF(center.x(), center.y() + 1))
            painter.drawPoint(QPointF(center.x(), center.y() + 4))

    def _paint_pin(self, painter: QPainter, s: Style, simple: bool) -> None:
        """A pinned node's badge: a "pinned" pill on the top edge, left of
        where a problem badge goes, in the colour pinned data has everywhere."""
        color = QColor(theme.PINNED["dark" if s.t.dark else "light"])
        w = 16.0 if simple else s.chip_fm.horizontalAdvance("pinned") + 27
        rect = QRectF(NODE_W - 18 - w, -8, w, 16)
        painter.setPen(QPen(s.node, 2))
        painter.setBrush(color)
        painter.drawRoundedRect(rect, 8, 8)
        if simple:
            return
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        dpr = painter.device().devicePixelRatioF() if painter.device() else 1.0
        img = icons.image("pin", "#ffffff", max(8, round(11 * max(1.0, lod) * dpr)))
        painter.drawImage(QRectF(rect.x() + 6, rect.y() + 2.5, 11, 11), img)
        painter.setFont(s.chip_font)
        painter.setPen(s.white)
        painter.drawText(QRectF(rect.x() + 19, rect.y(), w - 21, 16),
                         int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), "pinned")

    def _paint_run_state(self, painter: QPainter, s: Style) -> None:
        color = getattr(s, RUN_COLORS.get(self.run_state, "muted"), s.muted)
        line = self.run_line_rect()
        y = line.center().y()
        x = line.x()
        # A backdrop of the canvas's colour: a wire passing by goes behind
        # the text, never through it.
        painter.setPen(Qt.PenStyle.NoPen)
        backdrop = QColor(s.canvas)
        backdrop.setAlpha(225)
        painter.setBrush(backdrop)
        painter.drawRoundedRect(line.adjusted(-2, 0, 3, 0), 6, 6)
        if self.run_stale:
            # From before an edit: a hollow grey dot and faded text.
            painter.setOpacity(painter.opacity() * 0.75)
            painter.setPen(QPen(s.muted, 1.5))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(QPointF(x + 4, y), 3.5, 3.5)
        else:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            painter.drawEllipse(QPointF(x + 4, y), 4, 4)
        painter.setPen(s.muted)
        painter.setFont(s.sub_font)
        text = s.sub_fm.elidedText(self.run_state_text(), Qt.TextElideMode.ElideRight,
                                   line.width() - 13)
        painter.drawText(QPointF(x + 13, y + 4), text)

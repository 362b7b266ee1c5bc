"""Tools: every tool call of every agent, with the arguments exactly as the
LLM sent them and what came back. This is the view people miss most in
other tools: what did the agent ask, and what did it get."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from .common import (
    JsonTree,
    call_tree_columns,
    color,
    fmt_duration,
    grey_rows,
    hint_or,
    mono_font,
    preview,
    rerun_call_menu,
    step_text,
    tree_with_detail,
)
from .model import StepRecord, ToolCallRecord

if TYPE_CHECKING:
    from .context import InspectorContext

CALL_ROLE = Qt.ItemDataRole.UserRole + 20
AGENT_ROLE = Qt.ItemDataRole.UserRole + 21
STEP_ROLE = Qt.ItemDataRole.UserRole + 22
#: The Tool column's width once a subflow call's nodes are listed under it.
STEP_TOOL_WIDTH = 180
COLUMNS = ["Tool", "Arguments from the LLM", "Result", "Duration", "Caller id"]

STATUS_TEXT = {"success": "✓ success", "error": "✕ error", "refused": "⊘ refused",
               "running": "… running", "cancelled": "■ cancelled"}


def status_text(phase: str, progress: float | None = None, text: str = "") -> str:
    """A running call's live status, as the badge and the Result column
    show it: "page 2 of 5 (40%)", "waiting for approval", "in background"."""
    if phase == "progress":
        pct = f"{progress:.0%}" if progress is not None else ""
        if text and pct:
            return f"{text} ({pct})"
        return text or pct
    return {"queued": "queued", "waiting_approval": "waiting for approval",
            "running": "in background"}.get(phase, phase)


def result_text(call: ToolCallRecord) -> str:
    if call.status == "success":
        return "✓ " + preview(call.data, 120)
    if call.status in ("error", "refused"):
        return STATUS_TEXT[call.status] + ": " + (call.error or call.status)
    return STATUS_TEXT.get(call.status, call.status)


class ToolsTab(QWidget):
    node_selected = Signal(str)
    rerun_call_requested = Signal(str)  # caller id: the call's "Re-run This Call…"

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._call_items: dict[str, QTreeWidgetItem] = {}
        self._agent_items: dict[str, QTreeWidgetItem] = {}
        #: (caller id, inner node path) -> the row of a node inside a
        #: subflow tool's call.
        self._step_items: dict[tuple[str, str], QTreeWidgetItem] = {}
        #: Caller id -> the latest tool.status text of a call still going.
        self._live: dict[str, str] = {}
        self._mono = mono_font()

        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        # Arguments and result share what the tool name, duration and id
        # leave, so no column hides past a scroll bar beside the canvas.
        call_tree_columns(self.tree, 130)
        self.tree.currentItemChanged.connect(self._current_changed)
        self.tree.itemClicked.connect(self._clicked)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)

        self.detail = JsonTree()
        split, self.detail_title = tree_with_detail(self.tree, self.detail, (660, 440), (3, 2))
        self.empty, self.stack = hint_or(
            self, "No tool calls yet. Wire a node to an agent's tools port and run the flow: "
                  "each call the LLM makes is listed here with its arguments and result.", split)

    def reset(self) -> None:
        self.tree.clear()
        self.detail.clear()
        self.detail_title.clear()
        self._call_items.clear()
        self._agent_items.clear()
        self._step_items.clear()
        self._live.clear()
        self.stack.setCurrentIndex(0)

    def show_status(self, e: object) -> None:
        """A tool.status event: the call's line says what it is doing while
        it runs ("… page 2 of 5 (40%)"); its result replaces that."""
        phase = getattr(e, "phase", "")
        caller_id = getattr(e, "caller_id", "")
        if phase in ("succeeded", "failed", "cancelled"):
            self._live.pop(caller_id, None)
            return
        if phase == "running" and not getattr(e, "tracking_id", ""):
            if caller_id not in self._live:
                return  # plainly running: "… running" says it
        self._live[caller_id] = status_text(phase, getattr(e, "progress", None),
                                            getattr(e, "text", ""))
        item = self._call_items.get(caller_id)
        if item is not None:
            self._fill(item, item.data(0, CALL_ROLE))

    def live_status(self, caller_id: str) -> str:
        return self._live.get(caller_id, "")

    def refresh(self) -> None:
        for call in self.ctx.model.tool_calls.values():
            item = self._call_items.get(call.caller_id)
            if item is None:
                item = QTreeWidgetItem(self._holder(call))
                item.setData(0, CALL_ROLE, call)
                self._call_items[call.caller_id] = item
                item.setFont(1, self._mono)
                item.setFont(4, self._mono)
            self._fill(item, call)
            if call.steps:
                self._fill_steps(item, call)
        for agent, item in self._agent_items.items():
            calls = [c for c in self.ctx.model.tool_calls.values() if c.agent == agent]
            failed = sum(1 for c in calls if c.status in ("error", "refused"))
            item.setText(1, f"{len(calls)} call{'s' if len(calls) != 1 else ''}"
                         + (f", {failed} failed" if failed else ""))
        if self._call_items:
            self.stack.setCurrentIndex(1)
            if self.tree.currentItem() is None:
                self.tree.setCurrentItem(next(iter(self._call_items.values())))
        current = self.tree.currentItem()
        if current is not None and current.data(0, CALL_ROLE) is not None:
            self._current_changed(current)

    def restyle(self) -> None:
        """The flow was edited: grey the calls of tools and agents that
        changed since the run."""
        for item in self._call_items.values():
            self._fill(item, item.data(0, CALL_ROLE))
        for agent, item in self._agent_items.items():
            note = self.ctx.stale_note(agent)
            grey_rows(item, 1, bool(note))
            item.setText(0, self.ctx.name_of(agent))
            item.setToolTip(0, note or agent)

    def _holder(self, call: ToolCallRecord) -> QTreeWidgetItem:
        """Where a call's row goes: under the subflow tool call it was made
        inside (an agent in the subflow made it), else under its agent."""
        outer = self.ctx.model.tool_calls.get(call.parent) if call.parent else None
        if outer is not None and outer.steps and outer.caller_id in self._call_items:
            holder = self._call_items[outer.caller_id]
            holder.setExpanded(True)
            return holder
        return self._agent_item(call.agent)

    def _fill_steps(self, item: QTreeWidgetItem, call: ToolCallRecord) -> None:
        """A row per node inside a subflow tool's call, under the call."""
        for step in call.steps.values():
            key = (call.caller_id, step.node)
            row = self._step_items.get(key)
            if row is None:
                row = self._step_items[key] = QTreeWidgetItem(item)
                row.setData(0, STEP_ROLE, step)
                row.setFont(1, self._mono)
                row.setForeground(1, QBrush(color("muted")))
                item.setExpanded(True)
                if self.tree.columnWidth(0) < STEP_TOOL_WIDTH:
                    # Two levels in, a node's name needs more than a tool's.
                    self.tree.setColumnWidth(0, STEP_TOOL_WIDTH)
            row.setText(0, f"↳ {step.name}")
            row.setToolTip(0, f"node inside the subflow: {step.node}")
            row.setText(1, step.node)
            text = step_text(step)
            row.setText(2, text)
            row.setToolTip(2, text)
            tint = {"error": "error", "running": "running", "cancelled": "cancelled"}.get(
                step.status)
            if tint:
                row.setForeground(2, QBrush(color(tint)))
            else:
                row.setData(2, Qt.ItemDataRole.ForegroundRole, None)
            row.setText(3, fmt_duration(step.ms) if step.runs else "…")

    def _agent_item(self, agent: str) -> QTreeWidgetItem:
        item = self._agent_items.get(agent)
        if item is None:
            item = QTreeWidgetItem(self.tree)
            item.setText(0, self.ctx.name_of(agent))
            item.setToolTip(0, agent)
            item.setData(0, AGENT_ROLE, agent)
            font = item.font(0)
            font.setBold(True)
            item.setFont(0, font)
            item.setFirstColumnSpanned(False)
            item.setForeground(1, QBrush(color("muted")))
            item.setExpanded(True)
            self._agent_items[agent] = item
        return item

    def _fill(self, item: QTreeWidgetItem, call: ToolCallRecord) -> None:
        note = self.ctx.stale_note(call.node) or self.ctx.stale_note(call.agent)
        item.setText(0, call.tool)
        tip = f"node: {self.ctx.name_of(call.node)}" if call.node else ""
        item.setToolTip(0, "\n".join(t for t in (tip, note) if t))
        item.setText(1, preview(call.args, 200))
        item.setToolTip(1, preview(call.args, 2000))
        live = self._live.get(call.caller_id) if call.status == "running" else None
        item.setText(2, f"… {live}" if live else result_text(call))
        item.setToolTip(2, STATUS_TEXT.get(call.status, call.status))
        if call.status == "success":
            item.setData(2, Qt.ItemDataRole.ForegroundRole, None)
        else:
            item.setForeground(2, QBrush(color(call.status)))
        item.setText(3, fmt_duration(call.ms) if call.t1 is not None else "…")
        item.setText(4, call.caller_id)
        if note:
            grey_rows(item, len(COLUMNS), True)
        elif item.font(0).italic():
            grey_rows(item, len(COLUMNS), False)
            self._fill(item, call)  # the result's colour again

    def _current_changed(self, item: QTreeWidgetItem | None, _prev: object = None) -> None:
        step: StepRecord | None = item.data(0, STEP_ROLE) if item is not None else None
        if step is not None:
            self.detail_title.setText(f"{step.name}  ·  {step_text(step)}")
            self.detail.set_roots([("node", {
                "path": step.node, "name": step.name, "runs": step.runs,
                "failed": step.errors, "ms": round(step.ms, 3),
                **({"error": step.text} if step.text else {})})])
            return
        call: ToolCallRecord | None = item.data(0, CALL_ROLE) if item is not None else None
        if call is None:
            return
        self.detail_title.setText(f"{call.tool}  ·  {STATUS_TEXT.get(call.status, call.status)}"
                                  f"  ·  {fmt_duration(call.ms)}")
        roots: list[tuple[str, object]] = [("arguments", call.args)]
        if call.status == "success":
            roots.append(("result", call.data))
        elif call.status in ("error", "refused"):
            roots.append((call.status, call.error))
        roots.append(("call", {"caller_id": call.caller_id, "agent": call.agent,
                               "node": call.node, "status": call.status}))
        self.detail.set_roots(roots)

    def _clicked(self, item: QTreeWidgetItem) -> None:
        call: ToolCallRecord | None = item.data(0, CALL_ROLE)
        if call is not None:
            self.node_selected.emit(call.node or call.agent)
        elif item.data(0, STEP_ROLE) is not None:
            self.node_selected.emit(item.data(0, STEP_ROLE).node)
        elif item.data(0, AGENT_ROLE):
            self.node_selected.emit(item.data(0, AGENT_ROLE))

    def menu_for(self, caller_id: str) -> QMenu | None:
        """The context menu of one call's row (None: no such row)."""
        item = self._call_items.get(caller_id)
        call = item.data(0, CALL_ROLE) if item is not None else None
        if call is None:
            return None
        return rerun_call_menu(self, call, self.ctx.model.status, self.rerun_call_requested.emit)

    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        call = item.data(0, CALL_ROLE) if item is not None else None
        menu = self.menu_for(call.caller_id) if call is not None else None
        if menu is not None:
            menu.exec(self.tree.viewport().mapToGlobal(pos))
            menu.deleteLater()

    def calls_shown(self) -> list[ToolCallRecord]:
        return [item.data(0, CALL_ROLE) for item in self._call_items.values()]

    def rows(self) -> list[tuple[int, list[str]]]:
        """(depth, texts of the columns) of every row, top to bottom."""
        out: list[tuple[int, list[str]]] = []

        def walk(item: QTreeWidgetItem, depth: int) -> None:
            out.append((depth, [item.text(c) for c in range(len(COLUMNS))]))
            for i in range(item.childCount()):
                walk(item.child(i), depth + 1)
        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i), 0)
        return out


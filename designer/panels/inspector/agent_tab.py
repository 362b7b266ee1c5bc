"""Agent: what an agent did, two ways: a tree of its turns and tool calls,
where a call that runs another agent holds that agent's turns and calls
(nested by the ``parent`` caller id of the events), each with arguments,
result, status, who approved it, and duration; and the conversation exactly
as the LLM saw it, with the token usage. A chat box sends a new prompt into
an agent node."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QIcon
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QStackedWidget,
    QTextBrowser,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from runtime.cost import fmt_usd

from ...look import icons
from .common import (
    COLORS,
    ROLE_COLORS,
    ElidedLabel,
    JsonTree,
    call_tree_columns,
    color,
    fmt_duration,
    mono_font,
    preview,
    rerun_call_menu,
    step_text,
    tree_with_detail,
)
from .model import Conversation, RunModel, StepRecord, ToolCallRecord, Turn

if TYPE_CHECKING:
    from .context import InspectorContext


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2,
                                                           default=str)


def _para(text: str, mono: bool = False) -> str:
    if mono:
        # pre-wrap keeps JSON's indentation (HTML would fold the spaces) and
        # still wraps a long line; the colour is the palette's, so that dark
        # themes read it too.
        return (f'<div style="font-family: monospace; white-space: pre-wrap;">'
                f"{html.escape(text)}</div>")
    return f"<div>{html.escape(text).replace(chr(10), '<br>')}</div>"


def _tool_call_html(call: dict[str, Any], failed: frozenset[str] = frozenset()) -> str:
    # OpenAI: {"id", "type": "function", "function": {"name", "arguments"}};
    # flat {"id", "name", "arguments"}; Anthropic tool_use: {"id", "name", "input"}.
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    name = fn.get("name", "?")
    args = fn.get("arguments", fn.get("input", fn.get("args")))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    cid = call.get("id") or call.get("caller_id") or ""
    bad = str(cid) in failed
    tint = COLORS["error"] if bad else ROLE_COLORS["tool"]
    return (f'<div style="margin-top: 4px;"><span style="color: {tint};">'
            f"{'✕' if bad else '→'} calls <b>{html.escape(str(name))}</b>"
            f"{' · failed' if bad else ''}</span>"
            f'<span style="color: {COLORS["muted"]};">  {html.escape(str(cid))}</span></div>'
            + _para(_text(args), mono=True))


def tool_failed(msg: dict[str, Any]) -> bool:
    """A tool message that tells the LLM its call failed: Anthropic's
    is_error, or the runtime's answer to a failed, refused or rejected call,
    an object whose only key is "error" (runtime.tools ToolOutcome)."""
    if msg.get("role") != "tool":
        return False
    if msg.get("is_error"):
        return True
    content = msg.get("content")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return False
    return isinstance(content, dict) and set(content) == {"error"}


def _content_html(content: Any) -> str:
    if content is None or content == "":
        return ""
    if isinstance(content, str):
        return _para(content)
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict):
                parts.append(_para(_text(part)))
            elif part.get("type") == "text":
                parts.append(_para(str(part.get("text", ""))))
            elif part.get("type") == "tool_use":
                parts.append(_tool_call_html(part))
            elif part.get("type") == "tool_result":
                parts.append(f'<div style="color: {COLORS["muted"]};">result of '
                             f'{html.escape(str(part.get("tool_use_id", "")))}</div>'
                             + _para(_text(part.get("content")), mono=True))
            else:
                parts.append(_para(_text(part), mono=True))
        return "".join(parts)
    return _para(_text(content), mono=True)


def message_html(msg: dict[str, Any], failed: frozenset[str] = frozenset()) -> str:
    """``failed``: the ids of the calls whose result was a failure, marked red."""
    role = str(msg.get("role", "?"))
    tint = ROLE_COLORS.get(role, COLORS["muted"])
    label = role.upper()
    extra = ""
    if role == "tool":
        who = msg.get("name") or ""
        cid = msg.get("tool_call_id") or ""
        extra = f"  {html.escape(str(who))}  {html.escape(str(cid))}"
    body = _content_html(msg.get("content"))
    if role == "tool":
        content = msg.get("content")
        if isinstance(content, str):
            try:
                content = json.loads(content)
            except ValueError:
                pass
        body = _para(_text(content), mono=True)
        if tool_failed(msg):
            tint = COLORS["error"]
            extra += "  ✕ failed"
    for call in msg.get("tool_calls") or []:
        if isinstance(call, dict):
            body += _tool_call_html(call, failed)
    return (f'<table width="100%" cellspacing="0" cellpadding="0" style="margin: 0 0 10px 0;">'
            f'<tr><td width="4" style="background: {tint};"></td><td style="padding: 4px 10px;">'
            f'<div style="color: {tint}; font-size: 11px; font-weight: 600; letter-spacing: 1px;">'
            f'{label}<span style="color: {COLORS["muted"]}; font-weight: 400;">{extra}</span></div>'
            f"{body}</td></tr></table>")


def conversation_html(conv: Conversation, system: str = "") -> str:
    msgs = conv.transcript
    if not msgs:
        return ""
    if system and not (isinstance(msgs[0], dict) and msgs[0].get("role") == "system"):
        # Providers that take the instructions apart from the messages
        # (Anthropic's `system`) do not list them; the LLM still saw them.
        msgs = [{"role": "system", "content": system}, *msgs]
    failed = frozenset(str(m.get("tool_call_id")) for m in msgs
                       if isinstance(m, dict) and tool_failed(m))
    return "".join(message_html(m, failed) for m in msgs if isinstance(m, dict))


def usage_text(conv: Conversation | None) -> str:
    if conv is None:
        return ""
    usage = conv.usage
    inp = usage.get("input_tokens", usage.get("prompt_tokens", 0))
    out = usage.get("output_tokens", usage.get("completion_tokens", 0))
    turns = len(conv.turns)
    model = f"{conv.provider} · {conv.model}  ·  " if conv.model or conv.provider else ""
    cached = usage.get("cached_tokens", 0)
    # A scripted model is offline: it costs nothing, whatever model it plays.
    cost = "offline" if conv.provider == "scripted" else fmt_usd(conv.cost_usd)
    return (f"{model}{turns} turn{'s' if turns != 1 else ''}  ·  "
            f"{inp:,} tokens in{f' ({cached:,} cached)' if cached else ''}  ·  {out:,} out"
            + (f"  ·  {cost}" if cost else ""))


# -- the tree: turns, their calls, and the agents those calls ran ------------------

#: Deepest nesting shown; deeper agents are refused by the runtime anyway.
MAX_TREE_DEPTH = 20

CALL_STATUS = {"success": "✓ success", "error": "✕ error", "refused": "⊘ refused",
               "rejected": "⊘ rejected", "running": "… running", "cancelled": "■ cancelled"}


@dataclass
class CallNode:
    call: ToolCallRecord
    #: What the agent this call ran did: its turns (and their calls).
    turns: list[TurnNode] = field(default_factory=list)


@dataclass
class TurnNode:
    conv: Conversation
    turn: Turn
    calls: list[CallNode] = field(default_factory=list)


def nest(model: RunModel, conv: Conversation, depth: int = 0) -> list[TurnNode]:
    """The turns of one conversation, each with the tool calls made from
    its answer; a call that ran an agent holds that agent's turns, found by
    the parent caller id its events carry."""
    turns = [TurnNode(conv, t) for t in conv.turns]
    if not turns:
        return []
    same = [c for c in model.conversations if c.agent == conv.agent and c.parent == conv.parent]
    later = [c for c in same[same.index(conv) + 1:] if c.turns] if conv in same else []
    end = later[0].turns[0].t0 if later else float("inf")
    start = conv.turns[0].t0
    for call in model.tool_calls.values():
        if call.agent != conv.agent or call.parent != conv.parent \
                or not (start - 1e-6 <= call.t0 < end):
            continue
        # The call comes from the latest answer given before it was made.
        owner = turns[0]
        for node in turns:
            if node.turn.t1 is not None and node.turn.t1 <= call.t0 + 1e-6:
                owner = node
        child = CallNode(call)
        if depth < MAX_TREE_DEPTH:
            for sub in model.conversations:
                if sub.parent == call.caller_id:
                    child.turns.extend(nest(model, sub, depth + 1))
        owner.calls.append(child)
    for node in turns:
        node.calls.sort(key=lambda c: c.call.t0)
    return turns


def decision_text(call: ToolCallRecord) -> str:
    """Who decided on a call that waited: "approved by designer", "edited
    by terminal", "rejected by designer: not this customer"; "waiting for
    approval" while it waits; "" for a call that never waited."""
    d = call.decision
    if d:
        kind, by, reason = d.get("decision", ""), d.get("by", ""), d.get("reason", "")
        if kind == "timeout":
            return "no decision in time: rejected"
        text = f"{kind} by {by}" if by else kind
        return f"{text}: {reason}" if reason and kind == "rejected" else text
    if call.approval is not None and call.status == "running":
        return "waiting for approval"
    return ""


def call_status_text(call: ToolCallRecord) -> str:
    """The status column of a call: how it ended, and who decided."""
    decided = decision_text(call)
    if call.status == "rejected" and call.decision:
        return "⊘ " + decided
    if call.status == "running" and decided:
        return decided  # "waiting for approval": the tree draws a clock beside it
    base = CALL_STATUS.get(call.status, call.status)
    return f"{base} · {decided}" if decided else base


def call_result_text(call: ToolCallRecord) -> str:
    if call.status == "success":
        return preview(call.data, 200)
    if call.status in ("error", "refused", "rejected"):
        return call.error or call.status
    return ""


def turn_text(node: TurnNode) -> str:
    turn = node.turn
    if turn.t1 is None:
        return "… waiting for the LLM"
    if turn.text:
        return preview(turn.text, 200)
    names = [c.call.tool for c in node.calls]
    return ("calls " + ", ".join(names)) if names else "(no text)"


def usage_short(turn: Turn) -> str:
    u = turn.usage
    inp = u.get("input_tokens", u.get("prompt_tokens", 0))
    out = u.get("output_tokens", u.get("completion_tokens", 0))
    text = f"{inp:,} in · {out:,} out" if inp or out else ""
    cost = fmt_usd(turn.cost_usd)
    return f"{text} · {cost}" if text and cost else text or cost


def activity_lines(model: RunModel, conv: Conversation | None,
                   name_of: Any = str, limit: int = 6) -> list[str]:
    """A line per tool this conversation's agent has at work, as a chat
    shows it: "Send email…", "Crawl site: page 2 of 5 (40%)", "Approve
    payment: waiting for approval"."""
    if conv is None:
        return []
    lines = []
    for call in model.tool_calls.values():
        if call.agent != conv.agent or call.parent != conv.parent or not call.live:
            continue
        who = name_of(call.node) if call.node else call.tool
        if call.phase == "progress" and (call.progress_text or call.progress is not None):
            pct = f"{call.progress:.0%}" if call.progress is not None else ""
            said = f"{call.progress_text} ({pct})" if call.progress_text and pct else (
                call.progress_text or pct)
            lines.append(f"{who}: {said}")
        elif call.phase == "waiting_approval":
            lines.append(f"{who}: waiting for approval")
        elif call.phase == "queued":
            lines.append(f"{who}: queued")
        else:
            lines.append(f"{who}…")
    if len(lines) > limit:
        lines = [*lines[:limit - 1], f"and {len(lines) - limit + 1} more…"]
    return lines


TREE_COLUMNS = ["Step", "Arguments", "Result", "Status", "Duration"]
KEY_ROLE = Qt.ItemDataRole.UserRole + 30
DATA_ROLE = Qt.ItemDataRole.UserRole + 31


class AgentTree(QWidget):
    """Turns and tool calls as an indented tree, with a detail pane for the
    row in focus. Rebuilt when what it shows changed; what was open or
    closed, and the row in focus, stay as they were."""

    node_selected = Signal(str)
    rerun_call_requested = Signal(str)  # caller id: the call's "Re-run This Call…"

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._mono = mono_font()
        self._signature: Any = None
        self._closed: set[str] = set()  # keys of rows a person closed
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(TREE_COLUMNS)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setIndentation(22)
        call_tree_columns(self.tree, 230)
        self.tree.itemCollapsed.connect(lambda item: self._closed.add(item.data(0, KEY_ROLE)))
        self.tree.itemExpanded.connect(
            lambda item: self._closed.discard(item.data(0, KEY_ROLE)))
        self.tree.currentItemChanged.connect(self._current_changed)
        self.tree.itemClicked.connect(self._clicked)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.detail = JsonTree()
        split, self.detail_title = tree_with_detail(self.tree, self.detail, (1000, 300), (3, 1))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)

    def show_conversation(self, conv: Conversation | None) -> None:
        model = self.ctx.model
        nodes = nest(model, conv) if conv is not None else []
        signature = (id(conv), _signature(nodes))
        if signature == self._signature:
            return
        self._signature = signature
        current = self.tree.currentItem()
        current_key = current.data(0, KEY_ROLE) if current is not None else None
        self.tree.clear()
        items: dict[str, QTreeWidgetItem] = {}
        for node in nodes:
            self._add_turn(self.tree.invisibleRootItem(), node, items, nested=False)
        for key, item in items.items():
            item.setExpanded(key not in self._closed)
        target = items.get(current_key) if current_key else None
        if target is None and items:
            target = next(iter(items.values()))
        if target is not None:
            self.tree.setCurrentItem(target)

    def _add_turn(self, parent: QTreeWidgetItem, node: TurnNode,
                  items: dict[str, QTreeWidgetItem], nested: bool) -> None:
        item = QTreeWidgetItem(parent)
        key = f"turn:{node.conv.agent}:{node.conv.parent}:{node.turn.turn}:{node.turn.t0:.6f}"
        who = self.ctx.name_of(node.conv.agent)
        item.setText(0, f"{who} · turn {node.turn.turn}" if nested else
                     f"Turn {node.turn.turn}")
        item.setToolTip(0, f"agent {node.conv.agent}")
        font = item.font(0)
        font.setBold(True)
        item.setFont(0, font)
        item.setForeground(0, QBrush(color("llm")))
        item.setText(2, turn_text(node))
        item.setToolTip(2, node.turn.text[:2000] if node.turn.text else "")
        item.setText(3, usage_short(node.turn))
        item.setForeground(3, QBrush(color("muted")))
        item.setText(4, fmt_duration(node.turn.ms) if node.turn.t1 is not None else "…")
        item.setData(0, KEY_ROLE, key)
        item.setData(0, DATA_ROLE, node)
        items[key] = item
        for call in node.calls:
            self._add_call(item, call, items)

    def _add_call(self, parent: QTreeWidgetItem, node: CallNode,
                  items: dict[str, QTreeWidgetItem]) -> None:
        call = node.call
        item = QTreeWidgetItem(parent)
        key = f"call:{call.caller_id}"
        item.setText(0, f"→ {call.tool}")
        item.setToolTip(0, f"node: {self.ctx.name_of(call.node)}" if call.node else call.tool)
        item.setText(1, preview(call.args, 200))
        item.setToolTip(1, preview(call.args, 2000))
        item.setFont(1, self._mono)
        item.setText(2, call_result_text(call))
        item.setToolTip(2, preview(call.data if call.status == "success" else call.error, 2000))
        status = call_status_text(call)
        item.setText(3, status)
        item.setToolTip(3, status)
        # A call waiting for a person: a clock (an SVG icon; the ⏸ glyph it
        # had is in few fonts and drew an empty box).
        waiting = call.status == "running" and bool(decision_text(call))
        item.setIcon(3, icons.icon("clock", COLORS["running"], 14) if waiting else QIcon())
        tint = "running" if call.status == "running" else \
            "refused" if call.status == "rejected" else call.status
        if call.status != "success" or (call.decision or {}).get("decision") == "edited":
            item.setForeground(3, QBrush(color(tint if call.status != "success" else "warning")))
        else:
            item.setForeground(3, QBrush(color("success")))
        if call.status in ("error", "refused"):
            # A failed call is red on its whole row, whatever the answer says.
            item.setText(0, f"✕ {call.tool}")
            for column in (0, 2, 3):
                item.setForeground(column, QBrush(color("error")))
        item.setText(4, fmt_duration(call.ms) if call.t1 is not None else "…")
        item.setData(0, KEY_ROLE, key)
        item.setData(0, DATA_ROLE, call)
        items[key] = item
        for step in call.steps.values():  # a subflow tool's call: the nodes inside
            self._add_step(item, call, step, items)
        for turn in node.turns:
            self._add_turn(item, turn, items, nested=True)

    def _add_step(self, parent: QTreeWidgetItem, call: ToolCallRecord, step: StepRecord,
                  items: dict[str, QTreeWidgetItem]) -> None:
        row = QTreeWidgetItem(parent)
        key = f"step:{call.caller_id}:{step.node}"
        row.setText(0, f"↳ {step.name}")
        row.setToolTip(0, f"node inside the subflow: {step.node}")
        row.setText(1, step.node)
        row.setFont(1, self._mono)
        row.setForeground(1, QBrush(color("muted")))
        text = step_text(step)
        row.setText(3, text)
        row.setToolTip(3, text)
        tint = {"error": "error", "running": "running", "cancelled": "cancelled"}.get(
            step.status, "success")
        row.setForeground(3, QBrush(color(tint)))
        row.setText(4, fmt_duration(step.ms) if step.runs else "…")
        row.setData(0, KEY_ROLE, key)
        row.setData(0, DATA_ROLE, step)
        items[key] = row

    def _current_changed(self, item: QTreeWidgetItem | None, _prev: object = None) -> None:
        data = item.data(0, DATA_ROLE) if item is not None else None
        if isinstance(data, ToolCallRecord):
            self.detail_title.setText(f"{data.tool}  ·  {call_status_text(data)}  ·  "
                                      f"{fmt_duration(data.ms)}")
            roots: list[tuple[str, Any]] = [("arguments", data.args)]
            if data.status == "success":
                roots.append(("result", data.data))
            elif data.error:
                roots.append((data.status, data.error))
            if data.approval is not None:
                roots.append(("approval", {k: v for k, v in data.approval.items() if k != "t"}))
            if data.decision is not None:
                roots.append(("decision", data.decision))
            self.detail.set_roots(roots)
        elif isinstance(data, StepRecord):
            self.detail_title.setText(f"{data.name}  ·  {step_text(data)}")
            self.detail.set_roots([("node", {
                "path": data.node, "name": data.name, "runs": data.runs, "failed": data.errors,
                "ms": round(data.ms, 3), **({"error": data.text} if data.text else {})})])
        elif isinstance(data, TurnNode):
            turn = data.turn
            self.detail_title.setText(f"{self.ctx.name_of(data.conv.agent)} · turn "
                                      f"{turn.turn}  ·  {fmt_duration(turn.ms)}")
            roots = [("text", turn.text)]
            if turn.tool_calls:
                roots.append(("tool_calls", turn.tool_calls))
            if turn.usage:
                roots.append(("usage", turn.usage))
            self.detail.set_roots(roots)
        else:
            self.detail_title.clear()
            self.detail.clear()

    def _clicked(self, item: QTreeWidgetItem) -> None:
        data = item.data(0, DATA_ROLE)
        if isinstance(data, ToolCallRecord):
            self.node_selected.emit(data.node or data.agent)
        elif isinstance(data, TurnNode):
            self.node_selected.emit(data.conv.agent)
        elif isinstance(data, StepRecord):
            self.node_selected.emit(data.node)

    def menu_for(self, caller_id: str) -> QMenu | None:
        """The context menu of one call's row (None: not shown)."""
        call = self.ctx.model.tool_calls.get(caller_id)
        if call is None:
            return None
        return rerun_call_menu(self, call, self.ctx.model.status, self.rerun_call_requested.emit)

    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        data = item.data(0, DATA_ROLE) if item is not None else None
        menu = self.menu_for(data.caller_id) if isinstance(data, ToolCallRecord) else None
        if menu is not None:
            menu.exec(self.tree.viewport().mapToGlobal(pos))
            menu.deleteLater()

    # -- for tests and docs ----------------------------------------------------------
    def rows(self) -> list[tuple[int, list[str]]]:
        """(depth, texts of the columns) of every row, top to bottom."""
        out: list[tuple[int, list[str]]] = []

        def walk(item: QTreeWidgetItem, depth: int) -> None:
            out.append((depth, [item.text(c) for c in range(len(TREE_COLUMNS))]))
            for i in range(item.childCount()):
                walk(item.child(i), depth + 1)
        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i), 0)
        return out


def _signature(nodes: list[TurnNode]) -> tuple:
    out: list[Any] = []
    for node in nodes:
        out.append((node.turn.turn, node.turn.t1, len(node.calls)))
        for c in node.calls:
            call = c.call
            out.append((call.caller_id, call.status, call.t1, bool(call.approval),
                        json.dumps(call.decision, default=str, sort_keys=True)
                        if call.decision else "", _signature(c.turns),
                        tuple((st.node, st.status, st.runs) for st in call.steps.values())))
    return tuple(out)


class AgentTab(QWidget):
    prompt_submitted = Signal(str, str)  # agent node id, prompt
    node_selected = Signal(str)

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.agent = QComboBox()
        self.agent.setMinimumWidth(200)
        self.agent.currentIndexChanged.connect(self._agent_changed)
        self.conversation = QComboBox()
        self.conversation.setMinimumWidth(140)
        self.conversation.currentIndexChanged.connect(self._show_current)
        self.usage = ElidedLabel()
        self.usage.setStyleSheet(f"color: {COLORS['muted']};")
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 6)
        bar.setSpacing(8)
        bar.addWidget(QLabel("Agent"))
        bar.addWidget(self.agent)
        bar.addWidget(self.conversation)
        bar.addStretch(1)
        bar.addWidget(self.usage)
        # Two views of the same work: the calls as a tree (agents inside
        # calls), or the conversation as the LLM read it.
        self.tree_button = self._view_button("Calls", "Turns and tool calls as a tree; a call "
                                             "that runs another agent holds that agent's work")
        self.transcript_button = self._view_button("Transcript", "The conversation exactly as "
                                                   "the LLM saw it")
        self.tree_button.clicked.connect(lambda: self.set_view("tree", user=True))
        self.transcript_button.clicked.connect(lambda: self.set_view("transcript", user=True))
        bar.addWidget(self.tree_button)
        bar.addWidget(self.transcript_button)

        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        self.view.setPlaceholderText("")
        self.view.document().setDocumentMargin(10)
        self.calls = AgentTree(ctx)
        self.calls.node_selected.connect(self.node_selected)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.calls)
        self.pages.addWidget(self.view)
        self._view: str | None = None  # chosen by the person; None: by what the run holds

        self.prompt = QLineEdit()
        self.prompt.setPlaceholderText("Send a new prompt to this agent and watch it work…")
        self.prompt.returnPressed.connect(self.submit)
        self.send = QPushButton("Send")
        self.send.setDefault(True)
        self.send.clicked.connect(self.submit)
        # A line per tool at work ("Crawl site: page 2 of 5"), over the prompt.
        self.activity = QLabel()
        self.activity.setTextFormat(Qt.TextFormat.RichText)
        self.activity.setWordWrap(True)
        self.activity.setContentsMargins(10, 6, 10, 0)
        self.activity.setVisible(False)
        chat = QHBoxLayout()
        chat.setContentsMargins(8, 6, 8, 8)
        chat.setSpacing(8)
        chat.addWidget(self.prompt, 1)
        chat.addWidget(self.send)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.pages, 1)
        layout.addWidget(self.activity)
        layout.addLayout(chat)
        self._shown_conv_count = -1
        self.reload_agents()

    def _view_button(self, text: str, tip: str) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.setCheckable(True)
        button.setAutoRaise(True)
        return button

    def set_view(self, view: str, *, user: bool = False) -> None:
        """Show the calls tree ("tree") or the transcript; a person's choice
        holds for the session, else the tree shows when agents nest."""
        if user:
            self._view = view
        self.pages.setCurrentWidget(self.calls if view == "tree" else self.view)
        self.tree_button.setChecked(view == "tree")
        self.transcript_button.setChecked(view != "tree")

    def current_view(self) -> str:
        return "tree" if self.pages.currentWidget() is self.calls else "transcript"

    # -- agents -------------------------------------------------------------
    def reload_agents(self) -> None:
        """The flow's agent nodes (and any agent the run spoke for)."""
        current = self.agent.currentData()
        ids = list(self.ctx.agent_ids())
        for agent in self.ctx.model.agents():
            if agent not in ids:
                ids.append(agent)
        self.agent.blockSignals(True)
        self.agent.clear()
        for node_id in ids:
            self.agent.addItem(self.ctx.name_of(node_id), node_id)
        index = self.agent.findData(current)
        self.agent.setCurrentIndex(index if index >= 0 else 0)
        self.agent.blockSignals(False)
        has = bool(ids)
        self.prompt.setEnabled(has and not self.ctx.read_only)
        self.send.setEnabled(has and not self.ctx.read_only)
        self._agent_changed()

    def select_agent(self, node_id: str) -> None:
        index = self.agent.findData(node_id)
        if index >= 0:
            self.agent.setCurrentIndex(index)

    def current_agent(self) -> str | None:
        return self.agent.currentData()

    # -- feeding ------------------------------------------------------------
    def refresh(self) -> None:
        agents = self.ctx.model.agents()
        if any(self.agent.findData(a) < 0 for a in agents):
            self.reload_agents()
            return
        convs = self._conversations()
        if len(convs) != self._shown_conv_count:
            self._fill_conversations(follow=True)
        else:
            self._show_current()

    def reset(self) -> None:
        self._shown_conv_count = -1
        self.reload_agents()

    def _conversations(self) -> list[Conversation]:
        agent = self.agent.currentData()
        return [c for c in self.ctx.model.conversations if c.agent == agent]

    def _agent_changed(self) -> None:
        self._fill_conversations(follow=True)

    def _fill_conversations(self, follow: bool) -> None:
        convs = self._conversations()
        self._shown_conv_count = len(convs)
        self.conversation.blockSignals(True)
        self.conversation.clear()
        for i, _ in enumerate(convs):
            self.conversation.addItem(f"Conversation {i + 1} of {len(convs)}", i)
        if convs and follow:
            self.conversation.setCurrentIndex(len(convs) - 1)
        self.conversation.setVisible(len(convs) > 1)
        self.conversation.blockSignals(False)
        self._show_current()

    def _show_current(self) -> None:
        convs = self._conversations()
        index = self.conversation.currentIndex()
        conv = convs[index] if 0 <= index < len(convs) else None
        bar = self.view.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        self.calls.show_conversation(conv)
        nested = conv is not None and any(c.parent for c in self.ctx.model.conversations)
        self.set_view(self._view or ("tree" if nested else "transcript"))
        if conv is None:
            agent = self.agent.currentData()
            if agent is None:
                text = "This flow has no agent node. Add an AI Agent to talk to an LLM."
            else:
                text = ("No conversation yet. Run the flow, or type a prompt below to send it "
                        f"to {html.escape(self.ctx.name_of(agent))}.")
            self.view.setHtml(f'<p style="color: {COLORS["muted"]};">{text}</p>')
            self.usage.setText("")
            self._show_activity(None)
            return
        pending = conv.turns and conv.turns[-1].t1 is None
        waiting = ""
        if pending and conv.turns[-1].streamed:
            # The answer as it streams in; llm.response replaces it when whole.
            waiting = message_html({"role": "assistant",
                                    "content": conv.turns[-1].streamed + " …"})
        elif pending:
            waiting = f'<p style="color: {COLORS["muted"]};">… waiting for the LLM</p>'
        self.view.setHtml(conversation_html(conv, self._instructions(conv.agent)) + waiting)
        self.usage.setText(usage_text(conv))
        self._show_activity(conv)
        if at_bottom or pending:
            bar.setValue(bar.maximum())

    def _show_activity(self, conv: Conversation | None) -> None:
        lines = activity_lines(self.ctx.model, conv, self.ctx.name_of)
        self.activity.setVisible(bool(lines))
        if lines:
            dot = f'<span style="color: {COLORS["running"]};">⟳</span>'
            self.activity.setText("<br>".join(f"{dot}&nbsp; {html.escape(line)}"
                                              for line in lines))

    def activity_text(self) -> list[str]:
        """The running tools' lines as shown (tests read them)."""
        return activity_lines(self.ctx.model, self.current_conversation(), self.ctx.name_of)

    def _instructions(self, agent: str) -> str:
        fnode = self.ctx.flow.node(agent) if self.ctx.flow is not None else None
        value = fnode.params.get("instructions") if fnode is not None else None
        return value.value if value is not None and isinstance(value.value, str) else ""

    def current_conversation(self) -> Conversation | None:
        convs = self._conversations()
        index = self.conversation.currentIndex()
        return convs[index] if 0 <= index < len(convs) else None

    def submit(self) -> None:
        text = self.prompt.text().strip()
        agent = self.agent.currentData()
        if not text or not agent or self.ctx.read_only:
            return
        self.prompt.clear()
        self.prompt_submitted.emit(agent, text)

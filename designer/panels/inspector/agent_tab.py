"""Agent: the conversation exactly as the LLM saw it, turn by turn, with the
token usage; and a chat box to send a new prompt into an agent node."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from .common import COLORS, ROLE_COLORS
from .model import Conversation

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


def _tool_call_html(call: dict[str, Any]) -> str:
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
    return (f'<div style="margin-top: 4px;"><span style="color: {ROLE_COLORS["tool"]};">'
            f"→ calls <b>{html.escape(str(name))}</b></span>"
            f'<span style="color: {COLORS["muted"]};">  {html.escape(str(cid))}</span></div>'
            + _para(_text(args), mono=True))


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


def message_html(msg: dict[str, Any]) -> str:
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
        if msg.get("is_error"):
            extra += "  error"
    for call in msg.get("tool_calls") or []:
        if isinstance(call, dict):
            body += _tool_call_html(call)
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
    return "".join(message_html(m) for m in msgs if isinstance(m, dict))


def usage_text(conv: Conversation | None) -> str:
    if conv is None:
        return ""
    usage = conv.usage
    inp = usage.get("input_tokens", usage.get("prompt_tokens", 0))
    out = usage.get("output_tokens", usage.get("completion_tokens", 0))
    turns = len(conv.turns)
    model = f"{conv.provider} · {conv.model}  ·  " if conv.model or conv.provider else ""
    return (f"{model}{turns} turn{'s' if turns != 1 else ''}  ·  "
            f"{inp:,} tokens in  ·  {out:,} out")


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
        self.usage = QLabel()
        self.usage.setStyleSheet(f"color: {COLORS['muted']};")
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 6)
        bar.setSpacing(8)
        bar.addWidget(QLabel("Agent"))
        bar.addWidget(self.agent)
        bar.addWidget(self.conversation)
        bar.addStretch(1)
        bar.addWidget(self.usage)

        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        self.view.setPlaceholderText("")
        self.view.document().setDocumentMargin(10)

        self.prompt = QLineEdit()
        self.prompt.setPlaceholderText("Send a new prompt to this agent and watch it work…")
        self.prompt.returnPressed.connect(self.submit)
        self.send = QPushButton("Send")
        self.send.setDefault(True)
        self.send.clicked.connect(self.submit)
        chat = QHBoxLayout()
        chat.setContentsMargins(8, 6, 8, 8)
        chat.setSpacing(8)
        chat.addWidget(self.prompt, 1)
        chat.addWidget(self.send)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)
        layout.addLayout(chat)
        self._shown_conv_count = -1
        self.reload_agents()

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
        if conv is None:
            agent = self.agent.currentData()
            if agent is None:
                text = "This flow has no agent node. Add an AI Agent to talk to an LLM."
            else:
                text = ("No conversation yet. Run the flow, or type a prompt below to send it "
                        f"to {html.escape(self.ctx.name_of(agent))}.")
            self.view.setHtml(f'<p style="color: {COLORS["muted"]};">{text}</p>')
            self.usage.setText("")
            return
        pending = conv.turns and conv.turns[-1].t1 is None
        waiting = (f'<p style="color: {COLORS["muted"]};">… waiting for the LLM</p>'
                   if pending else "")
        self.view.setHtml(conversation_html(conv, self._instructions(conv.agent)) + waiting)
        self.usage.setText(usage_text(conv))
        if at_bottom or pending:
            bar.setValue(bar.maximum())

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

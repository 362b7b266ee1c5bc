"""The tool parts of a node's properties form: its tool name and
description, what the AI sees of it as a tool, and for an agent the live
preview of the tools and JSON schemas its LLM will see (``ToolParts``,
mixed into ``NodeForm``)."""

from __future__ import annotations

import json
import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from designer.model.commands import SetToolSettings

from .editor_base import esc
from .form_rules import (
    AGENT_PREVIEW,
    TOOL_PREVIEW,
    TOOL_SETTINGS,
    remember_section,
    section_open,
)
from .json_editor import format_json, mono_font
from .mcp_tools import (
    entry_policy_line,
    mcp_entry,
    offers_several,
)
from .panel_style import CollapsibleSection, label, section
from .tool_preview import agent_functions, hidden_params, hidden_summary, node_function
from .tool_settings import ToolSettingsSection, policy_line

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolParts:
    """``NodeForm``'s tool and agent-preview sections: built by
    ``_build_tool`` and ``_build_preview``, refreshed by ``_refresh_tool``
    and ``_refresh_agent_preview``."""

    def _build_tool(self, layout: QVBoxLayout) -> None:
        spec = self.spec
        assert spec.tool is not None
        self.tool_box = section("Tool", self)
        layout.addWidget(self.tool_box)
        self.wired_label = label("", "muted", self)
        self.wired_label.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.wired_label)
        layout.addWidget(label("Tool name", "paramLabel", self, wrap=False))
        self.tool_name_edit = QLineEdit(self)
        self.tool_name_edit.setFont(mono_font())
        self.tool_name_edit.setPlaceholderText(spec.tool.name)
        self.tool_name_edit.setToolTip("The function name the AI calls; give two nodes of one "
                                       "type different names to offer both to one agent")
        layout.addWidget(self.tool_name_edit)
        layout.addWidget(label("Tool description", "paramLabel", self, wrap=False))
        self.tool_desc_edit = QLineEdit(self)
        self.tool_desc_edit.setPlaceholderText(spec.tool.description)
        self.tool_desc_edit.setToolTip("What the AI reads to decide when to call this tool")
        layout.addWidget(self.tool_desc_edit)
        self.tool_problem = label("", "fieldError", self)
        self.tool_problem.hide()
        layout.addWidget(self.tool_problem)
        self.tool_name_edit.editingFinished.connect(self._on_tool)
        self.tool_desc_edit.editingFinished.connect(self._on_tool)
        self.tool_name_edit.textEdited.connect(self._check_tool_name)
        # What the AI sees of it: closed by default, one click opens it.
        self.tool_preview_box = CollapsibleSection(
            "What the AI sees", self, opened=section_open(spec.type, TOOL_PREVIEW))
        self.tool_preview_box.toggled.connect(
            lambda on: remember_section(spec.type, TOOL_PREVIEW, on))
        self.tool_summary = label("", "muted", self.tool_preview_box.body)
        self.tool_summary.setTextFormat(Qt.TextFormat.RichText)
        self.tool_preview = self._json_view()
        self.tool_preview_box.add(self.tool_summary)
        self.tool_preview_box.add(self.tool_preview)
        layout.addWidget(self.tool_preview_box)
        # When its calls wait for a person, and how often it may be called:
        # closed, its header says the policy in one line.
        self.tool_settings = ToolSettingsSection(
            self.doc, self.node_id, self, opened=section_open(spec.type, TOOL_SETTINGS))
        self.tool_settings.toggled.connect(
            lambda on: remember_section(spec.type, TOOL_SETTINGS, on))
        self.tool_settings.rows_changed.connect(
            lambda: self.wheel_guard.guard(self.tool_settings))
        layout.addWidget(self.tool_settings)

    def _build_preview(self, layout: QVBoxLayout) -> None:
        box = CollapsibleSection("What the AI sees", self,
                                 opened=section_open(self.spec.type, AGENT_PREVIEW))
        box.toggled.connect(lambda on: remember_section(self.spec.type, AGENT_PREVIEW, on))
        self.preview_box = box
        layout.addWidget(box)
        self.preview_summary = label("", "muted", box.body)
        box.add(self.preview_summary)
        self.cards_box = QWidget(box.body)
        self.cards_layout = QVBoxLayout(self.cards_box)
        self.cards_layout.setContentsMargins(0, 0, 0, 0)
        self.cards_layout.setSpacing(6)
        box.add(self.cards_box)
        head_box = QWidget(box.body)
        head = QHBoxLayout(head_box)
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(label("JSON sent to the model", "paramLabel", head_box, wrap=False))
        head.addStretch(1)
        self.copy_button = QToolButton(head_box)
        self.copy_button.setText("Copy")
        self.copy_button.setAutoRaise(True)
        self.copy_button.setToolTip("Copy the tool list, as `switchboard tools` prints it")
        self.copy_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(
                json.dumps(self.functions, indent=2, ensure_ascii=False)))
        head.addWidget(self.copy_button)
        box.add(head_box)
        self.preview_text = self._json_view()
        box.add(self.preview_text)

    def _refresh_tool(self) -> None:
        agents = []
        for w in self.doc.flow.wires:
            if w.target[0] == self.node_id and self.doc.port_kind(w.source[0], w.source[1]) \
                    == "tools":
                a = self.doc.node(w.source[0])
                if a is not None:
                    agents.append(f"<b>{esc(self.doc_label(a.id))}</b>")
        if agents:
            text = "A tool of " + ", ".join(agents) + "."
        else:
            text = ("Not a tool yet: wire an agent's <b>tools</b> port to this node to let its "
                    "AI call it. It still runs as a normal step on messages.")
        if self.wired_label.text() != text:
            self.wired_label.setText(text)
        # An agent's approval and limits matter once it is another's tool.
        self.tool_settings.setVisible(bool(agents) or not self.spec.has_tools_port)
        self.tool_settings.sync()
        fn, error = node_function(self.doc, self.node_id)
        custom, message = hidden_params(self.doc, self.node_id)
        summary = hidden_summary(fn, custom, message, self.spec) if fn else ""
        fnode = self.doc.node(self.node_id)
        if fn and fnode is not None:
            summary += f"<br>Approval: {esc(policy_line(self.spec, fnode))}"
        body = format_json(fn, width=44) if fn else error
        if body != self._tool_text or summary != self.tool_summary.text():
            self._tool_text = body
            self.tool_summary.setText(summary)
            self.tool_preview.setPlainText(body)
        n = len(fn.get("function", {}).get("parameters", {}).get("properties", {})) if fn else 0
        self.tool_preview_box.set_summary(
            "cannot be built" if not fn else
            f"AI fills {n}" if n else "AI fills nothing")

    def _refresh_agent_preview(self) -> None:
        functions, node_ids, error = agent_functions(self.doc, self.node_id)
        text = error or format_json(functions, width=44)
        if text == self._preview_text:
            return
        self._preview_text = text
        self.functions = functions
        n = len(functions)
        if self.preview_box is not None:
            self.preview_box.set_summary(
                "tools cannot be built" if error else "no tools yet" if not n else
                f"{n} tool{'s' * (n != 1)}")
        if error:
            summary = f"The tools cannot be built: {error}"
        elif n == 0:
            summary = ("No tools yet. Wire this agent's tools port to a node with a tool "
                       "badge (for example Send Mail); its AI-scoped parameters become the "
                       "tool's arguments.")
        else:
            n_args = sum(len(f["function"]["parameters"].get("properties", {}))
                         for f in functions)
            summary = (f"{n} tool{'s' * (n != 1)}, {n_args} argument{'s' * (n_args != 1)} the "
                       "AI fills in. Parameters set to Custom or Message are not part of "
                       "any schema: the AI cannot see or change them.")
        self.preview_summary.setText(summary)
        while self.cards_layout.count():
            item = self.cards_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        for fn, nid in zip(functions, node_ids, strict=False):
            self.cards_layout.addWidget(self._tool_card(fn, nid))
        self.preview_text.setPlainText(text if functions or error else "[]")

    def _tool_card(self, fn: dict, node_id: str) -> QWidget:
        card = QFrame(self.cards_box)
        card.setObjectName("toolCard")
        lay = QVBoxLayout(card)
        lay.setContentsMargins(10, 7, 10, 8)
        lay.setSpacing(3)
        f = fn.get("function", {})
        fnode = self.doc.node(node_id)
        spec = self.doc.spec(node_id)
        where = (fnode.name or (spec.name if spec else node_id)) if fnode else node_id
        title = label(f"{f.get('name', '?')}()", "toolName", card, wrap=False)
        title.setFont(mono_font())
        title.setToolTip(f"The function the AI calls; node {where}")
        head = QHBoxLayout()
        head.addWidget(title)
        head.addStretch(1)
        head.addWidget(label(where, "muted", card, wrap=False))
        lay.addLayout(head)
        if f.get("description"):
            lay.addWidget(label(f["description"], "", card))
        custom, message = hidden_params(self.doc, node_id)
        entry = mcp_entry(self.doc, node_id, f.get("name", "")) \
            if offers_several(self.doc, node_id) else None
        if entry is not None:  # an MCP tool: what the designer pinned
            custom, message = list(entry.pinned), []
        summary = label(hidden_summary(fn, custom, message, None if entry else spec), "muted",
                        card)
        summary.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(summary)
        if fnode is not None and spec is not None:
            policy = label(entry_policy_line(spec, entry) if entry is not None
                           else policy_line(spec, fnode), "muted", card)
            policy.setObjectName("toolPolicy")
            policy.setToolTip("When a call waits for a person, and call limits (the tool "
                              "node's Approval and limits)")
            lay.addWidget(policy)
        return card

    def _check_tool_name(self, text: str) -> None:
        bad = bool(text) and not TOOL_NAME_RE.match(text)
        self.tool_name_edit.setProperty("invalid", bad)
        self.tool_name_edit.style().unpolish(self.tool_name_edit)
        self.tool_name_edit.style().polish(self.tool_name_edit)
        self.tool_problem.setProperty("bad", bad)
        if bad:
            self.tool_problem.setText("A tool name has 1-64 letters, digits, _ or - "
                                      "(no spaces); not applied")
        self.tool_problem.setVisible(bad)

    def _on_tool(self) -> None:
        fnode = self.doc.node(self.node_id)
        if fnode is None:
            return
        name = self.tool_name_edit.text().strip() or None
        desc = self.tool_desc_edit.text().strip() or None
        if name and not TOOL_NAME_RE.match(name):
            return
        current = (fnode.tool.name, fnode.tool.description) if fnode.tool else (None, None)
        if current == (name, desc):
            return
        # Only name and description: the approval and limits stay as they are.
        self.doc.undo_stack.push(SetToolSettings(
            self.doc, self.node_id,
            "Change tool name" if current[0] != name else "Change tool description",
            name=name, description=desc))

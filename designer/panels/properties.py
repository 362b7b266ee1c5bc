"""The properties panel: a form generated from the selected node's spec.

For each param the designer picks who supplies the value (AI, a fixed
Custom value, or the incoming Message) and edits it; for an agent the panel
shows, live, the tools and JSON schemas its LLM will see.

The panel is a view: every edit is a command on the document's undo stack
(designer.commands) and the editors follow the document's signals. The form
is built once per selected node; later changes (typing, undo, a scope flip,
wires coming and going) update the widgets in place, so focus and cursor
survive while the user types."""

from __future__ import annotations

import json
import re
from typing import Any

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from designer.commands import RenameNode, SetDisabled, SetOutputPath, SetParam, SetToolSettings
from designer.document import FlowDocument
from runtime.flow import Problem
from runtime.spec import NodeSpec, ParamSpec, ParamValue, Scope

from .editor_base import AI_COLOR, MESSAGE_COLOR, ValueEditor
from .json_editor import AutoHeightText, format_json, mono_font
from .mcp_tools import (
    TOOLS_PARAM,
    McpArgsEditor,
    McpToolsSection,
    entry_policy_line,
    mcp_entry,
    offers_several,
)
from .palette import plugin_note
from .panel_style import CollapsibleSection, WheelGuard, is_dark, label, panel_style, section
from .param_editors import EnumEditor, ParamRow, TurnsValueEditor
from .param_hint import ParamHints
from .payload_editor import PayloadValueEditor
from .pin_dialog import PinBanner
from .properties_hooks import FlowHooksEditor
from .secret_editor import CREDENTIALS_SERVICE, credentials_button, stored_credential
from .tool_preview import agent_functions, hidden_params, hidden_summary, node_function
from .tool_settings import ToolSettingsSection, policy_line

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class IconBadge(QWidget):
    """The node's icon on its category colour, as on the canvas."""

    def __init__(self, spec: NodeSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.setFixedSize(QSize(36, 36))

    def paintEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor(self.spec.color or self.palette().color(QPalette.ColorRole.Mid))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(color)
        p.drawRoundedRect(QRectF(self.rect()), 8, 8)
        try:
            from designer import icons

            pm = icons.pixmap(self.spec.icon or "generic", "#ffffff", 20, self.devicePixelRatioF())
            p.drawPixmap(8, 8, pm)
        except Exception:  # no icon set: the first letter will do
            p.setPen(QColor("#ffffff"))
            font = QFont(self.font())
            font.setBold(True)
            font.setPixelSize(16)
            p.setFont(font)
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, (self.spec.name or "?")[0])
        p.end()


# -- the form of one node -----------------------------------------------------------

class NodeForm(QWidget):
    """Built once for one node; ``sync`` and ``refresh_live`` update it."""

    def __init__(self, doc: FlowDocument, node_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("propertiesPage")
        self.doc, self.node_id = doc, node_id
        spec = doc.spec(node_id)
        fnode = doc.node(node_id)
        assert spec is not None and fnode is not None
        self.spec = spec
        self.rows: dict[str, ParamRow] = {}
        self._shown_name: str | None = None
        self._shown_tool: tuple[str | None, str | None] | None = None
        self._preview_text: str | None = None
        self._tool_text: str | None = None
        self.functions: list[dict] = []

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 16)
        layout.setSpacing(10)
        self._build_header(layout)
        self._build_problems(layout)
        self.pin_banner = PinBanner(doc, node_id, self)  # shown while the node is pinned
        layout.addWidget(self.pin_banner)
        self._build_node_fields(layout)
        self.wheel_guard = WheelGuard(self)
        self.preview_box: CollapsibleSection | None = None
        if spec.has_tools_port:
            # For an agent, what its model sees is the point: first, but
            # closed (one line with a summary) so that the params stay in view.
            self._build_preview(layout)
        self.hints = ParamHints(doc, node_id)  # live text under a param (next fire times)
        self.sections: dict[str, CollapsibleSection] = {}
        self._controllers: list[str] = []  # params that other params' visible_if name
        self.turns_editor: TurnsValueEditor | None = None
        # A node that offers several tools (an MCP server) gets a section of
        # its own for them, after its main params, instead of the Tool section.
        self.mcp_tools: McpToolsSection | None = None
        several = offers_several(doc, node_id)
        if spec.params:
            self._build_params(layout, several)
            self._build_agent_credentials()
        self.flow_hooks: FlowHooksEditor | None = None
        if "hooks" in self.sections:  # an agent's: its flow hooks go with its own
            self.flow_hooks = FlowHooksEditor(doc, node_id, self.sections["hooks"].body)
            self.sections["hooks"].add(self.flow_hooks)
            self.flow_hooks.rows_changed.connect(lambda: self.wheel_guard.guard(self.flow_hooks))
        self.tool_box: QWidget | None = None
        if spec.tool is not None and not several:
            self._build_tool(layout)
        if spec.results:
            self._build_outputs(layout)
        layout.addStretch(1)
        self.wheel_guard.guard(self)
        self.sync()
        self.refresh_live()
        self.set_problems(doc.problems_for(node_id))

    # -- building ---------------------------------------------------------------
    def _build_params(self, layout: QVBoxLayout, several: bool = False) -> None:
        """Main params under PARAMETERS, then one closed section per group
        (connection, ..., advanced last), each remembered open or closed per
        node type for the session. ``several``: the tools section (an MCP
        server's) follows the main params and edits the tools param itself."""
        spec = self.spec
        for p in spec.params:  # rows in the spec's order; placed by group below
            if several and p.name == TOOLS_PARAM:
                continue
            show_scope = len(p.allowed_scopes) > 1 or (spec.tool is not None and not several)
            row = ParamRow(p, show_scope=show_scope, parent=self,
                           editor=self._custom_editor(p))
            row.changed.connect(lambda value, merge, name=p.name:
                                self._push_param(name, value, merge))
            self.rows[p.name] = row
            self.hints.attach(p.name, row)
        for group, params in param_groups(spec):
            if group:
                box = CollapsibleSection(group_title(group), self,
                                         opened=section_open(spec.type, group))
                box.setObjectName(f"section_{group}")
                box.toggled.connect(lambda on, g=group: remember_section(spec.type, g, on))
                self.sections[group] = box
                layout.addWidget(box)
                add = box.add
            else:
                layout.addWidget(section("Parameters", self))
                add = layout.addWidget
            for p in params:
                if p.name in self.rows:
                    add(self.rows[p.name])
            if several and not group:
                self.mcp_tools = McpToolsSection(self.doc, self.node_id, self)
                self.mcp_tools.rows_changed.connect(
                    lambda: self.wheel_guard.guard(self.mcp_tools))
                layout.addWidget(self.mcp_tools)
        self._controllers = sorted({c for p in spec.params for c in (p.visible_if or {})})

    def _custom_editor(self, p: ParamSpec) -> ValueEditor | None:
        """An editor other than the one for the param's type, or None: the
        agent's script is a table of turns, not JSON typed by hand, and the
        inject's payload is text its payload type reads (``hello`` is a
        string, not a JSON error)."""
        if self.spec.type == "core.inject" and p.name == "payload":
            return PayloadValueEditor(p, self)
        if self.spec.type == "mcp.server" and p.name == "args":
            return McpArgsEditor(p, self)  # a shell line, not JSON
        if self.spec.type == "ai.agent" and p.name == "script":
            tools = [f["function"]["name"] for f in agent_functions(self.doc, self.node_id)[0]]
            editor = TurnsValueEditor(p, tools, self)
            editor.rows_changed.connect(lambda: self.wheel_guard.guard(editor))
            self.turns_editor = editor
            return editor
        return None

    def _build_agent_credentials(self) -> None:
        """A Credentials… button beside the agent's provider: the one click
        from "no key" to a working agent (the API key param itself sits in
        the closed Connection section)."""
        row, key = self.rows.get("provider"), self.spec.param("api_key")
        if row is None or key is None or not key.secret \
                or not isinstance(row.value_editor, EnumEditor):
            return
        self.agent_credentials_button = credentials_button(
            row, "Pick a stored API key, or store a new one in the system keyring, and use "
                 "it for this agent; the flow keeps only its name")
        row.value_editor.add_beside(self.agent_credentials_button)
        self.agent_credentials_button.clicked.connect(self._on_agent_credentials)

    def _on_agent_credentials(self) -> None:
        fnode = self.doc.node(self.node_id)
        if fnode is None:
            return
        from designer.credentials_dialog import choose_connection

        setting = fnode.params.get("api_key")
        url, model = fnode.params.get("base_url"), fnode.params.get("model")
        chosen = choose_connection(
            self.window(), stored_credential(setting.value) if setting else None,
            base_url=str(url.value or "") if url is not None and url.scope is Scope.CUSTOM else "",
            model=str(model.value or "") if model is not None and model.scope is Scope.CUSTOM
            else "")
        if chosen is None:
            return
        name = chosen.name
        stack = self.doc.undo_stack
        # Key, server and model in one step: Use after Test connection is
        # one decision, and undo takes it back whole.
        stack.beginMacro(f"Use {chosen.describe()}")
        self._push_param("api_key", ParamValue(scope=Scope.CUSTOM, value={
            "keyring": CREDENTIALS_SERVICE, "username": name}), False)
        provider = fnode.params.get("provider")
        current = _fixed_value(self.spec, "provider", fnode.params)
        fixed = provider is None or provider.scope is Scope.CUSTOM
        if fixed and (current == "scripted" or (chosen.base_url is not None
                                                  and current != "openai")):
            # A key is for a real model: leave the offline script behind; a
            # server Test connection listed is an OpenAI-compatible one.
            real = "anthropic" if chosen.base_url is None and any(
                w in name.lower() for w in ("anthropic", "claude")) else "openai"
            self._push_param("provider", ParamValue(scope=Scope.CUSTOM, value=real), False)
        if chosen.base_url is not None:
            self._push_param("base_url", ParamValue(scope=Scope.CUSTOM, value=chosen.base_url),
                             False)
        if chosen.model:
            self._push_param("model", ParamValue(scope=Scope.CUSTOM, value=chosen.model), False)
        stack.endMacro()
        bar = getattr(self.window(), "statusBar", None)
        if callable(bar):
            bar().showMessage(f"{self.doc_label(self.node_id)} now uses {chosen.describe()}", 10000)

    def _build_header(self, layout: QVBoxLayout) -> None:
        spec = self.spec
        head = QHBoxLayout()
        head.setSpacing(10)
        head.addWidget(IconBadge(spec, self), 0, Qt.AlignmentFlag.AlignTop)
        titles = QVBoxLayout()
        titles.setSpacing(1)
        self.title = label(spec.name, "nodeTitle", self)
        kind = spec.category + (" · tool" if spec.tool else "") + \
            (" · agent" if spec.has_tools_port else "")
        self.type_label = label(kind, "nodeType", self)
        self.type_label.setToolTip(f"Node type {spec.type} in the flow file")
        # The same "plugin" tag as in the palette; also shown, as "own
        # process", for a node whose package this flow runs out of process.
        self.process_tag = label("", "pluginTag", self, wrap=False)
        self.process_tag.hide()
        title_row = QHBoxLayout()
        title_row.setSpacing(8)
        title_row.addWidget(self.title, 0)
        title_row.addWidget(self.process_tag, 0, Qt.AlignmentFlag.AlignVCenter)
        title_row.addStretch(1)
        titles.addLayout(title_row)
        titles.addWidget(self.type_label)
        head.addLayout(titles, 1)
        layout.addLayout(head)
        if spec.description:
            desc = label(_doc_html(spec.description), "muted", self)
            desc.setTextFormat(Qt.TextFormat.RichText)
            desc.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            layout.addWidget(desc)

    def _build_problems(self, layout: QVBoxLayout) -> None:
        self.problem_banner = QFrame(self)
        self.problem_banner.setObjectName("problemBanner")
        self.problem_layout = QVBoxLayout(self.problem_banner)
        self.problem_layout.setContentsMargins(10, 7, 10, 7)
        self.problem_layout.setSpacing(3)
        self.problem_banner.hide()
        layout.addWidget(self.problem_banner)

    def _build_node_fields(self, layout: QVBoxLayout) -> None:
        grid = QVBoxLayout()
        grid.setSpacing(4)
        row = QHBoxLayout()
        row.setSpacing(6)
        name_label = label("Name", "paramLabel", self, wrap=False)
        self.id_label = label(f"id {self.node_id}", "muted", self, wrap=False)
        self.id_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.id_label.setToolTip("The node's id in the flow file (used by Catch and in "
                                 "error messages)")
        row.addWidget(name_label)
        row.addStretch(1)
        row.addWidget(self.id_label)
        self.name_edit = QLineEdit(self)
        self.name_edit.setPlaceholderText(self.spec.name)
        self.name_edit.editingFinished.connect(self._on_name)
        self.disabled_box = QCheckBox("Disabled", self)
        self.disabled_box.setToolTip("A disabled node is skipped when the flow runs")
        self.disabled_box.clicked.connect(self._on_disabled)
        self.name_problem = label("", "fieldError", self)
        self.name_problem.hide()
        grid.addLayout(row)
        grid.addWidget(self.name_edit)
        grid.addWidget(self.disabled_box)
        layout.addLayout(grid)

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

    def _build_outputs(self, layout: QVBoxLayout) -> None:
        # Where results land in the message: rarely changed, so closed.
        box = CollapsibleSection("Outputs", self, opened=section_open(self.spec.type, OUTPUTS))
        box.toggled.connect(lambda on: remember_section(self.spec.type, OUTPUTS, on))
        self.outputs_box = box
        layout.addWidget(box)
        body = box.body
        self.output_edits: dict[str, QLineEdit] = {}
        for out in self.spec.results:
            box.add(label(f"<b>{out.name}</b> is written to", "", body))
            row_box = QWidget(body)
            row = QHBoxLayout(row_box)
            row.setContentsMargins(0, 0, 0, 0)
            prefix = label("msg.", "muted", row_box)
            prefix.setFont(mono_font())
            row.addWidget(prefix)
            edit = QLineEdit(row_box)
            edit.setObjectName("pathEdit")
            edit.setFont(mono_font())
            edit.setPlaceholderText(out.path)
            edit.setToolTip(f"Where {out.name} goes in the message in RPA mode; empty = "
                            f"msg.{out.path}")
            edit.editingFinished.connect(lambda name=out.name, e=edit: self._push_output(name, e))
            row.addWidget(edit, 1)
            box.add(row_box)
            self.output_edits[out.name] = edit
            if out.description:
                box.add(label(out.description, "muted", body))
        if self.spec.tool is not None:
            box.add(label("As a tool, the outputs go back to the AI by name instead.",
                          "muted", body))
        box.body_layout.setSpacing(4)

    def _push_output(self, name: str, edit: QLineEdit) -> None:
        from runtime.message import PathError, parse_path

        fnode = self.doc.node(self.node_id)
        text = edit.text().strip()
        if text.startswith("msg."):
            text = text[4:]
        if fnode is None or (fnode.outputs.get(name) or "") == text:
            return
        if text:
            try:
                parse_path(text)
            except PathError as exc:
                edit.setProperty("invalid", True)
                edit.setToolTip(f"Not applied: {exc}")
                edit.style().polish(edit)
                return
        edit.setProperty("invalid", False)
        edit.style().polish(edit)
        self.doc.undo_stack.push(SetOutputPath(self.doc, self.node_id, name, text or None))

    def _json_view(self, max_lines: int = 30) -> AutoHeightText:
        view = AutoHeightText(self, 2, max_lines)
        view.setReadOnly(True)
        view.setFont(mono_font())
        view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        return view

    # -- model -> form ------------------------------------------------------------
    def sync(self) -> None:
        """Show the node's settings; editors that already show them are left alone."""
        fnode = self.doc.node(self.node_id)
        if fnode is None:
            return
        for name, row in self.rows.items():
            row.sync(fnode.params.get(name))
        self._sync_visibility(fnode.params)
        for row in self.rows.values():
            # A template editor is made when a param first becomes {{ }}:
            # its box must not take the wheel either while unfocused.
            editor = getattr(row, "expression_editor", None)
            if editor is not None and not editor.property("wheelGuarded"):
                self.wheel_guard.guard(editor)
                editor.setProperty("wheelGuarded", True)
        self.hints.refresh()
        if fnode.name != self._shown_name:
            self._shown_name = fnode.name
            self.name_edit.setText(fnode.name or "")
        self.title.setText(fnode.name or self.spec.name)
        self.disabled_box.setChecked(fnode.disabled)
        self.pin_banner.sync()
        for name, edit in getattr(self, "output_edits", {}).items():
            shown = fnode.outputs.get(name) or ""
            if edit.text() != shown and not edit.hasFocus():
                edit.setText(shown)
        if self.spec.results:
            n, moved = len(self.spec.results), len(fnode.outputs)
            self.outputs_box.set_summary(f"{n} output{'s' * (n != 1)}"
                                         + (f", {moved} moved" if moved else ""))
        if self.mcp_tools is not None:
            self.mcp_tools.sync()
        if self.tool_box is not None:
            shown = (fnode.tool.name, fnode.tool.description) if fnode.tool else (None, None)
            if shown != self._shown_tool:
                self._shown_tool = shown
                self.tool_name_edit.setText(shown[0] or "")
                self.tool_desc_edit.setText(shown[1] or "")
                self._check_tool_name(self.tool_name_edit.text())
            self.tool_settings.sync()

    def _sync_visibility(self, settings: dict[str, ParamValue]) -> None:
        """Hide the params the current choices make meaningless (visible_if),
        say under each choosing param what it hid, and hide a section with
        nothing left to show. Runs on every change, undo included."""
        spec = self.spec
        visible = {name: spec.param_visible(name, settings) for name in self.rows}
        for name, row in self.rows.items():
            if row.isHidden() == visible[name]:
                row.setHidden(not visible[name])
        for ctl in self._controllers:
            hidden = [p for p in spec.params
                      if p.visible_if and ctl in p.visible_if and not visible[p.name]
                      and not _condition_holds(spec, p, ctl, settings)]
            note = ""
            if hidden:
                value = _fixed_value(spec, ctl, settings)
                labels = [p.label for p in hidden]
                listed = ", ".join(labels) if len(labels) <= 5 else \
                    ", ".join(labels[:4]) + f" and {len(labels) - 4} more"
                note = f"Not used with {_quote_value(value)}, so hidden: {listed}."
            if ctl in self.rows:
                self.rows[ctl].set_note(note)
                self.rows[ctl].note.setToolTip(", ".join(p.label for p in hidden))
        for group, box in self.sections.items():
            names = [p.name for p in spec.params if p.group == group]
            shown = [n for n in names if visible[n]]
            box.setHidden(not shown)
            changed = sum(1 for n in shown if _is_changed(spec, n, settings))
            n = len(shown)
            box.set_summary(f"{changed} of {n} changed" if changed else
                            f"{n} setting{'s' * (n != 1)}")

    def refresh_live(self) -> None:
        """What depends on other nodes and wires: the tool preview and which
        agents a tool serves. Cheap, and widgets change only when the text does."""
        if self.doc.node(self.node_id) is None:
            return
        self._refresh_process_tag()
        if self.tool_box is not None:
            self._refresh_tool()
        if self.spec.has_tools_port:
            self._refresh_agent_preview()
        if self.turns_editor is not None:
            self.turns_editor.set_tool_names([f["function"]["name"] for f in self.functions])

    def _refresh_process_tag(self) -> None:
        spec = self.spec
        if spec.plugin:
            text, tip = "plugin", plugin_note(spec)
        else:
            package = self.doc.registry.package_of(spec.type)
            if package and package in self.doc.flow.settings.out_of_process:
                text = "own process"
                tip = (f"Runs in its own process in this flow: package '{package}' "
                       "(Run > Node Packages…)")
            else:
                text = tip = ""
        if self.process_tag.text() != text:
            self.process_tag.setText(text)
            self.process_tag.setToolTip(tip)
            self.process_tag.setVisible(bool(text))

    def _refresh_tool(self) -> None:
        agents = []
        for w in self.doc.flow.wires:
            if w.target[0] == self.node_id and self.doc.port_kind(w.source[0], w.source[1]) \
                    == "tools":
                a = self.doc.node(w.source[0])
                if a is not None:
                    agents.append(f"<b>{_esc(self.doc_label(a.id))}</b>")
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
            summary += f"<br>Approval: {_esc(policy_line(self.spec, fnode))}"
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

    def set_problems(self, problems: list[Problem]) -> None:
        while self.problem_layout.count():
            item = self.problem_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        by_row: dict[str, list[str]] = {}
        tool_msgs: list[str] = []
        for p in problems:
            field = p.field or ""
            parts = field.split(".")
            if parts[0] == "params" and len(parts) > 1 and parts[1] in self.rows:
                by_row.setdefault(parts[1], []).append(human_message(self.spec, p.message))
            elif parts[0] == "tool":
                tool_msgs.append(p.message)
        for name, row in self.rows.items():
            row.set_problems(by_row.get(name, []))
        for group, box in self.sections.items():
            inside = [p for p in problems
                      if (param := _param_of(self.spec, p.field)) is not None
                      and param.group == group]
            if not inside:
                box.set_marker("")
            else:
                mark = "✖" if any(p.severity == "error" for p in inside) else "⚠"
                n = len(inside)
                box.set_marker(f"{mark} {n} problem{'s' * (n != 1)}")
        if self.tool_box is not None:
            self.tool_problem.setText("\n".join(tool_msgs))
            self.tool_problem.setVisible(bool(tool_msgs) or self.tool_problem.property("bad")
                                         is True)
        errors = [p for p in problems if p.severity == "error"]
        for p in problems:
            where = field_label(self.spec, p.field)
            mark = "✖" if p.severity == "error" else "⚠"
            message = human_message(self.spec, p.message)
            message = message[:1].upper() + message[1:] if not where else message
            text = f"{mark}  {where + ': ' if where else ''}{message}"
            item = label(text, "problemItem", self.problem_banner)
            item.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.problem_layout.addWidget(item)
        self.problem_banner.setProperty("severity", "error" if errors else "warning")
        self.problem_banner.style().unpolish(self.problem_banner)
        self.problem_banner.style().polish(self.problem_banner)
        self.problem_banner.setVisible(bool(problems))

    # -- form -> model (always through the undo stack) ----------------------------
    def _push_param(self, name: str, value: Any, merge: bool) -> None:
        fnode = self.doc.node(self.node_id)
        if fnode is None:
            return
        old = fnode.params.get(name)
        if (old is None and value is None) or (old is not None and value is not None
                                               and old.to_json() == value.to_json()):
            return
        command = SetParam(self.doc, self.node_id, name, value, merge=merge)
        p = self.spec.param(name)
        command.setText(f"Change {p.label if p is not None else name}")
        self.doc.undo_stack.push(command)

    def _on_disabled(self, on: bool) -> None:
        command = SetDisabled(self.doc, self.node_id, bool(on))
        command.setText(f"{'Disable' if on else 'Enable'} {self.doc_label(self.node_id)}")
        self.doc.undo_stack.push(command)

    def _on_name(self) -> None:
        fnode = self.doc.node(self.node_id)
        text = self.name_edit.text().strip()
        if fnode is None or (fnode.name or "") == text:
            return
        command = RenameNode(self.doc, self.node_id, text or None)
        command.setText(f"Rename {self.doc_label(self.node_id)}")
        self.doc.undo_stack.push(command)

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

    def doc_label(self, node_id: str) -> str:
        """What the user calls a node: its name, else its type's name."""
        fnode, spec = self.doc.node(node_id), self.doc.spec(node_id)
        if fnode is None:
            return node_id
        return fnode.name or (spec.name if spec is not None else fnode.type)


# -- sections ---------------------------------------------------------------------------

#: Keys of the two previews in the open/closed memory, beside the param groups.
AGENT_PREVIEW = "@agent-preview"
TOOL_PREVIEW = "@tool-preview"
TOOL_SETTINGS = "@tool-settings"
OUTPUTS = "@outputs"
#: Groups shown in this order; others between them, in the order the node declares them.
_FIRST_GROUPS = ("", "connection")
_LAST_GROUPS = ("advanced",)
#: Open or closed, per (node type, section), for this session: a section the
#: user opened on one Send Mail is open on the next one too.
_open_sections: dict[tuple[str, str], bool] = {}


def section_open(node_type: str, key: str) -> bool:
    return _open_sections.get((node_type, key), False)


def remember_section(node_type: str, key: str, on: bool) -> None:
    _open_sections[(node_type, key)] = on


def param_groups(spec: NodeSpec) -> list[tuple[str, list[ParamSpec]]]:
    """The params by group: main ("") first, then connection, then the other
    groups as the node declares them, advanced last."""
    by_group: dict[str, list[ParamSpec]] = {}
    for p in spec.params:
        by_group.setdefault(p.group, []).append(p)

    def rank(group: str) -> tuple[int, int]:
        if group in _FIRST_GROUPS:
            return (0, _FIRST_GROUPS.index(group))
        if group in _LAST_GROUPS:
            return (2, _LAST_GROUPS.index(group))
        return (1, 0)
    return sorted(by_group.items(), key=lambda item: rank(item[0]))


def group_title(group: str) -> str:
    return group.replace("_", " ").replace("-", " ").capitalize()


def _fixed_value(spec: NodeSpec, name: str, settings: dict[str, ParamValue]) -> Any:
    setting = settings.get(name)
    if setting is not None and setting.scope is Scope.CUSTOM and setting.value is not None:
        return setting.value
    p = spec.param(name)
    return p.default if p is not None else None


def _condition_holds(spec: NodeSpec, p: ParamSpec, ctl: str,
                     settings: dict[str, ParamValue]) -> bool:
    """Whether ``ctl``'s part of ``p``'s visible_if holds (as param_visible
    reads it: a choice made at run time holds)."""
    setting = settings.get(ctl)
    if setting is not None and setting.scope is not Scope.CUSTOM:
        return True
    return _fixed_value(spec, ctl, settings) in (p.visible_if or {}).get(ctl, [])


def _is_changed(spec: NodeSpec, name: str, settings: dict[str, ParamValue]) -> bool:
    setting = settings.get(name)
    p = spec.param(name)
    if setting is None or p is None:
        return False
    if setting.scope is not p.default_scope:
        return True
    return setting.scope is Scope.CUSTOM and setting.value is not None \
        and setting.value != p.default


def _quote_value(value: Any) -> str:
    return f"“{value}”" if isinstance(value, str) else json.dumps(value)


def _doc_html(text: str) -> str:
    """A docstring as a paragraph: single line breaks joined, ``code`` kept."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    html = "<br><br>".join(_esc(p) for p in paragraphs)
    return re.sub(r"``(.+?)``|`(.+?)`", lambda m: f"<tt>{m.group(1) or m.group(2)}</tt>", html)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _param_of(spec: NodeSpec, field: str | None) -> ParamSpec | None:
    """The param a problem's field (params.smtp_port.value) is about."""
    parts = (field or "").split(".")
    return spec.param(parts[1]) if parts[0] == "params" and len(parts) > 1 else None


def human_message(spec: NodeSpec, message: str) -> str:
    """A problem's text with the param ids in it (smtp_port, 'to') and the
    node's type id replaced by the labels the form shows."""
    for p in sorted(spec.params, key=lambda p: -len(p.name)):
        message = message.replace(f"'{p.name}'", p.label)
        if "_" in p.name:
            message = re.sub(rf"(?<![\w.]){re.escape(p.name)}(?![\w])", p.label, message)
    return message.replace(f"{spec.type} ", f"{spec.name} ")


def field_label(spec: NodeSpec, field: str | None) -> str:
    """Where a problem is, in the form's words: "SMTP port" for
    params.smtp_port.value, "Tool name", "Output message_id", "Wire"."""
    if not field:
        return ""
    parts = field.split(".")
    if parts[0] == "params" and len(parts) > 1:
        p = spec.param(parts[1])
        return p.label if p else parts[1]
    if parts[0] == "tool":
        return "Tool name"
    if parts[0] == "outputs" and len(parts) > 1:
        return f"Output {parts[1]}"
    if parts[0].startswith("wires["):
        return "Wire"
    if field == "in":
        return ""
    return field


# -- the panel ------------------------------------------------------------------------

class PropertiesPanel(QWidget):
    """The right dock's content. ``set_node(id)`` for a single selection,
    ``set_nodes(ids)`` for any selection (several nodes: a summary)."""

    node_shown = Signal(str)  # id, or "" when the form goes away

    def __init__(self, document: FlowDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("propertiesPanel")
        self.doc = document
        self.node_id: str | None = None
        self.selection: list[str] = []
        self.form: NodeForm | None = None

        self.stack = QStackedWidget(self)
        self.empty_page = self._build_empty()
        self.summary_page = QWidget(self)
        self.summary_page.setObjectName("propertiesPage")
        self.summary_layout = QVBoxLayout(self.summary_page)
        self.summary_layout.setContentsMargins(16, 16, 16, 16)
        self.summary_layout.setSpacing(6)
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        summary_scroll = QScrollArea(self)
        summary_scroll.setWidgetResizable(True)
        summary_scroll.setFrameShape(QFrame.Shape.NoFrame)
        summary_scroll.setWidget(self.summary_page)
        for page in (self.empty_page, summary_scroll, self.scroll):
            self.stack.addWidget(page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self.setMinimumWidth(280)
        self._apply_style()

        d = document
        d.node_changed.connect(self._on_node_changed)
        d.node_removed.connect(self._on_node_removed)
        d.node_added.connect(self._on_node_added)
        d.flow_reset.connect(self._on_flow_reset)
        d.problems_changed.connect(self._on_problems)
        d.changed.connect(self._on_changed)
        self.set_node(None)

    # -- selection ------------------------------------------------------------------
    def set_node(self, node_id: str | None) -> None:
        self.set_nodes([node_id] if node_id else [])

    def set_nodes(self, node_ids: list[str]) -> None:
        ids = [n for n in node_ids if self.doc.node(n) is not None]
        self.selection = ids
        if len(ids) == 1:
            if ids[0] != self.node_id or self.form is None:
                self._build_form(ids[0])
            self.stack.setCurrentIndex(2)
            return
        self._drop_form()
        if ids:
            self._fill_summary(ids)
            self.stack.setCurrentIndex(1)
        else:
            self.stack.setCurrentIndex(0)

    def _build_form(self, node_id: str) -> None:
        self._drop_form()
        if self.doc.spec(node_id) is None:  # unknown type: nothing to edit
            self.node_id = None
            self._fill_summary([node_id])
            self.stack.setCurrentIndex(1)
            return
        self.node_id = node_id
        self.form = NodeForm(self.doc, node_id)
        self.scroll.setWidget(self.form)
        self.node_shown.emit(node_id)

    def _drop_form(self) -> None:
        if self.form is not None:
            old = self.scroll.takeWidget()
            if old is not None:
                old.deleteLater()
            self.form = None
            self.node_id = None
            self.node_shown.emit("")

    # -- document signals -------------------------------------------------------------
    def _on_node_changed(self, node_id: str) -> None:
        if self.form is not None and node_id == self.node_id:
            self.form.sync()
        elif len(self.selection) > 1 and node_id in self.selection:
            self._fill_summary(self.selection)

    def _on_node_removed(self, node_id: str, _index: int) -> None:
        if node_id in self.selection:
            self.set_nodes([n for n in self.selection if n != node_id])

    def _on_node_added(self, _node_id: str) -> None:
        pass  # the canvas decides what is selected; nothing to show until it says

    def _on_flow_reset(self) -> None:
        # A new flow object: rebuild, so no widget holds the old flow's state.
        keep = [n for n in self.selection if self.doc.node(n) is not None]
        self._drop_form()
        self.set_nodes(keep)

    def _on_problems(self, _problems: list) -> None:
        if self.form is not None and self.node_id is not None:
            self.form.set_problems(self.doc.problems_for(self.node_id))

    def _on_changed(self) -> None:
        if self.form is not None:
            self.form.refresh_live()

    # -- pages ---------------------------------------------------------------------------
    def _build_empty(self) -> QWidget:
        page = QWidget(self)
        page.setObjectName("propertiesPage")
        lay = QVBoxLayout(page)
        lay.setContentsMargins(24, 24, 24, 24)
        lay.setSpacing(10)
        lay.addStretch(1)
        title = label("Nothing selected", "emptyTitle", page)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = label("Select a node on the canvas to edit its settings here.", "muted", page)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        lay.addWidget(hint)
        explain = label(
            "Every parameter says where its value comes from:<br><br>"
            f"<b style='color:{AI_COLOR}'>AI</b> &nbsp;the agent's model fills it in when it "
            "calls the node as a tool.<br>"
            "<b>Custom</b> &nbsp;a value you fix here; the AI never sees it.<br>"
            f"<b style='color:{MESSAGE_COLOR}'>Message</b> &nbsp;read from the incoming "
            "message, e.g. <tt>payload.email</tt>.", "muted", page)
        explain.setTextFormat(Qt.TextFormat.RichText)
        explain.setContentsMargins(8, 12, 8, 0)
        lay.addWidget(explain)
        lay.addStretch(2)
        return page

    def _fill_summary(self, ids: list[str]) -> None:
        while self.summary_layout.count():
            item = self.summary_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        n = len(ids)
        self.summary_layout.addWidget(
            label(f"{n} node{'s' * (n != 1)} selected", "emptyTitle", self.summary_page))
        ai = 0
        for nid in ids:
            fnode, spec = self.doc.node(nid), self.doc.spec(nid)
            if fnode is None:
                continue
            kind = spec.name if spec else f"unknown type {fnode.type}"
            name = fnode.name or (spec.name if spec else fnode.type)
            line = label(f"<b>{_esc(name)}</b> &nbsp;<span>{_esc(kind)}</span>",
                          "", self.summary_page)
            line.setToolTip(f"id {nid}")
            line.setTextFormat(Qt.TextFormat.RichText)
            self.summary_layout.addWidget(line)
            if spec:
                ai += sum(1 for p in spec.params
                          if (fnode.params[p.name].scope if p.name in fnode.params
                              else p.default_scope) is Scope.AI)
        if ai:
            self.summary_layout.addWidget(label(
                f"{ai} parameter{'s' * (ai != 1)} in this selection filled by the AI.",
                "muted", self.summary_page))
        tip = ("Select a single node to edit its settings." if n > 1 else
               "This node's type is not installed, so its settings cannot be edited.")
        self.summary_layout.addSpacing(8)
        self.summary_layout.addWidget(label(tip, "muted", self.summary_page))
        self.summary_layout.addStretch(1)

    # -- looks -----------------------------------------------------------------------------
    def _apply_style(self) -> None:
        # Read darkness from the application's palette: our own stylesheet
        # changes this widget's palette, and reading that back flipped the
        # answer and re-applied the style forever (a crash on theme change).
        self._dark = is_dark(QApplication.palette())
        self.setStyleSheet(panel_style(self._dark))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        if (event.type() == QEvent.Type.PaletteChange
                and is_dark(QApplication.palette()) != getattr(self, "_dark", None)):
            self._apply_style()
        super().changeEvent(event)

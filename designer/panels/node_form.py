"""A node's properties form: built once per selected node from its spec,
every edit a command on the document's undo stack; ``sync`` and
``refresh_live`` update the widgets in place, so focus and cursor survive
while the user types."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from designer.model.commands import RenameNode, SetDisabled, SetOutputPath, SetParam
from designer.model.document import FlowDocument
from runtime.flow import Problem
from runtime.flow.subflows import is_instance_type
from runtime.spec import NodeSpec, ParamSpec, ParamValue, Scope

from ..canvas.items import SUBFLOW_COLOR
from .editor_base import ValueEditor
from .form_rules import (
    OUTPUTS,
    condition_holds,
    doc_html,
    field_label,
    fixed_value,
    group_title,
    human_message,
    is_changed,
    param_groups,
    param_of,
    quote_value,
    remember_section,
    section_open,
)
from .json_editor import AutoHeightText, mono_font
from .mcp_tools import (
    TOOLS_PARAM,
    McpArgsEditor,
    McpToolsSection,
    offers_several,
)
from .node_tool_form import ToolParts
from .node_words import plugin_note
from .panel_style import CollapsibleSection, WheelGuard, label, section
from .param_editors import (
    SUBFLOW_NOT_ALLOWED_TIPS,
    EnumEditor,
    ParamRow,
    TurnsValueEditor,
    subflow_param_fits,
)
from .param_hint import ParamHints
from .payload_editor import PayloadValueEditor
from .pin_dialog import PinBanner
from .properties_hooks import FlowHooksEditor
from .secret_editor import CREDENTIALS_SERVICE, credentials_button, stored_credential
from .subflow_instance import SubflowSection
from .tool_preview import agent_functions


class IconBadge(QWidget):
    """The node's icon on its category colour, as on the canvas."""

    def __init__(self, spec: NodeSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.setFixedSize(QSize(36, 36))

    def paintEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor(self.spec.color or (SUBFLOW_COLOR if is_instance_type(self.spec.type)
                                           else self.palette().color(QPalette.ColorRole.Mid)))
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(color)
        p.drawRoundedRect(QRectF(self.rect()), 8, 8)
        try:
            from ..look import icons

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

class NodeForm(ToolParts, QWidget):
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
        # A subflow instance: what it runs (the version it pins) and Update.
        self.subflow_section: SubflowSection | None = None
        if is_instance_type(spec.type):
            self.subflow_section = SubflowSection(doc, node_id, self)
            layout.addWidget(self.subflow_section)
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
        definition = getattr(self.doc, "definition", None)
        instance = is_instance_type(spec.type)
        for p in spec.params:  # rows in the spec's order; placed by group below
            if several and p.name == TOOLS_PARAM:
                continue
            show_scope = len(p.allowed_scopes) > 1 or (spec.tool is not None and not several)
            # Inside a subflow's definition a param may read one of the
            # subflow's own params (scope Subflow), those of a fitting type.
            choices = None
            if definition is not None and p.allows(Scope.SUBFLOW):
                choices = [(sp.name, sp.label or sp.name) for sp in definition.params
                           if subflow_param_fits(p, sp)]
                show_scope = True
            row = ParamRow(p, show_scope=show_scope, parent=self,
                           editor=self._custom_editor(p),
                           not_allowed=SUBFLOW_NOT_ALLOWED_TIPS if instance else None,
                           subflow_params=choices)
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
        from designer.dialogs.credentials_dialog import choose_connection

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
        current = fixed_value(self.spec, "provider", fnode.params)
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
            desc = label(doc_html(spec.description), "muted", self)
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
        if self.subflow_section is not None:
            self.subflow_section.sync()
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
                      and not condition_holds(spec, p, ctl, settings)]
            note = ""
            if hidden:
                value = fixed_value(spec, ctl, settings)
                labels = [p.label for p in hidden]
                listed = ", ".join(labels) if len(labels) <= 5 else \
                    ", ".join(labels[:4]) + f" and {len(labels) - 4} more"
                note = f"Not used with {quote_value(value)}, so hidden: {listed}."
            if ctl in self.rows:
                self.rows[ctl].set_note(note)
                self.rows[ctl].note.setToolTip(", ".join(p.label for p in hidden))
        for group, box in self.sections.items():
            names = [p.name for p in spec.params if p.group == group]
            shown = [n for n in names if visible[n]]
            box.setHidden(not shown)
            changed = sum(1 for n in shown if is_changed(spec, n, settings))
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
                      if (param := param_of(self.spec, p.field)) is not None
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

    def doc_label(self, node_id: str) -> str:
        """What the user calls a node: its name, else its type's name."""
        fnode, spec = self.doc.node(node_id), self.doc.spec(node_id)
        if fnode is None:
            return node_id
        return fnode.name or (spec.name if spec is not None else fnode.type)

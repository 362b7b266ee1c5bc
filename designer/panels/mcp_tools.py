"""The Tools section of an MCP Server node's properties (nodes/mcp).

"List tools" connects to the server (a task of the GUI's asyncio loop,
qasync: the window stays live) and fills the node's ``tools`` param with
what the server lists, keeping the choices already made. A table shows the
tools (offered or not, the server's name, the name the AI calls, what it
does); below it, for the selected tool, its arguments each with the scope
switch of a node param, AI or Custom (a fixed value the AI never sees), and
when its calls wait for a person and how often it may be called.

Every edit is one SetParam of the ``tools`` param on the undo stack; the
widgets only show what the document holds (``sync`` after every change)."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from designer.model.commands import SetParam
from designer.model.document import FlowDocument
from nodes.mcp.entries import McpToolEntry, entries_value, merge_listing, parse_entries
from nodes.mcp.server_node import split_args
from runtime.approval import ApprovalPolicy, Rule, default_policy
from runtime.flow import FlowNode, ToolOverride
from runtime.spec import ParamSpec, ParamType, ParamValue, Scope

from .editor_base import ValueEditor
from .json_editor import mono_font
from .mcp_tool_cell import COL_TOOL, DESC_ROLE, OFFERED_ROLE, ToolCell
from .panel_style import label, section
from .param_editors import ParamRow
from .tool_settings import (
    MAX_PER_RUN,
    MAX_PER_TURN,
    MODES,
    RuleRow,
    edited_rules,
    mode_combo,
    policy_line,
    rules_box,
)

TOOLS_PARAM = "tools"
PENDING_NOTE = "No value yet: until you type one, the AI fills it."
#: The table's most height; past it, it scrolls.
TABLE_MAX_H = 330
_JSON_PARAM_TYPES = {"string": ParamType.STR, "integer": ParamType.INT,
                     "number": ParamType.FLOAT, "boolean": ParamType.BOOL}


def offers_several(doc: FlowDocument, node_id: str) -> bool:
    """Whether a node offers an agent several tools (an MCP server): its
    properties get this section instead of the one-tool section."""
    fnode = doc.node(node_id)
    cls = doc.registry.get(fnode.type) if fnode is not None else None
    return hasattr(cls, "tool_entries")


def mcp_entry(doc: FlowDocument, node_id: str, offered_name: str) -> McpToolEntry | None:
    """The entry of a node's tool the AI calls ``offered_name``, or None."""
    fnode = doc.node(node_id)
    setting = fnode.params.get(TOOLS_PARAM) if fnode is not None else None
    if setting is None or setting.scope is not Scope.CUSTOM:
        return None
    return next((e for e in parse_entries(setting.value)[0]
                 if e.enabled and e.offered_name == offered_name), None)


def argument_spec(name: str, prop: dict[str, Any], required: bool) -> ParamSpec:
    """A tool argument as a node param the AI may fill or the designer fix,
    so that it gets the same row (scope switch, value editor) as a param."""
    kind = prop.get("type")
    choices = prop.get("enum") if isinstance(prop.get("enum"), list) else None
    if choices is not None and all(isinstance(c, str) for c in choices):
        ptype = ParamType.ENUM
    else:
        choices = None
        ptype = _JSON_PARAM_TYPES.get(kind, ParamType.JSON) if isinstance(kind, str) \
            else ParamType.JSON
    has_default = "default" in prop
    return ParamSpec(name=name, type=ptype, label=name,
                     description=str(prop.get("description") or ""),
                     default=prop.get("default"), has_default=has_default,
                     optional=not required and not has_default,
                     allowed_scopes=[Scope.AI, Scope.CUSTOM], default_scope=Scope.AI,
                     choices=choices)


def parse_args_line(text: str) -> tuple[Any, str | None]:
    """What the Args field's text stands for: (value, None), or (None, why)
    when it cannot be used. A line is kept as typed (the run splits it like
    a shell, nodes.mcp.server_node.split_args); text that starts with "["
    is a JSON list of strings; blank text is None (no arguments)."""
    line = text.strip()
    if not line:
        return None, None
    if line.startswith("["):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            return None, (f"A line that starts with [ is read as a JSON list: column "
                          f"{exc.colno}: {exc.msg}")
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            return None, "A JSON list of strings, such as [\"-m\", \"my_server\"]"
        return value, None
    try:
        split_args(text)
    except ValueError as exc:
        return None, str(exc)[:1].upper() + str(exc)[1:]
    return text, None


def args_line(value: Any) -> str:
    """The Args field's text for a stored value: a line as it was typed, a
    list as the shell line it stands for."""
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(a, str) for a in value):
        return shlex.join(value)
    return value if isinstance(value, str) else json.dumps(value)


class McpArgsEditor(ValueEditor):
    """The MCP Server node's Args: one line, as it would be typed after the
    command in a terminal (``-m my_server --port 8000``), with how it splits
    shown under it; a JSON list is read too. Text that cannot be split (an
    open quote) is not applied, and the line under it says why."""

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.edit = QLineEdit(self)
        self.edit.setObjectName("mcpArgs")
        self.edit.setFont(mono_font())
        self.edit.setPlaceholderText("-m my_server --port 8000")
        self.edit.setToolTip("Split like a shell splits a line: quote an argument that has "
                             "spaces (\"my file.txt\")")
        self.status = QLabel(self)
        self.status.setObjectName("jsonStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.layout_.addWidget(self.edit)
        self.layout_.addWidget(self.status)
        self.error: str | None = None
        self.edit.textEdited.connect(self._on_edit)
        self._show_status()

    def value(self) -> Any:
        return parse_args_line(self.edit.text())[0]

    def set_value(self, value: Any) -> None:
        current, error = parse_args_line(self.edit.text())
        if error is None and _split_or_none(current) == _split_or_none(value):
            return  # the text already means it: the user's own quoting stays
        self.edit.setText(args_line(value))
        self.error = None
        self._show_status()

    def _on_edit(self, text: str) -> None:
        value, self.error = parse_args_line(text)
        self._show_status()
        if self.error is None:
            self.value_changed.emit(value)

    def _show_status(self) -> None:
        if self.error:
            self.status.setText(f"Not applied. {self.error}")
            self.status.setProperty("state", "error")
        else:
            args = _split_or_none(parse_args_line(self.edit.text())[0]) or []
            n = len(args)
            self.status.setText("No arguments" if not n else
                                f"{n} argument{'s' * (n != 1)}: " + json.dumps(args))
            self.status.setProperty("state", "")
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)


def _split_or_none(value: Any) -> list[str] | None:
    try:
        return split_args(value) or None
    except ValueError:
        return None


def entry_policy_line(spec: Any, entry: McpToolEntry) -> str:
    """The tool's approval and limits in one line, as a tool node's."""
    fnode = FlowNode(id="_", type=spec.type, tool=ToolOverride(
        name=entry.offered_name, approval=entry.approval,
        max_calls_per_run=entry.max_calls_per_run, max_calls_per_turn=entry.max_calls_per_turn))
    return policy_line(spec, fnode)


class McpToolsSection(QWidget):
    """List tools, the table of tools, and the selected tool's settings."""

    rows_changed = Signal()  # argument or rule rows came or went (for the wheel guard)

    def __init__(self, doc: FlowDocument, node_id: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("mcpTools")
        self.doc, self.node_id = doc, node_id
        spec = doc.spec(node_id)
        assert spec is not None
        self.spec = spec
        self._shown: Any = object()  # the tools value the table shows
        self._selected = ""  # server name of the selected tool
        self._detail_key: tuple = ()
        self.arg_rows: dict[str, ParamRow] = {}
        self.rule_rows: list[RuleRow] = []
        # Arguments of the selected tool switched to Custom with no value
        # typed yet: shown as Custom, not pinned (a pinned null is an error,
        # whose banner pushed the whole panel down ~70 px as the person
        # clicked), and the AI fills them until a value comes.
        self._pending: set[str] = set()
        self.task: asyncio.Task | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(section("MCP tools", self))
        self.intro = label("List the server's tools, then choose which the AI may call. Fix "
                           "an argument (Custom) and the AI never sees it.", "muted", self)
        layout.addWidget(self.intro)
        head = QHBoxLayout()
        head.setSpacing(8)
        self.list_button = QPushButton("List tools", self)
        self.list_button.setObjectName("listToolsButton")
        self.list_button.setToolTip("Connect to the server and read its tools; your choices "
                                    "for the tools it still lists are kept")
        self.list_button.clicked.connect(self.list_tools)
        head.addWidget(self.list_button, 0)
        self.status = label("", "muted", self)
        head.addWidget(self.status, 1)
        layout.addLayout(head)
        self.error = label("", "fieldError", self)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        layout.addWidget(self.error)

        self.table = QTableWidget(0, 1, self)
        self.table.setObjectName("mcpToolTable")
        self.table.setHorizontalHeaderLabels(["Offered to the AI"])
        self.table.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft
                                                          | Qt.AlignmentFlag.AlignVCenter)
        self.table.horizontalHeaderItem(COL_TOOL).setToolTip(
            "Checked: the AI may call it. Each tool: its name on the server (→ the name the "
            "AI calls it, when renamed) and what it does")
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Renamed below the table (Name for the AI); a double-click goes there.
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)  # rows are measured at the column's width
        self.table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setItemDelegate(ToolCell(self.table))
        self.table.horizontalHeader().setSectionResizeMode(COL_TOOL,
                                                           QHeaderView.ResizeMode.Stretch)
        # Another width wraps the descriptions anew: the rows, then the
        # table, are measured again once the column has its new width.
        self._refit = QTimer(self)
        self._refit.setSingleShot(True)
        self._refit.setInterval(0)
        self._refit.timeout.connect(self._fit_table)
        self.table.horizontalHeader().sectionResized.connect(lambda *_: self._refit.start())
        self.table.itemChanged.connect(self._on_item)
        self.table.itemSelectionChanged.connect(self._on_select)
        self.table.itemDoubleClicked.connect(lambda _item: self._focus_rename())
        layout.addWidget(self.table)

        self.detail = QWidget(self)
        self.detail.setObjectName("mcpToolDetail")
        self.detail_layout = QVBoxLayout(self.detail)
        self.detail_layout.setContentsMargins(0, 4, 0, 0)
        self.detail_layout.setSpacing(6)
        layout.addWidget(self.detail)
        self.sync()

    def _fit_table(self) -> None:
        table = self.table
        table.resizeRowsToContents()
        rows = table.rowCount()
        height = table.horizontalHeader().height() + 2 * table.frameWidth() + sum(
            table.rowHeight(r) for r in range(rows)) + (0 if rows else 24)
        table.setFixedHeight(min(height, TABLE_MAX_H))

    def _focus_rename(self) -> None:
        edit = getattr(self, "rename_edit", None)
        if edit is not None and not edit.isHidden():
            edit.setFocus(Qt.FocusReason.OtherFocusReason)
            edit.selectAll()

    # -- the document ---------------------------------------------------------------
    def value(self) -> Any:
        fnode = self.doc.node(self.node_id)
        setting = fnode.params.get(TOOLS_PARAM) if fnode is not None else None
        return setting.value if setting is not None and setting.scope is Scope.CUSTOM else []

    def entries(self) -> list[McpToolEntry]:
        return parse_entries(self.value())[0]

    def entry(self, name: str) -> McpToolEntry | None:
        return next((e for e in self.entries() if e.name == name), None)

    def _push(self, entries: list[McpToolEntry], text: str, merge: bool = False) -> None:
        new = entries_value(entries)
        if new == self.value():
            return
        command = SetParam(self.doc, self.node_id, TOOLS_PARAM,
                           ParamValue(scope=Scope.CUSTOM, value=new), merge=merge)
        command.setText(text)
        self.doc.undo_stack.push(command)

    def _change(self, name: str, text: str, merge: bool = False, **fields: Any) -> None:
        """One tool's fields changed, as one undoable edit."""
        entries = self.entries()
        for i, e in enumerate(entries):
            if e.name == name:
                entries[i] = McpToolEntry.model_validate({**e.model_dump(), **fields})
        self._push(entries, text, merge)

    # -- List tools --------------------------------------------------------------------
    def list_tools(self) -> asyncio.Task:
        """Connect and list, as a task of the GUI's loop; returned for tests."""
        from designer.control.run_controller import qt_event_loop

        self.list_button.setEnabled(False)
        self.status.setText("Connecting…")
        self.error.hide()
        self.task = qt_event_loop().create_task(self._list())
        return self.task

    async def _list(self) -> None:
        from shiboken6 import isValid

        doc, node_id = self.doc, self.node_id
        fnode = doc.node(node_id)
        cls = doc.registry.get(fnode.type) if fnode is not None else None
        error, summary = "", ""
        try:
            if fnode is None or cls is None:
                return
            listed = await cls.list_server_tools(dict(fnode.params), fnode.name or node_id)
            if doc.node(node_id) is None:
                return  # the node went away meanwhile
            entries, summary = merge_listing(parse_entries(self.value())[0], listed)
            self._push(entries, "List tools")
        except Exception as exc:  # noqa: BLE001 - said under the button, never a traceback
            error = str(exc) if type(exc).__module__.startswith(("nodes", "runtime")) \
                else f"{type(exc).__name__}: {exc}"
        finally:
            if isValid(self):
                self.list_button.setEnabled(True)
                self.status.setText(f"Listed: {summary}." if summary else "")
                self.error.setText(error)
                self.error.setVisible(bool(error))

    # -- model -> widgets ---------------------------------------------------------------
    def sync(self) -> None:
        value = self.value()
        if value != self._shown:
            self._shown = json.loads(json.dumps(value))
            self._fill_table()
        self._sync_detail()

    def _fill_table(self) -> None:
        entries = self.entries()
        table = self.table
        table.blockSignals(True)
        table.setRowCount(len(entries))
        for row, e in enumerate(entries):
            tool = QTableWidgetItem(e.name)
            tool.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                          | Qt.ItemFlag.ItemIsUserCheckable)
            tool.setCheckState(Qt.CheckState.Checked if e.enabled else Qt.CheckState.Unchecked)
            tool.setData(Qt.ItemDataRole.UserRole, e.name)
            tool.setData(OFFERED_ROLE, e.offered_name)
            tool.setData(DESC_ROLE, " ".join(e.description.split()))
            renamed = f", renamed {e.offered_name} for the AI" if e.rename else ""
            tool.setToolTip(f"{e.name} on the server{renamed}; checked: the AI may call it. "
                            "Double-click to rename it."
                            + (f"\n\n{e.description}" if e.description else ""))
            table.setItem(row, COL_TOOL, tool)
        names = [e.name for e in entries]
        if self._selected not in names:
            self._selected = names[0] if names else ""
        if self._selected:
            table.selectRow(names.index(self._selected))
        table.blockSignals(False)
        self._fit_table()
        table.setVisible(bool(entries))
        offered = sum(1 for e in entries if e.enabled)
        if entries and not self.status.text().startswith("Listed"):
            self.status.setText(f"{offered} of {len(entries)} tools offered to the AI")
        elif not entries:
            self.status.setText("No tools listed yet")

    def _sync_detail(self) -> None:
        entry = self.entry(self._selected)
        args = entry.arguments() if entry is not None else {}
        key = (self._selected, tuple(args))
        if key != self._detail_key:
            self._detail_key = key
            self._build_detail(entry)
        if entry is None:
            return
        self.detail_title.setText(f"{entry.offered_name}()")
        self.server_name.setVisible(bool(entry.rename))
        if not self.rename_edit.hasFocus():
            self.rename_edit.setText(entry.rename or "")
        for arg, row in self.arg_rows.items():
            if arg in entry.pinned:
                self._pending.discard(arg)
                row.sync(ParamValue(scope=Scope.CUSTOM, value=entry.pinned[arg]))
            elif arg in self._pending:
                row.sync(ParamValue(scope=Scope.CUSTOM, value=None))
            else:
                row.sync(ParamValue(scope=Scope.AI, description=entry.arg_descriptions.get(arg)))
            row.set_note(PENDING_NOTE if arg in self._pending else "")
        self._sync_approval(entry)

    def _build_detail(self, entry: McpToolEntry | None) -> None:
        while self.detail_layout.count():
            item = self.detail_layout.takeAt(0)
            if item.widget() is not None:
                item.widget().hide()  # gone now, not when the loop next deletes it
                item.widget().deleteLater()
        self.arg_rows, self.rule_rows = {}, []
        self._pending.clear()
        self.detail.setVisible(entry is not None)
        if entry is None:
            self.rows_changed.emit()
            return
        box = self.detail
        add = self.detail_layout.addWidget
        self.detail_title = label("", "toolName", box, wrap=False)
        self.detail_title.setFont(mono_font())
        add(self.detail_title)
        self.server_name = label(f"{entry.name} on the server", "muted", box)
        add(self.server_name)
        if entry.description:
            add(label(entry.description, "", box))
        add(label("Name for the AI", "paramLabel", box, wrap=False))
        self.rename_edit = QLineEdit(box)
        self.rename_edit.setObjectName("mcpRename")
        self.rename_edit.setFont(mono_font())
        self.rename_edit.setPlaceholderText(entry.name)
        self.rename_edit.setToolTip("The function name the AI calls; empty: the server's name")
        self.rename_edit.editingFinished.connect(self._on_rename_edit)
        add(self.rename_edit)

        args = entry.arguments()
        required = set(entry.input_schema.get("required") or [])
        add(label("Arguments", "paramLabel", box, wrap=False) if args else
            label("Takes no arguments.", "muted", box))
        for arg, prop in args.items():
            row = ParamRow(argument_spec(arg, prop, arg in required), show_scope=True, parent=box)
            for scope in (Scope.MESSAGE, Scope.EXPRESSION):
                button = row.switch.buttons.get(scope)
                if button is not None:
                    button.hide()  # a tool call has no incoming message or template
            row.changed.connect(lambda value, merge, a=arg: self._on_argument(a, value, merge))
            self.arg_rows[arg] = row
            add(row)

        add(label("Ask a person before a call", "paramLabel", box, wrap=False))
        self.mode = mode_combo(box, self._on_mode)
        add(self.mode)
        self.policy_text = label("", "muted", box)
        add(self.policy_text)
        self.rules_box, self.rules_layout, self.add_rule_button = rules_box(
            box, self._add_rule, 6)
        add(self.rules_box)
        limits = QWidget(box)
        grid = QGridLayout(limits)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        self.per_run = self._limit_box(MAX_PER_RUN, "Most calls of this tool in one run, all "
                                                    "agents together")
        self.per_turn = self._limit_box(MAX_PER_TURN, "Most calls of this tool in one answer "
                                                      "of the LLM")
        self.per_run.valueChanged.connect(lambda v: self._on_limit("max_calls_per_run", v))
        self.per_turn.valueChanged.connect(lambda v: self._on_limit("max_calls_per_turn", v))
        grid.addWidget(label("Calls per run", "paramLabel", limits, wrap=False), 0, 0)
        grid.addWidget(label("Calls per answer", "paramLabel", limits, wrap=False), 0, 1)
        grid.addWidget(self.per_run, 1, 0)
        grid.addWidget(self.per_turn, 1, 1)
        add(limits)
        self.rows_changed.emit()

    def _limit_box(self, maximum: int, tip: str) -> QSpinBox:
        box = QSpinBox(self.detail)
        box.setRange(0, maximum)
        box.setSpecialValueText("no limit")
        box.setToolTip(tip)
        return box

    def _sync_approval(self, entry: McpToolEntry) -> None:
        policy = entry.approval
        default = default_policy(entry.offered_name, self.spec.type)
        self.mode.setItemText(0, "Default (" + ("asks: looks sensitive" if default.mode !=
                                                "never" else "never") + ")")
        self.mode.setCurrentIndex(self.mode.findData(policy.mode if policy else "default"))
        self.policy_text.setText(entry_policy_line(self.spec, entry))
        rules = list(policy.rules) if policy is not None else []
        if len(rules) != len(self.rule_rows):
            for row in self.rule_rows:
                row.hide()
                row.deleteLater()
            self.rule_rows = []
            for _ in rules:
                row = RuleRow(list(entry.arguments()), self.rules_box)
                row.edited.connect(lambda r=row: self._on_rule(r))
                row.removed.connect(lambda r=row: self._remove_rule(r))
                self.rules_layout.addWidget(row)
                row.show()
                self.rule_rows.append(row)
            self.rows_changed.emit()
        for row, rule in zip(self.rule_rows, rules, strict=True):
            if not row.editing():
                row.show_rule(rule)
        self.rules_box.setVisible(policy is not None and policy.mode == "rules")
        for box, value in ((self.per_run, entry.max_calls_per_run),
                           (self.per_turn, entry.max_calls_per_turn)):
            box.blockSignals(True)
            box.setValue(value or 0)
            box.blockSignals(False)

    # -- widgets -> model ---------------------------------------------------------------
    def _on_select(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        item = self.table.item(rows[0].row(), COL_TOOL)
        name = item.data(Qt.ItemDataRole.UserRole) if item is not None else ""
        if name and name != self._selected:
            self._selected = name
            self._sync_detail()

    def _on_item(self, item: QTableWidgetItem) -> None:
        row = item.row()
        tool = self.table.item(row, COL_TOOL)
        name = tool.data(Qt.ItemDataRole.UserRole) if tool is not None else None
        entry = self.entry(name) if name else None
        if entry is None:
            return
        if item.column() == COL_TOOL:
            on = item.checkState() == Qt.CheckState.Checked
            if on != entry.enabled:
                self._change(name, f"{'Offer' if on else 'Stop offering'} {name}", enabled=on)

    def _on_rename_edit(self) -> None:
        entry = self.entry(self._selected)
        if entry is not None:
            self._rename(entry, self.rename_edit.text())

    def _rename(self, entry: McpToolEntry, text: str) -> None:
        new = text.strip() or None
        if new == entry.name:
            new = None
        if new != entry.rename:
            self._change(entry.name, f"Rename {entry.name}" if new else
                         f"Give {entry.name} its server name", rename=new)
        else:
            self._shown = object()  # show the stored name again in the table
            self.sync()

    def _on_argument(self, arg: str, value: ParamValue | None, merge: bool) -> None:
        entry = self.entry(self._selected)
        if entry is None:
            return
        pinned = dict(entry.pinned)
        descriptions = dict(entry.arg_descriptions)
        if value is not None and value.scope is Scope.CUSTOM and value.value is None:
            # Custom, nothing typed yet (or the value deleted): no pin until
            # there is a value; the row stays Custom and says so.
            self._pending.add(arg)
            if arg not in pinned:
                self._sync_detail()
                return
            pinned.pop(arg)
            text = f"Let the AI fill {arg} of {entry.name} until a value is typed"
        elif value is not None and value.scope is Scope.CUSTOM:
            self._pending.discard(arg)
            pinned[arg] = value.value
            text = f"Fix {arg} of {entry.name}"
        else:
            self._pending.discard(arg)
            pinned.pop(arg, None)
            if value is not None and value.description:
                descriptions[arg] = value.description
            else:
                descriptions.pop(arg, None)
            text = f"Let the AI fill {arg} of {entry.name}"
        self._change(entry.name, text, merge, pinned=pinned, arg_descriptions=descriptions)

    def _base_policy(self, entry: McpToolEntry) -> ApprovalPolicy:
        if entry.approval is not None:
            return entry.approval.model_copy(deep=True)
        return default_policy(entry.offered_name, self.spec.type)

    def _on_mode(self, index: int) -> None:
        entry = self.entry(self._selected)
        if entry is None:
            return
        key = self.mode.itemData(index)
        if key == "default":
            self._change(entry.name, f"Approval of {entry.name}: default", approval=None)
            return
        policy = self._base_policy(entry)
        policy.mode = key
        if key == "rules" and not policy.rules:
            args = list(entry.arguments())
            policy.rules = [Rule(arg=args[0] if args else "arg", op="present")]
        self._change(entry.name, f"Approval of {entry.name}: {dict(MODES)[key].lower()}",
                     approval=policy.model_dump(mode="json"))

    def _add_rule(self) -> None:
        entry = self.entry(self._selected)
        if entry is None:
            return
        policy = self._base_policy(entry)
        args = list(entry.arguments())
        policy.rules = [*policy.rules, Rule(arg=args[0] if args else "arg", op="present")]
        policy.mode = "rules"
        self._change(entry.name, f"Add an approval rule to {entry.name}",
                     approval=policy.model_dump(mode="json"))

    def _remove_rule(self, row: RuleRow) -> None:
        entry = self.entry(self._selected)
        if entry is None or row not in self.rule_rows:
            return
        index = self.rule_rows.index(row)
        policy = self._base_policy(entry)
        policy.rules = [r for i, r in enumerate(policy.rules) if i != index]
        self._change(entry.name, f"Remove an approval rule of {entry.name}",
                     approval=policy.model_dump(mode="json"))

    def _on_rule(self, row: RuleRow) -> None:
        entry = self.entry(self._selected)
        if entry is None or row not in self.rule_rows:
            return
        policy = self._base_policy(entry)
        rules = edited_rules(self.rule_rows, row, policy.rules)
        if rules is None:
            return
        policy.rules = rules
        self._change(entry.name, f"Change an approval rule of {entry.name}",
                     approval=policy.model_dump(mode="json"))

    def _on_limit(self, field: str, value: int) -> None:
        entry = self.entry(self._selected)
        if entry is None:
            return
        what = "per run" if field == "max_calls_per_run" else "per answer"
        self._change(entry.name, f"Calls {what} of {entry.name}", True, **{field: value or None})

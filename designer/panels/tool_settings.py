"""The "Approval and limits" section of a tool node's properties: when its
calls wait for a person (never, always, when an argument matches a rule),
which AI arguments a person confirms, how long a call waits, and how often
the tool may be called.

Everything here edits the flow's ``tool`` object (runtime.flow.ToolOverride)
through one undoable command per edit (designer.model.commands.SetToolSettings);
the widgets only show what the document holds. The texts that describe a
policy in one line live here too, without Qt, so that the tool previews
and the tests read the same words."""

from __future__ import annotations

import json
import re
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLineEdit,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from designer.model.commands import SetToolSettings
from designer.model.document import FlowDocument
from runtime.approval import (
    _OP_TEXT,
    _SENSITIVE,
    DEFAULT_WAIT_SECONDS,
    MAX_RULES,
    MAX_WAIT_SECONDS,
    ApprovalPolicy,
    Rule,
    default_policy,
)
from runtime.flow import FlowNode, ToolOverride, tool_name
from runtime.spec import NodeSpec

from .panel_style import CollapsibleSection, label

#: Operators in the order a person looks for them, with the words the form shows.
OPS: list[tuple[str, str]] = [(op, _OP_TEXT[op]) for op in (
    "endswith", "not_endswith", "equals", "not_equals", "contains", "not_contains",
    "startswith", "not_startswith", "in", "not_in", "gt", "ge", "lt", "le",
    "matches", "not_matches", "present")]
NUMERIC_OPS = {"gt", "ge", "lt", "le"}
LIST_OPS = {"in", "not_in"}
REGEX_OPS = {"matches", "not_matches"}

MODES = [("default", "Default"), ("never", "Never ask"), ("always", "Ask for every call"),
         ("rules", "Ask when a rule matches")]


def edited_rules(rows: list[Any], row: Any, rules: list[Any]) -> list[Any] | None:
    """``rules`` with the rule of ``row`` (one of ``rows``, in the same
    order) in its place, or None when there is nothing to change: the row's
    text is wrong (said on the row) or its rule is there already."""
    try:
        rule = row.rule()
    except ValueError as exc:
        row.set_error(f"{exc}; not applied")
        return None
    row.set_error("")
    index = rows.index(row)
    if index < len(rules) and rules[index] == rule:
        return None
    out = list(rules)
    out[index:index + 1] = [rule]
    return out


def mode_combo(parent: QWidget, on_mode: Any) -> QComboBox:
    """The "Ask a person before a call" choice (MODES), calling ``on_mode``
    with the index a person picks."""
    combo = QComboBox(parent)
    for key, text in MODES:
        combo.addItem(text, key)
    combo.setToolTip("When a call of this tool waits for a person to approve, edit or "
                     "reject it before it runs")
    combo.activated.connect(on_mode)
    return combo


def rules_box(parent: QWidget, on_add: Any, spacing: int,
              note: str = "") -> tuple[QWidget, QVBoxLayout, QToolButton]:
    """The approval rules' editor: a box with ``note`` on top (if any), the
    layout the rule rows go in, and "+ Add rule" (calling ``on_add``)."""
    box = QWidget(parent)
    outer = QVBoxLayout(box)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.setSpacing(spacing)
    rows = QVBoxLayout()
    rows.setSpacing(spacing)
    if note:
        outer.addWidget(label(note, "muted", box))
    outer.addLayout(rows)
    button = QToolButton(box)
    button.setObjectName("credentialsButton")
    button.setText("+ Add rule")
    button.clicked.connect(on_add)
    outer.addWidget(button, 0, Qt.AlignmentFlag.AlignLeft)
    return box, rows, button
MAX_PER_RUN, MAX_PER_TURN = 1_000_000, 1000


# -- words (no Qt) -------------------------------------------------------------------

def sensitive_word(name: str, node_type: str) -> str | None:
    """The word that makes a tool look sensitive ("send"), or None."""
    for text in (name, node_type):
        m = _SENSITIVE.search(text or "")
        if m:
            return m.group(2).lower()
    return None


def default_text(spec: NodeSpec, fnode: FlowNode) -> str:
    """What "Default" means for this tool: "asks: looks sensitive (send)"
    or "never" (an agent used as a tool never asks itself: its tools do)."""
    if spec.has_tools_port:
        return "never"
    word = sensitive_word(tool_name(spec, fnode) or "", spec.type)
    return f"asks: looks sensitive ({word})" if word else "never"


def effective_policy(spec: NodeSpec, fnode: FlowNode) -> ApprovalPolicy:
    """The policy a run applies (as runtime.tools.build_tool decides)."""
    if fnode.tool is not None and fnode.tool.approval is not None:
        return fnode.tool.approval
    if spec.has_tools_port:
        return ApprovalPolicy(mode="never")
    return default_policy(tool_name(spec, fnode) or "", spec.type)


def wait_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    if seconds < 86400:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 86400:g} d"


def policy_line(spec: NodeSpec, fnode: FlowNode) -> str:
    """The tool's approval and limits in one line, for previews and the
    section's closed header: "Asks when to does not end with "@x.com" ·
    waits 5 min · at most 3 calls per run"."""
    tool = fnode.tool
    policy = tool.approval if tool is not None else None
    if policy is None:
        default = default_text(spec, fnode)
        parts = ["Default: " + ("asks for every call" + default[4:] if default != "never"
                                else "never asks")]
        asks = default != "never"
    else:
        asks = policy.mode != "never" or bool(policy.confirm)
        if policy.mode == "never":
            parts = ["Never asks"]
        elif policy.mode == "always":
            parts = ["Asks for every call"]
        elif not policy.rules:
            parts = ["Asks when a rule matches (no rules yet: never)"]
        elif len(policy.rules) == 1:
            parts = [f"Asks when {policy.rules[0].text()}"]
        else:
            parts = [f"Asks when any of {len(policy.rules)} rules matches"]
        if policy.confirm:
            parts.append("a person confirms " + ", ".join(policy.confirm))
    if asks:
        wait = policy.timeout_seconds if policy is not None else DEFAULT_WAIT_SECONDS
        parts.append(f"waits {wait_text(wait)}")
    limits = []
    if tool is not None and tool.max_calls_per_run:
        limits.append(f"{tool.max_calls_per_run} per run")
    if tool is not None and tool.max_calls_per_turn:
        limits.append(f"{tool.max_calls_per_turn} per answer")
    if limits:
        parts.append("at most " + ", ".join(limits))
    return " · ".join(parts)


def policy_short(spec: NodeSpec, fnode: FlowNode) -> str:
    """A few words for the closed section's header, which shares its line
    with the title in a narrow dock: "asks always", "1 rule", "never"."""
    tool = fnode.tool
    policy = tool.approval if tool is not None else None
    if policy is None:
        text = "default: " + ("asks" if default_text(spec, fnode) != "never" else "never")
    elif policy.mode == "rules":
        n = len(policy.rules)
        text = f"asks on {n} rule{'s' * (n != 1)}"
    else:
        text = {"never": "never asks", "always": "asks always"}[policy.mode]
    if policy is not None and policy.confirm:
        text += " + confirm"
    if tool is not None and (tool.max_calls_per_run or tool.max_calls_per_turn):
        text += " · limits"
    return text


def rule_from_fields(arg: str, op: str, value_text: str) -> Rule:
    """A Rule from what a person typed; ValueError saying what is wrong.
    Numbers for > and <, a comma-separated list for "is one of", a regular
    expression that compiles for "matches"."""
    arg = arg.strip()
    if not arg:
        raise ValueError("pick the argument the rule tests")
    text = value_text.strip()
    value: Any
    if op == "present":
        value = None
    elif op in NUMERIC_OPS:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"“{_OP_TEXT[op]}” compares numbers: type a number") from None
        value = int(value) if value.is_integer() else value
    elif op in LIST_OPS:
        value = [v.strip() for v in text.split(",") if v.strip()]
        if not value:
            raise ValueError("type the values, separated by commas")
    elif op in REGEX_OPS:
        try:
            re.compile(text)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        value = text
    else:
        if not text:
            raise ValueError("type the value to compare with")
        value = text
    return Rule(arg=arg, op=op, value=value)  # type: ignore[arg-type]


def value_text(rule: Rule) -> str:
    if rule.op == "present" or rule.value is None:
        return ""
    if isinstance(rule.value, list):
        return ", ".join(str(v) for v in rule.value)
    return rule.value if isinstance(rule.value, str) else json.dumps(rule.value)


def ai_arguments(spec: NodeSpec, fnode: FlowNode) -> list[str]:
    """The arguments the AI fills for this tool (its schema's properties)."""
    from runtime.tools import tool_schema

    try:
        return list(tool_schema(spec, fnode).get("properties", {}))
    except Exception:
        return []


# -- widgets ---------------------------------------------------------------------------

class RuleRow(QFrame):
    """One rule: argument, operator, value, and a remove button. Reports
    a valid rule, or says under itself why what is typed is not one."""

    edited = Signal()
    removed = Signal()

    def __init__(self, args: list[str], parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("ruleRow")
        self.arg = QComboBox(self)
        self.arg.setEditable(True)  # a dotted path into an object argument is allowed
        self.arg.addItems(args)
        self.arg.setToolTip("The argument the rule tests (a dotted path for a field inside "
                            "one); a list argument matches when any item does")
        self.op = QComboBox(self)
        for op, text in OPS:
            self.op.addItem(text, op)
        self.op.setToolTip("Text comparisons ignore upper and lower case")
        for combo in (self.arg, self.op):  # as narrow as the dock, not as the longest item
            _narrow(combo)
        self.value = QLineEdit(self)
        self.value.setPlaceholderText("value")
        self.value.setMinimumHeight(self.value.sizeHint().height())  # never squeezed
        self.remove = QToolButton(self)
        self.remove.setText("✕")
        self.remove.setAutoRaise(True)
        self.remove.setToolTip("Remove this rule")
        self.error = label("", "fieldError", self)
        self.error.hide()
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(3)
        grid.addWidget(self.arg, 0, 0)
        grid.addWidget(self.op, 0, 1)
        grid.addWidget(self.value, 1, 0, 1, 2)
        grid.addWidget(self.remove, 1, 2)
        grid.addWidget(self.error, 2, 0, 1, 3)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 2)
        # Its full height always: the form must not squeeze a rule's value.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.arg.activated.connect(lambda _i: self.edited.emit())
        self.arg.lineEdit().editingFinished.connect(self.edited.emit)
        self.op.activated.connect(self._op_changed)
        self.value.editingFinished.connect(self.edited.emit)
        self.remove.clicked.connect(self.removed.emit)

    def _op_changed(self, _index: int) -> None:
        self._placeholder()
        self.edited.emit()

    def _placeholder(self) -> None:
        op = self.op.currentData()
        self.value.setEnabled(op != "present")
        self.value.setPlaceholderText(
            "" if op == "present" else "a number" if op in NUMERIC_OPS else
            "values, separated by commas" if op in LIST_OPS else
            "a regular expression" if op in REGEX_OPS else "value")

    def show_rule(self, rule: Rule) -> None:
        self.arg.setCurrentText(rule.arg)
        self.op.setCurrentIndex(max(0, self.op.findData(rule.op)))
        self.value.setText(value_text(rule))
        self._placeholder()
        self.set_error("")

    def rule(self) -> Rule:
        """The rule as typed; ValueError when it is not one."""
        return rule_from_fields(self.arg.currentText(), self.op.currentData(), self.value.text())

    def set_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))
        self.value.setProperty("invalid", bool(text))
        self.value.style().unpolish(self.value)
        self.value.style().polish(self.value)

    def editing(self) -> bool:
        return any(w.hasFocus() for w in (self.arg, self.arg.lineEdit(), self.value))


class ToolSettingsSection(CollapsibleSection):
    """Approval and limits of one tool node; closed by default, its header
    keeps the policy in one line."""

    rows_changed = Signal()  # rule rows came or went (for the wheel guard)

    def __init__(self, doc: FlowDocument, node_id: str, parent: QWidget, *,
                 opened: bool = False) -> None:
        super().__init__("Approval and limits", parent, opened=opened)
        self.setObjectName("section_tool_settings")
        self.doc, self.node_id = doc, node_id
        spec = doc.spec(node_id)
        assert spec is not None
        self.spec = spec
        self.rule_rows: list[RuleRow] = []
        self._shown: ToolOverride | None | bool = False  # False: nothing shown yet
        self._args: list[str] = []
        body = self.body

        self.mode = mode_combo(body, self._on_mode)
        _narrow(self.mode)
        # The whole policy in words, as the tool previews say it.
        self.policy_text = label("", "muted", body)
        self.add(self.policy_text)
        self.add(self._field("Ask a person before a call", self.mode))

        self.rules_box, self.rules_layout, self.add_rule_button = rules_box(
            body, self._add_rule, 8, "A call waits when any rule matches its arguments.")
        self.add(self.rules_box)

        self.confirm_box = QWidget(body)
        self.confirm_layout = QVBoxLayout(self.confirm_box)
        self.confirm_layout.setContentsMargins(0, 0, 0, 0)
        self.confirm_layout.setSpacing(2)
        self.confirm_layout.addWidget(label("A person confirms", "paramLabel", self.confirm_box,
                                            wrap=False))
        self.confirm_note = label("A call that sets any of these waits, whatever the mode, and "
                                  "the person may edit them.", "muted", self.confirm_box)
        self.confirm_layout.addWidget(self.confirm_note)
        self.confirm_checks: dict[str, QCheckBox] = {}
        self.confirm_rows = QVBoxLayout()
        self.confirm_rows.setSpacing(0)
        self.confirm_layout.addLayout(self.confirm_rows)
        self.add(self.confirm_box)

        self.wait = QSpinBox(body)
        self.wait.setMinimumWidth(0)
        self.wait.setRange(1, int(MAX_WAIT_SECONDS))
        self.wait.setSuffix(" s")
        self.wait.setToolTip("How long a call waits for a decision; then it is rejected and the "
                             "AI reads why")
        self.wait.valueChanged.connect(self._on_wait)
        self.wait_note = label("", "muted", body, wrap=False)
        wait_row = QWidget(body)
        wr = QHBoxLayout(wait_row)
        wr.setContentsMargins(0, 0, 0, 0)
        wr.addWidget(self.wait, 1)
        wr.addWidget(self.wait_note)
        self.wait_field = self._field("Wait before rejecting", wait_row)
        self.add(self.wait_field)

        self.per_run = self._limit_box(MAX_PER_RUN, "Most calls of this tool in one run, all "
                                                    "agents together; past it a call is refused "
                                                    "and the AI reads why")
        self.per_turn = self._limit_box(MAX_PER_TURN, "Most calls of this tool in one answer "
                                                      "of the LLM; more are refused")
        self.per_run.valueChanged.connect(lambda v: self._on_limit("max_calls_per_run", v))
        self.per_turn.valueChanged.connect(lambda v: self._on_limit("max_calls_per_turn", v))
        limits = QWidget(body)
        grid = QGridLayout(limits)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        grid.addWidget(label("Calls per run", "paramLabel", limits, wrap=False), 0, 0)
        grid.addWidget(label("Calls per answer", "paramLabel", limits, wrap=False), 0, 1)
        grid.addWidget(self.per_run, 1, 0)
        grid.addWidget(self.per_turn, 1, 1)
        self.add(limits)
        # A call that answers at once with a tracking id while the node works
        # on (docs/agents.md, Background tools); unset: as its author declared.
        self.background = QCheckBox("Run in the background", body)
        self.background.setToolTip("The call answers the agent at once with a tracking id; "
                                   "the node works on, and the agent learns the result later "
                                   "(task_status, or a wake-up turn)")
        self.background.toggled.connect(self._on_background)
        self.add(self.background)
        self.body_layout.setSpacing(10)
        self.sync()

    def _author_background(self) -> bool:
        cls = self.doc.registry.get(self.spec.type)
        return bool(getattr(cls, "background", False))

    def _on_background(self, on: bool) -> None:
        # Back to the author's choice stores nothing; else the flow says it.
        value = None if on == self._author_background() else on
        self._push("Run in the background" if on else "Run in the foreground", "",
                   background=value)

    # -- building helpers ---------------------------------------------------------------
    def _field(self, title: str, widget: QWidget) -> QWidget:
        box = QWidget(self.body)
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addWidget(label(title, "paramLabel", box, wrap=False))
        lay.addWidget(widget)
        return box

    def _limit_box(self, maximum: int, tip: str) -> QSpinBox:
        box = QSpinBox(self.body)
        box.setRange(0, maximum)
        box.setSpecialValueText("no limit")
        box.setToolTip(tip)
        return box

    # -- model -> widgets ---------------------------------------------------------------
    def fnode(self) -> FlowNode | None:
        return self.doc.node(self.node_id)

    def policy(self) -> ApprovalPolicy | None:
        fnode = self.fnode()
        return fnode.tool.approval if fnode is not None and fnode.tool is not None else None

    def sync(self) -> None:
        """Show the node's settings; called on every change of the node
        (undo included). Rows being typed in are left alone."""
        fnode = self.fnode()
        if fnode is None:
            return
        line = policy_line(self.spec, fnode)
        self.set_summary(policy_short(self.spec, fnode))
        self.summary.setToolTip(line)
        self.policy_text.setText(line)
        default = default_text(self.spec, fnode)
        self.mode.setItemText(0, f"Default ({default})")
        args = ai_arguments(self.spec, fnode)
        tool = fnode.tool.model_copy(deep=True) if fnode.tool else None
        if tool == self._shown and args == self._args:
            return
        self._shown = tool
        policy = tool.approval if tool is not None else None
        self.mode.setCurrentIndex(self.mode.findData(policy.mode if policy else "default"))
        self._sync_confirm(args, policy)
        self._sync_rules(args, policy)
        self._args = args
        self.rules_box.setVisible(policy is not None and policy.mode == "rules")
        asks = policy is not None and (policy.mode != "never" or bool(policy.confirm)) or \
            (policy is None and default != "never")
        wait = policy.timeout_seconds if policy is not None else DEFAULT_WAIT_SECONDS
        with _blocked(self.background):
            on = tool.background if tool is not None and tool.background is not None \
                else self._author_background()
            self.background.setChecked(bool(on))
        with _blocked(self.wait, self.per_run, self.per_turn):
            if not self.wait.hasFocus():
                self.wait.setValue(int(round(wait)))
            self.per_run.setValue((tool.max_calls_per_run or 0) if tool else 0)
            self.per_turn.setValue((tool.max_calls_per_turn or 0) if tool else 0)
        self.wait_note.setText(wait_text(wait) if wait >= 60 else "")
        self.wait_field.setVisible(asks)

    def _sync_confirm(self, args: list[str], policy: ApprovalPolicy | None) -> None:
        if args != list(self.confirm_checks):
            for box in self.confirm_checks.values():
                box.deleteLater()
            self.confirm_checks = {}
            for name in args:
                box = QCheckBox(name, self.confirm_box)
                box.setToolTip(f"A call that sets {name} waits for a person, who may edit it")
                box.clicked.connect(lambda on, n=name: self._on_confirm(n, on))
                self.confirm_rows.addWidget(box)
                box.show()
                self.confirm_checks[name] = box
        chosen = set(policy.confirm) if policy else set()
        for name, box in self.confirm_checks.items():
            box.setChecked(name in chosen)
        self.confirm_box.setVisible(bool(args))

    def _sync_rules(self, args: list[str], policy: ApprovalPolicy | None) -> None:
        rules = list(policy.rules) if policy else []
        # Keep the rows a person is typing in while the count is the same.
        if len(rules) == len(self.rule_rows) and args == self._args:
            for row, rule in zip(self.rule_rows, rules, strict=True):
                if not row.editing():
                    row.show_rule(rule)
            return
        for row in self.rule_rows:
            row.deleteLater()
        self.rule_rows = []
        for rule in rules:
            self._new_row(args).show_rule(rule)
        self.add_rule_button.setEnabled(len(rules) < MAX_RULES)
        self.rows_changed.emit()

    def _new_row(self, args: list[str]) -> RuleRow:
        row = RuleRow(args, self.rules_box)
        row.edited.connect(lambda r=row: self._on_rule_edited(r))
        row.removed.connect(lambda r=row: self._remove_rule(r))
        self.rules_layout.addWidget(row)
        row.show()  # at once, not when the layout next runs
        self.rule_rows.append(row)
        return row

    # -- widgets -> model (one command per edit) ------------------------------------------
    def _push(self, text: str, key: str = "", **fields: Any) -> None:
        fnode = self.fnode()
        if fnode is None:
            return
        current = fnode.tool or ToolOverride()
        if all(getattr(current, k) == v for k, v in fields.items()):
            return
        self.doc.undo_stack.push(SetToolSettings(self.doc, self.node_id, text, key, **fields))

    def _base_policy(self) -> ApprovalPolicy:
        """The policy to edit: the node's own, else the default made explicit."""
        policy = self.policy()
        if policy is not None:
            return policy.model_copy(deep=True)
        fnode = self.fnode()
        assert fnode is not None
        return effective_policy(self.spec, fnode).model_copy(deep=True)

    def _on_mode(self, index: int) -> None:
        key = self.mode.itemData(index)
        if key == "default":
            self._push("Approval: default", approval=None)
            return
        policy = self._base_policy()
        policy.mode = key
        self._push(f"Approval: {dict(MODES)[key].lower()}", approval=policy)

    def _on_confirm(self, name: str, on: bool) -> None:
        policy = self._base_policy()
        confirm = [a for a in policy.confirm if a != name]
        if on:
            confirm.append(name)
        policy.confirm = [a for a in self._args if a in confirm] + \
            [a for a in confirm if a not in self._args]
        self._push(f"{'A person confirms' if on else 'No confirmation of'} {name}",
                   approval=policy)

    def _on_wait(self, seconds: int) -> None:
        self.wait_note.setText(wait_text(seconds) if seconds >= 60 else "")
        policy = self._base_policy()
        if policy.timeout_seconds == seconds:
            return
        policy.timeout_seconds = float(seconds)
        self._push("Change the wait for approval", key="wait", approval=policy)

    def _on_limit(self, field: str, value: int) -> None:
        what = "per run" if field == "max_calls_per_run" else "per answer"
        self._push(f"Change calls {what}", key=field, **{field: value or None})

    def _add_rule(self) -> None:
        policy = self._base_policy()
        if len(policy.rules) >= MAX_RULES:
            return
        arg = self._args[0] if self._args else "arg"
        policy.rules = [*policy.rules, Rule(arg=arg, op="present")]
        policy.mode = "rules"
        self._push("Add an approval rule", approval=policy)

    def _remove_rule(self, row: RuleRow) -> None:
        if row not in self.rule_rows:
            return
        index = self.rule_rows.index(row)
        policy = self._base_policy()
        policy.rules = [r for i, r in enumerate(policy.rules) if i != index]
        self._push("Remove an approval rule", approval=policy)

    def _on_rule_edited(self, row: RuleRow) -> None:
        if row not in self.rule_rows:
            return
        policy = self._base_policy()
        rules = edited_rules(self.rule_rows, row, policy.rules)
        if rules is not None:
            policy.rules = rules
            self._push("Change an approval rule", approval=policy)


def _narrow(combo: QComboBox) -> None:
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(4)


class _blocked:  # noqa: N801 - used as a statement: with _blocked(a, b):
    """Signals of some widgets off for a block, so that showing the model
    does not push it back as an edit."""

    def __init__(self, *widgets: QWidget) -> None:
        self.widgets = widgets

    def __enter__(self) -> None:
        self.old = [w.blockSignals(True) for w in self.widgets]

    def __exit__(self, *exc: object) -> None:
        for w, old in zip(self.widgets, self.old, strict=True):
            w.blockSignals(old)

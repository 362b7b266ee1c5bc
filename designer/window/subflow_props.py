"""Subflow > Subflow Properties… (issue #25, docs/subflows.md "Declaring
params"): the header of the definition a subflow tab edits (label,
description, result) and the params its instances set (name, label, type,
default, description, AI allowed, choices), the Node-RED "Edit subflow
properties" of Switchboard.

OK checks every row through the model (SubflowParam, SubflowDef) and says
what is wrong in the dialog, naming the row; nothing changes until it is
right. Then the change is ONE undo step on the tab's stack: for one of the
flow's own definitions through ``flow_edit.ApplyFlow`` (a renamed param's
settings on the instances go with it to the new name); for a library
definition's copy on the copy (Save to Library writes it)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from PySide6.QtGui import QUndoCommand
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from runtime.flow.model import SubflowDef, SubflowParam
from runtime.spec import ParamType

from ..panels.panel_style import form_error_and_buttons

#: The type column's choices, in order.
TYPES = ["str", "int", "float", "bool", "enum", "json", "secret"]
#: The table's columns.
COLUMNS = ["Name", "Label", "Type", "Default", "Description", "AI allowed", "Choices (enum)"]
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_FIELDS = ("label", "description", "result", "params")


# -- defaults: text <-> value per type ---------------------------------------------------
def default_text(p: SubflowParam) -> str:
    """How a param's default shows in its cell."""
    v = p.default
    if v is None:
        return ""
    if p.secret or p.type is ParamType.SECRET:
        if isinstance(v, dict) and set(v) == {"env"}:
            return str(v["env"])
        return json.dumps(v)
    if p.type is ParamType.BOOL:
        return "true" if v else "false"
    if p.type is ParamType.JSON or not isinstance(v, str | int | float):
        return json.dumps(v)
    return str(v)


def parse_default(kind: str, text: str) -> Any:
    """The default a cell's text means for a param of type ``kind``; a
    ValueError says why not."""
    text = text.strip()
    if not text:
        return None
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"default '{text}' is not a whole number") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"default '{text}' is not a number") from None
    if kind == "bool":
        low = text.lower()
        if low in ("true", "yes", "1", "on"):
            return True
        if low in ("false", "no", "0", "off"):
            return False
        raise ValueError(f"default '{text}' is not true or false")
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"default is not JSON ({exc.msg} at column {exc.colno})") from None
    if kind == "secret":
        if text.startswith("{"):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                raise ValueError("default is neither an environment variable's name nor "
                                 'a reference like {"keyring": "SERVICE", "username": "USER"}'
                                 ) from None
        if not ENV_NAME_RE.match(text):
            raise ValueError(f"a secret's default is the NAME of an environment variable "
                             f"holding it, never the secret itself; '{text}' is not a name")
        return {"env": text}
    return text


def _explain(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        msg = str(e.get("msg", "")).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in e.get("loc", ()))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


# -- the dialog -----------------------------------------------------------------------------
class _Row:
    """One param's widgets; ``original`` is the name it had when the dialog
    opened (None: added here), for carrying instances' settings over."""

    def __init__(self, table: QTableWidget, p: SubflowParam | None) -> None:
        self.original = p.name if p is not None else None
        self.base = p.model_dump() if p is not None else {}
        self.name = QLineEdit(p.name if p else "")
        self.name.setPlaceholderText("name")
        self.label = QLineEdit(p.label if p else "")
        self.type = QComboBox()
        self.type.addItems(TYPES)
        kind = "secret" if p is not None and (p.secret or p.type is ParamType.SECRET) else (
            p.type.value if p is not None else "str")
        self.type.setCurrentText(kind)
        self.default = QLineEdit(default_text(p) if p else "")
        self.description = QLineEdit(p.description if p else "")
        self.ai = QCheckBox()
        self.ai.setChecked(bool(p and p.ai_allowed))
        self.ai_cell = QWidget()  # the box, kept left in its cell
        box = QHBoxLayout(self.ai_cell)
        box.setContentsMargins(8, 0, 0, 0)
        box.addWidget(self.ai)
        self.choices = QLineEdit(", ".join(p.choices or []) if p else "")
        self.choices.setPlaceholderText("a, b, c")
        self.type.currentTextChanged.connect(lambda *_: self.follow_type())
        self.follow_type()

    def widgets(self) -> list[QWidget]:
        return [self.name, self.label, self.type, self.default, self.description, self.ai_cell,
                self.choices]

    def state(self) -> tuple:
        return (self.original, self.base, self.name.text(), self.label.text(),
                self.type.currentText(), self.default.text(), self.description.text(),
                self.ai.isChecked(), self.choices.text())

    def set_state(self, state: tuple) -> None:
        (self.original, self.base, name, label, kind, default, description, ai,
         choices) = state
        self.name.setText(name)
        self.label.setText(label)
        self.type.setCurrentText(kind)
        self.default.setText(default)
        self.description.setText(description)
        self.ai.setChecked(ai)
        self.choices.setText(choices)
        self.follow_type()

    def follow_type(self) -> None:
        kind = self.type.currentText()
        secret = kind == "secret"
        if secret:
            self.ai.setChecked(False)
        self.ai.setEnabled(not secret)
        self.ai.setToolTip("A secret is never given to the AI" if secret else
                           "Instances may hand this param to the AI (scope AI)")
        self.choices.setEnabled(kind == "enum")
        self.default.setPlaceholderText({
            "secret": "ENV_VAR_NAME", "json": '{"a": 1}', "bool": "true / false",
            "int": "0", "float": "0.0"}.get(kind, ""))

    def param(self) -> SubflowParam:
        """The param this row says; ValueError names what is wrong."""
        kind = self.type.currentText()
        name = self.name.text().strip()
        choices = [c.strip() for c in self.choices.text().split(",") if c.strip()]
        default = parse_default(kind, self.default.text())
        if kind == "enum" and default is not None and default not in choices:
            raise ValueError(f"default '{default}' is not one of the choices")
        data = {k: v for k, v in self.base.items() if k == "visible_if"}
        data.update(name=name, label=self.label.text().strip(), type=kind,
                    description=self.description.text().strip(), default=default,
                    ai_allowed=self.ai.isChecked() and kind != "secret",
                    secret=kind == "secret", choices=choices if kind == "enum" else None)
        try:
            return SubflowParam.model_validate(data)
        except ValidationError as exc:
            raise ValueError(_explain(exc)) from None


class SubflowPropsDialog(QDialog):
    """Edit ``defn``'s header and params; on OK, ``result`` holds the new
    definition (nodes and wires as they were) and ``renames`` {old: new}."""

    def __init__(self, parent: QWidget | None, defn: SubflowDef, library: bool) -> None:
        super().__init__(parent)
        self.defn = defn
        self.result: SubflowDef | None = None
        self.renames: dict[str, str] = {}
        self.setWindowTitle(f"Subflow Properties: {defn.label or defn.name}")
        self.setModal(True)
        self.setObjectName("subflowProps")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        where = ("This edits the library subflow's copy; Save to Library… writes it as a new "
                 "version." if library else "This edits the subflow kept in this flow file.")
        lead = QLabel(f"'{defn.name}': what its instances show and the params each sets. "
                      f"Renaming a param carries the instances' settings over to the new "
                      f"name; removing one drops them. {where}")
        lead.setWordWrap(True)
        layout.addWidget(lead)
        form = QFormLayout()
        form.setSpacing(8)
        self.label_edit = QLineEdit(defn.label)
        self.label_edit.setObjectName("subflowLabel")
        self.label_edit.setPlaceholderText(defn.name)
        self.description_edit = QPlainTextEdit(defn.description)
        self.description_edit.setObjectName("subflowDescription")
        self.description_edit.setFixedHeight(64)
        self.result_box = QComboBox()
        self.result_box.setObjectName("subflowResult")
        self.result_box.addItem("first: the first message that reaches an output", "first")
        self.result_box.addItem("list: every message until the call settles", "list")
        self.result_box.setCurrentIndex(0 if defn.result == "first" else 1)
        self.result_box.setToolTip("Used as an agent's tool, what the call returns")
        form.addRow("Label", self.label_edit)
        form.addRow("Description", self.description_edit)
        form.addRow("Result (as a tool)", self.result_box)
        layout.addLayout(form)
        layout.addWidget(QLabel("Params"))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("subflowParams")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        head.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        for col, width in enumerate((120, 130, 80, 120, 0, 80, 130)):
            if width:
                self.table.setColumnWidth(col, width)
        self.rows: list[_Row] = []
        for p in defn.params:
            self.add_row(p)
        layout.addWidget(self.table, 1)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add")
        self.remove_button = QPushButton("Remove")
        self.up_button = QPushButton("Move Up")
        self.down_button = QPushButton("Move Down")
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.add_button.clicked.connect(lambda: self.add_row(None))
        self.remove_button.clicked.connect(lambda: self.remove_row(self.table.currentRow()))
        self.up_button.clicked.connect(lambda: self.move_row(self.table.currentRow(), -1))
        self.down_button.clicked.connect(lambda: self.move_row(self.table.currentRow(), 1))
        self.error, self.buttons = form_error_and_buttons(self, layout, self._ok)
        self.resize(980, 520)

    # -- rows -------------------------------------------------------------------------
    def add_row(self, p: SubflowParam | None) -> _Row:
        row = _Row(self.table, p)
        self.rows.append(row)
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, w in enumerate(row.widgets()):
            self.table.setCellWidget(r, c, w)
        self.table.setCurrentCell(r, 0)
        if p is None:
            row.name.setFocus()
        return row

    def remove_row(self, i: int) -> None:
        if 0 <= i < len(self.rows):
            self.rows.pop(i)
            self.table.removeRow(i)  # and its widgets
            if self.rows:
                self.table.setCurrentCell(min(i, len(self.rows) - 1), 0)

    def move_row(self, i: int, by: int) -> None:
        """Swap what two rows say (the widgets stay in their cells)."""
        j = i + by
        if 0 <= i < len(self.rows) and 0 <= j < len(self.rows):
            a, b = self.rows[i], self.rows[j]
            sa, sb = a.state(), b.state()
            a.set_state(sb)
            b.set_state(sa)
            self.table.setCurrentCell(j, 0)

    # -- OK -----------------------------------------------------------------------------
    def build(self) -> tuple[SubflowDef, dict[str, str]]:
        """The definition the dialog says, and the renames; ValueError says
        what is wrong and in which row."""
        params = []
        for i, row in enumerate(self.rows, 1):
            shown = row.name.text().strip() or "(no name)"
            try:
                params.append(row.param())
            except ValueError as exc:
                raise ValueError(f"Param {i} '{shown}': {exc}") from None
        seen: set[str] = set()
        for p in params:
            if p.name in seen:
                raise ValueError(f"Two params are named '{p.name}'; each needs its own name")
            seen.add(p.name)
        header = {"label": self.label_edit.text().strip(),
                  "description": self.description_edit.toPlainText().strip(),
                  "result": self.result_box.currentData(),
                  "params": [p.model_dump() for p in params]}
        data = self.defn.model_dump() | header
        try:
            new = SubflowDef.model_validate(data)
        except ValidationError as exc:
            raise ValueError(_explain(exc)) from None
        renames = {row.original: p.name for row, p in zip(self.rows, params, strict=True)
                   if row.original is not None and row.original != p.name}
        return new, renames

    def _ok(self) -> None:
        try:
            self.result, self.renames = self.build()
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.accept()


# -- applying ---------------------------------------------------------------------------------
class ApplyHeader(QUndoCommand):
    """A library definition's copy: its header and params, before and after."""

    def __init__(self, tab, new: SubflowDef, text: str) -> None:
        super().__init__(text)
        self.tab = tab
        self.before = {f: _copy(getattr(tab.definition, f)) for f in _HEADER_FIELDS}
        self.after = {f: _copy(getattr(new, f)) for f in _HEADER_FIELDS}

    def _set(self, values: dict[str, Any]) -> None:
        defn = self.tab.definition
        for f, v in values.items():
            setattr(defn, f, _copy(v))
        doc = self.tab.doc
        doc.sync_subflows()
        doc.changed.emit()
        doc.revalidate()

    def redo(self) -> None:
        self._set(self.after)

    def undo(self) -> None:
        self._set(self.before)


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [v.model_copy(deep=True) if hasattr(v, "model_copy") else v for v in value]
    return value


def _rename_in(nodes, type_name: str, renames: dict[str, str], removed: set[str]) -> None:
    for n in nodes:
        if n.type != type_name:
            continue
        params = {}
        for key, value in n.params.items():
            if key not in removed:
                params[renames.get(key, key)] = value
        n.params = params


def apply_properties(window, tab, new: SubflowDef, renames: dict[str, str]) -> bool:
    """Make ``tab``'s definition ``new`` (its header and params) as one undo
    step on the tab's stack. False if nothing changed."""
    defn = tab.definition
    if all(getattr(defn, f) == getattr(new, f) for f in _HEADER_FIELDS):
        return False
    text = f"Edit properties of subflow {defn.name}"
    if tab.library is not None:
        tab.doc.undo_stack.push(ApplyHeader(tab, new, text))
        return True
    from ..model.flow_edit import ApplyFlow

    main = window.document
    after = main.flow.model_copy(deep=True)
    target = after.subflow(defn.name)
    for f in _HEADER_FIELDS:
        setattr(target, f, _copy(getattr(new, f)))
    # Settings of a renamed param go to its new name; of a removed one, go.
    removed = {p.name for p in defn.params} - set(renames) - {p.name for p in new.params}
    _rename_in(after.nodes, defn.type, renames, removed)
    for d in after.subflows:
        _rename_in(d.nodes, defn.type, renames, removed)
    tab.doc.undo_stack.push(ApplyFlow(main, after, text, window.tabs.doc_for))
    return True

"""One row of the properties form per parameter: who supplies the value
(scope switch) and the editor for that source.

Rows never touch the flow themselves: they emit the ParamValue the user
asked for and the panel pushes it as a SetParam command. ``sync`` shows
the model's state; every editor ignores a sync that means what it already
shows, so typing is never disturbed by its own round trip through the
model, while undo updates the editors."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from runtime.spec import ParamSpec, ParamType, ParamValue, Scope

from .editor_base import REQUIRED_COLOR, ValueEditor, esc, muted_label, repolish
from .expression_editor import EXPRESSION_COLOR, ExpressionEditor, initial_template
from .expression_editor import SCOPE_LABEL as EXPRESSION_LABEL
from .expression_editor import SCOPE_TIP as EXPRESSION_TIP
from .json_editor import INVALID, AutoHeightText, JsonEditor, mono_font
from .secret_editor import SecretEditor

SCOPE_ORDER = (Scope.AI, Scope.CUSTOM, Scope.MESSAGE, Scope.EXPRESSION)
#: Inside a subflow's definition: the scopes and the subflow's own params.
DEFINITION_SCOPE_ORDER = SCOPE_ORDER + (Scope.SUBFLOW,)
SCOPE_LABELS = {Scope.AI: "AI", Scope.CUSTOM: "Custom", Scope.MESSAGE: "Message",
                Scope.EXPRESSION: EXPRESSION_LABEL, Scope.SUBFLOW: "Subflow"}
SCOPE_TIPS = {
    Scope.AI: "The AI fills this in when it calls this node as a tool",
    Scope.CUSTOM: "A fixed value you set here; the AI cannot change it",
    Scope.MESSAGE: "Read from the incoming message at a path",
    Scope.EXPRESSION: EXPRESSION_TIP,
    Scope.SUBFLOW: "The value of one of this subflow's params, set on each of its instances",
}
NOT_ALLOWED_TIPS = {
    Scope.AI: "The node's author did not allow AI for this parameter",
    Scope.CUSTOM: "The node's author did not allow a fixed value for this parameter",
    Scope.MESSAGE: "The node's author did not allow reading this parameter from the message",
    Scope.EXPRESSION: "A template is allowed only where a fixed value is, and a secret is never "
                      "computed: it names where it is kept",
    Scope.SUBFLOW: "A subflow param stands in for a fixed value, and the node's author did "
                   "not allow one for this parameter",
}
#: The same, for an instance of a subflow: its definition decides.
SUBFLOW_NOT_ALLOWED_TIPS = {
    Scope.AI: "The subflow's definition does not allow AI for this parameter (its "
              "ai_allowed is off)",
    Scope.CUSTOM: "The subflow's definition does not allow a fixed value for this parameter",
    Scope.MESSAGE: "The subflow's definition does not allow reading this parameter from the "
                   "message",
    Scope.EXPRESSION: NOT_ALLOWED_TIPS[Scope.EXPRESSION],
    Scope.SUBFLOW: NOT_ALLOWED_TIPS[Scope.SUBFLOW],
}
NO_SUBFLOW_PARAM_TIP = ("The subflow declares no param of a type that fits this one; add one "
                        "to the subflow's params first")
TYPE_WORDS = {
    ParamType.STR: "Text", ParamType.INT: "A whole number", ParamType.FLOAT: "A number",
    ParamType.BOOL: "On or off", ParamType.JSON: "A JSON value", ParamType.ENUM: "One of a list",
    ParamType.SECRET: "A secret, named (never stored here)",
}
SECRET_AI_TIP = ("A secret names an environment variable or keyring entry that you choose; "
                 "neither the AI nor a message may pick it")

# -- scope switch --------------------------------------------------------------

class ScopeSwitch(QWidget):
    """Segmented buttons AI | Custom | Message | {{ }}. Scopes the node's
    author did not allow are shown disabled, with a tooltip that says why.

    ``scopes=(Scope.EXPRESSION,)``: the one {{ }} toggle of a param that is
    otherwise only ever fixed; unchecking it goes back to Custom."""

    scope_picked = Signal(object)  # Scope

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None, *,
                 scopes: tuple[Scope, ...] = SCOPE_ORDER,
                 not_allowed: dict[Scope, str] | None = None,
                 unavailable: dict[Scope, str] | None = None) -> None:
        """``not_allowed``: why a scope the spec refuses is off (default: the
        node's author decided); ``unavailable``: scopes the spec allows but
        that cannot be picked here, and why."""
        super().__init__(parent)
        not_allowed = not_allowed or NOT_ALLOWED_TIPS
        unavailable = unavailable or {}
        self.setObjectName("scopeSwitch")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.toggle = len(scopes) == 1
        self.group = QButtonGroup(self)
        self.group.setExclusive(not self.toggle)
        self.buttons: dict[Scope, QToolButton] = {}
        for i, scope in enumerate(scopes):
            b = QToolButton(self)
            b.setObjectName("scopeButton")
            b.setText(SCOPE_LABELS[scope])
            b.setProperty("scope", scope.value)
            b.setProperty("pos", "single" if self.toggle else "first" if i == 0
                          else "last" if i == len(scopes) - 1 else "mid")
            # Narrow: four buttons and a label share a 320 px dock; five
            # (inside a subflow) are narrower still.
            narrow = "QToolButton#scopeButton { padding: 2px 5px; }" if len(scopes) == 4 else \
                "QToolButton#scopeButton { padding: 2px 3px; }" if len(scopes) > 4 else ""
            if scope is Scope.EXPRESSION:
                # The accent of the scope, as the panel's stylesheet gives AI
                # and Message theirs (one colour reads on light and dark).
                narrow = "QToolButton#scopeButton { padding: 2px 3px; }"
                b.setStyleSheet(
                    narrow
                    + f"QToolButton#scopeButton:checked {{ background: {EXPRESSION_COLOR}; "
                    f"color: #ffffff; border-color: {EXPRESSION_COLOR}; }}"
                    + ("QToolButton#scopeButton { border-radius: 6px; }" if self.toggle else ""))
            elif narrow:
                b.setStyleSheet(narrow)
            b.setCheckable(True)
            b.setFocusPolicy(Qt.FocusPolicy.TabFocus)
            b.setCursor(Qt.CursorShape.PointingHandCursor)
            allowed = spec.allows(scope)
            b.setEnabled(allowed and scope not in unavailable)
            if allowed and scope in unavailable:
                b.setToolTip(unavailable[scope])
            elif allowed:
                b.setToolTip(SCOPE_TIPS[scope])
            else:
                b.setToolTip(SECRET_AI_TIP if spec.secret
                             and scope not in (Scope.EXPRESSION, Scope.SUBFLOW)
                             else not_allowed[scope])
            self.group.addButton(b)
            layout.addWidget(b)
            self.buttons[scope] = b
            if self.toggle:
                b.clicked.connect(lambda on, s=scope: self.scope_picked.emit(
                    s if on else Scope.CUSTOM))
            else:
                b.clicked.connect(lambda _=False, s=scope: self.scope_picked.emit(s))

    def scope(self) -> Scope | None:
        for scope, b in self.buttons.items():
            if b.isChecked():
                return scope
        return None

    def set_scope(self, scope: Scope) -> None:
        if self.toggle:  # lit for its one scope, dark for any other
            for s, b in self.buttons.items():
                b.setChecked(s is scope)
            return
        button = self.buttons.get(scope)
        if button is None:  # a scope this switch has no button for: none lit
            self.group.setExclusive(False)
            for b in self.buttons.values():
                b.setChecked(False)
            self.group.setExclusive(True)
            return
        button.setChecked(True)


# -- value editors (scope custom) ---------------------------------------------

class TextEditor(ValueEditor):
    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText(self.placeholder())
        self.edit.setClearButtonEnabled(False)
        self.layout_.addWidget(self.edit)
        self.edit.textEdited.connect(lambda t: self.value_changed.emit(t or None))

    def value(self) -> Any:
        return self.edit.text() or None

    def set_value(self, value: Any) -> None:
        text = "" if value is None else str(value)
        if self.edit.text() != text:
            self.edit.setText(text)


class MultilineEditor(ValueEditor):
    """Templates and other long text: a monospace box that grows a little."""

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.edit = AutoHeightText(self, 3, 14)
        self.edit.setFont(mono_font())
        self.edit.setTabChangesFocus(True)
        self.edit.setPlaceholderText(self.placeholder())
        self.layout_.addWidget(self.edit)
        self.edit.textChanged.connect(lambda: self.value_changed.emit(self.value()))

    def value(self) -> Any:
        return self.edit.toPlainText() or None

    def set_value(self, value: Any) -> None:
        text = "" if value is None else str(value)
        if self.edit.toPlainText() != text:
            self.edit.blockSignals(True)
            self.edit.setPlainText(text)
            self.edit.blockSignals(False)
            self.edit.refit()


class NumberEditor(ValueEditor):
    """A line edit rather than a spin box, so that "unset" (placeholder =
    default) and optional numbers are possible. Text that is not a number
    is not applied."""

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.is_int = spec.type is ParamType.INT
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText(self.placeholder())
        self.edit.setMaximumWidth(180)
        self.error = muted_label("", self)
        self.error.setObjectName("fieldError")
        self.error.hide()
        self.layout_.addWidget(self.edit)
        self.layout_.addWidget(self.error)
        self.edit.textEdited.connect(self._on_edit)

    def _parse(self, text: str) -> Any:
        text = text.strip().replace("_", "")
        if not text:
            return None
        try:
            return int(text) if self.is_int else float(text)
        except ValueError:
            return INVALID

    def value(self) -> Any:
        return self._parse(self.edit.text())

    def _on_edit(self, text: str) -> None:
        value = self._parse(text)
        bad = value is INVALID or (isinstance(value, float) and value != value)
        self.error.setText("Enter a whole number" if self.is_int else "Enter a number")
        self.error.setVisible(bad)
        self.edit.setProperty("invalid", bad)
        repolish(self.edit)
        if not bad:
            self.value_changed.emit(value)

    def set_value(self, value: Any) -> None:
        current = self.value()
        if current is not INVALID and current == value and type(current) is type(value):
            return
        if current is not INVALID and value is not None and current == value:
            return  # "2" shown for 2.0: same number
        self.edit.setText("" if value is None else repr(value) if isinstance(value, float)
                          else str(value))
        self.error.hide()
        self.edit.setProperty("invalid", False)
        repolish(self.edit)


class BoolEditor(ValueEditor):
    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.box = QCheckBox(self)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.box)
        row.addStretch(1)
        self.layout_.addLayout(row)
        self.box.clicked.connect(lambda checked: self.value_changed.emit(bool(checked)))
        self.box.toggled.connect(self._label)
        self._label(False)

    def _label(self, checked: bool) -> None:
        self.box.setText("On" if checked else "Off")

    def value(self) -> Any:
        return self.box.isChecked()

    def set_value(self, value: Any) -> None:
        if value is None:
            value = bool(self.spec.default)
        self.box.setChecked(bool(value))
        self._label(bool(value))


class EnumEditor(ValueEditor):
    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.combo = QComboBox(self)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setMinimumWidth(140)
        self.choices = list(spec.choices or [])
        self.unset_item = not spec.has_default
        if self.unset_item:
            self.combo.addItem("(not set)", None)
        for c in self.choices:
            label = f"{c}  (default)" if spec.has_default and c == spec.default else c
            self.combo.addItem(label, c)
        self.row = QHBoxLayout()
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.addWidget(self.combo)
        self.row.addStretch(1)
        self.layout_.addLayout(self.row)
        self.combo.activated.connect(lambda i: self.value_changed.emit(self.combo.itemData(i)))

    def add_beside(self, widget: QWidget) -> None:
        """A button on the combo's line, at its right end."""
        self.row.addWidget(widget)

    def value(self) -> Any:
        return self.combo.currentData()

    def set_value(self, value: Any) -> None:
        if value is None and self.spec.has_default:
            value = self.spec.default
        i = self.combo.findData(value)
        if i < 0 and value is not None:
            # A value the spec does not list (an old flow): show it, the
            # validator reports it.
            self.combo.addItem(f"{value}  (not a choice)", value)
            i = self.combo.count() - 1
        self.combo.setCurrentIndex(max(i, 0))


class JsonValueEditor(ValueEditor):
    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        placeholder = spec.default if spec.has_default and spec.default not in (None, "") else None
        self.editor = JsonEditor(placeholder, self)
        self.layout_.addWidget(self.editor)
        self.editor.value_changed.connect(self.value_changed)

    def value(self) -> Any:
        return self.editor.value()

    def set_value(self, value: Any) -> None:
        self.editor.set_value(value)


class TurnsValueEditor(ValueEditor):
    """The scripted provider's ``script`` as a table of turns (the turns
    editor) rather than raw JSON. Every edit of the table is its own undo
    step; ``rows_changed`` lets the form guard new rows' combo boxes."""

    merge = False
    rows_changed = Signal()

    def __init__(self, spec: ParamSpec, tool_names: list[str],
                 parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        from .turns_editor import TurnsEditor

        self.editor = TurnsEditor(None, tool_names, self)
        # Its button row must fit the properties dock (about 270 px inside at
        # 1440x900): a shorter label and narrower arrows; tooltips say the rest.
        self.editor.add_call_button.setText("+ Call")
        for b in (self.editor.up_button, self.editor.down_button, self.editor.remove_button):
            b.setFixedWidth(22)
        self.layout_.addWidget(self.editor)
        self.editor.changed.connect(self._on_changed)

    def _on_changed(self, script: list) -> None:
        self.rows_changed.emit()
        self.value_changed.emit(script)

    def value(self) -> Any:
        return self.editor.value()

    def set_value(self, value: Any) -> None:
        shown = self.editor.value()
        if (value or []) == shown:
            return
        self.editor.set_value(value)
        self.rows_changed.emit()

    def set_tool_names(self, names: list[str]) -> None:
        if names != self.editor.tool_names():
            self.editor.set_tool_names(names)
            self.rows_changed.emit()


def make_value_editor(spec: ParamSpec, parent: QWidget | None = None) -> ValueEditor:
    t = spec.type
    if t is ParamType.SECRET or spec.secret:
        return SecretEditor(spec, parent)
    if t is ParamType.ENUM:
        return EnumEditor(spec, parent)
    if t is ParamType.BOOL:
        return BoolEditor(spec, parent)
    if t in (ParamType.INT, ParamType.FLOAT):
        return NumberEditor(spec, parent)
    if t is ParamType.JSON:
        return JsonValueEditor(spec, parent)
    if spec.multiline:
        return MultilineEditor(spec, parent)
    return TextEditor(spec, parent)


def subflow_param_fits(node_param: ParamSpec, sub: Any) -> bool:
    """Whether a subflow's param (``SubflowParam``) may give its value to a
    node's param inside the definition: the same type, a whole number for a
    number, text or a choice for text or a choice, anything for JSON; a
    secret only to a secret and back (a secret never lands in plain text)."""
    n, t = node_param.type, sub.type
    node_secret = node_param.secret or n is ParamType.SECRET
    sub_secret = sub.secret or t is ParamType.SECRET
    if node_secret or sub_secret:
        return node_secret and sub_secret
    if n is t or n is ParamType.JSON:
        return True
    if n is ParamType.FLOAT and t is ParamType.INT:
        return True
    return n in (ParamType.STR, ParamType.ENUM) and t in (ParamType.STR, ParamType.ENUM)


# -- one param -------------------------------------------------------------------

class ParamRow(QWidget):
    """Label, scope switch, the editor of the current scope, help and problems.

    ``changed(ParamValue | None, merge)``: what the param should become; None
    removes it from the flow (the spec default applies)."""

    changed = Signal(object, bool)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        # A label that wraps to a second line at this width needs a taller
        # row; the form's layout gave the row its size hint and squeezed the
        # editor under it. The height for this width is the row's minimum.
        super().resizeEvent(event)
        self._fit_height(event.size().width())

    def event(self, event: QEvent) -> bool:
        # An editor inside changed its height (a text box refits to its text
        # after the row took its width): the minimum set for the old height
        # would leave a gap above and below the editor.
        handled = super().event(event)
        if event.type() == QEvent.Type.LayoutRequest:
            self._fit_height(self.width())
        return handled

    def _switches(self) -> list[QWidget]:
        return [w for w in (self.switch, self.expression_toggle)
                if w is not None and not w.isHidden()]

    def _side_by_side_width(self) -> int:
        switches = self._switches()
        return self.label.minimumSizeHint().width() + sum(
            w.sizeHint().width() + self.top.spacing() for w in switches)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        layout = self.layout()
        stacked = max([self.label.minimumSizeHint().width()]
                      + [w.sizeHint().width() for w in self._switches()])
        others = [layout.itemAt(i).minimumSize().width() for i in range(layout.count())
                  if layout.itemAt(i) is not self.top]
        margins = layout.contentsMargins()
        return QSize(max([stacked, *others]) + margins.left() + margins.right(), hint.height())

    def _fit_height(self, width: int) -> None:
        side_by_side = width >= self._side_by_side_width()
        direction = QBoxLayout.Direction.LeftToRight if side_by_side else \
            QBoxLayout.Direction.TopToBottom
        if self.top.direction() != direction:
            self.top.setDirection(direction)
            self.top.setSpacing(6 if side_by_side else 3)
            self.top.activate()
        needed = self.heightForWidth(width)
        if needed > 0 and needed != self.minimumHeight():
            self.setMinimumHeight(needed)

    def __init__(self, spec: ParamSpec, *, show_scope: bool, parent: QWidget | None = None,
                 editor: ValueEditor | None = None,
                 not_allowed: dict[Scope, str] | None = None,
                 subflow_params: list[tuple[str, str]] | None = None):
        """``not_allowed``: why the scopes the spec refuses are off (an
        instance of a subflow: its definition decided). ``subflow_params``:
        set inside a subflow's definition, the (name, label) of each of the
        subflow's params this one may take its value from (scope Subflow)."""
        super().__init__(parent)
        self.spec = spec
        self.setObjectName("paramRow")
        self._scope = spec.default_scope
        # What each scope held last, so flipping AI -> Custom -> AI gets back
        # the value and description the user had typed.
        self._last_value: Any = None
        self._last_path: str | None = None
        self._last_desc: str | None = None
        self._last_template: str | None = None
        self._last_subflow: str | None = None
        self.subflow_params = subflow_params

        # The required/optional mark is part of the label's rich text, so
        # that label and mark wrap together in a narrow dock.
        mark = ("required" if spec.required else "optional" if spec.optional else "")
        mark_color = REQUIRED_COLOR if spec.required else \
            self.palette().color(self.palette().ColorRole.PlaceholderText).name()
        html = esc(spec.label)
        if mark:
            html += (f" &nbsp;<span style='color:{mark_color}; font-weight:400; "
                     f"font-size:small'>{mark}</span>")
        self.label = QLabel(html, self)
        self.label.setObjectName("paramLabel")
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setWordWrap(True)  # a long label wraps rather than widen a narrow dock
        self.label.setToolTip(f"{TYPE_WORDS.get(spec.type, spec.type.value)}"
                              + ("; the node needs a value for it" if spec.required else "")
                              + f". In the flow file: {spec.name}")
        in_definition = subflow_params is not None
        self.switch = ScopeSwitch(
            spec, self, scopes=DEFINITION_SCOPE_ORDER if in_definition else SCOPE_ORDER,
            not_allowed=not_allowed,
            unavailable={Scope.SUBFLOW: NO_SUBFLOW_PARAM_TIP}
            if in_definition and not subflow_params else None)
        self.switch.setVisible(show_scope)
        # A param that is otherwise only ever fixed gets one {{ }} toggle
        # instead of the whole switch.
        self.expression_toggle: ScopeSwitch | None = None
        if not show_scope and spec.allows(Scope.EXPRESSION):
            self.expression_toggle = ScopeSwitch(spec, self, scopes=(Scope.EXPRESSION,))
        if not show_scope:
            only = spec.allowed_scopes[0] if spec.allowed_scopes else Scope.CUSTOM
            self.label.setToolTip(f"{SCOPE_TIPS[only]} (the only source the node's author "
                                  f"allows). In the flow file: {spec.name}")
        # Label and switch side by side; stacked when the dock is too narrow
        # for both (four scope buttons take ~230 px), rather than widen it.
        top = self.top = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        top.setContentsMargins(0, 0, 0, 0)
        top.setSpacing(6)
        top.addWidget(self.label, 1)
        top.addWidget(self.switch, 0, Qt.AlignmentFlag.AlignLeft)
        if self.expression_toggle is not None:
            top.addWidget(self.expression_toggle, 0, Qt.AlignmentFlag.AlignLeft)

        # Custom
        self.value_editor = editor or make_value_editor(spec, self)
        self.value_editor.setParent(self)
        # Message
        self.message_box = QWidget(self)
        mrow = QHBoxLayout(self.message_box)
        mrow.setContentsMargins(0, 0, 0, 0)
        mrow.setSpacing(4)
        prefix = QLabel("msg.", self.message_box)
        prefix.setObjectName("pathPrefix")
        prefix.setFont(mono_font())
        self.path_edit = QLineEdit(self.message_box)
        self.path_edit.setObjectName("pathEdit")
        self.path_edit.setFont(mono_font())
        self.path_edit.setPlaceholderText(spec.default_path or spec.name)
        self.path_edit.setToolTip("A dotted path into the incoming message, e.g. payload.email "
                                  "or items[0].name")
        mrow.addWidget(prefix)
        mrow.addWidget(self.path_edit, 1)
        # AI
        self.ai_box = QWidget(self)
        self.ai_box.setObjectName("aiBox")
        arow = QVBoxLayout(self.ai_box)
        arow.setContentsMargins(0, 0, 0, 0)
        arow.setSpacing(2)
        self.ai_desc = QLineEdit(self.ai_box)
        self.ai_desc.setObjectName("aiDescription")
        self.ai_desc.setPlaceholderText(spec.description or "Description for the AI (optional)")
        self.ai_desc.setToolTip("What the AI is told about this argument. Empty: the node's "
                                "own description, shown greyed out.")
        self.ai_hint = QLabel("The AI fills this in; the text guides it.", self.ai_box)
        self.ai_hint.setObjectName("aiHint")
        self.ai_hint.setWordWrap(True)
        arow.addWidget(self.ai_desc)
        arow.addWidget(self.ai_hint)
        # Expression: made when first needed (most params never are one)
        self.expression_editor: ExpressionEditor | None = None
        # Subflow (inside a definition): which of the subflow's params
        self.subflow_box: QWidget | None = None
        self.subflow_combo: QComboBox | None = None
        if in_definition:
            self.subflow_box = QWidget(self)
            srow = QHBoxLayout(self.subflow_box)
            srow.setContentsMargins(0, 0, 0, 0)
            srow.setSpacing(6)
            srow.addWidget(QLabel("Subflow param", self.subflow_box))
            self.subflow_combo = QComboBox(self.subflow_box)
            self.subflow_combo.setObjectName("subflowParam")
            self.subflow_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            self.subflow_combo.setToolTip("Each instance of the subflow sets this param; "
                                          "this node reads its value")
            for name, text in subflow_params:
                self.subflow_combo.addItem(text if text == name else f"{text} ({name})", name)
            srow.addWidget(self.subflow_combo, 1)
            self.subflow_combo.activated.connect(self._on_subflow_param)

        self.help = muted_label(spec.description, self)
        self.help.setVisible(bool(spec.description))
        # What this choice hides of the other params (visible_if), so that
        # nothing disappears without a word.
        self.note = QLabel(self)
        self.note.setObjectName("hiddenNote")
        self.note.setWordWrap(True)
        self.note.hide()
        self.problem = QLabel(self)
        self.problem.setObjectName("fieldError")
        self.problem.setWordWrap(True)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 2)
        layout.setSpacing(4)
        # The row's minimum is its own (minimumSizeHint, stacked), not the
        # side-by-side layout's, so that a narrow dock can stack it.
        layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        layout.addLayout(top)
        for w in (self.value_editor, self.message_box, self.ai_box, self.subflow_box,
                  self.help, self.note, self.problem):
            if w is not None:
                layout.addWidget(w)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self.switch.scope_picked.connect(self._on_scope)
        if self.expression_toggle is not None:
            self.expression_toggle.scope_picked.connect(self._on_scope)
        self.value_editor.value_changed.connect(self._on_value)
        self.path_edit.textEdited.connect(self._on_path)
        self.ai_desc.textEdited.connect(self._on_desc)
        self._show_scope(self._scope)

    # -- model -> row --------------------------------------------------------------
    def sync(self, setting: ParamValue | None) -> None:
        spec = self.spec
        scope = setting.scope if setting else spec.default_scope
        self._scope = scope
        self.switch.set_scope(scope)
        if self.expression_toggle is not None:
            self.expression_toggle.set_scope(scope)
        self._show_scope(scope)
        if scope is Scope.CUSTOM:
            value = setting.value if setting else None
            self._last_value = value
            self.value_editor.set_value(value)
        elif scope is Scope.MESSAGE:
            path = setting.path if setting else None
            self._last_path = path or self._last_path
            if (self.path_edit.text() or None) != path:
                self.path_edit.setText(path or "")
        elif scope is Scope.AI:
            desc = setting.description if setting else None
            self._last_desc = desc or self._last_desc
            if (self.ai_desc.text() or None) != desc:
                self.ai_desc.setText(desc or "")
        elif scope is Scope.EXPRESSION:
            text = setting.value if setting is not None and isinstance(setting.value, str) \
                else ""
            self._last_template = text
            self._expression_editor().set_text(text)
        elif scope is Scope.SUBFLOW and self.subflow_combo is not None:
            name = setting.param if setting is not None else None
            self._last_subflow = name or self._last_subflow
            i = self.subflow_combo.findData(name)
            if i < 0 and name:
                # A param the subflow no longer declares: shown, the check says so.
                self.subflow_combo.addItem(f"{name}  (not a param of this subflow)", name)
                i = self.subflow_combo.count() - 1
            if i >= 0 and self.subflow_combo.currentIndex() != i:
                self.subflow_combo.setCurrentIndex(i)

    def _expression_editor(self) -> ExpressionEditor:
        if self.expression_editor is None:
            editor = ExpressionEditor(self.spec, self)
            editor.text_changed.connect(self._on_template)
            self.layout().insertWidget(self.layout().indexOf(self.ai_box) + 1, editor)
            self.expression_editor = editor
        return self.expression_editor

    def _show_scope(self, scope: Scope) -> None:
        self.value_editor.setVisible(scope is Scope.CUSTOM)
        self.message_box.setVisible(scope is Scope.MESSAGE)
        self.ai_box.setVisible(scope is Scope.AI)
        if self.subflow_box is not None:
            self.subflow_box.setVisible(scope is Scope.SUBFLOW)
        if scope is Scope.EXPRESSION:
            self._expression_editor().show()
        elif self.expression_editor is not None:
            self.expression_editor.hide()
        self.setProperty("scope", scope.value)
        # With AI the description field says it all; elsewhere the help text.
        self.help.setVisible(bool(self.spec.description) and scope is not Scope.AI)

    def set_note(self, text: str) -> None:
        if self.note.text() != text:
            self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_problems(self, messages: list[str]) -> None:
        self.problem.setText("\n".join(messages))
        self.problem.setVisible(bool(messages))

    # -- row -> model --------------------------------------------------------------
    def _on_scope(self, scope: Scope) -> None:
        if scope is self._scope:
            return
        if scope is Scope.CUSTOM:
            if self._last_value is None and self.spec.default_scope is Scope.CUSTOM:
                new = None
            else:
                new = ParamValue(scope=Scope.CUSTOM, value=self._last_value)
        elif scope is Scope.MESSAGE:
            path = self._last_path or self.spec.default_path or self.spec.name
            new = ParamValue(scope=Scope.MESSAGE, path=path)
        elif scope is Scope.EXPRESSION:
            # The fixed text carries over: as a template it gives itself.
            text = self._last_template if self._last_template is not None \
                else initial_template(self._last_value)
            new = ParamValue(scope=Scope.EXPRESSION, value=text)
        elif scope is Scope.SUBFLOW:
            options = [name for name, _text in self.subflow_params or []]
            if not options:
                return
            name = self._last_subflow if self._last_subflow in options else options[0]
            new = ParamValue(scope=Scope.SUBFLOW, param=name)
        else:
            new = ParamValue(scope=Scope.AI, description=self._last_desc or None)
        self.changed.emit(new, False)

    def _on_subflow_param(self, index: int) -> None:
        name = self.subflow_combo.itemData(index) if self.subflow_combo is not None else None
        if name:
            self._last_subflow = name
            self.changed.emit(ParamValue(scope=Scope.SUBFLOW, param=name), False)

    def _on_template(self, text: str) -> None:
        self._last_template = text
        self.changed.emit(ParamValue(scope=Scope.EXPRESSION, value=text), True)

    def _on_value(self, value: Any) -> None:
        self._last_value = value
        if value is None and self.spec.default_scope is Scope.CUSTOM:
            self.changed.emit(None, self.value_editor.merge)
        else:
            self.changed.emit(ParamValue(scope=Scope.CUSTOM, value=value), self.value_editor.merge)

    def _on_path(self, text: str) -> None:
        self._last_path = text.strip() or None
        self.changed.emit(ParamValue(scope=Scope.MESSAGE, path=text.strip() or None), True)

    def _on_desc(self, text: str) -> None:
        self._last_desc = text or None
        self.changed.emit(ParamValue(scope=Scope.AI, description=text or None), True)

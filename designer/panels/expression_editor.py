"""The editor of a template param (scope expression): the template text and
a live preview of the value it gives, computed with the runtime's own
sandbox against the last message that reached the node in the last run.

The preview is worked out synchronously on every edit (a render is bounded
in steps and size, see runtime.expressions), and again when a run reports
new messages, so what it shows is always the text in the box."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette, QShowEvent, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from runtime.expressions import (
    Expression,
    ExpressionContext,
    ExpressionError,
    flow_env_readable,
    hidden_env_names,
    template_env,
)
from runtime.spec import ParamSpec, ParamType

from .json_editor import AutoHeightText, format_json, mono_font

#: The scope's accent (the switch's button, the template box's edge).
EXPRESSION_COLOR = "#c0701a"
EXPRESSION_COLOR_DARK = "#e39a4c"
SCOPE_LABEL = "{{ }}"
SCOPE_TIP = ("A template computed for each message: Hello {{ msg.payload.name }}, "
             "{{ env.HOME }}, {{ flow.count }}. The AI cannot change it")
NO_RUN_NOTE = ("No message has reached this node yet, so msg is empty here: run the flow to "
               "preview with the last message it gets.")
FLOW_NOTE = ("‹flow.name› stands for a flow variable: those exist only while the flow runs, "
             "so the preview has none.")
PREVIEW_CHARS = 600  # characters of a long text the preview shows
INSERT_PATHS = 24  # message paths the Insert menu offers

MessageSource = Callable[[], "dict | None"]

_EXAMPLES = {
    ParamType.INT: "{{ msg.payload.count }}",
    ParamType.FLOAT: "{{ msg.payload.price * 1.2 }}",
    ParamType.BOOL: "{{ msg.payload.total > 100 }}",
    ParamType.JSON: "{{ msg.payload.items }}",
    ParamType.ENUM: "{{ msg.payload.mode }}",
}


def example_for(spec: ParamSpec) -> str:
    return _EXAMPLES.get(spec.type, "Hello {{ msg.payload.name }}")


def initial_template(fixed: Any) -> str:
    """What a param's template starts as when the user switches it from a
    fixed value: the same text (a template without tags gives itself), a
    number or true/false as written; anything else starts empty."""
    if isinstance(fixed, str):
        return fixed
    if isinstance(fixed, (bool, int, float)):
        return json.dumps(fixed)
    return ""


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def accent(palette: QPalette) -> str:
    return EXPRESSION_COLOR_DARK if is_dark(palette) else EXPRESSION_COLOR


def scope_button_style(palette: QPalette) -> str:
    """The checked look of the switch's {{ }} button, in the scope's accent
    (the AI and Message buttons have theirs in the panel's stylesheet)."""
    color = accent(palette)
    return (f"QToolButton#scopeButton[scope=\"expression\"]:checked {{ background: {color}; "
            f"color: #ffffff; border-color: {color}; }}")


def last_message_into(widget: QWidget, node_id: str) -> dict | None:
    """The last message that reached ``node_id``, as the window's inspector
    holds it (the run on show, else the live one), or None before any run.
    Found through the window, so that the editor needs no wiring."""
    window = widget.window()
    inspector = getattr(getattr(window, "run_session", None), "inspector", None)
    models = [getattr(getattr(inspector, "ctx", None), "model", None),
              getattr(inspector, "live", None)]
    for model in models:
        last = getattr(model, "last", None)
        if isinstance(last, dict):
            messages = (last.get(node_id) or {}).get("in") or []
            if messages and isinstance(messages[-1], dict):
                return messages[-1]
    return None


def message_paths(msg: Any, limit: int = INSERT_PATHS) -> list[str]:
    """msg.payload, msg.payload.name, ... of a message, breadth first, for
    the Insert menu (reserved and private keys left out)."""
    out: list[str] = []
    todo: list[tuple[str, Any, int]] = [("msg", msg, 0)]
    while todo and len(out) < limit:
        path, value, depth = todo.pop(0)
        if path != "msg":
            out.append(path)
        if isinstance(value, dict) and depth < 3:
            for key, item in value.items():
                if isinstance(key, str) and key.isidentifier() and not key.startswith("_"):
                    todo.append((f"{path}.{key}", item, depth + 1))
        elif isinstance(value, list) and value and depth < 3:
            todo.append((f"{path}[0]", value[0], depth + 1))
    return out


def describe(value: Any) -> tuple[str, str]:
    """(what the preview shows, what kind of value it is)."""
    if value is None:
        return "", "nothing: the param's default applies"
    if isinstance(value, bool):
        return ("true" if value else "false"), "true/false"
    if isinstance(value, (int, float)):
        return json.dumps(value), "number"
    if isinstance(value, str):
        shown = value if len(value) <= PREVIEW_CHARS else value[:PREVIEW_CHARS] + "…"
        n = len(value)
        return shown, f"text, {n} character{'s' if n != 1 else ''}"
    text = format_json(value)
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + "…"
    return text, "JSON list" if isinstance(value, list) else "JSON object"


class ExpressionEditor(QWidget):
    """The template box, an Insert menu of the last message's paths, and the
    preview. ``text_changed(text)`` for each edit the user makes; ``set_text``
    (the model's state) never emits."""

    text_changed = Signal(str)

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None, *, node_id: str = "",
                 last_message: MessageSource | None = None,
                 hidden_env: Callable[[], frozenset[str]] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("expressionEditor")
        self.spec = spec
        self.node_id = node_id
        self._last_message = last_message
        self._hidden_env = hidden_env
        self._syncing = False
        self._listening = False
        self.value: Any = None  # the preview's value, or None
        self.error = ""  # the preview's error, or ""

        self.edit = AutoHeightText(self, min_lines=1, max_lines=10)
        self.edit.setObjectName("expressionText")
        self.edit.setFont(mono_font())
        self.edit.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.edit.setTabChangesFocus(True)
        self.edit.setPlaceholderText(example_for(spec))
        self.edit.setToolTip("A Jinja template. It reads msg (the incoming message), env "
                             "(environment variables), flow and global (variables). One "
                             "{{ … }} alone gives its own value: a number stays a number.")

        self.insert = QToolButton(self)
        self.insert.setObjectName("expressionInsert")
        self.insert.setText("Insert")
        self.insert.setToolTip("Insert a value of the last message, or a variable")
        self.insert.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.insert.setMenu(QMenu(self.insert))
        self.insert.menu().aboutToShow.connect(self._fill_insert_menu)
        self.hint = QLabel("Reads msg, env, flow and global", self)
        self.hint.setObjectName("expressionHint")
        hint_row = QHBoxLayout()
        hint_row.setContentsMargins(0, 0, 0, 0)
        hint_row.addWidget(self.hint, 1)
        hint_row.addWidget(self.insert)

        self.preview_box = QFrame(self)
        self.preview_box.setObjectName("expressionPreviewBox")
        box = QVBoxLayout(self.preview_box)
        box.setContentsMargins(8, 5, 8, 6)
        box.setSpacing(2)
        self.preview_title = QLabel("Preview", self.preview_box)
        self.preview_title.setObjectName("expressionPreviewTitle")
        # Where the preview's msg comes from, on the title line.
        self.source = QLabel(self.preview_box)
        self.source.setObjectName("expressionSource")
        self.source.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        title_row = QHBoxLayout()
        title_row.setContentsMargins(0, 0, 0, 0)
        title_row.addWidget(self.preview_title)
        title_row.addWidget(self.source, 1)
        self.preview = QLabel(self.preview_box)
        self.preview.setObjectName("expressionPreview")
        self.preview.setFont(mono_font())
        self.preview.setWordWrap(True)
        self.preview.setTextFormat(Qt.TextFormat.PlainText)
        self.preview.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.kind = QLabel(self.preview_box)
        self.kind.setObjectName("expressionKind")
        self.kind.setWordWrap(True)
        self.problem = QLabel(self.preview_box)
        self.problem.setObjectName("fieldError")
        self.problem.setWordWrap(True)
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = QLabel(self.preview_box)
        self.note.setObjectName("expressionNote")
        self.note.setWordWrap(True)
        box.addLayout(title_row)
        for w in (self.preview, self.kind, self.problem, self.note):
            # Top-aligned: a wrapped label laid out taller than its text
            # must not float its one line down the box.
            w.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
            box.addWidget(w)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addWidget(self.edit)
        layout.addLayout(hint_row)
        layout.addWidget(self.preview_box)
        self._apply_style()
        self.edit.textChanged.connect(self._on_text)
        self.refresh_preview()

    # -- text ---------------------------------------------------------------------------
    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str | None) -> None:
        """Show the model's template; no signal, and nothing happens if it
        is what the box already holds (typing is never disturbed)."""
        text = text or ""
        if text == self.text():
            return
        self._syncing = True
        try:
            self.edit.setPlainText(text)
        finally:
            self._syncing = False
        self.refresh_preview()

    def _on_text(self) -> None:
        self.refresh_preview()
        if not self._syncing:
            self.text_changed.emit(self.text())

    def insert_text(self, snippet: str) -> None:
        cursor = self.edit.textCursor()
        cursor.insertText(snippet)
        self.edit.setTextCursor(cursor)
        self.edit.setFocus()

    def _fill_insert_menu(self) -> None:
        menu = self.insert.menu()
        menu.clear()
        msg = self.message()
        paths = message_paths(msg) if msg else []
        if paths:
            section = menu.addAction("From the last message")
            section.setEnabled(False)
            for path in paths:
                menu.addAction(path, lambda p=path: self.insert_text("{{ " + p + " }}"))
        else:
            note = menu.addAction("No message yet: run the flow to list its values")
            note.setEnabled(False)
            menu.addAction("msg.payload", lambda: self.insert_text("{{ msg.payload }}"))
        menu.addSeparator()
        for label, snippet in (("A flow variable", "{{ flow.name }}"),
                               ("A global variable", "{{ global.name }}"),
                               ("An environment variable", "{{ env.HOME }}"),
                               ("A fallback for a missing value",
                                "{{ msg.payload.name | default('someone') }}")):
            menu.addAction(f"{label}: {snippet}", lambda s=snippet: self.insert_text(s))

    # -- preview -----------------------------------------------------------------------
    def _form(self) -> Any:
        """The properties form this editor sits in (it has the document and
        the node id), found up the parent chain, or None."""
        w = self.parentWidget()
        while w is not None:
            if isinstance(getattr(w, "node_id", None), str) and hasattr(w, "doc"):
                return w
            w = w.parentWidget()
        return None

    def message(self) -> dict | None:
        if self._last_message is not None:
            return self._last_message()
        node_id = self.node_id or getattr(self._form(), "node_id", "")
        return last_message_into(self, node_id) if node_id else None

    def hidden_env(self) -> frozenset[str]:
        """What the flow's secrets name: hidden from ``env`` in the preview
        as in a run."""
        if self._hidden_env is not None:
            return self._hidden_env()
        doc = getattr(self._form(), "doc", None)
        flow, registry = getattr(doc, "flow", None), getattr(doc, "registry", None)
        if flow is None or registry is None:
            return frozenset()
        return hidden_env_names(flow, registry)

    def readable_env(self) -> tuple[str, ...]:
        """What the flow's settings.env_readable names: readable in the
        preview as in a run."""
        return flow_env_readable(getattr(getattr(self._form(), "doc", None), "flow", None))

    def _subflow_values(self):
        """Inside a subflow's definition: what ``subflow.NAME`` shows in the
        preview, each param's default, else ‹subflow.NAME› (each instance
        sets its own); None elsewhere."""
        defn = getattr(getattr(self._form(), "doc", None), "definition", None)
        if defn is None:
            return None
        values = {p.name: p.default if p.default is not None else f"‹subflow.{p.name}›"
                  for p in defn.params}
        return lambda _msg: values

    def refresh_preview(self) -> None:
        text = self.text()
        msg = self.message()
        self.value, self.error = None, ""
        if msg is None:
            self.source.setText("no run yet")
            self.source.setToolTip("No message has reached this node yet")
        else:
            self.source.setText("last message in")
            self.source.setToolTip("The last message that reached this node:\n"
                                   + _message_tip(msg))
        self.preview_box.setToolTip(self.source.toolTip())
        notes = []
        if msg is None and "msg" in text:  # matters only to a template that reads msg
            notes.append(NO_RUN_NOTE)
        self._set_notes(notes)
        if not text.strip():
            self.preview.setText("")
            self.preview.hide()
            self.kind.setText("Empty: the param's default applies")
            self.kind.show()
            self.problem.hide()
            return
        subflow = self._subflow_values()
        self.hint.setText("Reads msg, env, flow, global and subflow" if subflow is not None
                          else "Reads msg, env, flow and global")
        context = ExpressionContext(template_env(self.hidden_env(), self.readable_env()),
                                    preview=True, subflow=subflow)
        try:
            self.value = Expression(self.spec, text, context).render(msg)
        except ExpressionError as exc:
            self.error = _without_param(str(exc), self.spec.name)
        if self.error:
            self.preview.hide()
            self.kind.hide()
            self.problem.setText(self.error)
            self.problem.show()
            return
        shown, kind = describe(self.value)
        if "‹flow." in shown:
            self._set_notes([*notes, FLOW_NOTE])
        if self.value is None and self.spec.has_default and self.spec.default not in (None, ""):
            kind += f" ({json.dumps(self.spec.default, ensure_ascii=False)})"
        self.preview.setText(shown)
        self.preview.setVisible(bool(shown))
        self.kind.setText(kind)
        self.kind.show()
        self.problem.hide()

    def _set_notes(self, notes: list[str]) -> None:
        self.note.setText("\n".join(notes))
        self.note.setVisible(bool(notes))

    # -- following runs ----------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._listen_to_runs()
        self.refresh_preview()

    def _listen_to_runs(self) -> None:
        """Refresh when the window's run reports events (new last messages),
        without any wiring from the panel: the editor finds the run."""
        if self._listening or self._last_message is not None:
            return
        controller = getattr(getattr(self.window(), "run_session", None), "controller", None)
        signal = getattr(controller, "events", None)
        if signal is not None:
            signal.connect(self._on_run_events)
            self._listening = True

    def _on_run_events(self, *_: Any) -> None:
        if self.isVisible():
            self.refresh_preview()

    # -- look -----------------------------------------------------------------------
    def changeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() == event.Type.PaletteChange:
            self._apply_style()

    def _apply_style(self) -> None:
        color = accent(self.palette())
        self.setStyleSheet(f"""
QPlainTextEdit#expressionText {{ border-left: 3px solid {color}; }}
QFrame#expressionPreviewBox {{ background: palette(alternate-base);
    border: 1px solid palette(mid); border-radius: 6px; }}
QLabel#expressionPreviewTitle {{ color: {color}; font-size: 11px; font-weight: 600; }}
QLabel#expressionKind, QLabel#expressionSource, QLabel#expressionNote,
QLabel#expressionHint {{ color: palette(placeholder-text); font-size: 11px; }}
QToolButton#expressionInsert {{ padding: 1px 6px; }}
""")


def _without_param(text: str, name: str) -> str:
    prefix = f"params.{name}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _message_tip(msg: dict) -> str:
    try:
        text = json.dumps(msg, ensure_ascii=False, indent=1, default=str)
    except (TypeError, ValueError):
        text = repr(msg)
    return text if len(text) <= 2000 else text[:2000] + "…"

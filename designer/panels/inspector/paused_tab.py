"""Paused: the messages (and tool calls) held at breakpoints, oldest first,
and the selected one in a JSON editor, to be edited before it goes on.

The tab only shows and edits; the buttons are the window's Continue, Step,
Skip and Continue All actions (designer.running.debugging), which read the
selected hold and the editor's text from here. A hold is the runtime's
``Held`` (runtime.debugger): the run is a task on the GUI thread, so it is
read directly, never copied."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..json_editor import INVALID, JsonEditor, _same
from .common import ButtonRow, color, hint_or, preview

if TYPE_CHECKING:
    from runtime.debugger import Held

    from .context import InspectorContext

HOLD_ROLE = Qt.ItemDataRole.UserRole + 40
LINE_PREVIEW = 48  # characters of a held message's payload in the list
MIN_LINES = 4  # the editor's fewest lines; below, the form scrolls
EMPTY_HINT = ("Nothing is paused. To stop messages somewhere, click left of a node's input "
              "(a red dot appears), or right-click a node or a wire: Add Breakpoint. A "
              "breakpoint on a tool node stops the agent's calls to it, arguments and all.")
WHY = {
    "breakpoint": "Stopped by a breakpoint",
    "step": "Stopped after a step: the node before it ran",
    "paused": "Paused with the whole run (Pause All): it goes on when the breakpoint's "
              "message does",
}


def fmt_waiting(seconds: float) -> str:
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


#: The widest the clock beside the title gets: it keeps this width, so the
#: title never wraps differently as the seconds go by.
WIDEST_WAIT = ("waiting 88 min 88 s", "waiting 88 h 88 min")


class PausedTab(QWidget):
    node_selected = Signal(str)
    selection_changed = Signal()

    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._held: dict[int, Held] = {}
        self._shown_id: int | None = None
        self._shown_view: Any = None
        # The message a Step let go, by id: its next stop is selected when
        # it comes, not another held message meanwhile.
        self._following = ""

        self.list = QListWidget()
        self.list.setObjectName("PausedList")
        self.list.setUniformItemSizes(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setSpacing(2)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemDoubleClicked.connect(self._double_clicked)

        self.title = QLabel()
        self.title.setObjectName("PausedTitle")
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        # How long it has waited, counting, beside the title at a width of
        # its own: in the text below, each new digit re-wrapped the lines
        # and moved the editor down while the person typed in it.
        self.clock = QLabel()
        self.clock.setObjectName("PausedClock")
        self.clock.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self.clock.setFixedWidth(max(self.clock.fontMetrics().horizontalAdvance(t)
                                     for t in WIDEST_WAIT) + 4)
        self.head = QWidget()
        hl = QHBoxLayout(self.head)
        hl.setContentsMargins(0, 0, 0, 0)
        hl.setSpacing(8)
        hl.addWidget(self.title, 1)
        hl.addWidget(self.clock, 0, Qt.AlignmentFlag.AlignTop)
        self.why = QLabel()
        self.why.setWordWrap(True)
        self.why.setObjectName("PausedWhy")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setObjectName("PausedNote")
        self.editor = JsonEditor()
        # Tall enough that a short message does not leave the tab empty, short
        # enough that the editor's "Valid JSON" line still shows above the
        # buttons at the inspector's first height (12 lines hid it under the
        # scroll); the form scrolls past 24 lines.
        self.editor.text_edit.min_lines, self.editor.text_edit.max_lines = 8, 24
        self.editor.text_edit.refit()
        self.editor.value_changed.connect(lambda _v: self.error.hide())
        self.error = QLabel()
        self.error.setObjectName("PausedError")
        self.error.setWordWrap(True)
        self.error.hide()

        # Continue, Step, Skip ... Continue All, Pause All: icons alone when
        # the tab is narrow (beside an approval card), never a wider window.
        self.bar = ButtonRow()
        self.bar.setContentsMargins(10, 0, 10, 0)
        self.buttons = self.bar.row

        form = self.form = QWidget()
        fl = QVBoxLayout(form)
        fl.setContentsMargins(10, 8, 10, 8)
        fl.setSpacing(4)
        fl.addWidget(self.head)
        fl.addWidget(self.why)
        fl.addWidget(self.note)
        fl.addWidget(self.editor)
        fl.addWidget(self.error)
        fl.addStretch(1)
        scroll = self.scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(form)
        # The editor is as tall as the tab allows, so that its "Valid JSON"
        # line stays in view above the buttons; the form scrolls only when
        # even its fewest lines do not fit.
        scroll.viewport().installEventFilter(self)
        form.installEventFilter(self)  # the texts above it wrap anew at another width
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 6)
        rl.setSpacing(0)
        rl.addWidget(scroll, 1)
        rl.addWidget(self.bar)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.list)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([300, 900])
        split.setChildrenCollapsible(False)
        self.list.setMinimumWidth(220)

        self.empty, self.stack = hint_or(self, EMPTY_HINT, split)
        # "waiting 12 s" keeps counting while the tab is on screen.
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._tick)
        self._restyle()

    def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802 - Qt override
        if obj in (self.scroll.viewport(), self.form) and event.type() == QEvent.Type.Resize:
            self._fit_editor()
        return super().eventFilter(obj, event)

    def _fit_editor(self) -> None:
        """Give the editor the lines the visible form has left, between
        MIN_LINES and 24: all of them, so that it fills the tab down to its
        "Valid JSON" line above the buttons, and keeps its height while the
        person types."""
        edit = self.editor.text_edit
        used = self.form.layout().contentsMargins()
        spacing = self.form.layout().spacing()
        others = sum(w.sizeHint().height() if not w.hasHeightForWidth()
                     else w.heightForWidth(self.form.width() - used.left() - used.right())
                     for w in (self.head, self.why, self.note, self.error)
                     if not w.isHidden())
        status = self.editor.status.sizeHint().height() + self.editor.layout().spacing()
        frame = edit.height() - edit.viewport().height() + 2 * edit.document().documentMargin()
        room = (self.scroll.viewport().height() - used.top() - used.bottom() - others - status
                - frame - 5 * spacing)
        lines = max(MIN_LINES, min(24, int(room // edit.fontMetrics().lineSpacing())))
        if (edit.min_lines, edit.max_lines) != (lines, lines):
            edit.min_lines = edit.max_lines = lines
            edit.refit()

    # -- the window's actions as buttons -------------------------------------------
    def add_buttons(self, actions: list[Any], after_stretch: list[Any]) -> None:
        """Buttons for ``actions`` (Continue, Step, Skip), then, at the
        right, for ``after_stretch`` (Continue All, Pause All): the same
        QActions as the toolbar's, so that text, state and shortcut agree."""
        for group in (actions, after_stretch):
            for action in group:
                b = QToolButton()
                b.setDefaultAction(action)
                b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
                b.setIconSize(QSize(16, 16))
                b.setObjectName(f"paused_{action.objectName() or action.text()}")
                self.buttons.addWidget(b)
            if group is actions:
                self.buttons.addStretch(1)

    # -- inputs -----------------------------------------------------------------
    def set_held(self, helds: list[Held]) -> None:
        """The holds now, oldest first; the selected one stays selected
        (its editor untouched) while it waits."""
        shown = self._held.get(self._shown_id) if self._shown_id is not None else None
        self._held = {h.id: h for h in helds}
        keep = self._shown_id if self._shown_id in self._held else None
        if keep is None and shown is not None:
            self._following = _stepped(shown) or self._following
        if self._following:
            # The stepped message stopped again: show it there.
            nxt = next((h for h in helds if h.msgid == self._following), None)
            if nxt is not None:
                keep, self._following = nxt.id, ""
        self.list.blockSignals(True)
        self.list.clear()
        for h in helds:
            item = QListWidgetItem(self._line(h))
            item.setData(HOLD_ROLE, h.id)
            item.setToolTip(self._title_text(h, html=False))
            if h.reason == "paused":
                item.setForeground(color("muted"))
            self.list.addItem(item)
            if h.id == keep:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        self.stack.setCurrentIndex(1 if helds else 0)
        if not helds:
            self._following = ""
        if keep is None:
            if self._following:
                # On its way to the next node: nothing else is taken for it.
                self._load(None)
                self.list.setCurrentRow(-1)
                self.title.setText("The stepped message goes on to the next node it reaches; "
                                   "it shows here when it stops there. Select a message in "
                                   "the list to see it.")
            elif helds:
                self.list.setCurrentRow(0)  # _on_current loads it
            else:
                self._load(None)
        elif self._shown_id != keep:
            self._load(self._held[keep])
        else:
            self._refresh_why(self._held[keep])

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self.current() is not None:
            self._clock.start()

    def _tick(self) -> None:
        held = self.current()
        if held is None or not self.isVisible():
            self._clock.stop()
        else:
            self._refresh_why(held)

    def current(self) -> Held | None:
        return self._held.get(self._shown_id) if self._shown_id is not None else None

    def select(self, hold_id: int) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(HOLD_ROLE) == hold_id:
                self.list.setCurrentRow(row)
                return

    def edit(self) -> tuple[Any, str | None]:
        """(the edited message or arguments, None) when the person changed
        them; (None, None) when not; (None, why) when the text is not JSON."""
        value = self.editor.value()
        if value is INVALID:
            return None, f"The JSON does not parse ({self.editor.error}); fix it, or Skip."
        if value is None or _same(value, self._shown_view):
            return None, None
        return value, None

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    # -- showing one ----------------------------------------------------------------
    def _on_current(self, item: QListWidgetItem | None, _prev: Any = None) -> None:
        hold_id = item.data(HOLD_ROLE) if item is not None else None
        if hold_id is not None:
            self._following = ""  # the person chose another one
        self._load(self._held.get(hold_id) if hold_id is not None else None)
        self.selection_changed.emit()

    def _double_clicked(self, item: QListWidgetItem) -> None:
        h = self._held.get(item.data(HOLD_ROLE))
        if h is not None:
            self.node_selected.emit(h.node)

    def _load(self, h: Held | None) -> None:
        self.show_error("")
        if h is None:
            self._shown_id, self._shown_view = None, None
            self.title.setText("")
            self.clock.setText("")
            self.why.setText("")
            self.note.hide()
            self.editor.set_value(None)
            return
        self._shown_id = h.id
        self._shown_view = h.view()
        self._clock.start()
        self.title.setText(self._title_text(h))
        self._refresh_why(h)
        self.editor.text_edit.setPlainText("")
        self.editor.set_value(self._shown_view)
        self._fit_editor()

    def _refresh_why(self, h: Held) -> None:
        why = WHY.get(h.reason, h.reason)
        if h.condition:
            why += f" · if {h.condition}"
        self.clock.setText(f"waiting {fmt_waiting(time.monotonic() - h.since)}")
        if h.is_tool:
            why += (". The node has not run: edit any argument (checked against the tool's "
                    "schema), then Continue; Skip answers the agent that it was skipped.")
        else:
            why += ". Edit the message, then Continue (or Step, to stop at the next node)."
        self.why.setText(why)
        self.note.setText(h.note)
        self.note.setVisible(bool(h.note))

    def _name(self, node_id: str) -> str:
        return self.ctx.name_of(node_id) or node_id

    def _line(self, h: Held) -> str:
        """Two lines: where it waits, then why and what it carries."""
        view = h.view()
        if h.is_tool:
            return f"{h.tool} → {self._name(h.node)}\ntool call · {preview(view, LINE_PREVIEW)}"
        where = f"wire into {self._name(h.node)}" if h.wire >= 0 else self._name(h.node)
        what = preview(view.get("payload") if isinstance(view, dict) else view, LINE_PREVIEW)
        return f"{where}\n{h.reason} · {what}"

    def _title_text(self, h: Held, html: bool = True) -> str:
        b = (lambda t: f"<b>{t}</b>") if html else (lambda t: t)
        if h.is_tool:
            return (f"Tool call {b(h.tool)} from {b(self._name(h.agent))}, before "
                    f"{b(self._name(h.node))} runs: its arguments")
        if h.wire >= 0:
            return f"Message on the wire into {b(self._name(h.node))}"
        return f"Message at {b(self._name(h.node))}, input {h.port}"

    def _restyle(self) -> None:
        self.setStyleSheet(
            f"#PausedWhy, #PausedClock {{ color: {color('muted').name()}; }}"
            f"#PausedNote {{ color: {color('warning').name()}; }}"
            f"#PausedError {{ color: {color('error').name()}; }}")


def _stepped(held: Held) -> str:
    """The message id of a hold a Step let go (it stops at the next node it
    reaches), or ""."""
    future = held.future
    if held.is_tool or not future.done() or future.cancelled():
        return ""
    action, msg = future.result()
    if action != "step":
        return ""
    return str((msg.get("_msgid") if isinstance(msg, dict) else "") or held.msgid or "")

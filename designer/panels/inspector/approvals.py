"""Cards for a person in the loop: a tool call waiting for approval, an
agent's question waiting for an answer.

They stack in a column beside the inspector's tabs, newest last, and never
block the window: the person can look at the run (the Agent tab, the
canvas) before deciding. A card goes when its call is decided, when the
policy's timeout rejects it, or when the run stops (``DesignerPeople``
says so). The arguments are a form: the ones the tool's policy names
(``confirm``) can be edited at once, the others after Edit; every edit is
checked against the tool's own schema before "Edit and approve" enables,
and a field that does not fit says why under itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator
from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ...control.people import DesignerPeople, PendingApproval, PendingQuestion
from ...look import theme

CARDS_WIDTH = 460  # the column's width when the window has room
CARDS_MIN_WIDTH = 380  # narrower, a form of three arguments and four buttons is cramped
LONG_TEXT = 60  # a text longer than this, or with a newline, gets a box of lines
SOON = 30.0  # seconds left under which the countdown turns to the warning colour


def fmt_left(seconds: float) -> str:
    s = int(seconds + 0.999)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min left"
    if s >= 60:
        return f"{s // 60}:{s % 60:02d} left"
    return f"{s} s left"


# -- one argument ---------------------------------------------------------------
def is_text_arg(schema: dict, value: Any) -> bool:
    return schema.get("type") == "string" or ("type" not in schema and isinstance(value, str))


def is_long(text: str) -> bool:
    return "\n" in text or len(text) > LONG_TEXT


class ArgField:
    """One argument of a call: its editor, and the error under it."""

    def __init__(self, name: str, schema: dict, value: Any, given: bool,
                 max_lines: int = 4) -> None:
        self.name = name
        self.schema = schema if isinstance(schema, dict) else {}
        self.original = value
        self.given = given
        self.is_text = is_text_arg(self.schema, value)
        text = self._text(value) if given else ""
        if self.is_text and is_long(text):
            # A box of a few lines that scrolls: a 2,000-character body is
            # read there, and the card keeps its buttons in view.
            self.editor: QLineEdit | QPlainTextEdit = QPlainTextEdit(text)
            self.editor.setTabChangesFocus(True)
            lines = min(max_lines, max(2, text.count("\n") + 1, len(text) // LONG_TEXT + 1))
            # Whole lines: the text's, the document's margins, the frame and padding.
            margin = 2 * round(self.editor.document().documentMargin())
            self.editor.setFixedHeight(self.editor.fontMetrics().lineSpacing() * lines
                                       + margin + 8)
        else:
            self.editor = QLineEdit(text)
        self.editor.setObjectName(f"arg_{name}")
        self.editor.setToolTip(self.schema.get("description", "") or name)
        self.label = QLabel(name)
        self.label.setObjectName("ArgName")
        self.label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self.error = QLabel()
        self.error.setObjectName("ArgError")
        self.error.setWordWrap(True)
        self.error.hide()

    def _text(self, value: Any) -> str:
        if self.is_text and isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    def text(self) -> str:
        e = self.editor
        return e.toPlainText() if isinstance(e, QPlainTextEdit) else e.text()

    def set_text(self, text: str) -> None:
        if isinstance(self.editor, QPlainTextEdit):
            self.editor.setPlainText(text)
        else:
            self.editor.setText(text)

    def value(self) -> tuple[bool, Any]:
        """(present, value): an argument the agent left out stays out while
        its field is empty; a non-text one is read as JSON, and as text when
        it is not JSON (the schema then says what is wrong with it)."""
        text = self.text()
        if not self.given and not text.strip():
            return False, None
        if self.is_text:
            return True, text
        try:
            return True, json.loads(text)
        except ValueError:
            return True, text

    def set_editable(self, on: bool) -> None:
        self.editor.setReadOnly(not on)
        self.editor.setProperty("editable", on)
        self.editor.style().unpolish(self.editor)
        self.editor.style().polish(self.editor)

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))


# -- cards ------------------------------------------------------------------------
class Card(QFrame):
    def __init__(self, pending: Any) -> None:
        super().__init__()
        self.pending = pending
        self.setObjectName("PersonCard")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.title = QLabel()
        self.title.setObjectName("CardTitle")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.left = QLabel()
        self.left.setObjectName("CardLeft")
        self.left.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.title, 1)
        head.addWidget(self.left)
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(12, 10, 12, 10)
        self.layout_.setSpacing(6)
        self.layout_.addLayout(head)
        self.tick()

    def tick(self) -> None:
        left = self.pending.seconds_left()
        self.left.setText(fmt_left(left))
        self.left.setProperty("soon", left < SOON)
        self.left.style().unpolish(self.left)
        self.left.style().polish(self.left)
        self.left.setToolTip("Then the call is rejected, as its approval policy says"
                             if isinstance(self.pending, PendingApproval)
                             else "Then the agent is told that nobody answered")


class ApprovalCard(Card):
    """Approve, Edit and approve, or Reject one tool call."""

    def __init__(self, pending: PendingApproval, agent_name: str) -> None:
        super().__init__(pending)
        req = pending.request
        self.setProperty("kind", "approval")
        self.title.setText(f"<b>{_esc(req.tool)}</b> waits for your approval"
                           f"<br><span style='font-weight:normal'>asked by "
                           f"{_esc(agent_name)}</span>")
        self.reason = QLabel(f"Why: {req.reason}")
        self.reason.setObjectName("CardNote")
        self.reason.setWordWrap(True)
        self.layout_.addWidget(self.reason)

        schema = req.schema if isinstance(req.schema, dict) else {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        names = list(props) + [k for k in req.args if k not in props]
        self.fields: dict[str, ArgField] = {}
        grid = QGridLayout()
        grid.setContentsMargins(0, 2, 0, 2)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(3)
        grid.setColumnStretch(1, 1)
        names = [n for n in names if n in req.args or n in req.confirm]  # else left out
        # Several long texts (subject, body, recipients) get three lines
        # each, so that the card with its buttons fits an open inspector.
        long_ones = sum(1 for n in names if isinstance(req.args.get(n), str)
                        and is_text_arg(props.get(n, {}) if isinstance(props.get(n), dict)
                                        else {}, req.args[n]) and is_long(req.args[n]))
        max_lines = 4 if long_ones <= 1 else 3
        row = 0
        for name in names:
            f = ArgField(name, props.get(name, {}), req.args.get(name), name in req.args,
                         max_lines)
            self.fields[name] = f
            grid.addWidget(f.label, row, 0)
            grid.addWidget(f.editor, row, 1)
            grid.addWidget(f.error, row + 1, 1)
            f.editor.textChanged.connect(self._check)
            row += 2
        self.layout_.addLayout(grid)
        self.validator = Draft202012Validator(schema) if schema else None

        self.reject_reason = QLineEdit()
        self.reject_reason.setObjectName("RejectReason")
        self.reject_reason.setPlaceholderText("Reason to reject (the agent is told)")
        self.layout_.addWidget(self.reject_reason)

        self.reject_button = QPushButton("Reject")
        self.reject_button.setToolTip("Do not run the call; the agent gets the reason as the "
                                      "tool's error")
        self.edit_button = QPushButton("Edit")
        self.edit_button.setToolTip("Change the arguments before the call runs")
        self.edit_approve_button = QPushButton("Edit and approve")
        self.edit_approve_button.setToolTip("Run the call with the arguments as you changed them")
        self.approve_button = QPushButton("Approve")
        self.approve_button.setObjectName("ApproveButton")
        self.approve_button.setToolTip("Run the call with the arguments the agent gave")
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 2, 0, 0)
        buttons.addWidget(self.reject_button)
        buttons.addStretch(1)
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.edit_approve_button)
        buttons.addWidget(self.approve_button)
        self.layout_.addLayout(buttons)
        self.reject_button.clicked.connect(self.reject)
        self.edit_button.clicked.connect(self.start_editing)
        self.edit_approve_button.clicked.connect(self.edit_and_approve)
        self.approve_button.clicked.connect(self.approve)
        self.reject_reason.returnPressed.connect(self.reject)

        self.editing = bool(req.confirm)
        for name, f in self.fields.items():
            f.set_editable(self.editing and (not req.confirm or name in req.confirm))
        self.edit_button.setVisible(not self.editing)
        self._check()

    # -- reading the form -------------------------------------------------------
    def edited_args(self) -> dict:
        """The arguments as the form has them now."""
        out = dict(self.pending.request.args)
        for name, f in self.fields.items():
            present, value = f.value()
            if present:
                out[name] = value
            else:
                out.pop(name, None)
        return out

    def errors(self) -> dict[str, str]:
        """Per argument, why the form's value does not fit the tool's schema
        ("" for a problem of the whole call)."""
        if self.validator is None:
            return {}
        out: dict[str, str] = {}
        for err in self.validator.iter_errors(self.edited_args()):
            path = list(err.absolute_path)
            if path:
                key = str(path[0])
            elif err.validator == "required" and isinstance(err.instance, dict):
                missing = [r for r in err.validator_value if r not in err.instance]
                key = str(missing[0]) if missing else ""
            else:
                key = ""
            out.setdefault(key, err.message)
        return out

    @property
    def changed(self) -> bool:
        return self.edited_args() != self.pending.request.args

    def _check(self, *_: Any) -> None:
        errors = self.errors() if self.editing else {}
        for name, f in self.fields.items():
            f.show_error(errors.get(name, ""))
        changed = self.editing and self.changed
        ok = not errors
        self.edit_approve_button.setVisible(self.editing)
        self.edit_approve_button.setEnabled(changed and ok)
        if not ok:
            self.edit_approve_button.setToolTip("Fix the arguments marked in red first")
        elif not changed:
            self.edit_approve_button.setToolTip("Change an argument first, or Approve as it is")
        else:
            self.edit_approve_button.setToolTip("Run the call with the arguments as you "
                                                "changed them")
        # Approve runs what the agent asked: with edits in the form it would
        # drop them without a word, so it waits until they are undone.
        self.approve_button.setEnabled(not changed)
        self.approve_button.setToolTip(
            "You changed the arguments: Edit and approve, or undo the change" if changed
            else "Run the call with the arguments the agent gave")

    # -- actions ------------------------------------------------------------------
    def start_editing(self) -> None:
        self.editing = True
        for f in self.fields.values():
            f.set_editable(True)
        self.edit_button.hide()
        first = next(iter(self.fields.values()), None)
        if first is not None:
            first.editor.setFocus()
        self._check()

    def approve(self) -> None:
        if self.approve_button.isEnabled():
            self.pending.approve()

    def edit_and_approve(self) -> None:
        if self.edit_approve_button.isEnabled():
            self.pending.approve(self.edited_args())

    def reject(self) -> None:
        self.pending.reject(self.reject_reason.text())


class ChoiceButton(QPushButton):
    """An answer's button whose text wraps onto more lines, so that a long
    choice never widens the column (a QPushButton's own text cannot wrap)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.label = QLabel(text, self)
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.label.setObjectName("ChoiceText")
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 4, 10, 4)
        box.addWidget(self.label)

    def text(self) -> str:
        return self.label.text()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return self.layout().sizeHint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return self.layout().minimumSize()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt override
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        return self.layout().totalHeightForWidth(width)


class QuestionCard(Card):
    """An agent's question: a button per choice, or a text to send."""

    def __init__(self, pending: PendingQuestion, agent_name: str) -> None:
        super().__init__(pending)
        self.setProperty("kind", "question")
        who = agent_name or "An agent"
        self.title.setText(f"<b>{_esc(who)}</b> asks you")
        self.question = QLabel(pending.question)
        self.question.setObjectName("CardQuestion")
        self.question.setWordWrap(True)
        self.question.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.layout_.addWidget(self.question)
        self.choice_buttons: list[QPushButton] = []
        self.answer: QLineEdit | None = None
        self.send_button: QPushButton | None = None
        if pending.choices:
            grid = QGridLayout()
            grid.setContentsMargins(0, 2, 0, 0)
            grid.setSpacing(6)
            # Three short choices a row; longer ones fewer, each wrapping
            # onto more lines rather than widening the column.
            longest = max(len(c) for c in pending.choices)
            per_row = 3 if longest <= 16 else 2 if longest <= 32 else 1
            for i, choice in enumerate(pending.choices):
                b = ChoiceButton(choice)
                b.setToolTip(f"Answer “{choice}”")
                b.clicked.connect(lambda _=False, c=choice: self.pending.answer(c))
                grid.addWidget(b, i // per_row, i % per_row)
                self.choice_buttons.append(b)
            self.layout_.addLayout(grid)
        else:
            self.answer = QLineEdit()
            self.answer.setObjectName("AnswerText")
            self.answer.setPlaceholderText("Your answer")
            self.send_button = QPushButton("Send")
            self.send_button.setObjectName("ApproveButton")
            self.send_button.setEnabled(False)
            row = QHBoxLayout()
            row.setContentsMargins(0, 2, 0, 0)
            row.addWidget(self.answer, 1)
            row.addWidget(self.send_button)
            self.layout_.addLayout(row)
            self.answer.textChanged.connect(
                lambda t: self.send_button.setEnabled(bool(t.strip())))
            self.answer.returnPressed.connect(self.send)
            self.send_button.clicked.connect(self.send)

    def send(self) -> None:
        if self.answer is not None:
            self.pending.answer(self.answer.text())


# -- the column of cards --------------------------------------------------------------
class PersonCards(QWidget):
    """The column beside the inspector's tabs; hidden while nothing waits."""

    #: a card came: what it waits for, for the status bar
    attention = Signal(str)
    #: the last card went
    cleared = Signal()

    def __init__(self, name_of: Callable[[str], str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PersonCards")
        self.name_of = name_of or (lambda node_id: node_id)
        self.people: DesignerPeople | None = None
        self._cards: dict[int, Card] = {}
        # It gives way to the tabs (down to its minimum) rather than widen
        # the window when a tab needs more room.
        self.setMinimumWidth(CARDS_MIN_WIDTH)
        self.setMaximumWidth(CARDS_WIDTH)
        self.header = QLabel()
        self.header.setObjectName("CardsHeader")
        self.column = QWidget()
        self.column.setObjectName("CardsColumn")
        self.stack = QVBoxLayout(self.column)
        self.stack.setContentsMargins(10, 6, 10, 10)
        self.stack.setSpacing(10)
        self.stack.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.scroll.setWidget(self.column)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(self.scroll, 1)
        self.timer = QTimer(self)
        self.timer.setInterval(1000)
        self.timer.timeout.connect(self._tick)
        self._restyle()
        self.hide()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(CARDS_WIDTH, super().sizeHint().height())

    def attach(self, people: DesignerPeople) -> None:
        if self.people is people:
            return
        if self.people is not None:
            self.people.asked.disconnect(self.add)
            self.people.settled.disconnect(self.remove)
        self.people = people
        people.asked.connect(self.add)
        people.settled.connect(self.remove)
        for pending in people.pending:
            self.add(pending)

    def cards(self) -> list[Card]:
        return list(self._cards.values())

    def card_for(self, pending: Any) -> Card | None:
        return self._cards.get(pending.id)

    def add(self, pending: PendingApproval | PendingQuestion) -> None:
        if pending.id in self._cards or not pending.open:
            return
        if isinstance(pending, PendingApproval):
            card: Card = ApprovalCard(pending, self.name_of(pending.request.agent))
            what = (f"Waiting for approval: {pending.request.tool}, asked by "
                    f"{self.name_of(pending.request.agent)}")
        else:
            card = QuestionCard(pending, self.name_of(pending.agent or pending.node))
            what = f"Waiting for your answer: {self.name_of(pending.agent or pending.node)} asks"
        self._cards[pending.id] = card
        self.stack.insertWidget(self.stack.count() - 1, card)
        self._update()
        self.timer.start()
        QTimer.singleShot(0, lambda: self.show_card(card) if pending.id in self._cards else None)
        self.attention.emit(what)

    def show_card(self, card: Card) -> None:
        """Scroll the column to ``card``: whole if it fits, else from its
        title down (what is asked comes before the buttons)."""
        bar = self.scroll.verticalScrollBar()
        if card.height() + 2 * self.stack.spacing() > self.scroll.viewport().height():
            bar.setValue(card.y() - self.stack.spacing())
        else:
            self.scroll.ensureWidgetVisible(card, 0, self.stack.spacing())

    def wanted_height(self) -> int:
        """The height that shows the header and the newest card whole."""
        if not self._cards:
            return 0
        card = list(self._cards.values())[-1]
        m = self.stack.contentsMargins()
        width = max(CARDS_MIN_WIDTH, self.width() if self.isVisible() else CARDS_WIDTH)
        width -= m.left() + m.right() + self.scroll.verticalScrollBar().sizeHint().width()
        layout = card.layout()
        height = (layout.totalHeightForWidth(width) if layout.hasHeightForWidth()
                  else card.sizeHint().height())
        return self.header.sizeHint().height() + m.top() + m.bottom() + height

    def remove(self, pending: PendingApproval | PendingQuestion) -> None:
        card = self._cards.pop(pending.id, None)
        if card is None:
            return
        self.stack.removeWidget(card)
        card.hide()
        card.deleteLater()
        self._update()
        if not self._cards:
            self.timer.stop()
            self.cleared.emit()

    def _update(self) -> None:
        n = len(self._cards)
        approvals = sum(isinstance(c, ApprovalCard) for c in self._cards.values())
        questions = n - approvals
        parts = []
        if approvals:
            parts.append(f"{approvals} call{'s' if approvals != 1 else ''} to approve")
        if questions:
            parts.append(f"{questions} question{'s' if questions != 1 else ''}")
        self.header.setText("Waiting for you: " + ", ".join(parts) if parts else "")
        self.setVisible(bool(n))

    def _tick(self) -> None:
        for card in self._cards.values():
            card.tick()

    # -- theme --------------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._restyle()

    def _restyle(self) -> None:
        t = theme.current()
        tint = _blend(t.warning, t.base, 0.10 if t.dark else 0.07)
        sheet = (
            f"#PersonCards {{ background: {t.window}; border-left: 1px solid {t.border}; }}"
            f"#CardsColumn {{ background: {t.window}; }}"
            f"#CardsHeader {{ color: {t.text}; font-weight: 600; padding: 7px 12px 3px 12px; }}"
            f"#PersonCard {{ background: {t.base}; border: 1px solid {t.border};"
            f" border-left: 4px solid {t.warning}; border-radius: 8px; }}"
            f"#PersonCard[kind=\"question\"] {{ border-left-color: {t.ai}; }}"
            f"#PersonCard QLabel {{ color: {t.text}; background: transparent; }}"
            f"#PersonCard #CardNote {{ color: {t.muted}; }}"
            f"#PersonCard #CardLeft {{ color: {t.muted}; }}"
            f"#PersonCard #CardLeft[soon=\"true\"] {{ color: {t.warning}; font-weight: 600; }}"
            f"#PersonCard #ArgName {{ color: {t.muted}; padding-top: 4px; }}"
            f"#PersonCard #ArgError {{ color: {t.error}; }}"
            f"#PersonCard QLineEdit, #PersonCard QPlainTextEdit {{ background: {tint};"
            f" color: {t.text}; border: 1px solid {t.border}; border-radius: 5px;"
            f" padding: 3px 5px; }}"
            f"#PersonCard QLineEdit[editable=\"true\"], #PersonCard QPlainTextEdit"
            f"[editable=\"true\"], #PersonCard #RejectReason, #PersonCard #AnswerText {{"
            f" background: {t.base}; }}"
            f"#PersonCard QLineEdit:focus, #PersonCard QPlainTextEdit:focus {{"
            f" border-color: {t.accent}; }}"
            f"#PersonCard QPushButton {{ padding: 4px 12px; border-radius: 5px;"
            f" border: 1px solid {t.border}; background: {t.panel}; color: {t.text}; }}"
            f"#PersonCard QPushButton:hover {{ border-color: {t.accent}; }}"
            f"#PersonCard QPushButton:disabled {{ color: {t.muted}; background: {t.window}; }}"
            f"#PersonCard #ApproveButton {{ background: {t.accent}; color: {t.accent_text};"
            f" border-color: {t.accent}; font-weight: 600; }}"
            f"#PersonCard #ApproveButton:disabled {{ background: {t.window}; color: {t.muted};"
            f" border-color: {t.border}; font-weight: normal; }}")
        # Setting a sheet changes the palette, which calls this again.
        if sheet != self.styleSheet():
            self.setStyleSheet(sheet)


def _esc(text: str) -> str:
    return (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _blend(color: str, base: str, amount: float) -> str:
    a, b = QColor(color), QColor(base)
    return QColor(round(a.red() * amount + b.red() * (1 - amount)),
                  round(a.green() * amount + b.green() * (1 - amount)),
                  round(a.blue() * amount + b.blue() * (1 - amount))).name()

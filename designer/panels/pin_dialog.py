"""Pinned data in the designer's panels: the dialog that types or edits a
node's pin, and the banner Properties shows over a pinned node.

The dialog edits the pin in the flow file's own form, ``{"<output port>":
[message, ...]}``, and checks it as loading the flow does (runtime.pins), so
that what it accepts is what a run sends; a bare list is taken as the
messages of the node's main port. Each accepted edit is one undo step."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from runtime.pins import MAX_PIN_BYTES, pin_problems

from ..look import icons, theme
from ..model.commands import SetPin
from ..model.document import FlowDocument
from .json_editor import INVALID, format_json, mono_font, parse_json

#: What "Pin Data…" starts from when the node has no pin and no run output.
BLANK_MESSAGE = {"payload": ""}


def push_pin(doc: FlowDocument, node_id: str, pin: dict | None, text: str = "") -> None:
    """Pin, change or unpin (``pin`` None) as one step on the undo stack.

    A step that puts back the pin the node had before the one step since
    the flow was saved (pinned, then unpinned again) leaves the flow as it
    is on disk: it is not marked modified. Undo still brings the pin back."""
    stack = doc.undo_stack
    top = stack.command(stack.index() - 1) if stack.index() > 0 else None
    as_saved = (stack.cleanIndex() >= 0 and stack.index() == stack.cleanIndex() + 1
                and isinstance(top, SetPin) and top.node_id == node_id and top.old == pin)
    stack.push(SetPin(doc, node_id, pin, text))
    if as_saved:
        stack.setClean()


def pin_color() -> str:
    return theme.PINNED["dark" if theme.current().dark else "light"]


def data_ports(doc: FlowDocument, node_id: str) -> list[str]:
    """The node's output ports that carry its results (what a pin may hold):
    not an agent's tools port, nor its hook ports."""
    return [p for p in doc.output_ports(node_id) if doc.port_kind(node_id, p) == "out"]


def node_label(doc: FlowDocument, node_id: str) -> str:
    fnode, spec = doc.node(node_id), doc.spec(node_id)
    return (fnode.name if fnode and fnode.name else spec.name if spec else node_id)


def check_pin(doc: FlowDocument, node_id: str, value: Any) -> tuple[dict | None, str]:
    """The pin ``value`` stands for, and "" - or None and why it cannot be
    pinned, in the words (and bounds) the flow's validation uses."""
    ports = data_ports(doc, node_id)
    if isinstance(value, list) and ports:
        value = {"out" if "out" in ports else ports[0]: value}
    if not isinstance(value, dict):
        return None, ('Expected an object of output ports, each with a list of messages: '
                      '{"out": [{"payload": ...}]}')
    for port, messages in value.items():
        if not isinstance(messages, list):
            return None, f"{port}: expected a list of messages"
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                return None, f"{port}[{i}]: a message must be a JSON object"
    problems, _size = pin_problems(value, doc.output_ports(node_id), set(ports))
    if problems:
        field, message = problems[0]
        where = field.removeprefix("pin").lstrip(".")
        return None, f"{where}: {message}" if where else message[:1].upper() + message[1:]
    return value, ""


class PinDialog(QDialog):
    """Type a pin, edit one, or unpin; on Pin or Unpin the change is pushed
    on the document's undo stack."""

    def __init__(self, doc: FlowDocument, node_id: str, value: Any = None, note: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.node_id = doc, node_id
        fnode = doc.node(node_id)
        assert fnode is not None
        self.setWindowTitle(f"Pinned Data: {node_label(doc, node_id)}")
        self.resize(640, 560)
        ports = data_ports(doc, node_id)
        main = "out" if "out" in ports else (ports[0] if ports else "out")
        if value is None:
            value = fnode.pin if fnode.pin is not None else {main: [dict(BLANK_MESSAGE)]}
        intro = QLabel(
            "While pinned, this node does not run: each message that reaches it is answered "
            "with these messages, on the output port each is listed under "
            f"({', '.join(ports) or 'none'}); called as a tool, it answers with them. "
            "Runs in the designer use pins unless <b>Run &gt; Use Pinned Data</b> is off; "
            "<code>switchboard run</code> only with <code>--use-pins</code>. "
            f"At most {MAX_PIN_BYTES // 1024 // 1024} MB of JSON.", self)
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        self.note = QLabel(note, self)
        self.note.setObjectName("pinNote")
        self.note.setWordWrap(True)
        self.note.setVisible(bool(note))
        self.note.setStyleSheet(f"color: {theme.current().warning};")
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("pinText")
        self.text.setFont(mono_font())
        self.text.setTabChangesFocus(True)
        self.text.setPlainText(format_json(value))
        self.status = QLabel(self)
        self.status.setObjectName("pinStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.pin_button = buttons.addButton("Pin", QDialogButtonBox.ButtonRole.AcceptRole)
        self.pin_button.setDefault(True)
        self.unpin_button: QPushButton | None = None
        if fnode.pin is not None:
            self.unpin_button = buttons.addButton("Unpin",
                                                  QDialogButtonBox.ButtonRole.DestructiveRole)
            self.unpin_button.clicked.connect(self.unpin)
        buttons.accepted.connect(self.apply)
        buttons.rejected.connect(self.reject)
        self.format_button = QPushButton("Format", self)
        self.format_button.setToolTip("Indent the JSON neatly")
        self.format_button.clicked.connect(self.reformat)
        row = QHBoxLayout()
        row.addWidget(self.format_button)
        row.addStretch(1)
        row.addWidget(buttons)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.note)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.status)
        layout.addLayout(row)
        self.text.textChanged.connect(self._check)
        self._check()

    def value(self) -> Any:
        """The text as JSON; json_editor.INVALID while it does not parse."""
        return parse_json(self.text.toPlainText())[0]

    def reformat(self) -> None:
        value = self.value()
        if value is not INVALID and value is not None:
            self.text.setPlainText(format_json(value))

    def _check(self) -> tuple[dict | None, str]:
        value, error = parse_json(self.text.toPlainText())
        if value is INVALID:
            pin, why = None, f"Not valid JSON. {error}"
        elif value is None:
            pin, why = None, "Empty: type the messages to pin, or Unpin"
        else:
            pin, why = check_pin(self.doc, self.node_id, value)
        if pin is not None:
            parts = [f"{len(m)} message{'s' * (len(m) != 1)} on {port}" for port, m in pin.items()]
            self.status.setText("Ready to pin: " + "; ".join(parts))
            self.status.setStyleSheet(f"color: {theme.current().muted};")
        else:
            self.status.setText(why)
            self.status.setStyleSheet(f"color: {theme.current().error};")
        self.pin_button.setEnabled(pin is not None)
        self.format_button.setEnabled(value is not INVALID and value is not None)
        return pin, why

    def apply(self) -> None:
        pin, _why = self._check()
        if pin is None:
            return
        fnode = self.doc.node(self.node_id)
        if fnode is not None and fnode.pin != pin:
            push_pin(self.doc, self.node_id, pin)
        self.accept()

    def unpin(self) -> None:
        push_pin(self.doc, self.node_id, None)
        self.accept()


def open_pin_dialog(doc: FlowDocument, node_id: str, parent: QWidget | None, *,
                    value: Any = None, note: str = "") -> PinDialog:
    """Open the dialog beside the window (not blocking it) and return it."""
    dialog = PinDialog(doc, node_id, value, note, parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog


class PinBanner(QFrame):
    """Over a pinned node's properties: that its output is fixed, with Edit
    and Unpin at hand. Hidden while the node has no pin."""

    def __init__(self, doc: FlowDocument, node_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.node_id = doc, node_id
        self.setObjectName("pinBanner")
        self.icon = QLabel(self)
        self.title = QLabel("<b>Pinned:</b> output is fixed; this node does not run", self)
        self.title.setWordWrap(True)
        self.detail = QLabel(self)
        self.detail.setObjectName("muted")
        self.detail.setWordWrap(True)
        self.edit_button = QPushButton("Edit…", self)
        self.edit_button.setToolTip("Edit the pinned messages")
        self.edit_button.clicked.connect(self.edit)
        self.unpin_button = QPushButton("Unpin", self)
        self.unpin_button.setToolTip("Run this node again instead of sending the pinned data")
        self.unpin_button.clicked.connect(self.unpin)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        texts.addWidget(self.title)
        texts.addWidget(self.detail)
        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        buttons.addStretch(1)
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.unpin_button)
        texts.addLayout(buttons)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 8, 10, 8)
        row.setSpacing(8)
        row.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(texts, 1)
        self.sync()

    def sync(self) -> None:
        fnode = self.doc.node(self.node_id)
        pin = fnode.pin if fnode is not None else None
        self.setVisible(pin is not None)
        if pin is None:
            return
        color = pin_color()
        self.setStyleSheet(f"QFrame#pinBanner {{ border: 1px solid {color}; "
                           "border-radius: 6px; }")
        self.icon.setPixmap(icons.pixmap("pin", color, 16, self.devicePixelRatioF()))
        parts = [f"{len(msgs)} message{'s' * (len(msgs) != 1)} on {port}"
                 for port, msgs in pin.items()]
        self.detail.setText("; ".join(parts) + ". Runs here use it unless Run > Use Pinned "
                            "Data is off; the CLI only with --use-pins.")

    def edit(self) -> None:
        open_pin_dialog(self.doc, self.node_id, self.window())

    def unpin(self) -> None:
        # The banner goes with the pin, and the button with it: Qt would hand
        # the focus on to the next field, the node's Name, its text selected,
        # so that the next key renamed the node. The panel keeps it instead.
        focus = QApplication.focusWidget()
        if focus is not None and (focus is self or self.isAncestorOf(focus)):
            keeper = self.parentWidget()
            while keeper is not None and not isinstance(keeper, QAbstractScrollArea):
                keeper = keeper.parentWidget()
            (keeper or self.window()).setFocus(Qt.FocusReason.OtherFocusReason)
        push_pin(self.doc, self.node_id, None)

"""The properties panel's look: a stylesheet for light and dark palettes
(palette roles, plus the scope accents) and the small labelled pieces the
form is made of."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QMouseEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..look import theme
from .editor_base import AI_COLOR, MESSAGE_COLOR


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def panel_style(dark: bool) -> str:
    error = "#ef6b6b" if dark else "#c93c3c"
    warning = "#f0a73a" if dark else "#a8660a"
    ai_soft = "rgba(124, 92, 219, 0.22)" if dark else "rgba(124, 92, 219, 0.10)"
    msg_soft = "rgba(20, 149, 138, 0.24)" if dark else "rgba(20, 149, 138, 0.10)"
    ai_text = "#b9a6f5" if dark else "#5b3fc4"
    neutral = "#4a505c" if dark else "#d5d9e0"
    return f"""
#propertiesPanel, #propertiesPage {{ background: palette(window); }}
QLabel#muted, QLabel#pathPrefix {{ color: palette(placeholder-text); }}
QLabel#nodeTitle {{ font-size: 15px; font-weight: 600; }}
QLabel#nodeType {{ color: palette(placeholder-text); }}
QLabel#sectionTitle {{ color: palette(placeholder-text); font-size: 11px; font-weight: 600;
    letter-spacing: 0.5px; padding-top: 4px; }}
QFrame#sectionRule {{ color: palette(mid); background: palette(mid); max-height: 1px;
    border: none; }}
QLabel#paramLabel {{ font-weight: 600; }}
QLabel#requiredMarker {{ color: {warning}; font-size: 11px; }}
QLabel#fieldError {{ color: {error}; }}
QLabel#fieldWarning {{ color: {warning}; }}
QLabel#aiHint {{ color: {ai_text}; font-size: 11px; }}
QLineEdit#aiDescription {{ border-left: 3px solid {AI_COLOR}; }}
QLineEdit#pathEdit {{ border-left: 3px solid {MESSAGE_COLOR}; }}
QLineEdit[invalid="true"] {{ border: 1px solid {error}; }}
QLabel#jsonStatus {{ color: palette(placeholder-text); font-size: 11px; }}
QLabel#jsonStatus[state="error"] {{ color: {error}; }}
QPlainTextEdit {{ background: palette(base); border: 1px solid palette(mid);
    border-radius: 6px; padding: 3px; }}
QPlainTextEdit:focus {{ border-color: palette(highlight); }}
QFrame#problemBanner {{ border: 1px solid {error}; border-radius: 6px; }}
QFrame#problemBanner[severity="warning"] {{ border-color: {warning}; }}
QLabel#problemItem {{ color: palette(window-text); }}
QToolButton#scopeButton {{ border: 1px solid palette(mid); border-radius: 0px;
    padding: 2px 7px; margin: 0px; background: palette(base); color: palette(window-text);
    font-size: 11px; }}
QToolButton#scopeButton[pos="first"] {{ border-top-left-radius: 6px;
    border-bottom-left-radius: 6px; }}
QToolButton#scopeButton[pos="mid"] {{ border-left: none; border-right: none; }}
QToolButton#scopeButton[pos="last"] {{ border-top-right-radius: 6px;
    border-bottom-right-radius: 6px; }}
QToolButton#scopeButton:hover {{ background: palette(alternate-base); }}
QToolButton#scopeButton:disabled {{ color: palette(mid); background: palette(window); }}
QToolButton#scopeButton:checked {{ background: {neutral}; font-weight: 600; }}
QToolButton#scopeButton[scope="ai"]:checked {{ background: {AI_COLOR}; color: #ffffff;
    border-color: {AI_COLOR}; }}
QToolButton#scopeButton[scope="message"]:checked {{ background: {MESSAGE_COLOR};
    color: #ffffff; border-color: {MESSAGE_COLOR}; }}
QFrame#toolCard {{ background: palette(base); border: 1px solid palette(mid);
    border-radius: 8px; }}
QLabel#toolName {{ font-weight: 600; }}
QLabel#chipAi {{ background: {ai_soft}; color: {ai_text}; border-radius: 4px;
    padding: 1px 6px; }}
QLabel#chipMessage {{ background: {msg_soft}; border-radius: 4px; padding: 1px 6px; }}
QLabel#emptyTitle {{ font-size: 15px; font-weight: 600; }}
QFrame#sectionHeader {{ border-top: 1px solid palette(mid); }}
QToolButton#sectionToggle {{ border: none; background: transparent; padding: 6px 0px 2px 0px;
    color: palette(window-text); font-size: 11px; font-weight: 600; letter-spacing: 0.5px;
    text-align: left; }}
QToolButton#sectionToggle:hover {{ color: palette(highlight); }}
QToolButton#sectionToggle:focus {{ color: palette(highlight); }}
QLabel#sectionSummary {{ color: palette(placeholder-text); font-size: 11px; padding-top: 4px; }}
QLabel#sectionMarker {{ color: {error}; font-size: 11px; padding-top: 4px; }}
QLabel#hiddenNote {{ color: palette(placeholder-text); font-size: 11px; font-style: italic; }}
QToolButton#credentialsButton {{ border: 1px solid palette(mid); border-radius: 6px;
    padding: 3px 8px; background: palette(base); }}
QToolButton#credentialsButton:hover {{ border-color: palette(highlight); }}
QWidget#turnsEditor QToolButton {{ font-size: 11px; padding: 3px 2px; }}
QLabel#pluginTag {{ color: palette(placeholder-text); border: 1px solid palette(mid);
    border-radius: 4px; padding: 0px 5px; font-size: 11px; }}
"""


def section(title: str, parent: QWidget) -> QWidget:
    box = QWidget(parent)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 8, 0, 2)
    layout.setSpacing(4)
    rule = QFrame(box)
    rule.setObjectName("sectionRule")
    rule.setFrameShape(QFrame.Shape.HLine)
    label = QLabel(title.upper(), box)
    label.setObjectName("sectionTitle")
    layout.addWidget(rule)
    layout.addWidget(label)
    return box


def label(text: str, name: str, parent: QWidget, *, wrap: bool = True) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


class _SectionHeader(QFrame):
    """The clickable title line of a CollapsibleSection: a click anywhere on
    it, not only on the title, opens or closes the section."""

    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
                event.position().toPoint()):
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class CollapsibleSection(QWidget):
    """A titled part of the form that one click opens or closes. The header
    keeps a short summary (and any problem inside) in view while closed, so a
    closed section never hides that something in it needs attention."""

    toggled = Signal(bool)

    def __init__(self, title: str, parent: QWidget, *, opened: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("collapsibleSection")
        self.title = title
        self.header = _SectionHeader(self)
        self.header.setObjectName("sectionHeader")
        self.header.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggle = QToolButton(self.header)
        self.toggle.setObjectName("sectionToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        # Both wrap rather than widen a narrow dock.
        self.summary = QLabel(self.header)
        self.summary.setObjectName("sectionSummary")
        self.summary.setWordWrap(True)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.marker = QLabel(self.header)
        self.marker.setObjectName("sectionMarker")
        self.marker.setWordWrap(True)
        self.marker.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.marker.hide()
        head = QHBoxLayout(self.header)
        head.setContentsMargins(0, 2, 0, 0)
        head.setSpacing(8)
        head.addWidget(self.toggle, 0)
        head.addWidget(self.marker, 1)
        head.addWidget(self.summary, 1)
        self.body = QWidget(self)
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(0, 2, 0, 4)
        self.body_layout.setSpacing(10)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.header)
        layout.addWidget(self.body)
        self.toggle.clicked.connect(lambda on: self.set_open(on, user=True))
        self.header.clicked.connect(lambda: self.set_open(not self.is_open(), user=True))
        self.set_open(opened)

    def add(self, widget: QWidget) -> None:
        self.body_layout.addWidget(widget)

    def is_open(self) -> bool:
        return self._open

    def set_open(self, on: bool, *, user: bool = False) -> None:
        changed = on != getattr(self, "_open", None)
        self._open = on
        self.toggle.setChecked(on)
        self.toggle.setText(("▾  " if on else "▸  ") + self.title.upper())
        self.toggle.setToolTip(f"{'Close' if on else 'Open'} {self.title}")
        self.body.setVisible(on)
        if user and changed:
            self.toggled.emit(on)

    def set_summary(self, text: str) -> None:
        if self.summary.text() != text:
            self.summary.setText(text)

    def set_marker(self, text: str) -> None:
        """A problem inside, shown on the header whether open or closed."""
        if self.marker.text() != text:
            self.marker.setText(text)
        self.marker.setVisible(bool(text))


class WheelGuard(QObject):
    """The mouse wheel scrolls the panel, not an inner editor the pointer
    happens to pass over: a text box, a JSON box or a combo box gets the
    wheel only while it has focus. Without this, scrolling down a form stops
    dead on the first JSON box, and a combo box under the pointer changes
    its value (an edit nobody meant to make)."""

    def guard(self, root: QWidget) -> None:
        """Watch every wheel-hungry widget under ``root`` (call again after
        adding widgets; watching twice is harmless)."""
        for w in root.findChildren(QWidget):
            if isinstance(w, (QComboBox, QAbstractSpinBox)):
                w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # no focus by wheel either
                w.installEventFilter(self)
            elif isinstance(w, QAbstractScrollArea) and not isinstance(w, QScrollArea):
                if w.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                    w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
                w.viewport().installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.Wheel or not isinstance(obj, QWidget):
            return False
        owner = obj
        if not isinstance(obj, (QComboBox, QAbstractSpinBox)):
            parent = obj.parentWidget()
            if isinstance(parent, QAbstractScrollArea):
                owner = parent
        if owner.hasFocus():
            return False
        outer = _outer_scroll_area(owner)
        if outer is not None:
            QApplication.sendEvent(outer.verticalScrollBar(), event)
        return True


def form_error_and_buttons(dialog, layout, on_ok) -> tuple[QLabel, QDialogButtonBox]:
    """A form dialog's foot: an error line (hidden until a refused OK fills
    it, in the theme's error colour) and OK / Cancel, OK calling ``on_ok``."""
    error = QLabel("")
    error.setObjectName("formError")
    error.setWordWrap(True)
    error.setStyleSheet(f"color: {theme.current().error};")
    error.hide()
    layout.addWidget(error)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                               | QDialogButtonBox.StandardButton.Cancel)
    buttons.accepted.connect(on_ok)
    buttons.rejected.connect(dialog.reject)
    layout.addWidget(buttons)
    return error, buttons


def _outer_scroll_area(widget: QWidget) -> QScrollArea | None:
    w = widget.parentWidget()
    while w is not None:
        if isinstance(w, QScrollArea):
            return w
        w = w.parentWidget()
    return None

"""The properties panel's look: a stylesheet for light and dark palettes
(palette roles, plus the scope accents) and the small labelled pieces the
form is made of."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from .param_editors import AI_COLOR, MESSAGE_COLOR


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

"""What every value editor of the properties form shares: the accent
colours, small label helpers and ``ValueEditor``, the base each editor
(``param_editors``, ``secret_editor``) and the tool and payload forms build on."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from runtime.spec import ParamSpec

from .json_editor import format_json

# Small accents only; everything else comes from the palette.
AI_COLOR = "#7c5cdb"
MESSAGE_COLOR = "#14958a"
REQUIRED_COLOR = "#c27c0e"


def esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def repolish(widget: QWidget) -> None:
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def muted_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("muted")
    label.setWordWrap(True)
    return label


# -- value editors (scope custom) ---------------------------------------------

class ValueEditor(QWidget):
    """Base: ``value_changed(value)`` with the parsed value, None = unset
    (the spec default applies)."""

    value_changed = Signal(object)
    #: Whether consecutive edits merge into one undo step (typing does).
    merge = True

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(0, 0, 0, 0)
        self.layout_.setSpacing(3)

    def value(self) -> Any:
        raise NotImplementedError

    def set_value(self, value: Any) -> None:
        raise NotImplementedError

    def placeholder(self) -> str:
        s = self.spec
        if s.has_default and s.default not in (None, ""):
            d = s.default
            return d if isinstance(d, str) else format_json(d)
        if s.optional or (s.has_default and s.default == ""):
            return "optional"
        return ""

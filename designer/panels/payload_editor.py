"""The inject's payload as text, read at run time as its payload type says
(nodes/core/inject_debug.py), so that typing ``hello`` just works.

The param itself is of type json, so that flows made before there was a
payload type, whose payload is a JSON value (an object, a number), load
unchanged. This editor shows such a value as JSON and, while its text stays
valid JSON, keeps it a JSON value; text typed anywhere else is stored as
text, which a string payload sends as it is and the other types parse (the
Problems list says when they cannot)."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QWidget

from runtime.spec import ParamSpec

from .editor_base import ValueEditor
from .json_editor import AutoHeightText, format_json, mono_font

PLACEHOLDER = 'hello  ·  42  ·  true  ·  {"name": "Ada"}  ·  HOME'


class PayloadValueEditor(ValueEditor):
    """``value_changed``: the text typed (None when blank), or the JSON value
    while an old flow's JSON payload is being edited and still parses."""

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.edit = AutoHeightText(self, 1, 12)
        self.edit.setObjectName("payloadText")
        self.edit.setFont(mono_font())
        self.edit.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.edit.setTabChangesFocus(True)
        self.edit.setPlaceholderText(PLACEHOLDER)
        self.edit.setToolTip("Type the payload as text; the payload type says how it is read "
                             "(a number, true or false, JSON, or an environment variable's "
                             "name)")
        self.layout_.addWidget(self.edit)
        self._json_value = False  # the shown value is JSON (an old flow), not text
        self._sample = False  # the sample prompt is shown, not yet clicked into
        self.edit.viewport().installEventFilter(self)
        self.edit.textChanged.connect(lambda: self.value_changed.emit(self.value()))

    def value(self) -> Any:
        text = self.edit.toPlainText()
        if not text:
            return None
        if self._json_value:
            try:
                return json.loads(text)
            except ValueError:
                pass  # no longer JSON: the person typed text, and text it is
        return text

    def set_value(self, value: Any) -> None:
        if value is not None and self.value() == value and type(self.value()) is type(value):
            return  # the text already means it: keep the cursor and the person's spacing
        self._json_value = value is not None and not isinstance(value, str)
        text = "" if value is None else value if isinstance(value, str) else format_json(value)
        self.edit.blockSignals(True)
        self.edit.setPlainText(text)
        self.edit.blockSignals(False)
        self.edit.refit()
        from ..canvas.wiring import SAMPLE_PROMPT

        # A sample prompt (a new Inject before an agent) is there to be typed
        # over: shown selected, and the first click selects it all again.
        self._sample = text == SAMPLE_PROMPT
        if self._sample:
            self.edit.selectAll()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.edit.viewport() and self._sample \
                and event.type() in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease):
            # The first click on the sample takes the keys with it all
            # selected (a click would otherwise drop the selection).
            if event.type() == QEvent.Type.MouseButtonRelease:
                self._sample = False
            self.edit.setFocus(Qt.FocusReason.MouseFocusReason)
            self.edit.selectAll()
            return True
        return super().eventFilter(obj, event)

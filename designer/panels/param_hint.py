"""A live line of text under a param's editor, supplied by the node class.

A node type may define a classmethod ``param_hint(name, params)`` that
returns text to show under param ``name`` for the node's current settings
(``params``: the flow node's ParamValues by name), or None for nothing.
``trigger.schedule`` uses it to show the next five fire times under its cron
expression. The hint is recomputed whenever the node's params change, so it
must be cheap and must not touch the network or the disk.

The properties panel asks ``ParamHints.attach(name, row)`` per param row and
``ParamHints.refresh()`` after each sync; nodes without the classmethod cost
one attribute lookup.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from runtime.registry import Registry

from .json_editor import mono_font

log = logging.getLogger(__name__)

#: Characters of a hint shown; a node returning a novel is cut.
MAX_HINT_CHARS = 2000


def param_hint(spec_type: str, param: str, params: dict[str, Any],
               registry: Registry | None = None) -> str | None:
    """The hint the node class ``spec_type`` gives for ``param`` with these
    settings, or None (no such class, no hook, nothing to say). A hook that
    raises gives its error text rather than breaking the form."""
    cls = (registry or Registry.default()).get(spec_type)
    hook = getattr(cls, "param_hint", None) if cls is not None else None
    if hook is None:
        return None
    try:
        text = hook(param, params)
    except Exception as exc:  # noqa: BLE001 - a node's hint must never break the panel
        log.debug("param_hint of %s.%s failed", spec_type, param, exc_info=True)
        text = f"⚠ {exc}"
    if not isinstance(text, str) or not text.strip():
        return None
    return text if len(text) <= MAX_HINT_CHARS else text[:MAX_HINT_CHARS] + "…"


class ParamHints:
    """The hint labels of one node's form."""

    def __init__(self, doc: Any, node_id: str) -> None:
        self.doc, self.node_id = doc, node_id
        fnode = doc.node(node_id)
        cls = doc.registry.get(fnode.type) if fnode is not None else None
        self.enabled = getattr(cls, "param_hint", None) is not None
        self.labels: dict[str, QLabel] = {}

    def attach(self, name: str, row: QWidget) -> None:
        """Put a (hidden until there is text) hint label under the row's editor."""
        if not self.enabled:
            return
        label = QLabel(row)
        label.setObjectName("muted")
        label.setProperty("paramHint", True)
        label.setWordWrap(True)
        # Monospace, so the times line up; as large as the text around it.
        font = mono_font()
        font.setPointSizeF(label.font().pointSizeF())
        label.setFont(font)
        label.setContentsMargins(0, 0, 0, 4)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.hide()
        layout = row.layout()
        # Right under the editor: after the label line (0) and the editor (1).
        layout.insertWidget(min(2, layout.count()), label)
        self.labels[name] = label

    def refresh(self) -> None:
        if not self.labels:
            return
        fnode = self.doc.node(self.node_id)
        if fnode is None:
            return
        for name, label in self.labels.items():
            text = param_hint(fnode.type, name, fnode.params, self.doc.registry)
            if (text or "") != label.text():
                label.setText(text or "")
            label.setVisible(bool(text))

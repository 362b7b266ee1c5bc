"""Messages: the last messages into and out of the selected node, or the last
message along the selected wire, from the run's recorded stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from .common import COLORS, JsonTree, hint_or

if TYPE_CHECKING:
    from .context import InspectorContext


class _Pane(QWidget):
    def __init__(self, title: str) -> None:
        super().__init__()
        self.title = QLabel(title)
        self.title.setStyleSheet("font-weight: 600; padding: 6px 8px 2px 8px;")
        self.tree = JsonTree()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.title)
        layout.addWidget(self.tree, 1)

    def show_messages(self, title: str, messages: list[Any]) -> None:
        self.title.setText(title)
        # newest first: the one a person is looking for
        roots = [(f"#{len(messages) - i}" + ("  newest" if i == 0 else ""), m)
                 for i, m in enumerate(reversed(messages))]
        self.tree.set_roots(roots, expand=False)
        if roots:
            self.tree.topLevelItem(0).setExpanded(True)


class MessagesTab(QWidget):
    def __init__(self, ctx: InspectorContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.node_id: str | None = None
        self.wire: int | None = None

        self.header = QLabel()
        self.header.setStyleSheet("font-size: 13px; font-weight: 600; padding: 8px;")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"color: {COLORS['muted']}; padding: 0 8px 4px 8px;")
        self.incoming = _Pane("In")
        self.outgoing = _Pane("Out")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.incoming)
        split.addWidget(self.outgoing)
        body = QWidget()
        body_layout = QVBoxLayout(body)
        body_layout.setContentsMargins(0, 0, 0, 0)
        body_layout.setSpacing(0)
        body_layout.addWidget(self.header)
        body_layout.addWidget(self.note)
        body_layout.addWidget(split, 1)

        self.empty, self.stack = hint_or(self, "Select a node or a wire on the canvas to see the "
                                         "last messages that went through it in this run.", body)

    def show_node(self, node_id: str | None) -> None:
        self.node_id, self.wire = node_id, None
        self.refresh()

    def show_wire(self, index: int | None) -> None:
        self.node_id, self.wire = None, index
        self.refresh()

    def refresh(self) -> None:
        model = self.ctx.model
        if self.node_id is not None:
            self.stack.setCurrentIndex(1)
            last = model.last.get(self.node_id, {})
            counts = model.node_stats.get(self.node_id, {})
            self.header.setText(self.ctx.name_of(self.node_id))
            text = (f"{counts.get('in', 0)} in · {counts.get('out', 0)} out · "
                    f"{counts.get('errors', 0)} errors" if counts else
                    "This node has not received a message in this run.")
            stale = self.ctx.stale_note(self.node_id)
            self.note.setText(f"{stale} {text}" if stale else text)
            self.outgoing.show()
            self.incoming.show_messages("Last in", last.get("in", []))
            self.outgoing.show_messages("Last out", last.get("out", []))
        elif self.wire is not None:
            self.stack.setCurrentIndex(1)
            self._show_wire(self.wire)
        else:
            self.stack.setCurrentIndex(0)

    def _show_wire(self, index: int) -> None:
        model = self.ctx.model
        flow = self.ctx.flow
        wire = flow.wires[index] if flow is not None and 0 <= index < len(flow.wires) else None
        if wire is None:
            self.header.setText(f"Wire {index}")
        else:
            (src, port), (dst, dport) = wire.source, wire.target
            self.header.setText(f"{self.ctx.name_of(src)}  ·  {port}  →  "
                                f"{self.ctx.name_of(dst)}  ·  {dport}")
        # The run counted wires by its own indices; edits since may have
        # shifted them, or this wire may be new.
        ran = self.ctx.run_wire(index)
        count = self.ctx.wire_count(ran) if ran is not None else 0
        message = self.ctx.wire_message(ran) if ran is not None else None
        self.outgoing.hide()
        if ran is None and wire is not None and model.run_id:
            self.note.setText("This wire was added after the run: nothing went along it yet.")
            self.incoming.show_messages("Last message", [])
        elif message is not None:
            self.note.setText(f"{count} message{'s' if count != 1 else ''} carried.")
            self.incoming.show_messages("Last message", [message])
        elif wire is not None and model.last.get(wire.source[0], {}).get("out"):
            # Without tracing the engine keeps messages per node, not per
            # wire: what the source last sent is the best answer there is.
            self.note.setText(
                f"{count} message{'s' if count != 1 else ''} carried. Shown: the last message "
                f"'{self.ctx.name_of(wire.source[0])}' sent. Turn on Run ▸ Record every message "
                f"to keep each wire's own.")
            self.incoming.show_messages("Last sent by the source node",
                                        model.last[wire.source[0]]["out"][-1:])
        else:
            self.note.setText(f"{count} messages carried; none recorded." if count else
                              "No message went along this wire in this run.")
            self.incoming.show_messages("Last message", [])

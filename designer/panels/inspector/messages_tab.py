"""Messages: the last messages into and out of the selected node, or the last
message along the selected wire, from the run's recorded stats.

A subflow instance is no node of the run (the run runs its definition's
nodes, by path: ``order.check_stock``): selected, it shows what entered it
(the last messages into the nodes inside that its input ports feed) and
what left it (the last messages out of the nodes inside that feed its
output ports), each labelled with the node inside."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from runtime.flow.subflows import IN_TYPE, OUT_TYPE

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

    def show_messages(self, title: str, messages: list[Any],
                      where: list[str] | None = None) -> None:
        """``where``: per message, the node it is of (an instance's pane)."""
        self.title.setText(title)
        # newest first: the one a person is looking for
        n = len(messages)
        roots = [(f"#{n - i}" + ("  newest" if i == 0 else "")
                  + (f"  · {where[n - 1 - i]}" if where else ""), m)
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
        if self.node_id is not None and self._show_instance(self.node_id):
            self.stack.setCurrentIndex(1)
        elif self.node_id is not None:
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

    # -- a subflow instance ------------------------------------------------------
    def _show_instance(self, path: str) -> bool:
        """A subflow instance of the run shown that is no node of the run:
        show what entered and left it; False for anything else (a tool
        instance is a node of its run: its calls are its own messages)."""
        model = self.ctx.model
        run_map = self.ctx.run_map
        if (run_map is None or path not in run_map.expansion.instances
                or path in model.node_stats or path in model.last):
            return False
        entries = instance_ends(run_map, path, IN_TYPE)
        exits = instance_ends(run_map, path, OUT_TYPE)
        name = self.ctx.name_of
        self.header.setText(name(path))

        def own(node_id: str) -> str:  # the node inside, without the instance
            return name(node_id).rpartition(" › ")[2] or node_id

        ins, in_where, seen = [], [], set()
        for node_id in entries:
            for m in model.last.get(node_id, {}).get("in", []):
                key = m.get("_msgid") if isinstance(m, dict) else None
                if key and key in seen:
                    continue  # one message its input fed to two nodes: once
                if key:
                    seen.add(key)
                ins.append(m)
                in_where.append(own(node_id))
        outs, out_where = [], []
        for node_id in exits:
            for m in model.last.get(node_id, {}).get("out", []):
                outs.append(m)
                out_where.append(own(node_id))
        inside = [n for n in run_map.flat.nodes if n.id.startswith(path + ".")]
        stats = [model.node_stats.get(n.id, {}) for n in inside]
        came = self._came_in(run_map, path)
        if came is None:
            came = max((model.node_stats.get(n, {}).get("in", 0) for n in entries), default=0)
        left = sum(model.node_stats.get(n, {}).get("out", 0) for n in exits)
        errors = sum(s.get("errors", 0) for s in stats)
        if not any(s.get("in") for s in stats):
            text = "This subflow instance has not received a message in this run."
        else:
            text = (f"Subflow instance: {came} in · {left} out · {errors} error"
                    f"{'s' * (errors != 1)} inside. In: what its input fed to "
                    f"{_names(entries, own)}; out: what {_names(exits, own)} sent "
                    "to its output.")
        stale = self.ctx.stale_note(path)
        self.note.setText(f"{stale} {text}" if stale else text)
        self.outgoing.show()
        self.incoming.show_messages("Last in", ins, in_where)
        self.outgoing.show_messages("Last out", outs, out_where)
        return True

    def _came_in(self, run_map: Any, path: str) -> int | None:
        """Messages along the wires into a top-level instance (None: it is
        nested, or nothing is wired into it)."""
        wires = [i for i, w in enumerate(run_map.source.wires) if w.target[0] == path]
        if not wires:
            return None
        counts = run_map.user_wire_counts(self.ctx.model.wire_counts)
        return sum(counts.get(i, 0) for i in wires)


def _names(node_ids: list[str], own: Any) -> str:
    if not node_ids:
        return "no node"
    names = [own(n) for n in node_ids]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def instance_ends(run_map: Any, path: str, port_type: str) -> list[str]:
    """The run's nodes inside the instance ``path`` that its input ports
    feed (``port_type`` IN_TYPE), or that feed its output ports (OUT_TYPE),
    through nested instances; each once, in the definition's wire order."""
    inst = run_map.expansion.instances.get(path)
    if inst is None:
        return []
    defn = inst.definition
    ports = {n.id for n in defn.nodes if n.type == port_type}
    out: list[str] = []
    for w in defn.wires:
        if port_type == IN_TYPE and w.source[0] in ports:
            inner = w.target[0]
        elif port_type == OUT_TYPE and w.target[0] in ports:
            inner = w.source[0]
        else:
            continue
        flat = f"{path}.{inner}"
        if flat in run_map.expansion.instances:
            found = instance_ends(run_map, flat, port_type)
        else:
            found = [flat] if run_map.flat_node(flat) is not None else []
        out += [n for n in found if n not in out]
    return out

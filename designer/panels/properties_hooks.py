"""Flow hooks in an agent's Hooks section: the flow setting (``settings.hooks``)
that sends a hook of every agent, or of the agents named, to a hook flow
whose first node needs no wire from them (runtime.agent.hooks).

Each row is one hook: which hook, which node starts its flow, for which
agents, and whether the agent waits for it. Every edit is one command on
the undo stack (SetFlowHooks) that replaces the list, as any other edit."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QUndoCommand
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from designer.model.document import FlowDocument
from runtime.flow import HOOK_PORTS, MAX_FLOW_HOOKS, FlowHook

from .panel_style import label

ALL = "all"
THIS = "this"
NAMED = "named"


class SetFlowHooks(QUndoCommand):
    """Replace the flow's hooks (settings.hooks) with ``new``."""

    def __init__(self, doc: FlowDocument, new: list[FlowHook], text: str) -> None:
        super().__init__(text)
        self.doc = doc
        self.old = [h.model_copy() for h in doc.flow.settings.hooks]
        self.new = [h.model_copy() for h in new]

    def _set(self, hooks: list[FlowHook]) -> None:
        self.doc.flow.settings.hooks = [h.model_copy() for h in hooks]
        self.doc.settings_changed.emit()

    def redo(self) -> None:
        self._set(self.new)

    def undo(self) -> None:
        self._set(self.old)


class _HookRow(QFrame):
    """One flow hook: hook, first node, agents, wait; and a remove button."""

    def __init__(self, editor: FlowHooksEditor, index: int) -> None:
        super().__init__(editor)
        self.setObjectName("flowHookRow")
        self.editor, self.index = editor, index
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(3)
        top, bottom = QHBoxLayout(), QHBoxLayout()
        top.setSpacing(6)
        bottom.setSpacing(6)
        self.port = QComboBox(self)
        self.port.setToolTip("Which of every agent's hooks goes to this flow")
        for p in HOOK_PORTS:
            self.port.addItem(p, p)
        self.node = QComboBox(self)
        self.node.setToolTip("The first node of the hook flow: it gets the hook's messages "
                             "with no wire from the agent")
        self.remove = QToolButton(self)
        self.remove.setText("✕")
        self.remove.setAutoRaise(True)
        self.remove.setToolTip("Remove this flow hook")
        arrow = label("→", "muted", self, wrap=False)
        top.addWidget(self.port, 0)
        top.addWidget(arrow, 0)
        top.addWidget(self.node, 1)
        top.addWidget(self.remove, 0)
        self.agents = QComboBox(self)
        self.agents.setToolTip("The agents whose hook goes to this flow")
        self.blocking = QCheckBox("Wait", self)
        self.blocking.setToolTip("The agent waits for the flow's AI Hook Result (at most its "
                                 "hook_timeout_seconds); a waiting on_tool fires before the call "
                                 "and may veto it")
        for combo in (self.port, self.node, self.agents):
            # Narrow docks: the combos shrink to the panel, never widen it.
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
        bottom.addWidget(self.agents, 1)
        bottom.addWidget(self.blocking, 0)
        box.addLayout(top)
        box.addLayout(bottom)
        self.port.activated.connect(lambda _i: self._edit(port=self.port.currentData()))
        self.node.activated.connect(lambda _i: self._edit(node=self.node.currentData()))
        self.agents.activated.connect(lambda _i: self._on_agents())
        self.blocking.clicked.connect(lambda on: self._edit(blocking=bool(on)))
        self.remove.clicked.connect(lambda: editor.remove(self.index))

    def show_hook(self, hook: FlowHook, nodes: list[tuple[str, str]], agent_id: str) -> None:
        self.port.setCurrentIndex(max(0, self.port.findData(hook.port)))
        self.node.clear()
        for node_id, text in nodes:
            self.node.addItem(text, node_id)
        if self.node.findData(hook.node) < 0:
            self.node.addItem(f"{hook.node} (not in this flow)", hook.node)
        self.node.setCurrentIndex(self.node.findData(hook.node))
        self.agents.clear()
        self.agents.addItem("All agents", ALL)
        self.agents.addItem("Only this agent", THIS)
        if hook.agents == ALL:
            self.agents.setCurrentIndex(0)
        elif hook.agents == [agent_id]:
            self.agents.setCurrentIndex(1)
        else:
            self.agents.addItem("Agents: " + (", ".join(hook.agents) or "none"), NAMED)
            self.agents.setCurrentIndex(2)
        self.blocking.setChecked(hook.blocking)

    def _on_agents(self) -> None:
        choice = self.agents.currentData()
        if choice == ALL:
            self._edit(agents=ALL)
        elif choice == THIS:
            self._edit(agents=[self.editor.agent_id])

    def _edit(self, **change) -> None:
        self.editor.change(self.index, **change)


class FlowHooksEditor(QWidget):
    """The flow's hooks, as rows, and a button to add one."""

    rows_changed = Signal()  # rows were made or removed (the form guards new combos)

    def __init__(self, doc: FlowDocument, agent_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("flowHooks")
        self.doc, self.agent_id = doc, agent_id
        self.rows: list[_HookRow] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(label("Flow hooks", "paramLabel", self, wrap=False))
        self.note = label("Send a hook of every agent of this flow (or of the ones chosen) to a "
                          "flow that starts at a node, with no wire from the agents. Saved in "
                          "the flow's settings.", "muted", self)
        layout.addWidget(self.note)
        self.rows_box = QVBoxLayout()
        self.rows_box.setSpacing(8)
        layout.addLayout(self.rows_box)
        self.add_button = QPushButton("Add flow hook", self)
        self.add_button.setToolTip("Send every agent's on_tool hook to a node of this flow; "
                                   "change the hook, node and agents after")
        self.add_button.clicked.connect(self.add)
        layout.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignLeft)
        for sig in (doc.settings_changed, doc.node_added, doc.node_removed, doc.flow_reset):
            sig.connect(self.sync)
        self.sync()

    def _candidates(self) -> list[tuple[str, str]]:
        """Nodes that can start a hook flow: any with an input, not an agent."""
        out = []
        for n in self.doc.flow.nodes:
            spec = self.doc.registry.spec(n.type)
            if spec is None or not spec.inputs or any(p.kind == "hook" for p in spec.outputs):
                continue
            out.append((n.id, f"{n.name or spec.name} ({n.id})" if n.name else n.id))
        return out

    def sync(self, *_: object) -> None:
        hooks = self.doc.flow.settings.hooks
        count = len(self.rows)
        while len(self.rows) > len(hooks):
            row = self.rows.pop()
            self.rows_box.removeWidget(row)
            row.deleteLater()
        while len(self.rows) < len(hooks):
            row = _HookRow(self, len(self.rows))
            self.rows.append(row)
            self.rows_box.addWidget(row)
            row.show()  # made after the panel was shown: not shown with it
        nodes = self._candidates()
        for row, hook in zip(self.rows, hooks, strict=True):
            row.show_hook(hook, nodes, self.agent_id)
        self.add_button.setEnabled(bool(nodes) and len(hooks) < MAX_FLOW_HOOKS)
        if len(self.rows) != count:
            self.rows_changed.emit()

    def summary(self) -> str:
        n = len(self.doc.flow.settings.hooks)
        return f"{n} flow hook{'s' * (n != 1)}" if n else ""

    def add(self) -> None:
        nodes = self._candidates()
        if not nodes:
            return
        hooks = [*self.doc.flow.settings.hooks, FlowHook(port="on_tool", node=nodes[0][0])]
        self.doc.undo_stack.push(SetFlowHooks(self.doc, hooks, "Add flow hook"))

    def remove(self, index: int) -> None:
        hooks = list(self.doc.flow.settings.hooks)
        if 0 <= index < len(hooks):
            del hooks[index]
            self.doc.undo_stack.push(SetFlowHooks(self.doc, hooks, "Remove flow hook"))

    def change(self, index: int, **change: object) -> None:
        hooks = list(self.doc.flow.settings.hooks)
        if not 0 <= index < len(hooks):
            return
        new = hooks[index].model_copy(update=change)
        if new == hooks[index]:
            return
        hooks[index] = new
        what = next(iter(change))
        self.doc.undo_stack.push(SetFlowHooks(self.doc, hooks, f"Flow hook: {what}"))

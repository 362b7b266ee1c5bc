"""The flow document: the one model the designer edits.

It wraps a ``runtime.flow.Flow`` and announces every change with a signal;
the scene, the properties panel and the inspector only listen. Every edit
a user makes goes through a QUndoCommand (designer.model.commands) that calls the
mutators here, so undo/redo is exact and "modified" is simply
``not undo_stack.isClean()``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal
from PySide6.QtGui import QUndoStack

from runtime.flow import (
    Flow,
    FlowNode,
    Problem,
    ToolOverride,
    Wire,
    load_flow,
    offered_tool_names,
    output_ports,
    save_flow,
    validate_flow,
)
from runtime.registry import Registry
from runtime.spec import NodeSpec, ParamValue

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "resources" / "examples"


class FlowDocument(QObject):
    """Signals carry ids and indices; read the current state from ``flow``."""

    node_added = Signal(str)  # node id
    node_removed = Signal(str, int)  # node id, former index
    node_moved = Signal(str)  # node id
    node_changed = Signal(str)  # params, name, tool override, outputs
    wire_added = Signal(int)  # index in flow.wires
    wire_removed = Signal(object, int)  # Wire, former index
    flow_reset = Signal()  # a whole new flow (open, new)
    settings_changed = Signal()  # flow.settings (which packages run out of process)
    changed = Signal()  # anything above; for previews and autosave
    problems_changed = Signal(list)  # list[Problem]
    path_changed = Signal(str)

    def __init__(self, flow: Flow | None = None, registry: Registry | None = None,
                 path: str | Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.registry = registry or Registry.default()
        self.flow = flow or Flow()
        self.path: Path | None = Path(path) if path else None
        self.undo_stack = QUndoStack(self)
        self.problems: list[Problem] = []
        self._by_id: dict[str, FlowNode] | None = None  # built on demand; see node()
        # Validation runs after a quiet moment, not on every keystroke.
        self._validate_timer = QTimer(self)
        self._validate_timer.setSingleShot(True)
        self._validate_timer.setInterval(150)
        self._validate_timer.timeout.connect(self.revalidate)
        self._validation_held = False
        self._validation_due = False
        for sig in (self.node_added, self.node_removed, self.node_moved, self.node_changed,
                    self.wire_added, self.wire_removed, self.flow_reset,
                    self.settings_changed):
            sig.connect(self._on_any_change)
        self.revalidate()

    # -- files ----------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, registry: Registry | None = None) -> FlowDocument:
        """Raises runtime.flow.FlowError with the problems of a bad file. A
        flow that parses but has validation errors still opens, so that the
        user can fix it; its problems are shown."""
        registry = registry or Registry.default()
        flow = load_flow(path, registry, validate=False)
        return cls(flow, registry, path)

    def save(self, path: str | Path | None = None) -> None:
        target = Path(path) if path else self.path
        if target is None:
            raise ValueError("no path to save to")
        save_flow(self.flow, target)
        if target != self.path:
            self.path = target
            self.path_changed.emit(str(target))
        self.undo_stack.setClean()

    def dialog_folder(self, recent: list[str] = (), *, saving: bool = False) -> Path:
        """Where a file dialog about this flow starts: the flow's own folder;
        for an unsaved flow the folder of the newest recent file that still
        exists; for a new user (none) the examples to open, or Documents to
        save in (never the installed examples, which an upgrade replaces)."""
        if self.path is not None:
            return self.path.parent
        for f in recent:
            folder = Path(f).parent
            if folder.is_dir():
                return folder
        if not saving and EXAMPLES_DIR.is_dir():
            return EXAMPLES_DIR
        documents = QStandardPaths.writableLocation(
            QStandardPaths.StandardLocation.DocumentsLocation)
        return Path(documents) if documents and Path(documents).is_dir() else Path.home()

    @property
    def modified(self) -> bool:
        return not self.undo_stack.isClean()

    def reset(self, flow: Flow, path: str | Path | None = None) -> None:
        self.flow = flow
        self._by_id = None
        self.path = Path(path) if path else None
        self.undo_stack.clear()
        self.flow_reset.emit()
        self.path_changed.emit(str(self.path or ""))

    # -- queries ----------------------------------------------------------------
    def node(self, node_id: str) -> FlowNode | None:
        # Flow.node() scans the list; the scene asks for every node while
        # building, which made opening a 2,000-node flow quadratic.
        if self._by_id is None or len(self._by_id) != len(self.flow.nodes):
            self._by_id = {}
            for n in self.flow.nodes:
                self._by_id.setdefault(n.id, n)
        n = self._by_id.get(node_id)
        if n is not None and n.id == node_id:
            return n
        self._by_id = None  # the list was changed behind our back; scan it
        return self.flow.node(node_id)

    def node_index(self, node_id: str) -> int:
        for i, n in enumerate(self.flow.nodes):
            if n.id == node_id:
                return i
        raise KeyError(node_id)

    def spec(self, node_id: str) -> NodeSpec | None:
        n = self.node(node_id)
        return self.registry.spec(n.type) if n else None

    def output_ports(self, node_id: str) -> list[str]:
        n = self.node(node_id)
        spec = self.registry.spec(n.type) if n else None
        if n is None or spec is None:
            return []
        if not spec.dynamic_outputs:
            # From the spec alone: asking the registry for the class would
            # import the node's package, before the first paint of a flow.
            return [p.name for p in spec.outputs]
        return output_ports(spec, self.registry, n)

    def port_kind(self, node_id: str, port: str) -> str:
        spec = self.spec(node_id)
        if spec is None:
            return "out"
        for p in spec.outputs:
            if p.name == port:
                return p.kind
        return "in" if any(p.name == port for p in spec.inputs) else "out"

    def wires_of(self, node_id: str) -> list[int]:
        return [i for i, w in enumerate(self.flow.wires)
                if w.source[0] == node_id or w.target[0] == node_id]

    def can_connect(self, src: str, sport: str, dst: str, dport: str) -> tuple[bool, str]:
        """Whether a new wire is acceptable, and why not (shown to the user)."""
        s, d = self.spec(src), self.spec(dst)
        if s is None or d is None:
            return False, "unknown node"
        if sport not in self.output_ports(src):
            return False, f"'{sport}' is not an output of {s.name}"
        if dport not in [p.name for p in d.inputs]:
            return False, f"{d.name} has no input '{dport}'"
        if any(w.source == (src, sport) and w.target == (dst, dport) for w in self.flow.wires):
            return False, "these ports are already wired"
        if self.port_kind(src, sport) == "tools":
            if d.tool is None:
                return False, f"{d.name} declares no tool, so it cannot be an agent's tool"
            target = self.node(dst)
            assert target is not None
            names = set(offered_tool_names(d, target, self.registry))
            for w in self.flow.wires:
                if w.source == (src, sport):
                    other = self.node(w.target[0])
                    ospec = self.spec(w.target[0])
                    both = names & set(offered_tool_names(ospec, other, self.registry)) \
                        if other and ospec else set()
                    if both:
                        return False, (f"the agent already has a tool named '{min(both)}'; "
                                       "rename one in its properties")
        return True, ""

    def problems_for(self, node_id: str) -> list[Problem]:
        return [p for p in self.problems if p.node == node_id]

    # -- mutators (call through designer.model.commands, so that undo works) ---------
    def insert_node(self, fnode: FlowNode, index: int | None = None) -> None:
        if self.node(fnode.id) is not None:
            raise ValueError(f"duplicate node id {fnode.id}")
        self._by_id = None
        if index is None:
            self.flow.nodes.append(fnode)
        else:
            self.flow.nodes.insert(index, fnode)
        self.node_added.emit(fnode.id)

    def remove_node(self, node_id: str) -> tuple[FlowNode, int]:
        """Wires must be removed first (the commands do)."""
        index = self.node_index(node_id)
        fnode = self.flow.nodes.pop(index)
        self._by_id = None
        self.node_removed.emit(node_id, index)
        return fnode, index

    def move_node(self, node_id: str, pos: tuple[float, float]) -> None:
        n = self.node(node_id)
        if n is not None and tuple(n.position) != tuple(pos):
            n.position = (float(pos[0]), float(pos[1]))
            self.node_moved.emit(node_id)

    def set_param(self, node_id: str, name: str, value: ParamValue | None) -> None:
        n = self.node(node_id)
        assert n is not None
        if value is None:
            n.params.pop(name, None)
        else:
            n.params[name] = value
        self.node_changed.emit(node_id)

    def set_name(self, node_id: str, name: str | None) -> None:
        n = self.node(node_id)
        assert n is not None
        n.name = name or None
        self.node_changed.emit(node_id)

    def set_tool(self, node_id: str, tool: ToolOverride | None) -> None:
        n = self.node(node_id)
        assert n is not None
        n.tool = tool
        self.node_changed.emit(node_id)

    def set_output_path(self, node_id: str, output: str, path: str | None) -> None:
        """Move where an output is written in RPA mode; None restores the
        spec's default path."""
        n = self.flow.node(node_id)
        assert n is not None
        if path:
            n.outputs[output] = path
        else:
            n.outputs.pop(output, None)
        self.node_changed.emit(node_id)

    def set_disabled(self, node_id: str, disabled: bool) -> None:
        n = self.node(node_id)
        assert n is not None
        n.disabled = disabled
        self.node_changed.emit(node_id)

    def set_pin(self, node_id: str, pin: dict | None) -> None:
        """Pin the node's output (runtime.pins), or unpin it with None."""
        n = self.node(node_id)
        assert n is not None
        n.pin = pin
        self.node_changed.emit(node_id)

    def set_out_of_process(self, packages: list[str]) -> None:
        """Which node packages run in their own process in this flow."""
        self.flow.settings.out_of_process = list(packages)
        self.settings_changed.emit()

    def insert_wire(self, wire: Wire, index: int | None = None) -> int:
        if index is None:
            index = len(self.flow.wires)
        self.flow.wires.insert(index, wire)
        self.wire_added.emit(index)
        return index

    def remove_wire(self, index: int) -> Wire:
        wire = self.flow.wires.pop(index)
        self.wire_removed.emit(wire, index)
        return wire

    # -- validation -----------------------------------------------------------
    def _on_any_change(self, *args: object) -> None:
        self.changed.emit()
        if self._validation_held:
            self._validation_due = True
        else:
            self._validate_timer.start()

    def hold_validation(self, held: bool) -> None:
        """While held, a change does not schedule validation (the designer's
        staged start: checking a flow imports its node packages, which the
        first paint does not need); releasing validates at once if anything
        changed meanwhile. ``revalidate()`` still works while held."""
        self._validation_held = held
        if not held and self._validation_due:
            self._validation_due = False
            self.revalidate()

    def revalidate(self) -> list[Problem]:
        self._validate_timer.stop()
        self._validation_due = False
        self.problems = validate_flow(self.flow, self.registry,
                                      file=str(self.path) if self.path else "")
        self.problems_changed.emit(self.problems)
        return self.problems

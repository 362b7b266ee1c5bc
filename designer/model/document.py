"""The flow document: the one model the designer edits.

It wraps a ``runtime.flow.Flow`` and announces every change with a signal;
the scene, the properties panel and the inspector only listen. Every edit
a user makes goes through a QUndoCommand (designer.model.commands) that calls the
mutators here, so undo/redo is exact and "modified" is simply
``not undo_stack.isClean()``.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal
from PySide6.QtGui import QUndoStack

from runtime.flow import (
    Flow,
    FlowError,
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
from runtime.flow.model import SubflowDef, SubflowPin
from runtime.flow.subflows import (
    IN_TYPE,
    LIBRARY_SUFFIX,
    OUT_TYPE,
    LibraryEntry,
    SubflowRegistry,
    find_library,
    instance_spec,
    is_instance_type,
    library_dirs,
    library_subflows,
    subflow_name,
    version_key,
    with_subflows,
)
from runtime.registry import Registry
from runtime.spec import NodeSpec, ParamValue

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "resources" / "examples"


class DocumentRegistry(SubflowRegistry):
    """The registry of one document, the same object for the document's
    life (the palette, the quick-add popup and the run keep it): the node
    packages' types (``base``) and ``subflow:NAME`` for every subflow the
    flow can place: its own definitions, the library's current ones, and
    the version each used library subflow pins. ``FlowDocument`` refreshes
    it in place (``sync_subflows``)."""

    def __init__(self, base: Registry, document: FlowDocument | None = None) -> None:
        super().__init__(base, {})
        self._document = weakref.ref(document) if document is not None else None

    @property
    def document(self) -> FlowDocument | None:
        """The document this registry serves (the palette asks it which
        subflows are the library's and whether a definition is edited)."""
        return self._document() if self._document is not None else None

    def load(self, defs: dict[str, tuple[SubflowDef, str]]) -> None:
        SubflowRegistry.__init__(self, self.base, defs)


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
    #: The subflows this document can place changed (a definition, the
    #: library, a pinned version): the palette lists them again.
    subflows_changed = Signal()

    def __init__(self, flow: Flow | None = None, registry: Registry | None = None,
                 path: str | Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        base = registry or Registry.default()
        #: The node packages' registry; ``registry`` adds the subflows to it.
        self.base_registry: Registry = base.base if isinstance(base, SubflowRegistry) else base
        #: "The registry for this document": every node type it can place,
        #: subflow instances included. One object, refreshed in place.
        self.registry: DocumentRegistry = DocumentRegistry(self.base_registry, self)
        self.flow = flow or Flow()
        self.path: Path | None = Path(path) if path else None
        #: Set when this document edits a subflow's definition (its tab,
        #: ``for_definition``): the definition, and the document of the flow
        #: that holds it, whose library this one uses and whose registry's
        #: subflows this one's follows.
        self.definition: SubflowDef | None = None
        self.owner: FlowDocument | None = None
        #: The library's current subflows by name (runtime.flow.subflows),
        #: read when the flow opens or moves and on ``sync_subflows(rescan=True)``.
        self.library: dict[str, LibraryEntry] = {}
        self._scanned_for: str | None = None
        self._library_stat: tuple | None = None
        self._version_cache: dict[tuple, tuple[SubflowDef, NodeSpec] | None] = {}
        self._uses_key: tuple | None = None
        self._used: dict[str, tuple[SubflowDef, str]] = {}
        self._pins: dict[str, tuple] = {}  # instance node id -> (type, pinned version)
        self._definition_refs: list[weakref.ref] = []  # for_definition's, while they live
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
        # Before the scene's and panels' slots: they read the new specs.
        self.node_added.connect(self._subflow_node_added)
        self.node_removed.connect(self._subflow_node_removed)
        self.node_changed.connect(self._subflow_node_changed)
        self.flow_reset.connect(self._subflow_flow_reset)
        self.path_changed.connect(self._subflow_path_changed)
        self.sync_subflows(rescan=True)
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
        """The node's spec; for an instance of a library subflow, that of
        the version it pins (two instances may pin two versions)."""
        n = self.node(node_id)
        if n is None:
            return None
        if n.subflow is not None and is_instance_type(n.type):
            pinned = self._pinned(n)
            if pinned is not None:
                return pinned[1]
        return self.registry.spec(n.type)

    # -- subflows ----------------------------------------------------------------
    def for_definition(self, defn: SubflowDef, parent: QObject | None = None) -> FlowDocument:
        """A document that edits ``defn`` (one of this flow's definitions)
        in place: its registry holds what this document's does and its
        library is this one's, so
        instances inside it draw, and the ports and params this flow's
        instances of ``defn`` show follow its ``subflow.in``/``subflow.out``
        nodes as they are edited."""
        doc = FlowDocument(defn.as_flow(), self.base_registry, None, parent)
        doc.definition, doc.owner = defn, self
        self._definition_refs.append(weakref.ref(doc))
        doc.sync_subflows()
        self.problems_changed.connect(doc._owner_problems)
        doc.revalidate()  # as a definition now, not as a flow of its own
        return doc

    @property
    def _definition_docs(self) -> list[FlowDocument]:
        docs = [d for d in (r() for r in self._definition_refs) if d is not None]
        if len(docs) != len(self._definition_refs):
            self._definition_refs = [weakref.ref(d) for d in docs]
        return docs

    def subflow_scope(self) -> tuple[Flow, str]:
        """The flow whose subflows this document places, and its file: its
        own, or (a definition's document) its owner's."""
        if self.owner is not None:
            return self.owner.subflow_scope()
        return self.flow, str(self.path) if self.path else ""

    def sync_subflows(self, rescan: bool = False) -> None:
        """Bring ``registry`` up to date with the flow's definitions, the
        versions its instances pin and (``rescan``) the library folders.
        Called on its own when the flow opens, moves, or an instance comes,
        goes or changes its pin; call it after editing a definition's params
        or header, or when the library may have changed (the window does on
        focus). Instances whose picture changed get ``node_changed``."""
        if self.owner is not None:
            self.owner.sync_subflows(rescan)
            return
        flow, file = self.subflow_scope()
        docs = [self, *self._definition_docs]
        before_specs = dict(self.registry._specs)
        before = {(id(d), nid): d._instance_look(nid) for d in docs for nid in d._pins}
        stat = self._library_files(file) if rescan else None
        reread = stat is not None and stat != self._library_stat
        if reread:
            self._library_stat = stat
            self._scanned_for = file
            self.library = {e.definition.name: e for e in library_subflows(file)}
            self._uses_key = None  # a pinned version may have come, gone or changed
        uses = self._subflow_uses(flow)
        if uses != self._uses_key:
            self._uses_key = uses
            used = with_subflows(self.base_registry, flow, file)
            self._used = {name: entry for name, entry in getattr(used, "defs", {}).items()
                          if entry[1] == "library"}
        defs: dict[str, tuple[SubflowDef, str]] = {
            name: (e.definition, "library") for name, e in self.library.items()}
        defs.update(self._used)
        defs.update({d.name: (d, "flow") for d in flow.subflows})
        if reread:
            self._version_cache.clear()
        for d in docs:
            d.registry.load(defs)
        changed = any(before_specs.get(t) != self.registry._specs.get(t)
                      for t in set(before_specs) | set(self.registry._specs))
        for d in docs:
            d._pins = d._pin_map()
            for nid in d._pins:
                look = before.get((id(d), nid), None)
                if look is not None and look != d._instance_look(nid):
                    d.node_changed.emit(nid)
        if changed or reread:
            self.subflows_changed.emit()
            for d in self._definition_docs:
                d.subflows_changed.emit()

    def _instance_look(self, node_id: str) -> tuple:
        """What an instance's picture depends on: its spec and the newer version."""
        return (self.spec(node_id), self.newer_version(node_id))

    @staticmethod
    def _library_files(file: str) -> tuple:
        """The library folders' subflow files, their sizes and times: when
        these are the same, reading the library again finds what it found."""
        found = [file]
        for folder in library_dirs(file):
            try:
                for path in sorted(folder.glob("*" + LIBRARY_SUFFIX))[:10_000]:
                    st = path.stat()
                    found.append((str(path), st.st_mtime_ns, st.st_size))
            except OSError:
                continue
        return tuple(found)

    def _subflow_flow_reset(self) -> None:
        self.sync_subflows(rescan=True)

    def _subflow_path_changed(self, _path: str) -> None:
        if self.subflow_scope()[1] != self._scanned_for:
            self.sync_subflows(rescan=True)  # another folder, another subflows/

    def _pin_map(self) -> dict[str, tuple]:
        return {n.id: (n.type, n.subflow.version if n.subflow else None)
                for n in self.flow.nodes if is_instance_type(n.type)}

    @staticmethod
    def _subflow_uses(flow: Flow) -> tuple:
        """Which library subflows (and pinned versions) a flow's instances use."""
        uses = set()
        for nodes in [flow.nodes] + [d.nodes for d in flow.subflows]:
            for n in nodes:
                if is_instance_type(n.type):
                    uses.add((n.type, n.subflow.version if n.subflow else ""))
        return tuple(sorted(uses))

    def _subflow_node_added(self, node_id: str) -> None:
        # Most nodes are appended: no lookup (a paste of 2,000 would pay a
        # rebuild of the id index per node).
        nodes = self.flow.nodes
        n = nodes[-1] if nodes and nodes[-1].id == node_id else self.node(node_id)
        if n is not None and (is_instance_type(n.type) or n.type in (IN_TYPE, OUT_TYPE)):
            self._after_subflow_edit()

    def _subflow_node_removed(self, node_id: str, _index: int) -> None:
        if node_id in self._pins or self.definition is not None:
            self._after_subflow_edit()

    def _subflow_node_changed(self, node_id: str) -> None:
        n = self.node(node_id)
        if n is None:
            return
        if is_instance_type(n.type):
            if self._pins.get(node_id) != (n.type, n.subflow.version if n.subflow else None):
                self._after_subflow_edit()
        elif self.definition is not None and n.type in (IN_TYPE, OUT_TYPE):
            self._after_subflow_edit()  # a port renamed

    def _after_subflow_edit(self) -> None:
        self.sync_subflows()

    def subflow_definition(self, node_id: str) -> SubflowDef | None:
        """The definition an instance runs (the version it pins), or None."""
        n = self.node(node_id)
        if n is None or not is_instance_type(n.type):
            return None
        pinned = self._pinned(n) if n.subflow is not None else None
        return pinned[0] if pinned is not None else self.registry.definition(n.type)

    def _pinned(self, n: FlowNode) -> tuple[SubflowDef, NodeSpec] | None:
        """The definition and spec of the library version an instance pins,
        when it is not the one the registry holds for its type (another
        instance pins another version). Read once per version."""
        defn = self.registry.definition(n.type)
        if n.subflow is None or (defn is not None and defn.version == n.subflow.version):
            return None
        top = self
        while top.owner is not None:
            top = top.owner
        key = (n.type, n.subflow.version)
        if key not in top._version_cache:
            flow, file = self.subflow_scope()
            try:
                entry = None if flow.subflow(subflow_name(n.type)) is not None else \
                    find_library(subflow_name(n.type), file, n.subflow.version)
            except FlowError:
                entry = None  # validation says what is wrong with the file
            top._version_cache[key] = None if entry is None else (
                entry.definition, instance_spec(entry.definition, package="library"))
        return top._version_cache[key]

    def library_entry(self, node_id: str) -> LibraryEntry | None:
        """The library's current file of an instance's subflow, if it is a
        library subflow (one the flow file does not define itself)."""
        n = self.node(node_id)
        if n is None or not is_instance_type(n.type):
            return None
        return self.library_current(subflow_name(n.type))

    def library_current(self, name: str) -> LibraryEntry | None:
        """The library's current file of subflow ``name``, as last read; None
        if the flow defines ``name`` itself (its own definition wins)."""
        flow, _file = self.subflow_scope()
        if flow.subflow(name) is not None:
            return None
        top = self
        while top.owner is not None:
            top = top.owner
        return top.library.get(name)

    def newer_version(self, node_id: str) -> str | None:
        """The library's current version of an instance's subflow when it is
        newer than the one the instance pins, else None. From the library
        as last read: no file is read here (the canvas asks while drawing)."""
        n = self.node(node_id)
        entry = self.library_entry(node_id)
        if n is None or entry is None or n.subflow is None:
            return None
        current = entry.definition.version or ""
        return current if version_key(current) > version_key(n.subflow.version) else None

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

    def set_subflow_pin(self, node_id: str, pin: SubflowPin | None,
                        params: dict[str, ParamValue] | None = None) -> None:
        """Pin an instance to a library version (and, updating it, replace
        its params: those the new version no longer has are left out)."""
        n = self.node(node_id)
        assert n is not None
        n.subflow = pin.model_copy() if pin is not None else None
        if params is not None:
            n.params = {k: v.model_copy(deep=True) for k, v in params.items()}
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
        if self.owner is not None and self.definition is not None:
            # A definition is checked as part of its flow (its ports, the
            # subflow scope, cycles): the owner's check, its problems inside
            # this definition named by their inner ids.
            owner = self.owner
            if any(d is self.definition for d in owner.flow.subflows):
                owner.revalidate()  # its problems_changed reaches _owner_problems
                return self.problems
            # A library definition opened as a copy: checked beside the flow's own.
            flow, file = self.subflow_scope()
            others = [d for d in flow.subflows if d.name != self.definition.name]
            self._owner_problems(validate_flow(
                Flow(name=flow.name, subflows=[self.definition, *others]), self.registry,
                file=file))
            return self.problems
        self.problems = validate_flow(self.flow, self.registry,
                                      file=str(self.path) if self.path else "")
        self.problems_changed.emit(self.problems)
        return self.problems

    def _owner_problems(self, problems: list[Problem]) -> None:
        """The problems of the owner's check that are this definition's:
        ``subflows.NAME/ID`` becomes ``ID``; the definition's own (a cycle,
        its params) stay without a node."""
        if self.definition is None:
            return
        inner = f"subflows.{self.definition.name}/"
        whole = f"subflows.{self.definition.name}"
        mine = []
        for p in problems:
            if p.node and p.node.startswith(inner):
                mine.append(p.model_copy(update={"node": p.node[len(inner):]}))
            elif not p.node and p.field and (p.field == whole or p.field.startswith(whole + ".")):
                mine.append(p)
        self.problems = mine
        self.problems_changed.emit(self.problems)

"""One QUndoCommand per edit of the flow document.

Each command calls the document's mutators and remembers just enough to
reverse itself exactly (list indices included, so undo restores order).
Compound edits (delete a selection, paste) are single commands that do
their parts in a fixed order."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QUndoCommand

from runtime.flow import FlowNode, ToolOverride, Wire, parse_flow
from runtime.flow.model import SubflowDef, SubflowPin, fresh_id
from runtime.flow.subflows import is_instance_type, subflow_name
from runtime.message import deep_copy
from runtime.spec import ParamValue, Scope

from .document import FlowDocument

CLIPBOARD_MIME = "application/x-switchboard-flow"


class AddNode(QUndoCommand):
    def __init__(self, doc: FlowDocument, fnode: FlowNode) -> None:
        spec = doc.registry.spec(fnode.type)
        super().__init__(f"Add {spec.name if spec else fnode.type}")
        self.doc, self.fnode = doc, fnode

    def redo(self) -> None:
        self.doc.insert_node(self.fnode.model_copy(deep=True))

    def undo(self) -> None:
        self.doc.remove_node(self.fnode.id)


class RemoveItems(QUndoCommand):
    """Delete nodes (with every wire touching them) and wires."""

    def __init__(self, doc: FlowDocument, node_ids: list[str], wire_indices: list[int] = ()):
        n, w = len(node_ids), len(wire_indices)
        what = f"{n} node{'s' * (n != 1)}" if n else f"{w} wire{'s' * (w != 1)}"
        super().__init__(f"Delete {what}")
        self.doc = doc
        self.node_ids = list(node_ids)
        wires = set(wire_indices)
        for nid in node_ids:
            wires.update(doc.wires_of(nid))
        self.wire_indices = sorted(wires)
        self._removed_wires: list[tuple[int, Wire]] = []
        self._removed_nodes: list[tuple[int, FlowNode]] = []

    def redo(self) -> None:
        self._removed_wires = []
        for index in sorted(self.wire_indices, reverse=True):
            self._removed_wires.append((index, self.doc.remove_wire(index)))
        self._removed_nodes = []
        indexed = sorted(((self.doc.node_index(n), n) for n in self.node_ids), reverse=True)
        for _, nid in indexed:
            fnode, index = self.doc.remove_node(nid)
            self._removed_nodes.append((index, fnode))

    def undo(self) -> None:
        for index, fnode in sorted(self._removed_nodes, key=lambda t: t[0]):
            self.doc.insert_node(fnode, index)
        for index, wire in sorted(self._removed_wires, key=lambda t: t[0]):
            self.doc.insert_wire(wire, index)


class MoveNodes(QUndoCommand):
    def __init__(self, doc: FlowDocument, moves: dict[str, tuple[tuple[float, float],
                                                               tuple[float, float]]]) -> None:
        n = len(moves)
        super().__init__(f"Move {n} node{'s' * (n != 1)}")
        self.doc, self.moves = doc, dict(moves)

    def redo(self) -> None:
        for nid, (_old, new) in self.moves.items():
            self.doc.move_node(nid, new)

    def undo(self) -> None:
        for nid, (old, _new) in self.moves.items():
            self.doc.move_node(nid, old)


class AddWire(QUndoCommand):
    def __init__(self, doc: FlowDocument, wire: Wire) -> None:
        super().__init__("Connect")
        self.doc, self.wire = doc, wire
        self.index = -1

    def redo(self) -> None:
        self.index = self.doc.insert_wire(self.wire.model_copy())

    def undo(self) -> None:
        self.doc.remove_wire(self.index)


class SetParam(QUndoCommand):
    """Change one param's setting (value, scope, path or AI description).
    Consecutive edits of the same param merge, so typing is one undo step."""

    ID = 1001

    def __init__(self, doc: FlowDocument, node_id: str, name: str, value: ParamValue | None,
                 *, merge: bool = True) -> None:
        super().__init__(f"Change {name}")
        self.doc, self.node_id, self.name = doc, node_id, name
        fnode = doc.node(node_id)
        assert fnode is not None
        old = fnode.params.get(name)
        self.old = old.model_copy(deep=True) if old else None
        self.new = value.model_copy(deep=True) if value else None
        self.merge = merge

    def id(self) -> int:
        return self.ID if self.merge else -1

    def mergeWith(self, other: QUndoCommand) -> bool:  # noqa: N802 - Qt override
        if not isinstance(other, SetParam) or not other.merge:
            return False
        if (other.node_id, other.name) != (self.node_id, self.name):
            return False
        # Only merge value typing within one scope; a scope switch is its own step.
        if (self.new and other.new and self.new.scope != other.new.scope) or not other.new:
            return False
        self.new = other.new
        return True

    def redo(self) -> None:
        self.doc.set_param(self.node_id, self.name, self.new)

    def undo(self) -> None:
        self.doc.set_param(self.node_id, self.name, self.old)


class RenameNode(QUndoCommand):
    def __init__(self, doc: FlowDocument, node_id: str, name: str | None) -> None:
        super().__init__("Rename node")
        fnode = doc.node(node_id)
        assert fnode is not None
        self.doc, self.node_id, self.old, self.new = doc, node_id, fnode.name, name or None

    def redo(self) -> None:
        self.doc.set_name(self.node_id, self.new)

    def undo(self) -> None:
        self.doc.set_name(self.node_id, self.old)


class SetToolOverride(QUndoCommand):
    def __init__(self, doc: FlowDocument, node_id: str, tool: ToolOverride | None) -> None:
        super().__init__("Change tool name")
        fnode = doc.node(node_id)
        assert fnode is not None
        self.doc, self.node_id = doc, node_id
        self.old = fnode.tool.model_copy(deep=True) if fnode.tool else None
        self.new = tool.model_copy(deep=True) if tool else None

    def redo(self) -> None:
        self.doc.set_tool(self.node_id, self.new)

    def undo(self) -> None:
        self.doc.set_tool(self.node_id, self.old)


class SetToolSettings(QUndoCommand):
    """Change some fields of a tool node's settings (the flow's ``tool``
    object: name, description, approval, call limits), keeping the others.
    Settings left all unset are saved as no ``tool`` object at all.

    Edits with the same ``key`` in a row (typing a wait, stepping a limit)
    merge into one undo step; a key of "" never merges."""

    ID = 1002

    def __init__(self, doc: FlowDocument, node_id: str, text: str, key: str = "",
                 **fields: Any) -> None:
        super().__init__(text)
        unknown = set(fields) - set(ToolOverride.model_fields)
        if unknown:
            raise TypeError(f"not a tool setting: {', '.join(sorted(unknown))}")
        fnode = doc.node(node_id)
        assert fnode is not None
        self.doc, self.node_id, self.key = doc, node_id, key
        self.old = fnode.tool.model_copy(deep=True) if fnode.tool else None
        base = fnode.tool or ToolOverride()
        # Validated as a whole, so a bad value fails here, never in the file.
        new = ToolOverride.model_validate({**base.model_dump(), **{
            k: (v.model_dump() if hasattr(v, "model_dump") else v) for k, v in fields.items()}})
        self.new = new if new.is_set() else None

    def id(self) -> int:
        return self.ID if self.key else -1

    def mergeWith(self, other: QUndoCommand) -> bool:  # noqa: N802 - Qt override
        if not isinstance(other, SetToolSettings) or (other.node_id, other.key) != (
                self.node_id, self.key):
            return False
        self.new = other.new
        return True

    def redo(self) -> None:
        self.doc.set_tool(self.node_id, self.new.model_copy(deep=True) if self.new else None)

    def undo(self) -> None:
        self.doc.set_tool(self.node_id, self.old.model_copy(deep=True) if self.old else None)


class SetOutputPath(QUndoCommand):
    def __init__(self, doc: FlowDocument, node_id: str, output: str, path: str | None) -> None:
        super().__init__(f"Move output {output}")
        fnode = doc.node(node_id)
        assert fnode is not None
        self.doc, self.node_id, self.output = doc, node_id, output
        self.old = fnode.outputs.get(output)
        self.new = path or None

    def redo(self) -> None:
        self.doc.set_output_path(self.node_id, self.output, self.new)

    def undo(self) -> None:
        self.doc.set_output_path(self.node_id, self.output, self.old)


class SetDisabled(QUndoCommand):
    def __init__(self, doc: FlowDocument, node_id: str, disabled: bool) -> None:
        super().__init__("Disable node" if disabled else "Enable node")
        self.doc, self.node_id, self.disabled = doc, node_id, disabled

    def redo(self) -> None:
        self.doc.set_disabled(self.node_id, self.disabled)

    def undo(self) -> None:
        self.doc.set_disabled(self.node_id, not self.disabled)


class SetPin(QUndoCommand):
    """Pin a node's output (pinned data, runtime.pins), change the pin, or
    unpin the node (``pin`` None). Each command keeps its own copies, so
    that an edit of the document's pin cannot reach the undo stack."""

    def __init__(self, doc: FlowDocument, node_id: str, pin: dict | None,
                 text: str = "") -> None:
        fnode = doc.node(node_id)
        assert fnode is not None
        super().__init__(text or ("Unpin node" if pin is None else
                                  "Pin output" if fnode.pin is None else "Edit pinned data"))
        self.doc, self.node_id = doc, node_id
        self.old = deep_copy(fnode.pin)
        self.new = deep_copy(pin)

    def redo(self) -> None:
        self.doc.set_pin(self.node_id, deep_copy(self.new))

    def undo(self) -> None:
        self.doc.set_pin(self.node_id, deep_copy(self.old))


class SetOutOfProcess(QUndoCommand):
    """Run one node package of the flow in its own process, or back in the
    runtime's. The list keeps the registry's package order (names it does
    not know, from a flow made elsewhere, after those and as they were), so
    that toggling in any order saves the same file."""

    def __init__(self, doc: FlowDocument, package: str, on: bool) -> None:
        super().__init__(f"Run {package} in its own process" if on
                         else f"Run {package} in the flow's process")
        self.doc = doc
        self.old = list(doc.flow.settings.out_of_process)
        chosen = [p for p in self.old if p != package] + ([package] if on else [])
        known = doc.registry.packages()
        rank = {name: i for i, name in enumerate(known)}
        self.new = sorted(dict.fromkeys(chosen), key=lambda p: rank.get(p, len(known)))

    def redo(self) -> None:
        self.doc.set_out_of_process(self.new)

    def undo(self) -> None:
        self.doc.set_out_of_process(self.old)


class Paste(QUndoCommand):
    """Add a fragment of nodes and the wires among them, with fresh ids."""

    def __init__(self, doc: FlowDocument, nodes: list[FlowNode], wires: list[Wire],
                 text: str = "Paste") -> None:
        super().__init__(text)
        self.doc, self.nodes, self.wires = doc, nodes, wires
        self._wire_indices: list[int] = []

    def redo(self) -> None:
        for fnode in self.nodes:
            self.doc.insert_node(fnode.model_copy(deep=True))
        self._wire_indices = [self.doc.insert_wire(w.model_copy()) for w in self.wires]

    def undo(self) -> None:
        for index in sorted(self._wire_indices, reverse=True):
            self.doc.remove_wire(index)
        for fnode in reversed(self.nodes):
            self.doc.remove_node(fnode.id)


# -- copy / paste as flow JSON -------------------------------------------------

def fragment_json(doc: FlowDocument, node_ids: list[str]) -> str:
    """The selected nodes and the wires among them, as a flow JSON document,
    so that it pastes into any window (or a text editor)."""
    ids = set(node_ids)
    nodes = [n for n in doc.flow.nodes if n.id in ids]
    wires = [w for w in doc.flow.wires if w.source[0] in ids and w.target[0] in ids]
    data = {"format": doc.flow.format, "name": doc.flow.name,
            "nodes": [n.to_json() for n in nodes], "wires": [w.to_json() for w in wires]}
    return json.dumps(data, indent=2, ensure_ascii=False)


def paste_command(doc: FlowDocument, text: str, offset: tuple[float, float] = (40, 40),
                  at: tuple[float, float] | None = None, *, cascade: bool = True,
                  size_of: SizeOf | None = None) -> Paste | None:
    """A Paste command for flow JSON text, or None if the text is not a flow
    fragment this registry can take. Ids are renamed to be unique and each
    copy's name is numbered ("Send Mail 2"); wires to nodes outside the
    fragment are dropped.

    The copy lands at ``at`` if given, else ``offset`` from its original.
    With ``cascade`` it then moves on in steps of ``offset`` until it covers
    no node (``size_of(node)`` gives a node's (width, height); without it,
    only nodes on the very same spot count), so repeated pastes fan out
    instead of piling up, and a cut node pastes back where it was."""
    try:
        data: Any = json.loads(text)
        fragment = parse_flow(data)
    except Exception:
        return None
    nodes = [n for n in fragment.nodes if doc.registry.spec(n.type) is not None]
    if not nodes:
        return None
    if at is not None:
        minx = min(n.position[0] for n in nodes)
        miny = min(n.position[1] for n in nodes)
        base = (at[0] - minx, at[1] - miny)
    else:
        base = (0.0, 0.0) if cascade else offset
    if cascade:
        base = cascade_offset(doc, nodes, base, offset, size_of)
    renamed: dict[str, str] = {}
    taken = {n.id for n in doc.flow.nodes}
    labels = {node_label(doc, n) for n in doc.flow.nodes}
    new_nodes = []
    for n in nodes:
        new_id = fresh_id(n.id, taken)
        taken.add(new_id)
        renamed[n.id] = new_id
        copy = n.model_copy(deep=True)
        copy.id = new_id
        label = node_label(doc, n)
        if label in labels:  # a copy beside its original; a cut one keeps its name
            copy.name = numbered_name(label, labels)
        labels.add(copy.name or label)
        copy.position = (n.position[0] + base[0], n.position[1] + base[1])
        new_nodes.append(copy)
    new_wires = [Wire.model_validate({"from": [renamed[w.source[0]], w.source[1]],
                                      "to": [renamed[w.target[0]], w.target[1]]})
                 for w in fragment.wires if w.source[0] in renamed and w.target[0] in renamed]
    return Paste(doc, new_nodes, new_wires)


SizeOf = Callable[[FlowNode], tuple[float, float]]
#: Without sizes, two nodes closer than this lie on top of each other.
_SAME_SPOT = 8.0
_MAX_CASCADE = 100


def cascade_offset(doc: FlowDocument, nodes: list[FlowNode], base: tuple[float, float],
                   step: tuple[float, float],
                   size_of: SizeOf | None = None) -> tuple[float, float]:
    """``base`` plus the fewest steps (from none) at which none of
    ``nodes``, moved by it, overlaps a node of the document."""
    def size(n: FlowNode) -> tuple[float, float]:
        return size_of(n) if size_of is not None else (_SAME_SPOT, _SAME_SPOT)

    placed = [(n.position, size(n)) for n in doc.flow.nodes]
    moving = [(n.position, size(n)) for n in nodes]

    def clash(dx: float, dy: float) -> bool:
        return any(x + dx < sx + sw and sx < x + dx + w and y + dy < sy + sh and sy < y + dy + h
                   for (x, y), (w, h) in moving for (sx, sy), (sw, sh) in placed)

    k = 0
    while k < _MAX_CASCADE and clash(base[0] + step[0] * k, base[1] + step[1] * k):
        k += 1
    return (base[0] + step[0] * k, base[1] + step[1] * k)


def node_label(doc: FlowDocument, fnode: FlowNode) -> str:
    """The name a node shows: its own, else its type's human name."""
    if fnode.name:
        return fnode.name
    spec = doc.registry.spec(fnode.type)
    return spec.name if spec else fnode.type


def numbered_name(label: str, taken: set[str]) -> str:
    """"Send Mail" -> "Send Mail 2" (or the next free number); a name that
    already ends in a number counts on from its stem ("Ask 2" -> "Ask 3")."""
    stem, _, tail = label.rpartition(" ")
    if not (stem and tail.isdigit()):
        stem = label
    i = 2
    while f"{stem} {i}" in taken:
        i += 1
    return f"{stem} {i}"


def new_node(doc: FlowDocument, type_id: str, pos: tuple[float, float]) -> FlowNode:
    """A fresh FlowNode of a type, with a unique id; params left out take
    their spec defaults. An instance of a library subflow pins the
    library's current version (the flow file keeps it, so the flow runs the
    same tomorrow), or, if the flow already has instances of it, the version
    they pin: a flow runs one version of a subflow (validation refuses two),
    and Update all brings them all to the current one. One of the flow's
    own definitions pins nothing."""
    if is_instance_type(type_id):
        fnode = FlowNode(id=doc.flow.new_id(subflow_name(type_id)), type=type_id,
                         position=(pos[0], pos[1]))
        entry = doc.library_current(subflow_name(type_id))
        if entry is not None:
            pinned = next((n.subflow for n in doc.flow.nodes
                           if n.type == type_id and n.subflow is not None), None)
            fnode.subflow = pinned.model_copy() if pinned is not None else \
                current_pin(entry.definition)
        return fnode
    return FlowNode(id=doc.flow.new_id(type_id), type=type_id, position=(pos[0], pos[1]))


def current_pin(defn: SubflowDef) -> SubflowPin:
    """What an instance of a library definition pins: its version and hash."""
    return SubflowPin(version=defn.version or "", hash=defn.content_hash())


# -- subflow instances: update to the library's current version ----------------------

class UpdateSubflow(QUndoCommand):
    """Pin instances of a library subflow to the library's current version
    (one undo step for one instance or all of them). Params the new version
    no longer declares are dropped from each instance; ``dropped`` names
    them per node, for the panel to say."""

    def __init__(self, doc: FlowDocument, node_ids: list[str], text: str = "") -> None:
        self.doc = doc
        self.changes: list[tuple[str, tuple, tuple]] = []  # id, (pin, params) old, new
        self.dropped: dict[str, list[str]] = {}
        self.version = ""
        for nid in node_ids:
            fnode = doc.node(nid)
            entry = doc.library_entry(nid)
            if fnode is None or entry is None:
                continue
            defn = entry.definition
            pin = current_pin(defn)
            self.version = pin.version
            names = {p.name for p in defn.params}
            kept = {k: v for k, v in fnode.params.items() if k in names}
            gone = sorted(set(fnode.params) - names)
            if gone:
                self.dropped[nid] = gone
            self.changes.append((nid, (fnode.subflow, dict(fnode.params)), (pin, kept)))
        n = len(self.changes)
        name = defn_label(doc, node_ids[0]) if node_ids else ""
        super().__init__(text or (f"Update {name} to {self.version}" if n == 1 else
                                  f"Update {n} instances of {name} to {self.version}"))

    def redo(self) -> None:
        for nid, _old, (pin, params) in self.changes:
            self.doc.set_subflow_pin(nid, pin, params)

    def undo(self) -> None:
        for nid, (pin, params), _new in reversed(self.changes):
            self.doc.set_subflow_pin(nid, pin, params)


def defn_label(doc: FlowDocument, node_id: str) -> str:
    """An instance's subflow as the user knows it: its label, else its name."""
    fnode = doc.node(node_id)
    if fnode is None:
        return node_id
    spec = doc.registry.spec(fnode.type)
    return spec.name if spec is not None else subflow_name(fnode.type)


def instances_of(doc: FlowDocument, type_id: str) -> list[str]:
    """The ids of every instance of one subflow type in the document's flow."""
    return [n.id for n in doc.flow.nodes if n.type == type_id]


# -- what a node a user adds starts with ------------------------------------------------

#: A new agent's script when no key is set up: it answers at once, so the
#: first Run shows something, and the turns editor shows how to go on.
KEYLESS_SCRIPT = [{"text": "Scripted answer (no API key is set up yet) to: {prompt}"}]


def key_configured(provider: str) -> bool:
    """Whether a key for the provider is stored or in its environment
    variable; a store that cannot be read counts as none."""
    from runtime.credentials import key_configured as configured

    try:
        return bool(configured(provider))
    except Exception:
        return False


def starting_params(doc: FlowDocument, type_id: str) -> dict[str, ParamValue]:
    """Params a node added by the user starts with, beyond its spec's
    defaults: an AI agent with no key set up for its default provider starts
    on the scripted provider, so that the flow runs before any key exists."""
    if type_id != "ai.agent":
        return {}
    spec = doc.registry.spec(type_id)
    if spec is None:
        return {}
    params = {p.name: p for p in spec.params}
    provider = params.get("provider")
    default = provider.default if provider is not None and provider.has_default else None
    if provider is None or "script" not in params or default in (None, "scripted") \
            or key_configured(str(default)):
        return {}
    return {"provider": ParamValue(scope=Scope.CUSTOM, value="scripted"),
            "script": ParamValue(scope=Scope.CUSTOM, value=json.loads(json.dumps(KEYLESS_SCRIPT)))}

"""One undo step for an edit that a pure transform of the whole flow makes
(runtime.flow.subflow_edit: Convert Selection to Subflow, Expand Subflow,
Save to Library): ``ApplyFlow`` holds the flow before and after, and brings
the document from one to the other through its mutators, so that the scene,
the panels, breakpoints and run badges follow edit by edit (nothing is
rebuilt, nothing a user did not touch is disturbed) and undo restores the
flow exactly: nodes and wires in their order, definitions in theirs.

A definition whose content changes and that is open in a tab of its own is
edited through that tab's document (``docs_for``), so its canvas follows
too; a definition that goes away is taken out of the flow's list (the
window closes its tab)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtGui import QUndoCommand

from runtime.flow import Flow, FlowNode, Wire
from runtime.flow.model import SubflowDef

if TYPE_CHECKING:
    from .document import FlowDocument

#: The document of an open definition tab, for a definition object, if any.
DocsFor = Callable[[SubflowDef], "FlowDocument | None"]


class ApplyFlow(QUndoCommand):
    """Turn ``doc``'s flow into ``after`` (a transform's result), as one undo
    step; undo turns it back into the flow as it was when made. ``doc`` is
    the document of the flow file (the window's), whichever tab's undo
    stack the command goes on."""

    def __init__(self, doc: FlowDocument, after: Flow, text: str,
                 docs_for: DocsFor | None = None) -> None:
        super().__init__(text)
        self.doc = doc
        self.before = doc.flow.model_copy(deep=True)
        self.after = after.model_copy(deep=True)
        self.docs_for = docs_for or (lambda _defn: None)

    def redo(self) -> None:
        apply_flow(self.doc, self.after, self.docs_for)

    def undo(self) -> None:
        apply_flow(self.doc, self.before, self.docs_for)


def apply_flow(doc: FlowDocument, target: Flow, docs_for: DocsFor) -> None:
    """Bring ``doc.flow`` to ``target``'s nodes, wires and definitions,
    keeping every object that does not change (an open tab keeps its
    definition). Definitions come first (an instance placed next must find
    its type), definitions that go last (after their instances)."""
    flow = doc.flow
    wanted = {d.name: d for d in target.subflows}
    for i, new in enumerate(target.subflows):
        old = flow.subflow(new.name)
        if old is None:
            flow.subflows.insert(min(i, len(flow.subflows)), new.model_copy(deep=True))
        elif old.to_json() != new.to_json():
            _update_definition(old, new, docs_for(old))
    _sync_registry(doc)
    sync_container(doc, target.nodes, target.wires)
    kept = [d for d in flow.subflows if d.name in wanted]
    order = {name: i for i, name in enumerate(wanted)}
    flow.subflows[:] = sorted(kept, key=lambda d: order[d.name])
    _sync_registry(doc)
    doc.changed.emit()
    doc.revalidate()


def _sync_registry(doc: FlowDocument) -> None:
    sync = getattr(doc, "sync_subflows", None)  # the document's subflow types
    if sync is not None:
        sync()


def _update_definition(old: SubflowDef, new: SubflowDef, tab: FlowDocument | None) -> None:
    for field in SubflowDef.model_fields:
        if field not in ("nodes", "wires"):
            setattr(old, field, _copy(getattr(new, field)))
    if tab is not None and tab.flow.nodes is old.nodes:
        sync_container(tab, new.nodes, new.wires)
    else:
        old.nodes[:] = [n.model_copy(deep=True) for n in new.nodes]
        old.wires[:] = [w.model_copy() for w in new.wires]


def _copy(value: Any) -> Any:
    if hasattr(value, "model_copy"):
        return value.model_copy(deep=True)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _wire_key(w: Wire) -> tuple:
    return (tuple(w.source), tuple(w.target))


def sync_container(doc: FlowDocument, nodes: list[FlowNode], wires: list[Wire]) -> None:
    """Bring ``doc.flow``'s nodes and wires to ``nodes`` and ``wires``
    (copied), in their order, with the document's mutators: what is the
    same stays, the rest is removed and inserted where it belongs."""
    flow = doc.flow
    target = {n.id: n.to_json() for n in nodes}
    changed = {n.id for n in flow.nodes if target.get(n.id) != n.to_json()}
    staying = [n.id for n in flow.nodes if n.id not in changed]
    if staying != [n.id for n in nodes if n.id in set(staying)]:
        changed = {n.id for n in flow.nodes}  # order differs: all of them again
        staying = []
    want = [_wire_key(w) for w in wires]
    want_set = set(want)
    keep: list[int] = []
    for i, w in enumerate(flow.wires):
        key = _wire_key(w)
        if key in want_set and w.source[0] not in changed and w.target[0] not in changed \
                and key not in {_wire_key(flow.wires[j]) for j in keep}:
            keep.append(i)
    kept_keys = [_wire_key(flow.wires[i]) for i in keep]
    if kept_keys != [k for k in want if k in set(kept_keys)]:
        keep, kept_keys = [], []
    for i in reversed(range(len(flow.wires))):
        if i not in keep:
            doc.remove_wire(i)
    for nid in [n.id for n in flow.nodes if n.id in changed]:
        doc.remove_node(nid)
    present = set(staying)
    for i, n in enumerate(nodes):
        if n.id not in present:
            doc.insert_node(n.model_copy(deep=True), i)
    have = set(kept_keys)
    for i, w in enumerate(wires):
        if _wire_key(w) not in have:
            doc.insert_wire(w.model_copy(), i)

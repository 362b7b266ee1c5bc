"""The breakpoints of one designer window: kept with the open document for
this session, never in the flow file (docs/decisions.md says why), and
turned into runtime.debugger Breakpoints for each run.

A node's breakpoint is keyed by its id; a wire's by its two ends (source
node and port, target node and port), since indices shift as wires come
and go. A breakpoint on a node or wire that was deleted stays, unseen, so
that undoing the deletion brings it back; a new flow (New, Open) clears
them all.

Inside a subflow definition (its tab) a node's breakpoint is keyed by the
definition's name and the inner node's id, and stops messages at that node
in EVERY instance of the definition (``order.check_stock``,
``returns.check_stock``, ...), as a change to the definition changes every
instance. A breakpoint on an instance node stops messages where they enter
it; one on a wire into or out of an instance stops them on each wire of the
run that stands for it (designer.control.subflow_run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from runtime.debugger import Breakpoint, BreakpointError

WireEnds = tuple[tuple[str, str], tuple[str, str]]


@dataclass(frozen=True)
class DesignerBreakpoint:
    node: str = ""  # a node's input
    wire: WireEnds | None = None  # or a wire, by its ends
    condition: str = ""
    #: The subflow definition ``node`` is in ("": the flow itself).
    definition: str = ""


def wire_ends(flow: Any, index: int) -> WireEnds | None:
    if not 0 <= index < len(flow.wires):
        return None
    w = flow.wires[index]
    return (tuple(w.source), tuple(w.target))  # type: ignore[return-value]


def wire_index(flow: Any, ends: WireEnds) -> int | None:
    for i, w in enumerate(flow.wires):
        if (tuple(w.source), tuple(w.target)) == ends:
            return i
    return None


def check_condition(condition: str) -> str | None:
    """Why ``condition`` cannot be a breakpoint's condition, or None."""
    try:
        Breakpoint(node="x", condition=condition)
    except BreakpointError as exc:
        return str(exc).partition(": ")[2] or str(exc)
    return None


class BreakpointStore(QObject):
    """Where the person wants messages to stop. ``changed`` after every edit."""

    changed = Signal()

    def __init__(self, document: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.document = document
        self._items: dict[Any, DesignerBreakpoint] = {}
        document.flow_reset.connect(self.clear)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[DesignerBreakpoint]:
        return list(self._items.values())

    # -- nodes ----------------------------------------------------------------
    def for_node(self, node_id: str) -> DesignerBreakpoint | None:
        return self._items.get(("node", node_id))

    def set_node(self, node_id: str, condition: str = "") -> None:
        """Raises BreakpointError for a condition that does not compile."""
        Breakpoint(node=node_id, condition=condition)
        self._items[("node", node_id)] = DesignerBreakpoint(node=node_id,
                                                            condition=condition.strip())
        self.changed.emit()

    def toggle_node(self, node_id: str) -> bool:
        """Set or remove a node's breakpoint; True when it is set now."""
        if self.for_node(node_id) is not None:
            self.remove_node(node_id)
            return False
        self.set_node(node_id)
        return True

    def remove_node(self, node_id: str) -> None:
        if self._items.pop(("node", node_id), None) is not None:
            self.changed.emit()

    # -- nodes inside a subflow definition ------------------------------------------
    def for_inner(self, definition: str, node_id: str) -> DesignerBreakpoint | None:
        return self._items.get(("inner", definition, node_id))

    def set_inner(self, definition: str, node_id: str, condition: str = "") -> None:
        """A breakpoint on a definition's node, for every instance of it.
        Raises BreakpointError for a condition that does not compile."""
        Breakpoint(node=node_id, condition=condition)
        self._items[("inner", definition, node_id)] = DesignerBreakpoint(
            node=node_id, condition=condition.strip(), definition=definition)
        self.changed.emit()

    def toggle_inner(self, definition: str, node_id: str) -> bool:
        if self.for_inner(definition, node_id) is not None:
            self.remove_inner(definition, node_id)
            return False
        self.set_inner(definition, node_id)
        return True

    def remove_inner(self, definition: str, node_id: str) -> None:
        if self._items.pop(("inner", definition, node_id), None) is not None:
            self.changed.emit()

    def inner_items(self, definition: str) -> list[DesignerBreakpoint]:
        return [bp for bp in self._items.values() if bp.definition == definition]

    # -- wires ----------------------------------------------------------------
    def for_wire(self, index: int) -> DesignerBreakpoint | None:
        ends = wire_ends(self.document.flow, index)
        return self._items.get(("wire", ends)) if ends is not None else None

    def set_wire(self, index: int, condition: str = "") -> None:
        ends = wire_ends(self.document.flow, index)
        if ends is None:
            return
        Breakpoint(wire=index, condition=condition)
        self._items[("wire", ends)] = DesignerBreakpoint(wire=ends, condition=condition.strip())
        self.changed.emit()

    def remove_wire(self, index: int) -> None:
        ends = wire_ends(self.document.flow, index)
        if ends is not None and self._items.pop(("wire", ends), None) is not None:
            self.changed.emit()

    def clear(self) -> None:
        if self._items:
            self._items.clear()
            self.changed.emit()

    # -- for a run --------------------------------------------------------------
    def for_run(self, flow: Any, run_map: Any = None) -> list[Breakpoint]:
        """The runtime breakpoints of these, for a run of ``flow`` (the
        snapshot a run took: its wire indices); ones on nodes or wires it
        does not have are left out. ``run_map`` (a RunMap): the run ran
        ``flow`` made flat, so its node paths and wire indexes are the
        flat flow's."""
        out: list[Breakpoint] = []
        for bp in self._items.values():
            if bp.definition:
                if run_map is not None:
                    out += [Breakpoint(node=path, condition=bp.condition)
                            for path in run_map.paths_of(bp.definition, bp.node)]
            elif bp.wire is not None:
                index = wire_index(flow, bp.wire)
                if index is None:
                    continue
                flat = run_map.flat_wires(index) if run_map is not None else [index]
                out += [Breakpoint(wire=i, condition=bp.condition) for i in flat]
            elif run_map is not None and bp.node in run_map.instance_ids:
                out += [Breakpoint(node=n, condition=bp.condition)
                        for n in run_map.entry_nodes(bp.node)]
            elif flow.node(bp.node) is not None:
                out.append(Breakpoint(node=bp.node, condition=bp.condition))
        return out

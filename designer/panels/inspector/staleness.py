"""Which parts of the last run still describe the flow on screen.

A run shows what one version of the flow did. After an edit, what it shows
about an edited or deleted node is history, not the node as it now is; the
designer keeps it (it is often what the user is fixing) but greys it, as
n8n marks a node's output stale once its parameters change. The answer is
found by comparing the flow with a snapshot of the one that ran, so undoing
an edit makes its node current again. No Qt here: the run integration feeds
it the document's edits and tells the canvas and the inspector.
"""

from __future__ import annotations

from collections import Counter

from runtime.flow import Flow, FlowNode

# What a node does. Its place on the canvas and its notes change nothing
# about what it did in the run.
_BEHAVIOUR = ("type", "name", "params", "outputs", "tool", "disabled")


def same_behaviour(ran: FlowNode, now: FlowNode) -> bool:
    return all(getattr(ran, f) == getattr(now, f) for f in _BEHAVIOUR)


def _wire_key(wire) -> tuple[tuple[str, str], tuple[str, str]]:
    return (tuple(wire.source), tuple(wire.target))  # type: ignore[return-value]


class RunSnapshot:
    """The flow as it was when the run started, and how the flow on screen
    differs from it. Fed one edit at a time (``node_edited``,
    ``wires_edited``), so a 2,000-node flow costs one node's comparison per
    edit; ``recompute`` checks everything at once."""

    def __init__(self, ran: Flow) -> None:
        self.flow = ran
        self._nodes = {n.id: n for n in ran.nodes}
        self._wires = [_wire_key(w) for w in ran.wires]
        self._wire_count = Counter(self._wires)
        self.stale: set[str] = set()  # nodes of the run edited or deleted since
        self.added: set[str] = set()  # nodes that were not in the run
        self.wires_differ = False
        self.settings_differ = False

    # -- answers ------------------------------------------------------------
    @property
    def changed(self) -> bool:
        """Whether the flow on screen is no longer the one that ran."""
        return bool(self.stale or self.added or self.wires_differ or self.settings_differ)

    def ran_node(self, node_id: str) -> FlowNode | None:
        return self._nodes.get(node_id)

    def why_stale(self, node_id: str, flow: Flow) -> str:
        """A few words for a tooltip: "edited" or "deleted", "" if current."""
        if node_id not in self.stale:
            return ""
        return "edited" if flow.node(node_id) is not None else "deleted"

    def run_wire(self, flow: Flow, index: int) -> int | None:
        """The run's index of the wire that is ``flow.wires[index]`` now (wire
        indices shift when a wire is deleted), or None if it did not run."""
        if not 0 <= index < len(flow.wires):
            return None
        key = _wire_key(flow.wires[index])
        nth = sum(1 for w in flow.wires[:index] if _wire_key(w) == key)
        return self._nth(self._wires, key, nth)

    def current_wire(self, flow: Flow, run_index: int) -> int | None:
        """The index now of the run's wire ``run_index``, or None if deleted."""
        if not 0 <= run_index < len(self._wires):
            return None
        key = self._wires[run_index]
        nth = sum(1 for k in self._wires[:run_index] if k == key)
        return self._nth([_wire_key(w) for w in flow.wires], key, nth)

    def wire_map(self, flow: Flow) -> dict[int, int]:
        """Every run wire that is still there: its index then -> its index
        now. One pass; the canvas asks it once per wire edit, not per tick."""
        now: dict[tuple, list[int]] = {}
        for i, w in enumerate(flow.wires):
            now.setdefault(_wire_key(w), []).append(i)
        out: dict[int, int] = {}
        taken: dict[tuple, int] = {}
        for i, key in enumerate(self._wires):
            n = taken.get(key, 0)
            places = now.get(key, [])
            if n < len(places):
                out[i] = places[n]
            taken[key] = n + 1
        return out

    @staticmethod
    def _nth(keys: list, key: tuple, nth: int) -> int | None:
        seen = 0
        for i, k in enumerate(keys):
            if k == key:
                if seen == nth:
                    return i
                seen += 1
        return None

    # -- feeding ------------------------------------------------------------
    def node_edited(self, node_id: str, now: FlowNode | None) -> bool:
        """Recheck one node as it is ``now`` (None: deleted); True if its
        standing changed."""
        before = (node_id in self.stale, node_id in self.added)
        ran = self._nodes.get(node_id)
        self.stale.discard(node_id)
        self.added.discard(node_id)
        if ran is None:
            if now is not None:
                self.added.add(node_id)
        elif now is None or not same_behaviour(ran, now):
            self.stale.add(node_id)
        return before != (node_id in self.stale, node_id in self.added)

    def wires_edited(self, flow: Flow) -> bool:
        before = self.wires_differ
        self.wires_differ = Counter(_wire_key(w) for w in flow.wires) != self._wire_count
        return before != self.wires_differ

    def settings_edited(self, flow: Flow) -> bool:
        before = self.settings_differ
        self.settings_differ = flow.settings != self.flow.settings
        return before != self.settings_differ

    def recompute(self, flow: Flow) -> None:
        nodes = {n.id: n for n in flow.nodes}
        for node_id in set(nodes) | set(self._nodes):
            self.node_edited(node_id, nodes.get(node_id))
        self.wires_edited(flow)
        self.settings_edited(flow)

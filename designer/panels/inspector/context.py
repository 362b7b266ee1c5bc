"""What every inspector tab reads, in a module of its own so that the tabs
depend on it and never on the Inspector that holds them."""

from __future__ import annotations

from typing import Any

from runtime.flow import Flow
from runtime.registry import Registry

from .model import RunModel
from .staleness import RunSnapshot


class InspectorContext:
    """What every tab reads: the model on show, the flow for names, and
    whether the user may act (a stored run is read-only). ``snapshot`` is
    the flow the live run ran, for telling what has been edited since."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or Registry.default()
        self.model = RunModel()
        self.live = self.model
        self.flow: Flow | None = None
        self.read_only = False
        self.snapshot: RunSnapshot | None = None
        #: Run id -> its designer.control.subflow_run.RunMap (runs of a flow
        #: with subflow instances: their nodes inside are paths).
        self.maps: dict[str, Any] = {}

    @property
    def run_map(self) -> Any:
        """The RunMap of the run on show, or None (no subflow instance)."""
        return self.maps.get(self.model.run_id) if self.model.run_id else None

    def name_of(self, node_id: str) -> str:
        if not node_id:
            return ""
        fnode = self.flow.node(node_id) if self.flow is not None else None
        if fnode is None and self.snapshot is not None:
            fnode = self.snapshot.ran_node(node_id)  # deleted since the run
        if fnode is None:
            return self._inner_name(node_id)
        if fnode.name:
            return fnode.name
        spec = self.registry.spec(fnode.type)
        return f"{spec.name} ({node_id})" if spec else node_id

    def _inner_name(self, node_id: str) -> str:
        """A node inside a subflow instance: the instances it is in, then its
        own name ("Express › Carrier"); an unknown id as it is."""
        run_map = self.run_map
        fnode = run_map.flat_node(node_id) if run_map is not None else None
        if fnode is None:
            return node_id
        if fnode.name:
            own = fnode.name
        else:
            spec = self.registry.spec(fnode.type)
            own = f"{spec.name} ({node_id.rpartition('.')[2]})" if spec else node_id
        return " › ".join([*(run_map.instance_name(p) for p in run_map.trail(node_id)), own])

    def instance_of(self, node_id: str) -> str | None:
        """The top-level subflow instance a node of the run shown is inside."""
        run_map = self.run_map
        return run_map.top_instance(node_id) if run_map is not None else None

    def agent_ids(self) -> list[str]:
        if self.flow is None:
            return []
        out = []
        for fnode in self.flow.nodes:
            spec = self.registry.spec(fnode.type)
            if spec is not None and spec.has_tools_port:
                out.append(fnode.id)
        return out

    # -- what the live run says that the flow on screen no longer does -------
    @property
    def showing_live(self) -> bool:
        return self.model is self.live

    def stale_reason(self, node_id: str) -> str:
        """"edited" or "deleted" when what the live run shows about this node
        is from before an edit; "" otherwise (and always for stored runs,
        which say so in their own banner)."""
        if self.snapshot is None or not self.showing_live or self.flow is None or not node_id:
            return ""
        return self.snapshot.why_stale(node_id, self.flow)

    def stale_note(self, node_id: str) -> str:
        reason = self.stale_reason(node_id)
        return f"From the previous run: {self.name_of(node_id)} has been {reason} since." \
            if reason else ""

    def wire_count(self, ran: int) -> int:
        """Messages the run shown carried along the wire ``ran`` of the flow
        it ran (as written)."""
        counts = self.model.wire_counts
        run_map = self.run_map
        if run_map is not None:
            return run_map.user_wire_counts(counts).get(ran, 0)
        return counts.get(str(ran), 0)

    def wire_message(self, ran: int) -> Any:
        """The last message recorded along that wire, or None."""
        run_map = self.run_map
        if run_map is not None:
            return run_map.last_on_wire(ran, self.model.last_wire)
        return self.model.last_wire.get(str(ran))

    def run_wire(self, index: int) -> int | None:
        """The live run's index of the wire at ``index`` in the flow on screen."""
        if self.snapshot is None or not self.showing_live or self.flow is None:
            return index
        return self.snapshot.run_wire(self.flow, index)

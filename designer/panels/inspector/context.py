"""What every inspector tab reads, in a module of its own so that the tabs
depend on it and never on the Inspector that holds them."""

from __future__ import annotations

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

    def name_of(self, node_id: str) -> str:
        if not node_id:
            return ""
        fnode = self.flow.node(node_id) if self.flow is not None else None
        if fnode is None and self.snapshot is not None:
            fnode = self.snapshot.ran_node(node_id)  # deleted since the run
        if fnode is None:
            return node_id
        if fnode.name:
            return fnode.name
        spec = self.registry.spec(fnode.type)
        return f"{spec.name} ({node_id})" if spec else node_id

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

    def run_wire(self, index: int) -> int | None:
        """The live run's index of the wire at ``index`` in the flow on screen."""
        if self.snapshot is None or not self.showing_live or self.flow is None:
            return index
        return self.snapshot.run_wire(self.flow, index)

"""What every inspector tab reads, in a module of its own so that the tabs
depend on it and never on the Inspector that holds them."""

from __future__ import annotations

from runtime.flow import Flow
from runtime.registry import Registry

from .model import RunModel


class InspectorContext:
    """What every tab reads: the model on show, the flow for names, and
    whether the user may act (a stored run is read-only)."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or Registry.default()
        self.model = RunModel()
        self.flow: Flow | None = None
        self.read_only = False

    def name_of(self, node_id: str) -> str:
        if not node_id:
            return ""
        fnode = self.flow.node(node_id) if self.flow is not None else None
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

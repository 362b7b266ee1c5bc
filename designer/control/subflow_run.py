"""A run of a flow with subflow instances, as the designer shows it.

The engine runs the FLAT flow (runtime.flow.expand): an instance's nodes are
there by path (``order.check_stock``), its wires go straight through the
instance's inputs and outputs, and wire indexes are the flat flow's. The
canvas shows the flow as written: the instance is one node, a wire into it
is one wire. ``RunMap`` translates between the two (no Qt here):

- wire counts: a flat wire stands for the user's wire ``wire_origin`` says
  (or none: a wire inside a definition). One message sent along a user's
  wire into an instance whose input feeds two nodes is two flat wires from
  the same source: counted once (the most of them); wires from different
  sources that stand for one user wire (two nodes inside feeding the same
  output) add up;
- an instance's badge: the worst state of the nodes inside it (error, then
  running, then done), its count the messages that came in along its input
  wires (else the most any node inside got), and on an error the inner
  node's path and message;
- a definition's tab: each inner node's states over every instance of that
  definition in the run (``definition_badges``);
- breakpoints and names: the flat paths of a definition's inner node in
  every instance (``paths_of``), the nodes a message entering an instance
  reaches first (``entry_nodes``), and the instance trail of a path
  (``trail``) for the inspector's names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.flow import Flow, FlowNode

#: Worst first: the state an instance shows when its nodes differ.
_RANK = {"error": 4, "warning": 3, "running": 2, "done": 1, "idle": 0}

Badge = tuple[str, int, str]


@dataclass
class InstanceBadge:
    state: str
    count: int
    text: str
    #: One line per node inside that did something (path: state · count ·
    #: text), for the tooltip.
    detail: list[str]


class RunMap:
    """The flat flow a run ran (``expansion``) against the flow as written
    (``source``)."""

    def __init__(self, expansion: Any, source: Flow) -> None:
        self.expansion = expansion
        self.source = source
        flat: Flow = expansion.flow
        self.flat = flat
        self.origin: list[int | None] = list(expansion.wire_origin)
        self._sources = [tuple(w.source) for w in flat.wires]
        self._flat_nodes = {n.id: n for n in flat.nodes}
        self._by_origin: dict[int, list[int]] = {}
        for i, o in enumerate(self.origin):
            if o is not None:
                self._by_origin.setdefault(o, []).append(i)
        #: Top-level instance id -> the flat nodes inside it (at any depth).
        self.inside: dict[str, list[str]] = {}
        self._top: dict[str, str] = {}
        for node_id in expansion.owner:
            top = expansion.outermost(node_id)
            if top is not None and node_id != top:
                self._top[node_id] = top
                self.inside.setdefault(top, []).append(node_id)
        self.instance_ids = {n.id for n in source.nodes if n.id in expansion.instances}
        # The user's wires into each top-level instance.
        self._in_wires: dict[str, list[int]] = {}
        for i, w in enumerate(source.wires):
            if w.target[0] in self.instance_ids:
                self._in_wires.setdefault(w.target[0], []).append(i)

    @classmethod
    def of(cls, source: Flow, registry: Any, file: str = "",
           expansion: Any = None) -> RunMap | None:
        """The map of a run of ``source``: None when it has no subflow
        instance (the run's ids and indexes are the flow's own). Expands
        ``source`` unless the engine's ``expansion`` is given; a flow that
        no longer expands (a stored run of a definition since deleted)
        gets None too."""
        if expansion is None:
            from runtime.flow.expand import expand, has_subflows

            if not has_subflows(source):
                return None
            try:
                from runtime.flow.subflows import with_subflows

                expansion = expand(source, with_subflows(registry, source, file), file)
            except Exception:
                return None
        if not expansion.instances:
            return None
        return cls(expansion, source)

    # -- wires ------------------------------------------------------------------
    def user_wire(self, flat_index: int) -> int | None:
        """The index in the flow as written of the wire a flat wire stands
        for; None for a wire inside a definition."""
        return self.origin[flat_index] if 0 <= flat_index < len(self.origin) else None

    def flat_wires(self, user_index: int) -> list[int]:
        """The flat wires that stand for the user's wire ``user_index``."""
        return self._by_origin.get(user_index, [])

    def user_wire_counts(self, counts: Mapping[Any, int]) -> dict[int, int]:
        """Flat wire counts (the stats event's, keyed by index or its text)
        as the user's wires' counts."""
        per: dict[int, dict[tuple, int]] = {}
        for key, n in counts.items():
            i = int(key)
            o = self.user_wire(i)
            if o is None:
                continue
            by_source = per.setdefault(o, {})
            src = self._sources[i]
            if n > by_source.get(src, 0):
                by_source[src] = n
        return {o: sum(by_source.values()) for o, by_source in per.items()}

    def last_on_wire(self, user_index: int, last_wire: Mapping[str, Any]) -> Any:
        """The last message recorded on any flat wire of the user's wire."""
        for i in reversed(self.flat_wires(user_index)):
            found = last_wire.get(str(i))
            if found is not None:
                return found
        return None

    # -- nodes ------------------------------------------------------------------
    def top_instance(self, node_id: str) -> str | None:
        """The top-level instance a flat node is inside (None: top level)."""
        return self._top.get(node_id)

    def flat_node(self, node_id: str) -> FlowNode | None:
        return self._flat_nodes.get(node_id)

    def trail(self, node_id: str) -> list[str]:
        """The instance paths a flat node is inside, outermost first."""
        out: list[str] = []
        inst = self.expansion.owner.get(node_id)
        while inst is not None:
            out.append(inst)
            inst = self.expansion.instances[inst].parent
        return out[::-1]

    def instance_name(self, path: str) -> str:
        """An instance's name as the user sees it: its node's name (in the
        flow, or in the definition it sits in), else its id."""
        node = self.source.node(path) or self._inner_instance_node(path)
        return (node.name if node is not None and node.name else path.rpartition(".")[2])

    def _inner_instance_node(self, path: str) -> FlowNode | None:
        parent, _, own = path.rpartition(".")
        inst = self.expansion.instances.get(parent)
        return next((n for n in inst.definition.nodes if n.id == own), None) if inst else None

    def entry_nodes(self, instance: str) -> list[str]:
        """The flat nodes a message entering ``instance`` (a path, at any
        depth) reaches first: targets of flat wires from outside it."""
        inside = instance + "."
        out: list[str] = []
        for w in self.flat.wires:
            src, dst = w.source[0], w.target[0]
            if dst.startswith(inside) and not src.startswith(inside) and dst not in out:
                out.append(dst)
        return out

    def instances_of(self, definition: str) -> list[str]:
        """The paths of every instance of the definition named so."""
        return [p for p, inst in self.expansion.instances.items()
                if inst.definition.name == definition]

    def paths_of(self, definition: str, inner_id: str) -> list[str]:
        """The flat ids of a definition's inner node in every instance: the
        node itself, or, for an instance inside, the nodes its messages
        enter."""
        out: list[str] = []
        for p in self.instances_of(definition):
            path = f"{p}.{inner_id}"
            if path in self._flat_nodes:
                out.append(path)
            elif path in self.expansion.instances:
                out += self.entry_nodes(path)
        return out

    # -- badges -----------------------------------------------------------------------
    def instance_badge(self, instance: str, states: Mapping[str, Badge],
                       user_counts: Mapping[int, int], name_of: Any = None) -> InstanceBadge | None:
        """The badge of a top-level instance from its inner nodes' states
        (``states``: flat id -> (state, count, text)); None while none of
        them did anything."""
        seen = [(n, states[n]) for n in self.inside.get(instance, ()) if n in states]
        seen = [(n, s) for n, s in seen if s[0] != "idle" or s[1] or s[2]]
        if not seen:
            return None
        return self._merge(seen, sum(user_counts.get(i, 0) for i in self._in_wires.get(
            instance, ())), name_of)

    def definition_badges(self, definition: str, inner_ids: Iterable[str],
                          states: Mapping[str, Badge], name_of: Any = None,
                          ) -> dict[str, InstanceBadge]:
        """Each inner node of a definition's tab: its states in every
        instance of the definition that ran, merged (counts added up)."""
        paths = self.instances_of(definition)
        out: dict[str, InstanceBadge] = {}
        for inner in inner_ids:
            seen = []
            for p in paths:
                flat = f"{p}.{inner}"
                if flat in states:
                    seen.append((flat, states[flat]))
                elif flat in self.expansion.instances:  # a nested instance
                    tops = [(n, states[n]) for n in self.expansion.owner
                            if n.startswith(flat + ".") and n in states]
                    seen += tops
            seen = [(n, s) for n, s in seen if s[0] != "idle" or s[1] or s[2]]
            if seen:
                out[inner] = self._merge(seen, None, name_of, added=True)
        return out

    @staticmethod
    def _merge(seen: list[tuple[str, Badge]], count: int | None, name_of: Any,
               added: bool = False) -> InstanceBadge:
        worst = max(seen, key=lambda ns: _RANK.get(ns[1][0], 0))
        state = worst[1][0]
        if count is None or not count:
            counts = [s[1] for _, s in seen]
            count = sum(counts) if added else max(counts)
        name = name_of or (lambda n: n)
        text = ""
        if state in ("error", "warning"):
            text = f"{name(worst[0])}: {worst[1][2]}" if worst[1][2] else f"{state} in {name(worst[0])}"
        elif len(seen) == 1 or added:
            text = worst[1][2] if len(seen) == 1 else ""
        detail = []
        for n, (s, c, t) in seen:
            line = f"{n}: {s}" + (f" · {c}" if c else "") + (f" · {t}" if t else "")
            detail.append(line)
        return InstanceBadge(state, count, text, detail)

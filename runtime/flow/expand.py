"""A flow with subflow instances made flat for a run (docs/subflows.md).

``expand(flow, registry, file)`` (``expand_subflows`` gives its flow only)
replaces every instance by its definition's nodes, recursively:

- ids are paths: inner node ``check_stock`` of instance ``order`` is
  ``order.check_stock``; nested, ``a.b.c``. Names are kept. So events,
  badges, breakpoints, pins and traces name the path without knowing of
  subflows.
- wires go THROUGH the elided ``subflow.in`` / ``subflow.out`` nodes: a wire
  into the instance's port P goes straight to the targets of the
  ``subflow.in`` named P, and a wire from inside to the ``subflow.out``
  named Q straight to what the instance's port Q is wired to. A chain of
  ten nodes in an instance is ten hops, as inline.
- a param of scope ``subflow`` takes the instance's setting of that
  subflow param (custom, message or expression as the instance set it; the
  definition's default as custom where the instance set nothing; nothing,
  so the node's own default, where there is no default either). An
  instance param the instance hands to the AI (scope ``ai``) reads the
  message at the param's own name inside (``msg.sku``), the rule an AI
  param follows outside a tool call.
- ``{{ subflow.NAME }}`` in a template renders the instance's value of
  NAME for the message the node got (``Expansion.subflow_values``; the
  engine gives each template its instance's values).
- a disabled instance's inner nodes are disabled.
- a Catch inside an instance watches that instance's nodes (its list, as
  paths; an empty list: every node of the instance); a Catch that names an
  instance watches every node inside it.

An instance wired to an agent's ``tools`` port (a port of kind ``tools``)
is a tool: it stays in the flat flow as ONE node with its (path) id, its
type and its params, and its definition's nodes are expanded beside it as
``<instance>.<inner>`` with its ``subflow.in`` and ``subflow.out`` nodes
KEPT as real nodes, wired to nothing outside. ``Expansion.tools`` maps the
instance's id to a ``ToolInstance``: the ids of its kept ``subflow.in``
nodes by input port name (``inputs``), of its ``subflow.out`` nodes by
output port name (``outputs``), every node id of its expansion
(``nodes``) and the definition. A message a tool call sends into a kept
``subflow.in`` node (its runtime's ``send``) runs the definition; what
reaches a kept ``subflow.out`` node is the call's result. An AI-scoped
param of the instance reads ``msg[NAME]`` inside, so the tool puts each
validated argument there.

Expansion expects a validated flow (``validate_flow``); a definition it
cannot find, a cycle or nesting past MAX_NESTING raise FlowError all the
same, never anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..spec import ParamValue, Scope
from .model import Flow, FlowError, FlowNode, Problem, SubflowDef, Wire
from .subflows import (
    IN_TYPE,
    MAX_NESTING,
    OUT_TYPE,
    SubflowRegistry,
    definitions,
    is_instance_type,
    param_spec,
    port_names,
    subflow_name,
)

if TYPE_CHECKING:
    from ..registry import Registry

CATCH = "core.catch"

#: A subflow param's setting as the flat flow has it, and the instance
#: path whose ``subflow`` values a template in it reads (None: top level).
Resolved = tuple[ParamValue, "str | None"]


@dataclass
class Instance:
    """One expanded instance: its path id, definition, the settings of its
    params in the flat flow's terms, and the instance it is inside."""

    id: str
    definition: SubflowDef
    values: dict[str, Resolved]
    parent: str | None = None


@dataclass
class ToolInstance:
    """An instance wired to an agent's tools port (kept as one node)."""

    id: str
    definition: SubflowDef
    #: Input port name -> id of its kept subflow.in node.
    inputs: dict[str, str]
    #: Output port name -> id of its kept subflow.out node.
    outputs: dict[str, str]
    #: Every node id of its definition's expansion (kept in/out included).
    nodes: list[str] = field(default_factory=list)


@dataclass
class Expansion:
    flow: Flow
    instances: dict[str, Instance] = field(default_factory=dict)
    #: Flat node id -> the path of the (innermost) instance it is inside.
    owner: dict[str, str] = field(default_factory=dict)
    tools: dict[str, ToolInstance] = field(default_factory=dict)
    #: (node id, param) of a template that came down from an outer level
    #: (an instance's setting): the instance whose values it reads, when
    #: not the node's own (None: the top level, where there are none).
    template_owner: dict[tuple[str, str], str | None] = field(default_factory=dict)
    #: Per wire of the flat flow: the index of the wire of the user's flow
    #: it stands for (a wire into, out of or past an instance), or None for
    #: a wire inside a definition. For the designer's wire counts.
    wire_origin: list[int | None] = field(default_factory=list)
    #: Flat node id -> its params set from a subflow param (validation
    #: checks each value where it lands).
    substituted: dict[str, list[str]] = field(default_factory=dict)

    def outermost(self, node_id: str) -> str | None:
        """The top-level instance a flat node is inside (None: top level)."""
        inst = self.owner.get(node_id)
        while inst is not None and self.instances[inst].parent is not None:
            inst = self.instances[inst].parent
        return inst

    def template_scope(self, node_id: str, param: str) -> str | None:
        """The instance whose ``subflow`` a template of this param reads."""
        key = (node_id, param)
        if key in self.template_owner:
            return self.template_owner[key]
        return self.owner.get(node_id)

    def subflow_values(self, instance: str,
                       context_for: Callable[[str | None], Any]) -> Callable[[Mapping | None], dict]:
        """What ``{{ subflow }}`` is for a message in ``instance``: each of
        its params' value (None where unset). ``context_for(path)`` is the
        expression context of that instance's templates (for a param the
        instance set by a template)."""
        return SubflowValues(self.instances[instance], context_for)


class SubflowValues:
    """``subflow`` as a template of one instance sees it, per message."""

    __slots__ = ("getters",)

    def __init__(self, inst: Instance, context_for: Callable[[str | None], Any]) -> None:
        from ..message import get_path

        getters: list[tuple[str, Callable[[Mapping | None], Any]]] = []
        for p in inst.definition.params:
            got = inst.values.get(p.name)
            setting = got[0] if got is not None else None
            if setting is None:
                getters.append((p.name, lambda _m: None))
            elif setting.scope is Scope.MESSAGE:
                path = setting.path or p.name
                getters.append((p.name, lambda m, path=path: get_path(m, path, None)
                                if m is not None else None))
            elif setting.scope is Scope.EXPRESSION:
                from ..expressions import Expression

                expr = Expression(param_spec(p), setting.value, None)
                where = got[1] if got is not None else None

                def render(m: Mapping | None, expr: Any = expr, where: str | None = where) -> Any:
                    if expr.context is None:
                        expr.context = context_for(where)
                    return expr.render(m)
                getters.append((p.name, render))
            else:
                value = setting.value
                getters.append((p.name, lambda _m, value=value: value))
        self.getters = getters

    def __call__(self, msg: Mapping | None) -> dict:
        return {name: get(msg) for name, get in self.getters}


def has_subflows(flow: Flow) -> bool:
    """Whether a flow has anything to expand (or definitions to check)."""
    return bool(flow.subflows) or any(is_instance_type(n.type) for n in flow.nodes)


def expand_subflows(flow: Flow, registry: Registry | None = None, file: str = "") -> Flow:
    """The flat flow of ``flow`` (see the module's doc); ``flow`` itself
    when it has no instance."""
    return expand(flow, registry, file).flow


def expand(flow: Flow, registry: Registry | None = None, file: str = "") -> Expansion:
    """``flow`` made flat, with what the run needs to know of its instances."""
    if not any(is_instance_type(n.type) for n in flow.nodes):
        return Expansion(flow)
    if isinstance(registry, SubflowRegistry):
        defs = {name: d for name, (d, _where) in registry.defs.items()}
    else:
        defs = {name: d for name, (d, _where) in definitions(flow, file).items()}
    b = _Builder(defs, registry, file)
    b.level(flow.nodes, flow.wires, "", {}, None, False, [], None)
    wires, origin = b.wires()
    flat = Flow(format=flow.format, name=flow.name, description=flow.description,
                settings=flow.settings, nodes=b.nodes, wires=wires, subflows=flow.subflows)
    return Expansion(flat, b.instances, b.owner, b.tools, b.template_owner, origin,
                     b.substituted)


#: An end of a wire while building: (node id, port), or (junction id, None)
#: for an elided subflow.in / subflow.out.
_End = tuple[str, "str | None"]


class _Builder:
    def __init__(self, defs: dict[str, SubflowDef], registry: Any, file: str) -> None:
        self.defs = defs
        self.registry = registry
        self.file = file
        self.nodes: list[FlowNode] = []
        self.edges: list[tuple[_End, _End, int | None]] = []
        self.instances: dict[str, Instance] = {}
        self.owner: dict[str, str] = {}
        self.tools: dict[str, ToolInstance] = {}
        self.template_owner: dict[tuple[str, str], str | None] = {}
        self.substituted: dict[str, list[str]] = {}
        self._tool_kinds: dict[str, frozenset[str]] = {}

    def fail(self, message: str, node: str | None = None) -> FlowError:
        return FlowError([Problem(file=self.file, node=node, message=message)])

    def tools_ports(self, type_id: str) -> frozenset[str]:
        """The output ports of kind ``tools`` of a node type."""
        found = self._tool_kinds.get(type_id)
        if found is None:
            spec = self.registry.spec(type_id) if self.registry is not None else None
            found = frozenset(p.name for p in spec.outputs if p.kind == "tools") \
                if spec is not None else frozenset()
            self._tool_kinds[type_id] = found
        return found

    def level(self, nodes: list[FlowNode], wires: list[Wire], prefix: str,
              values: dict[str, Resolved], owner: str | None, disabled: bool,
              chain: list[str], defn: SubflowDef | None, keep_ports: bool = False,
              ) -> tuple[dict[str, str], dict[str, str], list[str]]:
        """Add one level (the top flow, or one instance's definition) with
        ``prefix`` before its ids; its subflow.in and subflow.out ids by
        port name, and every id it added."""
        types = {n.id: n.type for n in nodes}
        tool_ids = {w.target[0] for w in wires
                    if w.source[0] in types and w.source[1] in self.tools_ports(types[w.source[0]])}
        ins: dict[str, str] = {}
        outs: dict[str, str] = {}
        if defn is not None:
            in_names = iter(port_names(defn, IN_TYPE))
            out_names = iter(port_names(defn, OUT_TYPE))
        added: list[str] = []
        local: dict[str, str] = {}  # this level's id -> its flat id (or junction)
        junction: set[str] = set()
        instance_ports: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        catches: list[tuple[int, str]] = []
        for n in nodes:
            path = prefix + n.id
            if defn is not None and n.type in (IN_TYPE, OUT_TYPE):
                name = next(in_names if n.type == IN_TYPE else out_names)
                (ins if n.type == IN_TYPE else outs).setdefault(name, path)
                local[n.id] = path
                if keep_ports:
                    self._add(n, path, values, owner, disabled)
                    added.append(path)
                else:
                    junction.add(n.id)
                continue
            if not is_instance_type(n.type):
                if n.type == CATCH:
                    catches.append((len(self.nodes), n.id))
                self._add(n, path, values, owner, disabled)
                added.append(path)
                local[n.id] = path
                continue
            name = subflow_name(n.type)
            d = self.defs.get(name)
            if d is None:
                raise self.fail(f"no definition of subflow '{name}'", path)
            if name in chain:
                raise self.fail("subflows use each other in a cycle: "
                                + " > ".join([*chain, name]), path)
            if len(chain) >= MAX_NESTING:
                raise self.fail(f"subflows nest more than {MAX_NESTING} deep", path)
            inner = self._values(n, d, values, owner)
            self.instances[path] = Instance(path, d, inner, owner)
            off = disabled or n.disabled
            if n.id in tool_ids:
                self._add(n, path, values, owner, disabled)
                added.append(path)
                local[n.id] = path
                t_ins, t_outs, t_nodes = self.level(d.nodes, d.wires, path + ".", inner, path, off,
                                                    [*chain, name], d, keep_ports=True)
                self.tools[path] = ToolInstance(path, d, t_ins, t_outs, t_nodes)
                added += t_nodes
            else:
                i_ins, i_outs, i_nodes = self.level(d.nodes, d.wires, path + ".", inner, path, off,
                                                    [*chain, name], d)
                instance_ports[n.id] = (i_ins, i_outs)
                added += i_nodes
        for index, w in enumerate(wires):
            (s, sp), (t, tp) = w.source, w.target
            src: _End | None
            dst: _End | None
            if s in instance_ports:
                j = instance_ports[s][1].get(sp)
                src = (j, None) if j is not None else None
            elif s in junction:
                src = (local[s], None)
            else:
                src = (local[s], sp) if s in local else None
            if t in instance_ports:
                j = instance_ports[t][0].get(tp)
                dst = (j, None) if j is not None else None
            elif t in junction:
                dst = (local[t], None)
            else:
                dst = (local[t], tp) if t in local else None
            if src is not None and dst is not None:
                self.edges.append((src, dst, None if prefix else index))
        for index, catch_id in catches:
            self._scope_catch(index, prefix, local, instance_ports, added, prefix + catch_id)
        return ins, outs, added

    def _scope_catch(self, index: int, prefix: str, local: dict[str, str],
                     instance_ports: dict, added: list[str], own: str) -> None:
        """A Catch's node list in flat ids: inside an instance its ids are
        paths (an empty list there: every node of the instance), and an
        instance it names stands for every node inside it."""
        fnode = self.nodes[index]
        setting = fnode.params.get("nodes")
        watched = setting.value if setting is not None and setting.scope is Scope.CUSTOM else None
        if not isinstance(watched, list) or not all(isinstance(x, str) for x in watched):
            watched = []
        if not watched:
            if not prefix:
                return  # top level: watches every node, as without subflows
            ids = [i for i in added if i != own]
        else:
            ids = []
            for x in watched:
                if x in instance_ports:
                    start = prefix + x + "."
                    ids += [i for i in added if i.startswith(start)]
                else:
                    ids.append(local.get(x, prefix + x))
        params = dict(fnode.params)
        params["nodes"] = ParamValue(scope=Scope.CUSTOM, value=ids)
        self.nodes[index] = fnode.model_copy(update={"params": params})

    def _add(self, n: FlowNode, path: str, values: dict[str, Resolved], owner: str | None,
             disabled: bool) -> None:
        update: dict[str, Any] = {}
        if path != n.id:
            update["id"] = path
        if disabled and not n.disabled:
            update["disabled"] = True
        if values or any(v.scope is Scope.SUBFLOW for v in n.params.values()):
            params = self._params(n, path, values, owner)
            if params is not n.params:
                update["params"] = params
        if owner is not None:
            self.owner[path] = owner
        self.nodes.append(n.model_copy(update=update) if update else n)

    def _params(self, n: FlowNode, path: str, values: dict[str, Resolved],
                owner: str | None) -> dict[str, ParamValue]:
        if not any(v.scope is Scope.SUBFLOW for v in n.params.values()):
            return n.params
        out: dict[str, ParamValue] = {}
        for q, pv in n.params.items():
            if pv.scope is not Scope.SUBFLOW:
                out[q] = pv
                continue
            got = values.get(pv.param or "")
            if got is None:
                continue  # not set, no default: the node's own default
            setting, where = got
            out[q] = setting
            self.substituted.setdefault(path, []).append(q)
            if setting.scope is Scope.EXPRESSION and where != owner:
                self.template_owner[(path, q)] = where
        return out

    def _values(self, n: FlowNode, d: SubflowDef, values: dict[str, Resolved],
                owner: str | None) -> dict[str, Resolved]:
        """The settings of instance ``n``'s params, in the flat flow's terms."""
        out: dict[str, Resolved] = {}
        for p in d.params:
            pv = n.params.get(p.name)
            if pv is not None and pv.scope is Scope.SUBFLOW:
                got = values.get(pv.param or "")  # handed down from the enclosing instance
                if got is not None:
                    out[p.name] = got
                    continue
                pv = None
            if pv is not None and pv.scope is Scope.AI:
                out[p.name] = (ParamValue(scope=Scope.MESSAGE, path=p.name), owner)
            elif pv is not None and not (pv.scope is Scope.CUSTOM and pv.value is None):
                out[p.name] = (pv, owner)
            elif p.default is not None:
                out[p.name] = (ParamValue(scope=Scope.CUSTOM, value=p.default), owner)
        return out

    def wires(self) -> tuple[list[Wire], list[int | None]]:
        """The edges with every junction passed through: each emitter wired
        to each real target its junctions lead to, in the order built; and
        each one's wire of the top level (see Expansion.wire_origin)."""
        after: dict[str, list[tuple[_End, int | None]]] = {}
        for src, dst, origin in self.edges:
            if src[1] is None:
                after.setdefault(src[0], []).append((dst, origin))
        memo: dict[str, list[tuple[str, str, int | None]]] = {}

        def targets(j: str, seen: set[str]) -> list[tuple[str, str, int | None]]:
            hit = memo.get(j)
            if hit is not None:
                return hit
            found: list[tuple[str, str, int | None]] = []
            seen.add(j)
            for dst, origin in after.get(j, ()):
                if dst[1] is not None:
                    found.append((dst[0], dst[1], origin))
                elif dst[0] not in seen:  # a ring of junctions carries nothing
                    found += [(n, p, origin if origin is not None else o)
                              for n, p, o in targets(dst[0], seen)]
            seen.discard(j)
            memo[j] = found
            return found

        out: list[Wire] = []
        origins: list[int | None] = []
        for src, dst, origin in self.edges:
            if src[1] is None:
                continue
            ends = [(dst[0], dst[1], origin)] if dst[1] is not None \
                else targets(dst[0], set())
            for node, port, last in ends:
                out.append(Wire(source=(src[0], src[1]), target=(node, port)))
                origins.append(origin if origin is not None else last)
        return out, origins

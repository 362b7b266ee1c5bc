"""Validation of a parsed flow: every problem, each naming the file, node id
and field (errors refuse the flow, warnings do not), and what it checks
against: the ports and tool names each node offers, agents that call each
other in a ring, empty prompts, flow-level hooks."""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any

from ..node import Node, is_secret_ref
from ..package_hints import unknown_type_message
from ..registry import Registry
from ..spec import NodeSpec, ParamSpec, ParamType, ParamValue, Scope
from .graph import rings
from .model import Flow, FlowNode, Problem, SubflowDef
from .parse import _no_gc
from .subflow_checks import (
    definition_problems,
    instance_problems,
    landed_problems,
    missing_definition,
    port_problems,
    subflow_scope_problem,
    template_problem,
)
from .subflows import IN_TYPE, OUT_TYPE, TYPE_PREFIX, with_subflows


def check_param_value(spec: ParamSpec, value: Any) -> str | None:
    """Why a custom value does not fit the param's type, or None."""
    t = spec.type
    if value is None:
        return None
    if t is ParamType.STR and not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if t is ParamType.INT and (not isinstance(value, int) or isinstance(value, bool)):
        return f"expected an integer, got {json.dumps(value)}"
    if t is ParamType.FLOAT and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        return f"expected a number, got {json.dumps(value)}"
    if type(value) is float and value - value != 0:  # set in code or by --set, not read
        return f"expected a finite number, got {json.dumps(value)}"
    if t is ParamType.BOOL and not isinstance(value, bool):
        return f"expected true or false, got {json.dumps(value)}"
    if t is ParamType.ENUM and value not in (spec.choices or []):
        return f"expected one of {', '.join(spec.choices or [])}, got {json.dumps(value)}"
    if t is ParamType.SECRET and not is_secret_ref(value):
        return ('a secret must name an environment variable {"env": "NAME"} or a keyring '
                'entry {"keyring": "SERVICE", "username": "USER"}, never the secret itself')
    return None


def _fixed_values(params: dict[str, ParamValue]) -> dict[str, ParamValue]:
    """The params as a node's own check() should see them: a template's text
    is no fixed value (it is known only per message), so it reads as None,
    as a message path does; a param set from a subflow param is left out."""
    if not any(v.scope in (Scope.EXPRESSION, Scope.SUBFLOW) for v in params.values()):
        return params
    # A subflow param's value is known per instance: the node's check sees
    # the param as not set.
    return {k: v.model_copy(update={"value": None}) if v.scope is Scope.EXPRESSION else v
            for k, v in params.items() if v.scope is not Scope.SUBFLOW}


def _from_subflow(setting: ParamValue | None) -> bool:
    return setting is not None and setting.scope is Scope.SUBFLOW


def output_ports(spec: NodeSpec, registry: Registry, fnode: FlowNode) -> list[str]:
    cls = registry.get(spec.type)
    if cls is not None and spec.dynamic_outputs:
        try:
            return cls.output_ports(fnode.params)
        except Exception:
            return [p.name for p in spec.outputs]
    return [p.name for p in spec.outputs]


def tool_name(spec: NodeSpec, fnode: FlowNode) -> str | None:
    if spec.tool is None:
        return None
    if fnode.tool and fnode.tool.name:
        return fnode.tool.name
    if spec.has_tools_port:
        # An agent used as a tool: named after the node ("Mail agent" ->
        # mail_agent), so that two child agents are two tools at once.
        slug = re.sub(r"[^a-z0-9]+", "_", (fnode.name or fnode.id).lower()).strip("_")[:64]
        return slug or spec.tool.name
    return spec.tool.name


#: What OpenAI (and most compatible servers) accept as a function name.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tool_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a tool's name (the name an LLM calls it by),
    or None."""
    if TOOL_NAME_RE.match(name):
        return None
    shown = json.dumps(name[:70] + ("…" if len(name) > 70 else ""), ensure_ascii=False)
    return (f"tool name {shown} is not a name an LLM can call: use 1-64 letters, digits, "
            "'_' or '-' (e.g. notify_ops)")


def offered_tool_names(spec: NodeSpec, fnode: FlowNode, registry: Registry) -> list[str]:
    """The names a tool node offers an agent: its tool name, or one per tool
    for a node that offers several (its class's ``tool_entries``, an MCP
    server's); a node whose tools cannot be read offers none here (its own
    check says why)."""
    entries = getattr(registry.get(spec.type), "tool_entries", None)
    if entries is None:
        return [tool_name(spec, fnode) or ""]
    try:
        return [e.name for e in entries(fnode.params)]
    except Exception:  # noqa: BLE001 - reported by the node's check()
        return []


def agent_cycle(flow: Flow, specs: dict[str, NodeSpec]) -> list[str] | None:
    """Agents that call each other as tools in a ring (a -> b -> a), as the
    path around it; None if there is none. A child agent runs inside its
    parent's tool call, so a ring would recurse until a limit stops it."""
    calls: dict[str, list[str]] = {}
    for wire in flow.wires:
        src, dst = wire.source[0], wire.target[0]
        sspec, dspec = specs.get(src), specs.get(dst)
        if sspec is None or dspec is None or not dspec.has_tools_port:
            continue
        if any(p.name == wire.source[1] and p.kind == "tools" for p in sspec.outputs):
            calls.setdefault(src, []).append(dst)
    return next(rings(calls), None)


class _Ports:
    """One node type's port names, worked out once per validation."""

    __slots__ = ("spec", "registry", "static", "inputs", "kinds")

    def __init__(self, spec: NodeSpec, registry: Registry) -> None:
        self.spec, self.registry = spec, registry
        dynamic = spec.dynamic_outputs and registry.get(spec.type) is not None
        self.static = None if dynamic else [p.name for p in spec.outputs]
        self.inputs = {p.name for p in spec.inputs}
        self.kinds = {p.name: p.kind for p in spec.outputs}

    def outputs(self, fnode: FlowNode) -> list[str]:
        if self.static is not None:
            return self.static
        return output_ports(self.spec, self.registry, fnode)


def validate_flow(flow: Flow, registry: Registry | None = None, *, file: str = "") -> list[Problem]:
    """Every problem with a parsed flow: errors (refused) and warnings.
    Linear in nodes + wires: one pass over each, dicts by id, one search for
    reachability. A flow with subflows: each definition it uses is checked
    too, once (runtime.flow.subflow_checks)."""
    with _no_gc():  # it builds a few objects per node and wire, none in a cycle
        return _validate(flow, registry or Registry.default(), file)


def _validate(flow: Flow, registry: Registry, file: str,
              inside: SubflowDef | None = None) -> list[Problem]:
    """``inside``: ``flow`` is that subflow definition's nodes and wires."""
    from ..message import PathError, parse_path

    problems: list[Problem] = []
    top = inside is None
    if top and flow.subflows:
        registry = with_subflows(registry, flow, file)
    missing: list[FlowNode] = []  # instances of a subflow not found

    def err(message: str, node: str | None = None, field: str | None = None) -> None:
        problems.append(Problem(file=file, node=node, field=field, message=message))

    def warn(message: str, node: str | None = None, field: str | None = None) -> None:
        problems.append(Problem(severity="warning", file=file, node=node, field=field,
                                message=message))

    if flow.settings.out_of_process:
        known = registry.packages()
        for name in flow.settings.out_of_process:
            if name not in known:
                warn(f"no node package '{name}' to run out of process (packages: "
                     f"{', '.join(known) or 'none'})", field="settings.out_of_process")
    specs: dict[str, NodeSpec] = {}
    pin_bytes = 0  # of every pin so far, for the flow's bound
    unknown: dict[str, str] = {}  # node type -> what to say about it
    seen: dict[str, FlowNode] = {}  # the first node of each id, as Flow.node() finds it
    # What a type says is looked up once per type, not once per node.
    types: dict[str, _TypeFacts] = {}
    # Which of the agent checks below can find anything: bits of _TypeFacts.
    kinds = 0
    starts: list[str] = []  # sources, and nodes with no input: where reachability starts
    by_value, by_path, by_template = Scope.CUSTOM, Scope.MESSAGE, Scope.EXPRESSION
    for fnode in flow.nodes:
        node_id = fnode.id
        if node_id in seen:
            err(f"duplicate node id '{node_id}'", node_id, "id")
            continue
        seen[node_id] = fnode
        facts = types.get(fnode.type)
        if facts is None:
            if top and fnode.type.startswith(TYPE_PREFIX):
                # The first instance: from here on the registry knows the
                # subflows (types seen so far are the base registry's).
                registry = with_subflows(registry, flow, file)
            facts = types[fnode.type] = _TypeFacts(registry.spec(fnode.type), registry)
        spec = facts.spec
        if spec is None:
            if fnode.type.startswith(TYPE_PREFIX):
                missing.append(fnode)
                continue
            if fnode.type not in unknown:  # the hint looks at files: once per type
                unknown[fnode.type] = unknown_type_message(fnode.type, file, registry)
            err(unknown[fnode.type], node_id, "type")
            continue
        specs[node_id] = spec
        kinds |= facts.kinds
        if facts.start:
            starts.append(node_id)
        templated = False  # a param set by a template: check() sees it as None
        fparams = facts.params
        for pname, pval in fnode.params.items():
            scope = pval.scope
            if scope is by_template:
                templated = True
            found = fparams.get(pname)
            if found is None:
                err(f"unknown param '{pname}' for {spec.type}", node_id, f"params.{pname}")
                continue
            pspec, allowed, untyped = found
            if scope not in allowed:  # pspec.allows(scope), worked out once per type
                field = f"params.{pname}"
                if pval.scope is Scope.EXPRESSION:
                    err("scope 'expression' is not allowed: " + (
                        "a secret names where it is kept and is never computed" if pspec.secret
                        else f"the author of {spec.type} did not allow a fixed value for "
                        f"'{pname}', and a template is one"), fnode.id, field + ".scope")
                elif pval.scope is Scope.AI:
                    err(f"scope 'ai' is not allowed: the author of {spec.type} did not let the AI "
                        f"set '{pname}' (allowed: {', '.join(s.value for s in pspec.allowed_scopes)})",
                        fnode.id, field + ".scope")
                else:
                    err(f"scope '{pval.scope.value}' is not allowed (allowed: "
                        f"{', '.join(s.value for s in pspec.allowed_scopes)})", fnode.id, field + ".scope")
                continue
            if scope is by_value:
                value = pval.value
                # A json param takes any value: of check_param_value's tests
                # only the one for a number that is not finite applies.
                if not untyped or (type(value) is float and value - value != 0):
                    why = check_param_value(pspec, value)
                    if why:
                        err(why, node_id, f"params.{pname}.value")
            elif scope is by_path:
                try:
                    parse_path(pval.path or "")
                except (PathError, ValueError) as exc:  # ValueError: int() of 5,000 digits
                    err(f"message path: {exc}", node_id, f"params.{pname}.path")
            elif scope is by_template:
                from ..expressions import problem as expression_problem

                why = expression_problem(pspec, pval.value)
                if not why and "subflow" in str(pval.value):
                    why = template_problem(inside, pval.value)
                if why:
                    err(why, node_id, f"params.{pname}.value")
            elif scope is Scope.SUBFLOW:
                templated = True  # known per instance only: check() does not see it
                why = subflow_scope_problem(inside, pname, pval.param, pspec)
                if why:
                    err(why, node_id, f"params.{pname}.param")
        if fnode.outputs:
            for out_name in fnode.outputs:
                if spec.output(out_name) is None:
                    err(f"unknown output '{out_name}' for {spec.type}", node_id,
                        f"outputs.{out_name}")
        tool = fnode.tool
        if tool is not None:
            if spec.tool is None:
                err(f"{spec.type} declares no tool, so it cannot have a tool name", node_id, "tool")
            elif tool.name is not None:
                why = tool_name_problem(tool.name)
                if why:
                    err(why, node_id, "tool.name")
        if fnode.pin is not None:
            pin_bytes = _check_pin(fnode, spec, registry, pin_bytes, err)
        check = facts.check
        if check is not None:
            try:
                for field, why in check(_fixed_values(fnode.params) if templated
                                        else fnode.params):
                    if field and not spec.param_visible(field, fnode.params):
                        continue  # a param the designer's choice makes meaningless
                    if templated and field and _from_subflow(fnode.params.get(field)):
                        continue  # its value is the instance's: checked there
                    err(why, node_id, f"params.{field}" if field else None)
            except Exception as exc:  # a node's own check must not hide the others
                err(f"cannot check params: {exc}", fnode.id, "params")

    tools_by_agent: dict[str, dict[str, str]] = {}
    wire_keys: set[tuple] = set()
    ports: dict[str, _Ports] = {}  # by node type: what each wire is checked against
    # For the graph analysis below: every wire between two nodes of the flow
    # counts, whatever its ports (duplicates and wires refused here too).
    successors: dict[str, list[str]] = {}
    wired_in: set[str] = set()
    for i, wire in enumerate(flow.wires):
        (src, sport), (dst, dport) = wire.source, wire.target
        sspec, dspec = specs.get(src), specs.get(dst)
        known = sspec is not None and dspec is not None  # then both are in seen
        if known or (src in seen and dst in seen):
            nexts = successors.get(src)
            if nexts is None:
                successors[src] = [dst]
            else:
                nexts.append(dst)
            wired_in.add(dst)
        key = (src, sport, dst, dport)
        if key in wire_keys:
            err(f"duplicate wire {src}.{sport} -> {dst}.{dport}", src, f"wires[{i}]")
            continue
        wire_keys.add(key)
        if not known:
            if src not in seen:
                err(f"wire from unknown node '{src}'", None, f"wires[{i}].from")
            if dst not in seen:
                err(f"wire to unknown node '{dst}'", None, f"wires[{i}].to")
            continue
        sports = ports.get(sspec.type) or ports.setdefault(sspec.type, _Ports(sspec, registry))
        dports = ports.get(dspec.type) or ports.setdefault(dspec.type, _Ports(dspec, registry))
        out_names = sports.static if sports.static is not None else sports.outputs(seen[src])
        if sport not in out_names:
            err(f"unknown output port '{sport}' on {sspec.type} (has: {', '.join(out_names) or 'none'})",
                src, f"wires[{i}].from")
            continue
        if dport not in dports.inputs:
            ins = ", ".join(p.name for p in dspec.inputs) or "none"
            err(f"unknown input port '{dport}' on {dspec.type} (has: {ins})", dst, f"wires[{i}].to")
            continue
        if sports.kinds.get(sport, "out") == "tools":
            field = f"wires[{i}]"
            dst_node = seen[dst]
            if dspec.tool is None:
                err(f"{dspec.type} declares no tool, so it cannot be wired to the tools port of "
                    f"'{src}'", dst, field)
                continue
            agent_tools = tools_by_agent.setdefault(src, {})
            several = hasattr(registry.get(dspec.type), "tool_entries")
            for name in offered_tool_names(dspec, dst_node, registry):
                if name in agent_tools:
                    err(f"agent '{src}' has two tools named '{name}' (nodes '{agent_tools[name]}' "
                        f"and '{dst}'); " + ("rename one in the node's tools list" if several
                                             else "give one a different tool name"),
                        dst, "params.tools" if several else "tool.name")
                else:
                    agent_tools[name] = dst

    if kinds & _INJECT and kinds & _PROMPT:
        for node_id, field, message in _empty_prompt_problems(flow, seen, specs):
            err(message, node_id, field)
    if kinds & _TOOLS:
        ring = agent_cycle(flow, specs)
        if ring:
            err("agents call each other as tools in a ring: " + " -> ".join(ring)
                + "; a child agent must not reach its parent", ring[0], "wires")
    hook_starts = _check_flow_hooks(flow, seen, specs, err) if flow.settings.hooks else set()
    if kinds & _PORT:
        port_problems(flow, inside, seen, successors, specs, err)
    if missing:
        for fnode in missing:
            err(missing_definition(fnode, file), fnode.id, "type")
    if kinds & _INSTANCE:
        instance_problems(flow, seen, specs, registry, file, err, warn)

    # Graph analysis (successors and wired_in are built above): warnings
    # only, cycles are allowed.
    # A flow-level hook's first node is fed by the agents, as if wired.
    wired_in |= hook_starts
    # One search from all sources at once: each node and wire is seen once.
    reachable = set(starts)
    reachable |= hook_starts
    todo = deque(reachable)
    while todo:
        for nxt in successors.get(todo.popleft(), ()):
            if nxt not in reachable:
                reachable.add(nxt)
                todo.append(nxt)
    for fnode in flow.nodes:
        node_id = fnode.id
        spec = specs.get(node_id)
        if spec is None or spec.type == "core.catch":
            continue
        if node_id not in wired_in:
            if spec.inputs:
                warn("input is not connected", node_id, "in")
        elif node_id not in reachable:
            warn("no source reaches this node", node_id)
    if kinds & _HOOKS or flow.settings.hooks:
        for node_id, field, message in _blocking_hook_problems(flow, seen, specs, successors):
            warn(message, node_id, field)
    if top and (kinds & _INSTANCE or flow.subflows):
        problems += definition_problems(flow, registry, file, _validate)
        if kinds & _INSTANCE and not any(p.severity == "error" for p in problems):
            landed_problems(flow, registry, file, err, check_param_value)
    return problems


class _TypeFacts:
    """What validation reads of one node type, found once per flow: its
    spec, its params by name, its own check() (None when it has none), and
    which of the agent checks (empty prompts, tools rings, hooks) concern it."""

    __slots__ = ("spec", "params", "check", "kinds", "start")

    def __init__(self, spec: NodeSpec | None, registry: Registry) -> None:
        self.spec = spec
        #: name -> (its spec, the scopes it allows, whether it takes any value)
        self.params: dict[str, tuple[ParamSpec, frozenset[Scope], bool]] = {
            p.name: (p, frozenset(s for s in Scope if p.allows(s)), p.type is ParamType.JSON)
            for p in (spec.params if spec is not None else ())}
        #: Where the search for nodes no source reaches starts.
        self.start = spec is not None and (spec.source or not spec.inputs)
        cls = registry.get(spec.type) if spec is not None else None
        own = getattr(cls, "check", None)
        self.check = None if own is None or getattr(own, "__func__", None) is _NO_CHECK else own
        self.kinds = 0 if spec is None else (
            (_INJECT if spec.type == INJECT else 0) | (_PROMPT if PROMPT in self.params else 0)
            | (_TOOLS if spec.has_tools_port else 0)
            | (_HOOKS if any(p.kind == "hook" for p in spec.outputs) else 0)
            | (_PORT if spec.type in (IN_TYPE, OUT_TYPE) else 0)
            | (_INSTANCE if spec.type.startswith(TYPE_PREFIX) else 0))


_INJECT, _PROMPT, _TOOLS, _HOOKS, _PORT, _INSTANCE = 1, 2, 4, 8, 16, 32


def _check_pin(fnode: FlowNode, spec: NodeSpec, registry: Registry, total: int,
               err: Any) -> int:
    """Errors of a node's pinned data; the pins' bytes so far with it."""
    from ..pins import MAX_FLOW_PIN_BYTES, pin_problems

    assert fnode.pin is not None
    ports = output_ports(spec, registry, fnode)
    kinds = {p.name: p.kind for p in spec.outputs}
    data_ports = {p for p in ports if kinds.get(p, "out") == "out"}  # no tools, no hooks
    problems, size = pin_problems(fnode.pin, ports, data_ports)
    for field, message in problems:
        err(message, fnode.id, field)
    if total <= MAX_FLOW_PIN_BYTES < total + size:
        err(f"the flow's pins pass {MAX_FLOW_PIN_BYTES // 1024 // 1024} MB of JSON with this "
            "one; unpin some nodes", fnode.id, "pin")
    return total + size


#: The node that starts a flow with a typed payload, and the param of an
#: agent that reads what to ask (by default from the message's payload).
INJECT, PROMPT = "core.inject", "prompt"
#: Node.check as the base class has it (no problems): not called per node.
_NO_CHECK = Node.check.__func__  # type: ignore[attr-defined]


def empty_prompts(flow: Flow, registry: Registry | None = None) -> list[tuple[str, str, str]]:
    """The empty-prompt errors of a flow alone (the designer asks while it
    wires, before validation runs): (inject id, field, message) each."""
    registry = registry or Registry.default()
    seen: dict[str, FlowNode] = {}
    specs: dict[str, NodeSpec] = {}
    for fnode in flow.nodes:
        spec = registry.spec(fnode.type)
        if fnode.id not in seen and spec is not None:
            seen[fnode.id], specs[fnode.id] = fnode, spec
    return _empty_prompt_problems(flow, seen, specs)


def _empty_prompt_problems(flow: Flow, seen: dict[str, FlowNode], specs: dict[str, NodeSpec],
                           ) -> list[tuple[str, str, str]]:
    """An Inject whose payload is empty text, wired straight into a node
    that asks its payload as a prompt (an AI Agent's default): the run
    would stop there with "nothing to ask". (node, field, message) each, on
    the Inject, once however many agents it feeds."""
    out: list[tuple[str, str, str]] = []
    done: set[str] = set()
    for wire in flow.wires:
        src, dst = wire.source[0], wire.target[0]
        sspec, dspec = specs.get(src), specs.get(dst)
        if sspec is None or dspec is None or sspec.type != INJECT or src in done:
            continue
        inject, asker = seen[src], seen[dst]
        pspec = dspec.param(PROMPT)
        if pspec is None or inject.disabled or asker.disabled or asker.pin is not None:
            continue
        prompt = asker.params.get(PROMPT)
        scope = prompt.scope if prompt is not None else pspec.default_scope
        path = (prompt.path if prompt is not None else pspec.default_path) or ""
        if scope is not Scope.MESSAGE or path.strip() != "payload":
            continue
        kind = inject.params.get("payload_type")
        if kind is not None and (kind.scope is not Scope.CUSTOM or kind.value != "string"):
            continue
        payload = inject.params.get("payload")
        if payload is not None and (payload.scope is not Scope.CUSTOM
                                    or payload.value not in (None, "")):
            continue
        done.add(src)
        who = f"'{asker.name}'" if asker.name else f"{dspec.name} '{dst}'"
        out.append((src, "params.payload",
                    f"empty prompt: {who} asks this payload as its prompt, and it is empty; "
                    "type what to ask in the payload"))
    return out


#: The node that answers a waiting agent at the end of a blocking hook flow.
HOOK_RESULT = "ai.hook_result"


def _check_flow_hooks(flow: Flow, seen: dict[str, FlowNode], specs: dict[str, NodeSpec],
                      err: Any) -> set[str]:
    """Errors of ``settings.hooks`` (a node or agent that is not there), and
    the ids of the hook flows' first nodes."""
    starts: set[str] = set()
    agents = {n for n, spec in specs.items() if any(p.kind == "hook" for p in spec.outputs)}
    for i, hook in enumerate(flow.settings.hooks):
        where = f"settings.hooks[{i}]"
        spec = specs.get(hook.node)
        if hook.node not in seen:
            err(f"{hook.port} hook: no node '{hook.node}' in this flow (the first node of the "
                "hook flow)", None, where + ".node")
        elif spec is not None and not spec.inputs:
            err(f"{hook.port} hook: node '{hook.node}' ({spec.type}) has no input to take the "
                "hook's messages", None, where + ".node")
        else:
            starts.add(hook.node)
        if hook.agents != "all":
            for name in hook.agents:
                if name not in seen:
                    err(f"{hook.port} hook: no agent '{name}' in this flow (agents: "
                        f"{', '.join(sorted(agents)) or 'none'})", None, where + ".agents")
                elif name in specs and name not in agents:
                    err(f"{hook.port} hook: node '{name}' ({specs[name].type}) is not an agent "
                        "and has no hooks", None, where + ".agents")
    return starts


def _blocking_hook_problems(flow: Flow, seen: dict[str, FlowNode], specs: dict[str, NodeSpec],
                            successors: dict[str, list[str]]) -> list[tuple[str | None, str, str]]:
    """A blocking hook whose flow reaches no AI Hook Result: its agent would
    wait hook_timeout_seconds at every hook. (node, field, message) each."""
    starts: list[tuple[list[str], str | None, str, str]] = []
    for node_id, spec in specs.items():
        hooks = [p.name for p in spec.outputs if p.kind == "hook"]
        if not hooks:
            continue
        params = seen[node_id].params
        for port in hooks:
            setting = params.get(f"block_{port}")
            if setting is None or setting.scope is not Scope.CUSTOM or setting.value is not True:
                continue
            targets = [w.target[0] for w in flow.wires
                       if w.source == (node_id, port) and w.target[0] in seen]
            if targets:
                starts.append((targets, node_id, f"params.block_{port}",
                               f"blocking {port} hook"))
    for i, hook in enumerate(flow.settings.hooks):
        if hook.blocking and hook.node in seen:
            starts.append(([hook.node], None, f"settings.hooks[{i}]",
                           f"blocking {hook.port} hook '{hook.node}'"))
    out = []
    for targets, node_id, field, what in starts:
        found, todo = set(targets), list(targets)
        while todo:
            for nxt in successors.get(todo.pop(), ()):
                if nxt not in found:
                    found.add(nxt)
                    todo.append(nxt)
        if not any(seen[n].type == HOOK_RESULT for n in found if n in seen):
            out.append((node_id, field, f"the {what} reaches no AI Hook Result node, so the "
                        "agent never waits for it: end its flow with AI Hook Result"))
    return out

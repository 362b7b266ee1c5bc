"""Rerunning a run from history: all of it, from one node, or one tool
call (``switchboard runs rerun``; runtime.runs says what each does).
``plan_rerun`` reads the run and returns a Rerun ready to go; the CLI runs
it like any run, so it is recorded, signalled and ended the same way."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .rundiff import RunFacts, facts

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class RunsError(Exception):
    """Bad input: an unknown or ambiguous run id, a node with nothing to
    replay, an argument that is not JSON. The CLI exits 2 with its text."""


def resolve(history: Any, ref: str) -> str:
    """The id of the run ``ref`` names: a whole id, a unique start of one,
    or ``last`` (the newest run)."""
    ref = ref.strip()
    if ref in ("last", "latest"):
        newest = history.runs(limit=1)
        if not newest:
            raise RunsError(f"there are no runs in history yet ({history.path})")
        return newest[0].id
    found = history.find(ref)
    if ref in found:
        return ref
    if not found:
        raise RunsError(f"no run '{ref}' in history ({history.path}); `switchboard runs list` "
                        "shows the runs")
    if len(found) > 1:
        more = f" and {len(found) - 8} more" if len(found) > 8 else ""
        raise RunsError(f"run id '{ref}' is ambiguous: {len(found)} runs start with it "
                        f"({', '.join(found[:8])}{more}); give more of it")
    return found[0]


@dataclass
class Rerun:
    """A rerun ready to go: the flow to run and how to start it. The CLI
    applies ``param_sets`` (``NODE.PARAM=VALUE``) as ``switchboard run``
    does, validates, builds the engine, calls ``prepare(engine)`` and runs
    it; ``report()`` then says what happened."""

    run_id: str
    flow: Any  # runtime.flow.Flow
    file: str
    from_node: str = ""
    call: dict[str, Any] | None = None
    messages: list[dict] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    args: Any = None
    base: dict[str, Any] = field(default_factory=dict)
    param_sets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine: Any = None
    outcome: Any = None  # the repeated call's ToolOutcome
    #: The history the run came from when it is not this machine's (a
    #: worker's shared one): the rerun is recorded here, apart from it.
    source: str = ""

    def prepare(self, engine: Any) -> None:
        self.engine = engine
        engine.rerun_of = self.run_id
        if self.call is not None:
            engine.rerun_call = self.call["caller_id"]
            engine.entry = self._repeat_call
        elif self.from_node:
            engine.from_node = self.from_node
            engine.entry = self._inject
            if self.variables:
                from .expressions import FLOW_VARIABLES
                from .message import deep_copy

                # Made before any node asks, so Set Variable and templates
                # find the values the original run ended with.
                engine.resource(FLOW_VARIABLES, lambda: deep_copy(self.variables))

    async def _inject(self, engine: Any) -> None:
        from .message import Message, deep_copy

        for msg in self.messages:
            engine.inject(self.from_node, Message(deep_copy(msg)))

    async def _repeat_call(self, engine: Any) -> None:
        from .tools import ToolBridge

        assert self.call is not None
        bridge = ToolBridge(engine, self.call["agent"])
        self.outcome = await bridge.call(self.base, "rerun", self.call["tool"], self.args,
                                         parent=self.call.get("parent", ""))

    def report(self, code: int, recorded: bool = True) -> tuple[int, list[str], str]:
        """(exit code, lines for stderr, a JSON line for stdout or "");
        ``recorded``: the rerun went to history (not --no-history)."""
        new = self.engine.run_id if self.engine is not None else "?"
        what = (f" from '{self.from_node}' ({len(self.messages)} message"
                f"{'s' if len(self.messages) != 1 else ''})" if self.from_node
                else f", call {self.call['caller_id']} ({self.call['tool']})" if self.call
                else "")
        if not recorded:
            hint = "not recorded in history (--no-history)"
        elif self.source:
            hint = (f"it is in this machine's history, the run it repeats in {self.source} "
                    f"(`switchboard runs show {self.run_id} --history {self.source}`)")
        else:
            hint = f"compare them with `switchboard runs diff {self.run_id} {new}`"
        lines = [f"run {new}: rerun of {self.run_id}{what}; {hint}"]
        if self.call is None:
            return code, lines, ""
        o = self.outcome
        if o is None:
            return (code or EXIT_FAILED), lines + ["the tool call did not run"], ""
        line = {"call": o.caller_id, "tool": o.tool, "status": o.status}
        if o.status == "success":
            line["data"] = o.data
        else:
            line["error"] = o.error
            lines.append(f"the tool call was {o.status}: {o.error}")
        text = json.dumps(line, ensure_ascii=False, default=str)
        if o.status == "refused":
            return EXIT_BAD_INPUT, lines, text
        if o.status != "success":
            return max(code, EXIT_FAILED), lines, text
        return code, lines, text


def plan_rerun(history: Any, ref: str, *, from_node: str | None = None,
               sets: list[str] | tuple[str, ...] = (), call: str | None = None,
               args_json: str | None = None, registry: Any = None, flow: Any = None) -> Rerun:
    """The rerun of run ``ref`` (see the module's docstring); RunsError for
    bad input, naming what and where. ``flow``: run this flow (the
    designer's, with the edits made since) instead of the one the run ran;
    the recorded messages, variables and tool requests are the run's all
    the same."""
    from .message import set_path

    if call and from_node:
        raise RunsError("--from and --call do not go together: a tool call is rerun alone")
    if args_json is not None and not call:
        raise RunsError("--args goes with --call (the tool call whose arguments it edits)")
    run_id = resolve(history, ref)
    edits, param_sets = _split_sets(sets)
    if edits and not from_node:
        raise RunsError("--set msg.PATH=VALUE edits the messages of a rerun --from NODE; "
                        "give --from")
    info = history.run(run_id)
    f = facts(history.events(run_id))
    plan = Rerun(run_id=run_id, file=info.path, param_sets=param_sets,
                 flow=flow if flow is not None else _flow_for(history, run_id, info, f, registry))
    if flow is None:
        plan.notes += _flow_notes(info, history.flow_of(run_id), registry)
    if from_node:
        plan.from_node = _pick_node(plan.flow, from_node, f, run_id, info.path)
        recorded = f.replay.inputs.get(plan.from_node, []) if f.replay is not None else []
        if not recorded:
            raise RunsError(_nothing_to_replay(plan.from_node, f, run_id))
        received = f.replay.received.get(plan.from_node, len(recorded))
        if received > len(recorded):
            plan.notes.append(f"'{plan.from_node}' got {received} messages in run {run_id}; "
                              f"the {len(recorded)} recorded ones are replayed")
        plan.messages = [json.loads(json.dumps(m)) for m in recorded]
        for path, value in edits:
            for msg in plan.messages:
                try:
                    set_path(msg, path, value)
                except ValueError as exc:
                    raise RunsError(f"--set msg.{path}: {exc}") from None
        plan.variables = dict(f.replay.variables or {})
    elif call:
        plan.call = _pick_call(f, call, run_id)
        plan.args = _call_args(plan.call, args_json)
        request = (f.replay.calls.get(plan.call["caller_id"]) if f.replay is not None else None)
        if request is None:
            plan.notes.append("the message the tool got was not recorded: its params that read "
                              "the message see an empty one")
        else:
            from .message import RESERVED_KEYS

            plan.base = {k: v for k, v in request.items() if k not in RESERVED_KEYS}
    return plan


def _split_sets(items: list[str] | tuple[str, ...]) -> tuple[list[tuple[str, Any]], list[str]]:
    """``msg.PATH=VALUE`` edits of the replayed messages, and the rest
    (``NODE.PARAM=VALUE``, for the CLI's apply_sets)."""
    edits, params = [], []
    for item in items:
        target, sep, raw = item.partition("=")
        if target.startswith("msg.") and sep:
            path = target[4:]
            if not path.strip():
                raise RunsError(f"--set {item!r}: expected msg.PATH=VALUE")
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
            edits.append((path, value))
        else:
            params.append(item)
    return edits, params


def _flow_for(history: Any, run_id: str, info: Any, f: RunFacts, registry: Any) -> Any:
    """The flow as the run ran it; the file, said so, where it was not kept."""
    from .flow import FlowError, load_flow, parse_flow

    stored = history.flow_of(run_id)
    try:
        if stored is not None:
            return parse_flow(stored, file=info.path)
        if not info.path:
            raise RunsError(f"run {run_id} kept no copy of its flow and had no file; it cannot be "
                            "rerun")
        return load_flow(info.path, registry, validate=False)
    except FlowError as exc:
        raise RunsError(f"the flow of run {run_id} does not load: "
                        + "; ".join(str(p) for p in exc.problems[:3])) from None
    except OSError as exc:
        raise RunsError(f"run {run_id} kept no copy of its flow, and its file {info.path} "
                        f"cannot be read ({exc.strerror or exc})") from None


def _flow_notes(info: Any, stored: dict | None, registry: Any) -> list[str]:
    """Whether the file changed since the run (the rerun runs the stored
    flow either way)."""
    from .engine import flow_hash
    from .flow import FlowError, load_flow

    if stored is None:
        return [f"run {info.id} kept no copy of its flow (it was cut off); running the file "
                f"{info.path} as it is now"] if info.path else []
    if not info.path:
        return []
    try:
        now = load_flow(info.path, registry, validate=False).to_json()
    except (FlowError, OSError):
        return [f"{info.path} cannot be loaded now; rerunning the flow as run {info.id} ran it"]
    from .message import to_jsonable
    from .node import redact

    if flow_hash(to_jsonable(now, text=redact)) != flow_hash(stored):
        return [f"{info.path} differs from the flow run {info.id} ran (edited since, or run "
                "with --set); rerunning the flow as it ran then"]
    return []


def _pick_node(flow: Any, wanted: str, f: RunFacts, run_id: str, file: str = "") -> str:
    """A node by id, or by its name where that is unique; inside a subflow
    instance, by its path (``order.check_stock``), as the run named it."""
    from .flow import FlowError
    from .flow.expand import expand_subflows, has_subflows

    if has_subflows(flow):
        try:
            flow = expand_subflows(flow, None, file)
        except FlowError:
            pass  # the rerun's own validation says why
    if flow.node(wanted) is not None:
        node_id = wanted
    else:
        named = [n.id for n in flow.nodes if (n.name or "").lower() == wanted.lower()]
        if len(named) != 1:
            ids = ", ".join(n.id for n in flow.nodes)
            raise RunsError(f"--from {wanted}: no node " + (
                f"'{wanted}' in the flow of run {run_id} (its nodes: {ids})" if not named
                else f"is named '{wanted}' alone ({', '.join(named)}); give its id"))
        node_id = named[0]
    if flow.node(node_id).disabled:
        raise RunsError(f"--from {node_id}: the node is disabled in the flow of run {run_id}")
    return node_id


def _nothing_to_replay(node_id: str, f: RunFacts, run_id: str) -> str:
    if f.replay is None:
        return (f"run {run_id} kept no messages to replay (it was cut off before its end, or "
                "ran before runs kept them); rerun all of it without --from")
    if any(c["node"] == node_id for c in f.calls):
        return (f"'{node_id}' ran only as a tool in run {run_id}: repeat one of its calls with "
                f"--call CALLER_ID (`switchboard runs show {run_id}` lists them)")
    nodes = ", ".join(f"{n} ({len(m)})" for n, m in f.replay.inputs.items()) or "none"
    return (f"'{node_id}' got no message in run {run_id}, so there is nothing to replay "
            f"(nodes with recorded messages: {nodes})")


def _pick_call(f: RunFacts, wanted: str, run_id: str) -> dict[str, Any]:
    found = [c for c in f.calls if c["caller_id"] == wanted] or \
        [c for c in f.calls if c["caller_id"].startswith(wanted)]
    if len(found) != 1:
        known = ", ".join(f"{c['caller_id']} ({c['tool']})" for c in f.calls[:10]) or "none"
        raise RunsError(f"--call {wanted}: " + (
            f"no tool call of run {run_id} has that caller id" if not found
            else f"{len(found)} calls start with it; give more of it") + f" (its calls: {known})")
    c = found[0]
    if not c["node"]:
        raise RunsError(f"--call {wanted}: {c['tool']} was answered by the agent itself, not by "
                        "a node; there is nothing to repeat")
    return c


def _call_args(c: dict[str, Any], args_json: str | None) -> Any:
    args = c["args"]
    if args_json is None:
        if not isinstance(args, dict):
            raise RunsError(f"--call {c['caller_id']}: its arguments were not recorded whole "
                            "(over the size bound, or not a JSON object); give them with --args")
        return dict(args)
    try:
        edited = json.loads(args_json)
    except ValueError as exc:
        raise RunsError(f"--args: not JSON ({exc})") from None
    if not isinstance(edited, dict):
        raise RunsError(f"--args: expected a JSON object, got {type(edited).__name__}")
    return {**(args if isinstance(args, dict) else {}), **edited}

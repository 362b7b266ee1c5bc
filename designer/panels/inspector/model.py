"""What the inspector knows about one run, built only from runtime events.

The same model is fed live (batches from the RunController) and from a
stored run (History replays its events), so the tabs never care which. It
holds no Qt: the tabs are views over it and ask ``apply`` what changed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from runtime.events import Event, request_messages

MAX_DEBUG = 1000  # as Node-RED's debug sidebar: older entries fall off
MAX_MARKS = 2000  # timeline ticks per kind

# What changed, for the tabs to refresh only what they show.
RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS = (
    "run", "debug", "stats", "tools", "agents", "errors", "logs")


@dataclass
class DebugEntry:
    seq: int  # running number over the run, survives the cap
    t: float  # seconds since the run started
    node: str
    name: str
    value: Any
    msgid: str = ""


@dataclass
class StepRecord:
    """A node inside a subflow that runs as a tool, as one call ran it
    (``tool.step`` events): how often it ran, how long, and how it last
    ended."""

    node: str  # the inner node's path (stock.lookup)
    name: str
    status: str = "running"  # running | done | error | cancelled
    runs: int = 0
    errors: int = 0
    ms: float = 0.0
    text: str = ""  # the last error


@dataclass
class ToolCallRecord:
    caller_id: str
    agent: str
    node: str
    tool: str
    args: Any
    t0: float
    t1: float | None = None
    status: str = "running"  # running | success | error | refused | rejected | cancelled
    data: Any = None
    error: str = ""
    ms: float = 0.0
    # The caller id of the call that runs this call's agent ("" at the top).
    parent: str = ""
    # tool.approval and tool.decision, when the call waited for a person.
    approval: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    # The latest tool.status: phase, and the node's progress (0..1, text).
    phase: str = ""
    progress: float | None = None
    progress_text: str = ""
    #: The arguments as a person left them at a breakpoint (debug.resumed),
    #: when they edited them; None otherwise.
    edited_args: Any = None
    #: A subflow tool's call: each node inside that ran for it, by path,
    #: in the order they first ran (tool.step events).
    steps: dict[str, StepRecord] = field(default_factory=dict)

    @property
    def ran_args(self) -> Any:
        """What the node got: the LLM's arguments, or a person's edit of
        them (at a breakpoint, or approving with changes)."""
        if self.edited_args is not None:
            return self.edited_args
        if self.decision is not None and self.decision.get("decision") == "edited" \
                and self.decision.get("args") is not None:
            return self.decision["args"]
        return self.args

    @property
    def live(self) -> bool:
        """Still at work: no result yet, or a background task (answered at
        once with its tracking id) whose end has not come."""
        if self.phase:
            return self.phase not in ("succeeded", "failed", "cancelled")
        return self.status == "running"


@dataclass
class Turn:
    turn: int
    t0: float
    t1: float | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    ms: float = 0.0
    #: The answer so far, from llm.delta events, while the turn streams in.
    streamed: str = ""
    #: What this request cost, where the model's price is known.
    cost_usd: float | None = None


@dataclass
class Conversation:
    """One job of an agent: from its first LLM request to its answer."""

    agent: str
    provider: str = ""
    model: str = ""
    tools: list[str] = field(default_factory=list)
    parent: str = ""  # the caller id of the tool call that runs it ("" at the top)
    # The messages of the newest request, i.e. everything the LLM has seen.
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    @property
    def usage(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for turn in self.turns:
            for key, n in turn.usage.items():
                if isinstance(n, (int, float)) and not isinstance(n, bool):
                    total[key] = total.get(key, 0) + int(n)
        return total

    @property
    def cost_usd(self) -> float | None:
        known = [t.cost_usd for t in self.turns if t.cost_usd is not None]
        return sum(known) if known else None

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The messages the LLM saw plus its last answer, if that answer came
        after the newest request (the final turn has no request after it)."""
        out = list(self.messages)
        if self.turns and self.turns[-1].t1 is not None:
            last = self.turns[-1]
            msg: dict[str, Any] = {"role": "assistant", "content": last.text}
            if last.tool_calls:
                msg["tool_calls"] = last.tool_calls
            out.append(msg)
        return out


@dataclass
class Span:
    row: str  # node id, or "tool:<caller id>"
    t0: float
    t1: float
    kind: str  # node | llm | tool-success | tool-error | tool-refused | tool-running
    label: str = ""


class RunModel:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.run_id = ""
        self.flow = ""
        self.path = ""
        self.started = 0.0  # epoch seconds of run.started
        self.status = "idle"  # idle | running | ok | error | stopped | timeout
        self.duration_ms = 0.0
        self.error_count = 0
        self.debug: deque[DebugEntry] = deque(maxlen=MAX_DEBUG)
        self.debug_seq = 0
        self.node_stats: dict[str, dict[str, int]] = {}
        self.wire_counts: dict[str, int] = {}
        self.last: dict[str, dict[str, list[Any]]] = {}
        self.last_wire: dict[str, Any] = {}
        self.node_errors: list[Event] = []
        self.logs: deque[Event] = deque(maxlen=MAX_DEBUG)
        self.tool_calls: dict[str, ToolCallRecord] = {}
        self.conversations: list[Conversation] = []
        # (agent, parent caller id) -> conversation in progress
        self._open_conv: dict[tuple[str, str], Conversation] = {}
        # (agent, job) -> its conversation, for llm.request events that say their job
        self._job_conv: dict[tuple[str, int], Conversation] = {}
        self.node_status: dict[str, Event] = {}
        # timeline
        self.node_spans: dict[str, list[list[float]]] = {}
        self.llm_spans: list[Span] = []
        self.marks: deque[tuple[float, str, str]] = deque(maxlen=MAX_MARKS)  # (t, node, kind)
        self.hops: deque[tuple[float, str]] = deque(maxlen=MAX_MARKS * 2)  # (t, target)
        self.first_seen: dict[str, float] = {}  # node id -> first activity, for row order
        self.end_t = 0.0  # latest time seen, seconds since start
        self._prev_in: dict[str, int] = {}
        self._prev_t = 0.0
        self.trace = False
        self._arrived: dict[tuple[str, str], float] = {}  # (node, msgid) -> arrival time
        #: Node id -> how many of the messages that reached it the run kept
        #: for a rerun (its run.replay, published as it ends): "Run from Here".
        self.replay_inputs: dict[str, int] = {}

    # -- feeding ------------------------------------------------------------
    def apply(self, events: list[Event]) -> set[str]:
        changed: set[str] = set()
        for event in events:
            handler = getattr(self, "_on_" + event.type.replace(".", "_"), None)
            if handler is not None:
                what = handler(event)
                if what:
                    changed.add(what)
        return changed

    def _t(self, event: Event) -> float:
        t = max(0.0, event.ts - self.started) if self.started else 0.0
        self.end_t = max(self.end_t, t)
        return t

    def _on_run_started(self, e: Any) -> str:
        self.reset()
        self.run_id, self.flow, self.path = e.run_id, e.flow, e.path
        self.started = e.ts
        self.status = "running"
        self.trace = e.trace
        return RUN

    def _on_run_finished(self, e: Any) -> str:
        self.status = e.status
        self.duration_ms = e.duration_ms
        self.error_count = e.errors
        self.end_t = max(self.end_t, e.duration_ms / 1000)
        for call in self.tool_calls.values():
            for step in call.steps.values():
                if step.status == "running":
                    step.status = "cancelled"
            if call.status == "running":
                call.status = "cancelled"
            if call.live:
                call.phase = "cancelled"
                call.t1 = self.end_t
        for spans in self.node_spans.values():
            for span in spans:
                span[1] = min(span[1], self.end_t)
        return RUN

    def _on_run_replay(self, e: Any) -> str:
        self.replay_inputs = {node: len(msgs) for node, msgs in e.inputs.items() if msgs}
        return RUN

    def _on_debug(self, e: Any) -> str:
        self.debug_seq += 1
        t = self._t(e)
        self.debug.append(DebugEntry(self.debug_seq, t, e.node, e.name, e.value, e.msgid))
        self.marks.append((t, e.node, "debug"))
        self._seen(e.node, t)
        return DEBUG

    def _on_node_error(self, e: Any) -> str:
        t = self._t(e)
        self.node_errors.append(e)
        self.marks.append((t, e.node, "error"))
        self._seen(e.node, t)
        return ERRORS

    def _on_node_status(self, e: Any) -> str:
        self.node_status[e.node] = e
        return STATS

    def _on_log(self, e: Any) -> str:
        self.logs.append(e)
        return LOGS

    def _on_message_sent(self, e: Any) -> str:
        # With tracing, each hop says when a message left one node and
        # reached the next; pairing a node's arrival and departure of one
        # message id gives the time it spent there (a Delay, an HTTP call).
        t = self._t(e)
        self._seen(e.source, t)
        self._seen(e.target, t)
        msg = e.msg if isinstance(e.msg, dict) else {}
        msgid = msg.get("_msgid", "")
        t0 = self._arrived.pop((e.source, msgid), None) if msgid else None
        if t0 is not None:
            self._add_span(e.source, t0, t)
        if msgid:
            if len(self._arrived) > 10_000:  # sinks never send on: forget the oldest
                for key in list(self._arrived)[:5_000]:
                    del self._arrived[key]
            self._arrived[(e.target, msgid)] = t
        self.hops.append((t, e.target))
        if e.wire >= 0 and len(msg) > 1:  # stored runs keep only the id
            self.last_wire[str(e.wire)] = msg
        return STATS

    def _on_stats(self, e: Any) -> str:
        t = e.elapsed_ms / 1000
        self.end_t = max(self.end_t, t)
        for node, counts in e.nodes.items():
            before = self._prev_in.get(node, 0)
            # Without tracing, ticks of the stats are all there is: a node
            # was busy in a tick if messages reached it or it was working.
            if not self.trace and (counts.get("in", 0) > before or counts.get("active", 0) > 0):
                self._extend_span(node, self._prev_t, t)
                self._seen(node, self._prev_t)
            self._prev_in[node] = counts.get("in", 0)
        self._prev_t = t
        self.node_stats = e.nodes
        self.wire_counts = e.wires
        if e.last:
            self.last = e.last
        if e.last_wire:
            self.last_wire.update(e.last_wire)
        return STATS

    def _on_tool_call(self, e: Any) -> str:
        t = self._t(e)
        self.tool_calls[e.caller_id] = ToolCallRecord(
            caller_id=e.caller_id, agent=e.agent, node=e.node, tool=e.tool, args=e.args, t0=t,
            parent=getattr(e, "parent", ""))
        self._seen(e.agent, t)
        if e.node:
            self._seen(e.node, t)
        return TOOLS

    def _on_tool_result(self, e: Any) -> str:
        t = self._t(e)
        call = self.tool_calls.get(e.caller_id)
        if call is None:  # result without a call event: still show it
            call = self.tool_calls[e.caller_id] = ToolCallRecord(
                caller_id=e.caller_id, agent=e.agent, node=e.node, tool=e.tool, args=None,
                t0=max(0.0, t - e.ms / 1000))
        call.status, call.data, call.error, call.ms, call.t1 = e.status, e.data, e.error, e.ms, t
        if not call.node:
            call.node = e.node
        return TOOLS

    def _on_tool_status(self, e: Any) -> str:
        call = self.tool_calls.get(e.caller_id)
        if call is None:
            return ""
        call.phase = e.phase
        if e.phase == "progress":
            call.progress, call.progress_text = e.progress, e.text
        return AGENTS

    def _on_tool_step(self, e: Any) -> str:
        call = self.tool_calls.get(e.caller_id)
        if call is None:
            return ""
        step = call.steps.get(e.node)
        if step is None:
            step = call.steps[e.node] = StepRecord(node=e.node, name=e.name or e.node)
        if e.status == "running":
            step.status = "running"
        else:
            step.runs += 1
            step.ms += e.ms
            step.status = e.status
            if e.status == "error":
                step.errors += 1
                step.text = e.text
        self._seen(e.node, self._t(e))
        return TOOLS

    def _on_tool_approval(self, e: Any) -> str:
        call = self.tool_calls.get(e.caller_id)
        if call is not None:
            call.approval = {"reason": e.reason, "confirm": list(e.confirm),
                             "timeout": e.timeout, "t": self._t(e)}
        return AGENTS

    def _on_tool_decision(self, e: Any) -> str:
        call = self.tool_calls.get(e.caller_id)
        if call is not None:
            call.decision = {"decision": e.decision, "by": e.by, "reason": e.reason,
                             "args": e.args, "waited_ms": e.waited_ms}
        return AGENTS

    def _on_debug_resumed(self, e: Any) -> str:
        call = self.tool_calls.get(e.caller_id) if e.caller_id else None
        if call is None or not e.edited or e.msg is None:
            return ""
        call.edited_args = e.msg
        return TOOLS

    def _on_llm_request(self, e: Any) -> str:
        t = self._t(e)
        # One job per agent and calling tool call: a child agent run by two
        # calls at once holds two conversations.
        key = (e.agent, getattr(e, "parent", ""))
        job = getattr(e, "job", 0)
        if job:  # the event says its job: a new one is a new conversation
            conv = self._job_conv.get((e.agent, job))
            fresh = conv is None
        else:  # an older writer's: a request that is not a continuation
            # (first turn, or a conversation shorter than what we had)
            # starts a new job of the agent
            conv = self._open_conv.get(key)
            fresh = conv is None or e.turn <= (conv.turns[-1].turn if conv.turns else -1) \
                or len(e.messages) < len(conv.messages)
        if fresh:
            conv = Conversation(agent=e.agent, parent=key[1])
            self.conversations.append(conv)
            if job:
                self._job_conv[(e.agent, job)] = conv
        self._open_conv[key] = conv
        conv.provider, conv.model, conv.tools = e.provider, e.model, list(e.tools)
        # The event carries what is new since the job's previous request.
        request_messages(conv.messages, e)
        conv.turns.append(Turn(turn=e.turn, t0=t))
        self.llm_spans.append(Span(e.agent, t, t, "llm", f"turn {e.turn}"))
        self._seen(e.agent, t)
        return AGENTS

    def _on_llm_delta(self, e: Any) -> str:
        conv = self._open_conv.get((e.agent, getattr(e, "parent", "")))
        turn = next((x for x in reversed(conv.turns) if x.turn == e.turn and x.t1 is None),
                    None) if conv is not None else None
        if turn is None:
            return ""
        # The stream starts again (a retry): drop what came, then append.
        turn.streamed = ("" if getattr(e, "restart", False) else turn.streamed) + e.text
        return AGENTS

    def _on_llm_response(self, e: Any) -> str:
        t = self._t(e)
        key = (e.agent, getattr(e, "parent", ""))
        conv = self._open_conv.get(key)
        if conv is None:
            conv = Conversation(agent=e.agent, parent=key[1])
            self.conversations.append(conv)
            self._open_conv[key] = conv
        turn = next((x for x in reversed(conv.turns) if x.turn == e.turn and x.t1 is None), None)
        if turn is None:
            turn = Turn(turn=e.turn, t0=max(0.0, t - e.ms / 1000))
            conv.turns.append(turn)
        turn.t1, turn.text, turn.tool_calls = t, e.text, list(e.tool_calls)
        turn.usage, turn.ms = dict(e.usage), e.ms
        turn.cost_usd = getattr(e, "cost_usd", None)
        for span in reversed(self.llm_spans):
            if span.row == e.agent and span.t1 == span.t0:
                span.t1 = t
                break
        return AGENTS

    # -- timeline helpers ---------------------------------------------------
    def _seen(self, node: str, t: float) -> None:
        if node and node not in self.first_seen:
            self.first_seen[node] = t

    def _add_span(self, node: str, t0: float, t1: float) -> None:
        spans = self.node_spans.setdefault(node, [])
        for span in reversed(spans[-8:]):  # overlapping work of one node: one bar
            if span[0] - 1e-6 <= t0 <= span[1] + 1e-6:
                span[1] = max(span[1], t1)
                return
        spans.append([t0, t1])

    def _extend_span(self, node: str, t0: float, t1: float) -> None:
        spans = self.node_spans.setdefault(node, [])
        if spans and spans[-1][1] >= t0 - 1e-6:
            spans[-1][1] = max(spans[-1][1], t1)
        else:
            spans.append([t0, t1])

    # -- queries ------------------------------------------------------------
    def agents(self) -> list[str]:
        seen: dict[str, None] = {}
        for conv in self.conversations:
            seen.setdefault(conv.agent, None)
        return list(seen)

    def timeline_rows(self) -> list[str]:
        """Nodes in the order they first did something."""
        nodes = set(self.node_spans) | set(self.first_seen)
        return sorted(nodes, key=lambda n: (self.first_seen.get(n, 1e18), n))

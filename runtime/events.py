"""Typed run events and the bus that carries them.

Rare facts are events; per-message facts are counters published as a
periodic ``stats`` event (see engine). With nobody subscribed, publishing is
one attribute test, and callers check ``bus.active`` before building an
event so that not even the model is constructed."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Event:
    """One fact of a run. A plain slotted dataclass, cheap to build on hot
    paths (a tool call makes two); pydantic validates and serialises it at
    the edges: parse_event() when reading, model_dump_json() when writing."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    type: str = ""
    ts: float = field(default_factory=time.time)
    run_id: str = ""

    def model_dump_json(self) -> str:
        return _adapter_of(type(self)).dump_json(self).decode()

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        return _adapter_of(type(self)).dump_python(self, mode=mode)

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Event:
        return dataclasses.replace(self, **(update or {}))


@dataclass(slots=True, kw_only=True)
class RunStarted(Event):
    type: Literal["run.started"] = "run.started"
    flow: str = ""
    path: str = ""
    nodes: int = 0
    trace: bool = False
    # A rerun (``switchboard runs rerun``): the run it repeats, and where it
    # started: the node its recorded inputs went into, or the one tool call
    # (caller id) it repeated. "" for an ordinary run.
    rerun_of: str = ""
    from_node: str = ""
    call: str = ""
    # Queue mode: the worker that ran it (``switchboard-PID@host``, as
    # ``queue status`` names it); "" for a run in this process.
    worker: str = ""


@dataclass(slots=True, kw_only=True)
class RunFinished(Event):
    """The last event of every run, however it ended.

    ``reason``: completed (everything settled), failed (an uncaught node
    error, or a bound such as the message-storm cap ended the run), timeout
    (the run's time limit ended it), interrupted (stopped by a person: Stop,
    SIGINT, SIGTERM). ``status`` is the older short form the designer and
    run history show (ok, error, timeout, stopped), one per reason.
    ``in_flight`` names the nodes that still had work when the run ended
    (messages being handled or waiting), so a timeout says what was cut off."""

    type: Literal["run.finished"] = "run.finished"
    status: Literal["ok", "error", "stopped", "timeout"] = "ok"
    reason: Literal["completed", "failed", "timeout", "interrupted"] = "completed"
    message: str = ""
    in_flight: dict[str, int] = field(default_factory=dict)
    duration_ms: float = 0.0
    errors: int = 0
    # Tokens of every LLM request of the run ({"input_tokens", "output_tokens",
    # "cached_tokens"}), their cost in USD where the model's price is known
    # (None: unknown), and what tool results reported as their own cost.
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    tool_cost_usd: float = 0.0
    # Tool calls that failed (error) or were refused: a run can complete
    # while an agent's tools failed under it, and must not look all well.
    failed_tool_calls: int = 0
    # LLM requests to an offline provider (scripted): they cost nothing.
    offline_requests: int = 0


@dataclass(slots=True, kw_only=True)
class RunReplay(Event):
    """What a rerun of this run needs, published once just before
    ``run.finished``: the flow as it ran (``flow``, and ``flow_hash`` of its
    text; history keeps one copy per distinct flow), per node the messages
    that reached it (``inputs``: a sample, newest last, at most
    engine.REPLAY_INPUTS each, cut like every recorded message) and how many
    did (``received``), the tool requests by caller id (``calls``), the
    flow variables at the end (``variables``) and the milliseconds each node
    that awaits spent on its messages (``busy_ms``; inline nodes are not
    timed: that would cost the hot path)."""

    type: Literal["run.replay"] = "run.replay"
    flow: dict[str, Any] = field(default_factory=dict)
    flow_hash: str = ""
    inputs: dict[str, list[Any]] = field(default_factory=dict)
    received: dict[str, int] = field(default_factory=dict)
    calls: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    busy_ms: dict[str, float] = field(default_factory=dict)
    dropped: int = 0  # recorded messages left out for the size bound


@dataclass(slots=True, kw_only=True)
class NodeStatus(Event):
    type: Literal["node.status"] = "node.status"
    node: str
    text: str = ""
    color: Literal["grey", "blue", "green", "yellow", "red", ""] = ""
    # waiting: for a person (a tool call's approval, an Ask Human answer).
    state: Literal["idle", "running", "waiting", "done", "error"] = "idle"


@dataclass(slots=True, kw_only=True)
class Debug(Event):
    type: Literal["debug"] = "debug"
    node: str
    name: str = ""
    value: Any = None
    msgid: str = ""


@dataclass(slots=True, kw_only=True)
class NodeError(Event):
    type: Literal["node.error"] = "node.error"
    node: str
    name: str = ""
    message: str
    msgid: str = ""
    caught: bool = False


@dataclass(slots=True, kw_only=True)
class ToolCall(Event):
    type: Literal["tool.call"] = "tool.call"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    args: Any = None  # exactly as the LLM sent them (parsed if it parsed, else the raw text)
    # The caller id of the tool call that runs this agent (an agent used as
    # another's tool); "" for a top-level agent. Nests the timeline.
    parent: str = ""


@dataclass(slots=True, kw_only=True)
class ToolResult(Event):
    type: Literal["tool.result"] = "tool.result"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    # refused: the arguments did not pass the schema, the node never ran;
    # rejected: a person (or the approval policy) said no.
    status: Literal["success", "error", "refused", "rejected"]
    data: Any = None
    error: str = ""
    ms: float = 0.0
    parent: str = ""
    cost_usd: float | None = None  # what the tool reported it cost (its `cost` output)
    tracking_id: str = ""  # a background call's: its result arrives later


@dataclass(slots=True, kw_only=True)
class ToolStatus(Event):
    """A tool call's phase, as it goes: queued, waiting_approval, running,
    progress (``progress`` 0..1 and a short ``text`` from the node),
    succeeded, failed, cancelled. ``tracking_id``: a background call's id."""

    type: Literal["tool.status"] = "tool.status"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    phase: Literal["queued", "waiting_approval", "running", "progress", "succeeded", "failed",
                   "cancelled"]
    progress: float | None = None
    text: str = ""
    tracking_id: str = ""
    parent: str = ""


@dataclass(slots=True, kw_only=True)
class ToolStep(Event):
    """A node inside a subflow that runs as an agent's tool ran for one
    call (``caller_id``, docs/subflows.md): ``running`` as a node that
    awaits starts, ``done`` or ``error`` (``text``: what failed) as it
    ends, ``ms`` its time. ``node`` is the inner node's path
    (``stock.lookup``). The inspector nests them under the call. At most
    MAX_STEP_EVENTS of one call (runtime.engine.subflow_tool)."""

    type: Literal["tool.step"] = "tool.step"
    agent: str = ""
    tool: str = ""
    caller_id: str
    node: str
    name: str = ""
    status: Literal["running", "done", "error"] = "done"
    text: str = ""
    ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class ToolApproval(Event):
    """A tool call waits for a person's decision."""

    type: Literal["tool.approval"] = "tool.approval"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    args: Any = None
    reason: str = ""  # which rule asked
    confirm: list[str] = field(default_factory=list)  # the arguments a person may edit
    timeout: float = 0.0
    parent: str = ""


@dataclass(slots=True, kw_only=True)
class ToolDecision(Event):
    """What was decided on a call that waited: approved, edited (then
    ``args`` are what the node got), rejected or timeout; by whom."""

    type: Literal["tool.decision"] = "tool.decision"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    decision: Literal["approved", "edited", "rejected", "timeout"]
    by: str = ""
    reason: str = ""
    args: Any = None
    waited_ms: float = 0.0
    parent: str = ""


@dataclass(slots=True, kw_only=True)
class LlmRequest(Event):
    """An LLM request of an agent's job (one message's work, turn 1 on).

    ``messages`` holds what is new since the same job's previous request:
    the conversation as the LLM saw it (the system message first) from
    index ``since`` on, each message masked once. The job's first request,
    and any request after the conversation changed other than by growing,
    carries it all (``since`` 0). ``message_count`` is the whole length;
    ``job`` tells one job of the agent from another running at the same
    time (0: written before jobs were told apart). ``request_messages``
    rebuilds the whole list from a job's requests in order."""

    type: Literal["llm.request"] = "llm.request"
    agent: str
    parent: str = ""
    provider: str = ""
    model: str = ""
    turn: int = 0
    message_count: int = 0
    tools: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    since: int = 0
    job: int = 0


def request_messages(known: list[dict[str, Any]], event: Any) -> list[dict[str, Any]]:
    """The whole conversation an ``llm.request`` stands for, given ``known``:
    what the same job's earlier requests rebuilt (changed in place and
    returned, so a job of N turns costs what its messages do, not N times
    the conversation). Messages a reader never got (a lost event, a stored
    event cut for its size, a subscriber that came in mid-run) stand as
    placeholders with the role ``unrecorded``, so that later requests
    still line up. An event without ``since`` (an older writer) carries
    the whole list."""
    since = getattr(event, "since", 0) or 0
    if since <= 0:
        known[:] = event.messages
        return known
    missing = since - len(known)
    if missing > 0:
        known.extend({"role": "unrecorded",
                      "content": "(not recorded: the event that carried it was lost)"}
                     for _ in range(missing))
    else:
        del known[since:]
    known.extend(event.messages)
    return known


@dataclass(slots=True, kw_only=True)
class LlmDelta(Event):
    """Part of an answer as it streams in: the text that arrived since the
    last delta of this turn (coalesced: a few per second per agent).
    ``restart``: the stream broke and is played again from its start (a
    retry); a viewer drops what it showed of this turn, then appends."""

    type: Literal["llm.delta"] = "llm.delta"
    agent: str
    parent: str = ""
    turn: int = 0
    text: str = ""
    restart: bool = False


@dataclass(slots=True, kw_only=True)
class LlmResponse(Event):
    type: Literal["llm.response"] = "llm.response"
    agent: str
    parent: str = ""
    cost_usd: float | None = None  # this request's, where the model's price is known
    turn: int = 0
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class HookFired(Event):
    """An agent's lifecycle hook (runtime.agent.hooks) sent its message.
    ``hook``: on_start, on_turn, on_tool or on_end; ``phase``: "before" a
    tool call (a blocking on_tool) or "after" it; ``targets``: the flows it
    reached. ``outcome``: sent (not blocking: the agent went on at once), or
    what the blocking hook decided (continue, replaced, vetoed, stopped) or
    timeout (no AI Hook Result within the agent's hook_timeout_seconds);
    ``ms``: how long the agent waited."""

    type: Literal["hook.fired"] = "hook.fired"
    agent: str
    parent: str = ""
    hook: str
    phase: str = ""
    blocking: bool = False
    targets: int = 0
    turn: int = 0
    tool: str = ""
    outcome: Literal["sent", "continue", "replaced", "vetoed", "stopped", "timeout"] = "sent"
    reason: str = ""
    ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class DebugPaused(Event):
    """A breakpoint holds a message, or a tool call before its node runs
    (runtime.debugger). ``hold`` names it until ``debug.resumed``; it waits
    at ``node``'s input ``port``, or on ``wire`` (>= 0); a tool call has its
    ``caller_id``, ``agent`` and ``tool``. ``reason``: a breakpoint (its
    ``condition``, if any; ``note`` when that could not be evaluated), a
    step from the node before, or pause all. ``msg``: the message, or the
    call's arguments, bounded and with secrets masked."""

    type: Literal["debug.paused"] = "debug.paused"
    hold: int
    node: str
    port: str = "in"
    wire: int = -1
    msgid: str = ""
    caller_id: str = ""
    agent: str = ""
    tool: str = ""
    reason: Literal["breakpoint", "step", "paused"] = "breakpoint"
    condition: str = ""
    note: str = ""
    msg: Any = None


@dataclass(slots=True, kw_only=True)
class DebugResumed(Event):
    """A held message went on: ``continue``, ``edited`` (went on as the
    person changed it; ``msg`` is that, bounded and masked), ``step`` (went
    on, to stop at the next node; ``edited`` says whether it was changed),
    ``skip`` (dropped; a tool call is answered as rejected) or ``stopped``
    (the run ended while it waited)."""

    type: Literal["debug.resumed"] = "debug.resumed"
    hold: int
    node: str
    wire: int = -1
    msgid: str = ""
    caller_id: str = ""
    action: Literal["continue", "edited", "step", "skip", "stopped"]
    edited: bool = False
    msg: Any = None
    waited_ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class Stats(Event):
    type: Literal["stats"] = "stats"
    # node id -> {"in": n, "out": n, "errors": n, "active": n}
    nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    # wire index (in the flow's wire list) -> messages carried
    wires: dict[str, int] = field(default_factory=dict)
    # node id -> {"in": [msg, ...], "out": [msg, ...]} newest last
    last: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    # wire index -> its last message
    last_wire: dict[str, Any] = field(default_factory=dict)
    elapsed_ms: float = 0.0


@dataclass(slots=True, kw_only=True)
class MessageSent(Event):
    type: Literal["message.sent"] = "message.sent"
    source: str
    port: str
    target: str
    wire: int = -1
    msg: Any = None


@dataclass(slots=True, kw_only=True)
class Log(Event):
    type: Literal["log"] = "log"
    node: str = ""
    level: Literal["debug", "info", "warning", "error"] = "info"
    text: str = ""


AnyEvent = Annotated[
    RunStarted | RunFinished | RunReplay | NodeStatus | Debug | NodeError | ToolCall | ToolResult
    | ToolStatus | ToolStep | ToolApproval | ToolDecision | LlmRequest | LlmDelta | LlmResponse
    | Stats | MessageSent | Log | HookFired | DebugPaused | DebugResumed,
    Field(discriminator="type"),
]
@functools.cache
def _any_event() -> TypeAdapter[Any]:
    # Built on first use (reading events back), not at import: it is most of
    # this module's import time, and the designer starts without it.
    return TypeAdapter(AnyEvent)


@functools.cache
def _adapter_of(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


def parse_event(data: str | bytes | dict) -> Event:
    """One JSON line (or dict) back into its typed event. Strict: an
    unknown field or event type is an error (for events this version wrote;
    what another version may have written goes through read_event)."""
    if isinstance(data, dict):
        return _any_event().validate_python(data)
    return _any_event().validate_json(data)


#: Unknown (type, field) pairs already logged, so that a newer writer's
#: stream logs each once, not once per event. Bounded: past the cap, the
#: rest are dropped silently.
_UNKNOWN_SEEN: set[tuple[str, str]] = set()
_UNKNOWN_SEEN_CAP = 256


def read_event(data: str | bytes | dict) -> Event | None:
    """An event that another process wrote, maybe a newer Switchboard (a
    worker's stream, the shared history, a run file): fields this version
    does not know are left out, and an event type it does not know gives
    None, each logged once. Anything else wrong (a bad value of a known
    field, not JSON) is still a ValueError."""
    if not isinstance(data, dict):
        try:
            return _any_event().validate_json(data)
        except ValidationError as exc:
            if not _forward(exc):
                raise
        data = json.loads(data)
        if not isinstance(data, dict):
            raise ValueError(f"an event must be a JSON object, got {type(data).__name__}")
    try:
        return _any_event().validate_python(data)
    except ValidationError as exc:
        if not _forward(exc):
            raise
        kind = str(data.get("type", ""))
        if any(e["type"] == "union_tag_invalid" for e in exc.errors()):
            _note_unknown(kind, "")
            return None
        extra = {str(e["loc"][1]) for e in exc.errors() if len(e["loc"]) >= 2}
        for name in sorted(extra):
            _note_unknown(kind, name)
        return _any_event().validate_python({k: v for k, v in data.items() if k not in extra})


#: What a newer writer causes: an unknown field of a known event (pydantic
#: names it one way for dataclasses, another for models) or an unknown type.
_FORWARD_ERRORS = frozenset({"extra_forbidden", "unexpected_keyword_argument",
                             "union_tag_invalid"})


def _forward(exc: Any) -> bool:
    """Whether every error is what a newer writer causes: an unknown field
    of a known event or an unknown type."""
    return all(e["type"] in _FORWARD_ERRORS for e in exc.errors())


def _note_unknown(kind: str, name: str) -> None:
    key = (kind[:100], name[:100])
    if key in _UNKNOWN_SEEN or len(_UNKNOWN_SEEN) >= _UNKNOWN_SEEN_CAP:
        return
    _UNKNOWN_SEEN.add(key)
    where = f"{key[0]!r} event's field {key[1]!r}" if name else f"event type {key[0]!r}"
    log.info("reading events written by another version: the %s is not known to this "
             "version and is left out", where)


Subscriber = Callable[[Event], None]


class EventBus:
    """Synchronous fan-out of events to any number of subscribers.

    A subscriber that raises is logged (once, with its traceback; later
    failures are counted) and skipped: the other subscribers still get the
    event, and the run goes on. An inspector bug must never stop a run."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._fanout: tuple[Subscriber, ...] = ()
        self.active = False
        self.run_id = ""
        self.failures: dict[Subscriber, int] = {}

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)
        self._fanout = tuple(self._subscribers)
        self.active = True

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)
            self._fanout = tuple(self._subscribers)
            self.active = bool(self._subscribers)

        return unsubscribe

    def publish(self, event: Event) -> None:
        if not self.active:
            return
        if not event.run_id:
            event.run_id = self.run_id
        # A tuple kept up to date by (un)subscribe: a subscriber that
        # unsubscribes while an event goes round changes the next event only.
        for fn in self._fanout:
            try:
                fn(event)
            except Exception:
                self._failed(fn, event)

    def _failed(self, fn: Subscriber, event: Event) -> None:
        n = self.failures.get(fn, 0) + 1
        self.failures[fn] = n
        if n == 1:
            log.exception("event subscriber %r failed on %s (later failures of it are only "
                          "counted)", fn, event.type)


class JsonlWriter:
    """Writes every event as one JSON object per line.

    An event that cannot be serialised (nested deeper than pydantic allows,
    say) is written with its fields replaced by the reason, never dropped.
    Lines reach the file at every ``stats`` tick and at ``run.finished``, so
    a killed run leaves what it did up to the last fraction of a second; the
    lock lets a watchdog thread add the final line while the run is stuck."""

    FLUSH_ON = frozenset({"stats", "run.finished", "run.started", "node.error"})

    def __init__(self, path: str | Path) -> None:
        import threading

        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        try:
            line = event.model_dump_json()
        except Exception as exc:  # noqa: BLE001 - any serialisation failure
            line = _unserialisable(event, exc)
        with self.lock:
            if self._fh.closed:
                return
            self._fh.write(line)
            self._fh.write("\n")
            if event.type in self.FLUSH_ON:
                self._fh.flush()

    def write_last(self, event: Event, wait: float = 0.5) -> None:
        """From another thread, when the run is stuck: write ``event`` and
        flush, waiting at most ``wait`` s for a write in progress."""
        got = self.lock.acquire(timeout=wait)
        try:
            if not self._fh.closed:
                self._fh.write(event.model_dump_json() + "\n")
                self._fh.flush()
        finally:
            if got:
                self.lock.release()

    def flush(self) -> None:
        with self.lock:
            if not self._fh.closed:
                self._fh.flush()

    def close(self) -> None:
        with self.lock:
            self._fh.close()


def _unserialisable(event: Event, exc: Exception) -> str:
    """The event as a line that parses back: free-form fields (a tool call's
    args, a debug value) say why they are missing, typed containers are
    emptied."""
    note = f"<not serialisable: {type(exc).__name__}: {str(exc)[:200]}>"
    update: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, (dict, list, tuple)):
            update[f.name] = note if f.type in ("Any", Any) else type(value)()
    try:
        return event.model_copy(update=update).model_dump_json()
    except Exception:  # noqa: BLE001 - the last resort must not fail
        return json.dumps({"type": "log", "ts": event.ts, "run_id": event.run_id,
                           "level": "error", "text": f"a {event.type} event was lost: {note}"})


def read_jsonl(path: str | Path) -> list[Event]:
    with open(path, encoding="utf-8") as fh:
        return [e for line in fh if line.strip() and (e := read_event(line)) is not None]

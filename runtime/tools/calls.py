"""One tool call's state, from the LLM's request to its outcome: the call
on its way (its node's first step, and the rest if it did not finish in
it), the call waiting for a person or held at a breakpoint, its live
status (``tool.status`` events and progress) and what it came to
(``ToolOutcome``, the text the LLM gets back). ``runtime.tools.bridge``
makes and drives them.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import types
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring
from typing import Any

from ..arguments import masked, short
from ..events import ToolStatus
from ..message import to_jsonable
from ..node import redact
from ..node.blocking import runs_here
from .schema import ToolDef

#: json.dumps(x, ensure_ascii=False, default=str), with the encoder made
#: once: json.dumps makes a new one per call when given options, which was
#: half of a fast tool call's result text.
_RESULT_JSON = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _c_result_json(value: Any) -> str:
    """_RESULT_JSON's text, from the C encoder it makes per call but
    without the Python around it (half of a small result's cost)."""
    return "".join(c_make_encoder({}, str, encode_basestring, None, ": ", ", ", False, False,
                                  True)(value, 0))


def result_json(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False, default=str), the same text:
    a flat object of strings, numbers, booleans and nulls (most tool
    results) in one loop; anything else through the C encoder."""
    if type(value) is dict:
        parts = []
        for k, v in value.items():
            if type(k) is not str:
                break
            tv = type(v)
            if tv is str:
                text = encode_basestring(v)
            elif tv is int:
                text = int.__repr__(v)
            elif tv is float and v - v == 0:  # finite (NaN and infinities: the encoder's words)
                text = float.__repr__(v)
            elif v is None:
                text = "null"
            elif tv is bool:
                text = "true" if v else "false"
            else:
                break
            parts.append(f"{encode_basestring(k)}: {text}")
        else:
            return "{" + ", ".join(parts) + "}"
    return _encode(value)


def _pick_encoder() -> Callable[[Any], str]:
    """The C encoder called directly where it is there and gives the same
    text as json.dumps (checked once, here), else json's own way."""
    if c_make_encoder is None:
        return _RESULT_JSON
    probe = {"a": [1, 1.5, None, True, "é\n", {"b": float("nan")}], 2: float("-inf"),
             "c": object}
    try:
        same = _c_result_json(probe) == _RESULT_JSON(probe)
    except Exception:  # noqa: BLE001 - another Python's encoder: use json's way
        same = False
    return _c_result_json if same else _RESULT_JSON


_encode = _pick_encoder()

#: Least seconds between two progress events of one call (the last one
#: before a call ends is dropped if it came too soon: the end says more).
PROGRESS_INTERVAL = 0.25


@dataclass(slots=True)
class ToolOutcome:
    """What one tool call came to: ``success`` (data), ``error`` (the node
    failed or timed out) or ``refused`` (the node never ran)."""

    call_id: str  # the LLM's id for the call, echoed back to it
    caller_id: str  # ours: unique per call in this process
    tool: str
    node: str
    args: Any
    status: str
    data: Any = None
    error: str = ""
    ms: float = 0.0
    #: The arguments broke a bound and ``args`` holds a short preview of them.
    bounded: bool = False
    #: A background call's id (its "started" answer and its final result).
    tracking_id: str = ""
    #: The call was cancelled (the run stopped, task_cancel): status "error".
    cancelled: bool = False
    _content: str | None = field(default=None, repr=False, compare=False)

    def content(self) -> str:
        """The text the LLM gets back; a secret a node put in its outputs is
        masked (errors already are). Made once: the conversation and the
        cost meter both read it."""
        if self._content is None:
            self._content = self._text()
        return self._content

    def _text(self) -> str:
        if self.status == "success":
            data = self.data
            if data is None:
                return "null"
            try:
                text = result_json(data)
            except (TypeError, ValueError):
                text = json.dumps(to_jsonable(self.data), ensure_ascii=False)
            return redact(text)
        prefix = {"refused": "refused: ", "rejected": "rejected: "}.get(self.status, "")
        return json.dumps({"error": prefix + self.error}, ensure_ascii=False)

    def summary(self) -> dict[str, Any]:
        """One entry of the agent's ``agent.tool_calls`` output."""
        # args are bounded here (parse_arguments saw to it).
        out: dict[str, Any] = {"tool": self.tool, "args": masked(self.args), "status": self.status}
        if self.status == "success":
            out["data"] = to_jsonable(self.data)
        else:
            out["error"] = self.error
        out["ms"] = round(self.ms, 3)
        return out


_caller_prefix = uuid.uuid4().hex[:8]
_caller_seq = 0


def new_caller_id() -> str:
    global _caller_seq
    _caller_seq += 1
    return f"{_caller_prefix}-{_caller_seq:x}"


@types.coroutine
def _resume(coro: Any, pending: Any) -> Any:
    """Go on awaiting ``coro`` after its first step (taken by hand) yielded
    ``pending``: hand that future to the task that awaits us, then delegate.
    A cancellation (the tool timeout, the run stopping) thrown at the first
    wait goes into ``coro`` as ``await`` would have sent it."""
    while True:
        try:
            yield pending
        except BaseException as exc:  # noqa: BLE001 - CancelledError and friends go to coro
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        return (yield from coro)


class _Deadlines:
    """The timeouts of one bridge's calls that went on past their first
    step: when each must end (loop time), and one timer for them all, set
    for the earliest. A call past its deadline has its task cancelled, as
    ``asyncio.timeout`` would, and ``leave`` tells whether that
    cancellation was the timeout's (and takes it back) or someone else's.

    One ``asyncio.timeout`` per call made a TimerHandle, pushed it on the
    loop's heap (Python comparisons), cancelled it and left it there until
    the loop swept its cancelled handles: a fifth of the host's CPU per
    call with 16 calls in flight to a plugin. Most calls end long before
    their timeout; here a call costs a dict entry, and the timer is set
    again only when it fires or a call must end sooner than any before.
    """

    __slots__ = ("loop", "due", "timer", "timer_at", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: dict[_Running, float] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf

    def usable(self) -> bool:
        """Its loop is the one running the caller."""
        return runs_here(self.loop)

    def enter(self, r: _Running, timeout: float) -> None:
        """Time ``r``, a call awaited by the current task, from now."""
        loop = self.loop
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a tool call with a timeout must be awaited in a task")
        r.task, r.cancelling, r.expired = task, task.cancelling(), False
        at = loop.time() + timeout
        self.due[r] = at
        if at < self.timer_at:
            self._arm(at)

    def leave(self, r: _Running) -> bool:
        """The call ``r`` is over: True if its timeout cancelled it (the
        task is uncancelled, and nothing else asked to cancel it: then a
        CancelledError it raised means the timeout), False otherwise."""
        if not r.expired:
            self.due.pop(r, None)
            return False
        r.expired = False
        return r.task.uncancel() <= r.cancelling

    def _arm(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = at
        # A weak reference: a timer left set after the last call does not
        # keep the bridge (and its engine) alive until it fires.
        self.timer = self.loop.call_at(at, _expire_due, weakref.ref(self))

    def expire(self) -> None:
        """Cancel the task of each call past its deadline; set the timer
        for the next one."""
        self.timer, self.timer_at = None, math.inf
        now = self.loop.time() + 0.001
        earliest = math.inf
        for r, at in list(self.due.items()):
            if at > now:
                earliest = min(earliest, at)
                continue
            del self.due[r]
            r.expired = True
            r.task.cancel()
        if earliest < math.inf:
            self._arm(earliest)


def _expire_due(ref: weakref.ref[_Deadlines]) -> None:
    deadlines = ref()
    if deadlines is not None:
        deadlines.expire()


class _Running:
    """A tool call on its way: its node's first step, and the rest if it did
    not finish in it. Its live status (CallStatus) is made when something
    needs it (progress, a wait that someone listening to the run's events
    can see, a background start): most calls end in their first step, or
    wait with no one listening, and never do. It is also what ``TOOL_CALL`` holds
    while its node runs (``node`` and ``progress`` are what Node.progress
    reaches for)."""

    __slots__ = ("call_id", "caller_id", "name", "node_id", "args", "t0", "step", "pending",
                 "status", "cancel_reason", "bridge", "parent", "task", "cancelling", "expired")

    def __init__(self, call_id: str, caller_id: str, name: str, node_id: str, args: Any,
                 t0: float, status: CallStatus | None = None, bridge: Any = None,
                 parent: str = "") -> None:
        self.call_id, self.caller_id, self.name = call_id, caller_id, name
        self.node_id, self.args, self.t0 = node_id, args, t0
        self.step: Any = None
        self.pending: Any = None
        self.status = status
        self.cancel_reason = "cancelled: the run stopped"
        self.bridge, self.parent = bridge, parent  # bridge: the ToolBridge (status_of)
        # Its timeout's (_Deadlines): the task awaiting it, that task's
        # cancellations when it was timed, whether the timeout fired.
        self.task: Any = None
        self.cancelling = 0
        self.expired = False

    @property
    def node(self) -> str:
        return self.node_id

    def live(self) -> CallStatus:
        """The call's status, made now if nothing needed it before."""
        if self.status is None:
            assert self.bridge is not None
            self.status = self.bridge.status_of(self.caller_id, self.node_id, self.name,
                                                self.parent)
            if self.step is not None:
                self.status.phase = "running"
        return self.status

    def progress(self, fraction: float | None, text: str = "") -> None:
        self.live().progress(fraction, text)

    def outcome(self, status: str, *, data: Any = None, error: str = "",
                cancelled: bool = False) -> ToolOutcome:
        # Positional: keyword arguments cost this per-call path more.
        return ToolOutcome(self.call_id, self.caller_id, self.name, self.node_id, self.args,
                           status, data, error, (time.perf_counter() - self.t0) * 1000, False,
                           self.status.tracking_id if self.status else "", cancelled)


class CallStatus:
    """One tool call's live status: publishes its ``tool.status`` phases and
    its node's progress (``Node.progress``, at most one event per
    PROGRESS_INTERVAL seconds), and keeps the last of them for task_status.

    A call answered within its first step (most calls: a plain function, a
    cached lookup) publishes no phases: its ``tool.call`` and ``tool.result``
    already say all there is, nothing live could show them, and three more
    events per call tripled the cost of a fast tool with a subscriber. The
    first phase that means something (waiting for approval, still running
    after its first step, progress, a background start) publishes the
    phases so far (``queued``, ``running``) and from then on every one."""

    __slots__ = ("bus", "agent", "node", "tool", "caller_id", "parent", "tracking_id", "phase",
                 "fraction", "text", "_last", "shown")

    #: The clock the throttle reads (a test may replace it).
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, bus: Any, agent: str, node: str, tool: str, caller_id: str,
                 parent: str = "") -> None:
        self.bus, self.agent, self.node, self.tool = bus, agent, node, tool
        self.caller_id, self.parent, self.tracking_id = caller_id, parent, ""
        self.phase = "queued"
        self.fraction: float | None = None
        self.text = ""
        self._last = float("-inf")
        self.shown = False

    def publish(self, phase: str, *, fraction: float | None = None, text: str = "") -> None:
        if phase != "progress":
            self.phase = phase
        if not self.bus.active:
            return
        if not self.shown:
            if phase in _FINAL_PHASES:
                return  # settled before anything was shown: tool.result says it
            self.shown = True
            if phase != "queued":
                self._emit("queued")
            if phase == "progress" and self.phase == "running":
                self._emit("running")
        self._emit(phase, fraction, text)

    def _emit(self, phase: str, fraction: float | None = None, text: str = "") -> None:
        self.bus.publish(ToolStatus(agent=self.agent, node=self.node, tool=self.tool,
                                    caller_id=self.caller_id, phase=phase,  # type: ignore[arg-type]
                                    progress=fraction, text=text,
                                    tracking_id=self.tracking_id, parent=self.parent))

    def progress(self, fraction: float | None, text: str = "") -> None:
        text = redact(short(str(text), 200))
        self.fraction, self.text = fraction, text
        now = self.clock()
        if now - self._last < PROGRESS_INTERVAL:
            return
        self._last = now
        self.publish("progress", fraction=fraction, text=text)


_FINAL_PHASES = frozenset(("succeeded", "failed", "cancelled"))


def _final_phase(o: ToolOutcome) -> str:
    if o.status == "success":
        return "succeeded"
    return "cancelled" if o.cancelled else "failed"


@dataclass(slots=True)
class AgentCalls:
    """One agent's work on one message, as its tool calls see it: the call
    that runs it (an agent used as a tool), its tool calls so far and their
    limit, and the handoff that ends a child agent's task."""

    parent: str = ""
    limit: int | None = None
    engine: Any = None
    count: int = 0
    handoff: dict | None = None


class _Waiting:
    """A valid call whose node must wait for a person's decision."""

    __slots__ = ("call_id", "caller_id", "tool", "args", "t0", "reason", "parent", "status")

    def __init__(self, call_id: str, caller_id: str, tool: ToolDef, args: dict, t0: float,
                 reason: str, parent: str, status: CallStatus) -> None:
        self.call_id, self.caller_id, self.tool = call_id, caller_id, tool
        self.args, self.t0, self.reason, self.parent = args, t0, reason, parent
        self.status = status


class _Paused(_Waiting):
    """A valid call held at a breakpoint (runtime.debugger), before its
    approval and its node: ``held`` is what the person sees and edits."""

    __slots__ = ("held", "debugger")

    def __init__(self, call_id: str, caller_id: str, tool: ToolDef, args: dict, t0: float,
                 parent: str, status: CallStatus, held: Any, debugger: Any) -> None:
        super().__init__(call_id, caller_id, tool, args, t0, "breakpoint", parent, status)
        self.held, self.debugger = held, debugger

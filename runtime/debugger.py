"""Breakpoints: a message stops on its way, a person looks at it, may edit
it, and lets it go on (Continue), go on to the next node and stop there
(Step), or drops it (Skip).

A breakpoint sits on a node's input (``node.port``; every node has the one
input ``in``) or on a wire (its index in the flow's wire list), optionally
with a condition: a template expression over ``msg`` (runtime.expressions,
the same sandbox and bounds as a param's), ``msg.payload > 5``. A message
that reaches one waits there, counted in flight, while the rest of the run
goes on; with *pause all* on, a hit pauses the whole run: every other
message waits at the next node it reaches until the hit is resolved. A tool
node's breakpoint (or one on the wire from an agent's ``tools`` port) stops
tool calls too, after their arguments passed the schema and before the node
runs; the person may then edit any argument, and the edit is checked
against the same schema (runtime.tools).

What it costs when unused: nothing. The engine holds ``debugger = None``
and asks nothing. With a debugger, a node with a breakpoint has its
``gate`` raised, so messages leave the chain loop for ``_deliver_slow``,
where the debugger is asked first; a wire with a breakpoint takes its
source off the chain loop (``next``), so that its messages go through
``_forward``, which asks about wires. Every other node runs as before.
Step and pause all raise every node's gate while they last.

A held message waits in a task of the run (the engine's ``_spawn``), so a
stop, a timeout or the end of the run cancels it like any other work: no
run hangs on a message nobody released. At most ``MAX_HELD`` wait at once;
past that a hit is let through with a warning.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .events import DebugPaused, DebugResumed, NodeStatus
from .expressions import Expression, ExpressionContext, ExpressionError
from .message import Message, deep_copy, get_path, new_msgid, set_path, to_jsonable
from .node import redact
from .spec import ParamSpec, ParamType, Scope

log = logging.getLogger(__name__)

#: Most messages and tool calls held at once; past it a hit passes, warned.
MAX_HELD = 1000
#: Characters kept of a long string, and elements of a long list, in what a
#: person is shown of a held message (and in the events).
VIEW_LIMIT = 4000
VIEW_ITEMS = 100
ACTIONS = ("continue", "step", "skip")
_CONDITION = ParamSpec(name="condition", type=ParamType.JSON, label="Condition",
                       allowed_scopes=[Scope.EXPRESSION], default_scope=Scope.EXPRESSION)
_FALSE_TEXT = {"", "false", "0", "no", "none", "off"}
_ids = itertools.count(1)


class BreakpointError(ValueError):
    """A breakpoint that names no input or wire of the flow, or whose
    condition does not compile; the text says which and why."""


@dataclass(slots=True)
class Breakpoint:
    """Where a message stops: a node's input (``node``, ``port``) or a wire
    (``wire`` >= 0), when ``condition`` (if any) is true of it."""

    node: str = ""
    port: str = "in"
    wire: int = -1
    condition: str = ""
    enabled: bool = True
    expr: Expression | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.condition = (self.condition or "").strip()
        if self.condition:
            text = self.condition if "{{" in self.condition else "{{ " + self.condition + " }}"
            try:
                self.expr = Expression(_CONDITION, text)
            except ExpressionError as exc:
                raise BreakpointError(f"breakpoint at {self.key}: the condition "
                                      f"{self.condition!r}: {_why(exc)}") from None

    @property
    def key(self) -> str:
        return f"wire:{self.wire}" if self.wire >= 0 else f"{self.node}.{self.port}"

    def matches(self, msg: Any) -> tuple[bool, str]:
        """Whether ``msg`` stops here, and a note when the condition could
        not be evaluated: then it stops, so that a wrong condition is seen
        rather than silently never true."""
        if self.expr is None:
            return True, ""
        try:
            value = self.expr.render_raw(msg)
        except Exception as exc:  # noqa: BLE001 - ExpressionError or a bound, said to the person
            return True, f"the condition {self.condition!r} could not be evaluated: {_why(exc)}"
        if isinstance(value, str):
            return value.strip().lower() not in _FALSE_TEXT, ""
        return bool(value), ""


def _why(exc: Exception) -> str:
    text = str(exc)
    return text.removeprefix("params.condition: ")


def parse_target(text: str, flow: Any, registry: Any = None, condition: str = "") -> Breakpoint:
    """``NODE``, ``NODE.PORT`` or ``wire:N`` of ``flow`` as a Breakpoint;
    BreakpointError naming what is wrong otherwise."""
    text = (text or "").strip()
    if text.startswith("wire:"):
        raw = text[5:]
        if not raw.isdigit() or int(raw) >= len(flow.wires):
            raise BreakpointError(f"breakpoint {text!r}: the flow has wires 0 to "
                                  f"{len(flow.wires) - 1}")
        return Breakpoint(wire=int(raw), condition=condition)
    node_id, port = text, "in"
    if flow.node(text) is None and "." in text:
        node_id, _, port = text.rpartition(".")
    fnode = flow.node(node_id)
    if fnode is None:
        known = ", ".join(n.id for n in flow.nodes[:20])
        raise BreakpointError(f"breakpoint {text!r}: no node '{node_id}' in the flow "
                              f"(its nodes: {known})")
    if registry is not None:
        spec = registry.spec(fnode.type)
        inputs = [p.name for p in spec.inputs] if spec is not None else ["in"]
        if not inputs:
            raise BreakpointError(f"breakpoint {text!r}: node '{node_id}' ({fnode.type}) has "
                                  "no input; break on the node its messages go to")
        if port not in inputs:
            raise BreakpointError(f"breakpoint {text!r}: node '{node_id}' has no input "
                                  f"'{port}' (its input: {', '.join(inputs)})")
    return Breakpoint(node=node_id, port=port, condition=condition)


@dataclass(eq=False)
class Held:
    """One message (or tool call) waiting at a breakpoint. ``msg`` is the
    live message, or a copy of a tool call's arguments: what goes on is
    what it holds when the person lets it go."""

    node: str
    msg: Any
    reason: str  # breakpoint | step | paused
    future: asyncio.Future
    port: str = "in"
    wire: int = -1
    msgid: str = ""
    note: str = ""
    condition: str = ""
    # A tool call: its agent, tool name and caller id, and the schema check
    # an edit of its arguments must pass (ToolDef.validate).
    agent: str = ""
    tool: str = ""
    caller_id: str = ""
    validate: Callable[[Any], str | None] | None = None
    edited: bool = False
    since: float = field(default_factory=time.monotonic)
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def is_tool(self) -> bool:
        return bool(self.caller_id)

    @property
    def where(self) -> str:
        """Where it waits, in words, for a prompt or a list."""
        if self.is_tool:
            return f"tool call {self.tool} (agent {self.agent} -> node {self.node})"
        if self.wire >= 0:
            return f"wire {self.wire} into {self.node}"
        return f"{self.node}.{self.port}"

    def view(self) -> Any:
        """What a person (and the events) are shown: bounded, secrets masked."""
        return to_jsonable(self.msg, limit=VIEW_LIMIT, text=redact, items=VIEW_ITEMS)

    def set(self, path: str, value: Any) -> None:
        """Set one dotted path of the held message (or arguments)."""
        set_path(self.msg, path, deep_copy(value))
        self.edited = True

    def get(self, path: str) -> Any:
        return get_path(self.msg, path)

    def replace(self, edited: Any) -> None:
        """The person's edit of the whole view (a JSON object): keys whose
        value they left as shown keep their own value (a long text cut for
        the view, a masked secret, an object with no JSON form); keys they
        changed or added take the new value; keys they removed go."""
        if not isinstance(edited, dict):
            raise BreakpointError("the edited message must be a JSON object "
                                  f"({{...}}), not {type(edited).__name__}")
        shown = self.view()
        if not isinstance(shown, dict):
            shown = {}
        for key in [k for k in self.msg if k in shown and k not in edited]:
            del self.msg[key]
            self.edited = True
        for key, value in edited.items():
            if key == "…" or (key in shown and key in self.msg and shown[key] == value):
                continue
            self.msg[key] = deep_copy(value)
            self.edited = True


class Debugger:
    """The breakpoints of a run and the messages they hold. Made before a
    run (``attach(engine)``) or with it; breakpoints may be added and
    removed while it runs. Everything happens on the run's event loop."""

    def __init__(self, breakpoints: list[Breakpoint] | None = None, *,
                 max_held: int = MAX_HELD) -> None:
        self.breakpoints: dict[str, Breakpoint] = {}
        self.pause_all = False
        #: False after Continue All: nothing stops any more (until arm()).
        self.armed = True
        self.held: dict[int, Held] = {}
        self.max_held = max_held
        #: Called (no arguments) whenever a message is held or let go.
        self.on_change: list[Callable[[], None]] = []
        #: Node ids with an enabled input breakpoint; wire indices with one.
        self.nodes: frozenset[str] = frozenset()
        self.wires: frozenset[int] = frozenset()
        self.engine: Any = None
        self._tool_wires: dict[tuple[str, str], list[int]] = {}  # (agent, node) -> tools wires
        self._stepping: set[str] = set()  # msgids that stop at the next node they reach
        self._paused = False  # pause all: a hit is being held, every node stops messages
        self._gated: set[str] = set()
        self._unlinked: dict[str, Any] = {}  # node id -> the chain-loop wire taken off it
        self._passing: Any = None  # the message let go at a node: it passes that node once
        self._warned = False
        for bp in breakpoints or []:
            self.breakpoints[bp.key] = bp

    # -- setting up -------------------------------------------------------------
    def attach(self, engine: Any) -> Debugger:
        """Be ``engine``'s debugger (before or during its run)."""
        self.engine = engine
        engine.debugger = self
        self._tool_wires = {}
        for index, wire in enumerate(engine.flow.wires):
            (src, port), (dst, _) = wire.source, wire.target
            rt = engine.nodes.get(src)
            if rt is not None and any(p.name == port and p.kind == "tools"
                                      for p in rt.spec.outputs):
                self._tool_wires.setdefault((src, dst), []).append(index)
        if any(bp.expr is not None for bp in self.breakpoints.values()):
            context = ExpressionContext.for_run(engine.flow, engine.registry, engine.resource)
            for bp in self.breakpoints.values():
                if bp.expr is not None:
                    bp.expr.context = context
        self._sync()
        return self

    def add(self, bp: Breakpoint) -> Breakpoint:
        """Add (or replace) a breakpoint; it also arms a debugger that
        Continue All disarmed, as setting one in an IDE does."""
        if bp.expr is not None and self.engine is not None:
            bp.expr.context = ExpressionContext.for_run(self.engine.flow, self.engine.registry,
                                                        self.engine.resource)
        self.breakpoints[bp.key] = bp
        self.armed = True
        self._sync()
        return bp

    def remove(self, key: str) -> bool:
        found = self.breakpoints.pop(key, None) is not None
        self._sync()
        return found

    def arm(self) -> None:
        self.armed = True
        self._sync()

    def set_pause_all(self, on: bool) -> None:
        self.pause_all = on
        if not on and self._paused:
            self._unpause()
        self._sync()

    # -- what the engine asks -------------------------------------------------
    def stop_at(self, engine: Any, rt: Any, msg: Any) -> bool:
        """At ``rt``'s input (from _deliver_slow): True when ``msg`` is held
        here, in a task that lets it go on later."""
        if msg is self._passing:
            self._passing = None
            return False
        if not self.armed:
            return False
        reason, bp, note = self._hit(rt.id, -1, msg)
        if reason is None:
            return False
        held = self._hold(rt.id, msg, reason, bp, note)
        if held is None:
            return False
        if engine._spawn(self._wait_message(engine, rt, held, None), rt) is None:
            self._forget(held)  # the run has ended: nothing waits
            return True
        rt.starting += 1  # shown as unfinished work of the node while it waits
        return True

    def on_wires(self, engine: Any, rt: Any, msg: Any, wires: list[Any]) -> list[Any]:
        """From _forward: the wires ``msg`` goes on along now; a copy of it
        waits on each other one whose breakpoint it hits."""
        if not self.armed:
            return wires
        going = []
        for wire in wires:
            if wire.index not in self.wires:
                going.append(wire)
                continue
            reason, bp, note = self._hit(wire.target.id, wire.index, msg)
            if reason is None:
                going.append(wire)
                continue
            copy = deep_copy(msg) if len(wires) > 1 else msg
            held = self._hold(wire.target.id, copy, reason, bp, note, wire=wire.index)
            if held is None:
                going.append(wire)
                continue
            target = wire.target
            if engine._spawn(self._wait_message(engine, target, held, wire), target) is None:
                self._forget(held)
            else:
                target.starting += 1
        return going

    def tool_hit(self, *, node: str, agent: str, tool: str, caller_id: str, args: Any,
                 base: Any = None, validate: Callable[[Any], str | None] | None = None
                 ) -> Held | None:
        """Before a tool node runs for an agent (runtime.tools): the held
        call, whose arguments the person may edit, or None to go on."""
        if not self.armed or (not self.breakpoints and not self._paused):
            return None
        view = {k: v for k, v in (base or {}).items() if not str(k).startswith("__")}
        view.update(args=args, tool=tool, agent=agent)
        reason, bp, note = None, None, ""
        for wire in self._tool_wires.get((agent, node), ()):
            if wire in self.wires:
                reason, bp, note = self._hit(node, wire, view, tool=True)
                if reason is not None:
                    break
        if reason is None:
            reason, bp, note = self._hit(node, -1, view, tool=True)
        if reason is None:
            return None
        wire = bp.wire if bp is not None else -1
        return self._hold(node, deep_copy(args), reason, bp, note, wire=wire, agent=agent,
                          tool=tool, caller_id=caller_id, validate=validate,
                          msgid=str((base or {}).get("_msgid", "")))

    async def wait(self, held: Held) -> tuple[str, Any]:
        """Until the person lets ``held`` go: (action, the message or
        arguments as they are then). A cancellation (the run stopping)
        lets it go as "stopped" and goes on up."""
        try:
            return await held.future
        except asyncio.CancelledError:
            if not held.future.done():
                held.future.cancel()
            raise
        finally:
            self._forget(held)

    # -- what the person does -------------------------------------------------
    def resume(self, hold_id: int, action: str = "continue", edited: Any = None) -> str | None:
        """Let a held message go: ``continue``, ``step`` (go on, and stop at
        the next node it reaches) or ``skip`` (drop it; a tool call is
        answered as rejected). ``edited``: the person's edit of the view
        (see Held.replace). None when done, else why not (nothing held under
        that id; an edit that is not an object, or arguments that do not fit
        the tool's schema: the call stays held)."""
        held = self.held.get(hold_id)
        if held is None or held.future.done():
            return f"nothing is held as #{hold_id}"
        if action not in ACTIONS:
            return f"unknown action {action!r} (continue, step or skip)"
        before = (deep_copy(held.msg), held.edited) if held.is_tool else None
        if edited is not None and action != "skip":
            try:
                held.replace(edited)
            except BreakpointError as exc:
                return str(exc)
        if held.is_tool and held.validate is not None and held.edited and action != "skip":
            why = held.validate(held.msg)
            if why is not None:
                if edited is not None and before is not None:  # waits as it was
                    held.msg, held.edited = before
                return f"the edited arguments do not fit the tool: {why}"
        self._let_go(held, action)
        return None

    def continue_all(self) -> None:
        """Let every held message go on as it is, and stop nothing more in
        this run (``arm()``, or adding a breakpoint, stops again)."""
        self.armed = False
        self._paused = False
        self._stepping.clear()
        for held in list(self.held.values()):
            self._settle(held, "continue")
        self._sync()

    def release_all(self) -> None:
        """Drop every held message (the run is stopping) and stop gating."""
        for held in list(self.held.values()):
            if not held.future.done():
                held.future.cancel()
        self._paused = False
        self._stepping.clear()
        self._sync()

    def detach(self) -> None:
        """The run ended: put the engine's chain loop back as it was."""
        self.release_all()
        self.armed = False
        self._sync()
        if self.engine is not None and getattr(self.engine, "debugger", None) is self:
            self.engine.debugger = None

    # -- inside ---------------------------------------------------------------
    def _hit(self, node: str, wire: int, msg: Any, *, tool: bool = False
             ) -> tuple[str | None, Breakpoint | None, str]:
        msgid = msg.get("_msgid") if isinstance(msg, dict) and not tool else None
        if msgid and msgid in self._stepping:
            self._stepping.discard(msgid)
            self._sync()
            return "step", None, ""
        bp = self.breakpoints.get(f"wire:{wire}" if wire >= 0 else f"{node}.in")
        if bp is None and wire < 0:
            bp = next((b for b in self.breakpoints.values() if b.node == node and b.wire < 0),
                      None)
        if bp is not None and bp.enabled:
            stops, note = bp.matches(msg)
            if stops:
                return "breakpoint", bp, note
        if self._paused:
            return "paused", None, ""
        return None, None, ""

    def _hold(self, node: str, msg: Any, reason: str, bp: Breakpoint | None, note: str, *,
              wire: int = -1, **call: Any) -> Held | None:
        if len(self.held) >= self.max_held:
            if not self._warned:
                self._warned = True
                log.warning("%d messages are held at breakpoints, the most there may be; "
                            "later ones pass", self.max_held)
            return None
        loop = asyncio.get_running_loop()
        msgid = call.pop("msgid", "") or (msg.get("_msgid", "") if isinstance(msg, dict) else "")
        held = Held(node=node, msg=msg, reason=reason, future=loop.create_future(),
                    port=bp.port if bp is not None and bp.wire < 0 else "in", wire=wire,
                    msgid=str(msgid or ""), note=note,
                    condition=bp.condition if bp is not None else "", **call)
        self.held[held.id] = held
        if reason != "paused" and self.pause_all and not self._paused:
            self._paused = True
            self._sync()
        self._publish(DebugPaused(
            hold=held.id, node=node, port=held.port, wire=wire, msgid=held.msgid,
            caller_id=held.caller_id, agent=held.agent, tool=held.tool, reason=reason,  # type: ignore[arg-type]
            condition=held.condition, note=redact(note), msg=held.view()))
        self._status(node)
        self._changed()
        return held

    async def _wait_message(self, engine: Any, rt: Any, held: Held, wire: Any) -> None:
        """A held message's task: waits, then goes on into ``rt`` (or along
        ``wire``) as the person left it, or is dropped."""
        try:
            action, msg = await self.wait(held)
        finally:
            rt.starting -= 1
        if action == "skip":
            return
        if wire is not None:
            wire.slow += 1
            engine._deliver(wire.target, msg, 0)
            return
        self._passing = msg
        try:
            engine._deliver_slow(rt, msg, 0)
        finally:
            self._passing = None

    def _let_go(self, held: Held, action: str) -> None:
        if action == "step" and not held.is_tool:
            msgid = held.msg.get("_msgid") if isinstance(held.msg, dict) else None
            if not msgid and isinstance(held.msg, dict):
                msgid = held.msg["_msgid"] = new_msgid()
            self._stepping.add(msgid)
            self._settle(held, action)
            self._sync()
            return
        self._settle(held, action)
        # Pause all lasts while a hit is held: when none is left, the
        # messages paused meanwhile go on too.
        if self._paused and not any(h.reason != "paused" for h in self.held.values()):
            self._unpause()

    def _unpause(self) -> None:
        self._paused = False
        for other in list(self.held.values()):
            if other.reason == "paused":
                self._settle(other, "continue")
        self._sync()

    def _settle(self, held: Held, action: str) -> None:
        if held.future.done():
            return
        msg = held.msg
        if not held.is_tool and type(msg) is dict:
            msg = Message(msg)  # what the nodes get is a Message, whatever was injected
        held.future.set_result((action, msg))
        self.held.pop(held.id, None)
        kind = "edited" if held.edited and action == "continue" else action
        self._publish(DebugResumed(
            hold=held.id, node=held.node, wire=held.wire, msgid=held.msgid,
            caller_id=held.caller_id, action=kind, edited=held.edited,  # type: ignore[arg-type]
            msg=held.view() if held.edited else None,
            waited_ms=(time.monotonic() - held.since) * 1000))
        self._status(held.node)
        self._changed()

    def _forget(self, held: Held) -> None:
        """A hold whose wait ended without the person (the run stopped)."""
        if self.held.pop(held.id, None) is None:
            return
        self._publish(DebugResumed(
            hold=held.id, node=held.node, wire=held.wire, msgid=held.msgid,
            caller_id=held.caller_id, action="stopped",
            waited_ms=(time.monotonic() - held.since) * 1000))
        self._status(held.node)
        self._changed()

    def _status(self, node: str) -> None:
        """The node's status line says that messages wait there (a few per
        second at most: holds are made and let go at a person's pace)."""
        n = sum(1 for h in self.held.values() if h.node == node)
        text = "" if not n else "paused at a breakpoint" + (f" ({n})" if n > 1 else "")
        self._publish(NodeStatus(node=node, text=text, color="yellow" if n else "",
                                 state="running" if n else "idle"))

    def _publish(self, event: Any) -> None:
        bus = getattr(self.engine, "bus", None)
        if bus is not None and bus.active:
            bus.publish(event)

    def _changed(self) -> None:
        for fn in list(self.on_change):
            try:
                fn()
            except Exception:  # a viewer's bug must not stop the run
                log.exception("a breakpoint listener failed")

    def _sync(self) -> None:
        """Raise the gate of each node a message must stop at (and lower
        the others'); take the chain-loop wire off each node whose wire has
        a breakpoint."""
        enabled = [bp for bp in self.breakpoints.values() if bp.enabled] if self.armed else []
        self.nodes = frozenset(bp.node for bp in enabled if bp.wire < 0)
        self.wires = frozenset(bp.wire for bp in enabled if bp.wire >= 0)
        engine = self.engine
        if engine is None:
            return
        nodes = engine.nodes
        if self.armed and (self._stepping or self._paused):
            want = set(nodes)
        else:
            want = {n for n in self.nodes if n in nodes}
        for node_id in self._gated - want:
            nodes[node_id].gate -= 1
        for node_id in want - self._gated:
            nodes[node_id].gate += 1
        self._gated = want
        tool_wires = {i for wires in self._tool_wires.values() for i in wires}
        unlink = {engine.flow.wires[i].source[0] for i in self.wires
                  if 0 <= i < len(engine.flow.wires) and i not in tool_wires}
        for node_id in list(self._unlinked):
            if node_id not in unlink:
                nodes[node_id].next = self._unlinked.pop(node_id)
        for node_id in unlink:
            rt = nodes.get(node_id)
            if rt is not None and node_id not in self._unlinked and rt.next is not None:
                self._unlinked[node_id] = rt.next
                rt.next = None

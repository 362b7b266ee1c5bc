"""The engine's side of one node and of one wire (``runtime.engine.core``
builds them): a node's routes, its counters, the messages it recorded, and
the services a node reaches through ``self.runtime`` (send, status,
progress, debug, log, the run's resources).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable
from typing import Any

from ..events import Debug, Log, NodeStatus
from ..flow import FlowNode
from ..message import to_jsonable
from ..node import Node, redact
from ..spec import NodeSpec

LAST_MESSAGES = 5
SNAPSHOT_LIMIT = 4000  # characters kept of a long string in a recorded message
# Elements kept of a long list (keys of a large object) in a recorded message,
# and in a debug value: recording costs what these allow, not what the
# payload weighs (a 1 MB payload made every recorded hop walk 1 MB).
SNAPSHOT_ITEMS = 100
DEBUG_ITEMS = 1000


class WireRuntime:
    __slots__ = ("index", "target", "target_port", "slow", "fast", "last")

    def __init__(self, index: int, target: NodeRuntime, target_port: str) -> None:
        self.index = index
        self.target = target
        self.target_port = target_port
        # Messages carried: ``fast`` by the inline chain loop (which counts
        # nothing else: this one count is the source's out and the target's
        # in), ``slow`` by every other path.
        self.slow = 0
        self.fast = 0
        self.last: Any = None

    @property
    def count(self) -> int:
        return self.slow + self.fast


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class NodeRuntime:
    """The engine's side of one node: its routes, counters and services."""

    __slots__ = (
        "engine", "node", "id", "spec", "fnode", "on_message", "is_async", "sem", "routes",
        "out_routes", "next", "incoming", "n_in", "n_out", "errors", "active", "last_in",
        "last_out", "budget", "deferred", "starting", "gate", "tool_targets", "disabled",
        "inputs", "busy",
    )

    def __init__(self, engine: Any, fnode: FlowNode, spec: NodeSpec) -> None:
        self.engine = engine  # the Engine of the run
        self.fnode = fnode
        self.id = fnode.id
        self.spec = spec
        self.routes: dict[str, list[WireRuntime]] = {}
        self.out_routes: list[WireRuntime] = []
        # The one wire a message takes on from here inside the chain loop,
        # when there is exactly one on `out` to an enabled node and no trace.
        self.next: WireRuntime | None = None
        self.incoming: list[WireRuntime] = []
        # Counted outside the chain loop; count_in/count_out add its wires.
        self.n_in = self.n_out = self.errors = self.active = 0
        self.last_in: deque = deque(maxlen=LAST_MESSAGES)
        self.last_out: deque = deque(maxlen=LAST_MESSAGES)
        # Messages that reached the node, for a rerun from here (a deque of
        # REPLAY_INPUTS while the run records them, else None).
        self.inputs: deque | None = None
        self.busy = 0.0  # seconds spent awaiting on_message (async and tool calls)
        self.budget = 0
        self.deferred = 0
        self.starting = 0  # tasks made for a message that have not run yet
        # Nonzero while a message must not take the chain loop's fast path
        # here: 1 for an async node, +1 while recording budget is left, +1
        # per deferred message. One test per hop instead of three.
        self.gate = 0
        self.tool_targets: list[str] = []  # for agents: node ids wired to `tools`
        self.disabled = fnode.disabled
        self.node: Node = None  # type: ignore[assignment]
        self.on_message: Any = None
        self.is_async = False
        self.sem: asyncio.Semaphore | None = None

    @property
    def count_in(self) -> int:
        return self.n_in + sum(w.fast for w in self.incoming)

    @property
    def count_out(self) -> int:
        return self.n_out + (self.next.fast if self.next is not None else 0)

    def bind(self, node: Node) -> None:
        self.node = node
        self.on_message = node.on_message
        self.is_async = inspect.iscoroutinefunction(type(node).on_message)
        self.gate += self.is_async
        if self.is_async and type(node).concurrency:
            self.sem = asyncio.Semaphore(type(node).concurrency)

    # services used through Node
    def send(self, msg: dict, port: str = "out") -> None:
        self.engine._send_from(self, msg, port)

    def resource(self, key: str, make: Callable[[], Any],
                 close: Callable[[Any], Any] | None = None) -> Any:
        return self.engine.resource(key, make, close)

    def status(self, text: str, color: str = "", state: str = "idle") -> None:
        bus = self.engine.bus
        if bus.active:
            bus.publish(NodeStatus(node=self.id, text=text, color=color or "", state=state))  # type: ignore[arg-type]

    def progress(self, fraction: float | None, text: str = "") -> None:
        """A node's progress: a ``tool.status`` of the tool call it runs for
        (throttled there), else its status line ("40% page 2 of 5")."""
        from ..node import TOOL_CALL

        loop = self.engine._loop
        if loop is not None and not _on_loop(loop):
            # From a worker thread (run_blocking, a blocking tool): over to
            # the loop, with the thread's context (which call it works for).
            import contextvars

            loop.call_soon_threadsafe(self.progress, fraction, text,
                                      context=contextvars.copy_context())
            return
        call = TOOL_CALL.get()
        if call is not None and call.node == self.id:
            call.progress(fraction, text)
            return
        shown = " ".join(x for x in (f"{fraction:.0%}" if fraction is not None else "",
                                     redact(text)) if x)
        self.status(shown, "blue", "running")

    def debug(self, value: Any, msg: dict | None = None) -> None:
        bus = self.engine.bus
        if bus.active:
            bus.publish(Debug(node=self.id, name=self.node.name,
                              value=to_jsonable(value, text=redact, items=DEBUG_ITEMS),
                              msgid=(msg or {}).get("_msgid", "")))

    def log(self, text: str, level: str = "info") -> None:
        bus = self.engine.bus
        if bus.active:
            bus.publish(Log(node=self.id, level=level, text=redact(text)))  # type: ignore[arg-type]

    def record(self, store: deque, msg: dict) -> None:
        self.budget -= 1
        if self.budget == 0:
            self.gate -= 1
        store.append(to_jsonable(msg, limit=SNAPSHOT_LIMIT, text=redact, items=SNAPSHOT_ITEMS))

    def record_in(self, msg: dict) -> None:
        """A message reaching the node while the tick's budget lasts: one
        snapshot serves the inspector's last messages and a later rerun."""
        self.budget -= 1
        if self.budget == 0:
            self.gate -= 1
        snap = to_jsonable(msg, limit=SNAPSHOT_LIMIT, text=redact, items=SNAPSHOT_ITEMS)
        if self.engine._record:
            self.last_in.append(snap)
        if self.inputs is not None:
            self.inputs.append(snap)

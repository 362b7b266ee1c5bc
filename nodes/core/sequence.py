"""Nodes that work on sequences of messages: join them back into one, pace
them, loop over a list."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Any

from runtime.message import (
    Message,
    PathError,
    deep_copy,
    get_path,
    new_msgid,
    parse_path,
    set_path,
)
from runtime.node import CUSTOM, DROP, Node, NodeConfigError, Param, node

JOIN_MODES = ("auto", "count", "key")
DEFAULT_MAX_PENDING = 10_000
MAX_PENDING_LIMIT = 10_000_000
DEFAULT_MAX_QUEUE = 1000
DEFAULT_MAX_ITEMS = 10_000
#: Longest timeout or interval, in seconds (30 days).
MAX_SECONDS = 30 * 86_400.0
STATUS_EVERY = 0.25  # seconds between two status updates of a busy node

_MISSING = object()


def _int_problem(params: dict, name: str, low: int, high: int | None = None) -> list:
    p = params.get(name)
    if p is None or not isinstance(p.value, int) or isinstance(p.value, bool):
        return []
    if p.value < low or (high is not None and p.value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        return [(name, f"{name} must be {bound}")]
    return []


def _number_problem(params: dict, name: str, *, zero: bool) -> list:
    p = params.get(name)
    if p is None or not isinstance(p.value, (int, float)) or isinstance(p.value, bool):
        return []
    if not math.isfinite(p.value) or p.value > MAX_SECONDS:
        return [(name, f"{name} must be a number of seconds up to {int(MAX_SECONDS)} (30 days)")]
    if p.value < 0 or (not zero and p.value == 0):
        return [(name, f"{name} must be {'0 or more' if zero else 'more than 0'}")]
    return []


def _path_problem(params: dict, name: str) -> list:
    p = params.get(name)
    if p is None or not isinstance(p.value, str) or not p.value:
        return []
    try:
        parse_path(p.value)
    except (PathError, ValueError) as exc:
        return [(name, f"{name}: {exc}")]
    return []


# -- join ------------------------------------------------------------------------


class _Group:
    __slots__ = ("key", "values", "last", "expected", "keys", "timer", "held")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.values: dict[int, Any] | list[Any] = []
        self.last: dict | None = None  # the newest message: the base of the joined one
        self.expected: int | None = None  # auto: the parts' count
        self.keys: dict[int, Any] = {}  # auto: each part's key (an object's key after a split)
        self.timer: asyncio.TimerHandle | None = None
        self.held = False  # counted as in flight by the engine while its timer runs

    def __len__(self) -> int:
        return len(self.values)


@node("core.join", name="Join", category="Sequence", icon="join", color="#e2a03f")
class Join(Node):
    """Joins a sequence of messages back into one, with a list (or, after
    splitting an object, an object) of their values. auto: the parts a Split
    (or Loop) made, in their original order; count: every n messages; key:
    by a message property, n per group or until a message with
    ``complete`` set. The joined message says how it ended in ``join``:
    {count, partial, reason}."""

    mode = Param(str, "auto: the parts of one Split or Loop (msg.parts / msg.loop), in index "
                 "order; count: every `count` messages; key: groups by the property at "
                 "`key`, sent when `count` arrived or a message has `complete` set",
                 choices=list(JOIN_MODES), default="auto", allow=CUSTOM)
    path = Param(str, "What to collect of each message; the joined message has the list there",
                 default="payload", allow=CUSTOM)
    count = Param(int, "Messages per group (count and key modes; 0 in key mode: only a "
                  "message with `complete` ends a group)", default=10, allow=CUSTOM)
    key = Param(str, "key mode: the message property whose value names the group",
                default="topic", allow=CUSTOM)
    timeout_seconds = Param(float, "Send a group that is still incomplete this long after its "
                            "first message, flagged partial; 0: wait forever (an incomplete "
                            "group is dropped when the run ends)", default=0.0, allow=CUSTOM)
    max_pending = Param(int, "Most messages held at once, all groups together; a message past "
                        "it fails", default=DEFAULT_MAX_PENDING, allow=CUSTOM)

    @classmethod
    def check(cls, params):
        problems = _int_problem(params, "max_pending", 1, MAX_PENDING_LIMIT)
        problems += _number_problem(params, "timeout_seconds", zero=True)
        problems += _path_problem(params, "path") + _path_problem(params, "key")
        mode = params.get("mode")
        mode = mode.value if mode is not None else "auto"
        count = params.get("count")
        n = count.value if count is not None else 10
        if isinstance(n, int) and not isinstance(n, bool):
            if mode == "count" and n < 1:
                problems.append(("count", "count must be at least 1 in count mode"))
            elif n < 0:
                problems.append(("count", "count must be 0 or more"))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._mode = self.mode.get() or "auto"
        self._path = self.path.get() or "payload"
        self._count = self.count.get()
        self._key = self.key.get() or "topic"
        self._timeout = float(self.timeout_seconds.get() or 0.0)
        self._max_pending = self.max_pending.get()
        self._groups: dict[Any, _Group] = {}
        self._pending = 0
        self._closed = False
        if not isinstance(self._count, int) or self._count < (1 if self._mode == "count" else 0):
            raise NodeConfigError("count must be at least 1 in count mode, 0 or more otherwise")
        if not isinstance(self._max_pending, int) or self._max_pending < 1:
            raise NodeConfigError("max_pending must be at least 1")

    def on_message(self, msg: Message) -> Any:
        mode = self._mode
        complete = bool(msg.get("complete"))
        if mode == "auto":
            index, expected, part_key, gid = _part_of(msg)
            group = self._group(gid, msg, index)
        elif mode == "key":
            gid = get_path(msg, self._key, None)
            if isinstance(gid, (dict, list)):
                raise NodeConfigError(f"key: the value at '{self._key}' is a "
                                      f"{type(gid).__name__}; a group key must be text or a "
                                      "number")
            group = self._group(gid, msg)
            expected = self._count or None
        else:
            group = self._group(None, msg)
            expected = self._count
        value = get_path(msg, self._path, None)
        if mode == "auto":
            if group.expected is None:
                group.expected = expected
            group.values[index] = value  # type: ignore[index]
            group.keys[index] = part_key
        else:
            group.values.append(value)  # type: ignore[union-attr]
        self._pending += 1
        group.last = msg
        if complete:
            self._emit(group, "complete")
        elif expected is not None and len(group) >= (group.expected or expected):
            self._emit(group, "count" if mode != "auto" else "complete")
        elif len(group) == 1 and self._timeout > 0:
            self._arm(group)
        return DROP

    def _group(self, gid: Any, msg: dict, index: int | None = None) -> _Group:
        group = self._groups.get(gid)
        if group is not None and index is not None and index in group.values:  # type: ignore[operator]
            # The same part again: an earlier sequence (its parts carry no
            # id) never completed. It goes on as partial; this one starts anew.
            self._emit(group, "superseded")
            group = None
        if self._pending >= self._max_pending:
            raise NodeConfigError(
                f"join holds {self._pending} messages already, the most max_pending="
                f"{self._max_pending} allows; raise it, or set timeout_seconds so that "
                "incomplete groups are sent")
        if group is None:
            group = self._groups[gid] = _Group(gid)
            if index is not None:
                group.values = {}
        return group

    def _arm(self, group: _Group) -> None:
        rt = self._rt
        if rt is None:
            return
        engine = getattr(rt, "engine", None)
        if engine is not None and hasattr(engine, "hold"):
            engine.hold()  # the run waits for the timeout instead of ending first
            group.held = True
        loop = asyncio.get_running_loop()
        group.timer = loop.call_later(self._timeout, self._expire, group)

    def _expire(self, group: _Group) -> None:
        group.timer = None
        if self._groups.get(group.key) is group and not self._closed:
            self._emit(group, "timeout")
        self._unhold(group)

    def _unhold(self, group: _Group) -> None:
        if group.held:
            group.held = False
            engine = getattr(self._rt, "engine", None)
            if engine is not None:
                engine.release()

    def _emit(self, group: _Group, reason: str) -> None:
        if self._groups.get(group.key) is group:
            del self._groups[group.key]
        self._pending -= len(group)
        if group.timer is not None:
            group.timer.cancel()
            group.timer = None
        out = group.last
        assert out is not None
        if isinstance(group.values, dict):
            order = sorted(group.values)
            keys = [group.keys.get(i) for i in order]
            if keys and all(isinstance(k, str) for k in keys):  # the parts of an object
                joined: Any = {k: group.values[i] for k, i in zip(keys, order, strict=True)}
            else:
                joined = [group.values[i] for i in order]
            out.pop("parts" if "parts" in out else "loop", None)
            partial = len(group) != group.expected
        else:
            joined = group.values
            partial = reason in ("timeout", "superseded")
        set_path(out, self._path, joined)
        out["join"] = {"count": len(group), "partial": partial, "reason": reason}
        if reason in ("timeout", "superseded"):
            self.show_status(f"sent {len(group)} of a group after a {reason}", "yellow", "idle")
        # Release the hold after the send, so that the run cannot end between.
        try:
            self.send(out)
        finally:
            self._unhold(group)

    async def close(self) -> None:
        self._closed = True
        dropped = 0
        for group in list(self._groups.values()):
            if group.timer is not None:
                group.timer.cancel()
            dropped += len(group)
        self._groups.clear()
        self._pending = 0
        if dropped:
            self.log(f"{dropped} message(s) of incomplete groups were not sent when the run "
                     "ended (set timeout_seconds to send incomplete groups)", "warning")


def _part_of(msg: dict) -> tuple[int, int, Any, Any]:
    """(index, count, key, group id) of a message Split or Loop made."""
    parts = msg.get("parts")
    info = parts if isinstance(parts, dict) else msg.get("loop")
    if not isinstance(info, dict):
        raise NodeConfigError("mode auto joins the messages of a Split (msg.parts) or a Loop "
                              "(msg.loop); this message has neither; use mode count or key")
    index, count = info.get("index"), info.get("count")
    if not (isinstance(index, int) and isinstance(count, int) and not isinstance(index, bool)
            and 0 <= index < count):
        raise NodeConfigError(f"mode auto: {'parts' if info is parts else 'loop'} needs an "
                              f"index below its count (got index={index!r}, count={count!r})")
    gid = info.get("id")
    if isinstance(gid, (dict, list)):
        gid = None
    return index, count, info.get("key"), (count, None) if gid is None else gid


# -- rate limit ----------------------------------------------------------------------


class MonotonicClock:
    """The rate limit's clock. Tests give the node one they step by hand."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@node("core.rate_limit", name="Rate Limit", category="Sequence", icon="gauge", color="#8e7cc3")
class RateLimit(Node):
    """Lets at most `count` messages through per `interval_seconds` (in any
    window that long). queue: the others wait their turn, in order, up to
    `max_queue` of them; drop: the others are dropped."""

    count = Param(int, "Messages let through per interval", default=1, allow=CUSTOM)
    interval_seconds = Param(float, "The interval, in seconds", default=1.0, allow=CUSTOM)
    mode = Param(str, "queue: delay the messages over the rate; drop: drop them",
                 choices=["queue", "drop"], default="queue", allow=CUSTOM)
    max_queue = Param(int, "queue mode: most messages waiting; more are dropped",
                      default=DEFAULT_MAX_QUEUE, allow=CUSTOM)

    @classmethod
    def check(cls, params):
        return (_int_problem(params, "count", 1, 1_000_000)
                + _number_problem(params, "interval_seconds", zero=False)
                + _int_problem(params, "max_queue", 0, 10_000_000))

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.clock: Any = MonotonicClock()
        self._n = self.count.get()
        self._interval = float(self.interval_seconds.get())
        self._drop = self.mode.get() == "drop"
        self._max_queue = self.max_queue.get()
        if not isinstance(self._n, int) or self._n < 1:
            raise NodeConfigError("count must be at least 1")
        if not self._interval > 0:
            raise NodeConfigError("interval_seconds must be more than 0")
        # When the last `count` messages were (or will be) let through.
        self._slots: deque[float] = deque(maxlen=self._n)
        self._tail: asyncio.Future | None = None
        self._waiting = 0
        self.dropped = 0
        self._status_at = 0.0

    @property
    def queued(self) -> int:
        """Messages waiting for their turn now."""
        return self._waiting

    def _slot(self, now: float) -> float:
        """When a message arriving now may go, if it takes the next turn."""
        if len(self._slots) < self._n:
            return now
        return max(now, self._slots[0] + self._interval)

    async def on_message(self, msg: Message) -> Any:
        now = self.clock.now()
        slot = self._slot(now)
        if slot > now and (self._drop or self._waiting >= self._max_queue):
            self.dropped += 1
            why = "over the rate" if self._drop else f"queue full, max_queue={self._max_queue}"
            self._status(f"dropped {self.dropped} ({why})", "yellow", force=self.dropped == 1)
            return DROP
        self._slots.append(slot)
        if slot <= now and self._tail is None:
            return None
        # Wait for the message before (order kept even when two slots fall at
        # the same time), then for this one's slot.
        before, mine = self._tail, asyncio.get_running_loop().create_future()
        self._tail = mine
        self._waiting += 1
        self._status(f"{self._waiting} queued", "blue")
        try:
            if before is not None and not before.done():
                await before
            delay = slot - self.clock.now()
            if delay > 0:
                await self.clock.sleep(delay)
        finally:
            self._waiting -= 1
            mine.set_result(None)
            if self._tail is mine:
                self._tail = None
        return None

    def _status(self, text: str, color: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._status_at >= STATUS_EVERY:
            self._status_at = now
            self.show_status(text, color, "idle")

    async def close(self) -> None:
        if self.dropped:
            self.log(f"dropped {self.dropped} message(s) over the rate", "warning")


# -- loop ---------------------------------------------------------------------------------


@node("core.loop", name="Loop", category="Sequence", icon="loop", color="#e2a03f",
      outputs=("item", "done"))
class Loop(Node):
    """Sends each element of a list on `item` (the message with the element
    at `path` and ``loop`` = {index, count, id}), then the whole message on
    `done`. A Join in auto mode after the item branch gathers the results."""

    path = Param(str, "Where the list is", default="payload", allow=CUSTOM)
    max_items = Param(int, "Most elements a list may have; a longer one fails the message",
                      default=DEFAULT_MAX_ITEMS, allow=CUSTOM)

    @classmethod
    def check(cls, params):
        return _int_problem(params, "max_items", 1, 10_000_000) + _path_problem(params, "path")

    def on_message(self, msg: Message) -> Any:
        path = self.path.get() or "payload"
        items = get_path(msg, path, _MISSING)
        if items is _MISSING:
            raise NodeConfigError(f"path: the message has nothing at '{path}'")
        if not isinstance(items, list):
            raise NodeConfigError(f"path: '{path}' holds {type(items).__name__}, not a list")
        limit = self.max_items.get()
        if len(items) > limit:
            raise NodeConfigError(f"path: '{path}' holds {len(items)} elements, more than "
                                  f"max_items={limit}")
        gid = msg.get("_msgid") or new_msgid()
        # The message without its list is copied once per element, not the
        # whole list each time.
        set_path(msg, path, None)
        try:
            template = deep_copy(msg)
        finally:
            set_path(msg, path, items)
        count = len(items)
        for i, item in enumerate(items):
            part = deep_copy(template)
            set_path(part, path, deep_copy(item))
            part["loop"] = {"index": i, "count": count, "id": gid}
            part["_msgid"] = new_msgid()
            self.send(part, "item")
        return "done"

"""A run's events through Redis: one stream per run.

The worker subscribes a ``StreamPublisher`` to the run's EventBus: events
go as JSON (the same ``model_dump_json`` as ``--events`` files) to a queue
that a thread drains into the stream in pipelined XADDs, so a fast flow's
event loop never waits on Redis. The stream is bounded (XADD MAXLEN ~) and
expires with the run's other keys.

Besides the run's own events the stream carries queue entries the worker
writes (``queue.attempt``: attempt N on worker W; ``queue.retry``: the run
failed at start and goes back to the queue; ``queue.final``: nothing more
will come). Readers (``follow``, ``Follower``) turn the first two into
``log`` events, so that whoever shows the run (the CLI, history, the
designer) says so, and stop at ``queue.final``."""

from __future__ import annotations

import json
import logging
import os
import queue as stdqueue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..events import Event, Log, read_event
from . import state

log = logging.getLogger(__name__)

#: Entries a run's stream keeps (the oldest go first); a run that publishes
#: more (a traced flood) loses its oldest events in the stream, not the run.
STREAM_MAXLEN = 20_000
#: Entries one XADD pipeline carries.
BATCH = 500
#: Milliseconds a reader's XREAD blocks before it looks at the run's state.
BLOCK_MS = 1000
#: Milliseconds the Follower's XREAD blocks: short, because a run added
#: meanwhile is read only from the next XREAD on (a webhook waits on it).
FOLLOW_BLOCK_MS = 20

FINAL = "queue.final"
#: Seconds between two checks that the runs a Follower follows still exist.
SWEEP_SECONDS = 60.0


def stream_key(run_id: str) -> str:
    return state.run_key(run_id, "events")


def run_of(key: str) -> str:
    """The run id in a stream key."""
    return key.removeprefix(state.run_key("")).removesuffix(":events").lstrip(":")


class StreamPublisher:
    """Subscribe it to a run's EventBus; ``close()`` sends what is left.

    The publishers of a process share one sending thread (``_Pump``): a
    worker's pool process runs one run after another, and a thread started
    and joined per run cost more CPU than the run's own sends. The stream's
    expiry is set with its first entries (and again each EXPIRE_AGAIN
    seconds of a long run), not with every batch."""

    def __init__(self, r: Any, run_id: str) -> None:
        self.r = r
        self.key = stream_key(run_id)
        self._expired_at = 0.0
        self._pump = _Pump.of_this_process()

    def __call__(self, event: Event) -> None:
        try:
            data = event.model_dump_json()
        except Exception as exc:  # noqa: BLE001 - an unserialisable event: say so
            data = Log(run_id=event.run_id, level="warning",
                       text=f"a {event.type} event was lost: {exc}").model_dump_json()
        self._pump.q.put((self, data))

    def entry(self, kind: str, **fields: Any) -> None:
        """A queue entry (queue.attempt, queue.retry, queue.final)."""
        self._pump.q.put((self, json.dumps({"type": kind, "ts": time.time(), **fields},
                                           ensure_ascii=False, default=str)))

    def close(self, timeout: float = 10.0) -> None:
        """Wait (up to ``timeout``) until what was published so far is sent."""
        sent = threading.Event()
        self._pump.q.put((self, sent))
        sent.wait(timeout)

    def _send(self, batch: list[str]) -> None:
        try:
            pipe = self.r.pipeline(transaction=False)
            for data in batch:
                pipe.xadd(self.key, {"e": data}, maxlen=STREAM_MAXLEN, approximate=True)
            now = time.monotonic()
            due = not self._expired_at or now - self._expired_at >= EXPIRE_AGAIN
            if due:
                pipe.expire(self.key, state.KEEP_TTL)
            pipe.execute()
            if due:
                self._expired_at = now
        except Exception as exc:  # noqa: BLE001 - Redis gone: the run goes on
            log.warning("could not publish %d events of %s: %s", len(batch), self.key, exc)


#: Seconds between two EXPIREs of a run's stream while it runs.
EXPIRE_AGAIN = 3600.0


class PerProcess:
    """One object of a subclass per process, made at first use
    (``of_this_process``); a forked pool process makes its own rather than
    use its parent's, whose thread did not come along."""

    _current: Any = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.pid = os.getpid()

    @classmethod
    def of_this_process(cls) -> Any:
        found = cls._current
        if found is not None and found.pid == os.getpid():
            return found
        with PerProcess._lock:  # none yet, or the parent's (a forked pool process)
            if cls._current is None or cls._current.pid != os.getpid():
                cls._current = cls()
            return cls._current


class _Pump(PerProcess):
    """The thread of a process that sends its publishers' entries, in the
    order they came, in pipelined XADDs of up to BATCH entries per stream;
    a close marker (a threading.Event) is set once everything its
    publisher queued before it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.q: stdqueue.SimpleQueue[tuple[StreamPublisher, str | threading.Event]] = \
            stdqueue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="switchboard-events",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            batch = [self.q.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self.q.get_nowait())
                except stdqueue.Empty:
                    break
            pending: dict[StreamPublisher, list[str]] = {}
            for pub, item in batch:
                if isinstance(item, str):
                    pending.setdefault(pub, []).append(item)
                    continue
                data = pending.pop(pub, None)  # a close marker: its entries go first
                if data:
                    pub._send(data)
                item.set()
            for pub, data in pending.items():
                pub._send(data)


def decode(data: str) -> tuple[Event | None, dict | None]:
    """A stream entry as (event, None) or, for a queue entry, (log event or
    None, the entry). An event type this version does not know (a newer
    worker's) gives (None, None)."""
    obj = json.loads(data)
    kind = obj.get("type", "")
    if not kind.startswith("queue."):
        return read_event(obj), None  # a newer worker's fields and types left out
    text = obj.get("text", "")
    event = Log(run_id=obj.get("run_id", ""), level=obj.get("level", "info"), text=text,
                ts=obj.get("ts", time.time())) if text else None
    return event, obj


def follow(r: Any, run_id: str, *, stop: Callable[[], bool] | None = None,
           start: str = "0") -> Iterator[tuple[Event | None, dict | None]]:
    """The run's stream from ``start`` until its ``queue.final`` entry (or
    until ``stop()``, asked between blocking reads): what ``decode`` gives."""
    key = stream_key(run_id)
    last = start
    while True:
        if stop is not None and stop():
            return
        got = r.xread({key: last}, count=BATCH, block=BLOCK_MS)
        for _stream, entries in got or []:
            for entry_id, fields in entries:
                last = entry_id
                event, queue_entry = decode(fields["e"])
                yield event, queue_entry
                if queue_entry is not None and queue_entry.get("type") == FINAL:
                    return
        if not got and state.info(r, run_id).get("state") in state.FINAL_STATES \
                and not r.exists(key):
            return  # final, and its events expired (or never written)


class Follower:
    """Reads the streams of many runs in one thread (XREAD over all their
    keys) and hands each run's events to ``sink(run_id, event, entry)``;
    ``done(run_id)`` when the run's final entry came. For ``serve``, which
    keeps the runs it queued in its own history."""

    def __init__(self, r: Any, sink: Callable[[str, Event | None, dict | None], None],
                 done: Callable[[str, dict], None] | None = None,
                 on_exit: Callable[[], None] | None = None) -> None:
        self.r = r
        self.on_exit = on_exit
        self.sink = sink
        self.done = done
        self._runs: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="switchboard-follower",
                                        daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def add(self, run_id: str) -> None:
        with self._lock:
            self._runs[run_id] = "0"

    def pending(self) -> int:
        with self._lock:
            return len(self._runs)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            self._read()
        finally:
            if self.on_exit is not None:
                self.on_exit()  # in this thread: what it opened (a history) it closes

    def _read(self) -> None:
        sweep_at = time.monotonic() + SWEEP_SECONDS
        while not self._stop.is_set():
            if time.monotonic() >= sweep_at:
                sweep_at = time.monotonic() + SWEEP_SECONDS
                self._sweep()
            with self._lock:
                streams = {stream_key(i): last for i, last in self._runs.items()}
            if not streams:
                self._stop.wait(FOLLOW_BLOCK_MS / 1000)
                continue
            try:
                got = self.r.xread(streams, count=BATCH, block=FOLLOW_BLOCK_MS)
            except Exception as exc:  # noqa: BLE001 - Redis gone for a moment
                log.warning("reading run events: %s", exc)
                self._stop.wait(1.0)
                continue
            for key, entries in got or []:
                run_id = run_of(key)
                for entry_id, fields in entries:
                    with self._lock:
                        if run_id in self._runs:
                            self._runs[run_id] = entry_id
                    try:
                        event, entry = decode(fields["e"])
                        self.sink(run_id, event, entry)
                    except Exception:  # noqa: BLE001 - one bad entry must not stop the rest
                        log.exception("run %s: could not handle an event", run_id)
                        continue
                    if entry is not None and entry.get("type") == FINAL:
                        self._end(run_id, entry)

    def _end(self, run_id: str, entry: dict) -> None:
        with self._lock:
            self._runs.pop(run_id, None)
        if self.done is not None:
            self.done(run_id, entry)

    def _sweep(self) -> None:
        """Stop following runs whose record is gone (expired, or Redis lost
        its data): their final entry will never come."""
        with self._lock:
            ids = list(self._runs)
        if not ids:
            return
        try:
            pipe = self.r.pipeline(transaction=False)
            for run_id in ids:
                pipe.exists(state.run_key(run_id))
            found = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - next time
            log.warning("checking followed runs: %s", exc)
            return
        for run_id, exists in zip(ids, found, strict=True):
            if not exists:
                self._end(run_id, {"type": FINAL, "run_id": run_id, "status": "lost",
                                   "reason": "failed",
                                   "message": "its record is gone from Redis"})

"""Run history: every run's events in one SQLite file in the user's data dir.

The designer's History tab, and anyone else, reads runs back as the same
typed events the inspector was fed live, so a stored run is shown by
replaying it. No Qt here: the CLI or a server can record runs too.

What is kept, and why:

- Every event except ``stats`` is stored as it came. ``stats`` arrive a few
  times a second and carry the last messages of every node; storing each in
  full would make a long run's history mostly copies of the same messages.
  So every ``stats`` is stored without its messages, except the last one of
  the run, which is stored whole (the Messages tab of a stored run shows it).
- ``message.sent`` (tracing on) is stored without the message, only its
  ``_msgid``: the timeline needs when each hop happened, and each wire's
  last message is in that final ``stats`` anyway.
- A run stops recording past ``MAX_EVENTS`` (a traced flood of hops); the
  run row says how many events were dropped.
- ``run.replay`` (what a rerun needs: the flow as it ran, the messages that
  reached each node) is stored without its flow: the flow's text goes to
  the ``flows`` table once per distinct flow (by hash), so a hundred runs of
  one flow keep one copy; ``replays`` says which run ran which.

Writes are buffered and go to disk in one transaction per ``flush()`` (the
designer flushes a few times a second), so a fast flow costs one commit per
tick, not one per event. WAL mode lets a reader list runs while a run writes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .events import Event, MessageSent, RunFinished, RunReplay, RunStarted, Stats, read_event
from .paths import DATA_DIR_ENV, data_dir, private_file  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

DB_NAME = "history.sqlite3"
MAX_EVENTS = 200_000
#: Most characters of JSON one stored event may take (about 1 MB): a larger
#: one (a debug node printing a 400 MB payload) is stored cut, see _bounded.
MAX_EVENT_CHARS = 1_000_000
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    flow        TEXT NOT NULL DEFAULT '',
    path        TEXT NOT NULL DEFAULT '',
    started     REAL NOT NULL,
    duration_ms REAL,
    status      TEXT NOT NULL DEFAULT 'running',
    errors      INTEGER NOT NULL DEFAULT 0,
    events      INTEGER NOT NULL DEFAULT 0,
    dropped     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    type    TEXT NOT NULL,
    data    TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_started ON runs(started);
CREATE TABLE IF NOT EXISTS flows (
    hash    TEXT PRIMARY KEY,
    content TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS replays (
    run_id    TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    flow_hash TEXT NOT NULL
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class RunInfo:
    """One row of the history list."""

    id: str
    flow: str
    path: str
    started: float  # epoch seconds
    duration_ms: float | None  # None while running or if the app died mid-run
    status: str  # ok | error | stopped | timeout | running | interrupted | queued
    errors: int
    events: int
    dropped: int


class History:
    """The run history database. Cheap to open; one connection per object,
    used from one thread."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else data_dir() / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Runs hold what flows read and said: the file is the user's alone
        # (0600; SQLite gives its -wal and -shm files the same mode). The
        # own history is tightened if an older version left it open; a file
        # named by path (a shared history, docs/queue.md) keeps its mode.
        if path is None:
            for p in (self.path, *(self.path.with_name(self.path.name + x)
                                   for x in ("-wal", "-shm"))):
                if p is self.path or p.exists():
                    private_file(p)
        elif not self.path.exists():
            private_file(self.path)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def mark_interrupted(self) -> int:
        """Call once at startup: a run still marked running was cut off by a
        crash or a kill, and now says so. (Not done on open, because a
        second History opened while a run records would mislabel it.)"""
        cur = self._db.execute("UPDATE runs SET status='interrupted' WHERE status='running'")
        return cur.rowcount

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ------------------------------------------------------------
    def runs(self, limit: int = 500) -> list[RunInfo]:
        """Newest first."""
        rows = self._db.execute(
            "SELECT id, flow, path, started, duration_ms, status, errors, events, dropped "
            "FROM runs ORDER BY started DESC LIMIT ?", (limit,)).fetchall()
        return [RunInfo(*row) for row in rows]

    def run(self, run_id: str) -> RunInfo | None:
        row = self._db.execute(
            "SELECT id, flow, path, started, duration_ms, status, errors, events, dropped "
            "FROM runs WHERE id=?", (run_id,)).fetchone()
        return RunInfo(*row) if row else None

    def find(self, prefix: str) -> list[str]:
        """The ids of the runs whose id starts with ``prefix``, newest first
        (``runs show 3fa`` names a run by as much of its id as is unique)."""
        if not re.fullmatch(r"[0-9A-Za-z_-]{1,64}", prefix):
            return []
        rows = self._db.execute(
            "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY started DESC LIMIT 50",
            (len(prefix), prefix)).fetchall()
        return [r[0] for r in rows]

    def edge_events(self, run_id: str) -> tuple[Event | None, Event | None]:
        """A run's first and last stored event (run.started, and run.finished
        once it ended, which carries its cost): two indexed look-ups, for
        lists that must not read every event of every run."""
        out: list[Event | None] = []
        for order in ("ASC", "DESC"):
            row = self._db.execute(f"SELECT data FROM events WHERE run_id=? ORDER BY seq {order} "
                                   "LIMIT 1", (run_id,)).fetchone()
            try:
                out.append(read_event(row[0]) if row else None)
            except ValueError:
                out.append(None)
        return out[0], out[1]

    def flow_of(self, run_id: str) -> dict | None:
        """The flow as the run ran it (None: not kept, e.g. a run cut off
        before its end)."""
        row = self._db.execute(
            "SELECT f.content FROM replays r JOIN flows f ON f.hash = r.flow_hash "
            "WHERE r.run_id=?", (run_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def events(self, run_id: str) -> list[Event]:
        """The run's events in the order they happened."""
        rows = self._db.execute(
            "SELECT data FROM events WHERE run_id=? ORDER BY seq", (run_id,)).fetchall()
        out = []
        for (data,) in rows:
            try:
                event = read_event(data)  # a newer version's fields and types left out
            except ValueError:
                log.warning("run %s: an event that cannot be read is left out", run_id)
                continue
            if event is not None:
                out.append(event)
        return out

    # -- deleting -----------------------------------------------------------
    def delete(self, run_ids: str | Iterable[str]) -> int:
        ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
        with self._transaction():
            self._db.executemany("DELETE FROM events WHERE run_id=?", [(i,) for i in ids])
            cur = self._db.executemany("DELETE FROM runs WHERE id=?", [(i,) for i in ids])
            # Their replays went with them (ON DELETE CASCADE): drop the flows
            # no run names any more.
            self._db.execute("DELETE FROM flows WHERE hash NOT IN (SELECT flow_hash FROM replays)")
        return cur.rowcount

    def prune(self, keep: int = 200) -> int:
        """Delete all but the newest ``keep`` runs."""
        old = [r[0] for r in self._db.execute(
            "SELECT id FROM runs ORDER BY started DESC LIMIT -1 OFFSET ?", (keep,))]
        return self.delete(old) if old else 0

    # -- writing ------------------------------------------------------------
    def add_queued(self, run_id: str, flow: str, path: str, submitted: float) -> None:
        """A run queued for the workers and not followed here (``switchboard
        submit`` without --wait): listed as queued; its events are kept
        where it runs (docs/queue.md). Its record, if it comes, replaces
        this row."""
        self._db.execute("INSERT OR IGNORE INTO runs (id, flow, path, started, status) "
                         "VALUES (?, ?, ?, ?, 'queued')", (run_id, flow, path, submitted))

    def recorder(self) -> RunRecorder:
        """A bus subscriber that stores one run's events."""
        return RunRecorder(self)

    def _transaction(self) -> _Tx:
        return _Tx(self._db)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")


class RunRecorder:
    """Subscribe it to a run's EventBus; call ``flush()`` now and then and
    ``close()`` when done. ``run.finished`` flushes by itself."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.run_id = ""
        self._pending: list[tuple[str, int, str, str]] = []
        self._held_stats: Stats | None = None
        self._seq = 0
        self._dropped = 0
        self._finished: RunFinished | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._start(event)
        if not self.run_id:
            return  # events before run.started (none today) have no run to go to
        if isinstance(event, Stats):
            self._hold_stats(event)
            return
        if isinstance(event, MessageSent):
            msgid = event.msg.get("_msgid", "") if isinstance(event.msg, dict) else ""
            self._add(event.model_copy(update={"msg": {"_msgid": msgid}}))
            return
        if isinstance(event, RunReplay):
            self._keep_flow(event)
            self._add(event.model_copy(update={"flow": {}}))
            return
        if isinstance(event, RunFinished):
            self._release_stats(full=True)
            self._add(event)
            self._finished = event
            self.flush()
            return
        self._add(event)

    def _start(self, event: RunStarted) -> None:
        self.run_id = event.run_id
        self._seq = 0
        # The recorder runs in the run's own process: a path relative to its
        # working folder is made whole here, so a rerun finds the file (and
        # its {flow_dir}) from anywhere.
        path = str(Path(event.path).absolute()) if event.path else ""
        with self.history._transaction():
            self.history._db.execute(
                "INSERT OR REPLACE INTO runs (id, flow, path, started, status) "
                "VALUES (?, ?, ?, ?, 'running')",
                (event.run_id, event.flow, path, event.ts or time.time()))

    def _keep_flow(self, event: RunReplay) -> None:
        if not event.flow or not event.flow_hash:
            return
        content = json.dumps(event.flow, ensure_ascii=False)
        with self.history._transaction():
            self.history._db.execute("INSERT OR IGNORE INTO flows (hash, content) VALUES (?, ?)",
                                     (event.flow_hash, content))
            self.history._db.execute("INSERT OR REPLACE INTO replays (run_id, flow_hash) "
                                     "VALUES (?, ?)", (self.run_id, event.flow_hash))

    def _hold_stats(self, event: Stats) -> None:
        # Keep the newest stats back: whether it is stored whole depends on
        # whether it turns out to be the run's last.
        self._release_stats(full=False)
        self._held_stats = event

    def _release_stats(self, *, full: bool) -> None:
        held, self._held_stats = self._held_stats, None
        if held is None:
            return
        if not full:
            held = held.model_copy(update={"last": {}, "last_wire": {}})
        self._add(held)

    def _add(self, event: Event) -> None:
        if self._seq >= MAX_EVENTS and event.type != "run.finished":
            self._dropped += 1
            return
        data = event.model_dump_json()
        if len(data) > MAX_EVENT_CHARS:
            data = _bounded(event, len(data))
        self._pending.append((self.run_id, self._seq, event.type, data))
        self._seq += 1

    def flush(self) -> None:
        if not self.run_id:
            return
        rows, self._pending = self._pending, []
        db = self.history._db
        with self.history._transaction():
            if rows:
                db.executemany("INSERT OR REPLACE INTO events (run_id, seq, type, data) "
                               "VALUES (?, ?, ?, ?)", rows)
            fin = self._finished
            if fin is not None:
                db.execute("UPDATE runs SET status=?, duration_ms=?, errors=?, events=?, "
                           "dropped=? WHERE id=?",
                           (fin.status, fin.duration_ms, fin.errors, self._seq, self._dropped,
                            self.run_id))
            else:
                db.execute("UPDATE runs SET events=?, dropped=? WHERE id=?",
                           (self._seq, self._dropped, self.run_id))

    def close_from_thread(self, finished: RunFinished) -> None:
        """Record ``finished`` and everything pending through a connection of
        the calling thread: for a watchdog ending a run whose own thread is
        stuck (sqlite connections belong to the thread that opened them)."""
        if not self.run_id:
            return
        self._release_stats(full=True)
        self._add(finished)
        self._finished = finished
        other = History(self.history.path)
        try:
            self.history = other
            self.flush()
        finally:
            other.close()

    def close(self) -> None:
        """Flush what is left. A run that never finished (the engine could
        not start) is marked interrupted rather than left 'running'."""
        if not self.run_id:
            return
        self._release_stats(full=True)
        self.flush()
        if self._finished is None:
            with self.history._transaction():
                self.history._db.execute(
                    "UPDATE runs SET status='interrupted' WHERE id=? AND status='running'",
                    (self.run_id,))




# -- events too large to keep whole ------------------------------------------

#: (longest string, most items of a list or object) kept, tried in turn
#: until the event fits MAX_EVENT_CHARS.
_CUTS = ((MAX_EVENT_CHARS // 8, 1000), (16_000, 300), (4000, 100), (500, 30), (40, 3))
_CUT_DEPTH = 40


def _bounded(event: Event, size: int) -> str:
    """``event`` (whose JSON is ``size`` characters, more than
    MAX_EVENT_CHARS) as JSON that fits: the same type and fields, with
    each long string cut and ending in a note that says how much is not
    kept and why, and long lists and objects cut to their first items with
    a last item that counts the rest. Tried with looser bounds first; each
    try is checked to read back as its type (a field typed as a list of
    objects gets no counting item). An event that fits no try is kept as
    its scalar fields alone."""
    note = (f" … [{{}} more characters not kept: this {event.type} event was "
            f"{size / 1e6:.1f} MB, run history keeps at most "
            f"{MAX_EVENT_CHARS / 1e6:.0f} MB of one]")
    fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    for limit, items in _CUTS:
        for marks in (True, False):
            shrunk = {k: _cut(v, limit, items, marks, note, _CUT_DEPTH) for k, v in fields.items()}
            data = json.dumps(shrunk, ensure_ascii=False)
            if len(data) <= MAX_EVENT_CHARS and _reads_back(data):
                log.info("run history: a %s event of %.1f MB stored cut to %.1f MB",
                         event.type, size / 1e6, len(data) / 1e6)
                return data
    scalars = {k: _cut(v, 200, 0, False, note, 0) for k, v in fields.items()
               if v is None or isinstance(v, (str, int, float, bool))}
    return json.dumps(scalars, ensure_ascii=False)


def _reads_back(data: str) -> bool:
    try:
        return read_event(data) is not None
    except ValueError:
        return False


def _cut(value: Any, limit: int, items: int, marks: bool, note: str, depth: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + note.format(len(value) - limit)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        if depth <= 0:
            return f"<an object of {len(value)} keys, not kept>" if marks else {}
        out = {str(k)[:limit]: _cut(v, limit, items, marks, note, depth - 1)
               for k, v in itertools.islice(value.items(), items)}
        if marks and len(value) > items:
            out["…"] = f"{len(value) - items} more keys not kept"
        return out
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return f"<a list of {len(value)} items, not kept>" if marks else []
        out_list = [_cut(v, limit, items, marks, note, depth - 1)
                    for v in itertools.islice(value, items)]
        if marks and len(value) > items:
            out_list.append(f"… {len(value) - items} more items not kept")
        return out_list
    return _cut(repr(value), limit, items, marks, note, depth)

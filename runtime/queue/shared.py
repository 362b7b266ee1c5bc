"""The shared history: a run history database that workers record every run
they execute into (``switchboard worker --history PATH``, or
``$SWITCHBOARD_SHARED_HISTORY``), read like any history (``switchboard runs
list --history PATH``, the designer's Workers view).

It is the SQLite file of runtime.history, in WAL mode: several processes on
one machine, or on machines that mount one volume with working POSIX locks,
may write it at once (each write waits its turn, up to the connection's
busy timeout). SQLite over a network filesystem (NFS, SMB/CIFS, sshfs) is
not safe: its locks are unreliable there and WAL needs shared memory that
such mounts do not give, so the file can be corrupted. A worker warns when
the path is on one; docs/queue.md says what to do instead.

On a worker each pool process keeps one connection to the file (opened in
the thread that runs its tasks) and records a run as it goes, through
``RunOutput``, which also sends the run's events to its Redis stream."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from ..events import Event, Log, RunFinished, RunStarted
from . import SHARED_HISTORY_ENV

log = logging.getLogger(__name__)

#: Runs a shared history keeps (the newest): more than a machine's own 200,
#: since every worker's runs go there.
SHARED_KEEP = 2000
#: Runs a pool process records between two prunes of the shared history.
PRUNE_EVERY = 50
#: Filesystems SQLite must not be shared over (their locking is not safe).
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "sshfs", "9p", "afs", "ncpfs",
    "fuse.glusterfs", "glusterfs", "ceph", "fuse.ceph", "lustre", "fuse.rclone", "davfs",
    "fuse.s3fs", "fuse.gcsfuse", "virtiofs", "fuse.dropbox"})

_histories: dict[tuple[int, int, str], Any] = {}
_recorded: dict[tuple[int, int, str], int] = {}


def shared_path(given: str | None = None) -> Path | None:
    """``--history PATH``, else ``$SWITCHBOARD_SHARED_HISTORY``, made
    absolute; None: no shared history."""
    raw = (given or os.environ.get(SHARED_HISTORY_ENV) or "").strip()
    return Path(raw).expanduser().absolute() if raw else None


def prepare(path: Path) -> str | None:
    """Create the database (or check that it opens) before the worker forks
    its pool; raises OSError or sqlite3.Error with the reason. Returns a
    warning when ``path`` is on a network filesystem."""
    from ..history import History

    History(path).close()
    fstype = filesystem_of(path)
    if fstype in NETWORK_FILESYSTEMS:
        return (f"the shared history {path} is on a network filesystem ({fstype}): SQLite is not "
                "safe there and the file may be corrupted; give each machine a history of its "
                "own, or use a volume with working locks (docs/queue.md)")
    return None


def filesystem_of(path: Path) -> str:
    """The type of the filesystem ``path`` is on, from /proc/self/mounts
    (Linux); "" where that cannot be told."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    target = os.path.realpath(path)
    best, fstype = "", ""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def worker_history() -> Any:
    """This worker process's connection to the shared history (one per
    process and thread: a SQLite connection belongs to the thread that made
    it), or None when the worker keeps none or it cannot be opened."""
    path = shared_path()
    if path is None:
        return None
    key = (os.getpid(), threading.get_ident(), str(path))
    history = _histories.get(key)
    if history is None:
        from ..history import History

        try:
            history = _histories[key] = History(path)
        except Exception as exc:  # noqa: BLE001 - a run must not fail for want of its record
            log.warning("shared history %s unavailable: %s", path, exc)
            return None
    return history


class RunOutput:
    """Where one run's events go on a worker: its Redis stream (``pub``, a
    StreamPublisher) and, when the worker keeps one, the shared history.
    run.started is stamped with the worker's name on its way to both; the
    queue's own entries with a text (attempt N, failed at start) are kept
    in the history as log lines, as readers of the stream show them."""

    def __init__(self, pub: Any, worker: str, history: Any = None) -> None:
        self.pub = pub
        self.worker = worker
        self.recorder = history.recorder() if history is not None else None
        self._history = history
        self._thread = threading.get_ident()
        #: Queue entries before the run's run.started (an attempt after a
        #: lost worker says so first): recorded once the run is.
        self._early: list[Event] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            event = event.model_copy(update={"worker": self.worker})
        self.pub(event)
        if self.recorder is None:
            return
        if threading.get_ident() != self._thread:
            if isinstance(event, RunFinished):
                self._finish_elsewhere(event)
            return  # the connection is not this thread's
        if isinstance(event, RunStarted):
            # The file's path on the submitting machine is not known here;
            # its name alone would read as a file beside the worker.
            event = event.model_copy(update={"path": ""})
            self._record(event)
            early, self._early = self._early, []
            for held in early:
                self._record(held)
            return
        self._record(event)

    def entry(self, kind: str, **fields: Any) -> None:
        self.pub.entry(kind, **fields)
        text = fields.get("text")
        if self.recorder is None or not text or threading.get_ident() != self._thread:
            return
        line = Log(run_id=str(fields.get("run_id", "")), level=fields.get("level", "info"),
                   text=str(text))
        if self.recorder.run_id:
            self._record(line)
        elif len(self._early) < 10:
            self._early.append(line)

    def close(self) -> None:
        self.pub.close()
        recorder, self.recorder = self.recorder, None
        if recorder is None or threading.get_ident() != self._thread:
            return
        try:
            recorder.close()
            if recorder.run_id:
                self._prune()
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store run %s in the shared history: %s", recorder.run_id, exc)

    def _record(self, event: Event) -> None:
        try:
            self.recorder(event)  # type: ignore[misc]
            if event.type == "stats":
                self.recorder.flush()  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - a locked or full disk: the run goes on
            log.warning("shared history: stopped recording run %s: %s", event.run_id, exc)
            self.recorder = None

    def _finish_elsewhere(self, event: RunFinished) -> None:
        """The run's end, from the thread that ends a stuck run (its own
        thread is busy): through a connection of that thread."""
        recorder, self.recorder = self.recorder, None
        try:
            recorder.close_from_thread(event)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store the end of run %s in the shared history: %s",
                        event.run_id, exc)

    def _prune(self) -> None:
        key = (os.getpid(), self._thread, str(self._history.path))
        n = _recorded[key] = _recorded.get(key, 0) + 1
        if n % PRUNE_EVERY == 0:
            self._history.prune(SHARED_KEEP)

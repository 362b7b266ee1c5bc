"""Crash recovery: while a flow has unsaved changes, a copy is written every
few seconds to a recovery file under the data dir; saving or closing
cleanly deletes it. A recovery file whose process is gone is what a crash
left behind: the next plain start offers to reopen it, and so does opening
the file it belongs to, however it is opened (command line, File > Open,
recent files). A recovery file older than its flow file (the file was saved
after it, by another window or program) is not offered, and is kept.

Recovery files are written atomically (runtime.paths.write_atomic_bytes), so
a crash during an autosave leaves the previous copy, never half a file, and
readable by the user alone (0600, in the 0700 data dir)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from runtime.flow import Flow, parse_flow
from runtime.paths import data_dir, write_atomic_bytes

RECOVERY_FORMAT = "switchboard.recovery/1"
DEFAULT_INTERVAL_MS = 5000
_serial = count(1)


def recovery_dir() -> Path:
    return data_dir() / "recovery"


def _alive(pid: int, mtime: float) -> bool:
    if pid == os.getpid():
        return True
    if sys.platform == "win32":
        # os.kill(pid, 0) would send Ctrl+C there; trust a fresh file instead.
        return time.time() - mtime < 3 * DEFAULT_INTERVAL_MS / 1000
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


@dataclass
class Recovery:
    file: Path
    flow: Flow
    original: Path | None
    saved_at: float

    @property
    def title(self) -> str:
        name = self.original.name if self.original else self.flow.name
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.saved_at))
        return f"{name} (autosaved {when})"

    @property
    def superseded(self) -> bool:
        """The flow file was written after this copy: offering the copy
        would put older work over newer."""
        if self.original is None:
            return False
        try:
            return self.original.stat().st_mtime > self.saved_at
        except OSError:
            return False  # gone or unreadable: the copy is all there is

    def is_for(self, path: str | Path) -> bool:
        return self.original is not None and _same_file(self.original, Path(path))

    def discard(self) -> None:
        try:
            self.file.unlink()
        except OSError:
            pass


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a.absolute() == b.absolute()


def find_recoverable(directory: Path | None = None, *,
                     path: str | Path | None = None) -> list[Recovery]:
    """Recovery files left by processes that are gone, newest first; with
    ``path``, only those of that flow file. Copies older than their flow file
    are left out (see Recovery.superseded). Unreadable ones are skipped (and
    kept, for a person to look at)."""
    directory = directory or recovery_dir()
    found = []
    for f in sorted(directory.glob("recovery-*.json")):
        try:
            pid = int(f.name.split("-")[1])
            mtime = f.stat().st_mtime
            if _alive(pid, mtime):
                continue
            data = json.loads(f.read_text(encoding="utf-8"))
            if data.get("format") != RECOVERY_FORMAT:
                continue
            flow = parse_flow(data["flow"], str(f))
            original = Path(data["path"]) if data.get("path") else None
            recovery = Recovery(f, flow, original, float(data.get("saved_at", mtime)))
        except Exception:  # a damaged recovery file must not stop the start
            continue
        if recovery.superseded or (path is not None and not recovery.is_for(path)):
            continue
        found.append(recovery)
    return sorted(found, key=lambda r: r.saved_at, reverse=True)


class Autosave(QObject):
    def __init__(self, document, interval_ms: int = DEFAULT_INTERVAL_MS,
                 directory: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent or document)
        self.doc = document
        self.directory = directory or recovery_dir()
        self.path = self.directory / f"recovery-{os.getpid()}-{next(_serial)}.json"
        self._dirty = False
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        document.changed.connect(self._on_changed)
        document.flow_reset.connect(self._on_changed)
        document.undo_stack.cleanChanged.connect(self._on_clean_changed)

    def _on_changed(self) -> None:
        self._dirty = True

    def _on_clean_changed(self, clean: bool) -> None:
        if clean:
            self.discard()

    def tick(self) -> bool:
        """Write the recovery file if there is something new and unsaved."""
        if not self._dirty:
            return False
        if not self.doc.modified:
            self._dirty = False
            self.discard()
            return False
        self.save_now()
        return True

    def save_now(self) -> None:
        data = {
            "format": RECOVERY_FORMAT,
            "pid": os.getpid(),
            "saved_at": time.time(),
            # Absolute: the next start may run from another directory.
            "path": str(Path(self.doc.path).absolute()) if self.doc.path else None,
            "flow": self.doc.flow.to_json(),
        }
        try:
            write_atomic_bytes(self.path, json.dumps(data, indent=1, ensure_ascii=False)
                               .encode("utf-8"), 0o600)
            self._dirty = False
        except OSError:
            pass  # a full disk must not interrupt editing; the next tick retries

    def discard(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass

    def stop(self) -> None:
        self.timer.stop()
        self.discard()

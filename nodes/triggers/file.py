"""``trigger.file``: a message for each file added, modified or deleted in a
folder (watchfiles' ``awatch``, imported when the run starts).

Changes are grouped: a burst of writes to one file (a copy in progress, an
editor's save) becomes one message once the folder has been quiet for
``settle_seconds``. Only files inside the folder are reported: a link inside
it that leads elsewhere is not followed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from runtime.message import Message, new_msgid
from runtime.node import CUSTOM, Node, NodeConfigError, Param, node

EVENTS = ("added", "modified", "deleted")
MIN_SETTLE = 0.01
MAX_SETTLE = 60.0
MAX_GLOB_CHARS = 500
DEFAULT_MAX_CHANGES = 1000
MAX_CHANGES_CEILING = 100_000
#: Longest wait for the watcher's thread to notice the run stopped.
STOP_WAIT = 5.0


@node("trigger.file", name="Watch Folder", category="Triggers", icon="folder-watch",
      color="#d35400", inputs=())
class FileWatch(Node):
    """Sends a message when a file in a folder is added, modified or deleted:
    payload {event, path, name, size}. Changes are reported once the folder
    has been quiet for settle_seconds, so a file still being written is
    reported when it is complete."""

    folder = Param(str, "The folder to watch (a relative one is inside the 'files' folder of "
                   "Switchboard's data folder)", allow=CUSTOM)
    glob = Param(str, "Which files: a pattern such as *.csv or reports/*.xlsx, matched "
                 "against the path inside the folder", default="*", allow=CUSTOM)
    events = Param(str, "Which changes, comma-separated: added, modified, deleted",
                   default="added, modified, deleted", allow=CUSTOM)
    recursive = Param(bool, "Also watch the folders inside it", default=False, allow=CUSTOM)
    existing = Param(bool, "At start, also send an 'existing' message for each matching file "
                     "already in the folder (a backlog to work through), then watch",
                     default=False, allow=CUSTOM)
    settle_seconds = Param(float, "Quiet time before changes are reported (debounce), "
                           f"{MIN_SETTLE:g}-{MAX_SETTLE:g}", default=0.5, allow=CUSTOM,
                           group="advanced")
    max_changes = Param(int, "Most messages sent for one group of changes; more are dropped "
                        "with a warning (a folder emptied of 100,000 files is not 100,000 "
                        "messages)", default=DEFAULT_MAX_CHANGES, allow=CUSTOM, group="advanced")

    @classmethod
    def check(cls, params):
        def value(name: str) -> Any:
            p = params.get(name)
            return p.value if p is not None and getattr(p.scope, "value", p.scope) == "custom" \
                else None

        problems = []
        folder = value("folder")
        if not folder or not str(folder).strip():
            problems.append(("folder", "folder: choose the folder to watch"))
        try:
            _events(value("events"))
        except NodeConfigError as exc:
            problems.append(("events", str(exc)))
        glob = value("glob")
        if isinstance(glob, str):
            try:
                _glob(glob)
            except NodeConfigError as exc:
                problems.append(("glob", str(exc)))
        settle = value("settle_seconds")
        if isinstance(settle, (int, float)) and not MIN_SETTLE <= settle <= MAX_SETTLE:
            problems.append(("settle_seconds", f"settle_seconds must be {MIN_SETTLE:g}-"
                                               f"{MAX_SETTLE:g} (got {settle:g})"))
        limit = value("max_changes")
        if isinstance(limit, int) and not 1 <= limit <= MAX_CHANGES_CEILING:
            problems.append(("max_changes", f"max_changes must be 1-{MAX_CHANGES_CEILING}"))
        return problems

    async def start(self) -> None:
        from nodes.files.paths import base_folder

        raw = str(self.folder.get() or "").strip()
        if not raw:
            raise NodeConfigError("folder: choose the folder to watch")
        folder = base_folder(raw)
        if not folder.is_dir():
            raise NodeConfigError(f"folder: '{raw}' is not a folder" if folder.exists() else
                                  f"folder: '{raw}' does not exist")
        self._folder = Path(os.path.realpath(folder))
        self._events = _events(self.events.get())
        self._glob = _glob(self.glob.get() or "*")
        self._settle = float(self.settle_seconds.get())
        if not MIN_SETTLE <= self._settle <= MAX_SETTLE:
            raise NodeConfigError(f"settle_seconds must be {MIN_SETTLE:g}-{MAX_SETTLE:g}")
        self._limit = int(self.max_changes.get() or DEFAULT_MAX_CHANGES)

    async def generate(self) -> None:
        try:
            import watchfiles  # noqa: F401
        except ImportError:  # pragma: no cover - a dependency of every install
            raise NodeConfigError("Watch Folder needs watchfiles: pip install watchfiles") \
                from None
        # The watcher waits in a worker thread that a cancelled task cannot
        # interrupt; it looks at this event every settle_seconds, so the run
        # can stop it and wait for it, instead of leaving it behind.
        stop = threading.Event()
        watching = asyncio.ensure_future(self._watch(stop))
        try:
            await asyncio.shield(watching)
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(watching, STOP_WAIT)
            raise

    async def _watch(self, stop: threading.Event) -> None:
        from watchfiles import awatch

        settle_ms = max(1, int(self._settle * 1000))
        changes_of = awatch(self._folder, watch_filter=None, recursive=bool(self.recursive.get()),
                            step=settle_ms, debounce=max(1600, settle_ms * 4), stop_event=stop,
                            rust_timeout=0, ignore_permission_denied=True)
        first = asyncio.ensure_future(changes_of.__anext__())
        # awatch sets up its watcher before it first waits (in a thread): once
        # the task has run to that wait, every later change is seen.
        for _ in range(3):
            await asyncio.sleep(0)
        self.show_status(f"watching {self._folder.name or self._folder}", "green", "idle")
        if self.existing.get():
            # After the watcher is set up, so no file slips between the two;
            # one written meanwhile may come twice (existing, then added).
            self._send_existing()
        try:
            batch = await first
            while True:
                self._report(batch)
                batch = await changes_of.__anext__()
        except StopAsyncIteration:
            return
        finally:
            await changes_of.aclose()

    def _send_existing(self) -> None:
        from nodes.files.paths import inside

        pattern = "**/*" if self.recursive.get() else "*"
        found = sorted(p for p in self._folder.glob(pattern)
                       if p.is_file() and inside(os.path.realpath(p), self._folder))
        sent = 0
        for path in found:
            rel = path.relative_to(self._folder).as_posix()
            if not PurePosixPath(rel).match(self._glob):
                continue
            if sent >= self._limit:
                self.log(f"more than max_changes={self._limit} files were already there; "
                         "the rest were not sent", "warning")
                break
            self.send(Message(_msgid=new_msgid(), topic="existing", payload={
                "event": "existing", "path": str(path), "name": path.name, "relative": rel,
                "size": path.stat().st_size}))
            sent += 1

    def _report(self, batch: set[tuple[Any, str]]) -> None:
        seen: dict[str, set[str]] = {}
        for change, path in batch:
            seen.setdefault(path, set()).add(change.name)
        sent = dropped = 0
        for path in sorted(seen):
            event = _event_of(seen[path], os.path.lexists(path))
            if event is None or event not in self._events:
                continue
            real = os.path.realpath(path)
            from nodes.files.paths import inside

            if not inside(path, self._folder) or (event != "deleted"
                                                  and not inside(real, self._folder)):
                continue  # reached through a link that leads out of the folder
            if event != "deleted" and os.path.isdir(real):
                continue  # files only
            rel = os.path.relpath(path, self._folder).replace(os.sep, "/")
            if not PurePosixPath(rel).match(self._glob):
                continue
            if sent >= self._limit:
                dropped += 1
                continue
            size = None
            if event != "deleted":
                with contextlib.suppress(OSError):
                    size = os.path.getsize(real)
            self.send(Message(_msgid=new_msgid(), topic=event, payload={
                "event": event, "path": path, "name": os.path.basename(path),
                "relative": rel, "size": size}))
            sent += 1
        if dropped:
            text = (f"{dropped} more changes in one group were dropped (max_changes="
                    f"{self._limit})")
            self.log(text, "warning")
            self.show_status(text, "yellow", "idle")
        elif sent:
            self.show_status(f"watching {self._folder.name or self._folder}: {sent} "
                             f"change{'s' * (sent != 1)} sent", "green", "idle")


def _event_of(changes: set[str], exists: bool) -> str | None:
    """One event for what happened to a path during one settle period."""
    if exists:
        if "added" in changes and "deleted" in changes:
            return "modified"  # replaced (an editor's save-by-rename)
        return "added" if "added" in changes else "modified"
    if "added" in changes and "deleted" not in changes:
        return None  # came and went (a temporary file): nothing to report
    return "deleted" if "deleted" in changes or "added" in changes else None


def _events(value: Any) -> frozenset[str]:
    if value is None or value == "":
        return frozenset(EVENTS)
    if isinstance(value, list):
        names = [str(v).strip().lower() for v in value]
    elif isinstance(value, str):
        names = [v.strip().lower() for v in value.split(",") if v.strip()]
    else:
        raise NodeConfigError("events: a comma-separated list of added, modified, deleted")
    unknown = [n for n in names if n not in EVENTS]
    if unknown:
        raise NodeConfigError(f"events: '{unknown[0][:40]}' is not one of added, modified, "
                              "deleted")
    if not names:
        raise NodeConfigError("events: name at least one of added, modified, deleted")
    return frozenset(names)


def _glob(value: str) -> str:
    text = value.strip() or "*"
    if len(text) > MAX_GLOB_CHARS:
        raise NodeConfigError(f"glob is {len(text)} characters; the most it may be is "
                              f"{MAX_GLOB_CHARS}")
    if "\0" in text or text.startswith("/") or ".." in PurePosixPath(text).parts:
        raise NodeConfigError(f"glob '{text[:80]}' must be a pattern inside the folder, such "
                              "as *.csv or reports/*.xlsx")
    return text

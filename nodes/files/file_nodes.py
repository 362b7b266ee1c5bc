"""Files: read, write, list, move and delete files inside a base folder.

Every path goes through nodes.files.paths first: a path from the AI is
always kept inside the node's base folder, and is refused before anything
is touched when it is absolute, climbs out with ``..`` or passes a link
that leads outside. The work itself runs in a worker thread
(``run_blocking``), so a slow disk never stalls other messages."""

from __future__ import annotations

import base64
import errno
import fnmatch
import json
import os
import shutil
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime.message import Message
from runtime.node import AI, CUSTOM, MESSAGE, NodeConfigError, Output, Param, Tool, node

from .common import (
    DEFAULT_MAX_BYTES,
    FILES_COLOR,
    WRITE_MODES,
    FileNode,
    allow_absolute_param,
    base_folder_param,
    bound_problems,
    check_encoding,
    create_folders_param,
    decode_problem,
    encoding_param,
    limit,
    mode_param,
    os_problem,
    prepare_folder,
    regular_file,
    too_big,
    writing,
)
from .paths import inside, quote, shown

DEFAULT_MAX_ENTRIES = 1000
#: files.list looks at most this many entries per allowed entry before it
#: gives up (a glob that matches little in a huge tree).
SCAN_FACTOR = 100
MIN_SCAN = 100_000


@node("files.read", name="Read File", category="Files", icon="file-read", color=FILES_COLOR,
      tool=Tool("read_file", "Read a file from the files folder: its text, its JSON value, "
                "or its bytes as base64"))
class ReadFile(FileNode):
    """Reads one file: its text, the JSON value it holds, or its bytes as
    base64 text. A file over max_bytes is refused before it is opened."""

    path = Param(str, "The file to read, relative to the files folder, e.g. 'notes/today.txt'",
                 scope=AI, allow=AI | CUSTOM | MESSAGE)
    format = Param(str, "text: the file's text; json: the JSON value it holds; base64: its "
                   "bytes as base64 text (for binary files)", choices=["text", "json", "base64"],
                   default="text", allow=AI | CUSTOM | MESSAGE)
    encoding = encoding_param()
    max_bytes = Param(int, "Largest file read, in bytes; a bigger one is refused unread",
                      default=DEFAULT_MAX_BYTES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    content = Output("json", "The file's text, JSON value or base64 text")
    file = Output(str, "The file read (relative to the base folder when inside it)")
    size = Output(int, "The file's size in bytes")

    @classmethod
    def check(cls, params):
        return bound_problems(params, "max_bytes")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        fmt = self.format.get(msg) or "text"
        encoding = self.encoding.get(msg) or "utf-8"
        max_bytes = limit(self, "max_bytes")
        base = self.base()

        def work() -> tuple[Any, Path, int]:
            target = self.resolve("path", msg, base, raw, must_exist=True)
            return read_bytes_as(target, raw, fmt, encoding, max_bytes)

        content, target, size = await self.run_blocking(work)
        self.content.set(msg, content)
        self.file.set(msg, shown(target, base))
        self.size.set(msg, size)


def read_bytes_as(target: Path, raw: Any, fmt: str, encoding: str,
                  max_bytes: int) -> tuple[Any, Path, int]:
    if fmt not in ("text", "json", "base64"):
        raise NodeConfigError(f"format: '{quote(str(fmt))}' is not one of text, json, base64")
    if fmt != "base64":
        check_encoding(encoding)
    regular_file(target, "path", raw, max_bytes)
    try:
        with open(target, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None
    if len(data) > max_bytes:  # it grew since it was measured
        raise too_big(raw, len(data), max_bytes)
    if fmt == "base64":
        return base64.b64encode(data).decode("ascii"), target, len(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        problem = decode_problem(exc, str(raw), encoding)
        raise NodeConfigError(f"{problem}, or read a binary file with format base64") from None
    if fmt == "text":
        return text, target, len(data)
    try:
        return json.loads(text), target, len(data)
    except json.JSONDecodeError as exc:
        raise NodeConfigError(f"path: '{quote(str(raw))}' is not valid JSON (line {exc.lineno}, "
                              f"column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise NodeConfigError(f"path: '{quote(str(raw))}' holds JSON nested too deeply "
                              "to read") from None


@node("files.write", name="Write File", category="Files", icon="file-write", color=FILES_COLOR,
      tool=Tool("write_file", "Write text or JSON to a file in the files folder"))
class WriteFile(FileNode):
    """Writes text, or any value as JSON, to a file. overwrite replaces the
    file atomically (a reader never sees half of it); append adds to its end
    (JSON is then added as one line, JSON Lines style); fail_if_exists
    refuses to touch an existing file."""

    path = Param(str, "The file to write, relative to the files folder, e.g. 'out/summary.txt'",
                 scope=AI, allow=AI | CUSTOM | MESSAGE)
    content = Param("json", "What to write: text (with format json: any JSON value)", scope=AI,
                    allow=AI | CUSTOM | MESSAGE, multiline=True)
    format = Param(str, "text: write the content as text; json: write it as JSON",
                   choices=["text", "json"], default="text", allow=AI | CUSTOM | MESSAGE)
    mode = mode_param("overwrite: replace the file (atomically); append: add to its end; "
                      "fail_if_exists: refuse if the file exists", WRITE_MODES, "overwrite")
    encoding = encoding_param()
    create_folders = create_folders_param()
    max_bytes = Param(int, "Most bytes one message may write; more is refused before the file "
                      "is touched", default=DEFAULT_MAX_BYTES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    file = Output(str, "The file written (relative to the base folder when inside it)",
                  path="file")
    size = Output(int, "Bytes written by this message", path="bytes_written")

    @classmethod
    def check(cls, params):
        return bound_problems(params, "max_bytes")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        content = self.content.get(msg)
        fmt = self.format.get(msg) or "text"
        mode = self.mode.get(msg) or "overwrite"
        encoding = check_encoding(self.encoding.get(msg) or "utf-8")
        create = bool(self.create_folders.get())
        max_bytes = limit(self, "max_bytes")
        if mode not in WRITE_MODES:
            raise NodeConfigError(f"mode: '{quote(str(mode))}' is not one of {', '.join(WRITE_MODES)}")
        data = _encode_content(content, fmt, mode, encoding, max_bytes)
        base = self.base()
        # A run that may run twice (queue mode): what an earlier attempt
        # wrote is not written again (overwrite is write-then-rename anyway).
        effect = self.effect_once("file", str(raw), mode, data)
        if effect.done and isinstance(effect.result, dict):
            self.file.set(msg, effect.result.get("file", ""))
            self.size.set(msg, len(data))
            self.show_status("already written (an earlier attempt)", "green", "done")
            return

        def work() -> Path:
            target = self.resolve("path", msg, base, raw)
            prepare_folder(target, create, "path", raw)
            try:
                with writing(target, mode, binary=True) as f:
                    f.write(data)
            except FileExistsError:
                raise NodeConfigError(f"path: '{quote(str(raw))}' already exists "
                                      "(mode fail_if_exists)") from None
            except OSError as exc:
                raise os_problem(exc, "path", raw) from None
            return target

        target = await self.run_blocking(work)
        self.written(target, msg)
        where = shown(target, base)
        effect.record({"file": where})
        self.file.set(msg, where)
        self.size.set(msg, len(data))
        self.show_status(f"{'appended to' if mode == 'append' else 'wrote'} {where}", "green",
                         "done")


def _encode_content(content: Any, fmt: str, mode: str, encoding: str, max_bytes: int) -> bytes:
    if fmt == "json":
        try:
            if mode == "append":  # one record per line
                text = json.dumps(content, ensure_ascii=False, allow_nan=False) + "\n"
            else:
                text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=2) + "\n"
        except (TypeError, ValueError) as exc:
            raise NodeConfigError(f"content: cannot be written as JSON ({exc})") from None
    elif fmt == "text":
        if content is None:
            raise NodeConfigError("content: nothing to write (no content given)")
        if isinstance(content, (dict, list)):
            raise NodeConfigError(f"content: format text writes text, got "
                                  f"{'an object' if isinstance(content, dict) else 'a list'}; "
                                  "set format to json to write it as JSON")
        text = content if isinstance(content, str) else json.dumps(content)
    else:
        raise NodeConfigError(f"format: '{quote(str(fmt))}' is not one of text, json")
    # Measured before encoding: a text over the bound is refused without
    # building its bytes (4 bytes per character at most in any encoding).
    if len(text) > max_bytes:
        raise NodeConfigError(f"max_bytes: the content is {len(text):,} characters, more than "
                              f"max_bytes={max_bytes:,} bytes")
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise NodeConfigError(f"encoding: the content holds '{quote(exc.object[exc.start:exc.end])}' "
                              f"(at character {exc.start}), which {encoding} cannot store; "
                              "use utf-8") from None
    if len(data) > max_bytes:
        raise NodeConfigError(f"max_bytes: the content is {len(data):,} bytes, more than "
                              f"max_bytes={max_bytes:,}")
    return data


@node("files.list", name="List Files", category="Files", icon="folder", color=FILES_COLOR,
      tool=Tool("list_files", "List the files and folders in a folder of the files folder"))
class ListFiles(FileNode):
    """Lists a folder: name, path, size, modification time and whether
    each entry is a folder, sorted by path. Links that lead outside the base
    folder are left out. More than max_entries matches is refused."""

    folder = Param(str, "The folder to list, relative to the files folder; empty: the files "
                   "folder itself", default="", scope=AI, allow=AI | CUSTOM | MESSAGE)
    glob = Param(str, "Which names to list, e.g. '*.csv'; '*' lists everything. A pattern with "
                 "'/' is matched against the path below the folder, e.g. '2024/*.pdf'",
                 default="*", scope=AI, allow=AI | CUSTOM | MESSAGE)
    recursive = Param(bool, "Also list what the subfolders hold, at any depth", default=False,
                      scope=AI, allow=AI | CUSTOM | MESSAGE)
    max_entries = Param(int, "Most entries listed; more matches are refused (narrow the glob)",
                        default=DEFAULT_MAX_ENTRIES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    entries = Output("json", "The entries: [{name, path, size, mtime, is_dir}]; path is relative "
                     "to the base folder, size is null for a folder, mtime is ISO 8601 text")
    count = Output(int, "How many entries")

    @classmethod
    def check(cls, params):
        return bound_problems(params, "max_entries")

    async def on_message(self, msg: Message) -> None:
        raw = self.folder.get(msg)
        pattern = self.glob.get(msg) or "*"
        recursive = bool(self.recursive.get(msg))
        max_entries = limit(self, "max_entries")
        if not isinstance(pattern, str) or len(pattern) > 1000:
            raise NodeConfigError("glob: a pattern is text of at most 1,000 characters")
        base = self.base()

        def work() -> list[dict]:
            if not raw and not base.exists():
                return []  # the default files folder, before anything was written to it
            folder = self.resolve("folder", msg, base, raw or ".", must_exist=True)
            if not folder.is_dir():
                raise NodeConfigError(f"folder: '{quote(str(raw))}' is a file, not a folder")
            return list_folder(folder, base, pattern, recursive, max_entries, raw or ".")

        entries = await self.run_blocking(work)
        self.entries.set(msg, entries)
        self.count.set(msg, len(entries))


def list_folder(folder: Path, base: Path, pattern: str, recursive: bool, max_entries: int,
                raw: str) -> list[dict]:
    real_base = os.path.realpath(base)
    by_path = "/" in pattern
    max_scan = max(MIN_SCAN, SCAN_FACTOR * max_entries)
    scanned = 0
    found: list[dict] = []
    pending = [(str(folder), "")]
    while pending:
        top, rel_top = pending.pop()
        try:
            it = os.scandir(top)
        except OSError as exc:
            raise os_problem(exc, "folder", raw if not rel_top else f"{raw}/{rel_top}") from None
        with it:
            for entry in it:
                scanned += 1
                if scanned > max_scan:
                    raise NodeConfigError(
                        f"max_entries: looked at {max_scan:,} entries under '{quote(raw)}' "
                        f"without finishing (max_entries={max_entries:,} allows looking at "
                        f"{max_scan:,}); list a smaller folder")
                rel = f"{rel_top}/{entry.name}" if rel_top else entry.name
                try:
                    link = entry.is_symlink()
                    if link and not inside(os.path.realpath(entry.path), real_base):
                        continue  # never reveal what lies outside
                    is_dir = entry.is_dir()  # follows a link that stays inside
                    st = entry.stat()
                except OSError:
                    continue  # vanished meanwhile, or a dangling link
                if recursive and is_dir and not link:
                    pending.append((entry.path, rel))
                if not fnmatch.fnmatch(rel if by_path else entry.name, pattern):
                    continue
                if len(found) >= max_entries:
                    raise NodeConfigError(
                        f"max_entries: '{quote(raw)}' holds more than max_entries={max_entries:,} "
                        "matching entries; narrow the glob or raise max_entries")
                found.append({
                    "name": entry.name,
                    "path": shown(entry.path, base),
                    "size": None if is_dir else st.st_size,
                    "mtime": datetime.fromtimestamp(st.st_mtime).astimezone()
                    .isoformat(timespec="seconds"),
                    "is_dir": is_dir,
                })
    found.sort(key=lambda e: e["path"])
    return found


@node("files.move", name="Move File", category="Files", icon="file-move", color=FILES_COLOR,
      tool=Tool("move_file", "Move or rename a file or folder inside the files folder"))
class MoveFile(FileNode):
    """Moves or renames a file or folder. An existing destination is
    refused unless overwrite is on (a folder is never replaced)."""

    source = Param(str, "What to move, relative to the files folder", scope=AI,
                   allow=AI | CUSTOM | MESSAGE)
    destination = Param(str, "Its new path (with its name), relative to the files folder",
                        scope=AI, allow=AI | CUSTOM | MESSAGE)
    overwrite = Param(bool, "Replace a file already at the destination", default=False,
                      allow=CUSTOM)
    create_folders = create_folders_param()
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    file = Output(str, "The new path (relative to the base folder when inside it)",
                  path="file")

    async def on_message(self, msg: Message) -> None:
        raw_src = self.source.get(msg)
        raw_dst = self.destination.get(msg)
        overwrite = bool(self.overwrite.get())
        create = bool(self.create_folders.get())
        base = self.base()

        def work() -> Path:
            # Both resolved before anything moves; a link is moved as a link.
            src = self.resolve("source", msg, base, raw_src, must_exist=True, follow_last=False)
            dst = self.resolve("destination", msg, base, raw_dst, follow_last=False)
            return move(src, dst, base, raw_src, raw_dst, overwrite, create)

        target = await self.run_blocking(work)
        where = shown(target, base)
        self.file.set(msg, where)
        self.show_status(f"moved to {where}", "green", "done")


def move(src: Path, dst: Path, base: Path, raw_src: Any, raw_dst: Any, overwrite: bool,
         create: bool) -> Path:
    real_base = os.path.realpath(base)
    if inside(real_base, src):
        raise NodeConfigError(f"source: '{quote(str(raw_src))}' is the base folder or holds it; "
                              "it cannot be moved")
    if src == dst:
        return dst
    if inside(dst, src):
        raise NodeConfigError(f"destination: '{quote(str(raw_dst))}' is inside "
                              f"'{quote(str(raw_src))}'; a folder cannot move into itself")
    if os.path.lexists(dst):
        if not overwrite:
            raise NodeConfigError(f"destination: '{quote(str(raw_dst))}' already exists; turn on "
                                  "overwrite to replace it")
        if dst.is_dir() and not dst.is_symlink():
            raise NodeConfigError(f"destination: '{quote(str(raw_dst))}' is a folder; a folder "
                                  "is never replaced")
        if src.is_dir() and not src.is_symlink():
            raise NodeConfigError(f"destination: '{quote(str(raw_dst))}' is a file; a folder "
                                  "cannot replace it")
    if not dst.parent.is_dir():
        if not create:
            raise NodeConfigError(f"destination: the folder of '{quote(str(raw_dst))}' does not "
                                  "exist; create it first or turn on create_folders")
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_problem(exc, "destination", raw_dst) from None
    try:
        try:
            os.replace(src, dst)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # another file system: copy, then remove
                raise
            shutil.move(str(src), str(dst))
    except OSError as exc:
        raise os_problem(exc, "source", raw_src) from None
    return dst


@node("files.delete", name="Delete File", category="Files", icon="file-delete",
      color=FILES_COLOR,
      tool=Tool("delete_file", "Delete a file in the files folder"))
class DeleteFile(FileNode):
    """Deletes a file (a link: the link itself, never its target). A
    folder is deleted, with everything in it, only when the designer turned
    on recursive; the base folder itself never is."""

    path = Param(str, "The file to delete, relative to the files folder", scope=AI,
                 allow=AI | CUSTOM | MESSAGE)
    recursive = Param(bool, "Also delete folders, with everything they hold", default=False,
                      allow=CUSTOM)
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    deleted = Output(str, "What was deleted (relative to the base folder when inside it)",
                     path="deleted")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        recursive = bool(self.recursive.get())
        base = self.base()

        def work() -> Path:
            target = self.resolve("path", msg, base, raw, must_exist=True, follow_last=False)
            delete(target, base, raw, recursive)
            return target

        target = await self.run_blocking(work)
        where = shown(target, base)
        self.deleted.set(msg, where)
        self.show_status(f"deleted {where}", "green", "done")


def delete(target: Path, base: Path, raw: Any, recursive: bool) -> None:
    if inside(os.path.realpath(base), target):
        raise NodeConfigError(f"path: '{quote(str(raw))}' is the base folder or holds it; it "
                              "cannot be deleted")
    try:
        st = os.lstat(target)
        if stat.S_ISDIR(st.st_mode):
            if not recursive:
                raise NodeConfigError(f"path: '{quote(str(raw))}' is a folder; deleting folders "
                                      "needs recursive, which only the designer can turn on")
            shutil.rmtree(target)
        else:
            os.unlink(target)
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None

"""What the file and table nodes share: the base folder and path params,
bounds, atomic writes, and OS errors turned into texts a user and an LLM
can act on (naming the param and the path as it was given, never the base
folder's location)."""

from __future__ import annotations

import codecs
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from runtime.node import CUSTOM, MESSAGE, Node, NodeConfigError, Param

from .paths import base_folder, param_path, quote, shown

FILES_COLOR = "#c98b2b"
TABLES_COLOR = "#2f8f5b"

WRITE_MODES = ["overwrite", "append", "fail_if_exists"]
#: Default largest file a node reads or content it writes (10 MB).
DEFAULT_MAX_BYTES = 10_000_000
#: Default most rows a table node reads or writes in one message.
DEFAULT_MAX_ROWS = 100_000

_UNREAD = object()


def base_folder_param() -> Param:
    return Param(str, "The folder paths are relative to, and the only place a path from the AI "
                 "can reach; empty: the 'files' folder in Switchboard's data folder. A relative "
                 "folder is taken inside that one", default="", allow=CUSTOM, group="advanced")


def allow_absolute_param() -> Param:
    return Param(bool, "Accept an absolute path that the designer set or that the message "
                 "holds. A path from the AI is always kept inside the base folder, whatever "
                 "this says", default=True, allow=CUSTOM, group="advanced")


def encoding_param(default: str = "utf-8") -> Param:
    return Param(str, "Text encoding, e.g. utf-8, utf-8-sig (skips or writes a byte order "
                 "mark), latin-1, cp1252", default=default, allow=CUSTOM | MESSAGE,
                 group="advanced")


def create_folders_param() -> Param:
    return Param(bool, "Create missing folders on the way to the file", default=True,
                 allow=CUSTOM, group="advanced")


def mode_param(description: str, choices: list[str], default: str) -> Param:
    return Param(str, description, choices=choices, default=default, allow=CUSTOM | MESSAGE)


def bound_problems(params: dict, *names: str) -> list[tuple[str, str]]:
    """Flow-time checks of the bounds (at least 1) and of an encoding."""
    problems = []
    for name in names:
        setting = params.get(name)
        if setting is not None and isinstance(setting.value, int) and setting.value < 1:
            problems.append((name, f"{name} must be at least 1"))
    enc = params.get("encoding")
    if enc is not None and isinstance(enc.value, str) and enc.value:
        try:
            check_encoding(enc.value)
        except NodeConfigError as exc:
            problems.append(("encoding", str(exc)))
    return problems


def check_encoding(value: Any, param: str = "encoding") -> str:
    if not isinstance(value, str) or not value:
        raise NodeConfigError(f"{param}: give an encoding such as utf-8")
    try:
        info = codecs.lookup(value)
    except LookupError:
        raise NodeConfigError(f"{param}: unknown encoding '{quote(value)}'") from None
    if not getattr(info, "_is_text_encoding", True):
        raise NodeConfigError(f"{param}: '{quote(value)}' is not a text encoding")
    return value


def decode_problem(exc: UnicodeDecodeError, raw: str, encoding: str) -> NodeConfigError:
    byte = exc.object[exc.start:exc.start + 1].hex() if exc.object else "?"
    return NodeConfigError(
        f"encoding: '{quote(raw)}' is not valid {encoding} text (byte 0x{byte} at offset "
        f"{exc.start}); set encoding to the file's (e.g. latin-1 or cp1252)")


def os_problem(exc: OSError, param: str, raw: Any) -> NodeConfigError:
    """An OSError as a user reads it: the param, the path as given and the
    reason, without the absolute location the OS put in its text."""
    shown_raw = quote(str(raw))
    reasons = {
        errno.ENOENT: "does not exist",
        errno.EEXIST: "already exists",
        errno.EISDIR: "is a folder",
        errno.ENOTDIR: "has a file where a folder is expected",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOSPC: "the disk is full",
        errno.ENAMETOOLONG: "a name in the path is too long",
        errno.ELOOP: "too many levels of symbolic links",
        errno.ENOTEMPTY: "the folder is not empty",
        errno.EROFS: "the file system is read-only",
    }
    reason = reasons.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return NodeConfigError(f"{param}: '{shown_raw}': {reason}")


def limit(node: Node, name: str) -> int:
    """A bound param's value, at least 1, or an error naming it."""
    value = node.param(name).get()
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise NodeConfigError(f"{name} must be a whole number of at least 1")
    return value


def unique_names(names: list[Any], blank: Any = None) -> list[str]:
    """Column names for a header row: empty ones get ``blank(i)`` (i from 0;
    default 'column_N', N counting from 1), repeated ones get '_2', '_3',
    ... so that no value is lost when a row becomes an object."""
    out: list[str] = []
    seen: set[str] = set()
    for i, name in enumerate(names):
        text = "" if name is None else str(name).strip()
        base = text or (blank(i) if blank is not None else f"column_{i + 1}")
        candidate, n = base, 1
        while candidate in seen:
            n += 1
            candidate = f"{base}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


class FileNode(Node):
    """Base of the file and table nodes: each declares ``base_folder`` and
    ``allow_absolute`` (last, so they come last in the properties panel)."""

    def base(self) -> Path:
        return base_folder(self.param("base_folder").get())

    def written(self, target: Path, msg: dict) -> None:
        """Record a file this node wrote as a document of the run's
        workspace (runtime.workspace): with the agent and tool that asked
        for it when it was a tool call, so that agents can hand it on."""
        from runtime.workspace import workspace_of

        engine = getattr(self._rt, "engine", None)
        if engine is not None:
            workspace_of(engine).record(target, node=self.id, msg=msg)

    def resolve(self, name: str, msg: dict, base: Path, raw: Any = _UNREAD, *,
                must_exist: bool = False, follow_last: bool = True) -> Path:
        """The path param ``name`` names, confined as its scope requires
        (see nodes.files.paths.param_path)."""
        param = self.param(name)
        value = param.get(msg) if raw is _UNREAD else raw
        return param_path(param, msg, base, allow_absolute=bool(self.param("allow_absolute").get()),
                          must_exist=must_exist, follow_last=follow_last, raw=value)


def regular_file(path: Path, param: str, raw: Any, max_bytes: int | None = None,
                 bound: str = "max_bytes") -> os.stat_result:
    """The stat of a regular file to read, or an error: a folder, a device
    or a pipe (which would block a reader) is refused, and so is a file
    over ``max_bytes``, before it is opened."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise os_problem(exc, param, raw) from None
    if stat.S_ISDIR(st.st_mode):
        raise NodeConfigError(f"{param}: '{quote(str(raw))}' is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise NodeConfigError(f"{param}: '{quote(str(raw))}' is not a regular file")
    if max_bytes is not None and st.st_size > max_bytes:
        raise too_big(raw, st.st_size, max_bytes, bound)
    return st


def too_big(raw: Any, size: int, max_bytes: int, bound: str = "max_bytes") -> NodeConfigError:
    return NodeConfigError(f"{bound}: '{quote(str(raw))}' is {size:,} bytes, more than "
                           f"{bound}={max_bytes:,}")


def prepare_folder(path: Path, create: bool, param: str, raw: Any) -> None:
    """Make sure the folder of ``path`` exists (creating it if allowed) and
    that ``path`` is not a folder itself."""
    folder = path.parent
    try:  # is_dir() raises for a name too long for this file system, or EACCES
        if not folder.is_dir():
            if not create:
                raise NodeConfigError(f"{param}: the folder of '{quote(str(raw))}' does not "
                                      "exist; create it first or turn on create_folders")
            folder.mkdir(parents=True, exist_ok=True)
        is_folder = path.is_dir()
    except OSError as exc:
        raise os_problem(exc, param, raw) from None
    if is_folder:
        raise NodeConfigError(f"{param}: '{quote(str(raw))}' is a folder, not a file")


@contextmanager
def writing(path: Path, mode: str, *, binary: bool = False, encoding: str | None = None,
            newline: str | None = None) -> Iterator[IO[Any]]:
    """A file opened for one write in the given mode:

    - overwrite: written to a temporary file beside it, then renamed over
      it, so a reader sees the old file or the new one, never half of one
      (an existing file keeps its permissions);
    - append: added at its end (created if missing);
    - fail_if_exists: created, refused (FileExistsError) if anything is
      there; removed again if writing fails.
    """
    kw: dict[str, Any] = {} if binary else {"encoding": encoding, "newline": newline}
    suffix = "b" if binary else ""
    if mode == "append":
        with open(path, "a" + suffix, **kw) as f:
            yield f
        return
    if mode == "fail_if_exists":
        f = open(path, "x" + suffix, **kw)
        try:
            with f:
                yield f
        except BaseException:
            _remove(path)
            raise
        return
    tmp = path.parent / f".sb-{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "w" + suffix, **kw) as f:
            yield f
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        except OSError:
            pass  # no file there yet: the new one keeps the umask's permissions
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def replace_atomically(path: Path, save: Any) -> None:
    """``save(tmp_path)`` writes the whole file, which then replaces
    ``path`` in one rename (for writers that want a file name, openpyxl)."""
    tmp = path.parent / f".sb-{secrets.token_hex(6)}.tmp"
    try:
        save(tmp)
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        except OSError:
            pass
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


__all__ = [
    "DEFAULT_MAX_BYTES", "DEFAULT_MAX_ROWS", "FILES_COLOR", "TABLES_COLOR", "WRITE_MODES",
    "FileNode", "allow_absolute_param", "base_folder_param", "bound_problems", "check_encoding",
    "create_folders_param", "decode_problem", "encoding_param", "limit", "mode_param",
    "os_problem", "prepare_folder", "regular_file", "replace_atomically", "shown", "too_big",
    "unique_names", "writing",
]

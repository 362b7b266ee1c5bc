"""Keeping file paths inside a base folder.

Any node that takes a path from an LLM (read a file, save a screenshot,
store a mail's attachments) resolves it here first: the path is taken
relative to the node's base folder, and it is refused, before anything is
opened, created or deleted, when it is absolute, when ``..`` leads out of
the base folder, or when a symbolic link on the way (a folder or the file
itself) points outside it. The check compares real paths (every link
resolved, ``os.path.realpath``) with ``os.path.commonpath``, so it holds
whatever mix of ``..``, ``.`` and links the text holds.

What is left open: a program that swaps a folder inside the base folder for
a link between the check and the use (the check cannot lock the file
system). The paths returned are real paths, so a link that exists at check
time is never followed again afterwards.

Typical use in a node::

    from nodes.files.paths import base_folder, param_path

    base = base_folder(self.base_folder.get())
    target = param_path(self.path, msg, base, must_exist=True)

``param_path`` trusts an absolute path only when the designer set it (custom
scope) or the flow's wiring took it from the message, never when the AI
supplied it; ``confined_path`` confines whatever it is given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime.node import BoundParam, NodeConfigError
from runtime.spec import Scope
from runtime.text import printable

#: Longest path text accepted (Linux's PATH_MAX); longer is refused unread.
MAX_PATH_CHARS = 4096
#: Longest name of one file or folder, in bytes of UTF-8 (NAME_MAX of
#: Linux and macOS file systems; Windows allows 255 UTF-16 units, never
#: fewer than these bytes). A longer one is refused before the OS sees it.
MAX_NAME_BYTES = 255
#: Longest a path may be once joined to the base folder, in bytes: PATH_MAX
#: less room for the temporary file an atomic write puts beside it.
MAX_FULL_PATH_BYTES = 4000
#: Characters of a refused path quoted in an error.
QUOTE_LIMIT = 200
_UNREAD = object()
#: The folder, inside Switchboard's data folder, that is every file node's
#: base folder unless the designer picks another.
DEFAULT_FOLDER = "files"


class PathRefused(NodeConfigError):
    """A path was refused before anything was touched; the text names the
    param and quotes the path as given, never the base folder's location."""


def default_base() -> Path:
    """The "files" folder in Switchboard's data folder
    (``$SWITCHBOARD_DATA_DIR/files`` if that variable is set)."""
    from runtime.history import data_dir

    return data_dir() / DEFAULT_FOLDER


def base_folder(value: Any = "") -> Path:
    """The base folder a designer's setting names: empty means
    ``default_base()``; ``~`` is expanded; a relative folder is taken inside
    ``default_base()``. Not created here: callers create it when they are
    about to write."""
    if value is None or value == "":
        return default_base()
    if not isinstance(value, str):
        raise NodeConfigError(f"base_folder: expected a folder path, got {type(value).__name__}")
    _check_text(value, "base_folder")
    folder = Path(os.path.expanduser(value))
    return folder if folder.is_absolute() else default_base() / folder


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """A path as an error may quote it: at most ``limit`` characters, its
    control characters escaped (runtime.text.printable)."""
    text = printable(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _check_text(raw: Any, param: str) -> str:
    if not isinstance(raw, str):
        if raw is None:
            raise PathRefused(f"{param}: no path given")
        raise PathRefused(f"{param}: a path is text, got {type(raw).__name__}")
    if not raw:
        raise PathRefused(f"{param}: no path given")
    if len(raw) > MAX_PATH_CHARS:
        raise PathRefused(f"{param}: the path is {len(raw):,} characters, more than the "
                          f"{MAX_PATH_CHARS:,} a path may have")
    if "\0" in raw:
        raise PathRefused(f"{param}: the path holds a NUL character")
    if len(raw) > MAX_NAME_BYTES // 4:  # a shorter text holds no name over the bound
        for name in raw.replace("\\", "/").split("/"):
            size = len(name.encode("utf-8", "surrogatepass"))
            if size > MAX_NAME_BYTES:
                raise PathRefused(
                    f"{param}: the name '{quote(name, 40)}' is {size:,} bytes long; a file or "
                    f"folder name may have at most {MAX_NAME_BYTES} bytes (UTF-8)")
    return raw


def _check_length(full: str, text: str, param: str) -> None:
    """Refuse a path whose full form is over MAX_FULL_PATH_BYTES, naming
    the bound and the path as given, never the base folder it was joined to."""
    if len(full) > MAX_FULL_PATH_BYTES // 4:
        size = len(os.fsencode(full))
        if size > MAX_FULL_PATH_BYTES:
            raise PathRefused(f"{param}: '{quote(text)}' is too long: in full it would be "
                              f"{size:,} bytes, more than the {MAX_FULL_PATH_BYTES:,} a path "
                              "may have here")


def _norm(path: str) -> str:
    return os.path.normcase(path)


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or below it (both real, absolute)."""
    p, f = _norm(str(path)), _norm(str(folder))
    try:
        return os.path.commonpath([p, f]) == f
    except ValueError:  # different drives on Windows, or a relative path
        return False


def _is_absolute(raw: str) -> bool:
    # "C:x" (drive-relative) and "\\x" (root of the current drive) are not
    # isabs() on Windows, yet leave any folder they are joined to.
    return os.path.isabs(raw) or raw.startswith(("/", "\\")) or bool(os.path.splitdrive(raw)[0])


def confined_path(base: str | Path, raw: Any, *, must_exist: bool = False,
                  param: str = "path", follow_last: bool = True) -> Path:
    """``raw`` resolved inside ``base``, or a ``PathRefused`` that names
    ``param``. Nothing on disk is changed; only links are read.

    Refused: anything but non-empty text, over MAX_PATH_CHARS characters or
    holding a NUL; an absolute path; a path whose ``..`` leads out of
    ``base``; a path through a link (any folder on the way, or the last
    part) whose target is outside ``base``; with ``must_exist``, a path
    where nothing is.

    Returns the real path (links resolved). With ``follow_last=False`` the
    last part is kept as named, so that deleting or moving a link inside
    the base folder acts on the link, not on what it points to (the link's
    target must still be inside the base folder)."""
    text = _check_text(raw, param)
    if _is_absolute(text):
        raise PathRefused(f"{param}: '{quote(text)}' is an absolute path; give a path relative "
                          "to the base folder")
    real_base = os.path.realpath(base)
    joined = os.path.join(real_base, text)
    if not inside(os.path.normpath(joined), real_base):
        raise PathRefused(f"{param}: '{quote(text)}' leads outside the base folder")
    _check_length(joined, text, param)
    real = os.path.realpath(joined)
    if not inside(real, real_base):
        raise PathRefused(f"{param}: '{quote(text)}' is or goes through a symbolic link that leads "
                          "outside the base folder")
    target = real
    if not follow_last:
        parent, name = os.path.split(os.path.normpath(text))
        if name not in ("", ".", ".."):
            target = os.path.join(os.path.realpath(os.path.join(real_base, parent)), name)
            if not inside(target, real_base):  # pragma: no cover - real is inside, so is its folder
                raise PathRefused(f"{param}: '{quote(text)}' leads outside the base folder")
    exists = os.path.lexists(target) if not follow_last else os.path.exists(target)
    if must_exist and not exists:
        raise PathRefused(f"{param}: '{quote(text)}' does not exist in the base folder")
    return Path(target)


def trusted_path(base: str | Path, raw: Any, *, must_exist: bool = False,
                 param: str = "path", follow_last: bool = True) -> Path:
    """A path the designer chose: an absolute one (``~`` expanded) is used
    as it is; a relative one is confined to ``base`` like ``confined_path``."""
    text = _check_text(raw, param)
    expanded = os.path.expanduser(text) if text.startswith("~") else text
    if not os.path.isabs(expanded):
        return confined_path(base, text, must_exist=must_exist, param=param,
                             follow_last=follow_last)
    absolute = os.path.abspath(expanded)
    _check_length(absolute, text, param)
    if follow_last:
        absolute = os.path.realpath(absolute)
    exists = os.path.exists(absolute) if follow_last else os.path.lexists(absolute)
    if must_exist and not exists:
        raise PathRefused(f"{param}: '{quote(text)}' does not exist")
    return Path(absolute)


def from_ai(param: BoundParam) -> bool:
    """Whether this param's value may come from the LLM (its scope is ai;
    outside a tool call it then reads the message at its own name, and is
    confined all the same)."""
    return param.scope is Scope.AI


def param_path(param: BoundParam, msg: dict | None, base: str | Path, *,
               allow_absolute: bool = True, must_exist: bool = False,
               follow_last: bool = True, raw: Any = _UNREAD) -> Path:
    """The path a node's param names, resolved for use.

    An ``ai``-scoped param is always confined to ``base``. A ``custom`` or
    ``message`` one (the designer chose the value, or chose the message
    path it comes from) may be absolute when ``allow_absolute``; a relative
    one is confined all the same. ``raw``: the value if the caller already
    read it (else ``param.get(msg)``)."""
    value = param.get(msg) if raw is _UNREAD else raw
    if allow_absolute and not from_ai(param):
        return trusted_path(base, value, must_exist=must_exist, param=param.name,
                            follow_last=follow_last)
    return confined_path(base, value, must_exist=must_exist, param=param.name,
                         follow_last=follow_last)


def shown(path: str | Path, base: str | Path) -> str:
    """How a path is reported in outputs: relative to the base folder (with
    ``/``), so that an LLM can hand it back to another file tool, or
    absolute when it lies elsewhere (a designer's absolute path)."""
    real_base = os.path.realpath(base)
    text = str(path)
    if inside(text, real_base):
        rel = os.path.relpath(text, real_base)
        return "." if rel == "." else rel.replace(os.sep, "/")
    return text

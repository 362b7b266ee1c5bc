"""Where Switchboard keeps its data (run history, plugins, caches), readable
by the user alone."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DATA_DIR_ENV = "SWITCHBOARD_DATA_DIR"


def data_dir() -> Path:
    """``$SWITCHBOARD_DATA_DIR`` if set (tests, portable installs), else the
    platform's user data dir. It holds the run history, outbox mails, the
    credentials file and crash-recovery copies, so it is the user's alone:
    made 0700 if missing, and tightened to 0700 if an older version left it
    open to others (see private_dir)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        path = Path(override)
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("switchboard", appauthor=False))
    private_dir(path)
    return path


def private_dir(path: Path) -> None:
    """Make the folder ``path`` (and its parents, with the usual mode) if it
    is missing, readable by this user alone (0700, whatever the umask); an
    existing one of this user that others may read is tightened to 0700.
    Nothing on Windows (a profile's folders are private by their ACL) and
    nothing that fails here is reported: a folder that cannot be made or
    changed fails, naming itself, where a file is written into it."""
    if os.name == "nt":
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, 0o700)  # the umask only takes bits away
            return
        except FileExistsError:  # made meanwhile by another process
            st = os.stat(path)
        except OSError:
            return
    except OSError:
        return
    _tighten(path, st, 0o700)


def private_file(path: Path) -> None:
    """Make the file ``path`` if it is missing, empty and 0600 (whatever the
    umask), so that what is written into it later is never readable by
    others, not even for a moment; an existing one of this user that others
    may read is tightened to 0600. Nothing on Windows."""
    if os.name == "nt":
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return  # the caller's own open says why
    try:
        _tighten(path, os.fstat(fd), 0o600)
    finally:
        os.close(fd)


def _tighten(path: Path, st: os.stat_result, mode: int) -> None:
    if st.st_mode & 0o077 and st.st_uid == os.geteuid():
        try:
            os.chmod(path, mode)
        except OSError:
            pass


def write_atomic_bytes(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` so that a crash never leaves half a file:
    a temp file beside it with ``mode`` from the first byte, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

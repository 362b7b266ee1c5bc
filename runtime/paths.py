"""Where Switchboard keeps its data (run history, plugins, caches)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DATA_DIR_ENV = "SWITCHBOARD_DATA_DIR"


def data_dir() -> Path:
    """``$SWITCHBOARD_DATA_DIR`` if set (tests, portable installs), else the
    platform's user data dir."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("switchboard", appauthor=False))


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

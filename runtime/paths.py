"""Where Switchboard keeps its data (run history, plugins, caches)."""

from __future__ import annotations

import os
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

"""Shared test setup: every test runs headless and with its own data dirs, so
no test reads or writes the user's settings, history or autosaves."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# Must happen before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_session_tmp = Path(tempfile.mkdtemp(prefix="switchboard-tests-"))
os.environ["XDG_CONFIG_HOME"] = str(_session_tmp / "config")  # QSettings on Linux
os.environ["XDG_DATA_HOME"] = str(_session_tmp / "data")
os.environ["SWITCHBOARD_DATA_DIR"] = str(_session_tmp / "switchboard")
os.environ.setdefault("SWITCHBOARD_RETRY_BASE", "0.001")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property tests check behaviour, never speed: how long drawing an example
# takes depends on how busy the machine is (a CI run failed on too_slow).
# A test's own @settings adds to this profile; one that lists its own
# suppress_health_check names too_slow itself.
settings.register_profile("switchboard", suppress_health_check=[HealthCheck.too_slow],
                          deadline=None)
settings.load_profile("switchboard")


def pytest_sessionstart(session):
    """The bundled Node.js plugin (nodes/textkit-js) needs its npm packages;
    the README's one test command sets them up here when npm is at hand, so
    the plugin tests run on a fresh clone (they skip, saying why, if not)."""
    import shutil
    import subprocess

    textkit = ROOT / "nodes" / "textkit-js"
    npm = shutil.which("npm")
    if npm is None or not (textkit / "package-lock.json").is_file() \
            or (textkit / "node_modules").is_dir():
        return
    print(f"\nsetting up {textkit.relative_to(ROOT)}: npm ci", flush=True)
    try:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=textkit,
                       check=True, timeout=300)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"npm ci failed ({exc}); the Node.js plugin tests will be skipped", flush=True)

EXAMPLES = ROOT / "resources" / "examples"


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A fresh SWITCHBOARD_DATA_DIR for one test."""
    d = tmp_path / "switchboard-data"
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(d))
    return d


# -- the end of a test session ------------------------------------------------------
#
# After every test has passed and the summary is printed, a full session
# (PySide6 loaded, Playwright's greenlets used in process) could crash in
# the final garbage collection (exit 139, "Garbage-collecting" in
# faulthandler's trace), which would fail CI with nothing wrong in any test.
# Neither half alone does it, and it does not reproduce on demand. So the
# session ends with its own exit status without the interpreter's teardown;
# SWITCHBOARD_TEST_TEARDOWN=1 keeps the normal path, to chase the crash.

_exit_status: int | None = None


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    if _exit_status is None or os.environ.get("SWITCHBOARD_TEST_TEARDOWN") == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)

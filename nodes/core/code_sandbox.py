"""Where the Python node's worker runs (``nodes.core.code``): the sandbox
and the environment it starts with.

A script must not reach the run's secrets or the credential store, so its
worker starts with only the environment variables the node lists, and on
Linux out of reach of Switchboard's data folder: in bubblewrap (its own
mount and PID namespaces: the data folder under an empty tmpfs, a /proc
that shows only the sandbox) or, without a working bubblewrap, under
Landlock (docs/decisions.md, "What a Python script can reach").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from runtime.node import NodeConfigError
from runtime.paths import data_dir

from .code_worker import _worker_module

#: Time a new worker has to start Python and compile the script; not part of
#: the script's own timeout_seconds, so a slow machine never fails a message.
STARTUP_TIMEOUT = 60.0
#: The environment variables a worker gets unless the node lists others: what
#: programs need to run and format, nothing that holds a secret.
DEFAULT_ENV_VARS = "PATH HOME LANG LC_ALL LC_CTYPE TZ TMPDIR"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ENV_VARS = 100
#: Which sandbox workers run in: auto (bubblewrap, else Landlock, else
#: refuse), bwrap, landlock, or off (no file-system sandbox; set it only
#: where you accept that scripts can read Switchboard's data folder).
SANDBOX_ENV = "SWITCHBOARD_PYTHON_SANDBOX"
SANDBOX_MODES = ("auto", "bwrap", "landlock", "off")


class SandboxUnavailable(NodeConfigError):
    """No sandbox a script may run in works here; the text says what to
    install."""


@dataclass(frozen=True)
class Sandbox:
    kind: str  # "bwrap", "landlock" or "off"
    #: argv before the worker's python (bubblewrap and its options)
    prefix: tuple[str, ...] = ()
    #: folders the script cannot reach
    hidden: tuple[str, ...] = ()
    #: the worker is a supervisor (child subreaper) that forks the real one
    supervised: bool = False


_probes: dict[tuple[str, ...], str | None] = {}
_probe_lock = threading.Lock()
_landlock: int | None = None


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none, or not Linux)."""
    global _landlock
    if _landlock is None:
        version = 0
        if sys.platform.startswith("linux"):
            try:
                version = _worker_module()["landlock_abi"](_worker_module()["libc"]())
            except (OSError, AttributeError):
                version = 0
        _landlock = version
    return _landlock


def _hidden_folders(runtime_dirs: bool) -> tuple[str, ...]:
    """Real paths of the data folder (made if missing, so that what is
    stored there later is hidden too) and, for bubblewrap, of the user's
    runtime folder (the D-Bus session bus a keyring answers on)."""
    folder = data_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(f"the data folder {folder} cannot be made, so it cannot be "
                                 f"hidden from scripts: {exc.strerror or exc}") from None
    found = [os.path.realpath(folder)]
    if runtime_dirs and hasattr(os, "getuid"):
        for candidate in (os.environ.get("XDG_RUNTIME_DIR"), f"/run/user/{os.getuid()}"):
            if candidate and os.path.isdir(candidate):
                found.append(os.path.realpath(candidate))
    kept: list[str] = []
    for path in sorted(set(found)):  # a folder inside another hidden one needs no mount
        if not any(_inside(path, k) for k in kept):
            kept.append(path)
    for python in (os.path.realpath(sys.executable), os.path.realpath(sys.prefix)):
        if any(_inside(python, k) for k in kept):
            raise SandboxUnavailable(f"Python ({python}) is inside the data folder {found[0]}, "
                                     "which scripts must not reach; set SWITCHBOARD_DATA_DIR to "
                                     "a folder outside it")
    return tuple(kept)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _bwrap_prefix(bwrap: str, hidden: tuple[str, ...]) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session",
            "--cap-drop", "ALL", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for folder in hidden:
        argv += ["--tmpfs", folder]
    return argv + ["--"]


def _bwrap_problem(bwrap: str) -> str | None:
    """Why bubblewrap cannot run a worker here (None: it can). Tried once
    per process with the worker's own options."""
    probe = tuple(_bwrap_prefix(bwrap, (os.path.realpath(tempfile.gettempdir()),)))
    with _probe_lock:
        if probe not in _probes:
            try:
                done = subprocess.run([*probe, sys.executable, "-I", "-S", "-c", ""],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, timeout=STARTUP_TIMEOUT,
                                      env=_scrubbed_env([]))
                why = None if done.returncode == 0 else \
                    (done.stderr.decode(errors="replace").strip()[:300]
                     or f"exit code {done.returncode}")
            except (OSError, subprocess.SubprocessError) as exc:
                why = str(exc)[:300]
            _probes[probe] = why
        return _probes[probe]


def sandbox() -> Sandbox:
    """The sandbox a new worker runs in, by ``$SWITCHBOARD_PYTHON_SANDBOX``
    (auto: bubblewrap, else Landlock, else refuse)."""
    raw = os.environ.get(SANDBOX_ENV, "")
    mode = raw.strip().lower() or "auto"
    if mode not in SANDBOX_MODES:
        raise SandboxUnavailable(f"{SANDBOX_ENV}={raw!r} is not one of "
                                 f"{', '.join(SANDBOX_MODES)}")
    linux = sys.platform.startswith("linux")
    if mode == "off":
        return Sandbox("off", supervised=linux)
    reasons = []
    if mode in ("auto", "bwrap"):
        bwrap = shutil.which("bwrap") if linux else None
        why = "bubblewrap (bwrap) is not installed" if bwrap is None else _bwrap_problem(bwrap)
        if why is None and bwrap is not None:
            hidden = _hidden_folders(runtime_dirs=True)
            return Sandbox("bwrap", tuple(_bwrap_prefix(bwrap, hidden)), hidden)
        reasons.append(why if bwrap is None else f"bubblewrap does not work here: {why}")
    if mode in ("auto", "landlock"):
        if landlock_abi() >= 1:
            return Sandbox("landlock", (), _hidden_folders(runtime_dirs=False), supervised=True)
        reasons.append("this kernel has no Landlock" if linux else
                       "bubblewrap and Landlock are Linux's and this is not Linux")
    wanted = {"auto": "a sandbox", "bwrap": "bubblewrap", "landlock": "Landlock"}[mode]
    fix = ("Install bubblewrap (Debian, Ubuntu: apt install bubblewrap; Fedora: dnf install "
           "bubblewrap) or use a Linux kernel with Landlock; or, w" if linux else "W")
    raise SandboxUnavailable(
        f"the Python node runs scripts in {wanted}, and none works here ({'; '.join(reasons)}). "
        f"{fix}here you accept that scripts can read Switchboard's data folder (credentials, run "
        f"history), set {SANDBOX_ENV}=off before starting Switchboard")


def env_var_names(value: Any) -> list[str]:
    """The names in the node's env_vars setting (spaces or commas between)."""
    if value is None:
        return []
    if not isinstance(value, str):
        raise NodeConfigError("env_vars: expected variable names separated by spaces or commas")
    names = [n for n in re.split(r"[\s,]+", value) if n]
    for name in names:
        if not ENV_NAME.match(name):
            shown = name if len(name) <= 60 else name[:60] + "…"
            raise NodeConfigError(f"env_vars: {shown!r} is not an environment variable name "
                                  "(letters, digits and _, not starting with a digit)")
    names = list(dict.fromkeys(names))
    if len(names) > MAX_ENV_VARS:
        raise NodeConfigError(f"env_vars: {len(names)} names, more than {MAX_ENV_VARS}")
    return names


def _scrubbed_env(names: list[str]) -> dict[str, str]:
    """The worker's whole environment: the listed variables that are set,
    nothing else of Switchboard's (API keys, passwords a flow names by
    {"env": ...})."""
    env = {name: os.environ[name] for name in names if name in os.environ}
    # One malloc arena: glibc reserves 64 MB of address space for each
    # thread's own arena, which the cap (RLIMIT_AS) would count as used.
    env["MALLOC_ARENA_MAX"] = os.environ.get("MALLOC_ARENA_MAX", "1")
    if os.name == "nt" and "SYSTEMROOT" in os.environ:  # Python cannot start without it
        env.setdefault("SYSTEMROOT", os.environ["SYSTEMROOT"])
    return env

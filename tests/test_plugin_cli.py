"""Plugins as a user meets them: a package in the plugins folder, listed by
``switchboard nodes``, run by ``switchboard run``; and no plugin process left
behind however the runtime ends (the process table is the witness)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKGS = Path(__file__).resolve().parent / "plugin_pkgs"


@pytest.fixture
def plugins_home(data_dir):
    """SWITCHBOARD_DATA_DIR with the test package installed as a plugin."""
    folder = data_dir / "plugins" / "ptest"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({
        "name": "ptest", "version": "1.2.3", "language": "python",
        "command": ["python", "-m", "runtime.plugin", "serve", "sbtest_plugin", "--name", "ptest"],
        "env": {"PYTHONPATH": f"{PKGS}{os.pathsep}{ROOT}"}}))
    return data_dir


def switchboard(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, **kw)


def write_flow(path: Path, sleep: float) -> Path:
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "plugin run", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": {"scope": "custom",
                                                                   "value": "x"}}},
        {"id": "up", "type": "ptest.upper", "params": {"suffix": {"scope": "custom",
                                                                  "value": "!"}}},
        {"id": "zz", "type": "ptest.sleep", "params": {"seconds": {"scope": "custom",
                                                                   "value": sleep}}},
        {"id": "show", "type": "core.debug", "params": {"path": {"scope": "custom",
                                                                 "value": "msg"}}},
    ], "wires": [{"from": ["ask", "out"], "to": ["up", "in"]},
                 {"from": ["up", "out"], "to": ["zz", "in"]},
                 {"from": ["zz", "out"], "to": ["show", "in"]}]}))
    return path


def plugin_pids(marker: str = "sbtest_plugin") -> set[int]:
    """Live (not zombie) processes whose command line names the package."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and "runtime.plugin" in cmdline and state != "Z":
            pids.add(int(entry.name))
    return pids


def wait_for(predicate, what: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_switchboard_nodes_lists_plugin_nodes_marked(plugins_home):
    out = switchboard("nodes", env={**os.environ})
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("ptest.upper"))
    assert "[tool: upper]" in line and "[plugin: ptest]" in line
    specs = json.loads(switchboard("nodes", "--json").stdout)
    assert next(s for s in specs if s["type"] == "ptest.upper")["plugin"] == "ptest"
    assert next(s for s in specs if s["type"] == "core.inject")["plugin"] == ""
    # Listed from the spec cache: listing again starts no plugin.
    assert (plugins_home / "plugins" / ".cache" / "ptest.json").exists()


def test_a_run_through_a_plugin_leaves_no_process(plugins_home, tmp_path):
    before = plugin_pids()
    flow = write_flow(tmp_path / "p.flow.json", 0)
    calls = tmp_path / "calls.jsonl"
    out = switchboard("run", str(flow), env={**os.environ, "PTEST_CALLS": str(calls)})
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if ln.strip()]
    value = json.loads(line)["value"]
    # upper ran in the plugin (it wrote what it saw), then sleep answered
    # with the plugin's pid: another process than this one.
    assert [json.loads(c)["text"] for c in calls.read_text().splitlines()] == ["x"]
    assert isinstance(value["payload"], int) and value["payload"] != os.getpid()
    assert plugin_pids() <= before


@pytest.mark.parametrize("how, code", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_the_runtime_ending_mid_call_leaves_no_orphan(plugins_home, tmp_path, how, code):
    """SIGTERM: the runtime stops its plugins; SIGKILL: nothing of the runtime
    runs, and the plugin exits because its stdin closed."""
    before = plugin_pids()
    flow = write_flow(tmp_path / "p.flow.json", 3600)
    calls = tmp_path / "calls.jsonl"  # the plugin's upper node writes here
    cli = subprocess.Popen([sys.executable, "-m", "runtime.cli", "run", str(flow)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                           env={**os.environ, "PTEST_CALLS": str(calls)})
    try:
        # The run is under way in the plugin (upper answered, sleep called).
        wait_for(calls.exists, "the plugin to answer its first call")
        started = plugin_pids() - before
        assert started
        cli.send_signal(how)
        assert cli.wait(timeout=60) == code
        wait_for(lambda: not (plugin_pids() & started), "the plugin to exit")
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.communicate()

"""A node package installed with pip appears in the catalog and runs: the
example package from docs/node-packages.md, installed for real into a
private directory and used by a `switchboard` subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "resources" / "examples" / "packages" / "switchboard-textkit"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(PACKAGE)],
        check=True, capture_output=True, text=True,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)])
    return env


def _switchboard(env, *args):
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_installed_package_nodes_are_in_the_catalog(installed):
    out = _switchboard(installed, "nodes", "--json")
    assert out.returncode == 0, out.stderr
    specs = {s["type"]: s for s in json.loads(out.stdout)}
    assert specs["textkit.slugify"]["tool"]["name"] == "slugify_text"
    assert specs["textkit.slugify"]["package"] == "switchboard_textkit"
    assert "textkit.word_count" in specs


def test_catalog_without_the_package_does_not_list_it():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = _switchboard(env, "nodes", "--json")
    assert "textkit.slugify" not in {s["type"] for s in json.loads(out.stdout)}


def test_demo_flow_runs_with_the_package(installed):
    out = _switchboard(installed, "run", str(PACKAGE / "demo.flow.json"))
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    value = json.loads(line)["value"]
    assert value["payload"] == "hello-world-rpa-meets-ai"
    assert value["words"] == 5


def test_demo_flow_without_the_package_is_refused_clearly():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = _switchboard(env, "validate", str(PACKAGE / "demo.flow.json"))
    assert out.returncode == 2
    assert "unknown node type 'textkit.slugify'" in out.stderr
    assert "node 'slug'" in out.stderr
    assert "Traceback" not in out.stderr

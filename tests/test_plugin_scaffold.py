"""`switchboard package new|install|list`: a scaffolded package of each
language passes its own tests in a real process, installs into the plugins
folder, and its node runs out of process in a flow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.plugin import host, scaffold, wire
from runtime.plugin.scaffold import PackageError

ROOT = Path(__file__).resolve().parents[1]
TEXTKIT_JS = ROOT / "nodes" / "textkit-js"


def sb(*args: str) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, with this test's SWITCHBOARD_DATA_DIR."""
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def py_package(tmp_path_factory) -> Path:
    return scaffold.new_package("acme", "python", tmp_path_factory.mktemp("pkgs"))


def greet_flow(tmp_path: Path, type_id: str) -> str:
    path = tmp_path / "greet.flow.json"
    path.write_text(json.dumps({
        "format": "switchboard.flow/1", "name": "Greet",
        "nodes": [{"id": "who", "type": "core.inject",
                   "params": {"payload": {"scope": "custom", "value": "Ada"}}},
                  {"id": "greet", "type": type_id},
                  {"id": "show", "type": "core.debug"}],
        "wires": [{"from": ["who", "out"], "to": ["greet", "in"]},
                  {"from": ["greet", "out"], "to": ["show", "in"]}]}), encoding="utf-8")
    return str(path)


# -- python ------------------------------------------------------------------
def test_python_package_has_its_manifest_module_tests_and_readme(py_package):
    assert sorted(str(p.relative_to(py_package)) for p in py_package.rglob("*")
                  if p.is_file()) == ["README.md", "acme/__init__.py", "plugin.json",
                                      "tests/test_acme.py"]
    manifest = host.read_manifest(py_package / "plugin.json")
    assert (manifest.name, manifest.version, manifest.language) == ("acme", "0.1.0", "python")
    assert manifest.command == ["python", "-m", "runtime.plugin", "serve", "acme",
                                "--name", "acme"]
    assert not list(py_package.parent.glob(".acme*")), "the temp folder was left behind"


def test_python_package_passes_its_own_tests(py_package):
    r = subprocess.run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider",
                        "-q"], cwd=py_package, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout


def test_installed_python_package_is_listed_and_runs_out_of_process(
        py_package, data_dir, tmp_path):
    target = scaffold.install(py_package)
    assert target == data_dir / "plugins" / "acme"
    assert (target / "acme" / "__init__.py").is_file()

    nodes = sb("nodes")
    assert nodes.returncode == 0, nodes.stderr
    line = next(x for x in nodes.stdout.splitlines() if x.startswith("acme.greet "))
    assert line.endswith("[tool: acme_greet]  [plugin: acme]")

    run = sb("run", greet_flow(tmp_path, "acme.greet"))
    assert run.returncode == 0, run.stderr
    assert [json.loads(x) for x in run.stdout.splitlines()] == [
        {"node": "show", "name": "Debug", "value": "Hello, Ada!"}]

    listed = sb("package", "list")
    assert listed.returncode == 0, listed.stderr
    assert any(x.split() == ["acme", "0.1.0", "python", str(target)]
               for x in listed.stdout.splitlines()), listed.stdout


# -- node --------------------------------------------------------------------
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (TEXTKIT_JS / "node_modules").is_dir(),
    reason="needs node and nodes/textkit-js/node_modules (npm install there)")


@needs_node
def test_node_package_passes_its_own_tests_installs_and_runs(tmp_path, data_dir):
    folder = scaffold.new_package("acme-js", "node", tmp_path)
    # Instead of npm install: the same packages, without the network.
    (folder / "node_modules").symlink_to(TEXTKIT_JS / "node_modules")
    r = subprocess.run(["node", "--test"], cwd=folder, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# pass 4" in r.stdout and "# fail 0" in r.stdout, r.stdout

    target = scaffold.install(folder)
    assert (target / "node_modules").is_symlink()
    nodes = sb("nodes")
    assert nodes.returncode == 0, nodes.stderr
    line = next(x for x in nodes.stdout.splitlines() if x.startswith("acme-js.greet "))
    assert line.endswith("[tool: acme_js_greet]  [plugin: acme-js]")
    run = sb("run", greet_flow(tmp_path, "acme-js.greet"))
    assert run.returncode == 0, run.stderr
    assert [json.loads(x) for x in run.stdout.splitlines()] == [
        {"node": "show", "name": "Debug", "value": "Hello, Ada!"}]


# -- refusals ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["Acme", "1acme", "-acme", "ac me", "a/b", "..", "",
                                  "a" * 65, "acmé"])
def test_a_bad_name_is_refused_naming_the_rule(name, tmp_path):
    with pytest.raises(PackageError, match="must be a lower-case letter"):
        scaffold.new_package(name, "python", tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["json", "runtime", "grpc"])
def test_a_name_that_is_already_a_python_module_is_refused(name, tmp_path):
    with pytest.raises(PackageError, match=f"a Python module '{name}' already exists"):
        scaffold.new_package(name, "python", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_language_is_refused(tmp_path):
    with pytest.raises(PackageError, match="--lang 'ruby'"):
        scaffold.new_package("acme", "ruby", tmp_path)


def test_an_existing_folder_is_refused_unless_empty(tmp_path):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(PackageError, match="already exists and is not empty"):
        scaffold.new_package("acme", "python", tmp_path)
    assert [p.name for p in (tmp_path / "acme").iterdir()] == ["notes.txt"]

    (tmp_path / "other").mkdir()
    folder = scaffold.new_package("other", "python", tmp_path)
    assert (folder / "plugin.json").is_file()


def test_a_package_folder_where_nothing_can_be_written_is_refused(tmp_path):
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    with pytest.raises(PackageError, match="cannot write there"):
        scaffold.new_package("acme", "python", tmp_path / "a-file")


def test_install_without_a_manifest_names_the_file(tmp_path, data_dir):
    with pytest.raises(PackageError, match=f"{tmp_path / 'plugin.json'}: not found"):
        scaffold.install(tmp_path)
    with pytest.raises(PackageError, match="not a package folder"):
        scaffold.install(tmp_path / "missing")


@pytest.mark.parametrize("manifest, field", [
    ({"name": "acme", "command": []}, "command"),
    ({"name": "Acme!", "command": ["node", "index.js"]}, "name"),
    ({"name": "acme", "command": ["x"], "call_timeout": -1}, "call_timeout"),
    ({"name": "acme", "command": ["x"], "colour": "red"}, "colour"),
])
def test_install_of_a_bad_manifest_names_the_file_and_the_field(manifest, field, tmp_path,
                                                                  data_dir):
    (tmp_path / "plugin.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(PackageError) as exc:
        scaffold.install(tmp_path)
    assert str(exc.value).startswith(f"{tmp_path / 'plugin.json'}: {field}: ")
    assert not (data_dir / "plugins" / "acme").exists()


def test_a_second_install_needs_force_which_replaces_the_package(tmp_path, data_dir):
    src = scaffold.new_package("acme", "python", tmp_path)
    target = scaffold.install(src)
    (data_dir / "plugins" / ".cache").mkdir()
    cached = host.cache_path(host.Plugin(host.read_manifest(target / "plugin.json"),
                                         target, "test"))
    cached.write_text("{}", encoding="utf-8")

    with pytest.raises(PackageError, match="already installed; --force replaces it"):
        scaffold.install(src)
    r = sb("package", "install", str(src))
    assert r.returncode == 2
    assert "--force replaces it" in r.stderr

    manifest = json.loads((src / "plugin.json").read_text(encoding="utf-8"))
    (src / "plugin.json").write_text(json.dumps({**manifest, "version": "0.2.0"}),
                                     encoding="utf-8")
    (src / "README.md").unlink()
    assert scaffold.install(src, force=True) == target
    assert host.read_manifest(target / "plugin.json").version == "0.2.0"
    assert not (target / "README.md").exists()  # replaced, not merged
    assert not cached.exists()  # its nodes are read again
    assert sorted(p.name for p in (data_dir / "plugins").iterdir()) == [".cache", "acme"]


def test_install_skips_caches_and_keeps_symlinks(tmp_path, data_dir):
    src = scaffold.new_package("acme", "python", tmp_path / "src")
    for junk in (".git/HEAD", "acme/__pycache__/x.pyc", ".pytest_cache/v"):
        (src / junk).parent.mkdir(parents=True, exist_ok=True)
        (src / junk).write_text("x", encoding="utf-8")
    shared = tmp_path / "shared"
    shared.mkdir()
    (src / "outside").symlink_to(os.path.relpath(shared, src))  # relative, out of the package
    (src / "inside").symlink_to("acme")                         # relative, within it
    target = scaffold.install(src)
    assert not (target / ".git").exists()
    assert not (target / ".pytest_cache").exists()
    assert not (target / "acme" / "__pycache__").exists()
    assert (target / "outside").is_symlink() and (target / "outside").resolve() == shared
    assert os.readlink(target / "inside") == "acme"


def test_a_failed_install_leaves_nothing_behind(tmp_path, data_dir):
    src = scaffold.new_package("acme", "python", tmp_path)
    os.mkfifo(src / "pipe")  # copying a named pipe is refused
    with pytest.raises(PackageError, match="could not be installed"):
        scaffold.install(src)
    assert list((data_dir / "plugins").iterdir()) == []


def test_list_names_each_package_and_warns_of_broken_ones(tmp_path, data_dir):
    target = scaffold.install(scaffold.new_package("acme", "python", tmp_path))
    broken = data_dir / "plugins" / "broken"
    broken.mkdir()
    (broken / "plugin.json").write_text('{"name": "broken"}', encoding="utf-8")
    lines = scaffold.list_packages()
    assert any(x.split() == ["acme", "0.1.0", "python", str(target)] for x in lines), lines
    assert any(x.startswith("warning: plugin broken: ") and "command" in x for x in lines), lines


def test_list_with_no_user_packages_says_where_they_go(data_dir):
    lines = [x for x in scaffold.list_packages() if not x.startswith("warning: ")]
    # Last, the in-process packages a flow may run out of process, by name.
    assert lines.pop().startswith("in-process packages (a flow may run any of them out of "
                                  "process): ai, browser, core, files, http, mail, mcp, triggers")
    bundled = {p.name for p in host.find_plugins()[0]}
    if not bundled:
        assert lines == [f"no plugin packages (install one into {data_dir / 'plugins'} "
                         "with switchboard package install PATH)"]
    else:
        assert {x.split()[0] for x in lines} == bundled


def test_the_node_template_takes_the_sdk_and_proto_from_this_switchboard(tmp_path):
    if not (TEXTKIT_JS / "switchboard.js").is_file():
        with pytest.raises(PackageError, match="switchboard.js"):
            scaffold.new_package("acme", "node", tmp_path)
        return
    folder = scaffold.new_package("acme", "node", tmp_path)
    assert (folder / "switchboard.js").read_bytes() == (TEXTKIT_JS / "switchboard.js").read_bytes()
    assert (folder / "plugin.proto").read_bytes() == wire.PROTO_PATH.read_bytes()
    ours = json.loads((folder / "package.json").read_text(encoding="utf-8"))["dependencies"]
    theirs = json.loads((TEXTKIT_JS / "package.json").read_text(encoding="utf-8"))
    assert ours == {k: theirs["dependencies"][k] for k in ours}
    assert host.read_manifest(folder / "plugin.json").command == ["node", "index.js"]

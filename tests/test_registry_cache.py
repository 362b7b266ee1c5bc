"""The node catalog cache (runtime.registry, ``Registry.default()``): the
specs come from the cache file while nothing they depend on changed, and a
node package is imported only when one of its classes is asked for; a
changed node package is seen at the next start."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime import registry as registry_module
from runtime.node import DECLARED
from runtime.registry import Registry

ROOT = Path(__file__).resolve().parents[1]


def test_cached_specs_are_the_classes_specs(data_dir):
    first = Registry()
    first.load_entry_points(cache=True)
    assert not first.from_cache
    assert (data_dir / "cache" / registry_module.CATALOG_FILE).is_file()
    cached = Registry()
    cached.load_entry_points(cache=True)
    assert cached.from_cache
    assert [s.type for s in cached.specs()] == [s.type for s in first.specs()]
    for spec in first.specs():
        assert cached.spec(spec.type).model_dump() == spec.model_dump(), spec.type
        assert cached.package_of(spec.type) == first.package_of(spec.type), spec.type
    assert cached.packages() == first.packages()
    assert cached.load_errors == first.load_errors
    # A class asked for is the package's own.
    assert cached.get("core.change") is first.get("core.change")
    assert "core.change" in cached and "no.such" not in cached


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A node package ``sbcachepkg`` on sys.path, loaded as a built-in one."""
    folder = tmp_path / "src" / "sbcachepkg"
    folder.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(folder.parent))
    monkeypatch.setattr(registry_module, "BUILTIN_MODULES",
                        (*registry_module.BUILTIN_MODULES, "sbcachepkg"))

    def write(params: str) -> None:
        (folder / "__init__.py").write_text(
            "from runtime.node import Node, Param, node\n\n"
            "@node('cachetest.thing', name='Thing', category='Test')\n"
            "class Thing(Node):\n" + textwrap.indent(params, "    ") + "\n")
        forget()

    def forget() -> None:
        """As a new process: the package not imported yet."""
        sys.modules.pop("sbcachepkg", None)
        DECLARED.pop("cachetest.thing", None)

    write.forget = forget
    yield write
    forget()


def test_a_changed_node_package_is_seen_and_an_unchanged_one_is_not_imported(data_dir, package):
    package('first = Param(str, "The first")')
    r = Registry()
    r.load_entry_points(cache=True)
    assert not r.from_cache and [p.name for p in r.spec("cachetest.thing").params] == ["first"]

    package.forget()
    r = Registry()
    r.load_entry_points(cache=True)
    assert r.from_cache and "sbcachepkg" not in sys.modules  # its spec without importing it
    assert [p.name for p in r.spec("cachetest.thing").params] == ["first"]
    assert r.get("cachetest.thing").__module__ == "sbcachepkg"  # asked for: imported now
    assert r.package_of("cachetest.thing") == "sbcachepkg"

    # The package is edited (even within the same second as its last change).
    package('first = Param(str, "The first")\nsecond = Param(int, "The second", default=2)')
    r = Registry()
    r.load_entry_points(cache=True)
    assert not r.from_cache
    assert [p.name for p in r.spec("cachetest.thing").params] == ["first", "second"]
    package.forget()
    r = Registry()
    r.load_entry_points(cache=True)
    assert r.from_cache and [p.name for p in r.spec("cachetest.thing").params] == \
        ["first", "second"]


def test_a_package_that_fails_to_import_is_not_cached(data_dir, package):
    package('first = Param(str, "The first")\nraise RuntimeError("not today")')
    r = Registry()
    r.load_entry_points(cache=True)
    assert "cachetest.thing" not in r and any("not today" in e for e in r.load_errors)
    assert not (data_dir / "cache" / registry_module.CATALOG_FILE).exists()


def test_a_broken_cache_file_is_read_again_from_the_packages(data_dir):
    path = data_dir / "cache" / registry_module.CATALOG_FILE
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    r = Registry()
    r.load_entry_points(cache=True)
    assert not r.from_cache and "core.change" in r
    assert path.read_text().startswith("{\"key\"")


def test_the_designer_start_imports_only_the_packages_its_flow_uses(tmp_path):
    env = dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path))
    script = ("import sys\nfrom runtime.registry import Registry\n"
              "from runtime.flow import load_flow, validate_flow\n"
              "r = Registry.default()\n"
              "flow = load_flow('resources/examples/email-assistant.flow.json', r, validate=False)\n"
              "validate_flow(flow, r)\n"
              "print(r.from_cache, sorted(m for m in sys.modules if m.count('.') == 1 "
              "and m.startswith('nodes.')))\n")
    runs = [subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
                           capture_output=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[0].stdout.startswith("False")  # the first start: every package, then the cache
    assert runs[1].stdout.strip() == "True ['nodes.ai', 'nodes.core', 'nodes.mail']"

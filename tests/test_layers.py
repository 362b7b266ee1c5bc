"""The runtime and the node packages never import Qt or the designer."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("PySide6", "qasync", "shiboken6", "designer")
HEADLESS = ("runtime", "nodes")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, absolute names, with line numbers
    (including imports inside functions: a lazy Qt import is still one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def forbidden_imports() -> list[str]:
    bad = []
    for pkg in HEADLESS:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for line, name in imported_modules(path):
                if name.split(".")[0] in FORBIDDEN:
                    bad.append((str(path.relative_to(ROOT)), line, name))
    return [f"{p}:{line}: imports {name}" for p, line, name in sorted(bad)]


def test_no_headless_module_imports_qt_or_the_designer():
    assert forbidden_imports() == []


def test_the_scan_would_see_a_forbidden_import(tmp_path, monkeypatch):
    # The scan itself must be able to fail.
    fake = tmp_path / "runtime" / "sub"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("def f():\n    from PySide6 import QtCore\n"
                                 "import designer.app\nfrom .. import engine\n",
                                 encoding="utf-8")
    (tmp_path / "nodes").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert forbidden_imports() == ["runtime/sub/bad.py:2: imports PySide6",
                                   "runtime/sub/bad.py:3: imports designer.app"]


def test_import_linter_contract():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (the AST scan above still runs)")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "The runtime and nodes never import Qt KEPT" in r.stdout
    # Dependencies point one way inside the runtime, its agent package and
    # the inspector: the import cycles that once ran both ways stay broken.
    for name in ("Runtime layers", "LLM providers", "Inspector: tabs depend on the context"):
        assert any(line.startswith(name) for line in r.stdout.splitlines()), (name, r.stdout)
    assert "Contracts: 4 kept, 0 broken." in r.stdout


def test_the_runtime_has_no_import_cycle():
    """The same fact seen without import-linter: no module of runtime/ reaches
    itself through its imports (lazy and TYPE_CHECKING ones included)."""
    import networkx as nx

    graph = nx.DiGraph()
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for _, name in imported_modules(path):
            if name.startswith("runtime.") and name != module:
                graph.add_edge(module, name)
    assert list(nx.simple_cycles(graph)) == []

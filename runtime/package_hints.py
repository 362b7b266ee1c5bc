"""Which package provides a node type that is not installed, and how to
install it: the hint after "unknown node type 'x.y'".

Looked for, in order: a package whose load failed (its error); a node package
folder beside the flow or among the bundled examples whose source declares
the type (``@node("x.y"`` in Python, ``node('x.y'`` in JavaScript); a plugin
whose cached specs listed it. Only what is found is said; otherwise the hint
says plainly that no installed package has the type and how packages are
installed.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from .paths import data_dir

#: Where the source tree keeps its example node packages (not in a wheel).
EXAMPLE_PACKAGES = Path(__file__).resolve().parents[1] / "resources" / "examples" / "packages"
_DECLARES = re.compile(r"""\bnode\(\s*['"]([A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+)['"]""")
_SOURCE_SUFFIXES = {".py", ".js", ".mjs", ".ts"}
_SKIP_DIRS = {"node_modules", ".git", "build", "dist", "__pycache__", ".venv", "venv"}
MAX_FILES = 400  # per package folder: a hint must not crawl a disk
MAX_FILE_BYTES = 1024 * 1024


def unknown_type_message(type_id: str, flow_file: str = "", registry: Any = None) -> str:
    """"unknown node type 'x.y'" and, when known, who provides it and how to
    install that."""
    return f"unknown node type '{type_id}'" + _hint(type_id, flow_file, registry)


def _hint(type_id: str, flow_file: str, registry: Any) -> str:
    prefix = type_id.split(".")[0]
    waiting = _plugin_needing_setup(type_id)
    if waiting:
        return waiting
    for error in getattr(registry, "load_errors", []) or []:
        if error.startswith((f"entry point {prefix}:", f"plugin {prefix}:")):
            return f": its package is installed but did not load ({error})"
    for folder in _package_folders(flow_file):
        package = _describe(folder)
        if package is not None and type_id in _declared_types(folder):
            name, install = package
            return (f": the node package '{name}' in {_shown(folder)} provides it and is not "
                    f"installed; install it with: {install}")
    plugin = _cached_plugin(type_id)
    if plugin:
        return (f": the plugin package '{plugin}' served it before and is not installed now; "
                "install its folder again with: switchboard package install FOLDER")
    same = sorted(t for t in _installed(registry) if t.split(".")[0] == prefix)
    if same:
        listed = ", ".join(same[:6]) + (", ..." if len(same) > 6 else "")
        return (f": the installed '{prefix}' node types are {listed}; the flow may need a newer "
                "version of their package")
    return (f": no installed node package provides '{prefix}' node types. Install the one that "
            "does: pip install it (a Python node package), or switchboard package install "
            "FOLDER (a plugin folder with a plugin.json); switchboard nodes lists the installed "
            "types")


def _plugin_needing_setup(type_id: str) -> str:
    """The hint for a type that a found plugin package declares but cannot
    serve until its own packages are installed (a Node.js plugin without its
    node_modules), or ""."""
    from .plugin.host import MANIFEST, plugin_folders, read_manifest, setup_needed

    for base in plugin_folders():
        try:
            manifests = sorted(base.glob(f"*/{MANIFEST}"))[:200]
        except OSError:
            continue
        for manifest in manifests:
            folder = manifest.parent
            npm = setup_needed(folder)
            if not npm or type_id not in _declared_types(folder):
                continue
            try:
                name = read_manifest(manifest).name
            except ValueError:
                name = folder.name
            return (f": the plugin package '{name}' in {_shown(folder)} provides it, but needs "
                    f"its npm packages first: run `{npm}` in {_shown(folder)}")
    return ""


def _package_folders(flow_file: str) -> list[Path]:
    """Folders that may hold a node package: the flow's own and its parent
    (an example flow kept inside its package), their packages/ subfolders,
    and the bundled example packages."""
    places: list[Path] = []
    if flow_file:
        here = Path(flow_file).resolve().parent
        places += [here, here.parent]
        for base in (here, here.parent):
            places += _children(base / "packages")
    places += _children(EXAMPLE_PACKAGES)
    return list(dict.fromkeys(places))


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())[:100]
    except OSError:
        return []


def _describe(folder: Path) -> tuple[str, str] | None:
    """(package name, install command) of a node package folder, or None."""
    manifest = folder / "plugin.json"
    if manifest.is_file():
        try:
            name = json.loads(manifest.read_text(encoding="utf-8")).get("name") or folder.name
        except (OSError, ValueError, AttributeError):
            name = folder.name
        return str(name), f"switchboard package install {_shown(folder)}"
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (OSError, ValueError):
            return None
        if "switchboard.nodes" in (project.get("entry-points") or {}):
            return str(project.get("name") or folder.name), f"pip install -e {_shown(folder)}"
    return None


def _declared_types(folder: Path) -> set[str]:
    found: set[str] = set()
    seen = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")]
        for fname in files:
            path = Path(root) / fname
            if path.suffix not in _SOURCE_SUFFIXES:
                continue
            seen += 1
            if seen > MAX_FILES:
                return found
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    continue
                found.update(_DECLARES.findall(path.read_text(encoding="utf-8", errors="ignore")))
            except OSError:
                continue
    return found


def _cached_plugin(type_id: str) -> str:
    """The plugin whose cached specs list ``type_id`` (runtime.plugin.host
    keeps them by plugin name), or ""."""
    for path in sorted((data_dir() / "plugins" / ".cache").glob("*.json"))[:200]:
        try:
            cached = json.loads(path.read_bytes())
            specs = cached.get("specs", []) if isinstance(cached, dict) else []
        except (OSError, ValueError):
            continue
        if any(isinstance(s, dict) and s.get("type") == type_id for s in specs):
            return path.stem
    return ""


def _installed(registry: Any) -> list[str]:
    try:
        return [s.type for s in registry.specs()] if registry is not None else []
    except Exception:  # noqa: BLE001 - a hint must never hide the error it explains
        return []


def _shown(folder: Path) -> str:
    """The folder relative to the working directory when it is inside it."""
    try:
        return str(folder.relative_to(Path.cwd()))
    except ValueError:
        return str(folder)

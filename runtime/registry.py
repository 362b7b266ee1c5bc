"""The node catalog. Node packages register through the entry point group
``switchboard.nodes`` (each entry point names a module whose ``@node``
classes are the package's nodes); the built-in packages take the same path.

``Registry.default()`` keeps the catalog (every node type's spec, its package
or plugin, the load errors) in a cache file, ``node-catalog.json`` in the
data dir's ``cache`` folder. While nothing it depends on changed (the files
of the runtime, of each node package and plugin, the entry points, the
installed packages), a start reads the specs from there and imports a node
package only when one of its classes is asked for (``get``: a flow that
uses one of its nodes is validated or run); otherwise it imports them all
and writes the cache again."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .node import DECLARED as _declared
from .node import Node

if TYPE_CHECKING:
    from .spec import NodeSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "switchboard.nodes"
# Used only when the project runs from a source tree that was never installed,
# so its entry points are not in any distribution's metadata.
BUILTIN_MODULES = ("nodes.core", "nodes.ai", "nodes.mail", "nodes.http", "nodes.files",
                   "nodes.browser", "nodes.triggers", "nodes.mcp")
#: Changed when what the catalog file holds changes.
CATALOG_FORMAT = 1
CATALOG_FILE = "node-catalog.json"
_SKIP_DIRS = frozenset({"node_modules", ".git", "__pycache__", ".venv"})

class Registry:
    """Node types by id. ``Registry(classes)`` makes a small one for tests."""

    def __init__(self, classes: list[type[Node]] | None = None) -> None:
        self._classes: dict[str, type[Node]] = {}
        self.load_errors: list[str] = []
        # Node type -> (entry point name, module) of its in-process package,
        # so that a flow can choose to run that package out of process.
        self._package: dict[str, tuple[str, str]] = {}
        self._isolated: dict[str, type[Node]] = {}
        # From the catalog cache, not imported yet: type -> its spec, and
        # where its class comes from ("module", module, label, package) or
        # ("plugin", plugin name).
        self._lazy: dict[str, tuple[NodeSpec, tuple[str, ...]]] = {}
        self._plugins: dict[str, Any] = {}
        self.from_cache = False
        self._passing_error = False
        for cls in classes or []:
            self._classes[cls.spec.type] = cls

    _default: Registry | None = None

    @classmethod
    def default(cls) -> Registry:
        if cls._default is None:
            reg = cls()
            reg.load_entry_points(cache=True)
            cls._default = reg
        return cls._default

    @staticmethod
    def _modules() -> list[tuple[str, str, str, str]]:
        """(module, label, package, version) of every in-process package."""
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
        names = {ep.value.split(":")[0] for ep in eps}
        found = [(ep.value.split(":")[0], f"entry point {ep.name}", ep.name,
                  ep.dist.version if ep.dist is not None else "") for ep in eps]
        found += [(mod, mod, mod.split(".")[-1], "") for mod in BUILTIN_MODULES
                  if mod not in names]
        return found

    def load_entry_points(self, cache: bool = False) -> None:
        """Every in-process node package and plugin. ``cache``: through the
        catalog cache (see the module's doc)."""
        modules = self._modules()
        plugins = errors = None
        key = path = None
        if cache:
            try:
                from .plugin.discovery import find_plugins

                plugins, errors = find_plugins()
                key = _catalog_key(modules, plugins)
                path = _catalog_path()
                if self._read_catalog(path, key, plugins):
                    return
            except Exception:  # noqa: BLE001 - a cache problem: load it all, as without one
                log.debug("node catalog cache not used", exc_info=True)
                key = None
        self._passing_error = False
        for module, label, package, _version in modules:
            self._load(module, label=label, package=package)
        self.load_plugins(found=(plugins, errors) if plugins is not None else None)
        if key is not None and path is not None and not self._passing_error:
            self._write_catalog(path, key)

    def _read_catalog(self, path: Path, key: str, plugins: list) -> bool:
        from pydantic import ValidationError

        from .spec import NodeSpec

        try:
            data = json.loads(path.read_bytes())
            if not isinstance(data, dict) or data.get("key") != key:
                return False
            lazy = {}
            for entry in data["types"]:
                spec = NodeSpec.model_validate(entry["spec"])
                lazy[spec.type] = (spec, tuple(entry["from"]))
            errors = [str(e) for e in data["errors"]]
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            return False
        self._plugins = {p.name: p for p in plugins}
        for type_id, (_spec, where) in lazy.items():
            if where[0] == "module":
                self._package[type_id] = (where[3], where[1])
            elif where[0] != "plugin" or where[1] not in self._plugins:
                return False
        self._lazy = lazy
        self.load_errors += errors
        self.from_cache = True
        return True

    def _write_catalog(self, path: Path, key: str) -> None:
        types = []
        labels = {module: label for module, label, _p, _v in self._modules()}
        for type_id, cls in self._classes.items():
            spec = cls.spec
            if spec.plugin:
                where = ["plugin", spec.plugin]
            elif type_id in self._package:
                package, module = self._package[type_id]
                where = ["module", module, labels.get(module, module), package]
            else:
                return  # a class of no package (added by hand): not a catalog to keep
            types.append({"spec": spec.model_dump(mode="json"), "from": where})
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"key": key, "types": types, "errors": self.load_errors}),
                           encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as exc:
            log.debug("cannot write the node catalog cache %s: %s", path, exc)

    def _resolve(self, type_id: str) -> type[Node] | None:
        """The class of a type known from the catalog cache: its package
        imported, or its plugin's remote class made, now."""
        entry = self._lazy.get(type_id)
        if entry is None:
            return None
        spec, where = entry
        if where[0] == "module":
            _kind, module, label, package = where
            self._load(module, label=label, package=package)
            # What the catalog says stays true: each type now declared is of
            # the package it names (a package importing another must not
            # claim its nodes); a package that failed to import is one
            # attempt, its types unknown from then on, as without a cache.
            for t, (_s, w) in list(self._lazy.items()):
                if w[0] == "module" and (t in _declared or w[1] == module):
                    if t in _declared:
                        self._classes[t] = _declared[t]
                        self._package[t] = (w[3], w[1])
                    self._lazy.pop(t, None)
        else:
            from .plugin import host

            process = host.process_for(self._plugins[where[1]])
            self._classes[type_id] = host.remote_class(spec, process)
            self._lazy.pop(type_id, None)
        return self._classes.get(type_id)

    def load_plugins(self, found: tuple[list, list] | None = None) -> None:
        """The nodes of every plugin package (runtime.plugin.host): specs
        from the cache or the plugin itself; a plugin that cannot say what
        it serves is a load error naming it, and the others still load."""
        from .plugin import host

        plugins, errors = found if found is not None else host.find_plugins()
        self.load_errors += errors
        for plugin in plugins:
            try:
                specs = host.load_specs(plugin)
            except host.PluginError as exc:
                # A plugin that only needs its packages installed is said where
                # its nodes matter (switchboard nodes, a flow using one), not
                # on every command.
                needs_setup = isinstance(exc, host.PluginNeedsSetup)
                # (needing setup lasts until its folder changes: that may be cached)
                self._passing_error = self._passing_error or not needs_setup
                log.log(logging.INFO if needs_setup else logging.WARNING, "%s", exc)
                self.load_errors.append(str(exc))
                continue
            process = host.process_for(plugin)
            for spec in specs:
                if spec.type in self._classes and not self._classes[spec.type].spec.plugin:
                    self.load_errors.append(f"plugin {plugin.name}: node type {spec.type} "
                                            "is already a built-in node; ignored")
                    continue
                self._classes[spec.type] = host.remote_class(spec, process)

    def package_of(self, type_id: str) -> str:
        """The name of the in-process package that declares ``type_id``
        (its ``switchboard.nodes`` entry point), or ""."""
        entry = self._package.get(type_id)
        return entry[0] if entry else ""

    def packages(self) -> list[str]:
        """Names of the in-process node packages, in load order."""
        return list(dict.fromkeys(name for name, _ in self._package.values()))

    def isolated(self, type_id: str) -> type[Node] | None:
        """A class for ``type_id`` that runs its package out of process (the
        Python SDK's plugin server), or None for a type of no package."""
        cls = self._isolated.get(type_id)
        if cls is None and type_id in self._package:
            from .plugin import host

            name, module = self._package[type_id]
            process = host.process_for(host.python_plugin(name, module))
            local = self.spec(type_id)
            cls = self._isolated[type_id] = host.remote_class(local, process)
        return cls

    def _load(self, module: str, label: str, package: str = "") -> None:
        before = set(_declared)
        try:
            importlib.import_module(module)
        except Exception as exc:  # a broken package must not take the others down
            self._passing_error = True  # perhaps of this moment: not kept in the catalog cache
            log.exception("cannot load node package %s", label)
            self.load_errors.append(f"{label}: {exc}")
            return
        for type_id, klass in _declared.items():
            # Also classes declared before (the module was imported earlier),
            # but only of this module: "nodes.core" must not claim "nodes.corex".
            mod = klass.__module__
            if type_id not in before or mod == module or mod.startswith(module + "."):
                self._classes[type_id] = klass
                if package:
                    self._package[type_id] = (package, module)

    def get(self, type_id: str) -> type[Node] | None:
        cls = self._classes.get(type_id)
        if cls is None and type_id in self._lazy:
            cls = self._resolve(type_id)
        return cls

    def spec(self, type_id: str) -> NodeSpec | None:
        cls = self._classes.get(type_id)
        if cls is not None:
            return cls.spec
        entry = self._lazy.get(type_id)
        return entry[0] if entry else None

    def specs(self) -> list[NodeSpec]:
        specs = [c.spec for c in self._classes.values()]
        specs += [spec for t, (spec, _w) in self._lazy.items() if t not in self._classes]
        return sorted(specs, key=lambda s: (s.category, s.name))

    def __contains__(self, type_id: str) -> bool:
        return type_id in self._classes or type_id in self._lazy

    def __iter__(self):
        for type_id in list(self._lazy):
            self.get(type_id)
        return iter(list(self._classes.values()))


def _catalog_path() -> Path:
    from .paths import data_dir

    return data_dir() / "cache" / CATALOG_FILE


def _walk(h: Any, root: Path) -> None:
    """Each file under ``root``: its path, size and last change."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            h.update(f"{full}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())


def _catalog_key(modules: list[tuple[str, str, str, str]], plugins: list) -> str:
    """What the catalog depends on: this Python and its installed packages
    (each site-packages folder's last change: an install or removal changes it),
    the runtime's files, each node package's (entry point, version, files),
    and each plugin's manifest and files. A change to any means a new key."""
    h = hashlib.sha256(f"{CATALOG_FORMAT}\0{sys.version}\0{sys.executable}\n".encode())
    for entry in sys.path:
        if not entry.endswith(("site-packages", "dist-packages")):
            continue  # the script's or current folder: changes with the user's files
        try:
            h.update(f"{entry}\0{os.stat(entry or '.').st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{entry}\0-\n".encode())
    _walk(h, Path(__file__).resolve().parent)
    for module, label, package, version in modules:
        h.update(f"{module}\0{label}\0{package}\0{version}\n".encode())
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            h.update(b"missing\n")
        elif found.submodule_search_locations:
            for folder in found.submodule_search_locations:
                _walk(h, Path(folder))
        elif found.origin:
            st = os.stat(found.origin)
            h.update(f"{found.origin}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for plugin in plugins:
        h.update(f"{plugin.manifest.model_dump_json()}\0{plugin.folder}\n".encode())
        if plugin.watch is not None and Path(plugin.watch).is_dir():
            _walk(h, Path(plugin.watch))
    return h.hexdigest()

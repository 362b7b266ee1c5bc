"""The node catalog. Node packages register through the entry point group
``switchboard.nodes`` (each entry point names a module whose ``@node``
classes are the package's nodes); the built-in packages take the same path."""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

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

class Registry:
    """Node types by id. ``Registry(classes)`` makes a small one for tests."""

    def __init__(self, classes: list[type[Node]] | None = None) -> None:
        self._classes: dict[str, type[Node]] = {}
        self.load_errors: list[str] = []
        # Node type -> (entry point name, module) of its in-process package,
        # so that a flow can choose to run that package out of process.
        self._package: dict[str, tuple[str, str]] = {}
        self._isolated: dict[str, type[Node]] = {}
        for cls in classes or []:
            self._classes[cls.spec.type] = cls

    _default: Registry | None = None

    @classmethod
    def default(cls) -> Registry:
        if cls._default is None:
            reg = cls()
            reg.load_entry_points()
            cls._default = reg
        return cls._default

    def load_entry_points(self) -> None:
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
        names = {ep.value.split(":")[0] for ep in eps}
        for ep in eps:
            self._load(ep.value.split(":")[0], label=f"entry point {ep.name}", package=ep.name)
        for mod in BUILTIN_MODULES:
            if mod not in names:
                self._load(mod, label=mod, package=mod.split(".")[-1])
        self.load_plugins()

    def load_plugins(self) -> None:
        """The nodes of every plugin package (runtime.plugin.host): specs
        from the cache or the plugin itself; a plugin that cannot say what
        it serves is a load error naming it, and the others still load."""
        from .plugin import host

        plugins, errors = host.find_plugins()
        self.load_errors += errors
        for plugin in plugins:
            try:
                specs = host.load_specs(plugin)
            except host.PluginError as exc:
                # A plugin that only needs its packages installed is said where
                # its nodes matter (switchboard nodes, a flow using one), not
                # on every command.
                log.log(logging.INFO if isinstance(exc, host.PluginNeedsSetup)
                        else logging.WARNING, "%s", exc)
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
            local = self._classes[type_id].spec
            cls = self._isolated[type_id] = host.remote_class(local, process)
        return cls

    def _load(self, module: str, label: str, package: str = "") -> None:
        before = set(_declared)
        try:
            importlib.import_module(module)
        except Exception as exc:  # a broken package must not take the others down
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
        return self._classes.get(type_id)

    def spec(self, type_id: str) -> NodeSpec | None:
        cls = self._classes.get(type_id)
        return cls.spec if cls else None

    def specs(self) -> list[NodeSpec]:
        return sorted((c.spec for c in self._classes.values()), key=lambda s: (s.category, s.name))

    def __contains__(self, type_id: str) -> bool:
        return type_id in self._classes

    def __iter__(self):
        return iter(self._classes.values())

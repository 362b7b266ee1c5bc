"""Finding plugin packages: their manifests (``plugin.json``, or a Python
node package named by an entry point) and the errors a plugin raises.

A plugin package is found by the entry point group ``switchboard.plugins``
(its value names a Python node package, served by the Python SDK) or by a
folder with a ``plugin.json`` (any language) under
``$SWITCHBOARD_DATA_DIR/plugins/`` or among the bundled packages in
``nodes/``; first of a name wins. Starting and talking to one is
``runtime.plugin.host``'s part.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..node import NodeConfigError
from ..paths import data_dir
from . import wire

ENTRY_POINT_GROUP = "switchboard.plugins"
MANIFEST = "plugin.json"
#: Most plugins found.
MAX_PLUGINS = 200

class PluginManifest(BaseModel):
    """``plugin.json``: what a plugin package is and how it is started."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    version: str = Field("0", max_length=64)
    language: str = Field("", max_length=32)
    description: str = Field("", max_length=2000)
    #: The command that starts the plugin, run in the package's folder.
    command: list[str] = Field(min_length=1, max_length=64)
    env: dict[str, str] = Field(default_factory=dict)
    start_timeout: float = Field(20.0, gt=0, le=600)
    call_timeout: float = Field(60.0, gt=0, le=86400)


class Plugin:
    """A found plugin package: its manifest and where it came from."""

    def __init__(self, manifest: PluginManifest, folder: Path | None, origin: str,
                 watch: Path | None = None) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.folder = folder
        self.origin = origin
        self.watch = watch or folder  # what the spec cache's fingerprint looks at


class PluginError(NodeConfigError):
    """A plugin cannot serve: it did not start, stopped during a call, or a
    call timed out. The text names the plugin and is safe to show the LLM."""


class PluginNeedsSetup(PluginError):
    """A plugin whose packages are not installed yet (a Node.js package
    copied or cloned without its node_modules): said where its nodes matter
    (the catalog, a flow that uses one), not on every command."""


def setup_needed(folder: Path | None) -> str:
    """The command that installs a plugin folder's own packages when they
    are missing (``npm ci``, or ``npm install`` with no lock file), else ""."""
    if folder is None or not (folder / "package.json").is_file() \
            or (folder / "node_modules").is_dir():
        return ""
    return "npm ci" if (folder / "package-lock.json").is_file() else "npm install"


# -- finding plugins ---------------------------------------------------------
def plugin_folders() -> list[Path]:
    """Where plugin.json packages are looked for: the user's plugins folder,
    then the bundled ones next to the built-in node packages."""
    folders = [data_dir() / "plugins"]
    spec = importlib.util.find_spec("nodes")
    if spec is not None and spec.submodule_search_locations:
        folders += [Path(p) for p in spec.submodule_search_locations]
    return folders


def read_manifest(path: Path) -> PluginManifest:
    """The manifest at ``path``; ValueError naming the file and the field."""
    try:
        raw = path.read_bytes()
        if len(raw) > 256 * 1024:
            raise ValueError("over 256 KB")
        return PluginManifest.model_validate(wire.loads(raw))
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
                          for e in exc.errors()[:3])
        raise ValueError(f"{path}: {where}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def python_plugin(name: str, module: str, version: str = "0", origin: str = "") -> Plugin:
    """A Python node package served out of process by the Python SDK."""
    manifest = PluginManifest(name=name, version=version, language="python",
                              command=[sys.executable, "-m", "runtime.plugin", "serve", module,
                                       "--name", name])
    watch = None
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is not None and spec.origin:
        watch = Path(spec.origin).parent
    return Plugin(manifest, None, origin or f"python package {module}", watch)


def find_plugins() -> tuple[list[Plugin], list[str]]:
    """Every plugin package found, first of a name wins; and what could not
    be read, each naming its file or entry point."""
    found: dict[str, Plugin] = {}
    errors: list[str] = []

    def add(plugin: Plugin) -> None:
        if plugin.name in found:
            errors.append(f"plugin {plugin.name}: {plugin.origin} is hidden by "
                          f"{found[plugin.name].origin}")
        elif len(found) >= MAX_PLUGINS:
            errors.append(f"plugin {plugin.name}: more than {MAX_PLUGINS} plugins; ignored")
        else:
            found[plugin.name] = plugin

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        version = ep.dist.version if ep.dist is not None else "0"
        try:
            add(python_plugin(ep.name, ep.value.split(":")[0], version,
                              f"entry point {ep.name}"))
        except (ValidationError, ValueError) as exc:
            errors.append(f"plugin entry point {ep.name}: {exc}")
    for folder in plugin_folders():
        try:
            manifests = sorted(folder.glob(f"*/{MANIFEST}"))
        except OSError:
            continue
        for path in manifests:
            try:
                manifest = read_manifest(path)
            except ValueError as exc:
                errors.append(f"plugin {path.parent.name}: {exc}")
                continue
            add(Plugin(manifest, path.parent, str(path.parent)))
    return list(found.values()), errors

"""Subflows: where a definition is found (the flow file's ``subflows``
section, else a library file NAME.subflow.json), the node spec its
instances have (type ``subflow:NAME``: its ``subflow.in`` nodes are the
instance's inputs, its ``subflow.out`` nodes its outputs, its params the
instance's params), and a registry that knows those types beside the
node packages' (``with_subflows``).

A library is a folder of NAME.subflow.json files, each the current version
of one subflow. Saving a new version keeps the one it replaces beside it as
NAME@VERSION.subflow.json, so an instance that pins an older version still
runs what it pinned. The folders searched, first match wins: the flow
file's own ``subflows/`` folder, each folder of ``$SWITCHBOARD_SUBFLOWS``
(``os.pathsep``-separated), and ``subflows/`` in the user's data dir.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..spec import NodeSpec, ParamSpec, PortSpec, Scope, ToolSpec
from .model import SEMVER_RE, SUBFLOW_NAME_RE, Flow, FlowError, Problem, SubflowDef, SubflowParam

if TYPE_CHECKING:
    from ..node import Node
    from ..registry import Registry

#: The node types of a definition's inputs and outputs.
IN_TYPE = "subflow.in"
OUT_TYPE = "subflow.out"
#: Instances' node types: ``subflow:`` and the definition's name.
TYPE_PREFIX = "subflow:"
#: The palette category of every subflow.
CATEGORY = "Subflows"
#: Subflows inside subflows inside ...: at most this deep.
MAX_NESTING = 16
#: The folders of a shared library, beside the flow's own subflows/ folder.
LIBRARY_ENV = "SWITCHBOARD_SUBFLOWS"
LIBRARY_SUFFIX = ".subflow.json"
#: Largest library file read.
MAX_LIBRARY_BYTES = 20 * 1024 * 1024


def is_instance_type(type_id: str) -> bool:
    return type_id.startswith(TYPE_PREFIX)


def subflow_name(type_id: str) -> str:
    """The definition's name an instance type names (``subflow:NAME``)."""
    return type_id[len(TYPE_PREFIX):]


def port_names(defn: SubflowDef, node_type: str) -> list[str]:
    """The names of a definition's inputs (``IN_TYPE``) or outputs
    (``OUT_TYPE``): each such node's ``name`` param, else ``in``/``out``
    (``in2``, ``out2``... for a second unnamed one), in the order of its
    nodes."""
    base = "in" if node_type == IN_TYPE else "out"
    names: list[str] = []
    for n in defn.nodes:
        if n.type != node_type:
            continue
        setting = n.params.get("name")
        name = setting.value if setting is not None and setting.scope is Scope.CUSTOM else None
        if not isinstance(name, str) or not name:
            name = base if base not in names else f"{base}{len(names) + 1}"
        names.append(name)
    return names


def param_spec(p: SubflowParam) -> ParamSpec:
    """The spec an instance's param has: custom and message always, AI when
    the definition allows it. One without a default is required (an
    instance must set it; validation says so, naming the instance)."""
    scopes = ([Scope.AI] if p.ai_allowed and not p.secret else []) + [Scope.CUSTOM, Scope.MESSAGE]
    from ..node.declare import label_for

    return ParamSpec(name=p.name, type=p.type, label=p.label or label_for(p.name),
                     description=p.description, default=p.default,
                     has_default=p.default is not None, optional=False,
                     allowed_scopes=scopes, default_scope=Scope.CUSTOM, choices=p.choices,
                     secret=p.secret, visible_if=p.visible_if)


def instance_spec(defn: SubflowDef, *, package: str = "flow") -> NodeSpec:
    """The spec of ``defn``'s instances: its inputs and outputs as ports, its
    params as params, and a tool of its own name and description (an
    instance wired to an agent's tools port is one tool). ``package`` says
    where the definition lives: ``flow`` (this file) or ``library``."""
    return NodeSpec(
        type=defn.type, name=defn.label or defn.name, category=CATEGORY,
        description=defn.description, icon=defn.icon or "subflow",
        inputs=[PortSpec(name=n, label=n, kind="in") for n in port_names(defn, IN_TYPE)],
        outputs=[PortSpec(name=n, label=n) for n in port_names(defn, OUT_TYPE)],
        params=[param_spec(p) for p in defn.params],
        tool=ToolSpec(name=defn.name, description=defn.description or defn.label or defn.name),
        package=package)


# -- the library --------------------------------------------------------------
def library_dirs(flow_file: str = "") -> list[Path]:
    """The folders searched for NAME.subflow.json, first match wins."""
    dirs: list[Path] = []
    if flow_file:
        dirs.append(Path(flow_file).resolve().parent / "subflows")
    for part in os.environ.get(LIBRARY_ENV, "").split(os.pathsep):
        if part.strip():
            dirs.append(Path(part.strip()).expanduser())
    from ..paths import data_dir

    dirs.append(data_dir() / "subflows")
    return dirs


def version_key(version: str) -> tuple:
    """Sort key of a semver version (a pre-release sorts before its release)."""
    m = re.match(SEMVER_RE, version or "")
    if m is None:
        return (-1, -1, -1, 0, "")
    major, minor, patch, pre = m.groups()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")


@dataclass(frozen=True)
class LibraryEntry:
    """One library file: its path and the definition it holds."""

    path: Path
    definition: SubflowDef


def read_library_file(path: Path) -> SubflowDef:
    """The definition in one library file, or FlowError naming the file and
    what is wrong with it."""
    file = str(path)
    try:
        if path.stat().st_size > MAX_LIBRARY_BYTES:
            raise FlowError([Problem(file=file, message=f"larger than {MAX_LIBRARY_BYTES} bytes")])
        data = json.loads(path.read_bytes())
    except FlowError:
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise FlowError([Problem(file=file, message=f"cannot read the subflow: {exc}")]) from None
    if not isinstance(data, dict) or data.get("format") != "switchboard.subflow/1":
        raise FlowError([Problem(file=file, field="format",
                                 message="not a subflow file: expected format 'switchboard.subflow/1'")])
    try:
        defn = SubflowDef.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise FlowError([Problem(file=file, field=where or None, message=first["msg"])]) from None
    if not defn.version:
        raise FlowError([Problem(file=file, field="version",
                                 message="a library subflow needs a version (semver, e.g. 1.0.0)")])
    return defn


def find_library(name: str, flow_file: str = "", version: str | None = None) -> LibraryEntry | None:
    """The library file of subflow ``name``: the current one (NAME.subflow.json
    of the first folder that has it), or with ``version`` the one of that
    version (the current file if it is that version, else NAME@VERSION.subflow.json
    beside it). None if there is none. Raises FlowError for a file that is
    there but unreadable."""
    if not re.match(SUBFLOW_NAME_RE, name):
        return None
    for folder in library_dirs(flow_file):
        current = folder / (name + LIBRARY_SUFFIX)
        if not current.is_file():
            continue
        defn = read_library_file(current)
        if version is None or defn.version == version:
            return LibraryEntry(current, defn)
        old = folder / f"{name}@{version}{LIBRARY_SUFFIX}"
        if old.is_file():
            return LibraryEntry(old, read_library_file(old))
        return None
    return None


def library_subflows(flow_file: str = "") -> list[LibraryEntry]:
    """The current version of every subflow in the library folders (the first
    folder's wins), for the palette. Unreadable files are left out."""
    found: dict[str, LibraryEntry] = {}
    for folder in library_dirs(flow_file):
        try:
            files = sorted(folder.glob("*" + LIBRARY_SUFFIX))
        except OSError:
            continue
        for path in files[:10_000]:
            if "@" in path.name:
                continue
            name = path.name[: -len(LIBRARY_SUFFIX)]
            if name in found:
                continue
            try:
                found[name] = LibraryEntry(path, read_library_file(path))
            except FlowError:
                continue
    return list(found.values())


def save_to_library(defn: SubflowDef, folder: Path) -> Path:
    """Write ``defn`` (which must have a version) as the current version in
    ``folder``; the file it replaces, if of another version, is kept as
    NAME@VERSION.subflow.json. Atomic: a crash leaves the old file or the new."""
    from ..paths import write_atomic_bytes

    if not defn.version:
        raise ValueError("a library subflow needs a version")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (defn.name + LIBRARY_SUFFIX)
    if path.is_file():
        try:
            old = read_library_file(path)
        except FlowError:
            old = None
        if old is not None and old.version and old.version != defn.version:
            keep = folder / f"{defn.name}@{old.version}{LIBRARY_SUFFIX}"
            if not keep.exists():
                write_atomic_bytes(keep, path.read_bytes(), 0o644)
    text = json.dumps(defn.to_json(library=True), indent=2, ensure_ascii=False) + "\n"
    write_atomic_bytes(path, text.encode("utf-8"), 0o644)
    return path


# -- a registry that knows a flow's subflows -----------------------------------
def definitions(flow: Flow, flow_file: str = "") -> dict[str, tuple[SubflowDef, str]]:
    """Every definition a flow's instances (and its definitions' instances,
    transitively) use: name -> (definition, "flow" or "library"). A library
    one is the version the first instance pins, or the current one. Names
    not found are left out (validation says why)."""
    found: dict[str, tuple[SubflowDef, str]] = {d.name: (d, "flow") for d in flow.subflows}
    todo = [flow.nodes] + [d.nodes for d in flow.subflows]
    while todo and len(found) < 10_000:
        for n in todo.pop():
            if not is_instance_type(n.type):
                continue
            name = subflow_name(n.type)
            if name in found:
                continue
            try:
                entry = find_library(name, flow_file, n.subflow.version if n.subflow else None)
            except FlowError:
                entry = None
            if entry is not None:
                found[name] = (entry.definition, "library")
                todo.append(entry.definition.nodes)
    return found


class SubflowRegistry:
    """A registry (``runtime.registry.Registry``) that also knows the instance
    types of some subflow definitions; everything else is the base's."""

    def __init__(self, base: Registry, defs: dict[str, tuple[SubflowDef, str]]) -> None:
        self.base = base
        self.defs = defs
        self._specs = {TYPE_PREFIX + name: instance_spec(d, package=where)
                       for name, (d, where) in defs.items()}
        self._classes: dict[str, type[Node]] = {}

    def definition(self, type_id: str) -> SubflowDef | None:
        entry = self.defs.get(subflow_name(type_id)) if is_instance_type(type_id) else None
        return entry[0] if entry else None

    def spec(self, type_id: str) -> NodeSpec | None:
        spec = self._specs.get(type_id)
        return spec if spec is not None else self.base.spec(type_id)

    def get(self, type_id: str) -> type[Node] | None:
        spec = self._specs.get(type_id)
        if spec is None:
            return self.base.get(type_id)
        cls = self._classes.get(type_id)
        if cls is None:
            from ..node import Node

            cls = self._classes[type_id] = type(
                "Subflow_" + subflow_name(type_id), (Node,), {"spec": spec})
        return cls

    def specs(self) -> list[NodeSpec]:
        return sorted(self.base.specs() + list(self._specs.values()),
                      key=lambda s: (s.category, s.name))

    def __contains__(self, type_id: str) -> bool:
        return type_id in self._specs or type_id in self.base

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def with_subflows(registry: Registry, flow: Flow, flow_file: str = "") -> Registry:
    """``registry`` itself for a flow that uses no subflow, else one that also
    knows the instance types of every definition the flow uses."""
    if not flow.subflows and not any(is_instance_type(n.type) for n in flow.nodes):
        return registry
    base = registry.base if isinstance(registry, SubflowRegistry) else registry
    return SubflowRegistry(base, definitions(flow, flow_file))  # type: ignore[return-value]


def newer_version(flow: Flow, node: Any, flow_file: str = "") -> str | None:
    """The version of the library's current file of ``node``'s subflow when
    it is newer than the one ``node`` (an instance in ``flow``) pins, for
    the designer to offer "Update"; None otherwise (not an instance of a
    library subflow, unpinned, up to date, or no readable file). Not a
    validation problem: the pinned version runs."""
    type_id = getattr(node, "type", "")
    pin = getattr(node, "subflow", None)
    if not is_instance_type(type_id) or pin is None or flow.subflow(subflow_name(type_id)):
        return None
    try:
        current = find_library(subflow_name(type_id), flow_file)
    except FlowError:
        return None
    if current is None or not current.definition.version:
        return None
    if version_key(current.definition.version) > version_key(pin.version):
        return current.definition.version
    return None

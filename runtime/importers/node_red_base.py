"""What the Node-RED mappers share: ``Mapped`` (a Switchboard node as a
mapper makes it, with its status and notes), ``Env`` (the env values in
scope), the param setting helpers, the env reads, and the placeholder a node
without an equivalent becomes (``runtime.importers.node_red_nodes`` has the
mappers)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAPPED, REVIEW, PLACEHOLDER = "mapped", "review", "placeholder"
_RANK = {MAPPED: 0, REVIEW: 1, PLACEHOLDER: 2}
#: Longest text of the original node a placeholder keeps per string.
ORIGINAL_TEXT_CHARS = 2000
#: Most characters of a placeholder's whole original settings (as JSON).
ORIGINAL_JSON_CHARS = 20_000


def worse(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


@dataclass
class Mapped:
    type: str
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str = MAPPED
    notes: list[str] = field(default_factory=list)
    #: Switchboard port per Node-RED output index; an index past it is noted.
    ports: list[str] = field(default_factory=lambda: ["out"])
    env_readable: list[str] = field(default_factory=list)
    #: A template of it reads a subflow param (``{{ subflow.NAME }}``).
    reads_subflow: bool = False

    def review(self, why: str) -> None:
        self.status = worse(self.status, REVIEW)
        self.notes.append(f"REVIEW: {why}")


class Env:
    """The env values a node reads (``env`` typed properties, ``${NAME}``,
    ``{{env.NAME}}``). A tab's: its env properties. A subflow's: its env
    properties, which are the params of its Switchboard definition
    (``params``: env name -> (param name, type)); a node inside reads one
    of them as that param (scope ``subflow``, ``{{ subflow.NAME }}``) where
    the setting can, and a name the subflow does not declare is looked up
    where its instances are (``parents``: their tabs' or subflows' envs),
    when they all agree. Node-RED falls back to the process's variables:
    those are not read here (they are of this machine, not of the flow, and
    may be secrets), so such a read is marked review."""

    def __init__(self, values: dict[str, tuple[str, Any]] | None = None,
                 parent: Env | None = None, where: str = "",
                 params: dict[str, tuple[str, str]] | None = None) -> None:
        self.values = values or {}
        self.parent = parent
        self.where = where
        self.params = params or {}
        self.parents: list[Env] = []

    def param(self, name: Any) -> tuple[str, str] | None:
        """(param name, type) of the subflow param env ``name`` is, if the
        subflow this env is of declares it (a secret is none: it is never
        computed into another setting)."""
        found = self.params.get(name) if isinstance(name, str) else None
        return found if found is not None and found[1] != "secret" else None

    def lookup(self, name: str) -> tuple[bool, Any, str]:
        """(found, value, why-not). A subflow's own param is not found (its
        value is the instance's): the value is its default, and why says so."""
        return self._lookup(name, 0)

    def _lookup(self, name: str, depth: int) -> tuple[bool, Any, str]:
        if depth > 64:
            return False, None, f"env '{name}' refers to itself"
        if name not in self.values:
            return self._up(name, depth)
        kind, value = self.values[name]
        if kind == "cred":
            return False, None, f"env '{name}' is a credential (not exported by Node-RED)"
        if kind == "env":  # another variable's value, looked up above this level
            if self.parent is None and not self.parents:
                return False, None, f"env '{name}' reads the process variable '{value}'"
            ok, v, why = self._up(str(value), depth)
        else:
            ok, v, why = typed(value, kind, None)
        if ok and name in self.params:
            p = self.params[name][0]
            if depth == 0:
                return False, v, (f"env '{name}' is the subflow's param '{p}', which this "
                                  f"setting cannot read: it has the default {_short(v)} in "
                                  "every instance")
            return False, v, (f"env '{name}' is a param of the enclosing {self.where}, which a "
                              "Switchboard subflow cannot read (only its own params): it has "
                              f"that subflow's default {_short(v)}")
        return ok, v, why

    def _up(self, name: str, depth: int) -> tuple[bool, Any, str]:
        if self.parent is not None:
            return self.parent._lookup(name, depth + 1)
        if not self.parents:
            return False, None, (f"env '{name}' is not set in the flow (Node-RED would read "
                                 "the process's)")
        found = [p._lookup(name, depth + 1) for p in self.parents[:100]]
        values = {json.dumps(v, sort_keys=True, default=str) for _ok, v, _why in found}
        if all(ok for ok, _v, _why in found) and len(values) == 1:
            return found[0]
        bad = next((f for f in found if not f[0]), None)
        if bad is not None:
            return bad
        return False, found[0][1], (f"env '{name}' (not a param of {self.where}) differs "
                                    "between the places its instances are in: it has the "
                                    f"first one's {_short(found[0][1])}")


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def typed(value: Any, kind: str | None, env: Env | None) -> tuple[bool, Any, str]:
    """A Node-RED typed value (``v``/``vt``, ``to``/``tot``) as a literal:
    (ok, value, why-not)."""
    kind = kind or "str"
    try:
        if kind == "str":
            return True, "" if value is None else str(value), ""
        if kind == "num":
            f = float(value)
            return True, int(f) if f.is_integer() and "." not in str(value) else f, ""
        if kind == "bool":
            return True, value is True or str(value).lower() == "true", ""
        if kind == "json":
            return True, json.loads(value) if isinstance(value, str) else value, ""
    except (TypeError, ValueError) as exc:
        return False, value, f"{kind} value {str(value)[:60]!r} does not read: {exc}"
    if kind == "env" and env is not None:
        return env.lookup(str(value))
    if kind == "re":
        return True, str(value), ""
    return False, value, f"a value of type '{kind}' ({str(value)[:80]!r}) has no fixed equivalent"


def c(value: Any) -> dict[str, Any]:
    return {"scope": "custom", "value": value}


def m(path: str) -> dict[str, Any]:
    return {"scope": "message", "path": path}


def x(text: str) -> dict[str, Any]:
    return {"scope": "expression", "value": text}


def sub(param: str) -> dict[str, Any]:
    """A setting read from the subflow param ``param``."""
    return {"scope": "subflow", "param": param}


#: Node-RED replaces a property that is exactly ``${NAME}`` (or the old
#: ``$(NAME)``) with env NAME (runtime/lib/flows/util.js).
_DOLLAR = re.compile(r"^\$\{(\S+)\}$|^\$\((\S+)\)$")


def env_name(value: Any) -> str | None:
    """NAME of a property that is exactly ``${NAME}`` or ``$(NAME)``."""
    if isinstance(value, str) and value.startswith("$"):
        hit = _DOLLAR.match(value)
        if hit:
            return hit.group(1) or hit.group(2)
    return None


def param_ref(value: Any, env: Env) -> tuple[str, str] | None:
    """The subflow param (name, type) a ``${NAME}`` property reads, if NAME
    is one of its subflow's env properties."""
    return env.param(env_name(value))


def dollar_env(value: Any, env: Env, out: Mapped, what: str) -> Any:
    """Node-RED replaces a property that is exactly ``${NAME}`` with env NAME."""
    name = env_name(value)
    if name is not None:
        ok, v, why = env.lookup(name)
        if ok:
            return v
        out.review(f"{what}: {why}")
    return value


def placeholder(n: dict, reason: str) -> Mapped:
    wires = n.get("wires")
    outputs = len(wires) if isinstance(wires, list) else 0
    out = Mapped("core.placeholder", status=PLACEHOLDER,
                 ports=[f"out{i}" for i in range(max(outputs, 1))])
    out.params = {"original_type": c(str(n.get("type"))[:200]), "source": c("Node-RED"),
                  "original": c(bounded_original(n)), "reason": c(reason),
                  "outputs": c(max(outputs, 1))}
    out.notes.append(f"PLACEHOLDER: Node-RED '{str(n.get('type'))[:200]}': {reason}")
    return out


def bounded_original(n: dict) -> dict[str, Any]:
    """The node's settings for a placeholder: long texts cut, the whole
    bounded, and any setting whose name says secret (credentials, password,
    token, key, ...) left out: a secret is never written to a flow file."""
    from ..expressions import SECRET_NAME

    def cut(v: Any, depth: int = 0) -> Any:
        if isinstance(v, dict):
            v = {k: ("(not imported: a secret)" if SECRET_NAME.search(str(k)) else i)
                 for k, i in v.items()}
        if isinstance(v, str):
            return v if len(v) <= ORIGINAL_TEXT_CHARS else v[:ORIGINAL_TEXT_CHARS] + "... (cut)"
        if depth > 8:
            return "... (cut)"
        if isinstance(v, list):
            return [cut(i, depth + 1) for i in v[:200]]
        if isinstance(v, dict):
            return {str(k)[:200]: cut(i, depth + 1) for k, i in list(v.items())[:200]}
        return v

    kept = cut({k: v for k, v in n.items() if k not in ("x", "y", "z", "wires", "g")})
    if len(json.dumps(kept)) > ORIGINAL_JSON_CHARS:
        kept = {k: kept[k] for k in ("id", "type", "name") if k in kept}
        kept["note"] = "settings too long to keep"
    return kept

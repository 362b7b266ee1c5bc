"""Variables: values a flow remembers under a name. Scope ``flow`` lives as
long as one run and is shared by its nodes; scope ``global`` is kept in a
JSON file in Switchboard's data folder and survives runs and restarts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from runtime.expressions.context import (
    GLOBAL_FILE,
    GLOBAL_MAX_BYTES,  # most bytes the file may hold, all variables together
    GlobalVariablesError,
    forget_globals_at,
    read_globals_at,
)
from runtime.message import Message, deep_copy
from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node

SCOPES = ("flow", "global")
DEFAULT_MAX_VALUE_BYTES = 1_000_000
#: Most variables in one scope (one run's flow scope, or the global file).
MAX_VARIABLES = 10_000
MAX_NAME_CHARS = 200

_lock = threading.Lock()  # one writer of the global file at a time in this process


def global_file() -> Path:
    from runtime.history import data_dir

    return data_dir() / GLOBAL_FILE


def _read_global(path: Path) -> dict:
    """The global variables, read again only when the file changed (the
    reader and cache templates use too)."""
    try:
        return read_globals_at(path)
    except GlobalVariablesError as exc:
        raise NodeConfigError(str(exc)) from None


def _write_global(change: Any) -> None:
    """Apply ``change(data)`` to the global variables and save them
    atomically. The file is read again first, so that another run's write
    since is kept."""
    from runtime.flow import write_atomic

    path = global_file()
    with _lock:
        data = dict(_read_global(path))
        change(data)
        if len(data) > MAX_VARIABLES:
            raise NodeConfigError(f"there are {MAX_VARIABLES} global variables already, the "
                                  "most there may be; delete some")
        text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
        size = len(text.encode("utf-8"))
        if size > GLOBAL_MAX_BYTES:
            raise NodeConfigError(f"the global variables would take {size} bytes, more than the "
                                  f"{GLOBAL_MAX_BYTES} they may; delete some or store less")
        try:
            write_atomic(path, text + "\n")
        except OSError as exc:
            raise NodeConfigError(f"cannot save the global variables ({path}): "
                                  f"{exc.strerror or exc}") from None
        forget_globals_at(path)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise NodeConfigError("name: a variable needs a name (text)")
    if len(name) > MAX_NAME_CHARS:
        raise NodeConfigError(f"name: a variable name has at most {MAX_NAME_CHARS} characters")
    if any(ord(c) < 32 for c in name):
        raise NodeConfigError("name: a variable name must be one line, without control "
                              "characters")
    return name


class _VariableNode(Node):
    # The variable's name is the param `variable`: `name` is the node's own.

    def _store(self) -> dict:
        """This run's flow variables, shared by every variable node of the run."""
        return self.run_resource("variables:flow", dict)


@node("core.set_variable", name="Set Variable", category="Variables", icon="variable",
      color="#16a085", tool=Tool("set_variable", "Remember a value under a name, to read it "
                                 "later with get_variable"))
class SetVariable(_VariableNode):
    """Stores a value under a name: scope flow for this run's nodes, scope
    global (saved in the data folder) across runs. The message goes on
    unchanged."""

    variable = Param(str, "The variable's name", allow=AI | CUSTOM | MESSAGE, default="")
    value = Param("json", "The value to store (default: the message's payload)",
                  scope=MESSAGE, allow=AI | CUSTOM | MESSAGE, path="payload", optional=True,
                  default=None)
    scope = Param(str, "flow: shared by the nodes of this run, gone when it ends; global: "
                  "saved in Switchboard's data folder, kept across runs",
                  choices=list(SCOPES), default="flow", allow=CUSTOM)
    action = Param(str, "set: store the value; delete: forget the variable",
                   choices=["set", "delete"], default="set", allow=CUSTOM)
    max_value_bytes = Param(int, "Largest value (as JSON) that may be stored",
                            default=DEFAULT_MAX_VALUE_BYTES, allow=CUSTOM)

    concurrency = 1  # writes happen in the order the messages came

    @classmethod
    def check(cls, params):
        p = params.get("max_value_bytes")
        if p is not None and isinstance(p.value, int) and not 1 <= p.value <= GLOBAL_MAX_BYTES:
            return [("max_value_bytes", f"max_value_bytes must be between 1 and "
                     f"{GLOBAL_MAX_BYTES}")]
        return []

    async def on_message(self, msg: Message) -> Any:
        name = _check_name(self.variable.get(msg))
        delete = self.action.get() == "delete"
        value = None
        if not delete:
            value = self.value.get(msg)
            limit = self.max_value_bytes.get()
            try:
                size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
            except (TypeError, ValueError, RecursionError) as exc:
                raise NodeConfigError(f"value: cannot store it, it is not JSON ({exc})") from None
            if size > limit:
                raise NodeConfigError(f"value: {size} bytes of JSON, more than "
                                      f"max_value_bytes={limit}")
            value = deep_copy(value)
        if self.scope.get() == "global":

            def change(data: dict) -> None:
                if delete:
                    data.pop(name, None)
                else:
                    data[name] = value

            await self.run_blocking(_write_global, change)
        else:
            store = self._store()
            if delete:
                store.pop(name, None)
            else:
                if name not in store and len(store) >= MAX_VARIABLES:
                    raise NodeConfigError(f"there are {MAX_VARIABLES} flow variables already, "
                                          "the most a run may have")
                store[name] = value
        return None


@node("core.get_variable", name="Get Variable", category="Variables", icon="variable",
      color="#16a085", tool=Tool("get_variable", "Read the value remembered under a name"))
class GetVariable(_VariableNode):
    """Reads a variable into the message (at `payload`, unless the flow
    moves the output); a variable never set gives `default`."""

    variable = Param(str, "The variable's name", allow=AI | CUSTOM | MESSAGE, default="")
    scope = Param(str, "flow: this run's variables; global: the ones saved in Switchboard's "
                  "data folder", choices=list(SCOPES), default="flow", allow=CUSTOM)
    default = Param("json", "The value when the variable was never set", default=None,
                    optional=True, allow=CUSTOM)

    value = Output("json", "The variable's value")

    # As a tool it runs in a thread: reading a large global file after
    # another run changed it may take a moment.
    blocking = True

    def on_message(self, msg: Message) -> Any:
        name = _check_name(self.variable.get(msg))
        if self.scope.get() == "global":
            data = _read_global(global_file())
        else:
            data = self._store()
        if name in data:
            value = deep_copy(data[name])
        else:
            value = deep_copy(self.default.get())
        self.value.set(msg, value)
        return None


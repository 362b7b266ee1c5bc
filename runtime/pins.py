"""Pinned data: a node's output fixed in the flow file, sent instead of
running the node (n8n's pinned data), so that a flow can be worked on
downstream of a slow, costly or one-off step (an LLM, a mail inbox, a
webhook) without running it again.

A pin is ``{"<output port>": [message, ...], ...}`` under the node in the
flow file. It is used only when the run asks for it (``switchboard run
--use-pins``; the designer's Run, unless "Use Pinned Data" is off). Then:

- the node neither starts nor runs: ``start``, ``on_message`` and ``close``
  are never called, so an agent makes no LLM request and a trigger does not
  listen;
- every message that reaches it is answered, per port in the pin's order,
  by a copy of each pinned message with a fresh ``_msgid``; the incoming
  message's private keys (those starting with ``_``, such as a webhook's
  pending reply or an agent's conversation id) are carried over unless the
  pinned message sets them, so that what waits downstream still finds them;
- a source (a trigger) sends its pinned messages once, as if it had fired;
- called as a tool, it answers at once with the pinned data: the pinned
  message's ``__tool_data__`` if it has one, else the node's outputs read at
  their paths (``payload`` for the main one), else the message itself.

Nothing here runs unless a pin is used: the engine's hot path is the same.
"""

from __future__ import annotations

import json
from typing import Any

from .message import (
    MESSAGE_TYPE,
    RESERVED_KEYS,
    TOOL_DATA,
    TOOL_REQUEST,
    deep_copy,
    get_path,
    new_msgid,
)

#: Most bytes of compact JSON one node's pin may hold, and all the pins of
#: one flow together: a pin is kept in the flow file and in memory whole.
MAX_PIN_BYTES = 1024 * 1024
MAX_FLOW_PIN_BYTES = 8 * 1024 * 1024
#: Most messages pinned on one port (n8n's items).
MAX_PIN_MESSAGES = 100
#: Keys a pinned message may not hold: they belong to one tool call. The
#: data a tool answered with (``__tool_data__``) may be pinned.
CALL_KEYS = RESERVED_KEYS - {TOOL_DATA}


def pin_size(pin: dict[str, Any]) -> int:
    """Bytes of a pin as compact JSON (what the bounds count)."""
    return len(json.dumps(pin, ensure_ascii=False, separators=(",", ":"), default=str)
               .encode("utf-8", "surrogatepass"))


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 100 * 1024 else f"{n / 1024:.0f} KB"


def pin_problems(pin: dict[str, list[dict[str, Any]]], ports: list[str],
                 data_ports: set[str]) -> tuple[list[tuple[str, str]], int]:
    """What is wrong with one node's pin, as (field, message) pairs, and its
    size in bytes. ``ports`` are the node's output ports, ``data_ports`` those
    of them that carry its results (not an agent's ``tools`` or hook ports)."""
    problems: list[tuple[str, str]] = []
    if not pin or not any(pin.values()):
        problems.append(("pin", "the pin holds no message; unpin the node instead"))
        return problems, 0
    for port, messages in pin.items():
        field = f"pin.{port}"
        if port not in ports:
            problems.append((field, f"unknown output port '{port}' (has: "
                                    f"{', '.join(ports) or 'none'})"))
            continue
        if port not in data_ports:
            problems.append((field, f"'{port}' carries no results of the node, so nothing "
                                    "can be pinned on it"))
            continue
        if len(messages) > MAX_PIN_MESSAGES:
            problems.append((field, f"{len(messages)} messages; a pin holds at most "
                                    f"{MAX_PIN_MESSAGES} per port"))
        for i, msg in enumerate(messages[:MAX_PIN_MESSAGES]):
            taken = sorted(CALL_KEYS & msg.keys())
            if taken:
                problems.append((f"{field}[{i}]", f"'{taken[0]}' belongs to one tool call and "
                                                  "cannot be pinned"))
    size = pin_size(pin)
    if size > MAX_PIN_BYTES:
        problems.append(("pin", f"the pin is {_mb(size)} of JSON; a pin may be at most "
                                f"{_mb(MAX_PIN_BYTES)}"))
    return problems, size


def recorded_to_pin(msg: Any) -> dict[str, Any]:
    """A message a run recorded (the inspector's last output of a node) as
    a message to pin: without its id and the keys that belonged to that run
    (private keys, the tool call's routing), keeping what a tool answered."""
    if not isinstance(msg, dict):
        return {"payload": msg}
    return {k: deep_copy(v) for k, v in msg.items()
            if not str(k).startswith("_") or k == TOOL_DATA}


def shortened(value: Any) -> bool:
    """Whether a recorded message was cut to what a run records (strings
    past their limit end in '…', long lists and objects say how many more
    they had): such a pin would not hold what the node produced."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v.endswith("…"):
                return True
        elif isinstance(v, dict):
            if "…" in v:
                return True
            stack.extend(v.values())
        elif isinstance(v, list):
            if v and isinstance(v[-1], str) and v[-1].startswith("… ") and \
                    v[-1].endswith(" more items"):
                return True
            stack.extend(v)
    return False


def pinned_nodes(flow: Any) -> list[str]:
    """Ids of the nodes of ``flow`` that hold a pin (disabled ones left out:
    nothing passes them anyway)."""
    return [n.id for n in flow.nodes if n.pin and not n.disabled]


# -- in a run ---------------------------------------------------------------

async def _nothing() -> None:
    """A pinned node's start() and close(): it holds nothing to open."""


class PinnedOutput:
    """What a pinned node does instead of its own code, for one run."""

    __slots__ = ("rt", "items", "tool_data", "announced")

    def __init__(self, rt: Any, pin: dict[str, list[dict[str, Any]]]) -> None:
        self.rt = rt
        self.items = [(port, m) for port, messages in pin.items() for m in messages]
        self.tool_data = self._tool_data(pin)
        self.announced = False

    def _tool_data(self, pin: dict[str, list[dict[str, Any]]]) -> Any:
        messages = pin.get("out") or next((m for m in pin.values() if m), [])
        if not messages:
            return {"status": "completed"}
        first = messages[0]
        if TOOL_DATA in first:
            return first[TOOL_DATA]
        if self.rt.spec.has_tools_port:
            # An agent used as a tool answers {"result": its answer}, pinned or not.
            return {"result": get_path(first, "payload", None)}
        node = self.rt.node
        data = {}
        for o in self.rt.spec.results:
            bound = node.__dict__.get(o.name)
            path = getattr(bound, "path", o.path)
            value = get_path(first, path, _MISSING)
            if value is not _MISSING:
                data[o.name] = value
        return data or {k: v for k, v in first.items() if not str(k).startswith("_")}

    def _announce(self) -> None:
        self.announced = True
        self.rt.status("pinned", "grey", "done")

    def on_message(self, msg: dict) -> Any:
        if not self.announced:
            self._announce()
        if msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            msg[TOOL_DATA] = deep_copy(self.tool_data)
            return None
        carried = {k: v for k, v in msg.items() if k[:1] == "_" and k != "_msgid"}
        items = self.items
        for port, pinned in items[:-1]:
            self.rt.send(self._message(pinned, carried), port)
        port, pinned = items[-1]
        # The last one reuses the incoming message object, so that a pin of
        # one message on `out` goes on as the node's own result would.
        msg.clear()
        msg.update(self._message(pinned, carried))
        return None if port == "out" else port

    @staticmethod
    def _message(pinned: dict, carried: dict) -> dict:
        out = deep_copy(pinned)
        for k, v in carried.items():
            out.setdefault(k, v)
        out["_msgid"] = new_msgid()
        return out

    async def generate(self) -> None:
        """A pinned source fires once with its pinned messages."""
        self._announce()
        for port, pinned in self.items:
            self.rt.send(self._message(pinned, {}), port)


_MISSING = object()


def apply_pins(engine: Any) -> list[str]:
    """Make every pinned node of a built engine send its pin instead of
    running; the ids of those nodes. Called by Engine(use_pins=True) once,
    before the run: the nodes' own code is swapped out, not tested per
    message."""
    used = []
    for rt in engine.nodes.values():
        pin = rt.fnode.pin
        if not pin or rt.disabled:
            continue
        pinned = PinnedOutput(rt, pin)
        node = rt.node
        node.start = node.close = _nothing
        node.generate = pinned.generate
        node.blocking = False  # as a tool it answers inline, never from a thread
        rt.on_message = pinned.on_message
        rt.gate -= rt.is_async  # no longer a coroutine: it may take the chain loop
        rt.is_async = False
        rt.sem = None
        used.append(rt.id)
    return used

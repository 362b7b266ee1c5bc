"""Nodes that decide where and when messages go."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from runtime.message import get_path
from runtime.node import CUSTOM, DROP, Node, Param, node

SWITCH_OPS = ("eq", "neq", "lt", "lte", "gt", "gte", "contains", "regex", "true", "false",
              "null", "else")
_NO_VALUE_OPS = ("true", "false", "null", "else")


@node("core.switch", name="Switch", category="Core", icon="switch", color="#e2a03f",
      outputs=("out0",), dynamic_outputs=True)
class Switch(Node):
    """Routes each message by rules on one property: one output per rule
    (out0, out1, ...)."""

    path = Param(str, "The property to test", default="payload", allow=CUSTOM)
    rules = Param("json", 'Rules in order, one output each: {"op": "eq", "value": 3}; ops: '
                  + ", ".join(SWITCH_OPS), default=[{"op": "else"}], allow=CUSTOM)
    mode = Param(str, "first: stop at the first matching rule; all: send on every match",
                 choices=["first", "all"], default="first", allow=CUSTOM)

    @classmethod
    def output_ports(cls, params):
        rules = params.get("rules")
        value = rules.value if rules is not None else [{"op": "else"}]
        n = len(value) if isinstance(value, list) else 1
        return [f"out{i}" for i in range(max(n, 1))]

    @classmethod
    def check(cls, params):
        rules = params.get("rules")
        value = rules.value if rules is not None else []
        if not isinstance(value, list):
            return [("rules", "rules must be a list")]
        out = []
        for i, r in enumerate(value):
            if not isinstance(r, dict) or r.get("op") not in SWITCH_OPS:
                out.append(("rules", f"rule {i + 1}: op must be one of {', '.join(SWITCH_OPS)}"))
                continue
            if r["op"] not in _NO_VALUE_OPS and "value" not in r:
                out.append(("rules", f"rule {i + 1}: '{r['op']}' needs a value"))
            if r["op"] == "regex":
                try:
                    re.compile(str(r.get("value", "")))
                except re.error as exc:
                    out.append(("rules", f"rule {i + 1}: bad regex: {exc}"))
        return out

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._path = self.path.get() or "payload"
        self._all = self.mode.get() == "all"
        self._rules = []
        for i, r in enumerate(self.rules.get() or []):
            value = r.get("value")
            if r["op"] == "regex":
                value = re.compile(str(value))
            self._rules.append((f"out{i}", r["op"], value))

    def on_message(self, msg):
        value = get_path(msg, self._path)
        ports = []
        for port, op, arg in self._rules:
            if op == "else":
                hit = not ports
            else:
                hit = _test(op, value, arg)
            if hit:
                if not self._all:
                    return port
                ports.append(port)
        return ports or DROP


def _test(op: str, value: Any, arg: Any) -> bool:
    try:
        if op == "eq":
            return value == arg
        if op == "neq":
            return value != arg
        if op == "lt":
            return value < arg
        if op == "lte":
            return value <= arg
        if op == "gt":
            return value > arg
        if op == "gte":
            return value >= arg
        if op == "contains":
            return arg in value if isinstance(value, (str, list, dict)) else False
        if op == "regex":
            return isinstance(value, str) and arg.search(value) is not None
        if op == "true":
            return value is True
        if op == "false":
            return value is False
        if op == "null":
            return value is None
    except TypeError:
        return False  # comparing text with a number is a miss, not a crash
    return False


#: Longest a Delay holds a message: 30 days, as the sequence nodes' timeouts.
MAX_DELAY_SECONDS = 30 * 86_400
_DELAY_BOUND = f"a number of seconds from 0 to {MAX_DELAY_SECONDS} (30 days)"


@node("core.delay", name="Delay", category="Core", icon="clock", color="#8e7cc3")
class Delay(Node):
    """Holds each message for a while, then sends it on."""

    seconds = Param(float, f"How long to hold each message, {_DELAY_BOUND}", default=1.0)

    @classmethod
    def check(cls, params):
        p = params.get("seconds")
        value = p.value if p is not None else None
        # NaN and Infinity are refused for every number param (validate_flow).
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and value - value == 0 and not 0 <= value <= MAX_DELAY_SECONDS:
            return [("seconds", f"seconds must be {_DELAY_BOUND}, got {value!r:.40}")]
        return []

    async def on_message(self, msg):
        seconds = self.seconds.get(msg)
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            raise ValueError(f"seconds must be a number, got {seconds!r}")
        if not 0 <= seconds <= MAX_DELAY_SECONDS:  # NaN would not wait, Infinity for ever
            raise ValueError(f"seconds must be {_DELAY_BOUND}, got {seconds!r:.40}")
        await asyncio.sleep(seconds)


@node("core.catch", name="Catch", category="Core", icon="shield", color="#c0392b", inputs=())
class Catch(Node):
    """Receives the message of a node that failed, with ``error`` =
    {message, node}; the run goes on."""

    nodes = Param("json", "Ids of the nodes to watch; empty watches all", default=[],
                  allow=CUSTOM)

    @classmethod
    def check(cls, params):
        p = params.get("nodes")
        if p is not None and not (isinstance(p.value, list)
                                  and all(isinstance(x, str) for x in p.value)):
            return [("nodes", "nodes must be a list of node ids")]
        return []

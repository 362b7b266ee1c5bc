"""Helpers for the runtime tests: a small fake registry of test node classes,
flow builders and a runner that collects every event.

Kept out of conftest.py (shared with other suites); import what you need."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from runtime.engine import Engine, RunResult
from runtime.events import Event, EventBus
from runtime.flow import FORMAT, Flow
from runtime.message import Message
from runtime.node import AI, CUSTOM, DROP, MESSAGE, Node, Output, Param, Tool, node
from runtime.registry import Registry

# -- test node classes ------------------------------------------------------


@node("test.record", name="Record", category="Test")
class Record(Node):
    """Remembers every message object it saw (not a copy) and passes it on."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.seen: list[dict] = []

    def on_message(self, msg):
        self.seen.append(msg)


@node("test.sink", name="Sink", category="Test", outputs=())
class Sink(Node):
    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.seen: list[dict] = []

    def on_message(self, msg):
        self.seen.append(msg)
        return DROP


@node("test.inc", name="Increment", category="Test")
class Inc(Node):
    def on_message(self, msg):
        msg["payload"] += 1


@node("test.wrap", name="Wrap in a list", category="Test")
class Wrap(Node):
    def on_message(self, msg):
        msg["payload"] = [msg["payload"]]


@node("test.tag", name="Tag", category="Test")
class Tag(Node):
    """Mutates the message in place: appends its own id to payload.tags."""

    def on_message(self, msg):
        msg["payload"].setdefault("tags", []).append(self.id)


@node("test.fail", name="Fail", category="Test")
class Fail(Node):
    """Raises on payload 'bad' (or on everything with fail_all)."""

    fail_all = Param(bool, "Fail on every message", default=False, allow=CUSTOM)

    def on_message(self, msg):
        if self.fail_all.get() or msg.get("payload") == "bad":
            raise ValueError(f"cannot handle {msg.get('payload')!r}")


@node("test.returns", name="Returns", category="Test", outputs=("out", "other"))
class Returns(Node):
    """Returns whatever msg.ret holds (a port, a list, DROP via 'drop', junk)."""

    def on_message(self, msg):
        ret = msg.get("ret")
        return DROP if ret == "drop" else ret


@node("test.sender", name="Sender", category="Test", outputs=("out", "other"))
class Sender(Node):
    """Sends two extra messages on 'other' with self.send, then returns None."""

    def on_message(self, msg):
        for i in range(2):
            self.send(Message.new(f"extra{i}"), "other")


@node("test.yield_any", name="Yield (any order)", category="Test")
class YieldAny(Node):
    """Async; yields to the loop msg.payload['turns'] times. No time involved."""

    async def on_message(self, msg):
        for _ in range(msg["payload"]["turns"]):
            await asyncio.sleep(0)


@node("test.yield_one", name="Yield (in order)", category="Test")
class YieldOne(YieldAny):
    concurrency = 1


@node("test.gate", name="Gate", category="Test")
class Gate(Node):
    """Async; waits for an asyncio.Event the test controls. Tracks overlap."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.open = asyncio.Event()
        self.active = 0
        self.max_active = 0
        self.all_waiting = asyncio.Event()
        self.expect = 0

    async def on_message(self, msg):
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        if self.active == self.expect:
            self.all_waiting.set()
        await self.open.wait()
        self.active -= 1


@node("test.badsource", name="Bad source", category="Test", inputs=())
class BadSource(Node):
    async def generate(self) -> None:
        self.send(Message.new("first"))
        raise RuntimeError("source broke")


@node("test.lifecycle", name="Lifecycle", category="Test")
class Lifecycle(Node):
    fail_start = Param(bool, "Raise in start()", default=False, allow=CUSTOM)
    events: list[str] = []

    async def start(self) -> None:
        Lifecycle.events.append(f"start {self.id}")
        if self.fail_start.get():
            raise RuntimeError("cannot connect")

    async def close(self) -> None:
        Lifecycle.events.append(f"close {self.id}")


# Nodes for the loader's tool checks.
@node("test.agent", name="Agent", category="Test", tools_port=True)
class Agent(Node):
    pass


@node("test.lookup", name="Lookup", category="Test", tool=Tool("lookup", "Look a thing up"))
class Lookup(Node):
    query = Param(str, "What to look up", scope=AI, allow=AI | CUSTOM | MESSAGE)
    limit = Param(int, "How many", default=3, allow=CUSTOM | MESSAGE)
    answer = Output(str, "The answer")

    def on_message(self, msg):
        self.answer.set(msg, f"found {self.query.get(msg)}")


@node("test.plain", name="Plain", category="Test")
class Plain(Node):
    """Declares no tool; its params do not allow AI."""

    text = Param(str, "Some text", default="", allow=CUSTOM | MESSAGE)
    count = Param(int, "A number", default=1)
    ratio = Param(float, "A float", default=0.5)
    flag = Param(bool, "A flag", default=False)
    mode = Param(str, "A choice", choices=["a", "b"], default="a")
    data = Param("json", "Anything", default=None, optional=True)
    key = Param("secret", "An API key", optional=True)


TEST_CLASSES = [Record, Sink, Inc, Wrap, Tag, Fail, Returns, Sender, YieldAny, YieldOne, Gate,
                BadSource, Lifecycle, Agent, Lookup, Plain]


def registry(*extra: type[Node], core: bool = True) -> Registry:
    """Core nodes (from the default registry) plus the test nodes."""
    base = list(Registry.default()) if core else []
    return Registry([*base, *TEST_CLASSES, *extra])


REGISTRY = registry()


# -- flows --------------------------------------------------------------------

def P(value: Any) -> dict:
    """A custom-scope param setting."""
    return {"scope": "custom", "value": value}


def N(id: str, type: str, **params: Any) -> dict:
    """A flow node with custom params (values wrapped with P unless already
    a setting)."""
    out: dict[str, Any] = {"id": id, "type": type}
    if params:
        out["params"] = {k: v if isinstance(v, dict) and "scope" in v else P(v)
                         for k, v in params.items()}
    return out


def W(spec: str) -> dict:
    """'a->b' (out to in) or 'a.port->b.port'."""
    left, right = spec.split("->")
    src, _, sport = left.partition(".")
    dst, _, dport = right.partition(".")
    return {"from": [src, sport or "out"], "to": [dst, dport or "in"]}


def flow_data(nodes: Iterable[dict], wires: Iterable[str] = (), name: str = "test") -> dict:
    return {"format": FORMAT, "name": name, "nodes": list(nodes), "wires": [W(w) for w in wires]}


def make_flow(nodes: Iterable[dict], wires: Iterable[str] = (), name: str = "test") -> Flow:
    return Flow.model_validate(flow_data(nodes, wires, name))


def agent_with_tool(tool_type: str) -> Flow:
    """inject -> a scripted agent whose tools port is wired to one node of
    ``tool_type`` (for tests that drive the agent's ToolBridge by hand)."""
    from runtime.flow import parse_flow

    def fixed(v: Any) -> dict:
        return {"scope": "custom", "value": v}

    return parse_flow({"format": FORMAT, "name": "t", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": fixed("scripted"), "script": fixed([{"text": "x"}])}},
        {"id": "tool", "type": tool_type},
    ], "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                 {"from": ["agent", "tools"], "to": ["tool", "in"]}]})


def chain(*types_and_params: tuple[str, dict], payload: Any = 0, count: int = 1) -> Flow:
    """inject -> n1 -> n2 -> ...; node ids n1, n2, ..."""
    nodes = [N("src", "core.inject", payload=payload, count=count)]
    wires = []
    prev = "src"
    for i, (type_, params) in enumerate(types_and_params, 1):
        nodes.append(N(f"n{i}", type_, **params))
        wires.append(f"{prev}->n{i}")
        prev = f"n{i}"
    return make_flow(nodes, wires)


# -- running ------------------------------------------------------------------

class Run:
    """The outcome of one engine run: result, every event, the engine."""

    def __init__(self, result: RunResult, events: list[Event], engine: Engine) -> None:
        self.result = result
        self.events = events
        self.engine = engine

    def of(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]

    def debug(self, node_id: str | None = None) -> list[Any]:
        return [e.value for e in self.of("debug") if node_id is None or e.node == node_id]

    def node(self, node_id: str) -> Node:
        return self.engine.nodes[node_id].node


def engine_for(flow: Flow, *, subscribe: bool = True, reg: Registry | None = None,
               **kw: Any) -> tuple[Engine, list[Event]]:
    bus = EventBus()
    events: list[Event] = []
    if subscribe:
        bus.subscribe(events.append)
    return Engine(flow, reg or REGISTRY, bus, **kw), events


async def run(flow: Flow, *, timeout: float | None = None, subscribe: bool = True,
              reg: Registry | None = None, **kw: Any) -> Run:
    engine, events = engine_for(flow, subscribe=subscribe, reg=reg, **kw)
    result = await engine.run(timeout=timeout)
    return Run(result, events, engine)


async def until(predicate, turns: int = 10_000) -> None:
    """Yield to the loop until predicate() holds; a bounded count of turns,
    not a time, so the test never depends on the machine's speed."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")

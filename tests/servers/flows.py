"""Small flows and tool nodes for the AI-tools tests."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.mail import SendMail
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import Flow, parse_flow
from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node
from runtime.registry import Registry


def fixed(value: Any) -> dict:
    return {"scope": "custom", "value": value}


AI_SCOPE = {"scope": "ai"}


# -- tool nodes ---------------------------------------------------------------

@node("test.sleep", name="Sleep", category="Test", tool=Tool("sleep", "Sleep a while"))
class SleepTool(Node):
    """Records when each call starts and ends; ``seconds`` < 0 waits forever."""

    tag = Param(str, "A label echoed back", scope=AI, allow=AI | CUSTOM | MESSAGE)
    seconds = Param(float, "How long", default=0.0, allow=AI | CUSTOM)
    result = Output(str, "The tag, read back after the sleep")

    calls: list[tuple[str, str]] = []
    cancelled: list[str] = []
    started: asyncio.Event | None = None

    async def on_message(self, msg):
        tag = self.tag.get(msg)
        msg["scratch"] = tag  # each call has its own clone: no other call sees this
        SleepTool.calls.append(("start", tag))
        if SleepTool.started is not None:
            SleepTool.started.set()
        seconds = self.seconds.get(msg)
        try:
            if seconds < 0:
                await asyncio.Event().wait()
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            SleepTool.cancelled.append(tag)
            raise
        SleepTool.calls.append(("end", tag))
        self.result.set(msg, msg["scratch"])


@node("test.echo", name="Echo", category="Test", tool=Tool("echo", "Echo a text"))
class EchoTool(Node):
    """Sync tool: upper-cases ``text``; ``prefix`` is the designer's."""

    text = Param(str, "Text to echo", scope=AI, allow=AI | CUSTOM | MESSAGE)
    prefix = Param(str, "Put in front", default="", allow=AI | CUSTOM | MESSAGE)
    count = Param(int, "Times", default=1, allow=AI | CUSTOM)
    mode = Param(str, "Case", choices=["upper", "lower"], default="upper", allow=AI | CUSTOM)
    echoed = Output(str, "The echo")

    calls: list[dict] = []

    def on_message(self, msg):
        text = self.text.get(msg)
        EchoTool.calls.append({"text": text, "prefix": self.prefix.get(msg)})
        out = (self.prefix.get(msg) or "") + str(text) * int(self.count.get(msg))
        self.echoed.set(msg, out.upper() if self.mode.get(msg) == "upper" else out.lower())


@node("test.noop", name="Noop", category="Test", tool=Tool("noop", "Do nothing"))
class NoopTool(Node):
    def on_message(self, msg):
        return None


@node("test.fail", name="Fail", category="Test", tool=Tool("fail", "Always fails"))
class FailTool(Node):
    why = Param(str, "What to complain about", scope=AI, allow=AI | CUSTOM)
    token = Param("secret", "A secret it reads", optional=True)

    async def on_message(self, msg):
        secret = self.token.get(msg)
        if self.why.get(msg) == "config":
            raise NodeConfigError("the widget is not configured")
        raise RuntimeError(f"database refused the login with {secret}")


TEST_NODES = [SleepTool, EchoTool, NoopTool, FailTool]


def registry() -> Registry:
    return Registry([Inject, DebugNode, Agent, SendMail, *TEST_NODES])


def agent_flow(agent: dict, tools: list[dict], prompt: Any = "Hello", *,
               rpa: list[tuple[str, str]] = ()) -> Flow:
    """inject -> agent -> debug ("show"), with each of ``tools`` (flow node
    dicts) wired to the agent's tools port. ``rpa`` adds plain wires."""
    nodes = [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed(prompt)}},
        {"id": "agent", "type": "ai.agent", "params": agent},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
        *tools,
    ]
    wires = [{"from": ["ask", "out"], "to": ["agent", "in"]},
             {"from": ["agent", "out"], "to": ["show", "in"]}]
    wires += [{"from": ["agent", "tools"], "to": [t["id"], "in"]} for t in tools]
    wires += [{"from": [a, "out"], "to": [b, "in"]} for a, b in rpa]
    return parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": nodes, "wires": wires})


def scripted(turns: list[dict], **params: Any) -> dict:
    out = {"provider": fixed("scripted"), "script": fixed(turns)}
    out.update({k: fixed(v) for k, v in params.items()})
    return out


class Recorder:
    """Every event of a run and every log record (DEBUG and up) meanwhile."""

    def __init__(self) -> None:
        self.events: list = []
        self.records: list[logging.LogRecord] = []

    def __call__(self, event) -> None:
        self.events.append(event)

    def of(self, type_: str) -> list:
        return [e for e in self.events if e.type == type_]

    def debug_values(self, node_id: str = "show") -> list:
        return [e.value for e in self.events if e.type == "debug" and e.node == node_id]

    def dump(self) -> str:
        """All events as JSON and all log lines, formatted as a handler would."""
        fmt = logging.Formatter("%(levelname)s %(name)s: %(message)s")
        lines = [e.model_dump_json() for e in self.events]
        for r in self.records:
            lines.append(fmt.format(r))
        return "\n".join(lines)


class _Capture(logging.Handler):
    def __init__(self, sink: list) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record)


async def run(flow: Flow, *, timeout: float = 30, reg: Registry | None = None,
              engine_hook=None, people: Any = "auto") -> tuple[Any, Recorder, Engine]:
    """``people``: who approves tool calls that need it (runtime.approval):
    auto-approve unless a test says otherwise (approval has its own tests)."""
    rec = Recorder()
    bus = EventBus()
    bus.subscribe(rec)
    root = logging.getLogger()
    handler = _Capture(rec.records)
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        engine = Engine(flow, reg or registry(), bus)
        if people == "auto":
            from runtime.approval import AutoApprover, People

            people = People(AutoApprover())
        if people is not None:
            engine.people = people
        if engine_hook is not None:
            engine_hook(engine)
        result = await engine.run(timeout=timeout)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    return result, rec, engine

"""Breakpoints inside a subflow used as an agent's tool (docs/subflows.md,
"A subflow as an agent's tool"; runtime.debugger): a message of a call
held at a breakpoint inside the definition is work in flight for that
call: the call waits for it (first and list), a person's Skip ends the call
at once as "no message reached an output" (before: nothing looked again,
and the call waited for its timeout, or for ever without one), and the
call's timeout still bounds it, dropping its held messages with it. Real
engine runs with the real debugger API; nothing waits on a clock but the
timeout test's own timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.approval import AutoApprover, People
from runtime.debugger import Breakpoint, Debugger
from runtime.engine import Engine
from runtime.events import EventBus
from tests.runtime_fixtures import until
from tests.subflow_fixtures import _own_library  # noqa: F401 - the autouse fixture
from tests.test_subflow_tool import (
    REG,
    Stock,
    W,
    agent_flow,
    calls,
    setter,
    stock_def,
    tool_instance,
)


@pytest.fixture(autouse=True)
def _fresh_counts():
    Stock.runs, Stock.active, Stock.most, Stock.expect, Stock.cancelled = [], 0, 0, 1, []


class Session:
    """A run of: an agent calling check_stock once (look up -> mark -> out
    inside), with a debugger holding at ``at``."""

    def __init__(self, at: str, *, result: str = "first", timeout: float = 0) -> None:
        d = stock_def(result=result)
        d["nodes"].insert(2, setter("mark", "payload", "marked"))
        d["wires"] = [W("i", "look"), W("look", "mark"), W("mark", "o")]
        flow = agent_flow([calls(("check_stock", {"sku": "A"})), {"text": "done"}],
                          tool_instance(), [d], agent={"tool_timeout_seconds": timeout})
        bus = EventBus()
        self.events: list = []
        bus.subscribe(self.events.append)
        self.engine = Engine(flow, REG, bus)
        self.engine.people = People(AutoApprover())
        self.debugger = Debugger([Breakpoint(node=at)]).attach(self.engine)
        self.task = asyncio.get_running_loop().create_task(self.engine.run(timeout=60))

    async def held(self) -> Any:
        await until(lambda: len(self.debugger.held) == 1, 20_000)
        [held] = self.debugger.held.values()
        return held

    def results(self) -> list:
        return [e for e in self.events if e.type == "tool.result"]

    def of(self, kind: str) -> list:
        return [e for e in self.events if e.type == kind]


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.parametrize("at", ["stock.look", "stock.mark", "stock.o"])
@pytest.mark.parametrize("result", ["first", "list"])
async def test_a_held_message_keeps_its_call_waiting_until_it_is_let_go(at, result):
    s = Session(at, result=result)
    held = await s.held()
    assert held.node == at and held.msg["__subflow_call__"]
    await turns(5_000)  # the call's work is not done: it waits (no tool.result yet)
    assert s.results() == [] and not s.task.done()
    assert s.engine.in_flight() == {"agent": 1, "stock": 1, at: 1}
    assert s.debugger.resume(held.id, "continue") is None
    run = await asyncio.wait_for(s.task, 30)
    assert run.status == "ok"
    [call] = s.results()
    assert call.status == "success"
    assert call.data == ({"result": "marked"} if result == "first" else {"results": ["marked"]})


@pytest.mark.parametrize("at", ["stock.look", "stock.mark"])
@pytest.mark.parametrize("result", ["first", "list"])
async def test_skipping_a_held_message_ends_its_call_at_once(at, result):
    """No timeout (0: none): before, the call waited for ever, and the run
    with it."""
    s = Session(at, result=result)
    held = await s.held()
    await turns(500)  # the call looked at its work since: the held message counted
    assert s.results() == []
    assert s.debugger.resume(held.id, "skip") is None
    await until(lambda: s.results(), 2_000)
    [call] = s.results()
    assert call.status == "error"
    assert call.error.startswith("no message reached an output of subflow 'Check stock'")
    run = await asyncio.wait_for(s.task, 30)
    assert run.status == "ok"  # the agent got the error and answered
    assert s.engine.in_flight() == {}


async def test_the_calls_timeout_bounds_a_held_message_and_drops_it():
    s = Session("stock.mark", timeout=0.2)
    held = await s.held()
    run = await asyncio.wait_for(s.task, 30)  # before: the held message kept the run going
    assert run.status == "ok"
    [call] = s.results()
    assert call.status == "error" and "tool_timeout_seconds" in call.error
    assert s.debugger.held == {}
    [resumed] = s.of("debug.resumed")
    assert (resumed.hold, resumed.action) == (held.id, "stopped")
    assert Stock.runs == ["A"]  # the look-up ran; what it sent was held, never went on

"""A subflow instance as an agent's tool (#25 item 5, docs/subflows.md "A
subflow as an agent's tool"): one tool named and described by its
definition, arguments only its AI params, result what reaches its outputs,
per-call correlation, inner errors, settling, timeouts, the bridge's
approval, limits, background and progress, nested agents' calls, a real
OpenAI wire and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.engine import Engine
from runtime.engine.subflow_tool import MAX_RESULTS
from runtime.events import EventBus
from runtime.flow import Flow
from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Param, node
from runtime.registry import Registry
from tests.subflow_fixtures import P, S, W, _own_library  # noqa: F401 - the autouse fixture

ROOT = Path(__file__).resolve().parents[1]


# -- nodes the definitions use --------------------------------------------------------

@node("test.sf_stock", name="Look up stock", category="Test")
class Stock(Node):
    """Async: waits until ``expect`` calls are inside at once (a bounded
    count of loop turns, no time), then ``qty`` more turns, and answers
    "SKU xQTY at WAREHOUSE". Counts its runs."""

    sku = Param(str, "SKU", default="", allow=AI | CUSTOM | MESSAGE)
    qty = Param(int, "How many", default=1, allow=AI | CUSTOM | MESSAGE)
    warehouse = Param(str, "Where", default="", allow=CUSTOM | MESSAGE)

    runs: list[str] = []
    active = 0
    most = 0
    expect = 1
    cancelled: list[str] = []

    async def on_message(self, msg):
        sku = self.sku.get(msg)
        Stock.runs.append(sku)
        Stock.active += 1
        Stock.most = max(Stock.most, Stock.active)
        try:
            for _ in range(10_000):
                if Stock.active >= Stock.expect or Stock.most >= Stock.expect:
                    break
                await asyncio.sleep(0)
            qty = self.qty.get(msg)
            for _ in range(max(0, qty)):
                await asyncio.sleep(0)
            if sku == "forever":
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            Stock.cancelled.append(sku)
            raise
        finally:
            Stock.active -= 1
        if sku == "broken":
            raise NodeConfigError("the stock service has no such product")
        if sku == "crash":
            raise RuntimeError("connection to db.internal:5432 refused")
        msg["payload"] = f"{sku} x{qty} at {self.warehouse.get(msg)}"


@node("test.sf_split", name="Split in three", category="Test")
class Three(Node):
    """Sends three messages (payload 1, 2, 3) and drops the one it got."""

    def on_message(self, msg):
        for i in (1, 2, 3):
            out = msg.clone() if hasattr(msg, "clone") else dict(msg)
            out["payload"] = i
            self.send(out)
        return "__drop__"


@node("test.sf_progress", name="Crawler", category="Test")
class Progress(Node):
    async def on_message(self, msg):
        self.progress(0.5, "page 2 of 4")
        await asyncio.sleep(0)
        msg["payload"] = "crawled"


@node("test.sf_drop", name="Filter", category="Test")
class Drop(Node):
    """Drops everything (a filter nothing passes)."""

    async def on_message(self, msg):
        await asyncio.sleep(0)
        from runtime.node import DROP

        return DROP


REG = Registry([*Registry.default(), Stock, Three, Progress, Drop])


@pytest.fixture(autouse=True)
def _fresh_counts():
    Stock.runs, Stock.active, Stock.most, Stock.expect, Stock.cancelled = [], 0, 0, 1, []


# -- flow builders --------------------------------------------------------------------

AI_ = {"scope": "ai"}


def IN(id: str = "i", name: str = "order") -> dict:
    return {"id": id, "type": "subflow.in", "params": {"name": P(name)}}


def OUT(id: str = "o", name: str = "result") -> dict:
    return {"id": id, "type": "subflow.out", "params": {"name": P(name)}}


STOCK_PARAMS = [
    {"name": "sku", "type": "str", "ai_allowed": True, "description": "The product's SKU"},
    {"name": "qty", "type": "int", "ai_allowed": True, "default": 1,
     "description": "How many"},
    {"name": "warehouse", "type": "str", "default": "north"},
]


def stock_def(**extra: Any) -> dict:
    """in -> look up (sku, qty, warehouse from the subflow's params) -> out."""
    return {"name": "check_stock", "label": "Check stock", "params": STOCK_PARAMS,
            "description": "Check whether a product is in stock",
            "nodes": [IN(), {"id": "look", "type": "test.sf_stock", "params": {
                "sku": S("sku"), "qty": S("qty"), "warehouse": S("warehouse")}}, OUT()],
            "wires": [W("i", "look"), W("look", "o")], **extra}


def tool_instance(id: str = "stock", **params: Any) -> dict:
    out = {"sku": AI_, "qty": AI_, "warehouse": P("south")}
    out.update(params)
    return {"id": id, "type": "subflow:check_stock", "params": out}


def agent_flow(script: list[dict], tool: dict, subflows: list[dict], *, port: str = "order",
               agent: dict | None = None, before: dict | None = None) -> Flow:
    """inject -> [before] -> a scripted agent -> debug "show" (msg); the
    agent's tools port wired to ``tool``'s input ``port``."""
    params = {"provider": P("scripted"), "script": P(script)}
    params.update({k: P(v) for k, v in (agent or {}).items()})
    nodes = [{"id": "ask", "type": "core.inject", "params": {"payload": P("go")}},
             {"id": "agent", "type": "ai.agent", "params": params},
             {"id": "show", "type": "core.debug", "params": {"path": P("msg")}}, tool]
    wires = [W("agent", "show"), W("agent:tools", f"{tool['id']}:{port}")]
    if before is not None:
        nodes.append(before)
        wires += [W("ask", before["id"]), W(before["id"], "agent")]
    else:
        wires.append(W("ask", "agent"))
    return Flow.model_validate({"format": "switchboard.flow/1", "name": "t",
                                "subflows": subflows, "nodes": nodes, "wires": wires})


def setter(id: str, path: str, value: Any) -> dict:
    return {"id": id, "type": "core.change", "params": {"rules": P([
        {"action": "set", "path": path, "value": value}])}}


def calls(*items: tuple[str, dict]) -> dict:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in items]}


class Rec:
    def __init__(self, result: Any, events: list, engine: Engine) -> None:
        self.result, self.events, self.engine = result, events, engine

    def of(self, kind: str) -> list:
        return [e for e in self.events if e.type == kind]

    def tool_calls(self) -> list[dict]:
        """The agent's tool calls, as its (last) answer's msg.agent says."""
        shown = [e.value for e in self.of("debug") if e.node == "show"]
        return [v for v in shown if "tool_calls" in v["agent"]][-1]["agent"]["tool_calls"]


async def run(flow: Flow, *, people: Any = "auto", file: str = "", timeout: float = 30,
              subscribe: bool = True) -> Rec:
    bus = EventBus()
    events: list = []
    if subscribe:
        bus.subscribe(events.append)
    engine = Engine(flow, REG, bus, file=file)
    if people == "auto":
        from runtime.approval import AutoApprover, People

        people = People(AutoApprover())
    if people is not None:
        engine.people = people
    result = await engine.run(timeout=timeout)
    return Rec(result, events, engine)


# -- one tool, its schema ------------------------------------------------------------------

def test_an_instance_is_one_tool_named_and_described_by_its_definition_with_only_ai_params():
    from runtime.flow.subflows import with_subflows
    from runtime.tools import agent_tool_specs, agent_tools

    f = agent_flow([{"text": "x"}], tool_instance(), [stock_def()])
    [fn] = agent_tool_specs(f, REG)["agent"]
    assert fn["function"]["name"] == "check_stock"
    assert fn["function"]["description"] == "Check whether a product is in stock"
    assert fn["function"]["parameters"] == {
        "type": "object", "additionalProperties": False,
        "properties": {"sku": {"type": "string", "description": "The product's SKU"},
                       "qty": {"type": "integer", "description": "How many"}},
        "required": ["sku"]}
    [tool] = agent_tools(f, "agent", with_subflows(REG, f))
    assert tool.node_id == "stock"


# -- a call's way in and out ------------------------------------------------------------------

async def test_three_calls_in_one_turn_run_at_once_and_each_gets_its_own_result():
    """The inner node answers the calls in the reverse of the order they
    came in (qty turns after all three are in): no call gets another's."""
    Stock.expect = 3
    f = agent_flow([calls(("check_stock", {"sku": "A", "qty": 30}),
                          ("check_stock", {"sku": "B", "qty": 15}),
                          ("check_stock", {"sku": "C", "qty": 0})), {"text": "done"}],
                   tool_instance(), [stock_def()])
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    assert Stock.most == 3  # all three inside at once
    assert [c["data"] for c in r.tool_calls()] == [
        {"result": "A x30 at south"}, {"result": "B x15 at south"}, {"result": "C x0 at south"}]
    # They ended C, B, A: the events say so.
    ends = [e.caller_id for e in r.of("tool.result")]
    starts = [e.caller_id for e in r.of("tool.call")]
    assert ends == starts[::-1]


async def test_an_optional_argument_left_out_takes_the_definition_default_not_the_agents_message():
    """qty left out: the definition's default (1), even though the agent's
    own message carries a qty of its own."""
    f = agent_flow([calls(("check_stock", {"sku": "A"})), {"text": "done"}],
                   tool_instance(), [stock_def()], before=setter("setqty", "qty", 99))
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    assert r.tool_calls()[0]["data"] == {"result": "A x1 at south"}


async def test_the_wire_names_the_input_and_two_outputs_say_which_one_answered():
    d = {"name": "route", "description": "Route an order", "params": [
        {"name": "kind", "type": "str", "ai_allowed": True}],
         "nodes": [IN("a", "first"), IN("b", "second"),
                   {"id": "sw", "type": "core.switch", "params": {
                       "path": P("kind"), "rules": P([
                           {"op": "eq", "value": "big"}, {"op": "else"}])}},
                   OUT("big", "big"), OUT("small", "small"),
                   {"id": "never", "type": "core.change", "params": {"rules": P([
                       {"action": "set", "path": "payload", "value": "from the first input"}])}}],
         "wires": [W("b", "sw"), W("sw:out0", "big"), W("sw:out1", "small"), W("a", "never"),
                   W("never", "big")]}
    tool = {"id": "route", "type": "subflow:route", "params": {"kind": AI_}}
    f = agent_flow([calls(("route", {"kind": "big"}), ("route", {"kind": "tiny"})),
                    {"text": "done"}], tool, [d], port="second")
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    assert [c["data"] for c in r.tool_calls()] == [
        {"output": "big", "result": {"kind": "big"}},
        {"output": "small", "result": {"kind": "tiny"}}]


async def test_result_list_collects_every_message_until_the_work_settles():
    d = {"name": "three", "description": "Three numbers", "result": "list", "params": [],
         "nodes": [IN(), {"id": "split", "type": "test.sf_split"},
                   {"id": "slow", "type": "test.sf_stock", "params": {"sku": P("x")}}, OUT()],
         "wires": [W("i", "split"), W("split", "o"), W("i", "slow"), W("slow", "o")]}
    tool = {"id": "three", "type": "subflow:three"}
    f = agent_flow([calls(("three", {})), {"text": "done"}], tool, [d])
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    # The three the split sent at once, then the slow one's, as they came.
    assert r.tool_calls()[0]["data"] == {"results": [1, 2, 3, "x x1 at "]}


async def test_result_list_is_bounded():
    d = {"name": "many", "description": "Many", "result": "list", "params": [],
         "nodes": [IN(), {"id": "split", "type": "core.split", "params": {
             "path": P("payload")}},
                   {"id": "move", "type": "core.change", "params": {"rules": P([
                       {"action": "move", "from": "items", "path": "payload"}])}}, OUT()],
         "wires": [W("i", "split"), W("split", "move"), W("move", "o")]}
    tool = {"id": "many", "type": "subflow:many", "params": {}}
    # The list comes with the agent's message (msg.items): the LLM's
    # arguments (the payload) are an object.
    d["nodes"][1]["params"]["path"] = P("items")
    f = agent_flow([calls(("many", {})), {"text": "done"}], tool, [d],
                   before=setter("items", "items", list(range(150))))
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    data = r.tool_calls()[0]["data"]
    assert data["results"] == list(range(MAX_RESULTS)) and data["truncated"] is True


# -- failures ----------------------------------------------------------------------------------

async def test_an_inner_error_fails_the_call_naming_the_inner_node_and_the_run_goes_on():
    f = agent_flow([calls(("check_stock", {"sku": "broken"}), ("check_stock", {"sku": "crash"}),
                          ("check_stock", {"sku": "fine"})), {"text": "done"}],
                   tool_instance(), [stock_def()])
    r = await run(f)
    assert r.result.status == "ok" and r.result.errors == 0, r.result
    broken, crash, fine = r.tool_calls()
    assert broken["status"] == "error"
    assert broken["error"] == ("node 'stock.look' (Look up stock) inside subflow 'Check stock' "
                               "failed: the stock service has no such product")
    # Anything but a NodeConfigError: its type only to the LLM ...
    assert crash["error"] == ("node 'stock.look' (Look up stock) inside subflow 'Check stock' "
                              "failed: RuntimeError: the node failed unexpectedly; details are "
                              "in the run's events")
    assert "db.internal" not in json.dumps(r.tool_calls())
    # ... its text to the node.error event, by the inner path, caught.
    errors = [e for e in r.of("node.error") if e.node == "stock.look"]
    assert [e.caught for e in errors] == [True, True]
    assert "db.internal:5432" in errors[1].message
    assert fine["data"] == {"result": "fine x1 at south"}


async def test_a_catch_inside_the_instance_takes_the_error_and_its_flow_answers():
    d = stock_def()
    d["nodes"] += [{"id": "catch", "type": "core.catch"},
                   {"id": "sorry", "type": "core.change", "params": {"rules": P([
                       {"action": "set", "path": "payload", "value": "unknown product"}])}}]
    d["wires"] += [W("catch", "sorry"), W("sorry", "o")]
    f = agent_flow([calls(("check_stock", {"sku": "broken"})), {"text": "done"}],
                   tool_instance(), [d])
    r = await run(f)
    assert r.result.status == "ok", r.result
    assert r.tool_calls()[0]["data"] == {"result": "unknown product"}
    assert [e.node for e in r.of("node.error")] == ["stock.look"]


NOTHING_MATCHES = {"type": "core.switch", "params": {"rules": P([{"op": "eq", "value": "-"}])}}


@pytest.mark.parametrize("inner", [NOTHING_MATCHES, {"type": "test.sf_drop"}])
async def test_nothing_reaching_an_output_ends_the_call_when_its_work_settles(inner):
    """A filter nothing passes, inline or awaiting: the call ends with a
    clear error as its work settles (the agent is not kept waiting)."""
    port = "out0" if inner["type"] == "core.switch" else "out"
    d = {"name": "void", "description": "Goes nowhere", "params": [],
         "nodes": [IN(), {"id": "x", **inner}, OUT()], "wires": [W("i", "x"), W(f"x:{port}", "o")]}
    tool = {"id": "void", "type": "subflow:void"}
    f = agent_flow([calls(("void", {})), {"text": "done"}], tool, [d])
    r = await run(f, timeout=20)
    assert r.result.status == "ok", r.result
    [call] = r.tool_calls()
    assert call["status"] == "error"
    assert call["error"].startswith("no message reached an output of subflow 'void'")


async def test_a_call_past_its_timeout_is_cancelled_inside():
    f = agent_flow([calls(("check_stock", {"sku": "forever"})), {"text": "done"}],
                   tool_instance(), [stock_def()], agent={"tool_timeout_seconds": 0.2})
    r = await run(f)
    assert r.result.status == "ok", r.result
    [call] = r.tool_calls()
    assert call["status"] == "error" and "tool_timeout_seconds" in call["error"]
    assert Stock.cancelled == ["forever"]  # the inner node's task was cancelled
    assert r.engine.in_flight() == {}


# -- the LLM cannot reach a designer's param ---------------------------------------------------

async def test_an_llm_sending_a_custom_or_message_param_is_refused_before_any_node_runs():
    tool = tool_instance(warehouse={"scope": "message", "path": "site"})
    f = agent_flow([calls(("check_stock", {"sku": "A", "warehouse": "evil"}),
                          ("check_stock", {"sku": "A", "site": "evil"}),
                          ("check_stock", {"sku": "A", "__subflow_call__": "x"}),
                          ("check_stock", {"sku": "A", "payload": {"warehouse": "evil"}})),
                    {"text": "done"}], tool, [stock_def()])
    r = await run(f)
    assert r.result.status == "ok", r.result
    statuses = [(c["status"], c["error"]) for c in r.tool_calls()]
    assert all(s == "refused" and "unknown argument" in e and "check_stock accepts: sku, qty" in e
               for s, e in statuses), statuses
    assert Stock.runs == []  # no node inside ran


# -- the bridge's rules, as for a node ---------------------------------------------------------

async def test_approval_asks_a_person_and_a_rejection_never_runs_a_node():
    from runtime.approval import Decision
    from tests.test_hitl import DecidingPeople

    tool = tool_instance()
    tool["tool"] = {"approval": {"mode": "always"}}
    f = agent_flow([calls(("check_stock", {"sku": "A"}), ("check_stock", {"sku": "B"})),
                    {"text": "done"}], tool, [stock_def()])
    people = DecidingPeople(Decision(True, by="designer"),
                            Decision(False, by="designer", reason="not now"))
    r = await run(f, people=people)
    assert [a.tool for a in people.asked] == ["check_stock", "check_stock"]
    assert people.asked[0].node == "stock"
    assert [c["status"] for c in r.tool_calls()] == ["success", "rejected"]
    assert Stock.runs == ["A"]


async def test_call_limits_per_turn_and_per_run():
    tool = tool_instance()
    tool["tool"] = {"max_calls_per_turn": 2, "max_calls_per_run": 3}
    one = ("check_stock", {"sku": "A"})
    f = agent_flow([calls(one, one, one), calls(one, one), {"text": "done"}], tool,
                   [stock_def()])
    r = await run(f)
    assert [c["status"] for c in r.tool_calls()] == [
        "success", "success", "refused", "success", "refused"]
    assert len(Stock.runs) == 3


async def test_a_background_call_answers_at_once_and_its_result_comes_later():
    tool = tool_instance()
    tool["tool"] = {"background": True}
    f = agent_flow([calls(("check_stock", {"sku": "A", "qty": 5})), {"text": "waiting"}],
                   tool, [stock_def()], agent={"wake_on_background": True})
    r = await run(f)
    assert r.result.status == "ok", r.of("node.error")
    first = r.tool_calls()[0]
    assert first["data"]["status"] == "started"
    results = [e for e in r.of("tool.result") if e.tracking_id]
    assert results[-1].data == {"result": "A x5 at south"}


async def test_progress_of_a_node_inside_is_the_calls_progress(monkeypatch):
    from runtime.tools import CallStatus

    d = {"name": "crawl", "description": "Crawl", "params": [],
         "nodes": [IN(), {"id": "c", "type": "test.sf_progress"}, OUT()],
         "wires": [W("i", "c"), W("c", "o")]}
    f = agent_flow([calls(("crawl", {})), {"text": "done"}], {"id": "crawl", "type": "subflow:crawl"},
                   [d])
    ticks = iter(range(0, 10_000, 1))  # each progress a second after the last: none throttled
    monkeypatch.setattr(CallStatus, "clock", staticmethod(lambda: float(next(ticks))))
    r = await run(f)
    progress = [(e.node, e.progress, e.text) for e in r.of("tool.status")
                if e.phase == "progress"]
    # The node inside that started working, then what it said of itself.
    assert progress == [("crawl", None, "Crawler"), ("crawl", 0.5, "Crawler: page 2 of 4")]
    assert r.tool_calls()[0]["data"] == {"result": "crawled"}


async def test_each_inner_node_run_is_a_tool_step_of_its_call():
    f = agent_flow([calls(("check_stock", {"sku": "A"}), ("check_stock", {"sku": "broken"})),
                    {"text": "done"}], tool_instance(), [stock_def()])
    r = await run(f)
    ok, bad = (e.caller_id for e in r.of("tool.call"))
    steps = [(e.caller_id, e.node, e.status) for e in r.of("tool.step")]
    assert (ok, "stock.look", "running") in steps and (ok, "stock.look", "done") in steps
    assert (bad, "stock.look", "error") in steps
    err = next(e for e in r.of("tool.step") if e.status == "error")
    assert err.text == "the stock service has no such product" and err.tool == "check_stock"
    # Steps read back as events of this version (history, workers).
    from runtime.events import parse_event

    assert parse_event(err.model_dump_json()) == err


async def test_an_agent_inside_the_subflow_nests_its_calls_under_the_subflow_call():
    """An agent inside the definition: its tool calls and LLM requests
    carry parent = the subflow call's caller id; it is offered no handoff
    (no agent gave it a task)."""
    inner_script = [calls(("echo", {"text": "hi"})), {"text": "inner answer"}]
    d = {"name": "helper", "description": "Ask a helper", "params": [
        {"name": "question", "type": "str", "ai_allowed": True}],
         "nodes": [IN(), {"id": "bot", "type": "ai.agent", "params": {
             "provider": P("scripted"), "script": P(inner_script),
             "prompt": {"scope": "message", "path": "question"}}},
                   {"id": "echo", "type": "test.echo", "params": {"text": AI_}}, OUT()],
         "wires": [W("i", "bot"), W("bot", "o"), W("bot:tools", "echo")]}
    from tests.servers.flows import EchoTool

    global REG
    saved = REG
    REG = Registry([*saved, EchoTool])
    try:
        f = agent_flow([calls(("helper", {"question": "what?"})), {"text": "done"}],
                       {"id": "help", "type": "subflow:helper", "params": {"question": AI_}}, [d])
        r = await run(f)
    finally:
        REG = saved
    assert r.result.status == "ok", r.of("node.error")
    outer = next(e for e in r.of("tool.call") if e.agent == "agent")
    inner = next(e for e in r.of("tool.call") if e.agent == "help.bot")
    assert inner.parent == outer.caller_id
    assert inner.node == "help.echo"
    requests = [e for e in r.of("llm.request") if e.agent == "help.bot"]
    assert requests and all(e.parent == outer.caller_id for e in requests)
    assert all("handoff" not in e.tools for e in requests)
    assert r.tool_calls()[0]["data"] == {"result": "inner answer"}


async def test_without_a_subscriber_the_call_runs_the_same():
    f = agent_flow([calls(("check_stock", {"sku": "A"})), {"text": "done"}],
                   tool_instance(), [stock_def()])
    engine = Engine(f, REG, EventBus())
    from runtime.approval import AutoApprover, People

    engine.people = People(AutoApprover())
    got: list = []
    engine.nodes["show"].on_message = lambda msg: got.append(msg["agent"]) or None
    result = await engine.run(timeout=30)
    assert result.status == "ok"
    assert got[0]["tool_calls"][0]["data"] == {"result": "A x1 at south"}


# -- the "done when": a library subflow, two instances, a real OpenAI wire -------------

def library_flow(tmp_path: Path) -> Path:
    """A library subflow check_stock 1.0.0 (core nodes only: a template
    reading its three params) and a flow with two instances of it: one on
    the RPA path (every param the designer's), one an agent's tool (sku
    and qty from the AI, warehouse the designer's)."""
    from runtime.flow.model import SubflowDef, SubflowPin
    from runtime.flow.subflows import save_to_library

    defn = SubflowDef.model_validate({
        "format": "switchboard.subflow/1", "version": "1.0.0", **stock_def(),
        "nodes": [IN(), {"id": "t", "type": "core.template", "params": {"template": {
            "scope": "expression",
            "value": "{{ subflow.sku }} x{{ subflow.qty }} from {{ subflow.warehouse }}"}}},
            OUT()],
        "wires": [W("i", "t"), W("t", "o")]})
    save_to_library(defn, tmp_path / "subflows")
    pin = SubflowPin(version="1.0.0", hash=defn.content_hash()).model_dump(mode="json")
    flow = {"format": "switchboard.flow/1", "name": "orders", "nodes": [
        {"id": "order", "type": "core.inject", "params": {"payload": P("order 7")}},
        {"id": "plain", "type": "subflow:check_stock", "subflow": pin, "params": {
            "sku": P("P-9"), "qty": P(3), "warehouse": P("east")}},
        {"id": "plain_out", "type": "core.debug"},
        {"id": "ask", "type": "core.inject", "params": {"payload": P("Is A-1 in stock?")}},
        {"id": "agent", "type": "ai.agent", "params": {}},
        {"id": "show", "type": "core.debug", "params": {"path": P("msg")}},
        {**tool_instance(), "subflow": pin}],
        "wires": [W("order", "plain:order"), W("plain:result", "plain_out"), W("ask", "agent"),
                  W("agent", "show"), W("agent:tools", "stock:order")]}
    path = tmp_path / "orders.flow.json"
    path.write_text(json.dumps(flow, indent=2))
    return path


async def test_done_when_two_library_instances_one_a_tool_over_a_real_openai_wire(tmp_path,
                                                                                   monkeypatch):
    from runtime.flow import load_flow
    from tests.servers.llm import LlmServer, openai_reply

    path = library_flow(tmp_path)
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-subflow-tool")
    with LlmServer() as llm:
        data = json.loads(path.read_text())
        data["nodes"][4]["params"] = {
            "provider": P("openai"), "model": P("gpt-test"), "base_url": P(llm.openai_url),
            "api_key_env": P("TEST_OPENAI_KEY"), "instructions": P("You check stock.")}
        path.write_text(json.dumps(data))
        llm.replies = [
            openai_reply(tool_calls=[("check_stock", {"sku": "A-1", "qty": 2})]),
            openai_reply(tool_calls=[("check_stock", {"sku": "A-1", "warehouse": "evil"})]),
            openai_reply("A-1 is in stock."),
        ]
        r = await run(load_flow(str(path)), file=str(path))
        posts = [q["body"] for q in llm.requests if q["kind"] == "openai"]
    assert r.result.status == "ok", r.of("node.error")
    # The plain instance ran with the designer's values.
    assert [e.value for e in r.of("debug") if e.node == "plain_out"] == ["P-9 x3 from east"]
    # The schema on the wire: exactly the two AI params.
    [tool] = posts[0]["tools"]
    assert tool["function"]["name"] == "check_stock"
    assert tool["function"]["description"] == "Check whether a product is in stock"
    assert set(tool["function"]["parameters"]["properties"]) == {"sku", "qty"}
    assert tool["function"]["parameters"]["additionalProperties"] is False
    # What the LLM got back: the template's text, from the designer's warehouse.
    answer = [m for m in posts[1]["messages"] if m["role"] == "tool"][-1]
    assert json.loads(answer["content"]) == {"result": "A-1 x2 from south"}
    # The Custom param sent by the LLM: refused, and no node inside ran again.
    refused = [m for m in posts[2]["messages"] if m["role"] == "tool"][-1]
    assert json.loads(refused["content"])["error"].startswith(
        "refused: unknown argument 'warehouse' (check_stock accepts: sku, qty)")
    assert r.engine.nodes["stock.t"].count_in == 1
    assert r.engine.nodes["plain.t"].count_in == 1


def test_switchboard_tools_prints_the_subflow_tools_schema(tmp_path):
    path = library_flow(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "runtime.cli", "tools", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    specs = json.loads(proc.stdout)
    [fn] = specs["agent"]
    assert fn["function"]["name"] == "check_stock"
    assert fn["function"]["parameters"]["properties"] == {
        "sku": {"type": "string", "description": "The product's SKU"},
        "qty": {"type": "integer", "description": "How many"}}
    assert fn["function"]["parameters"]["required"] == ["sku"]


async def test_after_a_first_answer_the_rest_of_the_work_goes_on_and_its_error_fails_nothing():
    """result first: the fast branch answers; the slow branch goes on and
    fails later: a caught node.error, the call a success, the run ok."""
    d = stock_def()
    d["nodes"].append({"id": "fast", "type": "core.change", "params": {"rules": P([
        {"action": "set", "path": "payload", "value": "fast"}])}})
    d["wires"] = [W("i", "fast"), W("fast", "o"), W("i", "look"), W("look", "o")]
    f = agent_flow([calls(("check_stock", {"sku": "broken", "qty": 3})), {"text": "done"}],
                   tool_instance(), [d])
    r = await run(f)
    assert r.result.status == "ok" and r.result.errors == 0, r.result
    assert r.tool_calls()[0] == {**r.tool_calls()[0], "status": "success",
                                 "data": {"result": "fast"}}
    assert Stock.runs == ["broken"]  # it ran on after the answer
    [err] = [e for e in r.of("node.error") if e.node == "stock.look"]
    assert err.caught and "no such product" in err.message


async def test_an_ai_param_named_like_a_key_the_run_keeps_is_refused_before_any_node_runs():
    d = stock_def()
    d["params"] = [*STOCK_PARAMS, {"name": "_msgid", "type": "str", "ai_allowed": True,
                                   "default": "x"}]
    tool = tool_instance(_msgid=AI_)
    f = agent_flow([calls(("check_stock", {"sku": "A", "_msgid": "forged"})), {"text": "done"}],
                   tool, [d])
    r = await run(f)
    [call] = r.tool_calls()
    assert call["status"] == "error"
    assert "param '_msgid' has a name the run keeps for itself" in call["error"]
    assert Stock.runs == []

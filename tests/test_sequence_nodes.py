"""core.join, core.rate_limit, core.loop and the variable nodes, each run in a
real engine. The rate limit runs on a clock the test steps by hand, so what
it lets through per interval is asserted exactly, with no sleeps."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nodes.core.variables import global_file
from runtime.flow import parse_flow, validate_flow
from runtime.message import Message, deep_copy
from runtime.node import CUSTOM, Node, Param, node
from runtime.registry import Registry
from tests.runtime_fixtures import N, engine_for, make_flow, registry, run, until


@node("test.seq.emit", name="Emit messages", category="Test", inputs=())
class Emit(Node):
    """A source that sends the messages it is given, in order."""

    messages = Param("json", "The messages to send", default=[], allow=CUSTOM)

    async def generate(self) -> None:
        for m in self.messages.get():
            self.send(Message(m))


@node("test.seq.shuffle", name="Reorder", category="Test")
class Shuffle(Node):
    """Async: yields to the loop payload['turns'] times, so that messages
    leave in another order than they came (no time involved)."""

    async def on_message(self, msg):
        for _ in range(msg["payload"]["turns"]):
            await asyncio.sleep(0)


@node("test.seq.stamp", name="Stamp", category="Test", outputs=())
class Stamp(Node):
    """Records (clock time, payload) of each message; the test sets the clock."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.clock: Any = None
        self.seen: list[tuple[float, Any]] = []

    def on_message(self, msg):
        self.seen.append((self.clock.now(), msg["payload"]))


@node("test.seq.copy", name="Record a copy", category="Test")
class RecordCopy(Node):
    """Records a copy of each message as it passed (later nodes change the
    message itself) and sends it on."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.seen: list[dict] = []

    def on_message(self, msg):
        self.seen.append(deep_copy(msg))


REG = registry(Emit, Shuffle, Stamp, RecordCopy)


def emit(*messages: dict) -> dict:
    return N("src", "test.seq.emit", messages=list(messages))


async def run_flow(nodes, wires, **kw):
    return await run(make_flow(nodes, wires), reg=REG, timeout=30, **kw)


def errors(r) -> list[str]:
    return [e.message for e in r.of("node.error")]


# -- join -------------------------------------------------------------------------


async def test_join_count_sends_every_n_messages():
    r = await run_flow([emit(*({"payload": i} for i in range(5))),
                        N("join", "core.join", mode="count", count=2), N("sink", "test.sink")],
                       ["src->join", "join->sink"])
    out = r.node("sink").seen
    assert [m["payload"] for m in out] == [[0, 1], [2, 3]]
    assert out[0]["join"] == {"count": 2, "partial": False, "reason": "count"}
    # The fifth waits for a partner; with no timeout it is not sent, and the run says so.
    assert any("1 message(s) of incomplete groups were not sent" in e.text for e in r.of("log"))


async def test_join_key_groups_by_a_property_and_complete_ends_a_group():
    msgs = [{"topic": "a", "payload": 1}, {"topic": "b", "payload": 2},
            {"topic": "a", "payload": 3}, {"topic": "b", "payload": 4, "complete": True},
            {"topic": "a", "payload": 5}, {"topic": "a", "payload": 6}, {"topic": "a", "payload": 7}]
    r = await run_flow([emit(*msgs), N("join", "core.join", mode="key", key="topic", count=3),
                        N("sink", "test.sink")], ["src->join", "join->sink"])
    out = [(m["topic"], m["payload"], m["join"]["reason"]) for m in r.node("sink").seen]
    assert out == [("b", [2, 4], "complete"), ("a", [1, 3, 5], "count")]
    assert r.result.errors == 0


async def test_join_auto_restores_the_order_of_a_split():
    items = [{"turns": 6, "v": "a"}, {"turns": 0, "v": "b"}, {"turns": 3, "v": "c"}]
    nodes = [N("src", "core.inject", payload=items), N("split", "core.split"),
             N("mix", "test.seq.shuffle"), N("seen", "test.seq.copy"),
             N("join", "core.join"), N("sink", "test.sink")]
    r = await run_flow(nodes, ["src->split", "split->mix", "mix->seen", "seen->join",
                               "join->sink"])
    arrived = [m["payload"]["v"] for m in r.node("seen").seen]
    assert arrived == ["b", "c", "a"]  # the parts did arrive out of order
    [out] = r.node("sink").seen
    assert [p["v"] for p in out["payload"]] == ["a", "b", "c"]
    assert "parts" not in out and out["join"] == {"count": 3, "partial": False,
                                                   "reason": "complete"}


async def test_join_auto_rebuilds_an_object_that_was_split():
    nodes = [N("src", "core.inject", payload={"x": 1, "y": 2}), N("split", "core.split"),
             N("join", "core.join"), N("sink", "test.sink")]
    r = await run_flow(nodes, ["src->split", "split->join", "join->sink"])
    assert [m["payload"] for m in r.node("sink").seen] == [{"x": 1, "y": 2}]


async def test_join_timeout_sends_what_arrived_flagged_partial():
    r = await run_flow([emit({"payload": 1}, {"payload": 2}),
                        N("join", "core.join", mode="count", count=5, timeout_seconds=0.01),
                        N("sink", "test.sink")], ["src->join", "join->sink"])
    [out] = r.node("sink").seen
    assert out["payload"] == [1, 2]
    assert out["join"] == {"count": 2, "partial": True, "reason": "timeout"}
    assert r.result.reason == "completed"  # the run waited for the timeout, then ended


async def test_join_auto_timeout_flags_missing_parts():
    # Only parts 0 and 2 of 3 ever arrive.
    msgs = [{"payload": "a", "parts": {"index": 0, "count": 3, "key": 0}},
            {"payload": "c", "parts": {"index": 2, "count": 3, "key": 2}}]
    r = await run_flow([emit(*msgs), N("join", "core.join", timeout_seconds=0.01),
                        N("sink", "test.sink")], ["src->join", "join->sink"])
    [out] = r.node("sink").seen
    assert out["payload"] == ["a", "c"] and out["join"]["partial"] is True


async def test_join_max_pending_bounds_what_it_holds():
    msgs = [{"topic": f"t{i}", "payload": i} for i in range(5)]
    r = await run_flow([emit(*msgs),
                        N("join", "core.join", mode="key", count=2, max_pending=3),
                        N("sink", "test.sink")], ["src->join", "join->sink"])
    assert errors(r) == ["join holds 3 messages already, the most max_pending=3 allows; raise "
                         "it, or set timeout_seconds so that incomplete groups are sent"] * 2
    assert r.node("sink").seen == []


async def test_join_auto_refuses_a_message_that_is_no_part():
    r = await run_flow([emit({"payload": 1}), N("join", "core.join"), N("sink", "test.sink")],
                       ["src->join", "join->sink"])
    assert "mode auto joins the messages of a Split (msg.parts) or a Loop" in errors(r)[0]


@pytest.mark.parametrize("type_, params, field, why", [
    ("core.join", {"mode": "count", "count": 0}, "count", "count must be at least 1"),
    ("core.join", {"path": "payload["}, "path", "bad path"),
    ("core.join", {"timeout_seconds": 10_000_000}, "timeout_seconds", "up to 2592000"),
    ("core.join", {"max_pending": 0}, "max_pending", "between 1 and"),
    ("core.rate_limit", {"interval_seconds": 0}, "interval_seconds", "more than 0"),
    ("core.rate_limit", {"count": 0}, "count", "between 1 and"),
    ("core.loop", {"max_items": 0}, "max_items", "between 1 and"),
])
def test_settings_are_checked_with_the_flow(type_, params, field, why):
    flow = make_flow([emit(), N("n", type_, **params)], ["src->n"])
    problems = [p for p in validate_flow(flow, REG) if p.severity == "error"]
    assert [(p.field, why in p.message) for p in problems] == [(f"params.{field}", True)]


# -- loop -------------------------------------------------------------------------


async def test_loop_sends_each_item_then_the_whole_message_on_done():
    nodes = [N("src", "core.inject", payload=["a", "b", "c"], topic="t"),
             N("loop", "core.loop"), N("items", "test.sink"), N("done", "test.sink")]
    r = await run_flow(nodes, ["src->loop", "loop.item->items", "loop.done->done"])
    items = r.node("items").seen
    assert [(m["payload"], m["loop"]["index"], m["loop"]["count"], m["topic"]) for m in items] \
        == [("a", 0, 3, "t"), ("b", 1, 3, "t"), ("c", 2, 3, "t")]
    [done] = r.node("done").seen
    assert done["payload"] == ["a", "b", "c"] and "loop" not in done


async def test_loop_then_join_gathers_the_results_in_order():
    items = [{"turns": 4, "v": 1}, {"turns": 0, "v": 2}]
    nodes = [N("src", "core.inject", payload=items), N("loop", "core.loop"),
             N("mix", "test.seq.shuffle"), N("join", "core.join"), N("sink", "test.sink")]
    r = await run_flow(nodes, ["src->loop", "loop.item->mix", "mix->join", "join->sink"])
    [out] = r.node("sink").seen
    assert [p["v"] for p in out["payload"]] == [1, 2] and "loop" not in out


async def test_loop_refuses_what_is_not_a_list_and_a_list_past_max_items():
    r = await run_flow([emit({"payload": "text"}, {"payload": [1, 2, 3]}),
                        N("loop", "core.loop", max_items=2), N("items", "test.sink")],
                       ["src->loop", "loop.item->items"])
    assert errors(r) == ["path: 'payload' holds str, not a list",
                         "path: 'payload' holds 3 elements, more than max_items=2"]
    assert r.node("items").seen == []


# -- rate limit ------------------------------------------------------------------------


class StepClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleepers: list[tuple[float, asyncio.Future]] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.t + seconds, fut))
        await fut

    def advance(self, seconds: float) -> None:
        self.t += seconds
        for when, fut in list(self.sleepers):
            if when <= self.t and not fut.done():
                fut.set_result(None)
        self.sleepers = [(w, f) for w, f in self.sleepers if not f.done()]


async def rate_run(n_messages: int, **params: Any):
    flow = make_flow([emit(*({"payload": i} for i in range(n_messages))),
                      N("rl", "core.rate_limit", **params), N("out", "test.seq.stamp")],
                     ["src->rl", "rl->out"])
    engine, events = engine_for(flow, reg=REG)
    clock = StepClock()
    engine.nodes["rl"].node.clock = clock
    engine.nodes["out"].node.clock = clock
    task = asyncio.create_task(engine.run(timeout=30))
    return engine, events, clock, task


async def test_rate_limit_queue_lets_n_per_interval_through_in_order():
    engine, _, clock, task = await rate_run(7, count=3, interval_seconds=1.0)
    out = engine.nodes["out"].node.seen
    rl = engine.nodes["rl"].node
    await until(lambda: len(out) == 3 and len(clock.sleepers) == 1)
    await until(lambda: rl.queued == 4)
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(out) == 3  # the others wait for the clock
    clock.advance(0.5)
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(out) == 3  # half an interval later: still three
    clock.advance(0.5)
    await until(lambda: len(out) == 6)
    clock.advance(1.0)
    await until(lambda: len(out) == 7)
    result = await task
    assert result.reason == "completed"
    assert [p for _, p in out] == list(range(7))
    assert [t for t, _ in out] == [0, 0, 0, 1, 1, 1, 2]
    # No window of one interval holds more than three.
    times = [t for t, _ in out]
    assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) == 3


async def test_rate_limit_drop_mode_drops_what_is_over_the_rate():
    engine, events, clock, task = await rate_run(5, count=2, interval_seconds=1.0, mode="drop")
    result = await task
    assert result.reason == "completed"
    assert engine.nodes["out"].node.seen == [(0.0, 0), (0.0, 1)]
    assert engine.nodes["rl"].node.dropped == 3
    assert any(e.type == "node.status" and e.text.startswith("dropped 1 (over the rate)")
               for e in events)


async def test_rate_limit_queue_is_bounded_by_max_queue():
    engine, events, clock, task = await rate_run(5, count=1, interval_seconds=1.0, max_queue=2)
    out = engine.nodes["out"].node.seen
    rl = engine.nodes["rl"].node
    await until(lambda: rl.dropped == 2 and rl.queued == 2)
    clock.advance(1.0)
    await until(lambda: len(out) == 2)
    clock.advance(1.0)
    await task
    assert out == [(0.0, 0), (1.0, 1), (2.0, 2)]
    assert any(e.type == "node.status" and "queue full, max_queue=2" in e.text for e in events)


async def test_rate_limit_on_the_real_clock_keeps_order():
    r = await run_flow([emit(*({"payload": i} for i in range(6))),
                        N("rl", "core.rate_limit", count=2, interval_seconds=0.01),
                        N("sink", "test.sink")], ["src->rl", "rl->sink"])
    assert [m["payload"] for m in r.node("sink").seen] == list(range(6))


# -- variables ------------------------------------------------------------------------


def var_flow(scope: str, *, set_value: bool = True) -> Any:
    nodes = [N("src", "core.inject", payload={"n": 41})]
    wires = []
    if set_value:
        nodes += [N("set", "core.set_variable", variable="answer", scope=scope),
                  N("change", "core.change", rules=[{"action": "set", "path": "payload",
                                                     "value": "replaced"}])]
        wires += ["src->set", "set->change", "change->get"]
    else:
        wires += ["src->get"]
    nodes += [N("get", "core.get_variable", variable="answer", scope=scope, default="none"),
              N("sink", "test.sink")]
    wires += ["get->sink"]
    return make_flow(nodes, wires)


async def test_flow_variables_are_shared_in_a_run_and_gone_in_the_next(data_dir):
    r = await run(var_flow("flow"), reg=REG)
    assert [m["payload"] for m in r.node("sink").seen] == [{"n": 41}]
    r2 = await run(var_flow("flow", set_value=False), reg=REG)
    assert [m["payload"] for m in r2.node("sink").seen] == ["none"]
    assert not global_file().exists()  # flow scope never touches the disk


async def test_global_variables_persist_across_runs(data_dir):
    await run(var_flow("global"), reg=REG)
    assert json.loads((data_dir / "variables.json").read_text()) == {"answer": {"n": 41}}
    r2 = await run(var_flow("global", set_value=False), reg=REG)
    assert [m["payload"] for m in r2.node("sink").seen] == [{"n": 41}]


async def test_a_variable_read_is_a_copy_and_delete_forgets(data_dir):
    nodes = [N("src", "core.inject", payload=[1]),
             N("set", "core.set_variable", variable="v", scope="global"),
             N("get1", "core.get_variable", variable="v", scope="global"),
             N("mutate", "core.change", rules=[{"action": "set", "path": "payload[0]",
                                                "value": 99}]),
             N("get2", "core.get_variable", variable="v", scope="global"),
             N("rec", "test.seq.copy"),
             N("del", "core.set_variable", variable="v", scope="global", action="delete"),
             N("get3", "core.get_variable", variable="v", scope="global", default="gone"),
             N("sink", "test.sink")]
    r = await run(make_flow(nodes, ["src->set", "set->get1", "get1->mutate", "mutate->get2",
                                    "get2->rec", "rec->del", "del->get3", "get3->sink"]),
                  reg=REG)
    assert [m["payload"] for m in r.node("rec").seen] == [[1]]
    assert [m["payload"] for m in r.node("sink").seen] == ["gone"]
    assert json.loads(global_file().read_text()) == {}


async def test_variable_bounds_name_the_param(data_dir):
    nodes = [emit({"payload": "x" * 200}, {"payload": 1}),
             N("set", "core.set_variable", variable={"scope": "message", "path": "name"},
               max_value_bytes=100, scope="global"),
             N("sink", "test.sink")]
    r = await run(make_flow(nodes, ["src->set", "set->sink"]), reg=REG)
    assert errors(r) == ["name: a variable needs a name (text)",
                         "name: a variable needs a name (text)"]
    nodes[1] = N("set", "core.set_variable", variable="v", max_value_bytes=100)
    r = await run(make_flow(nodes, ["src->set", "set->sink"]), reg=REG)
    assert errors(r) == ["value: 202 bytes of JSON, more than max_value_bytes=100"]
    assert [m["payload"] for m in r.node("sink").seen] == [1]


async def test_a_broken_global_file_is_named_not_a_traceback(data_dir):
    data_dir.mkdir(parents=True)
    (data_dir / "variables.json").write_text("{not json")
    r = await run(var_flow("global", set_value=False), reg=REG)
    [text] = errors(r)
    assert text.startswith(f"cannot read the global variables ({data_dir / 'variables.json'})")


async def test_variables_as_tools_for_an_agent(data_dir):
    from tests.servers.flows import agent_flow, fixed, scripted

    flow = agent_flow(
        scripted([{"tool_calls": [{"name": "set_variable",
                                   "arguments": {"variable": "city", "value": "Oslo"}}]},
                  {"tool_calls": [{"name": "get_variable", "arguments": {"variable": "city"}}]},
                  {"text": "{last_result}"}]),
        [{"id": "set", "type": "core.set_variable",
          "params": {"variable": {"scope": "ai"}, "value": {"scope": "ai"},
                     "scope": fixed("global")}},
         {"id": "get", "type": "core.get_variable",
          "params": {"variable": {"scope": "ai"}, "scope": fixed("global")}}])
    r = await run(flow, reg=REG, timeout=30)
    [final] = r.debug("show")
    assert [c["status"] for c in final["agent"]["tool_calls"]] == ["success", "success"]
    assert final["agent"]["tool_calls"][1]["data"] == {"value": "Oslo"}
    assert json.loads(global_file().read_text()) == {"city": "Oslo"}


@pytest.mark.parametrize("type_", ["core.join", "core.rate_limit", "core.loop",
                                   "core.set_variable", "core.get_variable", "core.python"])
def test_every_new_node_has_an_icon_a_colour_and_descriptions(type_):
    spec = REG.spec(type_)
    icons = Path(__file__).resolve().parents[1] / "resources" / "icons"
    assert (icons / f"{spec.icon}.svg").exists() and spec.color and spec.description
    assert all(p.description for p in spec.params)


# -- the examples of docs/nodes-code-and-sequences.md ------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "nodes-code-and-sequences.md"
EXAMPLE = re.compile(r"<!-- example: (\S+)(?: runs=(\d+))? -->\n```json\n(.*?)\n```\n\n"
                     r"```text\n(.*?)\n```", re.S)


def doc_examples() -> list[tuple[str, int, str, list[dict]]]:
    return [(name, int(runs or 1), flow, [json.loads(line) for line in out.splitlines()])
            for name, runs, flow, out in EXAMPLE.findall(DOC.read_text(encoding="utf-8"))]


def test_the_page_has_its_examples():
    assert {name for name, *_ in doc_examples()} == {
        "python-double", "python-fan-out", "python-tool", "split-join", "join-key", "loop",
        "rate-limit", "global-counter"}


@pytest.mark.parametrize("name, runs, flow_text, expected", doc_examples(),
                         ids=[e[0] for e in doc_examples()])
async def test_doc_example_prints_what_the_page_says(name, runs, flow_text, expected, data_dir):
    flow = parse_flow(json.loads(flow_text))
    printed = []
    for _ in range(runs):
        r = await run(flow, reg=Registry.default(), timeout=60)
        assert r.result.reason == "completed", r.of("node.error")
        printed += [{"node": e.node, "name": e.name, "value": e.value} for e in r.of("debug")]
    assert printed == expected


def test_a_doc_example_runs_with_the_cli(tmp_path, data_dir):
    [(_, _, flow_text, expected)] = [e for e in doc_examples() if e[0] == "python-double"]
    path = tmp_path / "example.flow.json"
    path.write_text(flow_text)
    cli = Path(sys.executable).with_name("switchboard")
    out = subprocess.run([str(cli), "run", str(path)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir)})
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == expected

"""The engine: ordering, fan-out, async overlap, depth bound, errors, stop,
events. No test waits on a clock: overlap and order are driven by asyncio
events and counted loop turns."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from runtime import engine as engine_mod
from runtime.engine import MAX_CATCHES, MAX_DEPTH, Engine
from runtime.events import (
    Debug,
    EventBus,
    JsonlWriter,
    NodeError,
    RunFinished,
    Stats,
    parse_event,
    read_jsonl,
)
from runtime.flow import FlowError
from runtime.message import Message
from runtime.node import Node, node
from runtime.registry import Registry
from tests.runtime_fixtures import (
    REGISTRY,
    Lifecycle,
    N,
    chain,
    engine_for,
    make_flow,
    run,
    until,
)

# -- ordering, copying ------------------------------------------------------------


async def test_messages_reach_a_node_in_the_order_sent():
    flow = make_flow([N("src", "core.inject", payload=0, count=50), N("inc", "test.inc"),
                      N("sink", "test.sink")], ["src->inc", "inc->sink"])
    r = await run(flow)
    assert [m["payload"] for m in r.node("sink").seen] == [1] * 50
    ids = [m["_msgid"] for m in r.node("sink").seen]
    assert len(set(ids)) == 50
    assert ids == sorted(ids, key=lambda i: int(i.split(".")[1], 16))
    assert r.result.status == "ok" and r.result.errors == 0


async def test_linear_chain_passes_one_object_without_copying():
    flow = chain(("test.record", {}), ("test.record", {}), ("core.change", {"rules": [
        {"action": "set", "path": "payload.x", "value": 1}]}), ("test.sink", {}), payload={})
    r = await run(flow)
    a, b, sink = r.node("n1").seen, r.node("n2").seen, r.node("n4").seen
    assert len(a) == len(b) == len(sink) == 1
    assert a[0] is b[0] is sink[0]
    assert sink[0]["payload"] == {"x": 1}


async def test_fan_out_clones_so_branches_do_not_share_mutations():
    flow = make_flow([N("src", "core.inject", payload={"deep": {"v": 1}}),
                      N("a", "test.tag"), N("b", "test.tag"), N("c", "test.tag"),
                      N("sa", "test.sink"), N("sb", "test.sink"), N("sc", "test.sink")],
                     ["src->a", "src->b", "src->c", "a->sa", "b->sb", "c->sc"])
    r = await run(flow)
    got = {sid: r.node(sid).seen[0] for sid in ("sa", "sb", "sc")}
    assert got["sa"]["payload"]["tags"] == ["a"]
    assert got["sb"]["payload"]["tags"] == ["b"]
    assert got["sc"]["payload"]["tags"] == ["c"]
    assert got["sa"]["payload"]["deep"] is not got["sb"]["payload"]["deep"]
    assert len({id(m) for m in got.values()}) == 3
    assert got["sa"]["_msgid"] == got["sb"]["_msgid"]  # a clone is the same message


async def test_return_values_pick_ports():
    flow = make_flow([N("src", "core.inject", count=0), N("r", "test.returns"),
                      N("o", "test.sink"), N("x", "test.sink")], ["r.out->o", "r.other->x"])
    engine, _ = engine_for(flow)
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.running)
    for ret in [None, "other", ["out", "other"], "drop", [], "nope"]:
        engine.inject("r", Message.new(ret=ret))
    await task
    o = [m.get("ret") for m in engine.nodes["o"].node.seen]
    x = [m.get("ret") for m in engine.nodes["x"].node.seen]
    assert o == [None, ["out", "other"]]
    assert x == ["other", ["out", "other"]]


@pytest.mark.parametrize("junk", [42, {"port": "out"}, [1]])
async def test_a_bad_return_value_is_the_nodes_error_and_the_run_ends(junk):
    flow = make_flow([N("src", "core.inject"), N("c", "core.change", rules=[
        {"action": "set", "path": "ret", "value": junk}]), N("r", "test.returns"),
        N("o", "test.sink")], ["src->c", "c->r", "r->o"])
    r = await run(flow)
    [err] = r.of("node.error")
    assert err.node == "r" and "on_message returned" in err.message
    assert r.result.errors == 1 and r.result.status == "error"


async def test_self_send_goes_out_on_the_named_port():
    flow = make_flow([N("src", "core.inject", payload="orig"), N("s", "test.sender"),
                      N("o", "test.sink"), N("x", "test.sink")], ["src->s", "s.out->o",
                                                                   "s.other->x"])
    r = await run(flow)
    assert [m["payload"] for m in r.node("o").seen] == ["orig"]
    assert [m["payload"] for m in r.node("x").seen] == ["extra0", "extra1"]
    assert all(m["_msgid"] for m in r.node("x").seen)


# -- async nodes -------------------------------------------------------------------


async def test_async_node_overlaps_messages():
    flow = make_flow([N("src", "core.inject", count=3), N("g", "test.gate"),
                      N("sink", "test.sink")], ["src->g", "g->sink"])
    engine, _ = engine_for(flow)
    gate = engine.nodes["g"].node
    gate.expect = 3
    task = asyncio.create_task(engine.run())
    # All three are inside on_message at once; with no overlap this would
    # never be set and run(timeout) below would report it.
    await asyncio.wait_for(gate.all_waiting.wait(), 10)
    assert gate.max_active == 3 and engine.nodes["g"].active == 3
    assert engine.nodes["sink"].node.seen == []
    gate.open.set()
    result = await task
    assert result.status == "ok" and len(engine.nodes["sink"].node.seen) == 3


@pytest.mark.parametrize("node_type, in_order", [("test.yield_any", False),
                                                 ("test.yield_one", True)])
async def test_concurrency_one_keeps_order(node_type, in_order):
    # Message i yields (4 - i) times: unlimited concurrency finishes the
    # short ones first; concurrency=1 runs them one after another.
    payloads = [{"turns": 4 - i, "i": i} for i in range(4)]
    nodes = [N("src", "core.inject", count=0), N("y", node_type), N("sink", "test.sink")]
    engine, _ = engine_for(make_flow(nodes, ["y->sink"]))
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.running)
    engine.hold()
    for p in payloads:
        engine.inject("y", Message.new(p))
    engine.release()
    await task
    order = [m["payload"]["i"] for m in engine.nodes["sink"].node.seen]
    assert sorted(order) == [0, 1, 2, 3]
    assert (order == [0, 1, 2, 3]) is in_order


# -- loops and depth ---------------------------------------------------------------


def counting_loop(n: int, via_split: bool = False):
    nodes = [N("src", "core.inject", payload=0), N("inc", "test.inc"),
             N("sw", "core.switch", rules=[{"op": "lt", "value": n}, {"op": "else"}]),
             N("done", "test.sink")]
    wires = ["inc->sw", "sw.out1->done"]
    if via_split:  # a node that sends from inside on_message, in the loop
        nodes += [N("wrap", "test.wrap"), N("split", "core.split")]
        wires += ["src->wrap", "wrap->split", "split->inc", "sw.out0->wrap"]
    else:
        wires += ["src->inc", "sw.out0->inc"]
    return make_flow(nodes, wires)


@pytest.mark.parametrize("via_split", [False, True])
async def test_deep_loop_past_max_depth_finishes(via_split):
    n = MAX_DEPTH * 40
    r = await run(counting_loop(n, via_split))
    assert r.result.status == "ok", r.of("node.error")
    [final] = r.node("done").seen
    assert final["payload"] == n
    assert r.engine.nodes["inc"].count_in == n


async def test_catch_loop_ends_even_when_a_node_deletes_msg_error():
    # The catch count once lived in msg.error, so a catch flow that deleted
    # it looped until the run was stopped. Now it is kept on the message
    # object, out of any node's reach: the 11th failure is final.
    flow = make_flow([
        N("src", "core.inject", payload=0),
        N("f", "test.fail", fail_all=True),
        N("c", "core.catch"),
        N("clear", "core.change", rules=[{"action": "delete", "path": "error"}]),
        N("inc", "test.inc"),
        N("done", "test.sink")],
        ["src->f", "c->clear", "clear->inc", "inc->f"])
    r = await run(flow, timeout=30)
    errors = r.of("node.error")
    assert len(errors) == MAX_CATCHES + 1
    assert [e.caught for e in errors] == [True] * MAX_CATCHES + [False]
    assert "caught 10 times already" in errors[-1].message
    assert r.engine.nodes["inc"].count_in == MAX_CATCHES
    assert r.result.reason == "failed" and r.result.errors == 1


async def test_a_message_is_caught_at_most_max_catches_times():
    # A catch flow that fails every time (here: it feeds the failing node
    # again) must not loop until the run is stopped.

    flow = make_flow([
        N("src", "core.inject", payload=0),
        N("f", "test.fail", fail_all=True),
        N("c", "core.catch"),
        N("caught", "test.record")], ["src->f", "c->caught", "caught->f"])
    r = await run(flow, timeout=30)
    assert r.result.status == "error" and r.result.errors == 1
    errors = r.of("node.error")
    assert len(errors) == MAX_CATCHES + 1
    assert all(e.caught for e in errors[:-1]) and not errors[-1].caught
    assert "not caught again" in errors[-1].message
    assert len(r.node("caught").seen) == MAX_CATCHES
    assert r.node("caught").seen[-1]["error"]["catches"] == MAX_CATCHES


# -- end of run ------------------------------------------------------------------


async def test_run_ends_when_nothing_is_in_flight():
    flow = make_flow([N("src", "core.inject", count=5), N("d", "core.delay", seconds=0),
                      N("sink", "test.sink")], ["src->d", "d->sink"])
    engine, _ = engine_for(flow)
    result = await engine.run()  # no timeout: would hang if the count leaked
    assert result.status == "ok" and len(engine.nodes["sink"].node.seen) == 5
    assert engine._inflight == 0 and not engine._tasks and not engine.running


async def test_a_flow_without_sources_ends_at_once():
    r = await run(make_flow([N("a", "test.record")]))
    assert r.result.status == "ok"


async def test_start_and_close_are_called_even_after_an_error():
    Lifecycle.events.clear()
    flow = make_flow([N("src", "core.inject"), N("l", "test.lifecycle"),
                      N("f", "test.fail", fail_all=True)], ["src->l", "l->f"])
    await run(flow)
    assert Lifecycle.events == ["start l", "close l"]


async def test_a_failing_start_ends_the_run_with_an_error():
    Lifecycle.events.clear()
    flow = make_flow([N("src", "core.inject"), N("l", "test.lifecycle", fail_start=True),
                      N("sink", "test.sink")], ["src->l", "l->sink"])
    r = await run(flow)
    assert r.result.status == "error" and r.result.errors == 1
    assert r.node("sink").seen == []
    assert "cannot connect" in r.of("node.error")[0].message
    assert Lifecycle.events == ["start l", "close l"]


async def test_engine_refuses_an_invalid_flow():
    with pytest.raises(FlowError):
        Engine(make_flow([N("a", "no.such")]), REGISTRY)


# -- errors ----------------------------------------------------------------------------


def error_flow(catch: bool, watch: list[str] | None = None):
    nodes = [N("src", "core.inject", payload="x"),
             N("bad", "core.change", rules=[{"action": "set", "path": "payload", "value": "bad"}]),
             N("f", "test.fail"), N("after", "test.sink")]
    wires = ["src->f", "src->bad", "bad->f", "f->after"]
    if catch:
        nodes += [N("c", "core.catch", **({"nodes": watch} if watch is not None else {})),
                  N("caught", "test.sink")]
        wires += ["c->caught"]
    return make_flow(nodes, wires)


async def test_node_error_is_routed_to_catch_and_the_run_goes_on():
    r = await run(error_flow(catch=True))
    [err] = r.of("node.error")
    assert err.node == "f" and err.caught and "ValueError: cannot handle 'bad'" in err.message
    [caught] = r.node("caught").seen
    assert caught["error"]["message"] == err.message
    assert caught["error"]["node"] == "f" and caught["error"]["type"] == "test.fail"
    assert caught["error"]["name"] == "Fail"
    assert caught["payload"] == "bad" and caught["_msgid"] == err.msgid
    # The other message went on through the same node.
    assert [m["payload"] for m in r.node("after").seen] == ["x"]
    assert r.result.status == "ok" and r.result.errors == 0
    # The error event comes before anything the catch flow did.
    kinds = [e.type for e in r.events]
    assert kinds.index("node.error") < len(kinds) - 1
    assert r.engine.nodes["f"].errors == 1


async def test_uncaught_error_counts_in_the_result():
    r = await run(error_flow(catch=False))
    assert r.result.errors == 1 and r.result.status == "error"
    assert [m["payload"] for m in r.node("after").seen] == ["x"]
    assert not r.of("node.error")[0].caught
    finished = r.of("run.finished")[-1]
    assert finished.status == "error" and finished.errors == 1


async def test_catch_watching_other_nodes_does_not_catch():
    r = await run(error_flow(catch=True, watch=["bad"]))
    assert r.node("caught").seen == [] and r.result.errors == 1
    r = await run(error_flow(catch=True, watch=["f"]))
    assert len(r.node("caught").seen) == 1 and r.result.errors == 0


async def test_a_failing_source_is_reported_and_what_it_sent_still_arrives():
    flow = make_flow([N("s", "test.badsource"), N("sink", "test.sink"), N("c", "core.catch"),
                      N("caught", "test.sink")], ["s->sink", "c->caught"])
    r = await run(flow)
    assert [m["payload"] for m in r.node("sink").seen] == ["first"]
    [caught] = r.node("caught").seen
    assert caught["error"]["node"] == "s" and "source broke" in caught["error"]["message"]


async def test_async_node_error_is_caught_too():
    flow = make_flow([N("src", "core.inject", payload="soon"),
                      N("d", "core.delay", seconds={"scope": "message", "path": "payload"}),
                      N("c", "core.catch"), N("caught", "test.sink")], ["src->d", "c->caught"])
    r = await run(flow)
    [caught] = r.node("caught").seen
    assert caught["error"]["node"] == "d" and "seconds must be a number" in caught["error"][
        "message"]


# -- stop, timeout -----------------------------------------------------------------


def long_delay_flow():
    return make_flow([N("src", "core.inject", count=3), N("d", "core.delay", seconds=3600),
                      N("sink", "test.sink")], ["src->d", "d->sink"])


async def test_stop_cancels_a_long_delay():
    engine, events = engine_for(long_delay_flow())
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.nodes["d"].active == 3)
    engine.stop()
    result = await asyncio.wait_for(task, 10)
    assert result.status == "stopped"
    assert engine.nodes["sink"].node.seen == []
    assert engine.nodes["d"].active == 0 and not engine._tasks
    assert [e.status for e in events if isinstance(e, RunFinished)] == ["stopped"]


async def test_stop_drops_deferred_messages_of_an_endless_loop():
    flow = make_flow([N("src", "core.inject", payload=0), N("inc", "test.inc"),
                      N("r", "test.record")], ["src->inc", "inc->r", "r->inc"])
    engine, _ = engine_for(flow, subscribe=False)
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.nodes["inc"].count_in > MAX_DEPTH * 3)
    engine.stop()
    result = await asyncio.wait_for(task, 10)
    seen = engine.nodes["inc"].count_in
    for _ in range(20):  # the loop must not go on after the run ended
        await asyncio.sleep(0)
    assert result.status == "stopped" and engine.nodes["inc"].count_in == seen


async def test_timeout_ends_the_run():
    r = await run(long_delay_flow(), timeout=0.05)
    assert r.result.status == "timeout" and r.node("sink").seen == []
    assert r.of("run.finished")[-1].status == "timeout"


# -- events --------------------------------------------------------------------------


async def test_stats_event_counts_nodes_and_wires():
    flow = make_flow([N("src", "core.inject", count=4), N("r", "test.record"),
                      N("sw", "core.switch", rules=[{"op": "eq", "value": "x"}]),
                      N("sink", "test.sink")], ["src->r", "r->sw", "sw.out0->sink"])
    r = await run(flow)
    stats = r.of("stats")[-1]
    assert isinstance(stats, Stats)
    assert stats.nodes["src"]["out"] == 4
    assert stats.nodes["r"] == {"in": 4, "out": 4, "errors": 0, "active": 0}
    assert stats.nodes["sw"]["in"] == 4 and stats.nodes["sw"]["out"] == 0  # "" != "x"
    assert stats.wires == {"0": 4, "1": 4, "2": 0}
    assert stats.last["r"]["in"]  # recorded because someone listens
    # The fast paths (a source's send, the chain loop) still record: a node
    # keeps its first messages of the tick (LAST_MESSAGES, in and out together).
    assert len(stats.last["src"]["out"]) == 4
    assert stats.last["r"]["out"] and stats.last["sw"]["in"]


async def test_trace_emits_message_sent_per_hop():
    flow = chain(("test.record", {}), ("test.record", {}), ("test.sink", {}), count=2)
    r = await run(flow, trace=True)
    sent = r.of("message.sent")
    assert [(e.source, e.target, e.wire) for e in sent] == [
        ("src", "n1", 0), ("n1", "n2", 1), ("n2", "n3", 2)] * 2
    assert all(e.port == "out" and e.msg["payload"] == 0 for e in sent)
    r = await run(flow)
    assert r.of("message.sent") == []


async def test_events_with_no_subscriber_are_never_built(monkeypatch):
    def boom(*a, **kw):
        raise AssertionError("an event was built with nobody listening")

    # Wherever the engine's modules build them (runtime.engine is a package).
    modules = [m for n, m in sys.modules.items() if n.startswith(engine_mod.__name__ + ".")]
    for name in ("Debug", "NodeError", "NodeStatus", "RunStarted", "RunFinished", "Stats",
                 "MessageSent", "Log"):
        users = [m for m in modules if hasattr(m, name)]
        assert users, name
        for m in users:
            monkeypatch.setattr(m, name, boom)
    flow = make_flow([N("src", "core.inject", count=3), N("f", "test.fail", fail_all=True),
                      N("d", "core.debug")], ["src->d", "src->f"])
    r = await run(flow, subscribe=False, trace=True)
    assert r.result.errors == 3 and r.events == []


async def test_a_failing_subscriber_does_not_break_the_run_or_the_others(caplog):
    bus = EventBus()
    got = []

    def broken(event):
        raise RuntimeError("inspector bug")

    bus.subscribe(broken)
    bus.subscribe(got.append)
    flow = chain(("core.debug", {}), payload="hello")
    result = await Engine(flow, REGISTRY, bus).run()
    assert result.status == "ok"
    assert [e.value for e in got if isinstance(e, Debug)] == ["hello"]
    assert "inspector bug" in caplog.text


def test_unsubscribe():
    bus = EventBus()
    got = []
    off = bus.subscribe(got.append)
    bus.publish(Debug(node="n", value=1))
    off()
    bus.publish(Debug(node="n", value=2))
    assert [e.value for e in got] == [1] and not bus.active


async def test_run_events_in_order_with_run_id():
    r = await run(chain(("core.debug", {}), payload=[1, {"a": "b"}]))
    kinds = [e.type for e in r.events if e.type not in ("stats", "run.replay")]
    assert kinds == ["run.started", "debug", "run.finished"]
    assert {e.run_id for e in r.events} == {r.engine.run_id}
    assert r.debug("n1") == [[1, {"a": "b"}]]


async def test_jsonl_writer_and_parse_event_round_trip(tmp_path):
    path = tmp_path / "events.jsonl"
    bus = EventBus()
    got = []
    bus.subscribe(got.append)
    writer = JsonlWriter(path)
    bus.subscribe(writer)
    flow = make_flow([N("src", "core.inject", payload={"n": 1}), N("f", "test.fail",
                                                                   fail_all=True),
                      N("d", "core.debug", path="msg")], ["src->f", "src->d"])
    await Engine(flow, REGISTRY, bus, trace=True).run()
    writer.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(got) and all(json.loads(line)["type"] for line in lines)
    back = read_jsonl(path)
    assert back == got
    assert {type(e) for e in back} >= {Debug, NodeError, RunFinished, Stats}
    assert parse_event(lines[0]) == got[0]
    assert parse_event(json.loads(lines[-1])) == got[-1]


# -- bounds and endings ---------------------------------------------------------------

STORM_NODES = [N("src", "core.inject", payload="x"), N("loop", "core.change"),
               N("a", "core.change"), N("b", "core.change")]
STORM_WIRES = ["src->loop", "loop->a", "loop->b", "a->loop", "b->loop"]


async def test_fan_out_cycle_ends_as_a_message_storm_at_the_cap():
    r = await run(make_flow(STORM_NODES, STORM_WIRES), timeout=30, max_in_flight=500)
    assert r.result.reason == "failed" and r.result.status == "error"
    assert r.result.message.startswith("message storm at ")
    assert "500 messages in flight (the limit is 500)" in r.result.message
    [fin] = r.of("run.finished")
    assert fin.reason == "failed" and fin.message == r.result.message
    # Each lap doubles the messages: the cap stopped it after a few laps.
    assert r.engine.nodes["loop"].count_in < 2_000
    assert any(e.message == r.result.message for e in r.of("node.error"))


async def test_async_work_counts_towards_the_cap():
    flow = make_flow([N("src", "core.inject", payload=1, count=50), N("g", "test.gate")],
                     ["src->g"])
    r = await run(flow, timeout=30, max_in_flight=10)
    assert r.result.reason == "failed" and "at g: 10 messages" in r.result.message


async def test_stop_is_an_interruption_and_names_what_was_in_flight():
    flow = make_flow([N("src", "core.inject", payload=1), N("g", "test.gate")], ["src->g"])
    engine, events = engine_for(flow)
    task = asyncio.ensure_future(engine.run())
    await until(lambda: engine.nodes["g"].active == 1)
    engine.stop("by the test")
    result = await task
    assert (result.reason, result.status, result.message) == ("interrupted", "stopped",
                                                              "by the test")
    [fin] = [e for e in events if e.type == "run.finished"]
    assert fin.in_flight == {"g": 1} and fin.reason == "interrupted"


async def test_a_subscriber_that_raises_loses_no_event_for_the_others(caplog):
    bus = EventBus()
    seen: list[str] = []

    def broken(event):
        raise ValueError("inspector bug")

    bus.subscribe(broken)
    bus.subscribe(lambda e: seen.append(e.type))
    flow = make_flow([N("src", "core.inject", payload=1, count=3), N("d", "core.debug")],
                     ["src->d"])
    result = await Engine(flow, REGISTRY, bus).run()
    assert result.reason == "completed"
    assert seen.count("debug") == 3 and seen[0] == "run.started" and seen[-1] == "run.finished"
    logged = [r for r in caplog.records if "inspector bug" in (r.exc_text or "")
              or "failed on" in r.getMessage()]
    assert len(logged) == 1 and bus.failures[broken] == len(seen)


def test_the_jsonl_writer_never_loses_an_event_it_cannot_serialise(tmp_path):
    from runtime.events import ToolCall

    deep: list = []
    for _ in range(2000):
        deep = [deep]
    path = tmp_path / "e.jsonl"
    writer = JsonlWriter(path)
    writer(ToolCall(agent="a", tool="t", caller_id="c1", args=deep))
    writer(ToolCall(agent="a", tool="t", caller_id="c2", args={"ok": 1}))
    writer.close()
    first, second = read_jsonl(path)
    assert first.caller_id == "c1" and first.args.startswith("<not serialisable: ")
    assert second.args == {"ok": 1}


async def test_recorded_messages_and_debug_values_keep_a_bounded_number_of_items():
    from runtime.engine import DEBUG_ITEMS, SNAPSHOT_ITEMS

    big = list(range(5000))
    flow = make_flow([N("src", "core.inject", payload=big), N("r", "test.record"),
                      N("d", "core.debug")], ["src->r", "r->d"])
    r = await run(flow, record=True, trace=True)
    [snapshot] = r.of("stats")[-1].last["r"]["in"]
    assert snapshot["payload"][:3] == [0, 1, 2]
    assert len(snapshot["payload"]) == SNAPSHOT_ITEMS + 1
    assert snapshot["payload"][-1] == f"… {5000 - SNAPSHOT_ITEMS} more items"
    assert all(len(e.msg["payload"]) == SNAPSHOT_ITEMS + 1 for e in r.of("message.sent"))
    [value] = r.debug("d")
    assert len(value) == DEBUG_ITEMS + 1 and value[-1] == f"… {5000 - DEBUG_ITEMS} more items"
    # The message itself is whole: only what is recorded of it is cut.
    assert len(r.node("r").seen[0]["payload"]) == 5000


def test_to_jsonable_cuts_objects_by_keys_too():
    from runtime.message import to_jsonable

    out = to_jsonable({f"k{i}": i for i in range(10)}, items=3)
    assert out == {"k0": 0, "k1": 1, "k2": 2, "…": "7 more keys"}
    assert to_jsonable([1, 2], items=3) == [1, 2]


async def test_a_timeout_names_the_hops_still_queued_when_it_fired():
    # An endless inline loop continues past MAX_DEPTH on the next loop turn:
    # when the timeout ends it, one hop is queued; that is work unfinished
    # (exit 124), even though the queue drains before run() wakes up.
    flow = make_flow([N("src", "core.inject", payload=1), N("loop", "core.change")],
                     ["src->loop", "loop->loop"])
    r = await run(flow, timeout=0.2)
    assert r.result.reason == "timeout" and r.result.in_flight == {"loop": 1}
    assert r.of("run.finished")[-1].in_flight == {"loop": 1}


async def test_a_message_whose_task_has_not_started_yet_counts_as_in_flight():
    # Stopped in the same turn as the message reached an async node: its
    # task exists but has not run; the run's end still names it.
    flow = make_flow([N("g", "test.gate")], [])
    engine, events = engine_for(flow, keep_alive=True)
    task = asyncio.ensure_future(engine.run())
    await until(lambda: engine.running)
    engine.inject("g", Message.new(1))
    engine.stop()
    result = await task
    assert result.in_flight == {"g": 1}


async def test_a_run_resource_is_made_once_shared_and_closed_when_the_run_ends():
    log: list[str] = []

    class Client:
        def __init__(self) -> None:
            log.append("made")

        async def aclose(self) -> None:
            log.append("closed")

    @node("test.uses_client", name="Uses client", category="Test")
    class UsesClient(Node):
        def on_message(self, msg):
            msg.setdefault("clients", []).append(
                id(self.run_resource("client", Client, lambda c: c.aclose())))

    from tests.runtime_fixtures import REGISTRY as base

    reg = Registry([*base, UsesClient])
    flow = make_flow([N("src", "core.inject", payload=1, count=2), N("a", "test.uses_client"),
                      N("b", "test.uses_client"), N("s", "test.sink")],
                     ["src->a", "a->b", "b->s"])
    r = await run(flow, reg=reg)
    clients = [c for m in r.node("s").seen for c in m["clients"]]
    assert len(clients) == 4 and len(set(clients)) == 1
    assert log == ["made", "closed"]


async def test_flow_dir_in_a_fixed_text_is_the_folder_of_the_flow_file(tmp_path):
    flow = make_flow([N("src", "core.inject", payload=1, topic="{flow_dir}/pages"),
                      N("r", "test.record")], ["src->r"])
    engine, _ = engine_for(flow, file=str(tmp_path / "sub" / "x.flow.json"))
    await engine.run()
    assert engine.nodes["r"].node.seen[0]["topic"] == f"{tmp_path / 'sub'}/pages"
    # The flow itself keeps the placeholder: saving it writes what the designer typed.
    assert flow.node("src").params["topic"].value == "{flow_dir}/pages"

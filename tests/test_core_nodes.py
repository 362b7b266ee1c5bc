"""Core nodes, each run in a real engine: inject -> node -> sinks."""

from __future__ import annotations

import re

import pytest

from runtime.flow import validate_flow
from tests.runtime_fixtures import REGISTRY, N, chain, make_flow, run

# -- switch ---------------------------------------------------------------------------

CASES = [
    # op, rule value, payload, hit?
    ("eq", 3, 3, True), ("eq", 3, 4, False), ("eq", "a", "a", True),
    ("neq", 3, 4, True), ("neq", 3, 3, False),
    ("lt", 3, 2, True), ("lt", 3, 3, False), ("lt", 3, "x", False),
    ("lte", 3, 3, True), ("lte", 3, 4, False),
    ("gt", 3, 4, True), ("gt", 3, 3, False), ("gt", 3, None, False),
    ("gte", 3, 3, True), ("gte", 3, 2, False),
    ("contains", "b", "abc", True), ("contains", "z", "abc", False),
    ("contains", 2, [1, 2], True), ("contains", "k", {"k": 1}, True), ("contains", 1, 5, False),
    ("contains", 1, "abc", False),
    ("regex", r"^A-\d+$", "A-12", True), ("regex", r"^A-\d+$", "B-12", False),
    ("regex", "x", 5, False),
    ("true", None, True, True), ("true", None, 1, False),
    ("false", None, False, True), ("false", None, 0, False),
    ("null", None, None, True), ("null", None, 0, False),
    ("else", None, "anything", True),
]


def switch_flow(rules, payload, mode="first", path=None):
    params = {"rules": rules, "mode": mode}
    if path:
        params["path"] = path
    nodes = [N("src", "core.inject", payload=payload), N("sw", "core.switch", **params)]
    wires = ["src->sw"]
    for i in range(len(rules)):
        nodes.append(N(f"o{i}", "test.sink"))
        wires.append(f"sw.out{i}->o{i}")
    return make_flow(nodes, wires)


def hits(r, n):
    return [len(r.node(f"o{i}").seen) for i in range(n)]


@pytest.mark.parametrize("op, value, payload, hit", CASES)
async def test_switch_op(op, value, payload, hit):
    rule = {"op": op} if value is None else {"op": op, "value": value}
    r = await run(switch_flow([rule], payload))
    assert hits(r, 1) == [1 if hit else 0]
    assert r.result.errors == 0


def test_every_switch_op_is_covered():
    from nodes.core.flow_control import SWITCH_OPS

    assert {c[0] for c in CASES} == set(SWITCH_OPS)


async def test_switch_first_stops_at_the_first_match():
    rules = [{"op": "gt", "value": 1}, {"op": "gt", "value": 0}, {"op": "else"}]
    assert hits(await run(switch_flow(rules, 5)), 3) == [1, 0, 0]
    assert hits(await run(switch_flow(rules, 1)), 3) == [0, 1, 0]
    assert hits(await run(switch_flow(rules, -1)), 3) == [0, 0, 1]


async def test_switch_all_sends_on_every_match_and_else_only_without_one():
    rules = [{"op": "gt", "value": 1}, {"op": "gt", "value": 0}, {"op": "else"}]
    r = await run(switch_flow(rules, 5, mode="all"))
    assert hits(r, 3) == [1, 1, 0]
    a, b = r.node("o0").seen[0], r.node("o1").seen[0]
    assert a is not b and a == b  # two outputs: a clone each
    assert hits(await run(switch_flow(rules, -1, mode="all")), 3) == [0, 0, 1]


async def test_switch_no_match_drops():
    r = await run(switch_flow([{"op": "eq", "value": 1}], 2))
    assert hits(r, 1) == [0] and r.result.errors == 0


async def test_switch_reads_its_path():
    r = await run(switch_flow([{"op": "eq", "value": "vip"}], {"customer": {"tier": "vip"}},
                              path="payload.customer.tier"))
    assert hits(r, 1) == [1]


@pytest.mark.parametrize("rules, why", [
    ([{"op": "like", "value": 1}], "op must be one of"),
    ([{"op": "eq"}], "'eq' needs a value"),
    ([{"op": "regex", "value": "("}], "bad regex"),
    ("eq", "rules must be a list"),
])
def test_switch_refuses_bad_rules(rules, why):
    flow = make_flow([N("src", "core.inject"), N("sw", "core.switch", rules=rules)], ["src->sw"])
    errors = [p for p in validate_flow(flow, REGISTRY) if p.severity == "error"]
    assert any(p.node == "sw" and p.field == "params.rules" and why in p.message
               for p in errors), errors


# -- change ---------------------------------------------------------------------------


async def change(rules, payload, **fields):
    flow = chain(("core.change", {"rules": rules}), ("test.sink", {}), payload=payload)
    r = await run(flow)
    assert r.result.errors == 0
    [msg] = r.node("n2").seen
    return msg


async def test_change_set_nested_and_top_level():
    msg = await change([{"action": "set", "path": "payload.a.b", "value": 1},
                        {"action": "set", "path": "topic", "value": "t2"},
                        {"action": "set", "path": "payload.list[0]", "value": "x"}], {})
    assert msg["payload"] == {"a": {"b": 1}, "list": ["x"]} and msg["topic"] == "t2"


async def test_change_set_copies_a_container_value_per_message():
    flow = chain(("core.change", {"rules": [{"action": "set", "path": "payload",
                                              "value": {"tags": []}}]}),
                 ("test.tag", {}), ("test.sink", {}), payload=None, count=2)
    r = await run(flow)
    a, b = r.node("n3").seen
    assert a["payload"] == b["payload"] == {"tags": ["n2"]}
    assert a["payload"] is not b["payload"]


async def test_change_delete():
    msg = await change([{"action": "delete", "path": "payload.a"},
                        {"action": "delete", "path": "topic"},
                        {"action": "delete", "path": "payload.nothing"}], {"a": 1, "b": 2})
    assert msg["payload"] == {"b": 2} and "topic" not in msg


@pytest.mark.parametrize("rule", [
    {"action": "set", "path": "topic", "value": "t"},
    {"action": "set", "path": "payload.a", "value": 1},
    {"action": "set", "path": "payload", "value": {"x": []}},
    {"action": "delete", "path": "payload.a"},
    {"action": "move", "from": "payload", "path": "moved"},
    {"action": "copy", "from": "payload", "path": "copied"},
])
async def test_a_change_node_with_one_rule_sends_the_message_on(rule):
    # A single rule's closure is the node's whole on_message: whatever the
    # rule's helper returns must not be taken for a port name.
    msg = await change([rule], {"a": 1})
    assert msg["_msgid"]


async def test_change_move():
    msg = await change([{"action": "move", "from": "payload", "path": "order"}], {"id": 7})
    assert msg["order"] == {"id": 7} and "payload" not in msg


async def test_change_copy_is_deep():
    msg = await change([{"action": "copy", "from": "payload", "path": "backup"},
                        {"action": "set", "path": "payload.x", "value": 2}], {"x": 1})
    assert msg["backup"] == {"x": 1} and msg["payload"] == {"x": 2}


async def test_change_move_or_copy_of_a_missing_source_leaves_the_target():
    msg = await change([{"action": "copy", "from": "nope", "path": "payload"},
                        {"action": "move", "from": "nope.deeper", "path": "topic"}], "keep")
    assert msg["payload"] == "keep" and msg["topic"] == ""


@pytest.mark.parametrize("rules, why", [
    ([{"action": "replace", "path": "a"}], "action must be one of"),
    ([{"action": ["set"], "path": "a"}], "action must be one of"),  # not text, not hashable
    ([{"action": 5, "path": "a"}], "action must be one of"),
    ([{"action": "copy", "path": "a"}], "'from'"),
    ([{"action": "set", "path": "a"}], "needs a value"),
    ([{"action": "move", "path": "a"}], "'from'"),
    ([{"action": "delete", "path": "a..b"}], "'path'"),
    ([{"action": "set", "path": ["a"], "value": 1}], "'path'"),
    (["set a"], "must be an object"),
])
def test_change_refuses_bad_rules(rules, why):
    flow = make_flow([N("src", "core.inject"), N("c", "core.change", rules=rules)], ["src->c"])
    errors = [p for p in validate_flow(flow, REGISTRY) if p.severity == "error"]
    assert any(p.node == "c" and p.field == "params.rules" and why in p.message
               for p in errors), errors


# -- template -------------------------------------------------------------------------


async def test_template_renders_jinja2_over_the_message():
    tpl = ("Hi {{ payload.name }} ({{ topic }}): "
           "{% for i in payload.items %}{{ i }}{% if not loop.last %},{% endif %}{% endfor %}"
           " | {{ msg.payload.name | upper }} | {{ payload.missing.deeper }}.")
    flow = chain(("core.template", {"template": tpl}), ("test.sink", {}),
                 payload={"name": "Ada", "items": [1, 2]})
    flow.nodes[0].params["topic"] = flow.nodes[0].params["payload"].model_copy(
        update={"value": "greet"})
    r = await run(flow)
    assert r.node("n2").seen[0]["payload"] == "Hi Ada (greet): 1,2 | ADA | ."


async def test_template_writes_to_its_path():
    flow = chain(("core.template", {"template": "{{ payload * 2 }}", "to": "result.text"}),
                 ("test.sink", {}), payload=21)
    r = await run(flow)
    msg = r.node("n2").seen[0]
    assert msg["result"] == {"text": "42"} and msg["payload"] == 21


async def test_template_error_is_a_node_error_without_a_traceback():
    flow = chain(("core.template", {"template": "{{ payload.x * 'a' * 1.5 }}"}), payload={"x": 1})
    r = await run(flow)
    [err] = r.of("node.error")
    assert err.node == "n1" and err.message.startswith("template: ")
    assert r.result.errors == 1


def test_template_syntax_error_is_refused_at_load():
    flow = make_flow([N("src", "core.inject"), N("t", "core.template", template="{{ oops ")],
                     ["src->t"])
    [err] = [p for p in validate_flow(flow, REGISTRY) if p.severity == "error"]
    assert (err.node, err.field) == ("t", "params.template")
    assert "template error" in err.message


# -- split ---------------------------------------------------------------------------


async def test_split_a_list_sends_one_message_per_item_in_order():
    flow = chain(("core.split", {}), ("test.sink", {}), payload=[{"a": 1}, "b", 3])
    r = await run(flow)
    seen = r.node("n2").seen
    assert [m["payload"] for m in seen] == [{"a": 1}, "b", 3]
    group = seen[0]["parts"]["id"]
    assert [m["parts"] for m in seen] == [{"index": i, "count": 3, "key": i, "id": group}
                                          for i in range(3)]
    assert len({m["_msgid"] for m in seen}) == 3 and group not in {m["_msgid"] for m in seen}
    assert all(m["topic"] == "" for m in seen)


async def test_two_splits_of_the_same_length_are_told_apart_by_their_id():
    flow = chain(("core.split", {}), ("test.sink", {}), payload=[1, 2], count=2)
    r = await run(flow)
    ids = [m["parts"]["id"] for m in r.node("n2").seen]
    assert len(ids) == 4 and ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]


async def test_split_an_object_sends_one_message_per_key():
    flow = chain(("core.split", {"path": "payload.by_id"}), ("test.sink", {}),
                 payload={"by_id": {"x": 1, "y": 2}, "keep": True})
    r = await run(flow)
    seen = r.node("n2").seen
    assert [(m["payload"]["by_id"], m["parts"]["key"]) for m in seen] == [(1, "x"), (2, "y")]
    assert all(m["payload"]["keep"] for m in seen)


async def test_split_parts_are_independent():
    flow = chain(("core.split", {}), ("test.tag", {}), ("test.sink", {}),
                 payload=[{"n": 1}, {"n": 2}])
    r = await run(flow)
    assert [m["payload"] for m in r.node("n3").seen] == [{"n": 1, "tags": ["n2"]},
                                                         {"n": 2, "tags": ["n2"]}]


async def test_split_passes_a_non_list_through_and_an_empty_list_sends_nothing():
    r = await run(chain(("core.split", {}), ("test.sink", {}), payload="text"))
    assert [m["payload"] for m in r.node("n2").seen] == ["text"]
    r = await run(chain(("core.split", {}), ("test.sink", {}), payload=[]))
    assert r.node("n2").seen == []


async def test_split_a_long_list():
    n = 5000
    r = await run(chain(("core.split", {}), ("test.sink", {}), payload=list(range(n))))
    seen = r.node("n2").seen
    assert len(seen) == n and seen[-1]["payload"] == n - 1 and seen[-1]["parts"]["count"] == n


# -- inject ---------------------------------------------------------------------------


async def test_inject_sends_count_messages_with_payload_and_topic():
    flow = make_flow([N("src", "core.inject", payload={"a": [1]}, topic="t", count=3),
                      N("tag", "core.change", rules=[{"action": "set", "path": "payload.a.0",
                                                      "value": 9}]),
                      N("sink", "test.sink")], ["src->tag", "tag->sink"])
    r = await run(flow)
    seen = r.node("sink").seen
    assert len(seen) == 3 and all(m["topic"] == "t" for m in seen)
    # Each message has its own copy of the payload.
    assert r.engine.nodes["src"].node.payload.get() == {"a": [1]}
    assert len({m["_msgid"] for m in seen}) == 3


@pytest.mark.parametrize("kind, payload, reads", [
    ("JSON", '{"a": [1, 2]}', 1),  # the same every message: read (parsed) once
    ("number", "42", 1),
    ("timestamp", None, 5),  # the clock, per message
    ("env variable", "SB_INJECT_TEST", 5),  # the environment may change between messages
])
async def test_inject_reads_a_fixed_payload_once_and_a_live_one_per_message(
        monkeypatch, kind, payload, reads):
    import nodes.core.inject_debug as inject

    monkeypatch.setenv("SB_INJECT_TEST", "x")
    calls = []
    real = inject.read_payload

    def counted(*args, **kwargs):
        if "environ" not in kwargs:  # a run's read, not the flow's check
            calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(inject, "read_payload", counted)
    params = {"payload_type": kind, "count": 5, "topic": "t"}
    if payload is not None:
        params["payload"] = payload
    flow = make_flow([N("src", "core.inject", **params),
                      N("tag", "core.change", rules=[{"action": "set", "path": "topic",
                                                      "value": "changed"}]),
                      N("sink", "test.sink")], ["src->tag", "tag->sink"])
    r = await run(flow)
    seen = r.node("sink").seen
    assert len(seen) == 5 and len(calls) == reads
    assert all(m["topic"] == "changed" for m in seen)
    if kind == "JSON":  # each message its own payload, the one read kept as it was
        assert all(m["payload"] == {"a": [1, 2]} for m in seen)
        assert len({id(m["payload"]) for m in seen}) == 5


async def test_inject_repeat_sends_count_messages():
    flow = make_flow([N("src", "core.inject", payload=1, count=4, repeat_seconds=0.001),
                      N("sink", "test.sink")], ["src->sink"])
    r = await run(flow)
    assert len(r.node("sink").seen) == 4 and r.result.status == "ok"


async def test_inject_count_zero_without_repeat_sends_nothing():
    flow = make_flow([N("src", "core.inject", count=0), N("sink", "test.sink")], ["src->sink"])
    r = await run(flow)
    assert r.node("sink").seen == []


async def test_inject_defaults():
    flow = make_flow([N("src", "core.inject"), N("sink", "test.sink")], ["src->sink"])
    [msg] = (await run(flow)).node("sink").seen
    assert msg["payload"] == "" and msg["topic"] == ""


@pytest.mark.parametrize("param, value", [("count", -1), ("repeat_seconds", -0.5)])
def test_inject_refuses_negative(param, value):
    flow = make_flow([N("src", "core.inject", **{param: value})])
    errors = [p for p in validate_flow(flow, REGISTRY) if p.severity == "error"]
    assert [(p.node, p.field) for p in errors] == [("src", f"params.{param}")]


# -- debug, delay, catch ----------------------------------------------------------------


async def test_debug_path_payload_msg_and_nested():
    flow = make_flow([N("src", "core.inject", payload={"a": {"b": 2}}, topic="t"),
                      N("d1", "core.debug"), N("d2", "core.debug", path="msg"),
                      N("d3", "core.debug", path="payload.a.b"),
                      N("d4", "core.debug", path="payload.missing")],
                     ["src->d1", "src->d2", "src->d3", "src->d4"])
    r = await run(flow)
    assert r.debug("d1") == [{"a": {"b": 2}}]
    [whole] = r.debug("d2")
    assert whole["payload"] == {"a": {"b": 2}} and whole["topic"] == "t" and whole["_msgid"]
    assert r.debug("d3") == [2] and r.debug("d4") == [None]
    names = {e.node: e.name for e in r.of("debug")}
    assert names["d1"] == "Debug"
    assert all(e.msgid for e in r.of("debug"))


async def test_debug_sends_nothing_on():
    from nodes.core.inject_debug import DebugNode

    assert DebugNode.spec.outputs == []


async def test_delay_zero_passes_in_order():
    flow = make_flow([N("src", "core.inject", count=5), N("d", "core.delay", seconds=0),
                      N("sink", "test.sink")], ["src->d", "d->sink"])
    r = await run(flow)
    ids = [m["_msgid"] for m in r.node("sink").seen]
    assert len(ids) == 5


async def test_delay_reads_seconds_from_the_message():
    flow = make_flow([N("src", "core.inject", payload=0),
                      N("d", "core.delay", seconds={"scope": "message", "path": "payload"}),
                      N("sink", "test.sink")], ["src->d", "d->sink"])
    r = await run(flow)
    assert len(r.node("sink").seen) == 1


def test_catch_refuses_bad_node_list():
    flow = make_flow([N("c", "core.catch", nodes="all")])
    errors = [p for p in validate_flow(flow, REGISTRY) if p.severity == "error"]
    assert [(p.node, p.field) for p in errors] == [("c", "params.nodes")]


def test_core_specs_are_complete():
    for type_id in ("core.inject", "core.debug", "core.change", "core.switch", "core.template",
                    "core.delay", "core.catch", "core.split"):
        spec = REGISTRY.spec(type_id)
        assert spec is not None and spec.description and spec.category == "Core"
        assert all(p.description for p in spec.params), type_id
        assert re.fullmatch(r"#[0-9a-f]{6}", spec.color)


def test_the_template_node_is_sandboxed():
    """A flow file's template must not reach Python's internals."""
    from nodes.core.transform import Template
    from runtime.message import Message
    from runtime.node import NodeConfigError
    from runtime.spec import ParamValue

    def render(text):
        node = Template("t", params={"template": ParamValue(scope="custom", value=text)})
        msg = Message.new({"name": "Ada", "items": [1, 2]})
        node.on_message(msg)
        return msg["payload"]

    assert render("Hello {{ payload.name }}, {{ payload.items | length }}") == "Hello Ada, 2"
    with pytest.raises(NodeConfigError, match="'append' of 'list' object is unsafe"):
        render("{{ payload.items.append(3) }}")  # no changing the message from a template
    # Internals read as nothing (a plain Environment would print the class
    # hierarchy and the globals of Jinja's modules).
    assert render("{{ ''.__class__.__mro__ }}") == ""
    assert render("{{ cycler.__init__.__globals__ }}") == ""

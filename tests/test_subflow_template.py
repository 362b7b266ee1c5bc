"""The Template node's own text inside a subflow definition sees ``subflow``:
the params of the instance it runs in (docs/subflows.md, 'Params inside')."""

from __future__ import annotations

from runtime.flow import Flow, validate_flow
from tests.subflow_fixtures import P, W, _own_library, flow, run  # noqa: F401 - the autouse fixture


def text_template(id: str, text: str) -> dict:
    """A Template node whose own text (a fixed value, not {{ }}) is ``text``."""
    return {"id": id, "type": "core.template", "params": {"template": P(text)}}


GREET = {
    "name": "greet",
    "params": [{"name": "who", "default": "nobody"}, {"name": "times", "type": "int",
                                                       "default": 1}],
    "nodes": [{"id": "i", "type": "subflow.in"},
              text_template("say", "{{ payload }}, {{ subflow.who }} x{{ subflow.times }}"),
              {"id": "o", "type": "subflow.out"}],
    "wires": [W("i", "say"), W("say", "o")],
}


def values(events: list, node: str) -> list:
    return [e.value for e in events if e.type == "debug" and e.node == node]


def test_the_template_nodes_text_reads_each_instances_params():
    f = flow([{"id": "src", "type": "core.inject", "params": {"payload": P("hello")}},
              {"id": "a", "type": "subflow:greet", "params": {"who": P("Ann"), "times": P(2)}},
              {"id": "b", "type": "subflow:greet",
               "params": {"who": {"scope": "message", "path": "payload"}}},
              {"id": "da", "type": "core.debug"}, {"id": "db", "type": "core.debug"}],
             [W("src", "a"), W("a", "da"), W("src", "b"), W("b", "db")], [GREET])
    assert [p for p in validate_flow(f) if p.severity == "error"] == []
    _, events = run(f)
    # a: its own values; b: 'who' read from the message at that node, the
    # default for 'times'. Before, subflow.who read as empty text.
    assert values(events, "da") == ["hello, Ann x2"]
    assert values(events, "db") == ["hello, hello x1"]


def test_outside_a_definition_subflow_is_still_a_key_of_the_message():
    f = Flow.model_validate({
        "format": "switchboard.flow/1", "name": "t",
        "nodes": [{"id": "src", "type": "core.inject",
                   "params": {"payload": P("x"), "topic": P("t")}},
                  {"id": "c", "type": "core.change", "params": {"rules": P([
                      {"action": "set", "path": "subflow", "value": {"who": "a key"}}])}},
                  text_template("say", "{{ subflow.who }}"), {"id": "d", "type": "core.debug"}],
        "wires": [W("src", "c"), W("c", "say"), W("say", "d")]})
    assert values(run(f)[1], "d") == ["a key"]

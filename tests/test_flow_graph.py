"""runtime.flow.graph.rings: the one ring search behind the agent ring check
(validate.agent_cycle, its first ring) and the subflow cycle check
(subflow_checks, every ring once)."""

from __future__ import annotations

from runtime.flow import validate_flow
from runtime.flow.graph import rings
from tests.runtime_fixtures import REGISTRY, N, make_flow


def test_every_ring_once_in_walk_order_each_closed():
    edges = {"a": ["b"], "b": ["c", "a"], "c": ["a"], "d": ["d", "e"], "e": ["f"], "f": []}
    assert list(rings(edges)) == [["a", "b", "c", "a"], ["a", "b", "a"], ["d", "d"]]


def test_a_ring_met_again_from_another_of_its_names_is_not_repeated():
    # From x the walk meets x > y > z > x; from w it meets y > z > x > y,
    # the same ring: reported once.
    assert list(rings({"x": ["y"], "w": ["y"], "y": ["z"], "z": ["x"]})) == [
        ["x", "y", "z", "x"]]


def test_no_ring_and_names_only_pointed_to():
    assert list(rings({"a": ["b", "c"], "b": ["c"]})) == []
    assert list(rings({})) == []


def test_it_is_lazy_the_first_ring_is_all_agent_cycle_asks_for():
    walk = rings({"a": ["a"], "b": ["b"]})
    assert next(walk) == ["a", "a"]
    assert next(walk) == ["b", "b"]


def test_agents_calling_each_other_in_a_ring_are_one_error_naming_the_first_ring():
    flow = make_flow([N("a", "test.agent"), N("b", "test.agent"), N("c", "test.agent")],
                     ["a.tools->b", "b.tools->c", "c.tools->a", "b.tools->a"])
    found = [str(p) for p in validate_flow(flow, REGISTRY, file="f.flow.json")
             if "ring" in p.message]
    assert len(found) == 1, found
    assert "agents call each other as tools in a ring: a -> b -> c -> a" in found[0]

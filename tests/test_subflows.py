"""Subflows at run time (docs/subflows.md): validation of definitions and
instances, library pins, the expansion a run makes (path ids, wires through
the elided inputs and outputs, params), real engine runs, and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import Flow, load_flow, validate_flow
from runtime.flow.expand import expand, expand_subflows
from runtime.flow.model import SubflowDef, SubflowPin
from runtime.flow.subflows import LIBRARY_ENV, MAX_NESTING, save_to_library, with_subflows
from runtime.registry import Registry
from tests.subflow_fixtures import (  # noqa: F401 - the autouse fixture
    P,
    S,
    W,
    _own_library,
    flow,
    run,
)

ROOT = Path(__file__).resolve().parents[1]


def sub(name: str, nodes: list[dict], wires: list[dict], params: list[dict] | None = None,
        **extra: Any) -> dict:
    return {"name": name, "params": params or [], "nodes": nodes, "wires": wires, **extra}


def IN(id: str = "i", name: str | None = None) -> dict:
    return {"id": id, "type": "subflow.in", **({"params": {"name": P(name)}} if name else {})}


def OUT(id: str = "o", name: str | None = None) -> dict:
    return {"id": id, "type": "subflow.out", **({"params": {"name": P(name)}} if name else {})}


def SET(id: str, path: str, value: Any) -> dict:
    """A core.change that sets ``path`` to ``value`` (a setting: P(...) or S(...))."""
    rules = value if isinstance(value, dict) and "scope" in value \
        else P([{"action": "set", "path": path, "value": value}])
    return {"id": id, "type": "core.change", "params": {"rules": rules}}


def TPL(id: str, text: str) -> dict:
    """A core.template whose template is an expression (sees ``subflow``)."""
    return {"id": id, "type": "core.template",
            "params": {"template": {"scope": "expression", "value": text}}}


def inject(payload: Any = 0, id: str = "src") -> dict:
    return {"id": id, "type": "core.inject", "params": {"payload": P(payload),
                                                          "payload_type": P("JSON")}}


def debug(id: str) -> dict:
    return {"id": id, "type": "core.debug"}


def problems(f: Flow, file: str = "f.flow.json") -> list[str]:
    return [str(p) for p in validate_flow(f, file=file)]


def errors(f: Flow, file: str = "f.flow.json") -> list[str]:
    return [str(p) for p in validate_flow(f, file=file) if p.severity == "error"]


def debug_values(events: list, node: str | None = None) -> list:
    return [e.value for e in events if e.type == "debug" and (node is None or e.node == node)]


# A subflow "tag": in -> set payload.tag from its param -> out.
TAG = sub("tag", [IN(), SET("set", "payload.tag", S("rules")), OUT()],
          [W("i", "set"), W("set", "o")],
          [{"name": "rules", "type": "json"}])


def tag_rules(value: Any) -> dict:
    return P([{"action": "set", "path": "payload.tag", "value": value}])


# -- validation -----------------------------------------------------------------------


def test_subflow_in_and_out_in_the_flow_itself_are_errors():
    f = flow([inject(), IN("stray"), OUT("lost"), debug("d")], [W("src", "d")])
    errs = errors(f)
    assert any("node 'stray', type: a subflow input (subflow.in) belongs inside a subflow "
               "definition" in e for e in errs), errs
    assert any("node 'lost', type: a subflow output (subflow.out) belongs inside" in e
               for e in errs), errs


def test_a_definitions_problems_name_the_definition_and_its_inner_node():
    bad = sub("bad", [IN(), {"id": "x", "type": "core.nope"}, OUT()],
              [W("i", "x"), W("x", "o")])
    f = flow([inject(), {"id": "b", "type": "subflow:bad"}], [W("src", "b")], [bad])
    assert any(e.startswith("f.flow.json: node 'subflows.bad/x', type: unknown node type "
                            "'core.nope'") for e in errors(f)), errors(f)


def test_input_and_output_names_are_unique_per_definition():
    d = sub("twice", [IN("a", "x"), IN("b", "x"), OUT("o1", "y"), OUT("o2", "y")],
            [W("a", "o1"), W("b", "o2")])
    errs = errors(flow([], [], [d]))
    assert any("node 'subflows.twice/b', params.name: two subflow inputs named 'x' (nodes 'a' "
               "and 'b')" in e for e in errs), errs
    assert any("two subflow outputs named 'y' (nodes 'o1' and 'o2')" in e for e in errs), errs


def test_every_output_must_be_reachable_from_an_input():
    d = sub("dead", [IN(), OUT("o", "ok"), OUT("o2", "never"), SET("c", "x", 1)],
            [W("i", "o"), W("c", "o2")])
    errs = errors(flow([], [], [d]))
    assert any("node 'subflows.dead/o2': subflow output 'never' is not reachable from any "
               "subflow input" in e for e in errs), errs
    assert not any("'ok'" in e for e in errs)


def test_scope_subflow_outside_a_definition_and_an_undeclared_param():
    top = flow([inject(), SET("c", "x", S("rules")), debug("d")], [W("src", "c"), W("c", "d")])
    assert any("node 'c', params.rules.param: scope 'subflow' reads a param of the subflow" in e
               for e in errors(top)), errors(top)
    d = sub("p", [IN(), SET("c", "x", S("nope")), OUT()], [W("i", "c"), W("c", "o")],
            [{"name": "rules", "type": "json", "default": []}])
    errs = errors(flow([], [], [d]))
    assert any("node 'subflows.p/c', params.rules.param: subflow 'p' has no param 'nope' (its "
               "params: rules)" in e for e in errs), errs


def test_an_ai_allowed_param_may_not_reach_a_param_the_node_keeps_from_the_ai():
    d = sub("leak", [IN(), SET("c", "x", S("rules")), OUT()], [W("i", "c"), W("c", "o")],
            [{"name": "rules", "type": "json", "default": [], "ai_allowed": True}])
    errs = errors(flow([], [], [d]))
    assert any("subflow param 'rules' may be handed to the AI, and this node's author did not "
               "let the AI set 'rules'" in e for e in errs), errs


def test_templates_reading_subflow_names_are_checked():
    d = sub("t", [IN(), TPL("x", "{{ subflow.who }} {{ subflow['nope'] }}"), OUT()],
            [W("i", "x"), W("x", "o")], [{"name": "who", "default": "me"}])
    errs = errors(flow([], [], [d]))
    assert any("node 'subflows.t/x', params.template.value: subflow 't' has no param 'nope' "
               "(its params: who)" in e for e in errs), errs
    top = flow([inject(), TPL("x", "hi {{ subflow.who }}"), debug("d")],
               [W("src", "x"), W("x", "d")])
    assert any("node 'x', params.template.value: 'subflow' holds the params of the subflow a "
               "node is in; this node is in the flow itself" in e for e in errors(top))


def test_a_cycle_of_definitions_is_one_error_naming_the_chain():
    a = sub("a", [IN(), {"id": "b", "type": "subflow:b"}, OUT()], [W("i", "b"), W("b", "o")])
    b = sub("b", [IN(), {"id": "a", "type": "subflow:a"}, OUT()], [W("i", "a"), W("a", "o")])
    f = flow([inject(), {"id": "x", "type": "subflow:a"}, debug("d")],
             [W("src", "x"), W("x", "d")], [a, b])
    cycles = [e for e in errors(f) if "cycle" in e]
    assert cycles == ["f.flow.json: subflows.a: subflows use each other in a cycle: a > b > a; "
                      "a subflow cannot contain itself"]
    me = sub("me", [IN(), {"id": "m", "type": "subflow:me"}, OUT()], [W("i", "m"), W("m", "o")])
    assert [e for e in errors(flow([], [], [me])) if "cycle" in e] == [
        "f.flow.json: subflows.me: subflows use each other in a cycle: me > me; a subflow "
        "cannot contain itself"]


def nested(depth: int) -> Flow:
    """Instance of s1, which holds an instance of s2, ... down to s<depth>."""
    defs = []
    for k in range(1, depth + 1):
        inner = ({"id": "n", "type": f"subflow:s{k + 1}"} if k < depth
                 else SET("n", "payload", depth))
        defs.append(sub(f"s{k}", [IN(), inner, OUT()], [W("i", "n"), W("n", "o")]))
    return flow([inject(), {"id": "top", "type": "subflow:s1"}, debug("d")],
                [W("src", "top"), W("top", "d")], defs)


def test_nesting_deeper_than_the_limit_is_an_error_naming_the_depth():
    assert errors(nested(MAX_NESTING)) == []
    errs = errors(nested(MAX_NESTING + 1))
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"f.flow.json: node 'top': subflows nest {MAX_NESTING + 1} deep "
                              "(s1 > s2 > s3")
    assert errs[0].endswith(f"s17); at most {MAX_NESTING} levels are allowed")


def test_16_deep_runs_and_names_the_innermost_node_by_its_whole_path():
    result, events = run(nested(MAX_NESTING))
    assert result.status == "ok"
    assert debug_values(events, "d") == [MAX_NESTING]
    path = ".".join(["top"] + ["n"] * MAX_NESTING)
    bus = EventBus()
    engine = Engine(nested(MAX_NESTING), bus=bus)
    assert path in engine.nodes


def test_a_required_param_left_unset_names_the_instance():
    d = sub("need", [IN(), SET("c", "x", S("rules")), OUT()], [W("i", "c"), W("c", "o")],
            [{"name": "rules", "type": "json"}])
    f = flow([inject(), {"id": "one", "type": "subflow:need"}, debug("d")],
             [W("src", "one"), W("one", "d")], [d])
    assert errors(f) == ["f.flow.json: node 'one', params.rules: subflow 'need' needs param "
                         "'rules' (it has no default): set it on this instance"]


def test_a_value_that_does_not_fit_where_it_lands_names_the_instance_and_the_inner_node():
    f = flow([inject(), {"id": "t1", "type": "subflow:tag", "params": {"rules": P("oops")}},
              debug("d")], [W("src", "t1"), W("t1", "d")], [TAG])
    assert errors(f) == ["f.flow.json: node 't1': node 't1.set' (Change) gets 'rules' from this "
                         "instance's params: rules must be a list"]
    by_msg = flow([inject(), {"id": "t1", "type": "subflow:tag",
                              "params": {"rules": {"scope": "message", "path": "payload"}}},
                   debug("d")], [W("src", "t1"), W("t1", "d")], [TAG])
    assert errors(by_msg) == [
        "f.flow.json: node 't1': node 't1.set' (Change) gets 'rules' from this instance's "
        "params: set with scope 'message' from this instance's params, and it takes only: custom"]


def test_a_top_level_id_equal_to_an_inner_path_is_refused():
    f = flow([inject(), {"id": "t1", "type": "subflow:tag", "params": {"rules": tag_rules(1)}},
              debug("t1.set")], [W("src", "t1"), W("t1", "t1.set")], [TAG])
    assert errors(f) == ["f.flow.json: node 't1.set', id: node id 't1.set' is also the id a run "
                         "gives a node inside instance 't1' (t1.<inner id>): rename it"]


def test_a_flow_without_subflows_gets_the_same_problems_as_before():
    f = flow([inject(), debug("d"), {"id": "x", "type": "core.nope"}], [W("src", "d")])
    errs = errors(f)
    assert len(errs) == 1 and errs[0].startswith(
        "f.flow.json: node 'x', type: unknown node type 'core.nope'"), errs


# -- the library ------------------------------------------------------------------------


def library_tag(version: str = "1.0.0", value: Any = "lib") -> SubflowDef:
    d = SubflowDef.model_validate({**TAG, "version": version})
    return d


def lib_flow(tmp_path: Path, pins: list[SubflowPin | None], values: list[Any]) -> tuple[Flow, str]:
    nodes: list[dict] = [inject({"n": 1})]
    wires = []
    for k, (pin, value) in enumerate(zip(pins, values, strict=True)):
        node = {"id": f"t{k}", "type": "subflow:tag", "params": {"rules": tag_rules(value)}}
        if pin is not None:
            node["subflow"] = pin.model_dump()
        nodes += [node, debug(f"d{k}")]
        wires += [W("src", f"t{k}"), W(f"t{k}", f"d{k}")]
    file = str(tmp_path / "f.flow.json")
    return flow(nodes, wires), file


def pin_of(d: SubflowDef) -> SubflowPin:
    return SubflowPin(version=d.version or "", hash=d.content_hash())


def test_two_instances_of_a_library_subflow_with_different_values_run(tmp_path):
    d = library_tag()
    save_to_library(d, tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [pin_of(d), pin_of(d)], ["first", "second"])
    assert problems(f, file) == []
    result, events = run(f, file)
    assert result.status == "ok"
    assert debug_values(events, "d0") == [{"n": 1, "tag": "first"}]
    assert debug_values(events, "d1") == [{"n": 1, "tag": "second"}]


def test_a_missing_library_file_names_the_files_and_the_versions(tmp_path):
    f, file = lib_flow(tmp_path, [None], [1])
    assert any(f"node 't0', type: no subflow 'tag': it is not in this flow's subflows, and no "
               f"library folder has tag.subflow.json (looked in: {tmp_path / 'subflows'}" in e
               for e in errors(f, file)), errors(f, file)
    newer = library_tag("1.1.0")
    save_to_library(newer, tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [SubflowPin(version="1.0.0", hash="sha256:x")], [1])
    errs = errors(f, file)
    assert len(errs) == 1, errs
    assert "library subflow 'tag' version 1.0.0 not found: no tag.subflow.json of that version " \
           "nor tag@1.0.0.subflow.json" in errs[0]
    assert errs[0].endswith(f"the current file {tmp_path / 'subflows' / 'tag.subflow.json'} is "
                            "version 1.1.0")


def test_an_older_pinned_version_kept_beside_the_new_one_still_runs(tmp_path):
    old = library_tag("1.0.0")
    save_to_library(old, tmp_path / "subflows")
    changed = SubflowDef.model_validate({**TAG, "version": "2.0.0", "description": "v2"})
    save_to_library(changed, tmp_path / "subflows")
    assert (tmp_path / "subflows" / "tag@1.0.0.subflow.json").is_file()
    f, file = lib_flow(tmp_path, [pin_of(old)], ["old"])
    assert errors(f, file) == []
    result, events = run(f, file)
    assert debug_values(events, "d0") == [{"n": 1, "tag": "old"}]


def test_a_library_file_changed_since_pinned_is_an_error_with_both_hashes(tmp_path):
    d = library_tag()
    pin = pin_of(d)
    edited = SubflowDef.model_validate({**TAG, "version": "1.0.0", "label": "Edited"})
    save_to_library(edited, tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [pin], [1])
    path = tmp_path / "subflows" / "tag.subflow.json"
    assert errors(f, file) == [
        f"{file}: node 't0', subflow.hash: library file {path} (version 1.0.0) changed since "
        f"pinned: pinned {pin.hash}, the file now has {edited.content_hash()}; restore it, or "
        "update the instance to what it holds now"]


def test_an_unpinned_library_instance_is_a_warning_and_runs_the_current_version(tmp_path):
    save_to_library(library_tag("1.2.0"), tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [None], ["now"])
    found = problems(f, file)
    assert len(found) == 1 and "warning: this instance of library subflow 'tag' pins no " \
        "version: it runs the current one (1.2.0," in found[0], found
    result, events = run(f, file)
    assert debug_values(events, "d0") == [{"n": 1, "tag": "now"}]


def test_two_instances_pinning_different_versions_are_refused(tmp_path):
    v1 = library_tag("1.0.0")
    save_to_library(v1, tmp_path / "subflows")
    v2 = SubflowDef.model_validate({**TAG, "version": "1.1.0", "label": "two"})
    save_to_library(v2, tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [pin_of(v1), pin_of(v2)], [1, 2])
    errs = errors(f, file)
    assert len(errs) == 1 and "another instance in this flow version" in errs[0], errs


def test_newer_version_tells_the_designer_what_it_could_update_to(tmp_path):
    from runtime.flow.subflows import newer_version

    d = library_tag("1.0.0")
    save_to_library(d, tmp_path / "subflows")
    f, file = lib_flow(tmp_path, [pin_of(d)], [1])
    node = f.node("t0")
    assert newer_version(f, node, file) is None
    save_to_library(SubflowDef.model_validate({**TAG, "version": "1.0.1", "label": "x"}),
                    tmp_path / "subflows")
    assert newer_version(f, node, file) == "1.0.1"
    assert newer_version(f, f.node("src"), file) is None


# -- expansion --------------------------------------------------------------------------


def test_expansion_gives_path_ids_and_wires_straight_through_inputs_and_outputs():
    f = flow([inject(), {"id": "t1", "type": "subflow:tag", "params": {"rules": tag_rules(1)},
                         "name": "Tagger"}, debug("d")],
             [W("src", "t1"), W("t1", "d")], [TAG])
    e = expand(f, with_subflows(Registry.default(), f))
    assert [n.id for n in e.flow.nodes] == ["src", "t1.set", "d"]
    assert [(w.source, w.target) for w in e.flow.wires] == [
        (("t1.set", "out"), ("d", "in")), (("src", "out"), ("t1.set", "in"))]
    assert e.wire_origin == [1, 0]
    assert e.flow.node("t1.set").params["rules"].value == [
        {"action": "set", "path": "payload.tag", "value": 1}]
    assert e.owner == {"t1.set": "t1"}
    assert expand_subflows(f, with_subflows(Registry.default(), f)).node("t1.set") is not None


def test_expansion_of_named_ports_a_passthrough_and_a_disabled_instance():
    d = sub("two", [IN("a", "left"), IN("b", "right"), OUT("x", "up"), OUT("y", "down"),
                    SET("c", "payload", 5)],
            [W("a", "c"), W("c", "x"), W("b", "y")])  # right -> down passes straight through
    f = flow([inject(), inject(1, "src2"), {"id": "s", "type": "subflow:two", "disabled": True},
              debug("up"), debug("down")],
             [W("src", "s:left"), W("src2", "s:right"), W("s:up", "up"), W("s:down", "down")],
             [d])
    e = expand(f, with_subflows(Registry.default(), f))
    wires = {(w.source, w.target) for w in e.flow.wires}
    assert wires == {(("src", "out"), ("s.c", "in")), (("s.c", "out"), ("up", "in")),
                     (("src2", "out"), ("down", "in"))}
    assert e.flow.node("s.c").disabled


def test_a_param_not_set_takes_the_definition_default_and_nested_params_pass_down():
    inner = sub("inner", [IN(), TPL("say", "{{ subflow.word }}-{{ subflow.n }}"), OUT()],
                [W("i", "say"), W("say", "o")],
                [{"name": "word", "default": "dflt"}, {"name": "n", "type": "int", "default": 0}])
    middle = sub("middle", [IN(), {"id": "in1", "type": "subflow:inner",
                                   "params": {"word": S("w"), "n": P(2)}}, OUT()],
                 [W("i", "in1"), W("in1", "o")], [{"name": "w", "default": "mid"}])
    outer = sub("outer", [IN(), {"id": "m", "type": "subflow:middle"}, OUT()],
                [W("i", "m"), W("m", "o")])
    f = flow([inject(), {"id": "a", "type": "subflow:outer"}, debug("d1"),
              {"id": "b", "type": "subflow:middle", "params": {"w": P("set")}}, debug("d2"),
              {"id": "c", "type": "subflow:inner"}, debug("d3")],
             [W("src", "a"), W("a", "d1"), W("src", "b"), W("b", "d2"), W("src", "c"),
              W("c", "d3")], [inner, middle, outer])
    assert errors(f) == []
    e = expand(f, with_subflows(Registry.default(), f))
    assert {"a.m.in1.say", "b.in1.say", "c.say"} <= {n.id for n in e.flow.nodes}
    result, events = run(f)
    assert result.status == "ok"
    assert debug_values(events, "d1") == ["mid-2"]
    assert debug_values(events, "d2") == ["set-2"]
    assert debug_values(events, "d3") == ["dflt-0"]


def test_subflow_values_set_from_the_message_or_a_template_are_read_per_message():
    d = sub("greet", [IN(), TPL("say", "hi {{ subflow.who }}"), OUT()],
            [W("i", "say"), W("say", "o")], [{"name": "who", "default": "x", "ai_allowed": True}])
    f = flow([inject({"name": "Ann"}),
              {"id": "g1", "type": "subflow:greet",
               "params": {"who": {"scope": "message", "path": "payload.name"}}}, debug("d1"),
              {"id": "g2", "type": "subflow:greet",
               "params": {"who": {"scope": "expression", "value": "{{ msg.payload.name }}!"}}},
              debug("d2"),
              {"id": "g3", "type": "subflow:greet", "params": {"who": {"scope": "ai"}}},
              debug("d3")],
             [W("src", "g1"), W("g1", "d1"), W("src", "g2"), W("g2", "d2"), W("src", "g3"),
              W("g3", "d3")], [d])
    assert errors(f) == []
    result, events = run(f)
    assert debug_values(events, "d1") == ["hi Ann"]
    assert debug_values(events, "d2") == ["hi Ann!"]
    # An AI-scoped instance param outside a tool call reads msg.<name>.
    assert debug_values(events, "d3") == ["hi None"]


def test_a_catch_inside_an_instance_watches_only_that_instance():
    d = sub("risky", [IN(), {"id": "boom", "type": "core.python",
                             "params": {"code": P("raise ValueError('bad')")}},
                      {"id": "catch", "type": "core.catch"},
                      {"id": "caught", "type": "core.debug", "params": {"path": P("error")}}, OUT()],
            [W("i", "boom"), W("boom", "o"), W("catch", "caught")])
    f = flow([inject(), {"id": "r", "type": "subflow:risky"}, debug("d")],
             [W("src", "r"), W("r", "d")], [d])
    e = expand(f, with_subflows(Registry.default(), f))
    assert e.flow.node("r.catch").params["nodes"].value == ["r.boom", "r.caught"]
    result, events = run(f)
    assert result.status == "ok", result
    caught = debug_values(events, "r.caught")
    assert len(caught) == 1 and caught[0]["node"] == "r.boom", caught


def test_an_instance_wired_to_an_agents_tools_port_stays_one_node_with_its_ports_kept():
    d = sub("lookup", [IN("a", "query"), SET("c", "payload", "found"), OUT("z", "result")],
            [W("a", "c"), W("c", "z")],
            [{"name": "sku", "ai_allowed": True, "default": "none"}],
            description="Look a product up")
    agent = {"id": "agent", "type": "ai.agent", "params": {
        "provider": P("scripted"), "script": P([{"text": "done"}])}}
    ask = {"id": "src", "type": "core.inject", "params": {"payload": P("go")}}
    f = flow([ask, agent, {"id": "tool", "type": "subflow:lookup",
                                    "params": {"sku": {"scope": "ai"}}}, debug("d")],
             [W("src", "agent"), W("agent:tools", "tool:query"), W("agent", "d")], [d])
    assert errors(f) == []
    e = expand(f, with_subflows(Registry.default(), f))
    ids = [n.id for n in e.flow.nodes]
    assert ids == ["src", "agent", "tool", "tool.a", "tool.c", "tool.z", "d"]
    assert e.flow.node("tool").type == "subflow:lookup"
    tool = e.tools["tool"]
    assert (tool.inputs, tool.outputs) == ({"query": "tool.a"}, {"result": "tool.z"})
    assert tool.nodes == ["tool.a", "tool.c", "tool.z"]
    wires = {(w.source, w.target) for w in e.flow.wires}
    assert (("agent", "tools"), ("tool", "query")) in wires
    assert (("tool.a", "out"), ("tool.c", "in")) in wires
    assert not any(w[0][0] == "tool.z" for w in wires)
    result, events = run(f)
    assert result.status == "ok"
    assert debug_values(events, "d") == ["done"]


def test_a_flow_without_subflows_is_run_as_it_is():
    f = flow([inject(), debug("d")], [W("src", "d")])
    engine = Engine(f)
    assert engine.flow is f and engine.source_flow is f and engine.expansion is None


def test_the_run_records_the_flow_as_written_and_inner_inputs_by_path():
    f = flow([inject({"n": 1}), {"id": "t1", "type": "subflow:tag",
                                 "params": {"rules": tag_rules("x")}}, debug("d")],
             [W("src", "t1"), W("t1", "d")], [TAG])
    result, events = run(f)
    replay = next(e for e in events if e.type == "run.replay")
    assert replay.flow["subflows"][0]["name"] == "tag"
    assert [n["id"] for n in replay.flow["nodes"]] == ["src", "t1", "d"]
    assert [m["payload"] for m in replay.inputs["t1.set"]] == [{"n": 1}]
    sent = [e for e in events if e.type == "debug"]
    assert sent and sent[0].node == "d"


def test_pins_of_inner_nodes_work_by_path():
    d = sub("pinned", [IN(), {**SET("c", "payload", 1), "pin": {"out": [{"payload": "pinned"}]}},
                       OUT()], [W("i", "c"), W("c", "o")])
    f = flow([inject(), {"id": "p", "type": "subflow:pinned"}, debug("d")],
             [W("src", "p"), W("p", "d")], [d])
    bus = EventBus()
    events: list = []
    bus.subscribe(events.append)
    engine = Engine(f, bus=bus, use_pins=True)
    assert engine.pinned == ["p.c"]
    asyncio.run(engine.run(timeout=10))
    assert debug_values(events, "d") == ["pinned"]


# -- the CLI ----------------------------------------------------------------------------


def cli(*args: str, data: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(data)}
    env.pop(LIBRARY_ENV, None)
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


def test_cli_run_with_trace_prints_inner_nodes_by_path_and_validate_reports_definitions(
        tmp_path):
    f = flow([inject({"n": 1}), {"id": "order", "type": "subflow:tag",
                                 "params": {"rules": tag_rules("ok")}}, debug("d")],
             [W("src", "order"), W("order", "d")], [TAG])
    path = tmp_path / "f.flow.json"
    path.write_text(f.dumps(), encoding="utf-8")
    r = cli("run", str(path), "--trace", "--no-history", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"node": "d", "name": "Debug", "value": {"n": 1, "tag": "ok"}}]
    assert "trace: 'Inject' -> 'order.set' [out]" in r.stderr, r.stderr
    assert "trace: 'order.set' -> 'Debug' [out]" in r.stderr, r.stderr

    bad = SubflowDef.model_validate({**TAG, "nodes": [*TAG["nodes"],
                                                      {"id": "x", "type": "core.nope"}]})
    f.subflows = [bad]
    path.write_text(f.dumps(), encoding="utf-8")
    r = cli("validate", str(path), data=tmp_path / "data")
    assert r.returncode == 2
    assert f"{path}: node 'subflows.tag/x', type: unknown node type 'core.nope'" in r.stderr
    r = cli("run", str(path), data=tmp_path / "data")
    assert r.returncode == 2 and "subflows.tag/x" in r.stderr and "Traceback" not in r.stderr


def test_the_example_flow_with_a_subflow_used_twice_runs(tmp_path):
    example = ROOT / "resources" / "examples" / "order-subflows.flow.json"
    assert errors(load_flow(example, validate=False), str(example)) == []
    r = cli("run", str(example), "--no-history", data=tmp_path)
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["node"] for o in out] == ["express", "standard"]
    assert out[0]["value"]["shipping"] == {"carrier": "courier", "takes": "1 day"}
    assert out[1]["value"]["shipping"] == {"carrier": "post", "takes": "4 days"}


def test_a_rerun_from_a_node_inside_an_instance_names_it_by_its_path(tmp_path):
    f = flow([inject({"n": 1}), {"id": "order", "type": "subflow:tag",
                                 "params": {"rules": tag_rules("ok")}}, debug("d")],
             [W("src", "order"), W("order", "d")], [TAG])
    path = tmp_path / "f.flow.json"
    path.write_text(f.dumps(), encoding="utf-8")
    data = tmp_path / "data"
    assert cli("run", str(path), data=data).returncode == 0
    r = cli("runs", "rerun", "last", "--from", "order.set", "--set", "msg.payload.n=2", data=data)
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["value"] for line in r.stdout.splitlines()
            if line.startswith("{")] == [{"n": 2, "tag": "ok"}]


def test_cli_says_which_catch_inside_an_instance_handled_an_error(tmp_path):
    d = sub("risky", [IN(), {"id": "boom", "type": "core.python", "name": "Boom",
                             "params": {"code": P("raise ValueError('bad')")}},
                      {"id": "catch", "type": "core.catch"}, OUT()],
            [W("i", "boom"), W("boom", "o")])
    f = flow([inject(), {"id": "r", "type": "subflow:risky"}, debug("d")],
             [W("src", "r"), W("r", "d")], [d])
    path = tmp_path / "f.flow.json"
    path.write_text(f.dumps(), encoding="utf-8")
    r = cli("run", str(path), "--no-history", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    assert "handled: node 'Boom' (r.boom) failed: line 1: ValueError: bad (caught by " \
           "'r.catch')" in r.stderr, r.stderr


def test_a_secret_params_default_names_where_it_is_kept_never_the_secret(tmp_path):
    from runtime.flow import FlowError, parse_flow

    def with_default(default):
        return {"format": "switchboard.flow/1", "subflows": [{
            "name": "s", "params": [{"name": "key", "type": "secret", "secret": True,
                                     "default": default}],
            "nodes": [{"id": "i", "type": "subflow.in"}, {"id": "o", "type": "subflow.out"}],
            "wires": [{"from": ["i", "out"], "to": ["o", "in"]}]}], "nodes": [], "wires": []}

    try:
        parse_flow(with_default("sk-live-123"), "f.flow.json")
    except FlowError as exc:
        text = str(exc)
    else:
        raise AssertionError("a secret written into the file was taken")
    assert "subflows[0].params[0]" in text and "never the secret itself" in text
    assert "sk-live-123" not in text
    flow = parse_flow(with_default({"env": "STOCK_KEY"}), "f.flow.json")
    assert flow.subflows[0].params[0].default == {"env": "STOCK_KEY"}
    # A library file is read by the same model: the same refusal, naming the file.
    lib = tmp_path / "s.subflow.json"
    lib.write_text(json.dumps({"format": "switchboard.subflow/1", "version": "1.0.0",
                               **with_default("sk-live-123")["subflows"][0]}))
    from runtime.flow.subflows import read_library_file

    try:
        read_library_file(lib)
    except FlowError as exc:
        assert str(lib) in str(exc) and "never the secret itself" in str(exc)
        assert "sk-live-123" not in str(exc)
    else:
        raise AssertionError("a library file with a secret in it was taken")

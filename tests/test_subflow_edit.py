"""runtime.flow.subflow_edit: Convert Selection to Subflow, Expand Subflow and
Save to Library as pure transforms of a Flow: what each makes (ids, wires,
ports, params, pins), what each refuses and why, and (issue #25) that a flow
runs the same before a conversion, after it, and after expanding it back:
the real engine runs all three and the debug outputs are compared."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from runtime.flow import Flow, parse_flow, validate_flow
from runtime.flow.model import SubflowDef, SubflowPin
from runtime.flow.subflow_edit import (
    bump_patch,
    convert_selection,
    expand_instance,
    move_to_library,
    save_new_version,
)
from runtime.flow.subflows import IN_TYPE, OUT_TYPE, port_names, read_library_file, with_subflows
from tests.runtime_fixtures import REGISTRY, N, P, make_flow, run

#: Whether the expansion that runs an instance (runtime/flow/expand.py) is there.
HAS_EXPANSION = importlib.util.find_spec("runtime.flow.expand") is not None
needs_expansion = pytest.mark.skipif(
    not HAS_EXPANSION, reason="runtime.flow.expand (running an instance) is not built yet")


def wires(obj) -> list[tuple]:
    return [(w.source[0], w.source[1], w.target[0], w.target[1]) for w in obj.wires]


def order_flow() -> Flow:
    """Two orders in; a price worked out; a switch on stock with a fan-out
    after it (a text and an audit copy) and a backorder branch; three debug
    nodes. The middle four nodes are the ones converted."""
    def change(path, value):
        return [{"action": "set", "path": path, "value": value}]

    nodes = [
        N("src1", "core.inject", payload={"sku": "A-1", "qty": 3, "price": 2.5}),
        N("src2", "core.inject", payload={"sku": "B-7", "qty": 0, "price": 9}),
        N("calc", "core.template", template="{{ payload.qty * payload.price }}",
          to="payload.total"),
        N("check", "core.switch", path="payload.qty",
          rules=[{"op": "gt", "value": 0}, {"op": "else"}]),
        N("tag", "core.change", rules=change("payload.status", "ok")),
        N("miss", "core.change", rules=change("payload.status", "backorder")),
        N("fmt", "core.template", template="Order {{ payload.sku }}: {{ payload.total }}",
          to="payload.text"),
        N("audit", "core.change", rules=change("topic", "audit")),
        N("d_ok", "core.debug"),
        N("d_audit", "core.debug", path="msg"),
        N("d_miss", "core.debug"),
    ]
    pos = {"src1": (0, 0), "src2": (0, 120), "calc": (240, 60), "check": (480, 60),
           "tag": (720, 0), "miss": (720, 160), "fmt": (960, 0), "audit": (960, 80),
           "d_ok": (1200, 0), "d_audit": (1200, 80), "d_miss": (1200, 160)}
    for n in nodes:
        n["position"] = list(pos[n["id"]])
    return make_flow(nodes, ["src1->calc", "src2->calc", "calc->check", "check.out0->tag",
                             "check.out1->miss", "tag->fmt", "tag->audit", "fmt->d_ok",
                             "audit->d_audit", "miss->d_miss"], name="Orders")


SELECTION = ["calc", "check", "tag", "miss"]
DEBUGS = ["d_ok", "d_audit", "d_miss"]


# -- convert -------------------------------------------------------------------------
def test_convert_makes_a_definition_with_an_input_and_two_outputs():
    flow = order_flow()
    before = flow.to_json()
    out = convert_selection(flow, SELECTION, "check_stock", "Check stock")
    assert flow.to_json() == before  # the flow given is left as it was
    [defn] = out.subflows
    assert (defn.name, defn.label, defn.type) == ("check_stock", "Check stock",
                                                  "subflow:check_stock")
    assert port_names(defn, IN_TYPE) == ["in"]
    assert port_names(defn, OUT_TYPE) == ["tag", "miss"]
    ids = [n.id for n in defn.nodes]
    assert ids == ["input", "calc", "check", "tag", "miss", "out_tag", "out_miss"]
    ins = [n for n in defn.nodes if n.type == IN_TYPE]
    outs = [n for n in defn.nodes if n.type == OUT_TYPE]
    assert len(ins) == 1 and len(outs) == 2
    inner = {(s, sp, t, tp) for s, sp, t, tp in wires(defn)}
    assert (ins[0].id, "out", "calc", "in") in inner
    assert ("calc", "out", "check", "in") in inner
    assert ("check", "out0", "tag", "in") in inner and ("check", "out1", "miss", "in") in inner
    by_name = {n.params["name"].value: n.id for n in outs}
    assert ("tag", "out", by_name["tag"], "in") in inner
    assert ("miss", "out", by_name["miss"], "in") in inner
    assert len(defn.wires) == 6

    # The flow: the four nodes gone, one instance where the first was, wired in their place.
    assert [n.id for n in out.nodes] == ["src1", "src2", "check_stock", "fmt", "audit",
                                        "d_ok", "d_audit", "d_miss"]
    inst = out.node("check_stock")
    assert inst.type == "subflow:check_stock" and inst.subflow is None
    assert inst.position == (480.0, 80.0)  # the centre of the selection's box
    assert wires(out) == [("src1", "out", "check_stock", "in"),
                          ("src2", "out", "check_stock", "in"),
                          ("check_stock", "tag", "fmt", "in"),
                          ("check_stock", "tag", "audit", "in"),
                          ("fmt", "out", "d_ok", "in"), ("audit", "out", "d_audit", "in"),
                          ("check_stock", "miss", "d_miss", "in")]
    reg = with_subflows(REGISTRY, out)
    spec = reg.spec("subflow:check_stock")
    assert [p.name for p in spec.inputs] == ["in"]
    assert [p.name for p in spec.outputs] == ["tag", "miss"]
    assert Flow.model_validate(out.to_json()).to_json() == out.to_json()


def test_convert_keeps_relative_places_and_puts_ports_left_and_right():
    out = convert_selection(order_flow(), SELECTION, "check_stock")
    defn = out.subflow("check_stock")
    pos = {n.id: n.position for n in defn.nodes}
    orig = {n.id: n.position for n in order_flow().nodes}
    dx = pos["calc"][0] - orig["calc"][0]
    dy = pos["calc"][1] - orig["calc"][1]
    for nid in SELECTION:
        assert pos[nid] == (orig[nid][0] + dx, orig[nid][1] + dy)
    inner_x = [pos[n] for n in SELECTION]
    for n in defn.nodes:
        if n.type == IN_TYPE:
            assert n.position[0] < min(x for x, _ in inner_x)
        if n.type == OUT_TYPE:
            assert n.position[0] > max(x for x, _ in inner_x)
    outs = sorted((n for n in defn.nodes if n.type == OUT_TYPE), key=lambda n: n.position[1])
    assert [n.params["name"].value for n in outs] == ["tag", "miss"]  # top to bottom


def test_convert_names_inputs_after_their_node_and_port_when_several():
    flow = make_flow([N("a", "core.inject"), N("b", "core.inject"), N("sw", "core.switch",
                      rules=[{"op": "else"}]), N("j", "core.change", rules=[]),
                      N("x", "core.debug"), N("y", "core.debug")],
                     ["a->sw", "b->j", "sw.out0->x", "j->y", "j->x"])
    out = convert_selection(flow, ["sw", "j"], "pair")
    defn = out.subflow("pair")
    assert sorted(port_names(defn, IN_TYPE)) == ["j", "sw"]
    assert sorted(port_names(defn, OUT_TYPE)) == ["j", "sw_out0"]
    assert ("j", "out", "x", "in") not in wires(out)
    assert ("pair", "j", "x", "in") in wires(out) and ("pair", "j", "y", "in") in wires(out)


def test_convert_inside_a_definition_edits_that_definition():
    outer = convert_selection(order_flow(), SELECTION, "check_stock")
    nested = convert_selection(outer, ["tag", "miss"], "label_it", within="check_stock")
    assert [d.name for d in nested.subflows] == ["check_stock", "label_it"]
    cs = nested.subflow("check_stock")
    assert {n.id for n in cs.nodes} >= {"calc", "check", "label_it"}
    assert "tag" not in {n.id for n in cs.nodes}
    assert nested.to_json()["nodes"] == outer.to_json()["nodes"]  # the flow's own: unchanged
    inner = nested.subflow("label_it")
    assert sorted(port_names(inner, IN_TYPE)) == ["miss", "tag"]
    assert sorted(port_names(inner, OUT_TYPE)) == ["miss", "tag"]


@pytest.mark.parametrize("ids, name, why", [
    ([], "x", "select the nodes"),
    (["calc"], "9lives", "cannot name a subflow"),
    (["calc"], "has space", "cannot name a subflow"),
    (["nope"], "x", "no node 'nope'"),
])
def test_convert_refuses_with_a_reason(ids, name, why):
    with pytest.raises(ValueError, match=why):
        convert_selection(order_flow(), ids, name)


def test_convert_refuses_a_taken_name():
    out = convert_selection(order_flow(), ["calc"], "price")
    with pytest.raises(ValueError, match="already has a subflow named 'price'"):
        convert_selection(out, ["fmt"], "price")
    with pytest.raises(ValueError, match="library already has a subflow named 'shared'"):
        convert_selection(order_flow(), ["fmt"], "shared", taken=["shared"])


def agent_flow() -> Flow:
    return parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": P("go")}},
        {"id": "agent", "type": "ai.agent",
         "params": {"provider": P("scripted"), "script": P([{"text": "x"}])}},
        {"id": "mail", "type": "test.lookup"},
        {"id": "start", "type": "core.debug"},
        {"id": "show", "type": "core.debug"}],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "tools"], "to": ["mail", "in"]},
                  {"from": ["agent", "on_start"], "to": ["start", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]}]})


def test_convert_refuses_an_agent_tool_or_hook_wire_across_the_edge():
    flow = agent_flow()
    with pytest.raises(ValueError, match="'agent'.s tools port to its tool 'mail' crosses"):
        convert_selection(flow, ["agent"], "a", registry=REGISTRY)
    with pytest.raises(ValueError, match="crosses the selection's edge"):
        convert_selection(flow, ["mail"], "a")  # names alone, without a registry
    with pytest.raises(ValueError, match="on_start hook 'start'"):
        convert_selection(flow, ["agent", "mail"], "a", registry=REGISTRY)
    out = convert_selection(flow, ["agent", "mail", "start"], "a", registry=REGISTRY)
    assert ("agent", "tools", "mail", "in") in wires(out.subflow("a"))


def test_convert_refuses_subflow_ports_and_hook_starts():
    outer = convert_selection(order_flow(), SELECTION, "check_stock")
    port = next(n.id for n in outer.subflow("check_stock").nodes if n.type == IN_TYPE)
    with pytest.raises(ValueError, match="is an input of the subflow being edited"):
        convert_selection(outer, [port, "calc"], "x", within="check_stock")
    flow = make_flow([N("h", "core.debug")])
    flow = Flow.model_validate(flow.to_json() | {"settings": {"hooks": [
        {"port": "on_start", "node": "h"}]}})
    with pytest.raises(ValueError, match="starts the flow's on_start hook"):
        convert_selection(flow, ["h"], "x")


# -- expand -------------------------------------------------------------------------
def test_expand_undoes_convert():
    flow = order_flow()
    converted = convert_selection(flow, SELECTION, "check_stock")
    back = expand_instance(converted, "check_stock")
    assert [n.id for n in back.nodes] == [n.id for n in flow.nodes]
    for a, b in zip(back.nodes, flow.nodes, strict=True):
        assert a.to_json() == b.to_json()
    assert sorted(wires(back)) == sorted(wires(flow))
    # The definition stays (Node-RED keeps it too): it can be placed again.
    assert [d.name for d in back.subflows] == ["check_stock"]


def test_expand_gives_fresh_ids_where_the_inner_ones_are_taken():
    converted = convert_selection(order_flow(), SELECTION, "check_stock")
    twice = expand_instance(expand_instance(
        converted.model_copy(update={"nodes": [*converted.nodes, converted.nodes[2].model_copy(
            update={"id": "again", "position": (480.0, 600.0)})]}), "check_stock"), "again")
    ids = [n.id for n in twice.nodes]
    assert len(ids) == len(set(ids))
    assert {"again_calc", "again_check", "again_tag", "again_miss"} <= set(ids)
    again = {n.id: n.position for n in twice.nodes if n.id.startswith("again_")}
    assert again["again_calc"] == (240.0, 580.0)  # around where the instance was


def param_flow() -> Flow:
    defn = SubflowDef.model_validate({
        "name": "greet", "params": [
            {"name": "who", "default": "world"}, {"name": "greeting"},
            {"name": "count", "type": "int", "default": 2}, {"name": "unset"}],
        "nodes": [
            {"id": "i", "type": IN_TYPE, "params": {"name": P("in")}},
            {"id": "set", "type": "core.change", "params": {"rules": P([])}},
            {"id": "t", "type": "core.template", "params": {
                "template": {"scope": "subflow", "param": "greeting"},
                "to": {"scope": "subflow", "param": "unset"}}},
            {"id": "e", "type": "core.debug", "params": {
                "path": {"scope": "expression",
                         "value": "{{ subflow.who }}-{{ subflow['count'] }}"}}},
            {"id": "o", "type": OUT_TYPE, "params": {"name": P("out")}}],
        "wires": [{"from": ["i", "out"], "to": ["set", "in"]},
                  {"from": ["set", "out"], "to": ["t", "in"]},
                  {"from": ["t", "out"], "to": ["e", "in"]},
                  {"from": ["i", "out"], "to": ["o", "in"]}]})
    flow = make_flow([N("src", "core.inject"), {"id": "g", "type": "subflow:greet",
                      "position": [400, 200], "params": {
                          "greeting": P("Hi {{ payload }}"),
                          "who": {"scope": "message", "path": "payload.name"}}},
                      N("d", "core.debug")], ["src->g", "g->d"])
    flow.subflows = [defn]
    return flow


def test_expand_puts_the_instance_values_in_place_of_the_subflow_params():
    out = expand_instance(param_flow(), "g")
    t = out.node("t")
    assert t.params["template"].to_json() == {"scope": "custom", "value": "Hi {{ payload }}"}
    assert "to" not in t.params  # set by neither instance nor default: the node's own default
    e = out.node("e")
    assert e.params["path"].value == "{{ msg.payload.name }}-{{ (2) }}"
    # in -> out passes through: src reaches set and d; nothing of i/o is left.
    assert wires(out) == [("src", "out", "set", "in"), ("src", "out", "d", "in"),
                          ("set", "out", "t", "in"), ("t", "out", "e", "in")]
    assert [n.id for n in out.nodes] == ["src", "set", "t", "e", "d"]


def test_expand_refuses_what_it_cannot_write_out():
    with pytest.raises(ValueError, match="'src' is not a subflow instance"):
        expand_instance(param_flow(), "src")
    with pytest.raises(ValueError, match="no node 'zz'"):
        expand_instance(param_flow(), "zz")
    flow = param_flow()
    flow.subflows[0].nodes[3].params["path"].value = "{{ subflow[msg.k] }}"
    with pytest.raises(ValueError, match="by a computed name"):
        expand_instance(flow, "g")
    flow = param_flow()
    flow.subflows = []
    with pytest.raises(ValueError, match="'greet' is neither in this flow nor in the library"):
        expand_instance(flow, "g")
    flow = param_flow()
    flow.node("g").pin = {"out": [{"payload": 1}]}
    with pytest.raises(ValueError, match="has pinned data"):
        expand_instance(flow, "g")


def test_expand_refuses_an_instance_that_is_an_agent_tool():
    flow = agent_flow()
    flow.subflows = [SubflowDef.model_validate({"name": "lk", "nodes": [
        {"id": "i", "type": IN_TYPE}, {"id": "o", "type": OUT_TYPE}],
        "wires": [{"from": ["i", "out"], "to": ["o", "in"]}]})]
    flow.nodes.append(flow.nodes[2].model_copy(update={"id": "sf", "type": "subflow:lk"}))
    flow.wires.append(flow.wires[1].model_copy(update={"target": ("sf", "in")}))
    with pytest.raises(ValueError, match="is an agent's tool"):
        expand_instance(flow, "sf")


# -- save to the library ----------------------------------------------------------
def test_move_to_library_writes_the_file_and_pins_the_instances(tmp_path):
    flow_file = tmp_path / "orders.flow.json"
    lib = tmp_path / "subflows"
    converted = convert_selection(order_flow(), SELECTION, "check_stock", "Check stock")
    # A second instance, inside another definition, pins too.
    converted.subflows.append(SubflowDef.model_validate({"name": "wrap", "nodes": [
        {"id": "inner", "type": "subflow:check_stock"}]}))
    out = move_to_library(converted, "check_stock", lib, "1.2.0", flow_file=str(flow_file))
    path = lib / "check_stock.subflow.json"
    saved = read_library_file(path)
    assert saved.version == "1.2.0" and saved.label == "Check stock"
    assert json.loads(path.read_text())["format"] == "switchboard.subflow/1"
    assert [d.name for d in out.subflows] == ["wrap"]
    pin = SubflowPin(version="1.2.0", hash=saved.content_hash())
    assert out.node("check_stock").subflow == pin
    assert out.subflow("wrap").nodes[0].subflow == pin
    assert converted.node("check_stock").subflow is None  # the flow given: unchanged
    problems = [p for p in validate_flow(out, with_subflows(REGISTRY, out, str(flow_file)),
                                         file=str(flow_file)) if p.severity == "error"]
    assert not [p for p in problems if "check_stock" in str(p)], problems


def test_move_to_library_refuses_a_clash_before_writing(tmp_path):
    flow_file = str(tmp_path / "f.flow.json")
    lib = tmp_path / "subflows"
    converted = convert_selection(order_flow(), SELECTION, "check_stock")
    move_to_library(converted, "check_stock", lib, "1.0.0", flow_file=flow_file)
    again = move_to_library(converted, "check_stock", lib, "1.0.0", flow_file=flow_file)
    assert again.node("check_stock").subflow.version == "1.0.0"  # same content: fine
    changed = converted.model_copy(deep=True)
    changed.subflow("check_stock").label = "Other"
    text = (lib / "check_stock.subflow.json").read_text()
    with pytest.raises(ValueError, match="already version 1.0.0 of 'check_stock', with other "
                                         r"content: choose a new version \(e.g. 1.0.1\)"):
        move_to_library(changed, "check_stock", lib, "1.0.0", flow_file=flow_file)
    move_to_library(changed, "check_stock", lib, "1.1.0", flow_file=flow_file)
    assert (lib / "check_stock@1.0.0.subflow.json").read_text() == text  # the old one kept
    with pytest.raises(ValueError, match="version 1.1.0, newer than 1.0.5"):
        move_to_library(changed, "check_stock", lib, "1.0.5", flow_file=flow_file)
    with pytest.raises(ValueError, match="not a version"):
        move_to_library(changed, "check_stock", lib, "v2", flow_file=flow_file)
    with pytest.raises(ValueError, match="no subflow named 'nope'"):
        move_to_library(changed, "nope", lib, flow_file=flow_file)
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(ValueError, match="would not find a subflow in"):
        move_to_library(changed, "check_stock", elsewhere, flow_file=flow_file)
    assert not elsewhere.exists()


def test_save_new_version_checks_the_library_first(tmp_path):
    lib = tmp_path / "subflows"
    defn = convert_selection(order_flow(), SELECTION, "check_stock").subflow("check_stock")
    path = save_new_version(defn, lib, "1.0.0")
    assert read_library_file(path).version == "1.0.0"
    defn.label = "edited"
    with pytest.raises(ValueError, match="already version 1.0.0"):
        save_new_version(defn, lib, "1.0.0")
    with pytest.raises(ValueError, match="not a version"):
        save_new_version(defn, lib, "")
    save_new_version(defn, lib, "1.0.1")
    assert read_library_file(lib / "check_stock@1.0.0.subflow.json").label == ""
    assert read_library_file(path).label == "edited" and defn.version is None


def test_bump_patch():
    assert [bump_patch(v) for v in ("1.2.3", "0.0.9", "2.0.0-rc.1", None, "x")] == \
        ["1.2.4", "0.0.10", "2.0.0", "1.0.0", "1.0.0"]


def test_expand_reads_a_library_definition_at_its_pinned_version(tmp_path):
    flow_file = str(tmp_path / "f.flow.json")
    converted = convert_selection(order_flow(), SELECTION, "check_stock")
    moved = move_to_library(converted, "check_stock", tmp_path / "subflows", "1.0.0",
                            flow_file=flow_file)
    back = expand_instance(moved, "check_stock", flow_file=flow_file)
    assert sorted(wires(back)) == sorted(wires(order_flow()))
    assert back.subflows == []
    path = Path(tmp_path / "subflows" / "check_stock.subflow.json")
    data = json.loads(path.read_text())
    data["label"] = "edited in place"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="is not the 'check_stock' 1.0.0 that 'check_stock' pins"):
        expand_instance(moved, "check_stock", flow_file=flow_file)


def test_as_flow_shares_the_definition_lists():
    """Contract fix: SubflowDef.as_flow() said it shared the nodes and
    wires, but pydantic copied the lists, so an edit of the Flow (the
    designer's definition tab) never reached the definition."""
    defn = SubflowDef(name="x")
    f = defn.as_flow()
    f.nodes.append(parse_flow({"format": "switchboard.flow/1", "nodes": [
        {"id": "a", "type": "core.debug"}]}).nodes[0])
    assert [n.id for n in defn.nodes] == ["a"]
    assert f.wires is defn.wires


# -- the flow runs the same -------------------------------------------------------
async def outputs(flow: Flow) -> dict[str, list]:
    reg = with_subflows(REGISTRY, flow)
    errors = [p for p in validate_flow(flow, reg) if p.severity == "error"]
    assert not errors, errors
    r = await run(flow, reg=reg)
    assert r.result.status == "ok", r.result
    out = {d: r.debug(d) for d in DEBUGS}
    for values in out.values():
        for v in values:
            if isinstance(v, dict):
                v.pop("_msgid", None)
    return out


async def test_the_original_flow_gives_what_the_comparison_expects():
    out = await outputs(order_flow())
    assert out["d_ok"] == [{"sku": "A-1", "qty": 3, "price": 2.5, "total": "7.5",
                            "status": "ok", "text": "Order A-1: 7.5"}]
    assert [m["topic"] for m in out["d_audit"]] == ["audit"]
    assert out["d_miss"] == [{"sku": "B-7", "qty": 0, "price": 9, "total": "0",
                              "status": "backorder"}]


@needs_expansion
async def test_the_flat_form_of_a_converted_flow_runs_the_same():
    """The run's own expansion (runtime.flow.expand) of the converted flow,
    nested once more, run by the engine: the same outputs as the original."""
    from runtime.flow.expand import expand_subflows

    flow = order_flow()
    converted = convert_selection(flow, SELECTION, "check_stock")
    nested = convert_selection(converted, ["tag", "miss"], "label_it", within="check_stock")
    before = await outputs(flow)
    for f in (converted, nested):
        flat = expand_subflows(f, with_subflows(REGISTRY, f))
        assert "check_stock.calc" in {n.id for n in flat.nodes}
        assert await outputs(flat) == before


@needs_expansion
async def test_the_flow_runs_the_same_converted_and_expanded_back():
    flow = order_flow()
    converted = convert_selection(flow, SELECTION, "check_stock")
    expanded = expand_instance(converted, "check_stock")
    before = await outputs(flow)
    assert await outputs(converted) == before
    assert await outputs(expanded) == before


@needs_expansion
async def test_a_nested_conversion_runs_the_same(tmp_path):
    flow = order_flow()
    outer = convert_selection(flow, SELECTION, "check_stock")
    nested = convert_selection(outer, ["tag", "miss"], "label_it", within="check_stock")
    before = await outputs(flow)
    assert await outputs(nested) == before
    moved = move_to_library(nested, "label_it", tmp_path / "subflows", "1.0.0",
                            flow_file=str(tmp_path / "f.flow.json"))
    reg = with_subflows(REGISTRY, moved, str(tmp_path / "f.flow.json"))
    r = await run(moved, reg=reg, file=str(tmp_path / "f.flow.json"))
    assert r.result.status == "ok"
    assert [v["status"] for v in r.debug("d_ok")] == ["ok"]

"""Node-RED subflows imported as Switchboard subflows (runtime.importers,
docs/import-node-red.md "Subflows"): a real Node-RED 4 (the fixture of
tests/test_import_node_red.py) runs a flow with two instances of one
subflow and a third inside another subflow, and the imported flow, run by
the real engine (``switchboard run``), answers the same requests alike;
the rest checks the shapes one Node-RED export at a time."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from runtime.flow import validate_flow
from runtime.importers import NodeRedImportError, import_node_red
from runtime.importers import node_red as nr
from tests.test_import_node_red import (  # noqa: F401 - node_red is a fixture
    CLI,
    ROOT,
    SwitchboardRun,
    _cli,
    _free_port,
    _import_export,
    _source,
    _wait_port,
    assert_accounted,
    node_red,
)


def _defs(report) -> dict:
    return {d.name: d for d in report.flow.subflows}


def _inner(defn, node_id):
    (node,) = [n for n in defn.nodes if n.id == node_id]
    return node


class Runs:
    """``switchboard run`` of a flow with several webhooks, each on a free port."""

    def __init__(self, flow_path, hooks: list[str]) -> None:
        self.ports = {h: _free_port() for h in hooks}
        sets = [a for h, p in self.ports.items() for a in ("--set", f"{h}.port={p}")]
        self.proc = subprocess.Popen(CLI + ["run", str(flow_path), *sets, "--timeout", "60",
                                            "--no-history"], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        for p in self.ports.values():
            _wait_port(p, self.proc, "switchboard run")

    def base(self, hook: str) -> str:
        return f"http://127.0.0.1:{self.ports[hook]}"

    def stop(self) -> str:
        self.proc.terminate()
        return self.proc.communicate(timeout=30)[0]


def test_two_instances_and_a_nested_one_answer_as_node_red_does(node_red, tmp_path):  # noqa: F811
    export, report = _import_export(node_red, tmp_path, "subflows-two.json")
    defs = _defs(report)
    assert set(defs) == {"Tag_count", "Wrap", "Spare"}
    tag = defs["Tag_count"]
    assert (tag.label, tag.description) == ("Tag & count", "Tags an order and routes it by size.")
    # Env properties -> params, typed; a select -> an enum with its choices.
    assert [(p.name, p.type.value, p.default, p.choices) for p in tag.params] == [
        ("PREFIX", "str", "tag", None), ("LIMIT", "int", 5, None), ("LOUD", "bool", False, None),
        ("EXTRA", "json", {"k": 1}, None), ("SIZE", "enum", "m", ["s", "m"])]
    assert tag.param("SIZE").label == "Size"
    # Outputs named by the subflow's output labels, wired by index.
    ports = {n.id: (n.type, n.params["name"].value) for n in tag.nodes
             if n.type.startswith("subflow.")}
    assert ports == {"in": ("subflow.in", "in"), "out_small": ("subflow.out", "small"),
                     "out_big": ("subflow.out", "big")}
    assert {(w.source, w.target[0]) for w in tag.wires} >= {
        (("swT", "out1"), "out_big"), (("tpT", "out"), "out_small")}
    # Instances: their env values are the params' values; the wires name the ports.
    a, b, c = (report.flow.node(i) for i in ("iA", "iB", "iC"))
    assert (a.type, b.type, c.type) == ("subflow:Tag_count", "subflow:Tag_count", "subflow:Wrap")
    assert {k: v.value for k, v in a.params.items()} == {
        "PREFIX": "alpha", "EXTRA": {"k": 2}, "SIZE": "s"}
    assert b.params == {}
    wires = {(w.source, w.target[0]) for w in report.flow.wires}
    assert {(("iA", "small"), "rS"), (("iA", "big"), "rB"), (("iC", "out1"), "rS")} <= wires
    # Nested: Wrap's instance of Tag_count reads PREFIX from Wrap's WRAPPED.
    iw = _inner(defs["Wrap"], "iW")
    assert {k: v.to_json() for k, v in iw.params.items()} == {
        "PREFIX": {"scope": "subflow", "param": "WRAPPED"},
        "LIMIT": {"scope": "custom", "value": 7}}
    assert {(w.source, w.target) for w in defs["Wrap"].wires} == {
        (("in", "out"), ("iW", "in")), (("iW", "small"), ("out1", "in")),
        (("iW", "big"), ("out1", "in"))}
    # Counted once per definition, not per instance; instances are mapped.
    assert report.table["change"] == Counter(mapped=1)
    assert report.table["template"] == Counter(mapped=1)
    assert report.table["subflow:Tag & count"] == Counter(mapped=3)
    assert report.table["subflow"] == Counter(mapped=3)
    assert [p for p in validate_flow(report.flow) if p.severity == "error"] == []
    flow_path = tmp_path / "orders.flow.json"
    flow_path.write_text(report.flow.dumps())
    node_red.deploy(_source("subflows-two.json"))
    run = Runs(flow_path, ["hA", "hB", "hC"])
    asked = [("/sf/a", "hA", 3), ("/sf/a", "hA", 9), ("/sf/b", "hB", 1), ("/sf/b", "hB", 6),
             ("/sf/c", "hC", 2), ("/sf/c", "hC", 8)]
    try:
        answers = []
        for path, hook, n in asked:
            red = node_red.request("POST", path, {"n": n})
            ours = node_red.request("POST", path, {"n": n}, base=run.base(hook))
            answers.append((red[0], red[2]))
            assert ours[0] == red[0], (path, n, ours, red)
            if red[2].startswith("{"):
                assert json.loads(ours[2]) == json.loads(red[2]), (path, n)
            else:
                assert ours[2] == red[2], (path, n)
    finally:
        run.stop()
    # What Node-RED answered: each instance's own values, and the nested one's.
    assert answers[0] == (200, "alpha:3:2:s") and answers[2] == (200, "tag:1:1:m")
    assert answers[4] == (200, "deep:2:1:m")
    assert answers[1][0] == 202 and json.loads(answers[1][1])["prefix"] == "alpha"


def test_a_subflow_no_instance_uses_keeps_its_env_reads(node_red, tmp_path, capsys):  # noqa: F811
    """Spare (no instance): an inject of an env payload and an env topic, a
    function reading env.get, a file node with an env file name. The CLI
    says how many subflows it wrote."""
    export, report = _import_export(node_red, tmp_path, "subflows-two.json")
    code, out, err = _cli(capsys, "import", "node-red", str(tmp_path / "subflows-two.export.json"),
                          "-o", str(tmp_path / "orders.flow.json"))
    assert code == 0, err
    assert f"wrote {tmp_path / 'orders.flow.json'} (8 nodes, 8 wires, 3 subflows)" in out
    spare = _defs(report)["Spare"]
    assert spare.description == "No instance uses it."
    ij = _inner(spare, "ijS")
    assert {k: v.to_json() for k, v in ij.params.items()} == {
        "payload": {"scope": "subflow", "param": "GREETING"},
        "payload_type": {"scope": "custom", "value": "string"},
        "topic": {"scope": "subflow", "param": "GREETING"}}
    fn = _inner(spare, "fnS")
    assert fn.params["input"].value == '{{ {"GREETING": subflow.GREETING} }}'
    assert 'args["NAME"] here (the input gives GREETING)' in fn.params["code"].value
    assert _inner(spare, "foS").params["path"].to_json() == {"scope": "subflow",
                                                             "param": "FILE"}
    assert not any(n.disabled for n in spare.nodes)
    assert report.where["fnS"] == "subflows.Spare/fnS"


def _sf(sf_id, name, env=(), ins=1, outs=((),), **kw):
    return {"id": sf_id, "type": "subflow", "name": name,
            "in": [{"x": 1, "y": 1, "wires": []}] * ins,
            "out": [{"x": 9, "y": 1, "wires": list(w)} for w in outs],
            "env": list(env), **kw}


def test_env_forms_credentials_and_names():
    flows = [
        {"id": "t", "type": "tab", "label": "T",
         "env": [{"name": "HOST", "type": "str", "value": "tab-host"}]},
        _sf("S1", "my sub-flow", env=[{"name": "URL", "type": "str", "value": "http://x"},
                                      {"name": "KEY", "type": "cred", "value": ""},
                                      {"name": "WHEN", "type": "jsonata", "value": "$now()"}],
            outs=[[{"id": "h", "port": 0}]]),
        {"id": "h", "type": "http request", "z": "S1", "x": 1, "y": 1, "method": "GET",
         "url": "${URL}", "ret": "txt", "wires": [[]]},
        {"id": "h2", "type": "http request", "z": "S1", "x": 1, "y": 1, "method": "GET",
         "url": "http://{{env.HOST}}/{{env.URL}}/{{id}}", "ret": "txt", "wires": [[]]},
        {"id": "cOld", "type": "change", "z": "S1", "x": 1, "y": 1, "wires": [[]],
         "rules": [{"t": "set", "p": "u", "pt": "msg", "to": "$(URL)", "tot": "str"}]},
        _sf("S2", "my sub-flow"),  # the same name: made unique
        {"id": "i1", "type": "subflow:S1", "z": "t", "x": 1, "y": 1, "wires": [[]],
         "env": [{"name": "KEY", "type": "cred", "value": ""},
                 {"name": "NOPE", "type": "str", "value": "x"},
                 {"name": "URL", "type": "env", "value": "HOST"}]},
        {"id": "i2", "type": "subflow:S2", "z": "t", "x": 1, "y": 1, "wires": [[]]},
    ]
    report = import_node_red(json.dumps(flows))
    assert_accounted(report, flows)
    defs = _defs(report)
    assert set(defs) == {"my_sub_flow", "my_sub_flow_2"}
    s1 = defs["my_sub_flow"]
    key = s1.param("KEY")
    assert (key.type.value, key.secret, key.default) == ("secret", True, {"env": "KEY"})
    assert s1.param("WHEN").default == "$now()"
    assert report.table["subflow"] == Counter(mapped=1, review=1)
    assert "Subflow 'my sub-flow': REVIEW: env 'KEY' is a credential" in report.flow.description
    assert "env 'WHEN' of type 'jsonata'" in report.flow.description
    # ${URL} (the whole property) -> the param; {{env.URL}} in a URL template -> subflow.URL;
    # HOST, which the subflow does not declare, from where its instance is (the tab).
    assert _inner(s1, "h").params["url"].to_json() == {"scope": "subflow", "param": "URL"}
    assert _inner(s1, "h2").params["url"].value == \
        "http://tab-host/{{ subflow.URL }}/{{ msg.id }}"
    assert _inner(s1, "cOld").params["input"].value == '{{ {"URL": subflow.URL} }}'
    i1 = report.flow.node("i1")
    assert {k: v.value for k, v in i1.params.items()} == {"URL": "tab-host"}
    assert "env 'KEY' is a credential, which Node-RED does not export" in i1.notes
    assert "env 'NOPE' (str 'x') is not a property of subflow 'my sub-flow'" in i1.notes
    assert report.table["subflow:my sub-flow"] == Counter(mapped=1, review=1)


def test_undeclared_env_read_where_the_instances_are():
    """A name the subflow does not declare: the instances' tabs' value when
    they agree, else review naming the difference."""
    def flows(second: str) -> list:
        return [
            {"id": "t1", "type": "tab", "label": "A", "env": [{"name": "W", "value": "one"}]},
            {"id": "t2", "type": "tab", "label": "B", "env": [{"name": "W", "value": second}]},
            _sf("S", "S"),
            {"id": "c", "type": "change", "z": "S", "x": 1, "y": 1, "wires": [[]],
             "rules": [{"t": "set", "p": "w", "pt": "msg", "to": "W", "tot": "env"}]},
            {"id": "i1", "type": "subflow:S", "z": "t1", "x": 1, "y": 1, "wires": [[]]},
            {"id": "i2", "type": "subflow:S", "z": "t2", "x": 1, "y": 1, "wires": [[]]}]

    same = _inner(_defs(import_node_red(json.dumps(flows("one"))))["S"], "c")
    assert same.params["rules"].value == [{"action": "set", "path": "w", "value": "one"}]
    assert "REVIEW" not in same.notes
    differ = _inner(_defs(import_node_red(json.dumps(flows("two"))))["S"], "c")
    assert "env 'W' (not a param of subflow 'S') differs between the places its instances " \
        "are in" in differ.notes


def test_straight_through_no_input_and_cross_scope_wires(tmp_path):
    """A subflow input wired straight to its output runs; a wire into an
    instance of a subflow with no input, or from a node into another
    subflow, is said in the notes (review), never dropped silently."""
    flows = [
        {"id": "t", "type": "tab", "label": "T"},
        _sf("P", "Pass", outs=[[{"id": "P", "port": 0}]]),
        _sf("N", "NoInput", ins=0, outs=[]),
        {"id": "x", "type": "debug", "z": "N", "x": 1, "y": 1, "wires": []},
        {"id": "s", "type": "inject", "z": "t", "x": 1, "y": 1, "payload": "ok",
         "payloadType": "str", "wires": [["p", "n", "x"]]},
        {"id": "p", "type": "subflow:P", "z": "t", "x": 2, "y": 1, "wires": [["d"]]},
        {"id": "n", "type": "subflow:N", "z": "t", "x": 2, "y": 2, "wires": []},
        {"id": "d", "type": "debug", "z": "t", "x": 3, "y": 1, "wires": []}]
    report = import_node_red(json.dumps(flows))
    assert_accounted(report, flows)
    assert {(w.source, w.target) for w in _defs(report)["Pass"].wires} == {
        (("in", "out"), ("out1", "in"))}
    s = report.flow.node("s")
    assert "output 1 went to 'n', a subflow with no input" in s.notes
    assert "output 1 went to x, on another tab's subflow or outside this subflow" in s.notes
    path = tmp_path / "p.flow.json"
    path.write_text(report.flow.dumps())
    r = subprocess.run(CLI + ["run", str(path), "--no-history"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["value"] for x in r.stdout.splitlines() if x.startswith("{")] == ["ok"]


def test_depth_past_the_bound_names_the_subflow(monkeypatch):
    def chain(n: int) -> list:
        out: list = [{"id": "t", "type": "tab"}]
        for i in range(n):
            out.append(_sf(f"S{i}", f"Level{i}"))
            if i + 1 < n:
                out.append({"id": f"i{i}", "type": f"subflow:S{i + 1}", "z": f"S{i}", "x": 1,
                            "y": 1, "wires": []})
        out.append({"id": "top", "type": "subflow:S0", "z": "t", "x": 1, "y": 1, "wires": []})
        return out

    report = import_node_red(json.dumps(chain(nr.MAX_SUBFLOW_DEPTH)))
    assert len(report.flow.subflows) == nr.MAX_SUBFLOW_DEPTH
    with pytest.raises(NodeRedImportError, match=r"subflows nested more than 16 deep \(at "
                                                 r"'Level16'\)"):
        import_node_red(json.dumps(chain(nr.MAX_SUBFLOW_DEPTH + 1)))
    # A cycle no instance on a tab reaches is refused all the same.
    flows = [_sf("A", "Alpha"), {"id": "a", "type": "subflow:A", "z": "A", "x": 1, "y": 1,
                                 "wires": []}]
    with pytest.raises(NodeRedImportError, match=r"subflow 'Alpha' contains itself "
                                                 r"\('Alpha' -> 'Alpha'\)"):
        import_node_red(json.dumps(flows))

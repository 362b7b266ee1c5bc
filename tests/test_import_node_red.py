"""The Node-RED importer (runtime.importers, ``switchboard import node-red``)
on real Node-RED exports: each test flow in tests/data/node-red is deployed
to a real Node-RED 4 (installed by npm into a cache folder, started once for
the module on a loopback port) through its admin API (POST /flows), read back
with GET /flows (that is the export), imported, validated and, where the
behaviour compares, run by both with the same requests."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from runtime.flow import validate_flow
from runtime.importers import NodeRedImportError, format_table, import_node_red, read_node_red
from runtime.importers import node_red as nr

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "node-red"
CACHE = Path(os.environ.get("SWITCHBOARD_NODE_RED_DIR",
                            Path.home() / ".cache" / "switchboard-tests" / "node-red"))
RED_JS = CACHE / "node_modules" / "node-red" / "red.js"
CLI = [sys.executable, "-m", "runtime.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"{what} ended early: {proc.communicate()[0][-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on {port}")


class NodeRed:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body=None, headers=None, base=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request((base or self.base) + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def deploy(self, flows: list) -> list:
        """POST /flows (a full deployment) and GET /flows back: the real export."""
        status, _, text = self.request("POST", "/flows", flows,
                                       {"Node-RED-Deployment-Type": "full"})
        assert status in (200, 204), text
        status, _, text = self.request("GET", "/flows")
        assert status == 200, text
        return json.loads(text)


@pytest.fixture(scope="module")
def node_red(tmp_path_factory):
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are needed to install and run Node-RED 4")
    if not RED_JS.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        if not (CACHE / "package.json").is_file():
            (CACHE / "package.json").write_text('{"name": "nr-cache", "private": true}\n')
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
                        "node-red@4"], cwd=CACHE, check=True, timeout=600)
    user_dir = tmp_path_factory.mktemp("node-red-user")
    port = _free_port()
    proc = subprocess.Popen([node, str(RED_JS), "--port", str(port), "--userDir", str(user_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        _wait_port(port, proc, "Node-RED")
        yield NodeRed(port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.communicate()


def _source(name: str) -> list:
    return json.loads((DATA / name).read_text())


def _import_export(node_red, tmp_path, name: str):
    export = node_red.deploy(_source(name))
    path = tmp_path / f"{name.removesuffix('.json')}.export.json"
    path.write_text(json.dumps(export))
    report = read_node_red(path)
    # No silent drop: every entry of the export is counted once in the table.
    assert report.total() == len(export) == report.entries
    assert_accounted(report, export)
    return export, report


def assert_accounted(report, export: list) -> None:
    """Every Node-RED entry id is somewhere: a node of the flow or of a
    subflow definition (which exists there), a definition, wires, or notes."""
    assert set(report.where) == {n["id"] for n in export}
    defs = {d.name: d for d in report.flow.subflows}
    for where in report.where.values():
        kind, _, rest = where.partition(" ")
        if kind in ("node", "placeholder"):
            assert report.flow.node(rest) is not None, where
        elif kind == "subflow":
            assert rest in defs, where
        elif where.startswith("subflows."):
            name, _, inner = where[len("subflows."):].partition("/")
            assert any(n.id == inner for n in defs[name].nodes), where
        else:
            assert where in ("wires", "notes", "flow"), where


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI's own main() in this process (the same code as the command,
    without a Python start per call)."""
    from runtime.cli import main

    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # a flow that does not load ends the command so
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _node(report, node_id):
    node = report.flow.node(node_id)
    assert node is not None, f"{node_id} not in {[n.id for n in report.flow.nodes]}"
    return node


def _params(node) -> dict:
    return {k: (v.value if v.scope == "custom" else v.to_json()) for k, v in node.params.items()}


class SwitchboardRun:
    """``switchboard run`` of an imported flow with its webhook on a free port."""

    def __init__(self, flow_path: Path, webhook_id: str) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            CLI + ["run", str(flow_path), "--set", f"{webhook_id}.port={self.port}",
                   "--timeout", "60", "--no-history"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _wait_port(self.port, self.proc, "switchboard run")
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return out


def test_route_flow_imports_and_answers_as_node_red_does(node_red, tmp_path):
    export, report = _import_export(node_red, tmp_path, "route.json")
    assert report.table["change"] == Counter(mapped=1)
    assert report.table["switch"] == Counter(mapped=1)
    ch = _params(_node(report, "ch1"))["rules"]
    assert ch == [
        {"action": "set", "path": "topic", "value": "greet"},
        {"action": "set", "path": "payload.tag", "value": "vip"},
        {"action": "set", "path": "limit", "value": 5},
        {"action": "set", "path": "flags", "value": {"a": [1, 2]}},
        {"action": "move", "from": "payload.name", "path": "who"},
        {"action": "copy", "from": "payload.n", "path": "count"},
        {"action": "delete", "path": "payload.drop"}]
    sw = _params(_node(report, "sw1"))
    assert sw["rules"] == [{"op": "gt", "value": 5}, {"op": "regex", "value": "(?i)^z"},
                           {"op": "else"}]
    assert sw["mode"] == "first"
    ports = {(w.source[0], w.source[1], w.target[0]) for w in report.flow.wires}
    assert {("sw1", "out0", "tp1"), ("sw1", "out1", "tp2"), ("sw1", "out2", "tp2")} <= ports
    assert validate_flow(report.flow) == [] or all(
        p.severity == "warning" for p in validate_flow(report.flow))
    flow_path = tmp_path / "route.flow.json"
    flow_path.write_text(report.flow.dumps())
    node_red.deploy(_source("route.json"))
    run = SwitchboardRun(flow_path, "in1")
    try:
        for body in ({"name": "Ada", "n": 7, "drop": 1}, {"name": "Bo", "n": 2},
                     {"name": "<Zed & co>", "n": "zz"}):
            red = node_red.request("POST", "/route", body)
            ours = node_red.request("POST", "/route", body, base=run.base)
            assert (ours[0], ours[2]) == (red[0], red[2]), body
        big = node_red.request("POST", "/route", {"name": "Ada", "n": 7}, base=run.base)
        assert big[2] == "Hello Ada, 7 is big (greet, vip, 2) <b>Ada</b>"
    finally:
        run.stop()


def test_subflow_env_link_junction_group_comment(node_red, tmp_path):
    export, report = _import_export(node_red, tmp_path, "subflow-env.json")
    flow = report.flow
    # The subflow is a definition; its env properties are its params.
    (greeter,) = flow.subflows
    assert (greeter.name, greeter.label, greeter.description) == (
        "Greeter", "Greeter", "Greets with env values.")
    assert [(p.name, p.type.value, p.default) for p in greeter.params] == [
        ("GREETING", "str", "Hello"), ("PUNCT", "str", "!"), ("TIMES", "int", 2)]
    inner = {n.id: n for n in greeter.nodes}
    assert [(n.type, _params(n)["name"]) for n in greeter.nodes
            if n.type.startswith("subflow.")] == [("subflow.in", "in"), ("subflow.out", "out1")]
    # The change rules read env: the params, given to a Python node as its input.
    ch = inner["sfc1"]
    assert ch.type == "core.python" and "REVIEW" not in ch.notes
    assert ch.params["input"].to_json() == {
        "scope": "expression", "value": '{{ {"GREETING": subflow.GREETING, "TIMES": subflow.TIMES} }}'}
    # {{env.PUNCT}}: the param, read by the Template node's text itself.
    tpl = inner["sft1"].params["template"]
    assert tpl.scope == "custom" and "{{ subflow.PUNCT | e }}" in tpl.value
    # The instance: a node of the definition's type, its env values the params.
    inst = _node(report, "inst1")
    assert inst.type == "subflow:Greeter" and inst.name == "French"
    assert _params(inst) == {"GREETING": "Bonjour"}
    assert report.table["subflow:Greeter"] == Counter(mapped=1)
    assert report.table["subflow"] == Counter(mapped=1)
    assert report.where["sfc1"] == "subflows.Greeter/sfc1" and report.where["sf1"] == \
        "subflow Greeter"
    # Link out -> link in -> instance -> junction: dissolved into wires, by port.
    wires = {(w.source, w.target) for w in flow.wires}
    assert wires == {(("in2", "out"), ("inst1", "in")), (("inst1", "out1"), ("out2", "in"))}
    assert {(w.source[0], w.target[0]) for w in greeter.wires} == {
        ("in", "sfc1"), ("sfc1", "sft1"), ("sft1", "out1")}
    for t in ("link in", "link out", "junction"):
        assert report.table[t] == Counter(mapped=1)
    # Group and comment: kept as notes, never dropped.
    assert "Node-RED group: Front door" in _node(report, "in2").notes
    assert "## Notes imported from Node-RED" in flow.description
    assert "Greets in French" in flow.description
    assert "PUNCT and TIMES keep the subflow's defaults" in flow.description
    assert report.table["comment"] == Counter(review=1)
    assert report.table["group"] == Counter(review=1)
    assert validate_flow(flow) == []
    flow_path = tmp_path / "greet.flow.json"
    flow_path.write_text(flow.dumps())
    node_red.deploy(_source("subflow-env.json"))
    run = SwitchboardRun(flow_path, "in2")
    try:
        red = node_red.request("POST", "/greet", {"name": "Ada"})
        ours = node_red.request("POST", "/greet", {"name": "Ada"}, base=run.base)
    finally:
        run.stop()
    assert red[2] == "Bonjour, Ada! x2"
    assert (ours[0], ours[2], ours[1].get("x-from")) == (red[0], red[2], red[1].get("x-from"))


def test_nested_subflows_cross_tab_links_split_join(node_red, tmp_path):
    export, report = _import_export(node_red, tmp_path, "nested.json")
    defs = {d.name: d for d in report.flow.subflows}
    assert set(defs) == {"Outer", "Inner"}
    # Outer's instance of Inner sets LABEL from env SUFFIX (type env): Outer's param.
    (n5,) = [n for n in defs["Outer"].nodes if n.id == "n5"]
    assert n5.type == "subflow:Inner"
    assert n5.params["LABEL"].to_json() == {"scope": "subflow", "param": "SUFFIX"}
    (tpl,) = [n for n in defs["Inner"].nodes if n.id == "tpl5"]
    assert tpl.params["template"].value == "{{ payload | e }}-{{ subflow.LABEL | e }}"
    assert _params(_node(report, "o5")) == {"SUFFIX": "b"}
    assert _node(report, "dbg6").disabled
    wires = {(w.source[0], w.target[0]) for w in report.flow.wires}
    assert ("sp5", "o5") in wires and ("o5", "jn5") in wires  # across tabs
    assert len({n.position[1] >= 0 for n in report.flow.nodes}) == 1
    assert validate_flow(report.flow) == []
    flow_path = tmp_path / "nested.flow.json"
    flow_path.write_text(report.flow.dumps())
    node_red.deploy(_source("nested.json"))
    run = SwitchboardRun(flow_path, "in5")
    try:
        for body in ({"items": [1, 2, 3]}, {"items": ["x"]}):
            red = node_red.request("POST", "/nest", body)
            ours = node_red.request("POST", "/nest", body, base=run.base)
            assert json.loads(ours[2]) == json.loads(red[2]), body
    finally:
        run.stop()
    assert json.loads(red[2]) == ["x-b"]


def test_csv_text_answers_as_node_red_does(node_red, tmp_path):
    export, report = _import_export(node_red, tmp_path, "csv.json")
    flow_path = tmp_path / "csv.flow.json"
    flow_path.write_text(report.flow.dumps())
    run = SwitchboardRun(flow_path, "inC")
    text = 'a,b\n1,x\n2.5,"y, z"\n'
    try:
        answers = []
        for base in (None, run.base):
            req = urllib.request.Request((base or node_red.base) + "/csv", data=text.encode(),
                                         method="POST", headers={"Content-Type": "text/plain"})
            with urllib.request.urlopen(req, timeout=20) as r:
                answers.append(json.loads(r.read()))
    finally:
        run.stop()
    assert answers[0] == answers[1] == [{"a": 1, "b": "x"}, {"a": 2.5, "b": "y, z"}]


def test_change_search_and_replace_answers_as_node_red_does(node_red, tmp_path):
    """A change node with search and replace rules becomes a Python node
    doing every rule in order (text, regex with $1, a number equal to from)."""
    export, report = _import_export(node_red, tmp_path, "replace.json")
    node = _node(report, "chR")
    assert node.type == "core.python" and "REVIEW" in node.notes
    flow_path = tmp_path / "replace.flow.json"
    flow_path.write_text(report.flow.dumps())
    run = SwitchboardRun(flow_path, "inR")
    body = {"text": "foo 12-34 foofoo", "code": 7, "items": ["a", "x"], "old": 1, "secret": "s"}
    try:
        red = node_red.request("POST", "/replace", body)
        ours = node_red.request("POST", "/replace", body, base=run.base)
    finally:
        run.stop()
    assert json.loads(red[2]) == {"text": "bar 34..12 barbar", "code": "seven",
                                  "items": ["a", {"b": True}], "new": 1}
    assert json.loads(ours[2]) == json.loads(red[2])


def test_json_node_answers_as_node_red_does(node_red, tmp_path):
    """The json node (both ways, pretty) became Python: the same text out."""
    export, report = _import_export(node_red, tmp_path, "json.json")
    assert report.table["json"] == Counter(mapped=2)
    flow_path = tmp_path / "json.flow.json"
    flow_path.write_text(report.flow.dumps())
    run = SwitchboardRun(flow_path, "inJ")
    body = {"a": [1, 2.5, "é"], "b": {"c": None}}
    try:
        red = node_red.request("POST", "/json", body)
        ours = node_red.request("POST", "/json", body, base=run.base)
    finally:
        run.stop()
    assert red[2] == '{\n    "text": "{\\"a\\":[1,2.5,\\"é\\"],\\"b\\":{\\"c\\":null}}"\n}'
    assert ours[2] == red[2]


def test_the_test_flows_cover_every_mapped_type():
    from runtime.importers.node_red_nodes import MAPPERS

    types = {n["type"] for f in DATA.glob("*.json") for n in json.loads(f.read_text())}
    expected = set(MAPPERS) | {"link in", "link out", "junction", "subflow", "group", "comment",
                               "tab", "ui_button"}
    assert expected <= types, expected - types
    assert any(t.startswith("subflow:") for t in types)


def test_sequence_file_csv_http_nodes(node_red, tmp_path):
    export, report = _import_export(node_red, tmp_path, "sequence.json")
    types = {n.id: n.type for n in report.flow.nodes}
    assert types == {"inj3": "core.inject", "sp3": "core.split", "dl3": "core.delay",
                     "rl3": "core.rate_limit", "jn3": "core.join", "dbg3": "core.debug",
                     "jn4": "core.join", "dbg4": "core.debug", "ct3": "core.catch",
                     "fi3": "files.read", "cv3": "core.python", "fo3": "files.write",
                     "hr3": "http.request", "tp3": "core.template", "cr3": "trigger.schedule"}
    p = {n.id: _params(n) for n in report.flow.nodes}
    assert p["inj3"]["payload_type"] == "JSON" and json.loads(p["inj3"]["payload"]) == [3, 1, 2]
    assert "msg.extra" in _node(report, "inj3").notes  # a property it cannot set: review
    assert p["cr3"] == {"cron": "00 08 * * 1,2,3,4,5", "payload": 42, "topic": "morning"}
    assert p["dl3"]["seconds"] == pytest.approx(0.02)
    assert (p["rl3"]["count"], p["rl3"]["interval_seconds"], p["rl3"]["mode"]) == (100, 120, "drop")
    assert p["jn4"]["mode"] == "count" and p["jn4"]["count"] == 2
    assert p["jn4"]["timeout_seconds"] == 3
    assert p["dbg4"]["path"] == "msg"
    assert p["ct3"]["nodes"] == ["dl3", "rl3"]
    group_catch = import_node_red(json.dumps([{"id": "k", "type": "catch", "scope": "group",
                                               "x": 1, "y": 1, "wires": []}]))
    assert group_catch.table["catch"] == Counter(review=1)
    assert "only in Node-RED" in group_catch.flow.node("k").notes
    assert p["fi3"] == {"path": "/tmp/in.txt", "format": "text"}
    assert p["fo3"]["mode"] == "overwrite" and p["fo3"]["content"] == {"scope": "message",
                                                                        "path": "payload"}
    assert p["hr3"]["url"] == {"scope": "expression",
                               "value": "http://127.0.0.1:9/items/{{ msg.payload.id }}"}
    assert p["hr3"]["response_as"] == "json" and p["hr3"]["fail_on_error_status"] is True
    assert p["hr3"]["headers"] == {"X-Team": "blue", "Accept": "application/json"}
    assert "Bearer abc" not in report.flow.dumps()
    assert "'Authorization' holds a secret" in _node(report, "hr3").notes
    assert "{% raw %}" in p["tp3"]["template"]
    problems = [q for q in validate_flow(report.flow) if q.severity == "error"]
    assert problems == []
    # The plain template renders its text as is, as Node-RED's does.
    from runtime.expressions import TextTemplate
    assert TextTemplate(p["tp3"]["template"]).render({}) == "raw {{not mustache}} {% neither %}"


def test_function_and_unknown_type_placeholder_blocks_run(node_red, tmp_path, capsys):
    export, report = _import_export(node_red, tmp_path, "function-unknown.json")
    fn = _node(report, "fn4")
    code = _params(fn)["code"]
    assert "# msg.payload = msg.payload * 2;" in code and "raise NotImplementedError" in code
    assert "REVIEW" in fn.notes and "output 2 went to pass4" in fn.notes
    assert _params(_node(report, "pass4"))["code"].startswith("return msg")
    btn = _node(report, "btn4")
    assert btn.type == "core.placeholder"
    assert _params(btn)["original"]["label"] == "big"
    assert report.table["ui_button"] == Counter(placeholder=1)
    assert report.table["function"] == Counter(mapped=1, review=1)
    # The CLI: writes the flow, prints the table; the run is refused (exit 2) naming the type.
    src = tmp_path / "leftovers.json"
    src.write_text(json.dumps(export))
    code, out, err = _cli(capsys, "import", "node-red", str(src))
    assert code == 0, err
    out_path = tmp_path / "leftovers.flow.json"
    assert out_path.is_file() and f"wrote {out_path}" in out
    assert "ui_button" in out and "total (6)" in out
    code, out, err = _cli(capsys, "import", "node-red", str(src))
    assert code == 2 and "--force" in err
    run = subprocess.run(CLI + ["run", str(out_path), "--no-history"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert ("placeholder for Node-RED node 'Big button' (type 'ui_button'): no Switchboard "
            "equivalent; replace it") in run.stderr
    assert "Traceback" not in run.stderr


def test_bench_flow_imports_and_runs(tmp_path, capsys):
    """shared/bench/nodered's flows (vendored): chains of function, change,
    junction and its own perf-* nodes."""
    report = read_node_red(DATA / "bench-flows.json")
    flows = json.loads((DATA / "bench-flows.json").read_text())
    assert report.total() == len(flows) == 61
    assert report.table["change"] == Counter(mapped=11)
    assert report.table["function"] == Counter(mapped=11)  # `return msg;` is translated
    assert report.table["junction"] == Counter(mapped=11)
    for t in ("perf-src", "perf-pass", "perf-sink"):
        assert set(report.table[t]) == {"placeholder"}
    # The junction chain of 10 is one wire from its source to its sink.
    assert ("junction-10-src", "junction-10-sink") in {(w.source[0], w.target[0])
                                                       for w in report.flow.wires}
    # Run: refused for its placeholders, each named; with them swapped for
    # core nodes (inject/debug) the chains run.
    path = tmp_path / "bench.flow.json"
    path.write_text(report.flow.dumps())
    code, _out, err = _cli(capsys, "validate", str(path))
    assert code == 2 and "(type 'perf-src')" in err
    data = json.loads(path.read_text())
    keep = []
    for n in data["nodes"]:
        t = n["params"]["original_type"]["value"] if n["type"] == "core.placeholder" else None
        if t == "perf-src":
            n.update(type="core.inject", params={"payload": {"scope": "custom", "value": "x"}})
        elif t == "perf-sink":
            n.update(type="core.debug", params={})
        elif t == "perf-pass":
            n.update(type="core.change", params={})
        if n["type"] == "core.debug":
            for w in data["wires"]:
                if w["from"][0] == n["id"]:
                    raise AssertionError("a sink has no outputs")
        keep.append(n)
    for w in data["wires"]:
        if w["from"][1].startswith("out") and w["from"][1] != "out":
            w["from"][1] = "out"
    path.write_text(json.dumps(data))
    r = subprocess.run(CLI + ["run", str(path), "--no-history"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len([x for x in r.stdout.splitlines() if x.startswith("{")]) == 8  # one per chain


# -- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "not JSON"),
    ('{"id": "x"}', "a JSON array of nodes; this is a JSON object"),
    ("[1]", "entry 1: not an object"),
    ('[{"id": "a", "type": "inject"}, {"id": "a", "type": "debug"}]', "id 'a' is used twice"),
    ('[{"id": "a"}]', "'type' must be text"),
    ('[{"id": "a", "type": "inject", "wires": "b"}]', "'wires' must be a list"),
    ('[{"id": "a", "type": "inject", "repeat": NaN}]', "NaN is not a JSON number"),
])
def test_bad_input_is_named(text, says):
    with pytest.raises(NodeRedImportError, match=".*") as info:
        import_node_red(text, file="f.json")
    assert says in str(info.value)


def test_bounds(monkeypatch):
    monkeypatch.setattr(nr, "MAX_ENTRIES", 3)
    with pytest.raises(NodeRedImportError, match="4 entries; at most 3"):
        import_node_red(json.dumps([{"id": str(i), "type": "inject"} for i in range(4)]))
    monkeypatch.setattr(nr, "MAX_STRING_CHARS", 10)
    with pytest.raises(NodeRedImportError, match="entry 1 .*a text of 11 characters"):
        import_node_red(json.dumps([{"id": "a", "type": "comment", "info": "x" * 11}]))
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(NodeRedImportError, match="nested more than"):
        import_node_red(json.dumps([{"id": "a", "type": "x", "v": deep}]))


def _cycle() -> list:
    return [
        {"id": "t", "type": "tab", "label": "T"},
        {"id": "A", "type": "subflow", "name": "Alpha", "in": [{"wires": [{"id": "b1"}]}],
         "out": []},
        {"id": "B", "type": "subflow", "name": "Beta", "in": [{"wires": [{"id": "a1"}]}],
         "out": []},
        {"id": "b1", "type": "subflow:B", "z": "A", "x": 10, "y": 10, "wires": []},
        {"id": "a1", "type": "subflow:A", "z": "B", "x": 10, "y": 10, "wires": []},
        {"id": "i", "type": "subflow:A", "z": "t", "x": 10, "y": 10, "wires": []}]


def test_subflow_cycle_and_cli_errors(tmp_path, capsys):
    with pytest.raises(NodeRedImportError, match="subflow 'Alpha' contains itself "
                                                 r"\('Alpha' -> 'Beta' -> 'Alpha'\)"):
        import_node_red(json.dumps(_cycle()))
    cases = {"cycle.json": json.dumps(_cycle()), "bad.json": "[{,", "obj.json": "{}"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    big = tmp_path / "big.json"
    big.write_text("[" + " " * 100 + "]")
    for name, says in (("cycle.json", "contains itself"), ("obj.json", "this is a JSON object"),
                       ("missing.json", "cannot read")):
        code, _out, err = _cli(capsys, "import", "node-red", str(tmp_path / name))
        assert code == 2, (name, err)
        assert says in err and name in err
    # And once as the command, as a user runs it: one line, no traceback.
    r = subprocess.run(CLI + ["import", "node-red", str(tmp_path / "bad.json")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("switchboard: ") and r.stderr.count("\n") == 1
    assert "bad.json: not JSON" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "cycle.flow.json").exists()


def test_too_big_file(tmp_path, monkeypatch):
    monkeypatch.setattr(nr, "MAX_FILE_BYTES", 50)
    big = tmp_path / "big.json"
    big.write_text("[" + " " * 100 + "]")
    with pytest.raises(NodeRedImportError, match="102 bytes; a Node-RED export may have at most"):
        read_node_red(big)


def test_unused_subflow_and_nested_subflows_are_not_dropped(tmp_path):
    flows = [
        {"id": "t", "type": "tab", "label": "T"},
        {"id": "IN", "type": "subflow", "name": "Inner", "in": [{"wires": [{"id": "c"}]}],
         "out": [{"wires": [{"id": "c", "port": 0}]}],
         "env": [{"name": "V", "type": "str", "value": "inner"}]},
        {"id": "c", "type": "change", "z": "IN", "x": 5, "y": 5, "wires": [[]],
         "rules": [{"t": "set", "p": "payload", "pt": "msg", "to": "V", "tot": "env"}]},
        {"id": "OUT", "type": "subflow", "name": "Outer", "in": [{"wires": [{"id": "n"}]}],
         "out": [{"wires": [{"id": "n", "port": 0}]}],
         "env": [{"name": "V", "type": "str", "value": "outer"}]},
        {"id": "n", "type": "subflow:IN", "z": "OUT", "x": 5, "y": 5, "wires": [[]],
         "env": [{"name": "V", "type": "env", "value": "V"}]},
        {"id": "LONE", "type": "subflow", "name": "Lonely", "in": [], "out": []},
        {"id": "l1", "type": "debug", "z": "LONE", "x": 5, "y": 5, "wires": []},
        {"id": "s", "type": "inject", "z": "t", "x": 1, "y": 1, "wires": [["o"]]},
        {"id": "o", "type": "subflow:OUT", "z": "t", "x": 100, "y": 1, "wires": [["d"]]},
        {"id": "d", "type": "debug", "z": "t", "x": 200, "y": 1, "wires": []},
        {"id": "cfg", "type": "mqtt-broker", "name": "broker", "broker": "localhost"},
    ]
    report = import_node_red(json.dumps(flows))
    assert report.total() == len(flows)
    assert_accounted(report, flows)
    defs = {d.name: d for d in report.flow.subflows}
    assert set(defs) == {"Inner", "Outer", "Lonely"}
    # Inner's change reads its own V; Outer's instance of Inner sets V from Outer's V.
    (c,) = [n for n in defs["Inner"].nodes if n.id == "c"]
    assert c.params["input"].value == '{{ {"V": subflow.V} }}'
    (n,) = [n for n in defs["Outer"].nodes if n.id == "n"]
    assert n.params["V"].to_json() == {"scope": "subflow", "param": "V"}
    assert report.flow.node("o").params == {}  # no env value: Outer's default
    wires = {(w.source, w.target) for w in report.flow.wires}
    assert wires == {(("s", "out"), ("o", "in")), (("o", "out1"), ("d", "in"))}
    # A subflow no instance uses: a definition all the same, nothing disabled.
    assert [(n.id, n.type, n.disabled) for n in defs["Lonely"].nodes] == [
        ("l1", "core.debug", False)]
    assert report.where["LONE"] == "subflow Lonely" and report.where["l1"] == \
        "subflows.Lonely/l1"
    assert report.table["subflow"] == Counter(mapped=3)
    assert report.table["mqtt-broker"] == Counter(review=1)
    assert "Config node 'mqtt-broker' 'broker'" in report.flow.description
    table = format_table(report)
    assert "total (11)" in table and "mqtt-broker" in table
    assert [p.message for p in validate_flow(report.flow)] == ["input is not connected"]  # l1
    path = tmp_path / "nest.flow.json"
    path.write_text(report.flow.dumps())
    r = subprocess.run(CLI + ["run", str(path), "--no-history"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["value"] == "outer"  # env -> env -> param


def test_delay_from_msg_and_template_env_run(tmp_path):
    """delay's "set by msg.delay" (milliseconds) becomes an expression; a
    template's {{env.X}} with no value in the flow is marked review."""
    flows = [
        {"id": "t", "type": "tab", "label": "D", "env": [{"name": "WHO", "type": "str",
                                                           "value": "tab"}]},
        {"id": "i", "type": "inject", "z": "t", "x": 10, "y": 10, "props": [{"p": "payload"}],
         "payload": "hi", "payloadType": "str", "wires": [["c"]]},
        {"id": "c", "type": "change", "z": "t", "x": 10, "y": 10, "wires": [["d"]],
         "rules": [{"t": "set", "p": "delay", "pt": "msg", "to": "30", "tot": "num"}]},
        {"id": "d", "type": "delay", "z": "t", "x": 50, "y": 10, "pauseType": "delayv",
         "timeout": "5", "timeoutUnits": "seconds", "wires": [["tp"]]},
        {"id": "tp", "type": "template", "z": "t", "x": 90, "y": 10, "syntax": "mustache",
         "template": "{{payload}} {{env.WHO}}{{env.HOME}}", "field": "payload",
         "fieldType": "msg", "output": "str", "wires": [["g"]]},
        {"id": "g", "type": "debug", "z": "t", "x": 120, "y": 10, "complete": "payload",
         "wires": []}]
    report = import_node_red(json.dumps(flows))
    assert report.flow.node("d").params["seconds"].to_json() == {
        "scope": "expression", "value": "{{ (msg.delay or 0) / 1000 }}"}
    tp = report.flow.node("tp")
    assert "REVIEW: {{env.HOME}}" in tp.notes and report.table["template"] == Counter(review=1)
    path = tmp_path / "d.flow.json"
    path.write_text(report.flow.dumps())
    r = subprocess.run(CLI + ["run", str(path), "--no-history"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["value"] == "hi tab"


_JSON = None


def _json_values():
    from hypothesis import strategies as st

    global _JSON
    if _JSON is None:
        leaf = st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False) \
            | st.text(max_size=8) | st.sampled_from(["", "1", "true", "msg", "env", "payload",
                                                     "t1", "sf1", "in1", "{{x}}", "${A}"])
        _JSON = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3)
                             | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                             max_leaves=6)
    return _JSON


def test_any_field_of_any_entry_may_be_wrong_never_a_crash():
    """Each field of the test exports replaced by arbitrary JSON: the import
    works or says what is wrong (NodeRedImportError), never anything else."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    sources = [_source(f.name) for f in sorted(DATA.glob("*.json")) if f.name != "bench-flows.json"]

    @settings(max_examples=100, deadline=None)
    @given(st.data())
    def check(data):
        flows = json.loads(json.dumps(data.draw(st.sampled_from(sources))))
        for _ in range(data.draw(st.integers(1, 4))):
            entry = data.draw(st.sampled_from(flows))
            key = data.draw(st.sampled_from(sorted(entry) + ["wires", "env", "rules", "links"]))
            entry[key] = data.draw(_json_values())
        try:
            report = import_node_red(json.dumps(flows))
        except NodeRedImportError:
            return
        assert report.total() == len(flows)
        assert_accounted(report, flows)
        report.flow.dumps()

    check()


def test_a_placeholder_keeps_no_secret():
    flows = [{"id": "m", "type": "mqtt out", "name": "pub", "topic": "a/b", "x": 1, "y": 1,
              "wires": [], "password": "hunter2", "credentials": {"user": "u", "pw": "s3cr3t"},
              "broker": {"apiKey": "k-123", "host": "h"}}]
    report = import_node_red(json.dumps(flows))
    text = report.flow.dumps()
    for secret in ("hunter2", "s3cr3t", "k-123"):
        assert secret not in text
    original = report.flow.node("m").params["original"].value
    assert original["topic"] == "a/b" and original["broker"]["host"] == "h"
    assert original["password"] == "(not imported: a secret)"


@pytest.mark.parametrize(("entry", "says"), [
    ({"type": "change", "action": "replace", "property": "payload", "from": "a", "to": "b"},
     "before 0.14"),
    ({"type": "switch", "property": "payload", "rules": [{"t": "else"}], "repair": True},
     "'recreate message sequences' is not mapped"),
    ({"type": "split", "addname": "key"}, "copying the key to msg.key"),
    ({"type": "delay", "pauseType": "rate", "rate": "2", "allowrate": True},
     "msg.rate overriding the rate"),
    ({"type": "csv", "sep": ",", "skip": "2"}, "skipping the first 2 lines"),
    ({"type": "switch", "property": "payload", "rules": [{"t": "btwn", "v": "1", "v2": "3"}]},
     "rule 1: 'btwn' is not mapped; the rule never matches"),
    ({"type": "http in", "url": "/user/:id", "method": "get"}, "route parameters"),
    ({"type": "file", "filename": "/tmp/x", "appendNewline": True}, "adds a newline"),
])
def test_settings_that_do_not_map_are_marked_review(entry, says):
    report = import_node_red(json.dumps([{"id": "n", "x": 1, "y": 1, "wires": [[]], **entry}]))
    node = report.flow.node("n")
    assert report.table[entry["type"]] == Counter(review=1), node.notes
    assert says in node.notes


def test_a_wire_to_a_node_not_in_the_file_is_said():
    flows = [{"id": "a", "type": "inject", "x": 1, "y": 1, "wires": [["gone", "b"]]},
             {"id": "b", "type": "debug", "x": 2, "y": 1, "wires": []}]
    report = import_node_red(json.dumps(flows))
    assert "output 1 went to 'gone', which is not in the file" in report.flow.node("a").notes
    assert report.table["inject"] == Counter(review=1)
    assert [(w.source[0], w.target[0]) for w in report.flow.wires] == [("a", "b")]

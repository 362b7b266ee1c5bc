"""Issue 12, the runtime's part: the inject's payload types, what `switchboard
run` prints (handled errors, --trace), and the hint after an unknown node type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.flow import FlowError, load_flow, parse_flow, validate_flow
from runtime.spec import ParamValue
from tests.servers.flows import fixed, run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"


def inject_flow(**params) -> dict:
    return {"format": "switchboard.flow/1", "name": "t",
            "nodes": [{"id": "start", "type": "core.inject", "name": "Start",
                       "params": {k: fixed(v) for k, v in params.items()}},
                      {"id": "show", "type": "core.debug", "name": "Show"}],
            "wires": [{"from": ["start", "out"], "to": ["show", "in"]}]}


async def payload_of(**params):
    result, rec, _ = await run(parse_flow(inject_flow(**params)))
    assert result.status == "ok", rec.of("node.error")
    [value] = rec.debug_values()
    return value


def problems_of(**params) -> list[str]:
    flow = parse_flow(inject_flow(**params))
    return [f"{p.field}: {p.message}" for p in validate_flow(flow) if p.severity == "error"]


# -- inject: payload types ----------------------------------------------------

async def test_a_new_inject_sends_plain_text_as_a_string():
    from nodes.core.inject_debug import Inject

    assert Inject.spec.param("payload_type").default == "string"
    assert await payload_of(payload="hello") == "hello"
    assert await payload_of(payload="42") == "42"  # a string, as the type says


@pytest.mark.parametrize("kind, text, expected", [
    ("number", "42", 42), ("number", " 3.5 ", 3.5), ("number", "-1e3", -1000.0),
    ("boolean", "true", True), ("boolean", "False", False),
    ("JSON", '{"name": "Ada", "tags": [1, 2]}', {"name": "Ada", "tags": [1, 2]}),
    ("JSON", "[]", []), ("JSON", "null", None), ("string", "  spaced  ", "  spaced  "),
])
async def test_typed_text_is_read_as_its_type(kind, text, expected):
    value = await payload_of(payload_type=kind, payload=text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("kind, text, why", [
    ("number", "4x2", "params.payload: number payload: '4x2' is not a number (e.g. 42 or 3.5)"),
    ("number", "NaN", "params.payload: number payload: 'NaN' is not a finite number"),
    ("boolean", "yes", "params.payload: boolean payload: 'yes' is not true or false"),
    ("JSON", "hello", "params.payload: JSON payload: not valid JSON (line 1 column 1: Expecting "
                      "value); to send text, choose the string type"),
    ("env variable", "not a name", "params.payload: env variable payload: 'not a name' is not "
                                   "the name of an environment variable (letters, digits, _)"),
])
def test_bad_typed_text_is_a_problem_before_the_run_naming_the_param(kind, text, why):
    assert problems_of(payload_type=kind, payload=text) == [why]


async def test_timestamp_sends_epoch_milliseconds_and_hides_the_payload():
    from nodes.core.inject_debug import Inject

    before = int(time.time() * 1000)
    value = await payload_of(payload_type="timestamp", payload="ignored")
    after = int(time.time() * 1000)
    assert isinstance(value, int) and before <= value <= after
    settings = {"payload_type": ParamValue(scope="custom", value="timestamp")}
    assert not Inject.spec.param_visible("payload", settings)
    assert Inject.spec.param_visible("payload", {})


async def test_env_variable_reads_the_named_variable(monkeypatch):
    monkeypatch.setenv("SB_TEST_GREETING", "hi from the environment")
    assert await payload_of(payload_type="env variable", payload="SB_TEST_GREETING") == \
        "hi from the environment"
    monkeypatch.delenv("SB_TEST_GREETING")
    result, rec, _ = await run(parse_flow(inject_flow(payload_type="env variable",
                                                      payload="SB_TEST_GREETING")))
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "payload: env variable payload: environment variable SB_TEST_GREETING is not set")


async def test_an_expression_may_give_the_type_and_the_text():
    data = inject_flow()
    data["nodes"][0]["params"] = {
        "payload_type": {"scope": "expression", "value": "{{ 'number' }}"},
        "payload": {"scope": "expression", "value": "{{ 40 + 2 }}"}}
    result, rec, _ = await run(parse_flow(data))
    assert result.status == "ok" and rec.debug_values() == [42]


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "MY_SECRET",
                                  "AWS_SECRET_ACCESS_KEY"])
def test_an_env_variable_that_looks_like_a_secret_is_refused(name, monkeypatch):
    monkeypatch.setenv(name, "sk-would-leak-into-every-message")
    [problem] = problems_of(payload_type="env variable", payload=name)
    assert problem.startswith(f"params.payload: env variable payload: {name} looks like it "
                              "holds a secret")


@pytest.mark.parametrize("old, expected", [
    ({"name": "World"}, {"name": "World"}), (7, 7), (2.5, 2.5), (True, True), (None, None),
    ([1, "a"], [1, "a"]), ("Tell john his order shipped", "Tell john his order shipped"),
])
async def test_old_flows_keep_their_payload_unchanged(old, expected):
    # Made before there was a payload type: a payload that is not text is JSON.
    assert problems_of(payload=old) == []
    value = await payload_of(payload=old)
    assert value == expected and type(value) is type(expected)


def test_the_examples_still_load_and_validate():
    for path in sorted(EXAMPLES.glob("*.flow.json")):
        errors = [p for p in validate_flow(load_flow(path)) if p.severity == "error"]
        assert errors == [], path


# -- switchboard run ------------------------------------------------------------

def sb(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=env)


def test_order_triage_prints_its_handled_error_as_handled_and_exits_0():
    r = sb("run", str(EXAMPLES / "order-triage.flow.json"), "--no-history")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines == [
        "handled: node 'Price with VAT' (bad) failed: template: can't multiply sequence by "
        "non-int of type 'float' (caught by 'Catch errors')",
        "switchboard: completed; 1 node error was handled by the flow"]
    values = [json.loads(line)["value"] for line in r.stdout.splitlines()]
    assert "Order A-1001 for Ada: 2 lines, small" in values


def test_an_uncaught_error_is_an_error_with_the_nodes_name_and_exits_1(tmp_path):
    path = tmp_path / "f.flow.json"
    data = inject_flow(payload_type="env variable", payload="SB_SURELY_NOT_SET")
    path.write_text(json.dumps(data))
    r = sb("run", str(path), "--no-history")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "error: node 'Start' (start): payload: env variable payload: environment variable "
        "SB_SURELY_NOT_SET is not set"]


def test_trace_prints_each_hop_with_names_port_and_payload():
    r = sb("run", str(EXAMPLES / "order-triage.flow.json"), "--trace", "--no-history")
    assert r.returncode == 0, r.stderr
    trace = [line for line in r.stderr.splitlines() if line.startswith("trace: ")]
    assert trace[0].startswith("trace: 'Incoming orders' -> 'One per order' [out] "
                               'topic="orders" payload=[{"id": "A-1001"')
    assert len(trace[0]) <= len("trace: ") + 200 and trace[0].endswith("…")
    assert ("trace: 'Large order?' -> 'Tag large' [out0] topic=\"orders\" payload={\"id\": "
            "\"A-1002\", \"customer\": \"Grace\", \"total\": 1250, \"lines\": 14}") in trace
    assert "trace: 'Summary line' -> 'Report' [out] topic=\"orders\" payload=\"Order A-1001 " \
           "for Ada: 2 lines, small\"" in trace
    assert len(trace) == 14  # every hop of the run, once
    without = sb("run", str(EXAMPLES / "order-triage.flow.json"), "--no-history")
    assert "trace:" not in without.stderr


# -- unknown node types -----------------------------------------------------------

def test_a_flow_of_a_package_that_is_not_installed_says_which_and_how(tmp_path):
    demo = EXAMPLES / "packages" / "switchboard-textkit" / "demo.flow.json"
    with pytest.raises(FlowError) as info:
        load_flow(demo)
    first = info.value.problems[0]
    assert (first.node, first.field) == ("count", "type")
    folder = EXAMPLES / "packages" / "switchboard-textkit"
    assert first.message == (
        "unknown node type 'textkit.word_count': the node package 'switchboard-textkit' in "
        f"{folder.relative_to(Path.cwd()) if folder.is_relative_to(Path.cwd()) else folder} "
        "provides it and is not installed; install it with: pip install -e "
        f"{folder.relative_to(Path.cwd()) if folder.is_relative_to(Path.cwd()) else folder}")
    r = sb("run", str(demo), cwd=tmp_path)  # from elsewhere: the full path
    assert r.returncode == 2
    assert f"install it with: pip install -e {folder}" in r.stderr


def test_a_plugin_folder_beside_the_flow_is_named_with_its_install_command(tmp_path):
    pkg = tmp_path / "packages" / "mytext"
    pkg.mkdir(parents=True)
    (pkg / "plugin.json").write_text(json.dumps({"name": "mytext", "command": ["node", "i.js"]}))
    (pkg / "i.js").write_text("sb.node('mytext.shout', { params: {} })\n")
    flow = tmp_path / "f.flow.json"
    flow.write_text(json.dumps({"format": "switchboard.flow/1",
                                "nodes": [{"id": "s", "type": "mytext.shout"}]}))
    with pytest.raises(FlowError) as info:
        load_flow(flow)
    assert info.value.problems[0].message == (
        "unknown node type 'mytext.shout': the node package 'mytext' in "
        f"{pkg} provides it and is not installed; install it with: switchboard package "
        f"install {pkg}")


def test_an_unknown_prefix_says_plainly_that_nothing_installed_has_it(tmp_path):
    flow = tmp_path / "f.flow.json"
    flow.write_text(json.dumps({"format": "switchboard.flow/1",
                                "nodes": [{"id": "x", "type": "nosuch.thing"}]}))
    with pytest.raises(FlowError) as info:
        load_flow(flow)
    message = info.value.problems[0].message
    assert message.startswith("unknown node type 'nosuch.thing': no installed node package "
                              "provides 'nosuch' node types. Install the one that does: pip "
                              "install it")
    assert "switchboard package install FOLDER" in message

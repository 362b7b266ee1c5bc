"""Flow tests (runtime.testing, ``switchboard test``): test files beside a
flow, their expectations judged on real runs, mocks, the command's output,
exit codes and JUnit XML."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runtime.testing import TestFileError, read_tests, run_file


def fixed(v):
    return {"scope": "custom", "value": v}


CORE_FLOW = {"format": "switchboard.flow/1", "name": "triage", "nodes": [
    {"id": "src", "type": "core.inject", "params": {"payload": fixed({"total": 1})}},
    {"id": "tag", "type": "core.change", "params": {"rules": fixed(
        [{"action": "set", "path": "payload.seen", "value": True}])}},
    {"id": "size", "type": "core.switch", "params": {
        "path": fixed("payload.total"),
        "rules": fixed([{"op": "gte", "value": 1000}, {"op": "else"}])}},
    {"id": "big", "type": "core.debug"},
    {"id": "small", "type": "core.debug"},
], "wires": [{"from": ["src", "out"], "to": ["tag", "in"]},
             {"from": ["tag", "out"], "to": ["size", "in"]},
             {"from": ["size", "out0"], "to": ["big", "in"]},
             {"from": ["size", "out1"], "to": ["small", "in"]}]}

SCRIPT = [{"tool_calls": [{"name": "think", "arguments": {"thought": "A-1"}}]},
          {"text": "Order A-1 is shipped."}]


def agent_flow():
    return {"format": "switchboard.flow/1", "name": "agent", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": fixed("scripted"), "script": fixed(SCRIPT)}},
        {"id": "show", "type": "core.debug"},
        {"id": "think", "type": "ai.think"},
    ], "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                 {"from": ["agent", "out"], "to": ["show", "in"]},
                 {"from": ["agent", "tools"], "to": ["think", "in"]}]}


def write(folder: Path, name: str, flow: dict, cases: list[dict]) -> Path:
    (folder / f"{name}.flow.json").write_text(json.dumps(flow))
    tests = folder / f"{name}.tests.json"
    tests.write_text(json.dumps({"format": "switchboard.tests/1", "cases": cases}))
    return tests


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime.cli", "test", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(Path.cwd())})


BIG = {"name": "big order", "input": {"node": "tag", "message": {"payload": {"total": 5000}}},
       "expect": [{"kind": "debug", "node": "big", "equals": {"total": 5000, "seen": True}},
                  {"kind": "output", "node": "size", "port": "out0",
                   "expr": "msg.payload.total >= 1000"},
                  {"kind": "end", "reason": "completed", "exit_code": 0},
                  {"kind": "no_node_error"}]}


def test_core_flow_passes_and_fails_with_a_diff(tmp_path):
    small_wrong = {"name": "small order", "input": {"node": "tag", "message": {
        "payload": {"total": 3}}}, "expect": [
        {"kind": "debug", "node": "small", "equals": {"total": 4, "seen": True}},
        {"kind": "debug", "node": "big", "contains": {"total": 3}}]}
    write(tmp_path, "triage", CORE_FLOW, [BIG])
    ok = cli("triage.flow.json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("PASS big order (")
    assert "1 passed, 0 failed" in ok.stdout

    write(tmp_path, "triage", CORE_FLOW, [BIG, small_wrong])
    bad = cli(str(tmp_path), cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    out = bad.stdout
    assert "PASS big order" in out and "FAIL small order" in out
    assert '  expected debug small: equals {"total": 4, "seen": true}' in out
    assert '-  "total": 4' in out and '+  "total": 3' in out
    assert "  expected debug big: contains" in out and "nothing was shown" in out
    assert "1 passed, 1 failed" in out
    # -k picks cases by name
    only = cli(str(tmp_path), "-k", "big", cwd=tmp_path)
    assert only.returncode == 0 and "small order" not in only.stdout


def test_a_mock_replaces_a_node_output(tmp_path):
    tests = write(tmp_path, "triage", CORE_FLOW, [{
        "name": "mocked", "input": {"node": "tag", "message": {"payload": {"total": 1}}},
        "mocks": {"tag": {"output": {"out": [{"payload": {"total": 2000, "mocked": True}}]}}},
        "expect": [{"kind": "debug", "node": "big", "contains": {"mocked": True}},
                   {"kind": "debug", "node": "small", "equals": {"total": 1}}]}])
    [r] = run_file(tests)
    assert not r.ok
    # the first holds (the mock's message went the big way), the second not
    assert len(r.failures) == 1 and r.failures[0][0].startswith("debug small")


def test_a_mock_error_ends_the_run_failed(tmp_path):
    tests = write(tmp_path, "triage", CORE_FLOW, [{
        "name": "broken", "input": {"node": "tag", "message": {"payload": {"total": 1}}},
        "mocks": {"size": {"error": "database down"}},
        "expect": [{"kind": "end", "reason": "failed", "exit_code": 1},
                   {"kind": "no_node_error"}]}])
    [r] = run_file(tests)
    assert [f[0] for f in r.failures] == ["no_node_error"]
    assert "node size: MockError: database down" in r.failures[0][1]


def test_tool_calls_and_answer_of_a_scripted_agent(tmp_path):
    good = {"name": "agent ok", "input": {"node": "agent", "message": {"payload": "where?"}},
            "expect": [{"kind": "tool_calls", "tools": ["think"], "count": 1,
                        "args": [{"equals": {"thought": "A-1"}}], "never": ["refund"]},
                       {"kind": "answer", "contains": "shipped"},
                       {"kind": "debug", "node": "show", "matches": "^Order A-1"}]}
    wrong = {"name": "agent wrong", "input": {"node": "agent", "message": {"payload": "x"}},
             "expect": [{"kind": "tool_calls", "tools": ["think", "refund"]},
                        {"kind": "tool_calls", "args": [{"contains": {"thought": "B-2"}}]},
                        {"kind": "tool_calls", "never": ["think"]},
                        {"kind": "answer", "equals": "Order A-1 is lost."}]}
    tests = write(tmp_path, "agent", agent_flow(), [good, wrong])
    ok, bad = run_file(tests)
    assert ok.ok, ok.failures
    assert [f[0] for f in bad.failures] == [
        'tool_calls: ["think", "refund"] (order exact)', "tool_calls: args of call 1 (think)",
        'tool_calls: never ["think"]', 'answer: equals "Order A-1 is lost."']
    assert bad.failures[3][1] == 'answer "Order A-1 is shipped."'
    assert '-  "refund"' in bad.failures[0][2]


def test_junit_xml_parses_back(tmp_path):
    write(tmp_path, "triage", CORE_FLOW, [BIG, {**BIG, "name": "wrong", "expect": [
        {"kind": "end", "reason": "failed"}]}])
    junit = tmp_path / "out.xml"
    r = cli("triage.tests.json", "--junit", str(junit), cwd=tmp_path)
    assert r.returncode == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["big order"].find("failure") is None
    assert cases["wrong"].find("failure").get("message") == "end: reason failed"


@pytest.mark.parametrize("case, field", [
    ({"name": "x", "input": {"node": "tag"}, "expect": [{"kind": "debug"}]},
     "cases[0] ('x').expect[0]: give at least one of equals"),
    ({"name": "x", "input": {"node": "tag"}, "expect": [{"kind": "bogus"}]},
     "cases[0] ('x').expect[0]"),
    ({"name": "x", "input": {}}, "cases[0] ('x').input.node: Field required"),
    ({"name": "x", "input": {"node": "tag"}, "timeout_seconds": 0},
     "cases[0] ('x').timeout_seconds"),
    ({"name": "x", "input": {"node": "tag"}, "mocks": {"tag": {}}},
     "cases[0] ('x').mocks.tag: give exactly one of output"),
])
def test_bad_test_file_names_the_field(tmp_path, case, field):
    tests = write(tmp_path, "triage", CORE_FLOW, [case])
    with pytest.raises(TestFileError) as err:
        read_tests(tests)
    assert str(err.value).startswith(f"{tests}: {field}")


def test_bad_test_file_exits_2_without_a_traceback(tmp_path):
    write(tmp_path, "triage", CORE_FLOW, [{"name": "x", "input": {"node": "nowhere"}}])
    r = cli("triage.flow.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "input.node: no node 'nowhere'" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "triage.tests.json").write_text('{"format": "switchboard.tests/1", "cases": 3}')
    r = cli("triage.flow.json", cwd=tmp_path)
    assert r.returncode == 2 and "triage.tests.json: cases: " in r.stderr
    assert "Traceback" not in r.stderr


def test_bounds(tmp_path, monkeypatch):
    import runtime.testing.reading as cases  # where read_tests reads the bounds

    tests = write(tmp_path, "triage", CORE_FLOW, [{"name": f"c{i}", "input": {"node": "tag"}}
                                                  for i in range(3)])
    monkeypatch.setattr(cases, "MAX_CASES", 2)
    with pytest.raises(TestFileError, match="cases: 3 cases; a test file holds at most 2"):
        read_tests(tests)
    monkeypatch.setattr(cases, "MAX_FILE_BYTES", 10)
    with pytest.raises(TestFileError, match="a test file may be at most"):
        read_tests(tests)

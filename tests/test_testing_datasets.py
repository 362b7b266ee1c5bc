"""Flow tests over datasets (runtime.testing.datasets): a case run once per
row of a JSONL or CSV file, its input and expectations filled from the row;
the dataset's bounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.testing import TestFileError, read_tests, run_file


def fixed(v):
    return {"scope": "custom", "value": v}


FLOW = {"format": "switchboard.flow/1", "name": "orders", "nodes": [
    {"id": "src", "type": "core.inject", "params": {"payload": fixed({"total": 1})}},
    {"id": "tag", "type": "core.change", "params": {"rules": fixed(
        [{"action": "set", "path": "payload.seen", "value": True}])}},
    {"id": "show", "type": "core.debug"},
], "wires": [{"from": ["src", "out"], "to": ["tag", "in"]},
             {"from": ["tag", "out"], "to": ["show", "in"]}]}


def write(folder: Path, cases: list[dict], flow: dict = FLOW) -> Path:
    (folder / "orders.flow.json").write_text(json.dumps(flow))
    tests = folder / "orders.tests.json"
    tests.write_text(json.dumps({"format": "switchboard.tests/1", "cases": cases}))
    return tests


def jsonl(folder: Path, rows: list, name: str = "rows.jsonl") -> str:
    (folder / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return name


# a row's total goes in; the debug node must show it with the row's "want"
ROW_CASE = {"name": "total", "dataset": "rows.jsonl",
            "input": {"node": "tag", "message": {"payload": {"total": "{{ row.total }}"}}},
            "expect": [{"kind": "debug", "node": "show",
                        "equals": {"total": "{{ row.want }}", "seen": True}}]}


def test_jsonl_rows_make_one_case_each_through_the_cli(tmp_path):
    jsonl(tmp_path, [{"id": "small", "total": 3, "want": 3},
                     {"id": "wrong", "total": 5, "want": 6}])
    write(tmp_path, [ROW_CASE])
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "test", "orders.flow.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "PASS total[small] (" in out.stdout
    assert "FAIL total[wrong] (" in out.stdout
    # the whole-string template kept the row's int: equals 6 (an int), got 5
    assert '  expected debug show: equals {"total": 6, "seen": true}' in out.stdout
    assert "1 passed, 1 failed (2 cases in 1 file)" in out.stdout


def test_csv_rows_are_strings_and_rows_without_id_are_numbered(tmp_path):
    (tmp_path / "people.csv").write_text("name,greeting\nAda,hi Ada\nBob,hello Bob\n")
    tests = write(tmp_path, [{
        "name": "greet", "dataset": "people.csv",
        "input": {"node": "tag", "message": {"payload": {
            "name": "{{ row.name }}", "greeting": "hi {{ row.name }}"}}},
        "expect": [{"kind": "debug", "expr": "msg.name ~ '!' == '{{ row.name }}!'"},
                   {"kind": "debug", "equals": {"name": "{{ row.name }}",
                                                "greeting": "{{ row.greeting }}", "seen": True}}]}])
    cases = read_tests(tests).cases
    assert [c.name for c in cases] == ["greet[0]", "greet[1]"]
    assert cases[1].input.message == {"payload": {"name": "Bob", "greeting": "hi Bob"}}
    ada, bob = run_file(tests)
    assert ada.ok, ada.failures
    # Bob's row expects "hello Bob"; the flow got "hi Bob"
    assert not bob.ok and [f[0] for f in bob.failures] == [
        'debug: equals {"name": "Bob", "greeting": "hello Bob", "seen": true}']
    # -k picks rows by their case name
    assert [r.name for r in run_file(tests, "greet[1]")] == ["greet[1]"]


def test_a_row_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"total": 1, "want": 1}\n\n[1, 2]\n')
    tests = write(tmp_path, [ROW_CASE])
    with pytest.raises(TestFileError, match=r"rows\.jsonl: line 3: a row must be an object, "
                                            r"not list"):
        read_tests(tests)
    (tmp_path / "rows.jsonl").write_text('{"total": 1\n')
    with pytest.raises(TestFileError, match=r"rows\.jsonl: line 1: not JSON"):
        read_tests(tests)
    (tmp_path / "rows.jsonl").write_text("")
    with pytest.raises(TestFileError, match=r"rows\.jsonl: the dataset holds no row"):
        read_tests(tests)
    write(tmp_path, [dict(ROW_CASE, dataset="missing.jsonl")])
    with pytest.raises(TestFileError, match=r"missing\.jsonl: cannot be read"):
        read_tests(tests)
    write(tmp_path, [dict(ROW_CASE, dataset="rows.txt")])
    with pytest.raises(TestFileError, match=r"rows\.txt: a dataset is a \.jsonl or \.csv file"):
        read_tests(tests)


def test_a_csv_row_with_extra_fields_is_named(tmp_path):
    (tmp_path / "people.csv").write_text("name\nAda\nBob,extra\n")
    tests = write(tmp_path, [dict(ROW_CASE, dataset="people.csv")])
    with pytest.raises(TestFileError, match=r"people\.csv: line 3: more fields than the header"):
        read_tests(tests)


def test_too_many_rows_and_too_large_a_file(tmp_path, monkeypatch):
    from runtime.testing import datasets

    jsonl(tmp_path, [{"total": i, "want": i} for i in range(3)])
    tests = write(tmp_path, [ROW_CASE])
    assert len(read_tests(tests).cases) == 3
    monkeypatch.setattr(datasets, "MAX_ROWS", 2)
    with pytest.raises(TestFileError, match=r"rows\.jsonl: more than 2 rows; a dataset holds "
                                            r"at most 2"):
        read_tests(tests)
    monkeypatch.setattr(datasets, "MAX_DATASET_BYTES", 10)
    with pytest.raises(TestFileError, match=r"rows\.jsonl: .* MB; a dataset may be at most"):
        read_tests(tests)


def test_a_row_that_breaks_the_case_is_named(tmp_path):
    jsonl(tmp_path, [{"total": 1, "want": 1}, {"id": "odd", "total": 2, "want": 2,
                                               "node": ["not", "text"]}])
    tests = write(tmp_path, [dict(ROW_CASE, input={"node": "{{ row.node }}"})])
    with pytest.raises(TestFileError, match=r"case 'total\[0\]' \(.*rows\.jsonl row 1\): input: "
                                            r"'\{\{ row\.node \}\}': 'row' has no attribute 'node'"):
        read_tests(tests)
    write(tmp_path, [dict(ROW_CASE, input={"node": "{{ row.node if 'node' in row else 'tag' }}"})])
    with pytest.raises(TestFileError, match=r"case 'total\[odd\]' \(.*rows\.jsonl row 2\): "
                                            r"input\.node: "):
        read_tests(tests)
    write(tmp_path, [dict(ROW_CASE, input={"node": "{{ env.HOME }}{{ row.total }}"})])
    with pytest.raises(TestFileError, match=r"a dataset's template reads row, not env"):
        read_tests(tests)


# scorers (runtime.testing.scorers): the kind "score"

def test_scores_on_a_debug_value_show_on_the_case_line(tmp_path):
    schema = {"type": "object", "required": ["total", "seen"],
              "properties": {"total": {"type": "integer"}, "seen": {"const": True}}}
    write(tmp_path, [
        {"name": "shape", "input": {"node": "tag", "message": {"payload": {"total": 3}}},
         "expect": [{"kind": "score", "scorer": "json_schema", "on": "debug", "schema": schema},
                    {"kind": "score", "scorer": "mentions_all", "on": "debug", "node": "show",
                     "expected": ["TOTAL", "seen"]}]},
        {"name": "refund", "input": {"node": "tag", "message": {"payload": {"total": "x"}}},
         "expect": [{"kind": "score", "scorer": "json_schema", "on": "debug", "schema": schema},
                    {"kind": "score", "scorer": "mentions_all", "on": "debug",
                     "expected": ["total", "seen", "refund"], "threshold": 0.5}]}])
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "test", "orders.flow.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("PASS shape (") and \
        lines[0].endswith(" [json_schema 1.00, mentions_all 1.00]")
    assert lines[1].startswith("FAIL refund (") and \
        lines[1].endswith(" [json_schema 0.00, mentions_all 0.67]")
    assert "  expected score json_schema of debug >= 1" in out.stdout
    assert "  got      json_schema 0.00; at total: 'x' is not of type 'integer'" in out.stdout
    # 0.67 reaches its threshold 0.5: only the schema failed
    assert "score mentions_all" not in out.stdout


def agent_flow(text: str) -> dict:
    return {"format": "switchboard.flow/1", "name": "agent", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": fixed("scripted"), "script": fixed([{"text": text}])}},
        {"id": "show", "type": "core.debug"},
    ], "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                 {"from": ["agent", "out"], "to": ["show", "in"]}]}


def run_one(tmp_path: Path, text: str, expect: list[dict]):
    from runtime.testing import run_case

    tests = write(tmp_path, [{"name": "c", "input": {"node": "agent", "message": {
        "payload": "go"}}, "expect": expect}], agent_flow(text))
    return run_case(str(tmp_path / "orders.flow.json"), read_tests(tests).cases[0])


def test_similarity_and_json_schema_on_the_answer(tmp_path):
    r = run_one(tmp_path, "Order A-1 is shipped.", [
        {"kind": "score", "scorer": "similarity", "expected": "order a-1 has shipped"},
        {"kind": "score", "scorer": "similarity", "expected": "your refund is on its way",
         "threshold": 0.5},
        {"kind": "score", "scorer": "json_schema", "schema": {"type": "object"}}])
    # 4 of 5 words in the same order: 0.80, at the default threshold 0.8
    assert r.scores == ["similarity 0.80", "similarity 0.18", "json_schema 0.00"]
    assert [f[0] for f in r.failures] == ["score similarity of answer >= 0.5",
                                          "score json_schema of answer >= 1"]
    assert "not JSON" in r.failures[1][1]
    ok = run_one(tmp_path, '{"status": "shipped"}', [
        {"kind": "score", "scorer": "json_schema", "schema": {
            "type": "object", "properties": {"status": {"enum": ["shipped"]}}}},
        {"kind": "score", "scorer": "mentions_all", "on": "answer", "node": "agent",
         "expected": ["SHIPPED"]}])
    assert ok.ok and ok.scores == ["json_schema 1.00", "mentions_all 1.00"]


def test_no_answer_and_bad_scorer_fields_are_named(tmp_path):
    r = run_one(tmp_path, "hi", [{"kind": "score", "scorer": "mentions_all", "node": "other",
                                  "expected": ["hi"]}])
    assert r.failures == [("score mentions_all of answer other >= 1", "no agent answered", "")]
    for exp, said in [({"scorer": "similarity"}, "similarity needs 'expected', a text"),
                      ({"scorer": "mentions_all", "expected": [1]},
                       "mentions_all needs 'expected', a list of texts"),
                      ({"scorer": "json_schema", "schema": {"type": 5}},
                       "schema: not a valid JSON Schema"),
                      ({"scorer": "similarity", "expected": "x", "threshold": 2},
                       "threshold: Input should be less than or equal to 1")]:
        tests = write(tmp_path, [{"name": "c", "input": {"node": "tag"},
                                  "expect": [dict(exp, kind="score")]}])
        with pytest.raises(TestFileError) as err:
            read_tests(tests)
        assert "cases[0] ('c').expect[0]" in str(err.value) and said in str(err.value)

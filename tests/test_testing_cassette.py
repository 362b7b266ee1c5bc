"""LLM record and replay for flow tests (runtime.testing.cassette): an
agent flow talking to a real local OpenAI-compatible server is recorded
once, then replayed with the server stopped; a changed prompt fails naming
the turn and the change; no secret is written; --rerecord replaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.testing import TestFileError, run_file
from runtime.testing import cassette as cassette_mod
from tests.servers.llm import LlmServer, openai_reply

SECRET = "tok-Cassette-5ecret-must-not-leak"
INSTRUCTIONS = "You answer questions about orders."


def fixed(v):
    return {"scope": "custom", "value": v}


def agent_flow(base_url: str, instructions: str = INSTRUCTIONS) -> dict:
    return {"format": "switchboard.flow/1", "name": "orders", "nodes": [
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(base_url), "api_key_env": fixed("TEST_CASSETTE_KEY"),
            "instructions": fixed(instructions)}},
        {"id": "show", "type": "core.debug"},
        {"id": "think", "type": "ai.think"},
    ], "wires": [{"from": ["agent", "out"], "to": ["show", "in"]},
                 {"from": ["agent", "tools"], "to": ["think", "in"]}]}


CASE = {"name": "where is A-1", "input": {"node": "agent", "message": {
    "payload": f"Where is order A-1? My token is {SECRET}"}},
    "expect": [{"kind": "answer", "contains": "shipped"},
               {"kind": "tool_calls", "tools": ["think"]},
               {"kind": "no_node_error"}]}


def replies(answer: str = "Order A-1 is shipped.") -> list[dict]:
    return [openai_reply(tool_calls=[("think", {"thought": "look up A-1"})]),
            openai_reply(answer)]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("TEST_CASSETTE_KEY", SECRET)


def write(folder: Path, flow: dict) -> Path:
    (folder / "orders.flow.json").write_text(json.dumps(flow))
    tests = folder / "orders.tests.json"
    tests.write_text(json.dumps({"format": "switchboard.tests/1", "cases": [CASE]}))
    return tests


def record(tmp_path: Path) -> tuple[Path, str]:
    with LlmServer() as llm:
        llm.replies = replies()
        tests = write(tmp_path, agent_flow(llm.openai_url))
        [r] = run_file(tests, record="new")
        assert r.ok, r.failures
        assert len(llm.requests) == 2
        return tests, llm.openai_url


def test_record_then_replay_offline_and_no_secret_written(tmp_path):
    tests, _ = record(tmp_path)
    cassette = tmp_path / "orders.cassette.json"
    text = cassette.read_text()
    data = json.loads(text)
    assert data["format"] == "switchboard.cassette/1"
    turns = data["cases"]["where is A-1"]
    assert [t["key"].startswith("sha256:") for t in turns] == [True, True]
    assert turns[0]["request"]["system"].startswith(INSTRUCTIONS)
    assert turns[1]["reply"]["text"] == "Order A-1 is shipped."
    # The secret in the prompt is masked, the API key never there.
    assert SECRET not in text and SECRET[:8] not in text
    assert "My token is ***" in text

    # The server is stopped: the replay runs offline, and passes.
    [r] = run_file(tests)
    assert r.ok, r.failures
    # --record leaves a recorded case as it is (replayed, no server needed).
    [r] = run_file(tests, record="new")
    assert r.ok, r.failures
    assert json.loads(cassette.read_text()) == data


def test_changed_prompt_fails_naming_turn_and_diff(tmp_path):
    tests, url = record(tmp_path)
    (tmp_path / "orders.flow.json").write_text(json.dumps(
        agent_flow(url, "You answer questions about ordres, badly.")))
    [r] = run_file(tests)
    assert not r.ok
    what, happened, diff = r.failures[0]
    assert what == "LLM answers as recorded"
    assert happened.startswith("the conversation changed at turn 1")
    assert "--rerecord" in happened
    assert "-  \"system\": \"You answer questions about orders." in diff
    assert "+  \"system\": \"You answer questions about ordres, badly." in diff


def test_no_cassette_says_to_record_and_rerecord_replaces(tmp_path):
    with LlmServer() as llm:
        tests = write(tmp_path, agent_flow(llm.openai_url))
        [r] = run_file(tests)
        assert not r.ok and llm.requests == []
        assert "no LLM answers recorded for case 'where is A-1'" in r.failures[0][1]
        assert "switchboard test --record" in r.failures[0][1]
        assert not (tmp_path / "orders.cassette.json").exists()

        llm.replies = replies()
        [r] = run_file(tests, record="new")
        assert r.ok and len(llm.requests) == 2
        llm.replies = replies("Order A-1 is shipped, arriving Monday.")
        [r] = run_file(tests, record="all")
        assert r.ok and len(llm.requests) == 4
    data = json.loads((tmp_path / "orders.cassette.json").read_text())
    assert [t["reply"]["text"] for t in data["cases"]["where is A-1"]][-1] == \
        "Order A-1 is shipped, arriving Monday."
    [r] = run_file(tests)
    assert r.ok, r.failures


def test_cli_replays_and_bad_cassettes_are_named(tmp_path, monkeypatch):
    tests, _ = record(tmp_path)
    done = subprocess.run([sys.executable, "-m", "runtime.cli", "test", "orders.flow.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS where is A-1" in done.stdout

    with monkeypatch.context() as m:
        m.setattr(cassette_mod, "MAX_CASSETTE_BYTES", 100)
        with pytest.raises(TestFileError, match=r"orders.cassette.json: \d+ bytes, more than "
                                                r"a cassette may hold \(100\)"):
            run_file(tests)
    (tmp_path / "orders.cassette.json").write_text('{"format": "x"}')
    with pytest.raises(TestFileError, match="orders.cassette.json: not a cassette"):
        run_file(tests)

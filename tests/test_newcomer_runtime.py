"""Issue T3 2/10, the runtime's part: an empty prompt is an error before a
run (item 2), a refused call keeps its arguments as an object (item 10), and
a scripted run has no cost (item 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.flow import parse_flow, validate_flow
from tests.servers.flows import fixed, run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"


def ask_flow(inject: dict | None = None, agent: dict | None = None, **extra) -> dict:
    """inject -> agent (scripted) -> debug."""
    return {"format": "switchboard.flow/1", "name": "ask",
            "nodes": [{"id": "start", "type": "core.inject", "name": "Ask",
                       "params": {k: fixed(v) for k, v in (inject or {}).items()}, **extra},
                      {"id": "agent", "type": "ai.agent", "name": "Agent",
                       "params": {"provider": fixed("scripted"),
                                  "script": fixed([{"text": "ok: {prompt}"}]),
                                  **(agent or {})}},
                      {"id": "show", "type": "core.debug"}],
            "wires": [{"from": ["start", "out"], "to": ["agent", "in"]},
                      {"from": ["agent", "out"], "to": ["show", "in"]}]}


def errors(data: dict) -> list[tuple[str | None, str | None, str]]:
    return [(p.node, p.field, p.message) for p in validate_flow(parse_flow(data))
            if p.severity == "error"]


# -- item 2: an empty prompt ---------------------------------------------------------

@pytest.mark.parametrize("inject", [{}, {"payload": ""}, {"payload_type": "string"}])
def test_an_empty_inject_wired_into_an_agent_is_an_error_on_the_inject(inject):
    [(node, field, message)] = errors(ask_flow(inject))
    assert (node, field) == ("start", "params.payload")
    assert message.startswith("empty prompt: 'Agent' asks this payload as its prompt")


@pytest.mark.parametrize("inject, agent", [
    ({"payload": "What is 2 + 2?"}, {}),
    ({"payload_type": "timestamp"}, {}),
    ({"payload_type": "number", "payload": "4"}, {}),
    ({}, {"prompt": fixed("Say hello")}),  # the agent asks its own prompt
    ({}, {"prompt": {"scope": "message", "path": "topic"}}),
])
def test_a_prompt_that_is_there_is_no_error(inject, agent):
    assert errors(ask_flow(inject, agent)) == []


def test_a_disabled_inject_is_no_error():
    assert errors(ask_flow({}, disabled=True)) == []


async def test_the_engine_refuses_it_before_the_run_instead_of_failing_in_it():
    from runtime.flow import FlowError

    with pytest.raises(FlowError, match="node 'start', params.payload: empty prompt"):
        await run(parse_flow(ask_flow({})))
    result, rec, _ = await run(parse_flow(ask_flow({"payload": "hi"})))
    assert rec.debug_values() == ["ok: hi"]


def test_switchboard_validate_exits_2_on_an_empty_prompt(tmp_path, capsys):
    from runtime.cli import main

    path = tmp_path / "ask.flow.json"
    path.write_text(json.dumps(ask_flow({})), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main(["validate", str(path)])
    assert stop.value.code == 2
    out = capsys.readouterr()
    assert "node 'start', params.payload: empty prompt" in out.out + out.err
    path.write_text(json.dumps(ask_flow({"payload": "hi"})), encoding="utf-8")
    assert main(["validate", str(path)]) == 0

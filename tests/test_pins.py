"""Pinned data (runtime.pins): a pinned node sends its pin instead of
running, in runs that use pins; the flow file keeps pins, validation bounds
them, and ``switchboard run`` ignores them unless ``--use-pins``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.approval import AutoApprover, People
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import FlowError, load_flow, parse_flow, save_flow, validate_flow
from runtime.pins import MAX_FLOW_PIN_BYTES, MAX_PIN_BYTES, recorded_to_pin, shortened
from tests.runtime_fixtures import N, make_flow, run
from tests.servers.flows import AI_SCOPE, EchoTool, agent_flow, fixed, registry
from tests.servers.llm import LlmServer, openai_reply

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sk-test-pins-K3Y"


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", API_KEY)


def openai_agent(llm: LlmServer) -> dict:
    return {"provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
            "instructions": fixed("You answer.")}


def chat_requests(llm: LlmServer) -> list[dict]:
    return [r for r in llm.requests if r["kind"] == "openai"]


async def run_agent_flow(flow, *, use_pins: bool):
    events: list = []
    bus = EventBus()
    bus.subscribe(events.append)
    engine = Engine(flow, registry(), bus, use_pins=use_pins)
    engine.people = People(AutoApprover())  # type: ignore[attr-defined]
    result = await engine.run(timeout=30)
    return result, events, engine


def debug_of(events: list, node: str = "show") -> list:
    return [e.value for e in events if e.type == "debug" and e.node == node]


# -- a pinned node does not run -------------------------------------------------------


def python_chain(log: Path):
    """inject (3 messages) -> Python (appends a line to ``log`` per message) -> debug."""
    code = (f"with open({str(log)!r}, 'a') as f:\n    f.write('ran\\n')\n"
            "msg['payload'] = 'computed'\nreturn msg")
    return make_flow([N("src", "core.inject", payload="in", count=3),
                      N("py", "core.python", code=code),
                      N("show", "core.debug", path="msg")],
                     ["src->py", "py->show"])


async def test_a_pinned_python_node_does_not_run_and_its_pin_goes_on_counted(tmp_path):
    log = tmp_path / "ran.txt"
    flow = python_chain(log)
    flow.node("py").pin = {"out": [{"payload": "pinned", "topic": "t"}]}

    used = await run(flow, use_pins=True)
    assert used.result.status == "ok", used.of("node.error")
    assert used.engine.pinned == ["py"]
    assert not log.exists()  # the script never ran: no worker was even started
    shown = used.debug("show")
    assert [(m["payload"], m["topic"]) for m in shown] == [("pinned", "t")] * 3
    # Each is a message of its own, with a fresh id.
    assert len({m["_msgid"] for m in shown}) == 3
    counts = used.engine.stats().nodes["py"]
    assert (counts["in"], counts["out"], counts["errors"]) == (3, 3, 0)
    assert any(e.node == "py" and "pinned" in e.text for e in used.of("node.status"))

    # The same flow without pins runs the script for each message.
    real = await run(flow)
    assert real.result.status == "ok", real.of("node.error")
    assert real.engine.pinned == []
    assert [m["payload"] for m in real.debug("show")] == ["computed"] * 3
    assert log.read_text().splitlines() == ["ran"] * 3


async def test_several_pinned_messages_on_several_ports_and_private_keys_carried_over():
    keys = [{"action": "set", "path": "_http", "value": "req-1"},
            {"action": "set", "path": "_reply", "value": "incoming"}]
    flow = make_flow([N("src", "core.inject", payload=1), N("keys", "core.change", rules=keys),
                      N("sw", "test.returns"),
                      N("a", "core.debug", path="msg"), N("b", "core.debug", path="msg")],
                     ["src->keys", "keys->sw", "sw->a", "sw.other->b"])
    flow.node("sw").pin = {"out": [{"payload": "one"}, {"payload": "two"}],
                           "other": [{"payload": "else", "_reply": "own"}]}
    done = await run(flow, use_pins=True)
    assert done.result.status == "ok", done.of("node.error")
    a, b = done.debug("a"), done.debug("b")
    assert [m["payload"] for m in a] == ["one", "two"]
    assert [m["payload"] for m in b] == ["else"]
    assert done.engine.stats().nodes["sw"]["out"] == 3
    # A private key of the incoming message (a webhook's pending reply, a
    # conversation id) goes on with each pinned message, unless the pin sets it.
    assert [m["_http"] for m in a + b] == ["req-1"] * 3
    assert [m["_reply"] for m in a + b] == ["incoming", "incoming", "own"]


async def test_a_pinned_source_fires_once_with_its_pin_and_does_not_start():
    flow = make_flow([N("src", "core.inject", payload="real", count=5),
                      N("show", "core.debug", path="payload")], ["src->show"])
    flow.node("src").pin = {"out": [{"payload": "from the pin"}]}
    done = await run(flow, use_pins=True)
    assert done.result.status == "ok"
    assert done.debug("show") == ["from the pin"]
    assert (await run(flow)).debug("show") == ["real"] * 5


async def test_a_disabled_pinned_node_stays_disabled():
    flow = make_flow([N("src", "core.inject", payload=1), N("a", "test.inc"),
                      N("show", "core.debug", path="payload")], ["src->a", "a->show"])
    flow.node("a").pin = {"out": [{"payload": 9}]}
    flow.node("a").disabled = True
    done = await run(flow, use_pins=True)
    assert done.engine.pinned == [] and done.debug("show") == []


# -- agents and tools -------------------------------------------------------------------


async def test_a_pinned_agent_makes_no_llm_request(llm):
    llm.replies = [openai_reply("A real answer")]
    flow = agent_flow(openai_agent(llm), [], prompt="What is new?")
    flow.node("agent").pin = {"out": [{"payload": "The pinned answer"}]}

    result, events, engine = await run_agent_flow(flow, use_pins=True)
    assert result.status == "ok", [e for e in events if e.type == "node.error"]
    assert chat_requests(llm) == []  # checked at the server: nothing reached it
    assert [m["payload"] for m in debug_of(events)] == ["The pinned answer"]
    assert not [e for e in events if e.type.startswith("llm.")]

    # Without pins the same flow asks the LLM: the check above could fail.
    result, events, _ = await run_agent_flow(flow, use_pins=False)
    assert result.status == "ok", [e for e in events if e.type == "node.error"]
    assert len(chat_requests(llm)) == 1
    assert [m["payload"] for m in debug_of(events)] == ["A real answer"]


async def test_a_pinned_tool_node_answers_the_agents_tool_call(llm):
    EchoTool.calls.clear()
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "hi"})]), openai_reply("Done.")]
    echo = {"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE}}
    flow = agent_flow(openai_agent(llm), [echo], prompt="Echo hi")
    flow.node("echo").pin = {"out": [{"payload": "PINNED ECHO", "topic": "not an output"}]}

    result, events, _ = await run_agent_flow(flow, use_pins=True)
    assert result.status == "ok", [e for e in events if e.type == "node.error"]
    assert EchoTool.calls == []  # the tool's code never ran
    second = chat_requests(llm)[1]["body"]
    answer = next(m for m in second["messages"] if m["role"] == "tool")
    # The node's output 'echoed' is read where it is written (payload).
    assert json.loads(answer["content"]) == {"echoed": "PINNED ECHO"}
    assert [e.status for e in events if e.type == "tool.result"] == ["success"]


async def test_a_pin_recorded_from_a_tool_call_answers_with_its_tool_data(llm):
    EchoTool.calls.clear()
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "hi"})]), openai_reply("Done.")]
    echo = {"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE}}
    flow = agent_flow(openai_agent(llm), [echo], prompt="Echo hi")
    recorded = {"_msgid": "x.1", "payload": "Echo hi", "__message_type__": "tool_response",
                "__tool_caller_id__": "call_1", "__tool_status__": "success",
                "__tool_data__": {"echoed": "FROM A RUN"}}
    flow.node("echo").pin = {"out": [recorded_to_pin(recorded)]}
    assert flow.node("echo").pin == {"out": [{"payload": "Echo hi",
                                              "__tool_data__": {"echoed": "FROM A RUN"}}]}
    assert not [p for p in validate_flow(flow, registry()) if p.severity == "error"]

    result, events, _ = await run_agent_flow(flow, use_pins=True)
    assert result.status == "ok"
    assert EchoTool.calls == []
    answer = next(m for m in chat_requests(llm)[1]["body"]["messages"] if m["role"] == "tool")
    assert json.loads(answer["content"]) == {"echoed": "FROM A RUN"}


# -- the flow file -----------------------------------------------------------------------


def pinned_flow_data(pin) -> dict:
    return {"format": "switchboard.flow/1", "name": "p",
            "nodes": [{"id": "src", "type": "core.inject"},
                      {"id": "agent", "type": "ai.agent", "pin": pin},
                      {"id": "show", "type": "core.debug"}],
            "wires": [{"from": ["src", "out"], "to": ["agent", "in"]},
                      {"from": ["agent", "out"], "to": ["show", "in"]}]}


def test_pins_survive_save_and_load_and_a_flow_without_one_has_no_key(tmp_path):
    pin = {"out": [{"payload": "Pinned", "agent": {"turns": 1}}]}
    flow = parse_flow(pinned_flow_data(pin))
    path = tmp_path / "p.flow.json"
    save_flow(flow, path)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["nodes"][1]["pin"] == pin
    assert "pin" not in saved["nodes"][0]
    assert load_flow(path).node("agent").pin == pin


def errors_of(data: dict) -> list[str]:
    try:
        flow = parse_flow(data, file="p.flow.json")
    except FlowError as exc:
        return [str(p) for p in exc.problems]
    return [str(p) for p in validate_flow(flow, file="p.flow.json") if p.severity == "error"]


@pytest.mark.parametrize("pin, expected", [
    ({"nope": [{"payload": 1}]},
     "p.flow.json: node 'agent', pin.nope: unknown output port 'nope' (has: out, tools,"),
    ({"tools": [{"payload": 1}]},
     "p.flow.json: node 'agent', pin.tools: 'tools' carries no results of the node"),
    ({"on_end": [{"payload": 1}]},
     "p.flow.json: node 'agent', pin.on_end: 'on_end' carries no results of the node"),
    ({"out": []}, "p.flow.json: node 'agent', pin: the pin holds no message; unpin the node"),
    ({"out": [{"__tool_caller_id__": "c1"}]},
     "p.flow.json: node 'agent', pin.out[0]: '__tool_caller_id__' belongs to one tool call"),
    ({"out": [{"payload": i} for i in range(101)]},
     "p.flow.json: node 'agent', pin.out: 101 messages; a pin holds at most 100 per port"),
    ({"out": ["text"]}, "p.flow.json: node 'agent', pin.out[0]: must be a JSON object"),
    ({"out": {"payload": 1}}, "p.flow.json: node 'agent', pin.out: must be a JSON array"),
])
def test_a_bad_pin_is_refused_naming_the_node_and_field(pin, expected):
    found = errors_of(pinned_flow_data(pin))
    assert any(e.startswith(expected) for e in found), found


def test_an_oversized_pin_is_refused_naming_the_node_and_the_bound(tmp_path):
    big = {"out": [{"payload": "x" * MAX_PIN_BYTES}]}
    path = tmp_path / "big.flow.json"
    path.write_text(json.dumps(pinned_flow_data(big)), encoding="utf-8")
    with pytest.raises(FlowError) as caught:
        load_flow(path)
    text = str(caught.value)
    assert f"{path}: node 'agent', pin: the pin is 1.0 MB of JSON; a pin may be at most " \
           "1.0 MB" in text
    # Just under the bound is fine.
    ok = {"out": [{"payload": "x" * (MAX_PIN_BYTES - 100)}]}
    assert errors_of(pinned_flow_data(ok)) == []


def test_the_pins_of_a_flow_are_bounded_together():
    each = {"out": [{"payload": "x" * (MAX_PIN_BYTES - 100)}]}
    count = MAX_FLOW_PIN_BYTES // MAX_PIN_BYTES + 1
    data = {"format": "switchboard.flow/1", "name": "p",
            "nodes": [{"id": f"n{i}", "type": "core.change", "pin": each} for i in range(count)],
            "wires": []}
    found = errors_of(data)
    assert len(found) == 1, found
    assert found[0].startswith(f"p.flow.json: node 'n{count - 1}', pin: the flow's pins pass "
                               "8 MB of JSON with this one")


def test_a_recorded_message_that_was_shortened_is_told_apart():
    assert shortened({"payload": "x" * 10 + "…"})
    assert shortened({"payload": [1, 2, "… 5 more items"]})
    assert shortened({"payload": {"a": 1, "…": "3 more keys"}})
    assert not shortened({"payload": {"a": [1, "two"], "b": "full text"}})
    assert recorded_to_pin("just text") == {"payload": "just text"}


# -- switchboard run ---------------------------------------------------------------------


def sb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def test_switchboard_run_ignores_pins_unless_use_pins(tmp_path, llm, data_dir):
    llm.replies = lambda kind, body: openai_reply("A real answer")
    flow = agent_flow(openai_agent(llm), [], prompt="What is new?")
    flow.node("agent").name = "Writer"
    flow.node("agent").pin = {"out": [{"payload": "The pinned answer"}]}
    path = tmp_path / "pinned.flow.json"
    save_flow(flow, path)

    plain = sb("run", str(path), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert [json.loads(x)["value"]["payload"] for x in plain.stdout.splitlines()] == \
        ["A real answer"]
    assert len(chat_requests(llm)) == 1
    assert "switchboard: ignoring the pinned data of 1 node ('Writer'); they run " \
           "(--use-pins uses it)" in plain.stderr

    pinned = sb("run", str(path), "--use-pins", cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    assert [json.loads(x)["value"]["payload"] for x in pinned.stdout.splitlines()] == \
        ["The pinned answer"]
    assert len(chat_requests(llm)) == 1  # no new request
    assert "switchboard: using pinned data of 1 node (not run): 'Writer'" in pinned.stderr
    assert "Traceback" not in plain.stderr + pinned.stderr


def test_switchboard_validate_names_the_node_of_a_bad_pin(tmp_path):
    path = tmp_path / "bad.flow.json"
    path.write_text(json.dumps(pinned_flow_data({"out": [{"payload": "x" * MAX_PIN_BYTES}]})),
                    encoding="utf-8")
    for command in ("validate", "run"):
        r = sb(command, str(path), cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "node 'agent', pin: the pin is 1.0 MB of JSON" in r.stderr
        assert "Traceback" not in r.stderr


def test_no_flow_without_pins_pays_for_them():
    """A run that uses pins on a flow with none swaps nothing."""
    flow = make_flow([N("src", "core.inject", payload=1), N("a", "test.inc")], ["src->a"])
    done = asyncio.run(run(flow, use_pins=True))
    assert done.engine.pinned == []
    assert done.engine.nodes["a"].on_message == done.engine.nodes["a"].node.on_message


async def test_a_pinned_agent_used_as_a_tool_answers_like_an_agent():
    """Another agent's call of a pinned agent gets {"result": the pinned
    answer}, the shape a running agent answers with."""
    from tests.servers.flows import scripted

    child = {"id": "child", "type": "ai.agent", "name": "Helper",
             "params": scripted([{"text": "never asked"}])}
    parent = scripted([{"tool_calls": [{"name": "helper", "arguments": {"task": "t"}}]},
                       {"text": "{last_result}"}])
    flow = agent_flow(parent, [child])
    flow.node("child").pin = {"out": [{"payload": "The pinned report"}]}

    result, events, _ = await run_agent_flow(flow, use_pins=True)
    assert result.status == "ok", [e for e in events if e.type == "node.error"]
    [final] = debug_of(events)
    assert json.loads(final["payload"]) == {"result": "The pinned report"}
    assert not [e for e in events if e.type == "llm.request" and e.agent == "child"]

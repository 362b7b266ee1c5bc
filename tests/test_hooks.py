"""An agent's lifecycle hooks (runtime.agent.hooks): on_start, on_turn,
on_tool and on_end as ports whose flows are ordinary flows; blocking hooks
that rewrite, veto and stop; messages sent back into the conversation
(trigger_agent); hooks the flow's settings apply to all or named agents.

The LLM is the local OpenAI-compatible server (tests/servers/llm.py), driven
through the real ``openai`` SDK."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.ai import Agent
from nodes.ai.hooks import HookResult, TriggerAgent
from nodes.core.flow_control import Switch
from nodes.core.inject_debug import DebugNode, Inject
from nodes.core.transform import Change
from runtime.flow import FlowHook, parse_flow, validate_flow
from runtime.message import CONVERSATION_ID
from runtime.node import Node, node
from runtime.registry import Registry
from tests.servers.flows import EchoTool, fixed, run, scripted
from tests.servers.llm import LlmServer, openai_reply

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sk-test-h00ks-K3Y"


@node("test.gate", name="Gate", category="Test", outputs=())
class Gate(Node):
    """An async node that waits until the test opens it: a slow hook flow."""

    opened: asyncio.Event | None = None
    passed: list[str] = []

    async def on_message(self, msg):
        assert Gate.opened is not None
        await Gate.opened.wait()
        Gate.passed.append(msg["hook"]["port"])


def reg() -> Registry:
    return Registry([Inject, DebugNode, Agent, EchoTool, Switch, Change, HookResult,
                     TriggerAgent, Gate])


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", API_KEY)
    EchoTool.calls = []


def agent(llm: LlmServer, **extra) -> dict:
    params = {"provider": fixed("openai"), "model": fixed("gpt-test"),
              "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
              "instructions": fixed("You echo.")}
    params.update({k: fixed(v) for k, v in extra.items()})
    return params


ECHO = {"id": "echo", "type": "test.echo", "params": {"text": {"scope": "ai"}}}


def flow(agent_params: dict, nodes: list[dict], wires: list[tuple], *, tools=(ECHO,),
         settings: dict | None = None, prompt: str = "Echo things"):
    """ask -> agent -> show, the agent's tools, and ``nodes`` / ``wires``
    ((src, port, dst) or (src, port, dst, dport)) for the hook flows."""
    data = {
        "format": "switchboard.flow/1", "name": "hooks",
        "nodes": [{"id": "ask", "type": "core.inject", "params": {"payload": fixed(prompt)}},
                  {"id": "agent", "type": "ai.agent", "params": agent_params},
                  {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
                  *tools, *nodes],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]},
                  *({"from": ["agent", "tools"], "to": [t["id"], "in"]} for t in tools),
                  *({"from": [w[0], w[1]], "to": [w[2], w[3] if len(w) > 3 else "in"]}
                    for w in wires)],
    }
    if settings:
        data["settings"] = settings
    return parse_flow(data)


def debug(node_id: str, path: str = "msg") -> dict:
    return {"id": node_id, "type": "core.debug", "params": {"path": fixed(path)}}


def result_node(node_id: str, action: str, **params) -> dict:
    return {"id": node_id, "type": "ai.hook_result",
            "params": {"action": fixed(action), **{k: fixed(v) for k, v in params.items()}}}


def hook_values(rec, node_id: str = "hooks") -> list[dict]:
    return rec.debug_values(node_id)


# -- 1. the four ports -------------------------------------------------------------

async def test_each_hook_fires_with_its_data_in_order(llm):
    llm.replies = [
        openai_reply("Let me echo.", tool_calls=[("echo", {"text": "hi"}), ("echo", {"text": "yo"})],
                     usage=(100, 20)),
        openai_reply("Echoed HI and YO.", usage=(150, 10)),
    ]
    f = flow(agent(llm), [debug("hooks")],
             [("agent", port, "hooks") for port in ("on_start", "on_turn", "on_tool", "on_end")])
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")

    seen = hook_values(rec)
    assert [(m["hook"]["port"], m["hook"]["phase"]) for m in seen] == [
        ("on_start", ""), ("on_turn", ""), ("on_tool", "after"), ("on_tool", "after"),
        ("on_turn", ""), ("on_end", "")]
    start, turn1, tool1, tool2, turn2, end = seen
    conv = start["hook"]["conversation"]
    assert conv and all(m["hook"]["conversation"] == conv and m["hook"]["agent"] == "agent"
                        and m["hook"]["blocking"] is False for m in seen)
    assert start["payload"] == "Echo things" and start["hook"]["continued"] is False
    assert turn1["payload"] == "Let me echo." and turn1["hook"]["turn"] == 1
    assert [(c["name"], c["arguments"]) for c in turn1["hook"]["tool_calls"]] == [
        ("echo", '{"text": "hi"}'), ("echo", '{"text": "yo"}')]
    assert turn1["hook"]["usage"] == {"input_tokens": 100, "output_tokens": 20}
    # on_tool: the call's arguments and result, as the agent's tool_calls list them.
    assert tool1["payload"]["tool"] == "echo" and tool1["payload"]["args"] == {"text": "hi"}
    assert tool1["payload"]["status"] == "success"
    assert tool1["payload"]["data"] == {"echoed": "HI"}
    assert tool2["hook"]["args"] == {"text": "yo"} and tool2["hook"]["data"] == {"echoed": "YO"}
    assert tool1["hook"]["node"] == "echo" and tool1["hook"]["turn"] == 1
    assert turn2["payload"] == "Echoed HI and YO." and turn2["hook"]["tool_calls"] == []
    # on_end: the answer, usage and cost.
    assert end["payload"] == "Echoed HI and YO."
    assert end["hook"]["usage"] == {"input_tokens": 250, "output_tokens": 30}
    assert end["hook"]["turns"] == 2 and "cost_usd" in end["hook"]
    assert [c["status"] for c in end["hook"]["tool_calls"]] == ["success", "success"]

    # The agent's answer is as without hooks, and names its conversation.
    [out] = rec.debug_values("show")
    assert out["payload"] == "Echoed HI and YO." and out[CONVERSATION_ID] == conv
    fired = rec.of("hook.fired")
    assert [(e.hook, e.outcome) for e in fired] == [
        ("on_start", "sent"), ("on_turn", "sent"), ("on_tool", "sent"), ("on_tool", "sent"),
        ("on_turn", "sent"), ("on_end", "sent")]
    assert [c["text"] for c in EchoTool.calls] == ["hi", "yo"]


async def test_without_hooks_nothing_is_built_or_published(llm):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "hi"})]), openai_reply("done")]
    result, rec, engine = await run(flow(agent(llm), [], []), reg=reg())
    assert result.status == "ok"
    assert not rec.of("hook.fired")
    [out] = rec.debug_values("show")
    assert CONVERSATION_ID not in out and out["payload"] == "done"
    assert engine.nodes["agent"].node._hooks is None  # worked out once: nothing wired


async def test_a_hook_that_is_not_blocking_never_holds_the_agent_up(llm):
    """The hook flow waits until the agent's answer is out: were the agent
    waiting for it, the answer would never come and the run would time out."""
    llm.replies = [openai_reply("the answer")]
    Gate.opened, Gate.passed = asyncio.Event(), []

    def open_on_answer(engine):
        engine.bus.subscribe(lambda e: Gate.opened.set()
                             if e.type == "debug" and e.node == "show" else None)

    f = flow(agent(llm), [{"id": "gate", "type": "test.gate"}],
             [("agent", "on_start", "gate"), ("agent", "on_end", "gate")], tools=())
    result, rec, _ = await run(f, reg=reg(), engine_hook=open_on_answer, timeout=20)
    assert result.status == "ok" and result.reason == "completed"
    # The run waited for the hook flow to finish, after the answer was out.
    assert sorted(Gate.passed) == ["on_end", "on_start"]
    assert rec.debug_values("show")[0]["payload"] == "the answer"


# -- 2. blocking hooks ---------------------------------------------------------------

def veto_flow(llm, **extra):
    """on_tool (blocking) -> switch on the text argument: 'bad' is vetoed,
    anything else goes on."""
    nodes = [
        {"id": "check", "type": "core.switch",
         "params": {"path": fixed("hook.args.text"),
                    "rules": fixed([{"op": "eq", "value": "bad"}, {"op": "else"}])}},
        result_node("veto", "veto", reason="no bad words, ever"),
        result_node("fine", "continue"),
        debug("hooks"),
    ]
    wires = [("agent", "on_tool", "check"), ("check", "out0", "veto"),
             ("check", "out1", "fine"), ("agent", "on_tool", "hooks")]
    return flow(agent(llm, block_on_tool=True, **extra), nodes, wires)


async def test_a_blocking_on_tool_hook_vetoes_a_call_before_it_runs(llm):
    llm.replies = [
        openai_reply(tool_calls=[("echo", {"text": "good"}), ("echo", {"text": "bad"})]),
        openai_reply("One echo went through."),
    ]
    result, rec, _ = await run(veto_flow(llm), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert [c["text"] for c in EchoTool.calls] == ["good"]  # the vetoed call never ran

    # The LLM read the veto's reason as the call's error.
    tool_msgs = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_msgs[0]["content"]) == {"echoed": "GOOD"}
    assert json.loads(tool_msgs[1]["content"]) == {
        "error": "refused: vetoed by a hook (node 'veto'): no bad words, ever"}
    out = rec.debug_values("show")[0]
    assert [c["status"] for c in out["agent"]["tool_calls"]] == ["success", "refused"]

    # A blocking on_tool fires before each call, with its arguments (no result yet).
    seen = hook_values(rec)
    assert [(m["hook"]["phase"], m["hook"]["blocking"], m["payload"]) for m in seen] == [
        ("before", True, {"tool": "echo", "args": {"text": "good"}}),
        ("before", True, {"tool": "echo", "args": {"text": "bad"}})]
    fired = [(e.hook, e.phase, e.blocking, e.outcome) for e in rec.of("hook.fired")]
    assert fired == [("on_tool", "before", True, "continue"),
                     ("on_tool", "before", True, "vetoed")]
    assert rec.of("hook.fired")[1].reason == "no bad words, ever"
    # Both calls are in the run's events, the vetoed one refused.
    assert [(e.tool, e.status) for e in rec.of("tool.result")] == [("echo", "success"),
                                                                   ("echo", "refused")]


async def test_a_blocking_on_turn_hook_rewrites_the_message(llm):
    llm.replies = [openai_reply("The password is hunter2.")]
    nodes = [{"id": "scrub", "type": "core.change",
              "params": {"rules": fixed([{"action": "set", "path": "payload",
                                          "value": "[withheld by policy]"}])}},
             result_node("rewrite", "replace")]
    f = flow(agent(llm, block_on_turn=True), nodes,
             [("agent", "on_turn", "scrub"), ("scrub", "out", "rewrite")], tools=())
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values("show")[0]["payload"] == "[withheld by policy]"
    [fired] = rec.of("hook.fired")
    assert (fired.hook, fired.outcome, fired.blocking) == ("on_turn", "replaced", True)


async def test_a_blocking_on_turn_veto_refuses_every_call_of_the_message(llm):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "a"}), ("echo", {"text": "b"})]),
                   openai_reply("Nothing went through.")]
    f = flow(agent(llm, block_on_turn=True), [result_node("no", "veto", reason="read-only day")],
             [("agent", "on_turn", "no")])
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert EchoTool.calls == []
    tool_msgs = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert all("read-only day" in m["content"] for m in tool_msgs) and len(tool_msgs) == 2


async def test_a_blocking_hook_can_stop_the_agent_and_the_run_says_why(llm):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "a"})])]
    f = flow(agent(llm, block_on_tool=True),
             [result_node("halt", "stop", reason="the budget office said no")],
             [("agent", "on_tool", "halt")])
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "error"
    [err] = rec.of("node.error")
    assert err.node == "agent"
    assert err.message == ("stopped by the on_tool hook (node 'halt'): the budget office "
                           "said no")
    assert EchoTool.calls == [] and not rec.debug_values("show")
    assert rec.of("hook.fired")[0].outcome == "stopped"


async def test_a_blocking_hook_that_never_answers_times_out_and_the_agent_goes_on(llm):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "a"})]), openai_reply("done")]
    # The flow answers only for a text it never gets: this message ends at the switch.
    nodes = [{"id": "only", "type": "core.switch",
              "params": {"path": fixed("hook.args.text"),
                         "rules": fixed([{"op": "eq", "value": "never"}])}},
             result_node("fine", "continue")]
    f = flow(agent(llm, block_on_tool=True, hook_timeout_seconds=0.2), nodes,
             [("agent", "on_tool", "only"), ("only", "out0", "fine")])
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert [c["text"] for c in EchoTool.calls] == ["a"]
    [fired] = rec.of("hook.fired")
    assert (fired.outcome, fired.blocking) == ("timeout", True) and fired.ms >= 150
    assert any("hook_timeout_seconds" in e.text and e.level == "warning" for e in rec.of("log"))
    assert rec.debug_values("show")[0]["payload"] == "done"


# -- trigger_agent: a new user turn in the same conversation ------------------------

def one_more_turn() -> tuple[list[dict], list[tuple]]:
    """on_end -> (only after the first answer) -> "and one more thing": the
    nodes and wires; what takes the turn to the agent is the caller's."""
    nodes = [{"id": "once", "type": "core.switch",
              "params": {"path": fixed("payload"),
                         "rules": fixed([{"op": "eq", "value": "first answer"}])}},
             {"id": "more", "type": "core.change",
              "params": {"rules": fixed([{"action": "set", "path": "payload",
                                          "value": "and one more thing"}])}}]
    return nodes, [("agent", "on_end", "once"), ("once", "out0", "more")]


@pytest.mark.parametrize("via", ["wire", "node"])
async def test_a_hook_flow_sends_a_new_turn_into_the_same_conversation(llm, via):
    """on_end -> (only after the first answer) -> "and one more thing" ->
    the agent's in (a wire back, or the Trigger Agent node)."""
    llm.replies = [openai_reply("first answer"), openai_reply("second answer")]
    nodes, wires = one_more_turn()
    if via == "wire":
        wires.append(("more", "out", "agent"))
    else:
        nodes.append({"id": "trigger", "type": "ai.trigger_agent"})
        wires.append(("more", "out", "trigger"))
    f = flow(agent(llm), nodes, wires, tools=(), prompt="first question")
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")

    outs = rec.debug_values("show")
    assert [o["payload"] for o in outs] == ["first answer", "second answer"]
    assert outs[0][CONVERSATION_ID] == outs[1][CONVERSATION_ID]
    second = llm.requests[1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in second] == [
        ("system", "You echo."), ("user", "first question"), ("assistant", "first answer"),
        ("user", "and one more thing")]


def turn_sent_in_flow(llm: LlmServer):
    """on_turn sends "please also say hi" back in during the agent's first
    turn (a call of echo); the LLM answers "final" once it has that turn,
    "partial" before."""
    def reply(kind, body):
        said = [m.get("content") for m in body["messages"] if m["role"] == "user"]
        if len(body["messages"]) == 2:
            return openai_reply(tool_calls=[("echo", {"text": "x"})])
        return openai_reply("final" if "please also say hi" in said else "partial")

    llm.replies = reply
    nodes = [{"id": "first", "type": "core.switch",
              "params": {"path": fixed("hook.turn"), "rules": fixed([{"op": "eq", "value": 1}])}},
             {"id": "more", "type": "core.change",
              "params": {"rules": fixed([{"action": "set", "path": "payload",
                                          "value": "please also say hi"}])}}]
    return flow(agent(llm), nodes,
                [("agent", "on_turn", "first"), ("first", "out0", "more"), ("more", "out", "agent")])


async def test_a_turn_sent_in_while_the_agent_works_joins_that_work(llm):
    """on_turn (not blocking) sends a turn back in during the agent's first
    turn: it is added to the work going on, and one answer comes out."""
    result, rec, _ = await run(turn_sent_in_flow(llm), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    [out] = rec.debug_values("show")
    assert out["payload"] == "final"
    last = llm.requests[-1]["body"]["messages"]
    assert ("user", "please also say hi") in [(m["role"], m.get("content")) for m in last]


async def test_hook_turns_into_one_conversation_are_bounded(llm):
    """A hook flow that answers every answer would never end: the agent
    refuses past MAX_HOOK_TURNS."""
    from runtime.agent.hooks import MAX_HOOK_TURNS

    llm.replies = lambda kind, body: openai_reply("again")
    f = flow(agent(llm), [], [("agent", "on_end", "agent")], tools=())
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "error"
    [err] = rec.of("node.error")
    assert f"already got {MAX_HOOK_TURNS} messages from hook flows" in err.message
    assert len(rec.debug_values("show")) == MAX_HOOK_TURNS + 1


# -- 3. flow-level hooks ---------------------------------------------------------------

def two_agents(settings: dict) -> object:
    script = [{"text": "answer"}]
    data = {
        "format": "switchboard.flow/1", "name": "flow hooks", "settings": settings,
        "nodes": [{"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
                  {"id": "a", "type": "ai.agent", "params": scripted(script)},
                  {"id": "b", "type": "ai.agent", "params": scripted(script)},
                  debug("all_ends"), debug("b_starts")],
        "wires": [{"from": ["ask", "out"], "to": ["a", "in"]},
                  {"from": ["ask", "out"], "to": ["b", "in"]}],
    }
    return parse_flow(data)


async def test_flow_hooks_apply_to_every_agent_or_the_named_ones():
    f = two_agents({"hooks": [{"port": "on_end", "node": "all_ends"},
                              {"port": "on_start", "node": "b_starts", "agents": ["b"]}]})
    assert [p for p in validate_flow(f, reg()) if p.severity == "error"] == []
    # Fed by the agents: not "input is not connected".
    assert not [p for p in validate_flow(f, reg()) if p.node in ("all_ends", "b_starts")]
    result, rec, _ = await run(f, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert sorted(m["hook"]["agent"] for m in rec.debug_values("all_ends")) == ["a", "b"]
    assert [m["hook"]["agent"] for m in rec.debug_values("b_starts")] == ["b"]
    assert rec.debug_values("b_starts")[0]["payload"] == "go"


async def test_a_blocking_flow_hook_vetoes_for_every_agent():
    data = {
        "format": "switchboard.flow/1", "name": "guard",
        "settings": {"hooks": [{"port": "on_tool", "node": "guard", "blocking": True},
                               {"port": "on_tool", "node": "log"}]},
        "nodes": [{"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
                  {"id": "a", "type": "ai.agent", "params": scripted(
                      [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
                       {"text": "done: {last_result}"}])},
                  ECHO, result_node("guard", "veto", reason="tools are off today"),
                  debug("log"), debug("show", "payload")],
        "wires": [{"from": ["ask", "out"], "to": ["a", "in"]},
                  {"from": ["a", "tools"], "to": ["echo", "in"]},
                  {"from": ["a", "out"], "to": ["show", "in"]}],
    }
    result, rec, _ = await run(parse_flow(data), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    assert EchoTool.calls == []
    assert "tools are off today" in rec.debug_values("show")[0]
    # The non-blocking flow hook logged the vetoed call after it, with its result.
    [logged] = rec.debug_values("log")
    assert logged["hook"]["phase"] == "after" and logged["payload"]["status"] == "refused"


def test_flow_hooks_that_name_what_is_not_there_are_refused_clearly():
    f = two_agents({"hooks": [{"port": "on_tool", "node": "nowhere"},
                              {"port": "on_end", "node": "all_ends", "agents": ["a", "ghost"]},
                              {"port": "on_end", "node": "all_ends", "agents": ["ask"]},
                              {"port": "on_start", "node": "ask"}]})
    problems = [(p.field, p.message) for p in validate_flow(f, reg(), file="f.flow.json")
                if p.severity == "error"]
    assert problems == [
        ("settings.hooks[0].node", "on_tool hook: no node 'nowhere' in this flow (the first "
                                   "node of the hook flow)"),
        ("settings.hooks[1].agents", "on_end hook: no agent 'ghost' in this flow (agents: a, b)"),
        ("settings.hooks[2].agents", "on_end hook: node 'ask' (core.inject) is not an agent "
                                     "and has no hooks"),
        ("settings.hooks[3].node", "on_start hook: node 'ask' (core.inject) has no input to "
                                   "take the hook's messages"),
    ]


def test_a_bad_hooks_setting_is_a_clear_load_error(tmp_path):
    from runtime.flow import FlowError, load_flow

    path = tmp_path / "f.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "settings": {
        "hooks": [{"port": "on_lunch", "node": "x"}]}}), encoding="utf-8")
    with pytest.raises(FlowError) as info:
        load_flow(path, reg())
    text = str(info.value)
    assert "f.flow.json: settings.hooks[0].port: " in text and "'on_tool'" in text


def test_a_blocking_hook_that_reaches_no_hook_result_is_warned_about():
    f = two_agents({"hooks": [{"port": "on_tool", "node": "all_ends", "blocking": True}]})
    [warning] = [p for p in validate_flow(f, reg()) if "hook" in p.message]
    assert warning.field == "settings.hooks[0]"
    assert "reaches no AI Hook Result" in warning.message
    g = flow({"provider": fixed("scripted"), "block_on_end": fixed(True)}, [debug("d")],
             [("agent", "on_end", "d")], tools=())
    [warning] = [p for p in validate_flow(g, reg()) if "hook" in p.message]
    assert (warning.node, warning.field) == ("agent", "params.block_on_end")
    assert warning.severity == "warning"


def test_hook_ports_are_outputs_of_kind_hook():
    ports = {p.name: p.kind for p in Agent.spec.outputs}
    assert ports == {"out": "out", "tools": "tools", "on_start": "hook", "on_turn": "hook",
                     "on_tool": "hook", "on_end": "hook"}


def test_the_flow_in_docs_hooks_md_runs_as_it_says(tmp_path):
    """docs/hooks.md's first complete flow, through the CLI: it prints the
    line the page shows."""
    text = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    flow_text = next(b for b in blocks if '"format"' in b)
    shown = re.search(r"prints `(\{.*?\})`", text.replace("\n", " "), re.S).group(1)
    path = tmp_path / "usage.flow.json"
    path.write_text(flow_text, encoding="utf-8")
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == json.loads(shown)
    # The settings.hooks snippet is a valid setting.
    snippet = next(b for b in blocks if b.lstrip().startswith('"settings"'))
    settings = json.loads("{" + snippet + "}")["settings"]
    assert [FlowHook.model_validate(h).port for h in settings["hooks"]] == ["on_tool", "on_tool"]

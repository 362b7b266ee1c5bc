"""Tool schemas, argument validation and tool-call routing (issue 3), driven
through the scripted provider: no network, real engine, real nodes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.core.transform import Change
from nodes.mail import SendMail
from runtime.flow import FlowNode, validate_flow
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from runtime.tools import agent_tool_specs, compile_check, tool_schema
from tests.servers.flows import (
    AI_SCOPE,
    TEST_NODES,
    EchoTool,
    SleepTool,
    agent_flow,
    fixed,
    registry,
    run,
    scripted,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "resources" / "examples" / "email-assistant.flow.json"


@pytest.fixture(autouse=True)
def _reset_tool_nodes():
    EchoTool.calls = []
    SleepTool.calls = []
    SleepTool.cancelled = []
    SleepTool.started = None
    yield


def echo(params: dict | None = None, **extra) -> dict:
    return {"id": "echo", "type": "test.echo", "params": params or {}, **extra}


def mail_node(node_id: str = "mail", **params) -> dict:
    return {"id": node_id, "type": "mail.send", "params": params}


# -- schemas ----------------------------------------------------------------

def test_schema_holds_exactly_the_ai_params():
    schema = tool_schema(SendMail.spec, FlowNode(id="m", type="mail.send"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == {
        "type": "object",
        "properties": {
            "to": {"type": "string", "description": "Recipient email address(es), comma-separated"},
            "subject": {"type": "string", "description": "Subject line"},
            "body": {"type": "string", "description": "Message body (plain text)"},
        },
        "required": ["to", "subject", "body"],
        "additionalProperties": False,
    }


def test_schema_types_enum_optional_and_description_override():
    fnode = FlowNode(id="e", type="test.echo", params={
        "text": ParamValue(scope=Scope.AI, description="What to shout"),
        "prefix": ParamValue(scope=Scope.AI),
        "count": ParamValue(scope=Scope.AI),
        "mode": ParamValue(scope=Scope.AI)})
    schema = tool_schema(EchoTool.spec, fnode)
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert props["text"] == {"type": "string", "description": "What to shout"}
    assert props["count"]["type"] == "integer"
    assert props["mode"]["enum"] == ["upper", "lower"]
    assert schema["required"] == ["text"]  # the others have defaults


def test_strict_only_when_openai_strict_mode_accepts_the_schema():
    flow = agent_flow(scripted([]), [echo({"count": AI_SCOPE}), mail_node()])
    tools = {t["function"]["name"]: t["function"] for t in agent_tool_specs(flow, registry())["agent"]}
    assert tools["send_email"]["strict"] is True  # all typed, all required
    assert "strict" not in tools["echo"]  # count is optional


def test_param_without_ai_allowed_never_reaches_the_schema():
    # The flow validator refuses it ...
    flow = agent_flow(scripted([]), [mail_node(smtp_host=AI_SCOPE)])
    problems = validate_flow(flow, registry())
    assert any(p.node == "mail" and "smtp_host" in (p.field or "") for p in problems)
    # ... and a hand-made flow node that skipped validation still cannot
    # put it (or the secret password) in front of the LLM.
    fnode = FlowNode(id="m", type="mail.send", params={
        "smtp_host": ParamValue(scope=Scope.AI), "password": ParamValue(scope=Scope.AI)})
    assert set(tool_schema(SendMail.spec, fnode)["properties"]) == {"to", "subject", "body"}


def test_two_send_mail_nodes_are_two_tools_by_flow_override():
    flow = agent_flow(scripted([]), [
        mail_node("sales", to=fixed("sales@example.com")) | {
            "tool": {"name": "mail_sales", "description": "Write to the sales team"}},
        mail_node("support") | {"tool": {"name": "mail_support"}}])
    specs = agent_tool_specs(flow, registry())["agent"]
    assert [s["function"]["name"] for s in specs] == ["mail_sales", "mail_support"]
    assert specs[0]["function"]["description"] == "Write to the sales team"
    assert "to" not in specs[0]["function"]["parameters"]["properties"]
    assert "to" in specs[1]["function"]["parameters"]["properties"]


JSON_TYPES = st.sampled_from(["string", "integer", "number", "boolean", None])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6)


@st.composite
def schemas_and_args(draw):
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4))
    props = {}
    for n in names:
        p = {}
        t = draw(JSON_TYPES)
        if t:
            p["type"] = t
        if t == "string" and draw(st.booleans()):
            p["enum"] = draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, unique=True))
        props[n] = p
    required = [n for n in names if draw(st.booleans())]
    schema = {"type": "object", "properties": props, "required": required,
              "additionalProperties": False}
    keys = st.sampled_from(["a", "b", "c", "d", "e"])
    values = JSON_VALUES | st.sampled_from(["x", "y", 1.0, 2.5, True, 0])
    args = draw(st.dictionaries(keys, values, max_size=5) | JSON_VALUES)
    return schema, args


@settings(max_examples=400, deadline=None)
@given(schemas_and_args())
def test_compiled_check_agrees_with_jsonschema(case):
    schema, args = case
    assert compile_check(schema)(args) == jsonschema.Draft202012Validator(schema).is_valid(args)


# -- calls --------------------------------------------------------------------

async def test_valid_call_runs_the_node_and_returns_its_outputs():
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}],
         "usage": {"input_tokens": 7, "output_tokens": 3}},
        {"text": "Echo said {last_result}", "usage": {"input_tokens": 9, "output_tokens": 4}}]),
        [echo()], prompt="say hi")
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    assert msg["payload"] == 'Echo said {"echoed": "HI"}'
    agent = msg["agent"]
    assert agent["turns"] == 2
    assert agent["usage"] == {"input_tokens": 16, "output_tokens": 7}
    [call] = agent["tool_calls"]
    assert call["tool"] == "echo" and call["args"] == {"text": "hi"}
    assert call["status"] == "success" and call["data"] == {"echoed": "HI"}
    assert isinstance(call["ms"], float)
    # The agent's own message carries no tool-call keys.
    assert not [k for k in msg if k.startswith("__")]


async def test_events_correlate_calls_and_results_by_caller_id():
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}},
                        {"name": "echo", "arguments": {"text": "b"}}]},
        {"text": "ok"}]), [echo()])
    _, rec, _ = await run(flow)
    calls, results = rec.of("tool.call"), rec.of("tool.result")
    assert len({c.caller_id for c in calls}) == 2
    by_id = {r.caller_id: r for r in results}
    for c in calls:
        r = by_id[c.caller_id]
        assert (c.agent, c.node, c.tool) == ("agent", "echo", "echo")
        assert r.data == {"echoed": c.args["text"].upper()}
    req = rec.of("llm.request")
    assert [r.turn for r in req] == [1, 2]
    assert req[0].tools == ["echo"] and req[0].message_count == 1
    assert req[1].message_count == 4  # user, assistant, two tool results
    resp = rec.of("llm.response")
    assert [c["name"] for c in resp[0].tool_calls] == ["echo", "echo"]
    assert resp[1].text == "ok"


async def test_node_without_outputs_answers_completed():
    flow = agent_flow(scripted([{"tool_calls": [{"name": "noop", "arguments": {}}]}, {"text": ""}]),
                      [{"id": "n", "type": "test.noop"}])
    _, rec, _ = await run(flow)
    [r] = rec.of("tool.result")
    assert r.status == "success" and r.data == {"status": "completed"}


HOSTILE = [
    ({"text": "hi", "prefix": "EVIL "}, "unknown argument 'prefix'"),  # designer kept it
    ({"text": 5}, "argument 'text'"),
    ({"text": "hi", "count": "3"}, "unknown argument 'count'"),
    ({}, "missing required argument 'text'"),
    ('{"text": "hi"', "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
]


@pytest.mark.parametrize(("args", "why"), HOSTILE)
async def test_hostile_arguments_are_refused_and_the_node_never_runs(args, why):
    flow = agent_flow(scripted([{"tool_calls": [{"name": "echo", "arguments": args}]},
                                {"text": "gave up"}]),
                      [echo({"prefix": fixed("Re: ")})])
    result, rec, _ = await run(flow)
    assert result.status == "ok"
    assert EchoTool.calls == []
    [r] = rec.of("tool.result")
    assert r.status == "refused"
    assert why in r.error
    # The LLM reads the refusal as the tool's result.
    second = rec.of("llm.request")[1].messages
    assert second[-1]["role"] == "tool" and why in second[-1]["content"]
    assert "refused" in second[-1]["content"]
    [msg] = rec.debug_values()
    assert msg["agent"]["tool_calls"][0]["status"] == "refused"


async def test_unknown_tool_is_refused_naming_the_tools_there_are():
    flow = agent_flow(scripted([{"tool_calls": [{"name": "send_email", "arguments": {}}]},
                                {"text": "x"}]), [echo()])
    _, rec, _ = await run(flow)
    [r] = rec.of("tool.result")
    assert r.status == "refused"
    assert "unknown tool 'send_email'" in r.error and "echo" in r.error
    assert EchoTool.calls == []


async def test_hostile_mail_call_cannot_change_the_designers_smtp_host(tmp_path):
    outbox = tmp_path / "outbox"
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "send_email", "arguments": {
            "to": "a@example.com", "subject": "s", "body": "b", "smtp_host": "evil.example"}},
            {"name": "send_email", "arguments": {
                "to": "a@example.com", "subject": "s", "body": "b", "delivery": "smtp"}}]},
        {"text": "done"}]),
        [mail_node(delivery=fixed("outbox"), outbox_dir=fixed(str(outbox)))])
    _, rec, _ = await run(flow)
    assert [r.status for r in rec.of("tool.result")] == ["refused", "refused"]
    assert "smtp_host" in rec.of("tool.result")[0].error
    assert not outbox.exists()


async def test_toggling_a_param_from_ai_to_custom_uses_the_designers_value():
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi", "prefix": "ai: "}}]},
             {"text": "done"}]
    as_ai = agent_flow(scripted(turns), [echo({"prefix": AI_SCOPE})])
    assert "prefix" in agent_tool_specs(as_ai, registry())["agent"][0]["function"]["parameters"]["properties"]
    _, rec, _ = await run(as_ai)
    assert rec.of("tool.result")[0].data == {"echoed": "AI: HI"}

    EchoTool.calls = []
    as_custom = agent_flow(scripted(turns), [echo({"prefix": fixed("Designer: ")})])
    schema = agent_tool_specs(as_custom, registry())["agent"][0]["function"]["parameters"]
    assert "prefix" not in schema["properties"]
    _, rec, _ = await run(as_custom)
    assert rec.of("tool.result")[0].status == "refused"  # the AI may no longer set it
    assert EchoTool.calls == []

    ok = [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, {"text": "done"}]
    _, rec, _ = await run(agent_flow(scripted(ok), [echo({"prefix": fixed("Designer: ")})]))
    assert rec.of("tool.result")[0].data == {"echoed": "DESIGNER: HI"}


async def test_message_scoped_param_never_picks_up_a_tool_argument():
    # prefix reads the agent's message at `payload.prefix`; an AI argument of
    # that name is refused, not merged into the message.
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "x", "prefix": "ai"}}]},
             {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}, {"text": "."}]
    flow = agent_flow(scripted(turns, prompt=""), [echo({"prefix": {"scope": "message",
                                                                    "path": "payload.prefix"}})],
                      prompt={"prefix": "from-msg:"})
    flow.node("agent").params["prompt"] = ParamValue(scope=Scope.CUSTOM, value="go")
    _, rec, _ = await run(flow)
    assert [r.status for r in rec.of("tool.result")] == ["refused", "success"]
    assert rec.of("tool.result")[1].data == {"echoed": "FROM-MSG:X"}


async def test_exception_becomes_a_sanitized_error(monkeypatch):
    monkeypatch.setenv("TEST_DB_TOKEN", "hunter2-very-secret")
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "fail", "arguments": {"why": "crash"}},
                        {"name": "fail", "arguments": {"why": "config"}}]},
        {"text": "sorry"}]),
        [{"id": "f", "type": "test.fail", "params": {"token": fixed({"env": "TEST_DB_TOKEN"})}}])
    result, rec, _ = await run(flow)
    assert result.status == "ok"  # a failed tool call is the LLM's to handle
    crash, config = rec.of("tool.result")
    assert crash.status == "error"
    # The LLM gets the type and a generic reason; the (redacted) text is in
    # the node.error event. A NodeConfigError's text is the author's, for users.
    assert crash.error == ("RuntimeError: the tool failed unexpectedly; details are in the "
                           "run's events")
    assert config.error == "the widget is not configured"
    assert [e.message for e in rec.of("node.error")] == [
        "RuntimeError: database refused the login with ***", "the widget is not configured"]
    assert "hunter2-very-secret" not in rec.dump()
    assert "Traceback" not in crash.error


async def test_one_node_serves_rpa_and_tool_calls_in_the_same_run():
    reg = Registry([*registry(), Change])
    flow = agent_flow(scripted([{"tool_calls": [{"name": "echo", "arguments": {"text": "tool"}}]},
                                {"text": "done"}]), [echo()],
                      rpa=[("rpa", "set"), ("set", "echo"), ("echo", "rpa_show")])
    flow.nodes += [
        FlowNode(id="rpa", type="core.inject", params={"payload": ParamValue(scope=Scope.CUSTOM,
                                                                             value="p")}),
        FlowNode(id="set", type="core.change", params={"rules": ParamValue(
            scope=Scope.CUSTOM, value=[{"action": "set", "path": "text", "value": "rpa"}])}),
        FlowNode(id="rpa_show", type="core.debug"),
    ]
    result, rec, _ = await run(flow, reg=reg)
    assert result.status == "ok", rec.of("node.error")
    # RPA: the AI param falls back to msg.text, the output goes to payload and on.
    assert rec.debug_values("rpa_show") == ["RPA"]
    # Tool: answered the agent; nothing flowed on to rpa_show.
    assert rec.of("tool.result")[0].data == {"echoed": "TOOL"}
    assert sorted(c["text"] for c in EchoTool.calls) == ["rpa", "tool"]


# -- concurrency, timeout, stop ---------------------------------------------

async def test_calls_of_one_turn_run_concurrently_each_on_its_own_message():
    n = 100
    calls = [{"name": "sleep", "arguments": {"tag": f"t{i}"}} for i in range(n)]
    flow = agent_flow(scripted([{"tool_calls": calls}, {"text": "all done"}],
                               max_tool_calls_per_turn=n),
                      [{"id": "zz", "type": "test.sleep", "params": {"seconds": fixed(0.01)}}])
    result, rec, _ = await run(flow)
    assert result.status == "ok"
    kinds = [k for k, _ in SleepTool.calls]
    # Every call had started before the first one finished: they overlapped.
    assert kinds == ["start"] * n + ["end"] * n
    [msg] = rec.debug_values()
    outcomes = msg["agent"]["tool_calls"]
    # In call order, and each call saw only its own message (its own scratch).
    assert [o["data"]["result"] for o in outcomes] == [f"t{i}" for i in range(n)]
    assert "scratch" not in msg


async def test_a_call_past_its_timeout_is_cancelled_and_reported():
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "sleep", "arguments": {"tag": "slow", "seconds": -1}},
                        {"name": "sleep", "arguments": {"tag": "fast", "seconds": 0}}]},
        {"text": "{last_result}"}], tool_timeout_seconds=0.05),
        [{"id": "zz", "type": "test.sleep", "params": {"seconds": AI_SCOPE}}])
    result, rec, _ = await run(flow)
    assert result.status == "ok"
    slow, fast = rec.debug_values()[0]["agent"]["tool_calls"]  # in call order
    assert slow["status"] == "error" and "did not finish within 0.05 s" in slow["error"]
    assert fast["status"] == "success" and fast["data"] == {"result": "fast"}
    assert SleepTool.cancelled == ["slow"]


async def test_stopping_the_run_cancels_tool_calls_in_flight():
    SleepTool.started = asyncio.Event()

    def hook(engine):
        async def stop_when_started():
            await SleepTool.started.wait()
            engine.stop()
        asyncio.get_running_loop().create_task(stop_when_started())

    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "sleep", "arguments": {"tag": f"s{i}", "seconds": -1}}
                        for i in range(3)]}, {"text": "never"}]),
        [{"id": "zz", "type": "test.sleep", "params": {"seconds": AI_SCOPE}}])
    result, rec, _ = await run(flow, engine_hook=hook)
    assert result.status == "stopped"
    assert sorted(SleepTool.cancelled) == ["s0", "s1", "s2"]
    assert rec.debug_values() == []
    assert {r.error for r in rec.of("tool.result")} == {"cancelled: the run stopped"}


async def test_an_agent_that_never_answers_stops_at_max_turns():
    loop_turn = {"tool_calls": [{"name": "noop", "arguments": {}}]}
    flow = agent_flow(scripted([loop_turn] * 5, max_turns=3), [{"id": "n", "type": "test.noop"}])
    result, rec, _ = await run(flow)
    assert result.status == "error"
    [err] = rec.of("node.error")
    assert err.node == "agent" and "no final answer after 3 turns" in err.message
    assert len(rec.of("llm.request")) == 3


def test_registry_has_the_test_nodes_and_builtin_ai_mail():
    reg = Registry.default()
    assert "ai.agent" in reg and "mail.send" in reg
    assert reg.spec("ai.agent").has_tools_port
    assert [c.spec.type for c in TEST_NODES][0] == "test.sleep"


def test_agent_refuses_a_key_in_api_key_env():
    flow = agent_flow({"provider": fixed("openai"), "api_key_env": fixed("sk-abc123xyz")}, [])
    problems = validate_flow(flow, registry())
    assert any(p.field == "params.api_key_env" for p in problems)


# -- cold start and CLI -----------------------------------------------------

def test_importing_the_ai_and_mail_nodes_loads_no_sdk():
    code = ("import sys, nodes.ai, nodes.mail, runtime.tools; "
            "print(sorted(m for m in ('openai', 'anthropic', 'aiosmtplib', 'jsonschema') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_cli_tools_prints_the_schema_the_llm_sees():
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "tools", str(EXAMPLE)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    specs = json.loads(out.stdout)
    [tool] = specs["agent"]
    assert tool["type"] == "function"
    fn = tool["function"]
    assert fn["name"] == "send_email"
    assert fn["parameters"]["required"] == ["to", "subject", "body"]
    assert fn["parameters"]["additionalProperties"] is False
    assert fn["parameters"]["properties"]["subject"]["description"] == "A short subject line"
    jsonschema.Draft202012Validator.check_schema(fn["parameters"])


def test_cli_runs_the_example_offline(tmp_path):
    env = {**__import__("os").environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data")}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    events = tmp_path / "events.jsonl"
    # send_email looks sensitive: it waits for approval, here given by --approve auto.
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(EXAMPLE),
                          "--events", str(events), "--approve", "auto"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    answer = next(x["value"] for x in lines if x["node"] == "show")
    assert answer.startswith("I emailed john@example.com")
    calls = next(x["value"] for x in lines if x["node"] == "calls")
    assert calls["tool_calls"][0]["status"] == "success"
    [eml] = list((tmp_path / "data" / "outbox").glob("*.eml"))
    from email import message_from_bytes

    mail = message_from_bytes(eml.read_bytes())
    assert mail["To"] == "john@example.com"  # from the AI
    assert mail["From"] == "assistant@example.com"  # from the designer
    assert mail["Subject"] == "Your order A-1001 has shipped"
    kinds = [json.loads(line)["type"] for line in events.read_text().splitlines()]
    for kind in ("llm.request", "llm.response", "tool.call", "tool.result"):
        assert kind in kinds
    # Its Send Mail asks a person only for recipients outside example.com.
    assert "tool.approval" not in kinds


def test_without_a_terminal_an_outside_recipient_is_rejected_with_the_way_out(tmp_path):
    """No --approve and no terminal (CI): the call that needs approval is not
    run, the LLM is told why; the one that needs none is mailed."""
    triage = ROOT / "resources" / "examples" / "triage-delegation.flow.json"
    env = {**__import__("os").environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(triage),
                          "--events", str(tmp_path / "ev.jsonl")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env,
                         start_new_session=True)  # no controlling terminal
    assert out.returncode == 0, out.stderr
    results = [json.loads(x) for x in (tmp_path / "ev.jsonl").read_text().splitlines()
               if json.loads(x)["type"] == "tool.result" and json.loads(x)["tool"] == "send_email"]
    assert sorted(r["status"] for r in results) == ["rejected", "success"]
    [rejected] = [r for r in results if r["status"] == "rejected"]
    assert "no terminal to ask on" in rejected["error"]
    # How to decide without one is said once, at the end of the run.
    assert "--approve auto" in out.stderr.splitlines()[-1]
    assert len(list((tmp_path / "data" / "outbox").glob("*.eml"))) == 1


def test_a_bad_approve_option_is_named(tmp_path):
    out = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(EXAMPLE),
                          "--approve", "sometimes"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert "--approve 'sometimes': expected ask, auto, deny or a policy .json file" in out.stderr


def test_the_example_in_docs_tools_md_runs(tmp_path):
    import re

    text = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    script = tmp_path / "docs_example.py"
    script.write_text(code, encoding="utf-8")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "Sunny in Oslo" in out.stdout
    assert "unknown argument 'api_url' (get_weather accepts: city)" in out.stdout


async def test_a_secret_in_a_tool_output_is_masked_before_the_llm_sees_it(monkeypatch):
    from runtime.node import resolve_secret

    monkeypatch.setenv("TEST_LEAKY", "leaky-secret-value-42")
    resolve_secret({"env": "TEST_LEAKY"})  # as a node reading it would
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "leaky-secret-value-42"}}]},
        {"text": "ok"}]), [echo({"mode": fixed("lower")})])
    _, rec, _ = await run(flow)
    last = rec.of("llm.request")[-1].messages[-1]
    assert last["role"] == "tool" and last["content"] == '{"echoed": "***"}'


async def test_resume_after_a_first_step_taken_by_hand_behaves_as_await():
    # ToolBridge.call takes a tool's first step itself (no timer when the
    # tool finishes in it) and hands the rest to _resume: values, exceptions
    # and a cancellation at the first wait must come out as with `await`.
    from runtime.tools import _resume

    log = []

    async def tool(fail: bool):
        await asyncio.sleep(0)
        try:
            await asyncio.sleep(0)
        finally:
            log.append("cleanup")
        if fail:
            raise ValueError("boom")
        return "done"

    async def by_hand(fail: bool):
        coro = tool(fail)
        return await _resume(coro, coro.send(None))

    assert await by_hand(False) == "done"
    with pytest.raises(ValueError, match="boom"):
        await by_hand(True)

    async def stuck():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # cleanup that itself awaits, then give up
            log.append("cancelled")
            raise

    async def stuck_by_hand():
        coro = stuck()
        async with asyncio.timeout(0.01):
            return await _resume(coro, coro.send(None))

    with pytest.raises(TimeoutError):
        await stuck_by_hand()
    assert log == ["cleanup", "cleanup", "cancelled"]


@node("test.own_timeout", name="Own timeout", category="Test",
      tool=Tool("own_timeout", "Waits for something that never comes, under its own timeout"))
class OwnTimeout(Node):
    tag = Param(str, "A label", scope=AI, allow=AI | CUSTOM)
    result = Output(str, "What happened")

    async def on_message(self, msg):
        # A scope bound to the current task, entered in the first step: it
        # must be the same task that awaits the rest of this call.
        try:
            async with asyncio.timeout(0.05):
                await asyncio.Event().wait()
        except TimeoutError:
            self.result.set(msg, f"{self.tag.get(msg)}: gave up on its own")


async def test_calls_that_wait_run_each_in_one_task_from_start_to_end():
    calls = [{"name": "own_timeout", "arguments": {"tag": t}} for t in ("a", "b")]
    flow = agent_flow(scripted([{"tool_calls": calls}, {"text": "done"}]),
                      [{"id": "zz", "type": "test.own_timeout"}])
    result, rec, _ = await run(flow, reg=Registry([*registry(), OwnTimeout]))
    assert result.status == "ok", rec.of("node.error")
    outcomes = rec.debug_values()[0]["agent"]["tool_calls"]
    assert [o["data"] for o in outcomes] == [{"result": "a: gave up on its own"},
                                             {"result": "b: gave up on its own"}]

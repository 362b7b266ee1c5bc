"""The agent through the real ``anthropic`` SDK, talking HTTP to a local
server that speaks the messages API (tool_use / tool_result blocks)."""

from __future__ import annotations

import json

import pytest

from tests.servers.flows import AI_SCOPE, agent_flow, fixed, run
from tests.servers.llm import LlmServer, anthropic_reply, error_body
from tests.servers.smtp import SmtpServer

API_KEY = "sk-ant-test-K3Y-must-not-leak"

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture
def smtp():
    with SmtpServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)


def anthropic_agent(llm: LlmServer, **extra) -> dict:
    params = {"provider": fixed("anthropic"), "model": fixed("claude-test"),
              "base_url": fixed(llm.anthropic_url), "instructions": fixed("You send mail."),
              "max_tokens": fixed(512)}
    params.update({k: fixed(v) for k, v in extra.items()})
    return params


def mail_tool(smtp: SmtpServer) -> dict:
    return {"id": "mail", "type": "mail.send", "params": {
        "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE,
        "sender": fixed("assistant@example.com"),
        "smtp_host": fixed("127.0.0.1"), "smtp_port": fixed(smtp.port)}}


async def test_parallel_tool_use_sends_real_mail(llm, smtp):
    llm.replies = [
        anthropic_reply("Sending both.", tool_calls=[
            ("send_email", {"to": "ann@example.com", "subject": "Hi Ann", "body": "One"}),
            ("send_email", {"to": "bob@example.com", "subject": "Hi Bob", "body": 2}),
        ], usage=(50, 20)),
        anthropic_reply("Mailed Ann; Bob's body was not text.", usage=(80, 9)),
    ]
    flow = agent_flow(anthropic_agent(llm), [mail_tool(smtp)], prompt="Mail Ann and Bob")
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    assert [m["To"] for m in smtp.messages] == ["ann@example.com"]
    assert smtp.messages[0]["From"] == "assistant@example.com"

    first, second = (r["body"] for r in llm.requests)
    assert llm.requests[0]["path"] == "/v1/messages"
    headers = llm.requests[0]["headers"]  # the SDK sends the key in one of these
    assert API_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert first["system"] == "You send mail."
    assert first["max_tokens"] == 512
    assert first["messages"] == [{"role": "user", "content": "Mail Ann and Bob"}]
    [tool] = first["tools"]
    assert tool["name"] == "send_email"
    assert set(tool["input_schema"]["properties"]) == {"to", "subject", "body"}
    assert tool["input_schema"]["additionalProperties"] is False

    # Both results go back in one user turn, matched to the tool_use ids.
    assistant, results = second["messages"][1], second["messages"][2]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert results["role"] == "user"
    ids = [b["id"] for b in assistant["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in results["content"]] == ids
    assert "is_error" not in results["content"][0]
    assert json.loads(results["content"][0]["content"])["accepted"] == ["ann@example.com"]
    assert results["content"][1]["is_error"] is True
    assert "argument 'body'" in results["content"][1]["content"]

    [msg] = rec.debug_values()
    assert msg["payload"] == "Mailed Ann; Bob's body was not text."
    assert msg["agent"]["usage"] == {"input_tokens": 130, "output_tokens": 29}
    assert [c["status"] for c in msg["agent"]["tool_calls"]] == ["success", "refused"]
    assert API_KEY not in rec.dump()


async def test_overloaded_is_retried_then_fails_with_provider_and_status(llm):
    llm.replies = [(529, error_body("anthropic", 529, "Overloaded")), anthropic_reply("ok")]
    result, rec, _ = await run(agent_flow(anthropic_agent(llm), []))
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values()[0]["payload"] == "ok"

    llm.requests.clear()
    llm.replies = lambda kind, body: (500, error_body(kind, 500, "Internal server error"))
    result, rec, _ = await run(agent_flow(anthropic_agent(llm, retries=1), []))
    assert result.status == "error"
    message = rec.of("node.error")[0].message
    assert message.startswith("anthropic: HTTP 500: Internal server error")
    assert len(llm.requests) == 2
    assert API_KEY not in rec.dump()


# -- hardening (issue 5) --------------------------------------------------------

def nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


async def test_tool_input_nested_300_deep_is_refused_not_a_crash(llm, smtp):
    # The SDK hands the input over already parsed: the bound is checked by
    # an iterative walk, and no event holds the deep original.
    llm.replies = [anthropic_reply(tool_calls=[("send_email", {"to": nested(300), "subject": "s",
                                                               "body": "b"})]),
                   anthropic_reply("gave up")]
    result, rec, _ = await run(agent_flow(anthropic_agent(llm), [mail_tool(smtp)]))
    assert result.status == "ok", rec.of("node.error")
    [r] = rec.of("tool.result")
    assert r.status == "refused" and "nested more than 32 levels deep" in r.error
    assert smtp.received == []
    assert len(rec.dump()) < 50_000  # every event serialises, and none holds the original
    assert isinstance(rec.of("tool.call")[0].args, str)
    assert isinstance(rec.of("llm.response")[0].tool_calls[0]["arguments"], str)
    # The next request carries the refusal, and the call itself as {}.
    second = llm.requests[1]["body"]["messages"]
    assert second[1]["content"][0]["input"] == {}
    assert "32 levels" in second[2]["content"][0]["content"]


async def test_request_timeout_and_retry_wait_reach_the_anthropic_client(llm, monkeypatch):
    import threading

    from runtime.agent import base

    asked: list[float] = []

    async def record(seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(base, "_sleep", record, raising=False)
    llm.replies = [(529, error_body("anthropic", 529, "Overloaded"), {"retry-after": "45"})]
    result, rec, _ = await run(agent_flow(anthropic_agent(llm, max_retry_wait_seconds=30), []))
    assert rec.of("node.error")[0].message == (
        "anthropic: HTTP 529: Overloaded (the server asked to retry after 45 s, more than "
        "max_retry_wait_seconds=30)")
    assert asked == []

    release = threading.Event()
    llm.replies = lambda kind, body: (release.wait(10), anthropic_reply("late"))[1]
    try:
        flow = agent_flow(anthropic_agent(llm, request_timeout_seconds=0.5, retries=0), [])
        result, rec, _ = await run(flow)
    finally:
        release.set()
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "anthropic: request failed: timed out: the server did not answer within "
        "request_timeout_seconds=0.5")

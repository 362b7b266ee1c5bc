"""Streaming answers through the real ``openai`` and ``anthropic`` SDKs,
against the local server speaking server-sent events: the text arrives as
``llm.delta`` events before the answer, tool-call arguments are assembled
from their pieces, a stream broken half way is played again (or fails,
never as a half answer), a server that cannot stream is asked plainly, and
a fast stream is coalesced into a bounded number of events."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from runtime.agent import base
from tests.servers.flows import AI_SCOPE, EchoTool, agent_flow, fixed, run, scripted
from tests.servers.llm import LlmServer, Stream, anthropic_reply, error_body, openai_reply

OPENAI_KEY = "sk-test-stream-K3Y"
ANSWER = "The quick brown fox jumps over the lazy dog, twice, and then sleeps."


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-stream-K3Y")
    EchoTool.calls = []


def openai_agent(llm: LlmServer, **extra) -> dict:
    params = {"provider": fixed("openai"), "model": fixed("gpt-test"),
              "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY")}
    params.update({k: fixed(v) for k, v in extra.items()})
    return params


def anthropic_agent(llm: LlmServer, **extra) -> dict:
    params = {"provider": fixed("anthropic"), "model": fixed("claude-test"),
              "base_url": fixed(llm.anthropic_url), "max_tokens": fixed(512)}
    params.update({k: fixed(v) for k, v in extra.items()})
    return params


ECHO = {"id": "echo", "type": "test.echo", "params": {"text": AI_SCOPE}}


def deltas_then_answer(rec, agent: str = "agent") -> tuple[list[str], list]:
    """The llm.delta texts of the agent and its llm.response events, checking
    that every delta of a turn came before that turn's answer."""
    order = [e for e in rec.events if e.type in ("llm.delta", "llm.response")
             and getattr(e, "agent", "") == agent]
    for i, e in enumerate(order):
        if e.type == "llm.delta":
            assert any(r.type == "llm.response" and r.turn == e.turn for r in order[i + 1:]), \
                "a delta came after its turn's answer"
    return [e.text for e in order if e.type == "llm.delta"], rec.of("llm.response")


async def test_openai_text_streams_as_deltas_before_the_answer(llm):
    llm.replies = [Stream(openai_reply(ANSWER, usage=(40, 17)), pieces=8)]
    result, rec, _ = await run(agent_flow(openai_agent(llm), [], prompt="Tell me"))
    assert result.status == "ok", rec.of("node.error")

    sent = llm.requests[0]["body"]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    deltas, responses = deltas_then_answer(rec)
    assert len(deltas) >= 2  # it did arrive in parts
    assert "".join(deltas) == ANSWER
    assert responses[0].text == ANSWER
    assert responses[0].usage == {"input_tokens": 40, "output_tokens": 17}  # the last chunk's
    assert rec.debug_values()[0]["payload"] == ANSWER


async def test_openai_tool_call_arguments_are_assembled_from_their_pieces(llm):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "pieced together"}),
                                            ("echo", {"text": "second call"})]),
                   openai_reply("Echoed both.")]
    result, rec, _ = await run(agent_flow(openai_agent(llm), [ECHO]))
    assert result.status == "ok", rec.of("node.error")
    assert sorted(c["text"] for c in EchoTool.calls) == ["pieced together", "second call"]
    first = rec.of("llm.response")[0]
    assert [json.loads(c["arguments"]) for c in first.tool_calls] == [{"text": "pieced together"},
                                                          {"text": "second call"}]
    # The tool results went back under the ids the stream gave.
    ids = {c["id"] for c in first.tool_calls}
    back = {m["tool_call_id"] for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"}
    assert back == ids and all(ids)


async def test_anthropic_text_and_tool_use_stream(llm):
    llm.replies = [Stream(anthropic_reply("Let me echo.", tool_calls=[("echo", {"text": "hi"})],
                                          usage=(30, 12)), pieces=4),
                   Stream(anthropic_reply(ANSWER, usage=(50, 20)), pieces=6)]
    result, rec, _ = await run(agent_flow(anthropic_agent(llm), [ECHO]))
    assert result.status == "ok", rec.of("node.error")
    assert all(r["body"]["stream"] is True for r in llm.requests)
    assert EchoTool.calls == [{"text": "hi", "prefix": ""}]
    deltas, responses = deltas_then_answer(rec)
    assert "".join(deltas) == "Let me echo." + ANSWER
    assert [r.text for r in responses] == ["Let me echo.", ANSWER]
    assert responses[0].usage == {"input_tokens": 30, "output_tokens": 12}
    assert responses[1].usage == {"input_tokens": 50, "output_tokens": 20}
    assert rec.debug_values()[0]["payload"] == ANSWER


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_dropped_half_way_is_played_again_whole(llm, kind):
    make, agent = ((openai_reply, openai_agent) if kind == "openai"
                   else (anthropic_reply, anthropic_agent))
    llm.replies = [Stream(make(ANSWER), pieces=10, drop_after=5),
                   Stream(make(ANSWER), pieces=10)]
    result, rec, _ = await run(agent_flow(agent(llm, retries=2), []))
    assert result.status == "ok", rec.of("node.error")
    assert len(llm.requests) == 2
    deltas, responses = deltas_then_answer(rec)
    # The first attempt's half, then a restart delta (start again), then the whole.
    flags = [e.restart for e in rec.of("llm.delta")]
    assert flags.count(True) == 1
    restart = flags.index(True)
    assert deltas[restart] == ""
    assert 0 < len("".join(deltas[:restart])) < len(ANSWER)
    assert ANSWER.startswith("".join(deltas[:restart]))
    assert "".join(deltas[restart + 1:]) == ANSWER
    assert [r.text for r in responses] == [ANSWER]
    assert rec.debug_values()[0]["payload"] == ANSWER


async def test_a_stream_that_keeps_dropping_fails_cleanly_with_no_half_answer(llm):
    llm.replies = [Stream(openai_reply(ANSWER), pieces=10, drop_after=4) for _ in range(2)]
    result, rec, _ = await run(agent_flow(openai_agent(llm, retries=1), []))
    assert len(llm.requests) == 2
    errors = rec.of("node.error")
    assert errors and "stream" in errors[0].message
    assert "gave up after 2 attempts" in errors[0].message
    assert rec.of("llm.response") == []  # nothing was presented as the answer
    assert rec.debug_values() == []


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_server_that_does_not_stream_answers_plainly(llm, kind):
    make, agent = ((openai_reply, openai_agent) if kind == "openai"
                   else (anthropic_reply, anthropic_agent))
    llm.streaming = False  # plain JSON whatever the request asks
    llm.replies = [make(tool_calls=[("echo", {"text": "plain"})]), make(ANSWER, usage=(9, 4))]
    result, rec, _ = await run(agent_flow(agent(llm), [ECHO]))
    assert all(r["body"]["stream"] is True for r in llm.requests)  # it asked, got JSON
    assert result.status == "ok", rec.of("node.error")
    assert EchoTool.calls == [{"text": "plain", "prefix": ""}]
    assert rec.of("llm.response")[1].usage == {"input_tokens": 9, "output_tokens": 4}
    assert rec.debug_values()[0]["payload"] == ANSWER


async def test_a_server_that_refuses_to_stream_is_asked_again_plainly(llm):
    refusal = (400, error_body("openai", 400, "stream is not supported by this model"))
    llm.replies = [refusal, openai_reply("Asked plainly."), openai_reply("Still plain.")]
    flow = agent_flow(openai_agent(llm), [], prompt="one")
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    assert [r["body"].get("stream") for r in llm.requests] == [True, None]
    assert rec.debug_values()[0]["payload"] == "Asked plainly."


async def test_a_fast_stream_is_coalesced_into_a_bounded_number_of_events(llm, monkeypatch):
    # A clock that advances one millisecond each time the coalescer reads it
    # (once per piece): 2,000 pieces are two "seconds" of stream, so at most
    # ~20 events a second means about 40, whatever the machine's speed.
    ticks = itertools.count()
    monkeypatch.setattr(base, "clock", lambda: next(ticks) / 1000)
    monkeypatch.setattr(base, "STALL_FLUSH", 3600.0)  # only the counting clock decides
    pieces = [f"w{i} " for i in range(2000)]
    text = "".join(pieces)
    llm.replies = [Stream(openai_reply(text), pieces=pieces)]
    result, rec, _ = await run(agent_flow(openai_agent(llm), []))
    assert result.status == "ok", rec.of("node.error")
    deltas, responses = deltas_then_answer(rec)
    assert 30 <= len(deltas) <= 45
    assert "".join(deltas) == text == rec.debug_values()[0]["payload"]
    assert text.startswith(responses[0].text)  # the event's copy is cut short


def test_the_coalescer_publishes_at_most_once_per_interval_and_flushes_the_rest():
    out: list[str] = []
    now = [0.0]
    c = base.DeltaCoalescer(out.append, interval=0.05, clock=lambda: now[0])
    c("a")  # the first piece goes at once
    for piece in "bcd":
        now[0] += 0.01
        c(piece)
    assert out == ["a"]
    now[0] += 0.02  # 50 ms since the last
    c("e")
    assert out == ["a", "bcde"]
    c("f")
    c.flush()
    assert out == ["a", "bcde", "f"]
    c.restart()
    assert out[-1] == ""


async def test_text_held_back_is_published_while_the_stream_pauses(llm):
    # The server holds the last piece until a subscriber has seen all the
    # others: the coalescer must publish what it holds without a next piece.
    pieces = ["The parcel ", "left ", "the depot ", "this morning ", "and arrives Friday."]
    release = threading.Event()
    llm.replies = [Stream(openai_reply("".join(pieces)), pieces=pieces, hold=release)]
    seen: list[str] = []

    def watch(event) -> None:
        if event.type == "llm.delta":
            seen.append(event.text)
            if "".join(seen) == "".join(pieces[:-1]):
                release.set()

    flow = agent_flow(openai_agent(llm), [])
    result, rec, _ = await run(flow, engine_hook=lambda engine: engine.bus.subscribe(watch))
    assert result.status == "ok", rec.of("node.error")
    assert release.is_set()  # the partial text was published before the last piece was sent
    assert "".join(seen) == "".join(pieces)


async def test_a_scripted_answer_streams_in_a_few_deltas():
    flow = agent_flow(scripted([{"text": ANSWER}]), [])
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    deltas, responses = deltas_then_answer(rec)
    assert len(deltas) >= 1 and "".join(deltas) == ANSWER == responses[0].text


async def test_a_secret_split_across_streamed_pieces_never_shows_in_a_delta(llm, monkeypatch):
    """The model repeats a secret it saw, and the stream cuts it in two: no
    delta may carry either half, and the answer has it masked."""
    from runtime.node import register_secret

    secret = "sup3r-s3cret-t0ken-of-the-stream-test"
    register_secret(secret)
    text = f"The token is {secret}, as you asked."
    cut = text.index(secret) + 10  # inside the secret
    pieces = [text[:cut], text[cut:cut + 8], text[cut + 8:]]
    monkeypatch.setattr(base, "DELTA_INTERVAL", 0.0)  # every piece its own delta
    llm.replies = [Stream(openai_reply(text), pieces=pieces)]
    result, rec, _ = await run(agent_flow(openai_agent(llm), [], prompt="Say it"))
    assert result.status == "ok", rec.of("node.error")
    deltas, responses = deltas_then_answer(rec)
    shown = "".join(deltas)
    assert len(deltas) >= 2
    for part in (secret[:10], secret[10:18], secret[18:]):
        assert part not in shown, (part, deltas)
    assert responses[0].text == "The token is ***, as you asked."
    assert shown == responses[0].text[:len(shown)]  # what showed is the answer's start

"""``llm.request`` carries what is new since the same job's previous request
(``since``), so that an agent run with an event subscriber costs what its
messages do, not its turns times its conversation (issue 32, goal 2).
Whoever reads the events (the inspector, live or from the history) rebuilds
the whole conversation, and gets exactly what the LLM was sent: checked
against what a real OpenAI-compatible server received, or against the list
a provider was handed, recorded apart from the events."""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

import pytest

from designer.panels.inspector.model import RunModel
from runtime.agent.base import LlmReply, Provider, ToolCallRequest
from runtime.agent.loop import run_agent
from runtime.events import EventBus, LlmRequest, read_event, request_messages
from runtime.history import History
from runtime.node import register_secret
from tests.servers.flows import EchoTool, agent_flow, fixed, run, scripted
from tests.servers.llm import LlmServer, openai_reply
from tests.test_hooks import agent as hook_agent
from tests.test_hooks import flow as hook_flow
from tests.test_hooks import one_more_turn, result_node, turn_sent_in_flow
from tests.test_hooks import reg as hook_reg

API_KEY = "sk-test-d3lta-K3Y"
NOOP = {"id": "noop", "type": "test.noop"}
ECHO = {"id": "echo", "type": "test.echo", "params": {"text": {"scope": "ai"}}}


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", API_KEY)
    EchoTool.calls = []


def shape(messages: list[dict[str, Any]]) -> list[tuple]:
    """What a message list says, in a form both the runtime's messages and
    the OpenAI wire format give: role, text, the call ids it makes or answers."""
    out = []
    for m in messages:
        calls = tuple(c["id"] for c in m.get("tool_calls") or ())
        out.append((m["role"], m.get("content") or "", calls, m.get("tool_call_id", "")))
    return out


def rebuilt(requests: list[Any]) -> list[list[dict[str, Any]]]:
    """The whole conversation after each request, as a reader rebuilds it."""
    known: list[dict[str, Any]] = []
    out = []
    for e in requests:
        out.append(copy.deepcopy(request_messages(known, e)))
    return out


def inspector(events: list[Any]) -> RunModel:
    model = RunModel()
    model.apply(events)
    return model


# -- what each event carries -----------------------------------------------------------

async def test_each_request_carries_only_what_its_turn_added():
    turns = 40
    script = [{"tool_calls": [{"name": "noop", "arguments": {}}]}] * turns + [{"text": "done"}]
    flow = agent_flow(scripted(script, max_turns=turns + 1, instructions="Be brief.",
                               max_tool_calls_per_run=turns), [NOOP])
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    reqs = rec.of("llm.request")
    assert len(reqs) == turns + 1
    first = reqs[0]
    assert first.since == 0 and first.message_count == 2  # the system message, the prompt
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.job > 0 and {e.job for e in reqs} == {first.job}
    for before, e in zip(reqs, reqs[1:], strict=False):
        # The turn's assistant message with its call, and the call's result.
        assert e.since == before.message_count
        assert [m["role"] for m in e.messages] == ["assistant", "tool"]
        assert e.message_count == e.since + 2
    assert reqs[-1].message_count == 2 + 2 * turns
    # The last request's event is as large as the second's, not 40 turns larger.
    assert len(reqs[-1].model_dump_json()) < len(reqs[1].model_dump_json()) + 100


async def test_the_whole_conversation_rebuilds_as_the_llm_received_it(llm):
    """A real OpenAI-compatible server records what it was sent; the events
    rebuilt, live and from the run history, give the same list at each
    request, and the inspector the same conversation."""
    llm.replies = [openai_reply("Let me check.", tool_calls=[("echo", {"text": "one"})]),
                   openai_reply(tool_calls=[("echo", {"text": "two"}), ("echo", {"text": "3"})]),
                   openai_reply(tool_calls=[("echo", {"text": "four"})]),
                   openai_reply("All echoed.")]
    flow = agent_flow(hook_agent(llm), [ECHO], prompt="Echo one, two, 3 and four")
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    reqs = rec.of("llm.request")
    sent = [r["body"]["messages"] for r in llm.requests]
    assert len(reqs) == len(sent) == 4
    assert [e.since for e in reqs] == [0, 2, 4, 7]
    assert [shape(m) for m in rebuilt(reqs)] == [shape(m) for m in sent]

    model = inspector(rec.events)
    [conv] = model.conversations
    assert shape(conv.messages) == shape(sent[-1])
    assert shape(conv.transcript) == shape(sent[-1]) + [("assistant", "All echoed.", (), "")]


async def test_the_history_replays_the_same_conversation(llm, tmp_path):
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "a"})]),
                   openai_reply(tool_calls=[("echo", {"text": "b"})]),
                   openai_reply("Done.")]
    history = History(tmp_path / "history.sqlite3")
    recorder = history.recorder()

    def watch(engine):
        engine.bus.subscribe(recorder)

    result, rec, engine = await run(agent_flow(hook_agent(llm), [ECHO]), engine_hook=watch)
    assert result.status == "ok", rec.of("node.error")
    recorder.close()
    stored = history.events(engine.run_id)
    history.close()
    assert [e.since for e in stored if e.type == "llm.request"] == [0, 2, 4]
    [live] = inspector(rec.events).conversations
    [replayed] = inspector(stored).conversations
    assert replayed.messages == live.messages
    assert shape(replayed.messages) == shape(llm.requests[-1]["body"]["messages"])


# -- what is not an append: the whole list again ------------------------------------------

class Recording(Provider):
    """Plays ``script`` (per turn: tool calls, or the answer) and keeps a
    copy of the conversation as it was handed each request, the system
    message first: what the events must rebuild. ``at`` runs a function on
    the live list at a turn (a provider that trims its context)."""

    name = "recording"

    def __init__(self, script: list[dict], at: dict[int, Any] | None = None) -> None:
        self.script, self.at, self.seen = script, at or {}, []

    async def complete(self, *, system, messages, tools, model, temperature, max_tokens, turn=0,
                       on_delta=None) -> LlmReply:
        # The request's event went out before this call: what is done to
        # the list here shows in the next one.
        self.seen.append(copy.deepcopy([{"role": "system", "content": system}, *messages]))
        if turn in self.at:
            self.at[turn](messages)
        await asyncio.sleep(0)  # jobs of one agent at once interleave here
        step = self.script[min(turn, len(self.script) - 1)]
        calls = [ToolCallRequest(f"c{turn}-{i}", c, {}) for i, c in enumerate(step.get("calls", []))]
        return LlmReply(text=step.get("text", ""), tool_calls=calls)


def call_turns(n: int) -> list[dict]:
    return [{"text": f"turn {i}", "calls": ["lookup"]} for i in range(n)] + [{"text": "done"}]


async def agent_job(provider: Provider, bus: EventBus, prompt: str = "Go", turns: int = 8):
    """One job of the agent 'ag', with no tools wired (each call is refused:
    the conversation still grows by a call and its result each turn)."""
    return await run_agent(agent_id="ag", provider=provider, bridge=None, bus=bus, base_msg={},
                           prompt=prompt, instructions="Be brief.", model="m",
                           temperature=None, max_tokens=100, max_turns=turns,
                           tool_timeout=None)


def recorded(bus: EventBus) -> list[Any]:
    events: list[Any] = []
    bus.subscribe(events.append)
    return events


async def test_a_conversation_changed_other_than_by_growing_is_sent_whole_again():
    """A provider trims the live list it was handed at its fourth request
    (context trimming): the next request's event carries it all, and what
    is rebuilt is what the provider was handed, before and after."""
    def trim(messages):
        del messages[1:5]

    provider = Recording(call_turns(6), at={3: trim})
    bus = EventBus()
    events = recorded(bus)
    await agent_job(provider, bus)
    reqs = [e for e in events if e.type == "llm.request"]
    assert [e.since for e in reqs] == [0, 2, 4, 6, 0, 6, 8]
    assert [e.message_count for e in reqs] == [2, 4, 6, 8, 6, 8, 10]
    assert rebuilt(reqs) == provider.seen
    [conv] = inspector(events).conversations  # one job, not a new one at the shorter list
    assert conv.messages == provider.seen[-1]


async def test_a_secret_that_becomes_known_mid_run_is_masked_in_what_was_sent_before():
    secret = "pw-" + os.urandom(6).hex()
    provider = Recording(call_turns(3), at={2: lambda _messages: register_secret(secret)})
    bus = EventBus()
    events = recorded(bus)
    await agent_job(provider, bus, prompt=f"log in with {secret}")
    reqs = [e for e in events if e.type == "llm.request"]
    assert secret in reqs[0].messages[1]["content"]  # not known yet when it was sent
    assert [e.since for e in reqs] == [0, 2, 4, 0]  # known from the fourth request on
    whole = rebuilt(reqs)[-1]
    assert secret not in str(whole) and whole[1]["content"].startswith("log in with ")


async def test_the_first_request_anyone_hears_carries_the_whole_list():
    """Nobody listened to the first turns: the first event published is whole."""
    provider = Recording(call_turns(4))
    bus = EventBus()
    events: list[Any] = []
    provider.at = {2: lambda _messages: bus.subscribe(events.append)}
    await agent_job(provider, bus)
    reqs = [e for e in events if e.type == "llm.request"]
    assert [(e.turn, e.since) for e in reqs] == [(4, 0), (5, 8)]
    assert rebuilt(reqs) == provider.seen[3:]


async def test_a_subscriber_that_comes_in_while_another_listens_sees_what_is_new():
    """The bus was listened to already: the newcomer's first event carries
    what is new, and what came before stands as unrecorded."""
    provider = Recording(call_turns(4))
    bus = EventBus()
    bus.subscribe(lambda e: None)
    events: list[Any] = []
    provider.at = {2: lambda _messages: bus.subscribe(events.append)}
    await agent_job(provider, bus)
    reqs = [e for e in events if e.type == "llm.request"]
    assert (reqs[0].turn, reqs[0].since) == (4, 6)
    known = request_messages([], reqs[0])
    assert [m["role"] for m in known[:6]] == ["unrecorded"] * 6
    assert known[6:] == provider.seen[3][6:]


async def test_jobs_of_one_agent_at_once_each_rebuild_their_own_conversation():
    """Two messages reach the agent together: their requests interleave
    (same agent, no parent); the inspector tells them apart by job."""
    a, b = Recording(call_turns(5)), Recording(call_turns(3))
    bus = EventBus()
    events = recorded(bus)
    await asyncio.gather(agent_job(a, bus, prompt="job A"), agent_job(b, bus, prompt="job B"))
    reqs = [e for e in events if e.type == "llm.request"]
    order = [e.job for e in reqs]
    assert order[:4] == [order[0], order[1]] * 2 and order[0] != order[1]  # interleaved
    convs = inspector(events).conversations
    assert len(convs) == 2
    by_prompt = {c.messages[1]["content"]: c for c in convs}
    assert by_prompt["job A"].messages == a.seen[-1]
    assert by_prompt["job B"].messages == b.seen[-1]


# -- hooks: replaced text, turns sent back in ------------------------------------------

async def test_a_hook_that_replaces_the_models_text_shows_in_the_rebuilt_conversation(llm):
    llm.replies = [openai_reply("The password is hunter2.", tool_calls=[("echo", {"text": "x"})]),
                   openai_reply("Done.")]
    nodes = [{"id": "scrub", "type": "core.change",
              "params": {"rules": fixed([{"action": "set", "path": "payload",
                                          "value": "[withheld by policy]"}])}},
             result_node("rewrite", "replace")]
    f = hook_flow(hook_agent(llm, block_on_turn=True), nodes,
                  [("agent", "on_turn", "scrub"), ("scrub", "out", "rewrite")])
    result, rec, _ = await run(f, reg=hook_reg())
    assert result.status == "ok", rec.of("node.error")
    reqs = rec.of("llm.request")
    sent = [r["body"]["messages"] for r in llm.requests]
    assert [shape(m) for m in rebuilt(reqs)] == [shape(m) for m in sent]
    assert rebuilt(reqs)[-1][2]["content"] == "[withheld by policy]"


async def test_a_turn_sent_into_the_work_going_on_rebuilds_as_the_llm_received_it(llm):
    """on_turn sends a user turn back in during the first turn: it joins
    the work (an append to the conversation, carried as what is new)."""
    result, rec, _ = await run(turn_sent_in_flow(llm), reg=hook_reg())
    assert result.status == "ok", rec.of("node.error")
    reqs = rec.of("llm.request")
    sent = [r["body"]["messages"] for r in llm.requests]
    assert len({e.job for e in reqs}) == 1 and all(e.since for e in reqs[1:])
    assert [shape(m) for m in rebuilt(reqs)] == [shape(m) for m in sent]
    assert ("user", "please also say hi", (), "") in shape(rebuilt(reqs)[-1])


async def test_new_work_on_the_same_conversation_is_sent_whole(llm):
    """on_end sends a new turn back in once the agent answered: a new job
    on the same history, whose first request carries all of it."""
    llm.replies = [openai_reply(tool_calls=[("echo", {"text": "x"})]),
                   openai_reply("first answer"), openai_reply("second answer")]
    nodes, wires = one_more_turn()
    f = hook_flow(hook_agent(llm), nodes, [*wires, ("more", "out", "agent")],
                  prompt="first question")
    result, rec, _ = await run(f, reg=hook_reg())
    assert result.status == "ok", rec.of("node.error")
    assert [o["payload"] for o in rec.debug_values("show")] == ["first answer", "second answer"]
    reqs = rec.of("llm.request")
    sent = [r["body"]["messages"] for r in llm.requests]
    assert [e.since for e in reqs] == [0, 2, 0]
    assert reqs[0].job == reqs[1].job != reqs[2].job
    assert shape(reqs[2].messages) == shape(sent[2])  # the whole history, the new turn last
    first, second = inspector(rec.events).conversations
    assert shape(first.messages) == shape(sent[1])
    assert shape(second.messages) == shape(sent[2])


# -- readers: lost events, older writers ------------------------------------------------

def test_a_reader_lines_up_what_follows_a_lost_or_cut_event():
    first = LlmRequest(agent="ag", job=1, turn=1, message_count=3, since=0,
                       messages=[{"role": "user", "content": "a"}])  # stored cut: 1 of 3
    later = LlmRequest(agent="ag", job=1, turn=2, message_count=5, since=3,
                       messages=[{"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}])
    known: list = []
    request_messages(known, first)
    got = request_messages(known, later)
    assert [m["role"] for m in got] == ["user", "unrecorded", "unrecorded", "assistant", "user"]
    assert [m["content"] for m in got][3:] == ["b", "c"]


def test_an_older_writers_request_carries_the_whole_list():
    line = {"type": "llm.request", "ts": 1.0, "run_id": "r", "agent": "ag", "turn": 2,
            "message_count": 2, "tools": [], "messages": [{"role": "user", "content": "a"},
                                                          {"role": "assistant", "content": "b"}]}
    e = read_event(line)
    assert (e.since, e.job) == (0, 0)
    assert request_messages([{"role": "user", "content": "old"}], e) == line["messages"]
    # And the inspector still tells its jobs apart by turn, as before.
    one = read_event({**line, "turn": 1})
    model = inspector([one, e, read_event({**line, "turn": 1})])
    assert len(model.conversations) == 2

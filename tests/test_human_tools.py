"""ai.ask_human and ai.think as an agent's tools, in real runs (scripted
turns); the question answered at a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import threading

from nodes.ai.human import AskHuman, Think
from runtime.approval import People
from runtime.registry import Registry
from tests.servers.flows import AI_SCOPE, Agent, DebugNode, Inject, agent_flow, fixed, run, scripted


def reg() -> Registry:
    return Registry([Inject, DebugNode, Agent, AskHuman, Think])


def ask_flow(**ask_params):
    turns = [{"tool_calls": [{"name": "ask_human", "arguments": {
        "question": "Ship to the old address?", "choices": ["yes", "no"]}}]},
        {"text": "done"}]
    return agent_flow(scripted(turns), [{"id": "ask_person", "type": "ai.ask_human",
                                         "params": {"question": AI_SCOPE, "choices": AI_SCOPE,
                                                    **ask_params}}])


async def test_a_fixed_answer_answers_at_once():
    result, rec, _ = await run(ask_flow(fixed_answer=fixed("yes")), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    [call] = rec.debug_values()[0]["agent"]["tool_calls"]
    assert call["status"] == "success"
    assert call["data"] == {"answer": "yes", "by": "fixed"}


async def test_the_question_is_asked_at_the_terminal():
    master, slave = pty.openpty()
    seen = []

    def person():
        buf = ""
        while "answer:" not in buf:
            buf += os.read(master, 4096).decode()
        seen.append(buf)
        os.write(master, b"2\n")  # picks the second choice by number

    t = threading.Thread(target=person, daemon=True)
    t.start()
    try:
        result, rec, _ = await run(ask_flow(), reg=reg(), engine_hook=lambda e: setattr(
            e, "people", People(tty_path=os.ttyname(slave))))
    finally:
        t.join(10)
        os.close(slave)
        os.close(master)
    assert result.status == "ok", rec.of("node.error")
    [call] = rec.debug_values()[0]["agent"]["tool_calls"]
    assert call["data"] == {"answer": "no", "by": "terminal"}
    assert "the agent asks: Ship to the old address?" in seen[0]
    assert "1. yes" in seen[0] and "2. no" in seen[0]
    # While it waited, the node said so.
    assert any(e.node == "ask_person" and e.text == "waiting for an answer"
               for e in rec.of("node.status"))


async def test_no_terminal_is_a_tool_error_the_llm_can_read(tmp_path):
    result, rec, _ = await run(ask_flow(), reg=reg(), engine_hook=lambda e: setattr(
        e, "people", People(tty_path=str(tmp_path / "none"))))
    [call] = rec.debug_values()[0]["agent"]["tool_calls"]
    assert call["status"] == "error"
    assert "no one to ask: there is no terminal" in call["error"]
    assert "fixed answer" in call["error"]


async def test_think_is_answered_at_once_and_kept_as_a_note():
    turns = [{"tool_calls": [{"name": "think", "arguments": {
        "thought": "First count the orders, then mail the total."}}]}, {"text": "ok"}]
    flow = agent_flow(scripted(turns), [{"id": "th", "type": "ai.think"}])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok", rec.of("node.error")
    [call] = rec.debug_values()[0]["agent"]["tool_calls"]
    assert call["data"] == {"noted": "noted"}
    assert any(e.node == "th" and "First count the orders" in e.text for e in rec.of("log"))

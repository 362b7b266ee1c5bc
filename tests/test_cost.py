"""Cost and budgets: prices per model, totals per request, agent and run,
tool results' own cost, and budgets that stop an agent (runtime.cost).

A priced run needs a provider that is really called: the local
OpenAI-compatible server (tests/servers/llm.py) plays the turns. The
scripted provider is offline and never priced."""

from __future__ import annotations

import json

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime import cost
from runtime.flow import parse_flow
from runtime.node import AI, CUSTOM, Node, Output, Param, Tool, node
from runtime.registry import Registry
from tests.servers.flows import TEST_NODES, agent_flow, fixed, run, scripted
from tests.servers.llm import LlmServer, openai_reply

# USD per million tokens: easy sums.
PRICES = {"models": {"test-model": {"input": 2.0, "output": 10.0, "cached": 1.0}}}


@pytest.fixture
def prices(data_dir):
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "prices.json").write_text(json.dumps(PRICES), encoding="utf-8")
    return data_dir


@node("test.paid", name="Paid", category="Test", tool=Tool("paid", "A paid lookup"))
class PaidTool(Node):
    """Reports what the call cost, as seed 003's billing: an output ``cost``."""

    q = Param(str, "What to look up", scope=AI, allow=AI | CUSTOM)
    answer = Output(str, "The answer")
    cost = Output(float, "What the call cost, USD")

    def on_message(self, msg):
        self.answer.set(msg, f"found {self.q.get(msg)}")
        self.cost.set(msg, 0.25)


def reg() -> Registry:
    return Registry([Inject, DebugNode, Agent, *TEST_NODES, PaidTool])


USAGE1 = {"input_tokens": 1000, "output_tokens": 100}
USAGE2 = {"input_tokens": 3000, "output_tokens": 200}
CALL = {"tool_calls": [{"name": "paid", "arguments": {"q": "x" * 400}}], "usage": USAGE1}
# 1000*2 + 100*10 = 3000 µ$; 3000*2 + 200*10 = 8000 µ$
COST1, COST2 = 0.003, 0.008


@pytest.fixture
def llm(monkeypatch):
    """A local OpenAI-compatible server; ``served(llm, turns, ...)`` makes
    an agent that asks it for turns written as the scripted provider's."""
    monkeypatch.setenv("TEST_KEY", "sk-test-cost")
    with LlmServer() as server:
        yield server


def served(llm: LlmServer, turns: list[dict], model: str = "test-model", **params) -> dict:
    llm.replies = [openai_reply(t.get("text"), [(c["name"], c["arguments"])
                                               for c in t.get("tool_calls", [])] or None,
                                model=model, usage=(t["usage"]["input_tokens"],
                                                    t["usage"]["output_tokens"]))
                   for t in turns]
    return {"provider": fixed("openai"), "base_url": fixed(llm.openai_url),
            "api_key_env": fixed("TEST_KEY"), "model": fixed(model),
            **{k: fixed(v) for k, v in params.items()}}


def test_request_cost_from_the_table_and_none_for_an_unknown_model(prices):
    assert cost.request_cost("test-model", USAGE1) == pytest.approx(COST1)
    # cached tokens are within input_tokens, at the cached rate
    assert cost.request_cost("test-model", {"input_tokens": 1000, "cached_tokens": 400,
                                            "output_tokens": 0}) == pytest.approx(0.0016)
    assert cost.request_cost("no-such-model", USAGE1) is None
    assert cost.request_cost("gpt-4o-mini-extra", USAGE1) is None  # no guess from a prefix


def test_shipped_table_prices_the_default_models_and_the_user_file_wins(data_dir):
    from nodes.ai import DEFAULT_MODEL

    shipped = json.loads(cost.SHIPPED.read_text())
    assert shipped["date"] and "Source" in shipped["_note"]
    for provider in ("openai", "anthropic"):
        assert cost.price_of(DEFAULT_MODEL[provider]) is not None
    before = cost.request_cost("gpt-4o-mini", USAGE1)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "prices.json").write_text(json.dumps(
        {"models": {"gpt-4o-mini": {"input": 1.0, "output": 1.0}}}))
    assert cost.request_cost("gpt-4o-mini", USAGE1) == pytest.approx(0.0011) != before
    assert cost.price_of("claude-sonnet-4-5") is not None  # the rest of the table stays


def test_tool_tokens_are_the_results_share_of_the_next_request():
    got = cost.tool_tokens(1000, 600 + 400, {"c1": "b" * 400})
    assert got == {"c1": 400}
    assert cost.tool_tokens(0, 1, {"c1": "x"}) == {"c1": 0}


async def test_totals_per_request_agent_and_run_with_tool_cost(prices, llm):
    flow = agent_flow(served(llm, [CALL, {"text": "done", "usage": USAGE2}]),
                      [{"id": "paid", "type": "test.paid", "params": {}}])
    result, rec, engine = await run(flow, reg=reg())
    assert result.status == "ok", rec.dump()
    responses = rec.of("llm.response")
    assert [r.cost_usd for r in responses] == pytest.approx([COST1, COST2])
    out = rec.debug_values()[0]["agent"]
    assert out["cost_usd"] == pytest.approx(COST1 + COST2)
    assert out["usage"] == {"input_tokens": 4000, "output_tokens": 300}
    # the paid result is a part of the second request's 3000 input tokens
    share = out["tool_calls"][0]["result_tokens"]
    assert 0 < share < 3000
    finished = rec.of("run.finished")[0]
    assert finished.cost_usd == pytest.approx(COST1 + COST2)
    assert finished.usage["input_tokens"] == 4000 and finished.usage["output_tokens"] == 300
    assert finished.tool_cost_usd == pytest.approx(0.25)  # apart from the LLM's
    assert engine.cost.agents["agent"].tokens == 4300
    [paid] = rec.of("tool.result")
    assert paid.cost_usd == pytest.approx(0.25)  # the call's own event says what it cost


async def test_unknown_model_costs_none_but_tokens_count(prices):
    flow = agent_flow(scripted([{"text": "hi", "usage": USAGE1}], model="mystery"), [])
    result, rec, _ = await run(flow, reg=reg())
    assert result.status == "ok", rec.dump()
    assert rec.of("llm.response")[0].cost_usd is None
    finished = rec.of("run.finished")[0]
    assert finished.cost_usd is None and finished.usage["input_tokens"] == 1000


def _turns(n: int) -> list[dict]:
    return [CALL] * n + [{"text": "done", "usage": USAGE1}]


async def test_agent_budget_in_usd_stops_after_the_turn_that_crossed_it(prices, llm):
    # 0.004: turn 1 spends 0.003 (under), turn 2 0.006 (crossed): no turn 3.
    flow = agent_flow(served(llm, _turns(5), budget_usd=0.004),
                      [{"id": "paid", "type": "test.paid", "params": {}}])
    result, rec, _ = await run(flow, reg=reg())
    assert len(rec.of("llm.request")) == 2
    assert result.status == "error"
    errors = [e.message for e in rec.of("node.error")]
    assert errors and "the agent's budget of $0.004 is spent ($0.006000 in 2 LLM requests)" \
        in errors[0]
    assert "no more LLM turns" in errors[0]
    finished = rec.of("run.finished")[0]
    assert "budget of $0.004" in finished.message
    assert finished.cost_usd == pytest.approx(0.006)


async def test_agent_budget_in_tokens(prices):
    flow = agent_flow(scripted(_turns(5), model="mystery", budget_tokens=2000),
                      [{"id": "paid", "type": "test.paid", "params": {}}])
    result, rec, _ = await run(flow, reg=reg())
    assert len(rec.of("llm.request")) == 2  # 1100 after one, 2200 after two
    assert "budget of 2,000 tokens is spent (2,200 tokens" in rec.of("run.finished")[0].message


async def test_run_budget_from_the_flow_settings(prices, llm):
    flow = agent_flow(served(llm, _turns(5)),
                      [{"id": "paid", "type": "test.paid", "params": {}}])
    data = flow.model_dump(by_alias=True, exclude_none=True)
    data["settings"]["budget_usd"] = 0.001
    flow = parse_flow(data)
    result, rec, _ = await run(flow, reg=reg())
    assert len(rec.of("llm.request")) == 1
    finished = rec.of("run.finished")[0]
    assert "the run's budget of $0.001 is spent" in finished.message
    assert result.status == "error"


async def test_usd_budget_without_a_price_is_refused_before_any_request(prices, llm):
    flow = agent_flow(served(llm, _turns(1), model="mystery", budget_usd=1.0), [])
    result, rec, _ = await run(flow, reg=reg())
    assert rec.of("llm.request") == []
    assert "model 'mystery' has no price" in rec.of("node.error")[0].message


async def test_a_scripted_run_is_offline_its_tokens_count_but_it_costs_nothing(prices):
    """Issue T3 2/10, item 8: the scripted provider plays a model offline,
    so its usage has no USD, even against a priced model, and a USD budget
    is neither spent nor refused; tokens still count (and their budget)."""
    flow = agent_flow(scripted([CALL, {"text": "done", "usage": USAGE2}], model="test-model",
                               budget_usd=0.001),
                      [{"id": "paid", "type": "test.paid", "params": {}}])
    result, rec, engine = await run(flow, reg=reg())
    assert result.status == "ok", rec.dump()
    assert [r.cost_usd for r in rec.of("llm.response")] == [None, None]
    assert rec.debug_values()[0]["agent"]["cost_usd"] is None
    finished = rec.of("run.finished")[0]
    assert finished.cost_usd is None and result.cost_usd is None
    assert finished.usage["input_tokens"] == 4000 and finished.usage["output_tokens"] == 300
    assert finished.tool_cost_usd == pytest.approx(0.25)  # the tool's own charge is real
    assert engine.cost.run.offline == 2 and engine.cost.run.unpriced == 0


def test_budget_params_must_not_be_negative():
    problems = Agent.check({"budget_usd": type("P", (), {"value": -1.0})()})
    assert any(name == "budget_usd" for name, _ in problems)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_cached_prompt_tokens_from_the_provider_are_priced_at_the_cached_rate(
        prices, kind, monkeypatch):
    """The providers' own usage fields, over the wire through the official
    SDKs: OpenAI's prompt_tokens_details.cached_tokens (part of the prompt
    tokens), Anthropic's cache_read_input_tokens (apart from input_tokens)."""
    from tests.servers.flows import fixed
    from tests.servers.llm import LlmServer, anthropic_reply, openai_reply

    monkeypatch.setenv("TEST_KEY", "sk-test-cache")
    with LlmServer() as llm:
        if kind == "openai":
            llm.replies = [openai_reply("hi", model="test-model", usage=(1000, 100), cached=600)]
            params = {"provider": fixed("openai"), "base_url": fixed(llm.openai_url),
                      "api_key_env": fixed("TEST_KEY")}
        else:  # 400 outside the cache + 600 read from it: the same 1,000 in all
            llm.replies = [anthropic_reply("hi", model="test-model", usage=(400, 100),
                                           cached=600)]
            params = {"provider": fixed("anthropic"), "base_url": fixed(llm.anthropic_url),
                      "api_key_env": fixed("TEST_KEY"), "max_tokens": fixed(256)}
        params["model"] = fixed("test-model")
        result, rec, _ = await run(agent_flow(params, []), reg=reg())
    assert result.status == "ok", rec.of("node.error")
    [response] = rec.of("llm.response")
    assert response.usage == {"input_tokens": 1000, "output_tokens": 100, "cached_tokens": 600}
    # 400 * 2 + 600 * 1 (cached) + 100 * 10 = 2400 µ$
    assert response.cost_usd == pytest.approx(0.0024)
    assert rec.of("run.finished")[0].usage["cached_tokens"] == 600

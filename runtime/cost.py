"""What a run costs: tokens and USD per LLM request, per agent and per run,
what tool results reported as their own cost, and the budgets that stop an
agent.

Prices (USD per million tokens: input, output, cached input) come from
``resources/prices.json``; a file ``$SWITCHBOARD_DATA_DIR/prices.json`` of
the same shape overrides a model's entry or adds one. A model in neither
has no cost (None): never a guess from a similar name.

Usage is ``{"input_tokens", "output_tokens", "cached_tokens"}``; cached
tokens are counted within ``input_tokens`` (as OpenAI reports them) and
priced at the cached rate (the input rate where a model has none).

A tool call's tokens are an estimate: its result goes into the next
request, whose ``input_tokens`` the provider reports for the whole
conversation; the call is given the share of them that its result's text is
of the text of that request (characters). See :func:`tool_tokens`.

An offline provider (the scripted one, which plays turns written in the
flow) costs nothing, whatever model it plays: its requests count their
tokens but have no USD (None, shown as "offline"), and a budget in USD
does not apply to them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .node import NodeConfigError

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parents[1] / "resources" / "prices.json"
FILE_NAME = "prices.json"
#: The run's accumulator, as an engine resource (``engine.resource(KEY, RunCost)``).
KEY = "cost"

_cache: dict[tuple[str, float], dict[str, dict[str, float]]] = {}


def user_prices_path() -> Path:
    from .paths import data_dir

    return data_dir() / FILE_NAME


def _read(path: Path) -> dict[str, dict[str, float]]:
    """A price file's models, read once per modification; a broken file is
    logged and counts as empty (a run must not fail for its prices)."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    key = (str(path), mtime)
    if key not in _cache:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            models = raw.get("models", {}) if isinstance(raw, dict) else {}
            _cache[key] = {str(m): _entry(p) for m, p in models.items() if _entry(p)}
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("ignoring the price file %s: %s", path, exc)
            _cache[key] = {}
    return _cache[key]


def _entry(p: Any) -> dict[str, float]:
    if not isinstance(p, dict):
        return {}
    out = {k: float(p[k]) for k in ("input", "output", "cached")
           if isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool) and p[k] >= 0}
    return out if "input" in out and "output" in out else {}


def price_table() -> dict[str, dict[str, float]]:
    """Model -> {input, output[, cached]} USD per million tokens: the shipped
    table with the user's file over it."""
    return {**_read(SHIPPED), **_read(user_prices_path())}


def shipped_prices() -> dict[str, dict[str, float]]:
    return dict(_read(SHIPPED))


def user_prices() -> dict[str, dict[str, float]]:
    """The user's own entries (``$SWITCHBOARD_DATA_DIR/prices.json``)."""
    return dict(_read(user_prices_path()))


#: Most models a user's price file may hold; the highest price per million
#: tokens it takes (a typo of 1000x is refused, not billed).
MAX_USER_MODELS = 1000
MAX_PRICE = 10_000.0


def price_problem(model: str, entry: dict[str, Any]) -> str | None:
    """Why one entry of a price table is wrong, naming the model and field."""
    if not model or not model.strip() or len(model) > 200:
        return "a model needs a name of 1 to 200 characters"
    for key in ("input", "output", "cached"):
        value = entry.get(key)
        if value is None and key == "cached":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{model}: {key} must be a number (USD per million tokens)"
        if not 0 <= value <= MAX_PRICE:
            return f"{model}: {key} {value:g} is outside 0 to {MAX_PRICE:g} USD per million tokens"
    return None


def save_user_prices(models: dict[str, dict[str, Any]]) -> Path:
    """Write the user's price file (atomically: a crash keeps the old one):
    ``models`` are the entries that differ from the shipped table or add to
    it. Raises ValueError naming the first wrong entry."""
    from .paths import write_atomic_bytes

    if len(models) > MAX_USER_MODELS:
        raise ValueError(f"{len(models)} models, more than the {MAX_USER_MODELS} a price file "
                         "holds")
    clean: dict[str, dict[str, float]] = {}
    for model, entry in models.items():
        problem = price_problem(model, entry)
        if problem:
            raise ValueError(problem)
        clean[model.strip()] = {k: float(entry[k]) for k in ("input", "output", "cached")
                                if entry.get(k) is not None}
    path = user_prices_path()
    body = {"_note": "Your model prices, USD per million tokens; they win over the shipped "
                     "table (resources/prices.json). Edited in the designer: Run > Model Prices.",
            "models": clean}
    write_atomic_bytes(path, (json.dumps(body, indent=1) + "\n").encode(), 0o644)
    for key in [k for k in _cache if k[0] == str(path)]:
        del _cache[key]  # read again even within the clock's resolution
    return path


def price_of(model: str) -> dict[str, float] | None:
    return price_table().get(model) if model else None


_LOOK_UP: Any = object()


def request_cost(model: str, usage: dict[str, Any], price: Any = _LOOK_UP) -> float | None:
    """USD of one LLM request, or None when the model has no price
    (``price``: the model's, when the caller looked it up already)."""
    if price is _LOOK_UP:
        price = price_of(model)
    if price is None:
        return None
    inp = int(usage.get("input_tokens", 0) or 0)
    out = int(usage.get("output_tokens", 0) or 0)
    cached = min(inp, int(usage.get("cached_tokens", 0) or 0))
    usd = ((inp - cached) * price["input"] + cached * price.get("cached", price["input"])
           + out * price["output"]) / 1_000_000
    return round(usd, 10)


def tool_tokens(next_input_tokens: int, request_chars: int,
                results: dict[str, str]) -> dict[str, int]:
    """Estimated input tokens each tool result cost in the next request:
    ``next_input_tokens`` split by the share of the request's characters
    (``request_chars``: every message's text, instructions included) that
    each result's text (``results``: call id -> text) is."""
    total = request_chars
    if total <= 0 or next_input_tokens <= 0:
        return {k: 0 for k in results}
    return {k: round(next_input_tokens * len(t) / total) for k, t in results.items()}


def tool_cost(data: Any) -> float | None:
    """What a tool result says it cost: its ``cost`` output, a number in USD."""
    if isinstance(data, dict):
        c = data.get("cost")
        if isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0:
            return float(c)
    return None


@dataclass
class Spend:
    """Tokens and USD of some LLM requests (one agent's, or a run's)."""

    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0,
                                                           "cached_tokens": 0})
    cost_usd: float = 0.0
    #: Requests whose model had no price: their USD is unknown.
    unpriced: int = 0
    requests: int = 0
    #: Requests to an offline provider (scripted): no money was spent.
    offline: int = 0

    def add(self, usage: dict[str, Any], cost: float | None, offline: bool = False) -> None:
        mine, get = self.usage, usage.get
        if n := get("input_tokens"):
            mine["input_tokens"] += int(n)
        if n := get("output_tokens"):
            mine["output_tokens"] += int(n)
        if n := get("cached_tokens"):
            mine["cached_tokens"] += int(n)
        self.requests += 1
        if offline:
            self.offline += 1
        elif cost is None:
            self.unpriced += 1
        else:
            self.cost_usd += cost

    @property
    def tokens(self) -> int:
        return self.usage["input_tokens"] + self.usage["output_tokens"]

    @property
    def known_cost(self) -> float | None:
        """USD, or None when any request had no price (a part would mislead)
        or every one went to an offline provider (there is no cost)."""
        if self.unpriced or (self.requests and self.offline == self.requests):
            return None
        return round(self.cost_usd, 10)


@dataclass
class RunCost:
    """One run's totals: every LLM request, per agent, and tool costs."""

    run: Spend = field(default_factory=Spend)
    agents: dict[str, Spend] = field(default_factory=dict)
    tool_cost_usd: float = 0.0
    budget_usd: float | None = None
    budget_tokens: int | None = None
    #: Why a budget stopped an agent (the first time), for RunFinished.
    exceeded: str = ""

    def add_request(self, agent: str, usage: dict[str, Any], cost: float | None,
                    offline: bool = False) -> None:
        self.run.add(usage, cost, offline)
        self.agents.setdefault(agent, Spend()).add(usage, cost, offline)

    def add_tool_cost(self, usd: float) -> None:
        self.tool_cost_usd += usd


def over_budget(spend: Spend, budget_usd: float | None, budget_tokens: int | None,
                what: str) -> str:
    """Why ``spend`` is past a budget ("" when it is not). ``what`` names the
    budget ("the agent's budget_usd")."""
    if budget_tokens and spend.tokens >= budget_tokens:
        return (f"{what} budget of {budget_tokens:,} tokens is spent ({spend.tokens:,} tokens "
                f"in {spend.requests} LLM requests)")
    if budget_usd and spend.cost_usd >= budget_usd:
        return (f"{what} budget of ${budget_usd:g} is spent (${spend.cost_usd:.6f} in "
                f"{spend.requests} LLM requests)")
    return ""


def check_priced(model: str, budget_usd: float | None, what: str) -> None:
    """A budget in USD needs the model's price: refuse to start without it."""
    if budget_usd and price_of(model) is None:
        raise NodeConfigError(
            f"{what} is a budget in USD, but model '{model}' has no price: add it to "
            f"{user_prices_path()} or give a budget in tokens")


class AgentMeter:
    """One agent's accounting while it answers one message: prices each
    request, adds it to the run's totals, sums tool costs, estimates each
    tool result's tokens, and refuses a request past a budget.

    The agent's budget counts all its requests in the run (every message it
    handled); without an engine (a bare loop in a test), this message's."""

    def __init__(self, agent: str, model: str, engine: Any = None,
                 budget_usd: float | None = None, budget_tokens: int | None = None,
                 offline: bool = False) -> None:
        self.agent = agent
        self.model = model
        self.budget_usd = budget_usd or None
        self.budget_tokens = budget_tokens or None
        #: The provider is offline (scripted): nothing is priced or spent.
        self.offline = offline
        self.run: RunCost | None = getattr(engine, "cost", None)
        self.own = Spend()
        # This message's USD; None once a request had no price, and offline.
        self.cost_usd: float | None = None if offline else 0.0
        #: Call id -> estimated tokens its result cost in the next request.
        self.tool_tokens: dict[str, int] = {}
        self._pending: dict[str, Any] = {}  # call id -> its text, or its ToolOutcome
        self._price = None if offline else price_of(model)  # once per agent run
        # Where each request is added, found once per message, not per turn.
        self._spends = (self.own,) if self.run is None else (
            self.run.run, self.run.agents.setdefault(agent, Spend()))
        #: Any budget to check before a request (a turn without one pays nothing).
        self.budgeted = bool(self.budget_usd or self.budget_tokens or (
            self.run is not None and (self.run.budget_usd or self.run.budget_tokens)))
        if not offline:
            check_priced(model, self.budget_usd, "the agent's budget_usd")
            if self.run is not None:
                check_priced(model, self.run.budget_usd, "the flow's budget_usd")

    @property
    def agent_spend(self) -> Spend:
        if self.run is not None:
            return self.run.agents.setdefault(self.agent, Spend())
        return self.own

    def before_request(self) -> None:
        """Raise NodeConfigError when a budget is spent: no more LLM turns."""
        if not self.budgeted:
            return
        why = over_budget(self.agent_spend, self.budget_usd, self.budget_tokens, "the agent's")
        if not why and self.run is not None:
            why = over_budget(self.run.run, self.run.budget_usd, self.run.budget_tokens,
                              "the run's")
        if why:
            why = f"{self.agent}: {why}; no more LLM turns"
            if self.run is not None and not self.run.exceeded:
                self.run.exceeded = why
            raise NodeConfigError(why)

    def after_reply(self, usage: dict[str, Any],
                    request_chars: int | Callable[[], int]) -> float | None:
        """Price one request (None: no price), count it, and give the tool
        results it carried their share of its input tokens (``request_chars``:
        the characters of all the request's texts, or what counts them:
        called only when a share is to be worked out, i.e. the request had
        tool results and reported input tokens)."""
        cost = None if self.offline else request_cost(self.model, usage, self._price)
        for spend in self._spends:  # the run's and the agent's, or this message's
            spend.add(usage, cost, self.offline)
        if self.cost_usd is not None:
            self.cost_usd = None if cost is None else round(self.cost_usd + cost, 10)
        if pending := self._pending:
            inp = int(usage.get("input_tokens", 0) or 0)
            if inp > 0:
                chars = request_chars() if callable(request_chars) else request_chars
                texts = {k: t if type(t) is str else t.content() for k, t in pending.items()}
                self.tool_tokens.update(tool_tokens(inp, chars, texts))
            else:  # no tokens to share: each result's share is 0
                self.tool_tokens.update(dict.fromkeys(pending, 0))
            self._pending = {}
        return cost

    def after_tools(self, results: list[Any]) -> None:
        """One turn's calls: their costs go to the run, their texts wait for
        the next request's token count. Each result is a ToolOutcome (its
        ``call_id``, ``content()``: the text the model gets, ``data``), or a
        (call id, text, data) tuple."""
        pending, run = self._pending, self.run
        for r in results:
            if type(r) is tuple:
                call_id, text, data = r
                pending[call_id] = text
            else:
                pending[r.call_id] = r  # its text is read only if a share is worked out
                data = r.data
            if run is not None and isinstance(data, dict) and "cost" in data:
                usd = tool_cost(data)
                if usd is not None:
                    run.add_tool_cost(usd)


def fmt_usd(usd: float | None) -> str:
    """"$0.0042", "$0.125", "$3.20"; "" for None (no price)."""
    if usd is None:
        return ""
    if usd == 0:
        return "$0"
    if usd < 0.01:
        return f"${usd:.4f}"
    if usd < 1:
        return f"${usd:.3f}"
    return f"${usd:,.2f}"


def summary(usage: dict[str, Any] | None, cost_usd: float | None, tool_cost_usd: float = 0.0,
            offline: bool = False) -> str:
    """A run's cost in a few words, for the status bar and the history:
    "$0.0110 · 4,300 tokens · tools $0.25"; "" when it used no LLM and no
    paid tool. Tokens without a USD figure: some model had no price.
    ``offline``: every LLM request went to an offline provider (scripted):
    "offline · 4,300 tokens", never a price."""
    usage = usage or {}
    tokens = int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
    parts = []
    if offline:
        parts.append("offline")
    elif cost_usd is not None:
        parts.append(fmt_usd(cost_usd))
    if tokens:
        parts.append(f"{tokens:,} tokens")
    if tool_cost_usd:
        parts.append(f"tools {fmt_usd(tool_cost_usd)}")
    return " · ".join(parts)

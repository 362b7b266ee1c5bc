"""What the subflow tests share (docs/subflows.md): the library kept to the
test's own data dir, and builders for flows with subflows and a run of one.
Import the ``_own_library`` fixture into a test module to make it autouse
there (``# noqa: F401 - the autouse fixture``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import Flow
from runtime.flow.subflows import LIBRARY_ENV


@pytest.fixture(autouse=True)
def _own_library(data_dir, monkeypatch):
    """No library folder but the test's own (a fresh data dir, no env)."""
    monkeypatch.delenv(LIBRARY_ENV, raising=False)


def P(value: Any) -> dict:
    """A custom-scope param setting."""
    return {"scope": "custom", "value": value}


def S(name: str) -> dict:
    """A param setting that reads the instance's subflow param ``name``."""
    return {"scope": "subflow", "param": name}


def W(src: str, dst: str) -> dict:
    """A wire 'a' -> 'b', or 'a:port' -> 'b:port' (ports out and in by default)."""
    s, _, sp = src.partition(":")
    d, _, dp = dst.partition(":")
    return {"from": [s, sp or "out"], "to": [d, dp or "in"]}


def flow(nodes: list[dict], wires: list[dict], subflows: list[dict] | None = None) -> Flow:
    data: dict[str, Any] = {"format": "switchboard.flow/1", "name": "t", "nodes": nodes,
                            "wires": wires}
    if subflows:
        data["subflows"] = subflows
    return Flow.model_validate(data)


def run(f: Flow, file: str = "") -> tuple[Any, list]:
    """Run ``f`` on the real engine: its result and every event."""
    bus = EventBus()
    events: list = []
    bus.subscribe(events.append)
    engine = Engine(f, bus=bus, file=file)
    result = asyncio.run(engine.run(timeout=20))
    return result, events

"""Run history: real runs of the engine recorded into a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import Engine
from runtime.events import EventBus, RunFinished, RunStarted, Stats
from runtime.flow import load_flow
from runtime.history import DATA_DIR_ENV, MAX_EVENT_CHARS, MAX_EVENTS, History, data_dir

EXAMPLE = Path(__file__).resolve().parents[1] / "resources" / "examples" / "order-triage.flow.json"


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    yield h
    h.close()


async def record_run(history: History, flow_path: Path = EXAMPLE) -> str:
    flow = load_flow(flow_path)
    bus = EventBus()
    rec = history.recorder()
    bus.subscribe(rec)
    engine = Engine(flow, bus=bus, file=str(flow_path))
    await engine.run(timeout=10)
    rec.close()
    return engine.run_id


def test_data_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "x"))
    assert data_dir() == tmp_path / "x"
    monkeypatch.delenv(DATA_DIR_ENV)
    assert "switchboard" in str(data_dir()).lower()


async def test_a_run_is_listed_and_its_events_come_back(history):
    run_id = await record_run(history)
    [info] = history.runs()
    assert info.id == run_id
    assert info.flow == "Order triage"
    assert info.status == "error" or info.status == "ok"
    assert info.duration_ms and info.duration_ms > 0
    events = history.events(run_id)
    assert events[0].type == "run.started" and events[-1].type == "run.finished"
    assert info.events == len(events)
    debug = [e for e in events if e.type == "debug"]
    assert any("A-1001" in str(e.value) for e in debug)
    # only the last stats keeps the messages
    stats = [e for e in events if e.type == "stats"]
    assert stats and stats[-1].last
    assert all(not s.last for s in stats[:-1])


async def test_history_survives_reopening(tmp_path):
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        run_id = await record_run(h)
    with History(path) as h:
        assert [r.id for r in h.runs()] == [run_id]
        assert h.events(run_id)


async def test_delete_and_prune(history):
    a = await record_run(history)
    b = await record_run(history)
    c = await record_run(history)
    assert [r.id for r in history.runs()] == [c, b, a]
    assert history.delete(b) == 1
    assert history.events(b) == []
    assert [r.id for r in history.runs()] == [c, a]
    assert history.prune(keep=1) == 1
    assert [r.id for r in history.runs()] == [c]


def test_a_run_cut_off_is_marked_interrupted(tmp_path):
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        rec = h.recorder()
        rec(RunStarted(run_id="r1", flow="F"))
        rec.flush()
    with History(path) as h:
        assert h.run("r1").status == "running"
        assert h.mark_interrupted() == 1
        assert h.run("r1").status == "interrupted"


def test_a_flood_is_capped(history, monkeypatch):
    monkeypatch.setattr("runtime.history.MAX_EVENTS", 10)
    rec = history.recorder()
    rec(RunStarted(run_id="r2"))
    from runtime.events import Log

    for i in range(50):
        rec(Log(run_id="r2", text=str(i)))
    rec(Stats(run_id="r2"))
    rec(RunFinished(run_id="r2", status="ok", duration_ms=5))
    info = history.run("r2")
    assert info.status == "ok"
    assert info.events == 11  # 10 kept + run.finished
    assert info.dropped == 50 - 9 + 1
    assert history.events("r2")[-1].type == "run.finished"
    assert MAX_EVENTS > 1000


# -- an event too large to keep whole ---------------------------------------------

def stored_rows(history: History, run_id: str) -> list[tuple[str, str]]:
    return history._db.execute("SELECT type, data FROM events WHERE run_id=? ORDER BY seq",
                               (run_id,)).fetchall()


async def test_a_huge_debug_event_is_stored_cut_to_1mb(history):
    """A debug node printing a 3 MB payload: before, the history kept the
    whole event (a 400 MB one made a 400 MB row); now at most
    MAX_EVENT_CHARS, saying what was cut, and the rest of the run as it was."""
    from runtime.flow import parse_flow

    big = "0123456789" * 300_000  # 3 MB
    flow = parse_flow({"format": "switchboard.flow/1", "name": "big", "nodes": [
        {"id": "src", "type": "core.inject", "params": {"payload": {"scope": "custom",
                                                                    "value": big}}},
        {"id": "show", "type": "core.debug", "params": {"path": {"scope": "custom",
                                                                 "value": "payload"}}},
    ], "wires": [{"from": ["src", "out"], "to": ["show", "in"]}]})
    bus = EventBus()
    rec = history.recorder()
    bus.subscribe(rec)
    seen = []
    bus.subscribe(seen.append)
    engine = Engine(flow, bus=bus)
    await engine.run(timeout=10)
    rec.close()
    assert [e.value for e in seen if e.type == "debug"] == [big]  # the live event is whole
    rows = stored_rows(history, engine.run_id)
    assert all(len(data) <= MAX_EVENT_CHARS for _, data in rows)
    [debug] = [e for e in history.events(engine.run_id) if e.type == "debug"]
    assert debug.node == "show" and debug.value.startswith(big[:100_000])
    assert debug.value.endswith("more characters not kept: this debug event was 3.0 MB, "
                                "run history keeps at most 1 MB of one]")
    assert history.run(engine.run_id).status == "ok"


def test_large_events_of_every_shape_read_back_as_their_type(history):
    from runtime.events import Debug, LlmRequest, ToolResult

    rec = history.recorder()
    rec(RunStarted(run_id="r3"))
    small = Debug(run_id="r3", node="a", value={"k": "v"})
    many = Debug(run_id="r3", node="b", value=[f"item {i}" for i in range(300_000)])
    deep = ToolResult(run_id="r3", agent="ag", tool="t", caller_id="c1", status="success",
                      data={"rows": [{"text": "y" * 5000} for _ in range(1000)]})
    # A field typed as a list of objects: no counting item may go into it.
    typed = LlmRequest(run_id="r3", agent="ag",
                       messages=[{"role": "user", "content": "z" * 2000}] * 3000)
    for event in (small, many, deep, typed):
        rec(event)
    rec(RunFinished(run_id="r3", status="ok", duration_ms=1))
    rows = stored_rows(history, "r3")
    assert all(len(data) <= MAX_EVENT_CHARS for _, data in rows)
    assert [t for t, _ in rows] == ["run.started", "debug", "debug", "tool.result",
                                    "llm.request", "run.finished"]
    back = history.events("r3")
    assert [e.type for e in back] == [t for t, _ in rows]
    assert back[1] == small  # what fits is kept exactly
    assert back[2].value[:3] == ["item 0", "item 1", "item 2"]
    assert back[2].value[-1].endswith("more items not kept")
    first = back[3].data["rows"][0]["text"]
    assert first.startswith("y" * 1000) and first.endswith("of one]")
    assert all(isinstance(m, dict) for m in back[4].messages) and back[4].messages

"""Events written by a newer Switchboard (a worker on a newer version, a
shared history, a run file from a colleague) are read by this one: fields it
does not know are left out and event types it does not know are skipped,
while a wrong value of a field it knows is still an error. Writing stays
strict (parse_event)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from runtime.events import Debug, RunFinished, RunStarted, parse_event, read_event, read_jsonl
from runtime.history import DB_NAME, History

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"


def newer(event_json: str, **extra: object) -> str:
    """The event as a newer version would write it: with fields added."""
    return json.dumps({**json.loads(event_json), **extra})


def test_unknown_fields_are_left_out_and_unknown_types_skipped(caplog):
    started = newer(RunStarted(run_id="r1", flow="Hello", worker="w@h").model_dump_json(),
                    region="eu-west", shard={"n": 3})
    with pytest.raises(ValidationError):
        parse_event(started)  # strict for what this version writes
    caplog.set_level(logging.INFO, logger="runtime.events")
    event = read_event(started)
    assert isinstance(event, RunStarted)
    assert (event.run_id, event.flow, event.worker) == ("r1", "Hello", "w@h")
    assert read_event(json.loads(started)) == event  # the same from a dict
    assert read_event('{"type": "agent.thought", "run_id": "r1", "text": "hm"}') is None
    said = caplog.text
    assert "'run.started' event's field 'region' is not known" in said
    assert "'run.started' event's field 'shard' is not known" in said
    assert "event type 'agent.thought' is not known" in said
    # Each is said once, not once per event.
    caplog.clear()
    read_event(started)
    assert caplog.text == ""


@pytest.mark.parametrize("line", [
    '{"type": "run.started", "nodes": "many"}',             # a known field, a wrong value
    '{"type": "run.started", "nodes": "many", "extra": 1}',  # ... with an unknown field too
    '[1, 2]',                                                # not an object
    'not json',
])
def test_what_no_version_writes_is_still_an_error(line):
    with pytest.raises(ValueError):
        read_event(line)


def test_a_run_file_from_a_newer_version_reads(tmp_path):
    path = tmp_path / "run.events.jsonl"
    path.write_text("\n".join([
        newer(RunStarted(run_id="r", flow="F").model_dump_json(), trace_id="abc"),
        '{"type": "span.opened", "run_id": "r", "ts": 1}',
        newer(Debug(run_id="r", node="show", value={"a": 1}).model_dump_json(), format="md"),
        RunFinished(run_id="r").model_dump_json(),
    ]) + "\n", encoding="utf-8")
    assert [e.type for e in read_jsonl(path)] == ["run.started", "debug", "run.finished"]


def sb(*args: str, data: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(data)}
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=60)


def test_runs_a_newer_version_stored_in_the_history_list_and_show(tmp_path):
    data = tmp_path / "data"
    r = sb("run", str(EXAMPLES / "hello.flow.json"), data=data)
    assert r.returncode == 0, r.stderr
    # A newer version wrote this run: its run.started and debug events have a
    # field more, and one event is of a type this version does not know.
    db = sqlite3.connect(data / DB_NAME)
    rows = db.execute("SELECT run_id, seq, type, data FROM events ORDER BY seq").fetchall()
    run_id = rows[0][0]
    for _run, seq, kind, text in rows:
        if kind in ("run.started", "debug"):
            db.execute("UPDATE events SET data=? WHERE run_id=? AND seq=?",
                       (newer(text, added_in_v9=True), run_id, seq))
    db.execute("UPDATE events SET seq = seq * 10")  # room for one between the first two
    db.execute("INSERT INTO events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
               (run_id, rows[0][1] * 10 + 5, "span.opened",
                json.dumps({"type": "span.opened", "run_id": run_id, "ts": 1})))
    db.commit()
    db.close()

    listed = sb("runs", "list", "--json", data=data)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["id"], row["flow"], row["status"]) == (run_id, "Hello", "ok")
    shown = sb("runs", "show", run_id[:8], data=data)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    assert shown.stdout.startswith(f"run {run_id}  Hello")
    assert "'Show' (show)" in shown.stdout
    # The history itself keeps every event it can read.
    types = [e.type for e in History(data / DB_NAME).events(run_id)]
    assert types[0] == "run.started" and types[-1] == "run.finished"
    assert "debug" in types and "span.opened" not in types


def test_a_newer_workers_stream_is_followed_to_its_end():
    pytest.importorskip("redis")
    from runtime.queue.events import FINAL, follow, stream_key
    from tests.servers.redis import RedisServer

    with RedisServer() as server:
        r = server.client()
        key = stream_key("run-v9")
        for data in [
            newer(RunStarted(run_id="run-v9", flow="F", worker="w@h").model_dump_json(),
                  gpu="A100"),
            '{"type": "agent.thought", "run_id": "run-v9", "ts": 1}',
            newer(Debug(run_id="run-v9", node="n", value=1).model_dump_json(), lang="en"),
            RunFinished(run_id="run-v9").model_dump_json(),
            json.dumps({"type": FINAL, "ts": 2, "exit": 0, "state": "done"}),
        ]:
            r.xadd(key, {"e": data})
        got = list(follow(r, "run-v9"))
        r.close()
    events = [e.type for e, _entry in got if e is not None]
    assert events == ["run.started", "debug", "run.finished"]
    assert got[0][0].worker == "w@h"
    assert got[-1][1]["type"] == FINAL  # followed to the end, not stopped at the unknown

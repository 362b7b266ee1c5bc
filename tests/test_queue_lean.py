"""What a queued run does not do on a worker, because nobody needs it
(docs/scaling.md: the worker's CPU per run), and what it still does.
Debian's redis-server on a free loopback port, a real ``switchboard
worker`` subprocess, the real CLI; helpers and fixtures are test_queue's."""

from __future__ import annotations

import json
import threading

import pytest

from runtime.effects import LEDGER, effect_once
from runtime.queue.ledger import RedisLedger, effect_key
from tests.servers.redis import available
from tests.test_queue import (  # noqa: F401 - the fixtures are used by name
    env,
    final,
    fixed,
    procs,
    r,
    redis_server,
    start_worker,
    stream,
    switchboard,
    write_flow,
)

pytestmark = [
    pytest.mark.skipif(not available(), reason="needs Debian's redis-server"),
    pytest.mark.timeout(240),
]


def test_a_run_leaves_no_celery_result_but_its_record_and_final_entry(
        r, env, procs, tmp_path):  # noqa: F811 - fixtures
    start_worker(procs, env)
    flow = write_flow(tmp_path / "hello.flow.json", "Hello", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed({"n": 7})}},
        {"id": "show", "type": "core.debug"}], [("start", "show")])
    done = switchboard(["submit", str(flow), "--wait"], env)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.splitlines()[0]
    rec = final(r, run_id)
    assert rec["state"] == "finished" and rec["status"] == "ok", rec
    last = stream(r, run_id)[-1]
    assert last["type"] == "queue.final" and last["status"] == "ok", last
    # Celery's result of the task (a SETEX and a PUBLISH per run) is not
    # written: the run's record and final entry are where its outcome is read.
    assert r.get(f"celery-task-meta-{run_id}") is None
    assert not [k for k in r.scan_iter("celery-task-meta-*")]


def test_a_first_attempt_does_not_look_up_its_ledger_but_writes_it(r):  # noqa: F811 - a fixture
    run_id = "lean-1"
    seen = RedisLedger(r, run_id)
    key = seen.effect("mail", "send", ("a@example.com", "hi")).key
    # An entry no first attempt could find (only an earlier attempt writes
    # one): put there to tell whether the first attempt asks Redis.
    r.set(effect_key(run_id, "mail", key), json.dumps({"result": "sent before"}))
    token = LEDGER.set(RedisLedger(r, run_id, first=True))
    try:
        effect = effect_once("mail", "send", ("a@example.com", "hi"))
        assert not effect.done and effect.key == key
        again = effect_once("mail", "send", ("a@example.com", "hi"))
        assert again.key != key  # the same content twice in a run: a second effect
        again.record({"id": 2})
    finally:
        LEDGER.reset(token)
    # A later attempt finds what the first one wrote.
    token = LEDGER.set(RedisLedger(r, run_id))
    try:
        effect_once("mail", "send", ("a@example.com", "hi"))
        second = effect_once("mail", "send", ("a@example.com", "hi"))
        assert second.done and second.result == {"id": 2}
    finally:
        LEDGER.reset(token)


def _queue_threads() -> set[tuple[str, int]]:
    return {(t.name, t.ident or 0) for t in threading.enumerate()
            if t.name in ("switchboard-events", "switchboard-run-watch")}


def test_runs_of_a_process_share_its_sending_and_watch_threads(r, tmp_path):  # noqa: F811
    """Two runs, one after the other, in this process as in a pool process:
    each run's events reach its stream (through its final entry, the stream
    set to expire), and both went through the same two threads, which stay
    for the next run instead of being started and joined per run."""
    from runtime.queue import state, tasks
    from runtime.queue.submit import payload_for

    flow = json.loads(write_flow(tmp_path / "hello.flow.json", "Hello", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed({"n": 7})}},
        {"id": "show", "type": "core.debug"}], [("start", "show")]).read_text())
    seen = []
    for _ in range(2):
        payload = payload_for(None, "hello.flow.json", flow_json=flow)
        state.queued(r, payload["run_id"], {"hash": payload["hash"]}, flow=flow)
        out = tasks.execute(r, payload, retry=lambda countdown: AssertionError("no retry"),
                            node="lean@test")
        assert out["status"] == "ok", out
        entries = stream(r, payload["run_id"])
        kinds = [e["type"] for e in entries]
        assert kinds[0] == "run.started" and kinds[-1] == "queue.final", kinds
        assert any(e["type"] == "debug" and e.get("value") == {"n": 7} for e in entries)
        assert 0 < r.ttl(f"switchboard:run:{payload['run_id']}:events")
        seen.append(_queue_threads())
    assert {name for name, _ in seen[0]} == {"switchboard-events", "switchboard-run-watch"}
    assert seen[0] == seen[1]


def test_queuing_a_run_subscribes_to_no_celery_result(r, redis_server, tmp_path):  # noqa: F811
    from runtime.queue.app import make_app
    from runtime.queue.submit import enqueue, payload_for

    flow = json.loads(write_flow(tmp_path / "hello.flow.json", "Hello", [
        {"id": "start", "type": "core.inject"}], []).read_text())
    app = make_app(redis_server.url)

    def subscribes() -> int:
        return r.info("commandstats").get("cmdstat_subscribe", {}).get("calls", 0)

    try:
        before = subscribes()
        ids = [enqueue(app, r, payload_for(None, "hello.flow.json", flow_json=flow))
               for _ in range(3)]
        assert [r.hget(f"switchboard:run:{i}", "state") for i in ids] == ["queued"] * 3
        assert r.llen("switchboard") == 3  # the tasks are in the queue
        # serve queues a run per event: no result channel is subscribed per run.
        assert subscribes() == before
    finally:
        app.close()

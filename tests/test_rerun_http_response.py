"""A rerun from a node of a webhook flow: the HTTP Response node has no
request to answer (it was the original run's), so it says what it would
answer, as debug output that `runs show` prints and `runs diff` compares.

The original run serves a real loopback port and a real httpx client is
answered; the reruns go through the real CLI (a subprocess) on the same
history (SWITCHBOARD_DATA_DIR)."""

from __future__ import annotations

import asyncio
import json

import httpx

from runtime.engine import Engine
from runtime.events import EventBus
from runtime.history import History
from tests.runtime_fixtures import N, make_flow
from tests.test_runs_cli import newest, ok, sb

WAIT = 30.0
LONG = "x" * 3000  # under the 4,000 characters a recorded message keeps of a text


def webhook_flow():
    """hook -> mark (sets the status code, copies the query's id) -> reply
    (its status read from the message)."""
    return make_flow([
        N("hook", "trigger.webhook", port=0, path="/orders"),
        N("mark", "core.change", rules=[
            {"action": "set", "path": "code", "value": 201},
            {"action": "copy", "from": "req.query.id", "path": "payload.id"}]),
        N("reply", "http.response", status={"scope": "message", "path": "code"},
          headers={"X-Flow": "yes"})],
        ["hook->mark", "mark->reply"])


async def serve_one_request() -> tuple[str, httpx.Response]:
    """The original run: one real request answered; the run is recorded."""
    bus = EventBus()
    listening = asyncio.Event()
    bus.subscribe(lambda e: listening.set() if e.type == "node.status"
                  and e.text.startswith("listening on") else None)
    with History() as history:
        recorder = history.recorder()
        bus.subscribe(recorder)
        engine = Engine(webhook_flow(), bus=bus)
        task = asyncio.create_task(engine.run(timeout=WAIT))
        await asyncio.wait_for(listening.wait(), WAIT)
        url = engine.nodes["hook"].node.url
        async with httpx.AsyncClient() as client:
            r = await client.post(url + "?id=7", json={"item": "book", "note": LONG})
        engine.stop("test done")
        await asyncio.wait_for(task, WAIT)
        recorder.close()
    return engine.run_id, r


def debug_of(run_id: str, node: str) -> list:
    shown = json.loads(ok(sb("runs", "show", run_id, "--json")).stdout)
    return [d["value"] for d in shown["debug"] if d["node"] == node]


def test_a_rerun_from_a_node_shows_the_reply_it_would_send(data_dir):
    original, r = asyncio.run(serve_one_request())
    assert r.status_code == 201 and r.headers["x-flow"] == "yes"
    assert r.json() == {"item": "book", "note": LONG, "id": "7"}
    assert debug_of(original, "reply") == []  # answering leaves no debug output

    rerun = ok(sb("runs", "rerun", original[:8], "--from", "mark"))
    first = newest()[0]
    assert first["rerun_of"] == original and first["status"] == "ok"
    assert f"run {first['id']}: rerun of {original} from 'mark'" in rerun.stderr
    note = (f"rerun: would answer 201 application/json (the original request was answered "
            f"in run {original}; nothing is sent now)")
    assert note in rerun.stdout  # the debug line, as `switchboard run` prints them

    [would] = debug_of(first["id"], "reply")
    assert would["note"] == note
    assert would["status"] == 201 and would["bytes"] > len(LONG)
    assert would["headers"] == {"X-Flow": "yes", "Content-Type": "application/json"}
    # The body as it would go out, cut like every text in an event.
    body = would["body"]
    assert body.startswith('{"item": "book", "note": "xxx') and body.endswith("…")
    assert len(body) < 2100 < would["bytes"]

    shown = ok(sb("runs", "show", first["id"])).stdout
    assert "errors    0" in shown
    assert f"'HTTP Response' (reply)  {{\"note\": \"{note}\"" in shown

    # Against the original run: the reply shows up as new debug output.
    diff = json.loads(ok(sb("runs", "diff", original, first["id"], "--json")).stdout)
    [change] = diff["debug"]
    assert change["node"] == "reply" and "a" not in change and change["b"]["status"] == 201
    text = ok(sb("runs", "diff", original, first["id"])).stdout
    row = next(line for line in text.splitlines() if line.startswith("  reply #1"))
    assert row.split()[2:4] == ["(value)", "—"]
    assert row.endswith('{"note": "rerun: would answer 201 application/jso…')

    # Two reruns with different messages: the diff names what would differ.
    ok(sb("runs", "rerun", original, "--from", "mark", "--set", "msg.payload.item=pen"))
    second = newest()[0]
    assert debug_of(second["id"], "reply")[0]["body"].startswith('{"item": "pen", "note"')
    diff = json.loads(ok(sb("runs", "diff", first["id"], second["id"], "--json")).stdout)
    paths = {(c["node"], c["path"]): c for c in diff["debug"]}
    assert set(paths) == {("reply", "body"), ("reply", "bytes")}
    assert paths[("reply", "bytes")]["a"] - paths[("reply", "bytes")]["b"] == 1  # book, pen

def test_a_rerun_keeps_the_reply_checks(data_dir):
    original, r = asyncio.run(serve_one_request())
    assert r.status_code == 201

    # A status the reply could not be sent with is the same error as in a run.
    bad = sb("runs", "rerun", original, "--from", "reply", "--set", "msg.code=999")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    run = newest()[0]
    shown = json.loads(ok(sb("runs", "show", run["id"], "--json")).stdout)
    [err] = shown["node_errors"]
    assert err["node"] == "reply" and err["message"] == "status: expected a number 100-599, got 999"
    assert shown["debug"] == []

    # A message that never came from a webhook: nothing it could answer.
    bad = sb("runs", "rerun", original, "--from", "reply", "--set", "msg._http_res=null")
    assert bad.returncode == 1
    shown = json.loads(ok(sb("runs", "show", newest()[0]["id"], "--json")).stdout)
    [err] = shown["node_errors"]
    assert "did not come from a Webhook trigger" in err["message"]

    # Rerun from the reply itself, as it got the message: would answer.
    ok(sb("runs", "rerun", original, "--from", "reply"))
    [would] = debug_of(newest()[0]["id"], "reply")
    assert would["status"] == 201 and would["note"].startswith("rerun: would answer 201")

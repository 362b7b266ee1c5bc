"""Queue mode end to end: Debian's redis-server on a free loopback port, real
Celery workers as ``switchboard worker`` subprocesses, the real CLI.

Timeouts here are bounds on waits for conditions, never timing assertions.
Every worker, serve process and Redis is killed at the end, pass or fail."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from runtime.effects import LEDGER, MemoryLedger
from runtime.history import History
from tests.servers.redis import RedisServer, available, free_port
from tests.servers.smtp import SmtpServer

pytestmark = [
    pytest.mark.skipif(not available(), reason="needs Debian's redis-server"),
    pytest.mark.timeout(240),
]

SWITCHBOARD = [sys.executable, "-m", "runtime.cli"]
#: Bound on any one wait (a worker's start, a run's end).
WAIT = 90.0
#: The test Redis's visibility timeout: how soon a vanished worker's run is
#: taken again (small, so the kill test is quick; runs here last seconds).
VISIBILITY = "3"


# -- servers and processes ----------------------------------------------------------------

@pytest.fixture(scope="module")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture
def r(redis_server):
    client = redis_server.client()
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def env(redis_server, tmp_path) -> dict[str, str]:
    e = dict(os.environ)
    e.update(SWITCHBOARD_BROKER=redis_server.url, SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
             SWITCHBOARD_VISIBILITY_TIMEOUT=VISIBILITY, PYTHONUNBUFFERED="1")
    return e


class Proc:
    """A switchboard subprocess in its own process group, its stderr kept."""

    def __init__(self, args: list[str], env: dict[str, str], *, stdout: Any = None) -> None:
        self.proc = subprocess.Popen([*SWITCHBOARD, *args], env=env, cwd=Path(__file__).parent.parent,
                                     stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no {text!r} from {self.proc.args[3:]}; stderr:\n"
                                         + "\n".join(self.lines[-30:]))
                self._cond.wait(min(left, 0.5))

    def kill(self) -> None:
        """SIGKILL to the whole group: the worker and its pool processes."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def procs():
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


def start_worker(procs: list[Proc], env: dict[str, str], concurrency: int = 1,
                 extra: tuple[str, ...] = (), wait: bool = True) -> Proc:
    p = Proc(["worker", "--concurrency", str(concurrency), *extra], env)
    procs.append(p)
    if wait:
        p.wait_for("switchboard worker ready")
    return p


def switchboard(args: list[str], env: dict[str, str], timeout: float = WAIT,
                ) -> subprocess.CompletedProcess:
    return subprocess.run([*SWITCHBOARD, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=Path(__file__).parent.parent)


def until(check: Any, what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def run_record(r: Any, run_id: str) -> dict[str, str]:
    return r.hgetall(f"switchboard:run:{run_id}")


def final(r: Any, run_id: str) -> dict[str, str]:
    return until(lambda: (rec := run_record(r, run_id)).get("state") in
                 ("finished", "dead", "cancelled") and rec, f"run {run_id} to end")


def stream(r: Any, run_id: str) -> list[dict]:
    return [json.loads(f["e"]) for _id, f in r.xrange(f"switchboard:run:{run_id}:events")]


# -- flows --------------------------------------------------------------------------------

def fixed(value: Any) -> dict:
    return {"scope": "custom", "value": value}


def write_flow(path: Path, name: str, nodes: list[dict], wires: list[tuple]) -> Path:
    for i, n in enumerate(nodes):
        n.setdefault("position", [i * 200, 0])
    path.write_text(json.dumps({
        "format": "switchboard.flow/1", "name": name, "nodes": nodes,
        "wires": [{"from": [a, "out"], "to": [b, "in"]} for a, b in wires]}))
    return path


def gate(path: Path, timeout: float = WAIT, arrivals: Path | None = None) -> dict:
    """A core.python node that waits until ``path`` exists: where a test
    holds a run mid-way, for as long as it needs. With ``arrivals`` (a
    folder), each message that reaches the gate first leaves a file there,
    so that a test knows that everything before the gate is done."""
    mark = (f"open(os.path.join({str(arrivals)!r}, f'{{os.getpid()}}-{{time.time_ns()}}'), "
            "'w').close()\n" if arrivals is not None else "")
    code = (f"import os, time\n{mark}while not os.path.exists({str(path)!r}):\n"
            "    time.sleep(0.05)\nreturn msg")
    return {"id": "gate", "type": "core.python",
            "params": {"code": fixed(code), "timeout_seconds": fixed(timeout)}}


def mail_node(smtp: SmtpServer, subject: Any) -> dict:
    return {"id": "mail", "type": "mail.send",
            "params": {"to": fixed("ops@example.com"), "subject": subject,
                       "body": fixed("the order shipped"),
                       "smtp_host": fixed("127.0.0.1"), "smtp_port": fixed(smtp.port)}}


# -- the ledger, in-process ----------------------------------------------------------------

async def test_mail_sent_once_per_run_across_attempts():
    """Two attempts of one run share a ledger: the second sends nothing and
    reports the first's Message-ID; without a ledger every run sends."""
    from runtime.engine import Engine
    from runtime.flow import parse_flow

    with SmtpServer() as smtp:
        flow = parse_flow({"format": "switchboard.flow/1", "name": "m", "nodes": [
            {"id": "start", "type": "core.inject", "position": [0, 0]},
            {**mail_node(smtp, fixed("Shipped")), "position": [200, 0]}],
            "wires": [{"from": ["start", "out"], "to": ["mail", "in"]}]})
        store: dict = {}
        ids = []
        for _attempt in range(2):
            token = LEDGER.set(MemoryLedger("run1", store))
            try:
                engine = Engine(flow)
                result = await engine.run(10)
            finally:
                LEDGER.reset(token)
            assert result.status == "ok"
            ids.append(list(store.values())[0]["result"]["message_id"])
        assert len(smtp.received) == 1
        assert smtp.messages[0]["Message-ID"] == ids[0] == ids[1]
        await Engine(flow).run(10)  # in-process: no ledger, a mail per run
        assert len(smtp.received) == 2
        assert smtp.messages[1]["Message-ID"] != ids[0]


async def test_http_post_and_csv_append_once_per_run(tmp_path):
    """A POST carries an Idempotency-Key that is the same on every attempt;
    the second attempt replays the recorded response instead of sending,
    and does not append the CSV row again. In-process: no key."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from runtime.engine import Engine
    from runtime.flow import parse_flow

    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append(dict(self.headers))
            body = json.dumps([{"n": len(got)}]).encode()
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "rows.csv"
    flow = parse_flow({"format": "switchboard.flow/1", "name": "p", "nodes": [
        {"id": "start", "type": "core.inject", "position": [0, 0],
         "params": {"payload": fixed({"order": 1})}},
        {"id": "post", "type": "http.request", "position": [200, 0],
         "params": {"url": fixed(f"http://127.0.0.1:{server.server_address[1]}/orders"),
                    "method": fixed("POST"), "body": {"scope": "message", "path": "payload"}},
         "outputs": {"response_body": "answer"}},
        {"id": "log", "type": "csv.write", "position": [400, 0],
         "params": {"path": fixed(str(out)), "mode": fixed("append"), "header": fixed(False),
                    "rows": {"scope": "message", "path": "answer"}}},
        {"id": "show", "type": "core.debug", "position": [600, 0],
         "params": {"path": fixed("msg")}}],
        "wires": [{"from": ["start", "out"], "to": ["post", "in"]},
                  {"from": ["post", "out"], "to": ["log", "in"]},
                  {"from": ["log", "out"], "to": ["show", "in"]}]})
    try:
        store: dict = {}
        shown = []
        for _attempt in range(2):
            token = LEDGER.set(MemoryLedger("run2", store))
            try:
                engine = Engine(flow)
                engine.bus.subscribe(lambda e: e.type == "debug" and shown.append(e.value))
                assert (await engine.run(10)).status == "ok"
            finally:
                LEDGER.reset(token)
        assert len(got) == 1 and len(got[0]["Idempotency-Key"]) == 32
        assert out.read_text().split() == ["1"]  # one row: the second attempt skipped it
        assert shown[0]["answer"] == shown[1]["answer"] == [{"n": 1}]
        assert shown[1]["status"] == 201
        assert (await Engine(flow).run(10)).status == "ok"  # in-process: sent, no key
        assert len(got) == 2 and "Idempotency-Key" not in got[1]
    finally:
        server.shutdown()


# -- through Redis and real workers ---------------------------------------------------------

def test_submit_wait_streams_output_and_lands_in_history(r, env, procs, tmp_path):
    start_worker(procs, env)
    flow = write_flow(tmp_path / "hello.flow.json", "Hello", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed({"n": 7})}},
        {"id": "show", "type": "core.debug"}], [("start", "show")])
    done = switchboard(["submit", str(flow), "--wait"], env)
    assert done.returncode == 0, done.stderr
    run_id, line = done.stdout.splitlines()
    assert json.loads(line) == {"node": "show", "name": "Debug", "value": {"n": 7}}
    assert run_record(r, run_id)["state"] == "finished"
    shown = switchboard(["runs", "show", run_id, "--json"], env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["path"] == str(flow.resolve())
    # Without --wait: the id at once, the run goes on over there.
    quick = switchboard(["submit", str(flow)], env)
    assert quick.returncode == 0
    assert final(r, quick.stdout.strip())["status"] == "ok"


def test_webhook_served_here_runs_on_a_worker(r, env, procs, tmp_path):
    start_worker(procs, env)
    port = free_port()
    out = tmp_path / "out.csv"
    flow = write_flow(tmp_path / "hook.flow.json", "Orders", [
        {"id": "hook", "type": "trigger.webhook",
         "params": {"path": fixed("/orders"), "port": fixed(port)}},
        {"id": "log", "type": "csv.write",
         "params": {"path": fixed(str(out)), "rows": {"scope": "message", "path": "payload"},
                    "mode": fixed("append")}},
        {"id": "show", "type": "core.debug"},
        {"id": "answer", "type": "http.response",
         "params": {"status": fixed(201), "body": {"scope": "message", "path": "rows_written"}}}],
        [("hook", "log"), ("log", "show"), ("log", "answer")])
    serve = Proc(["serve", str(flow)], env)
    procs.append(serve)
    serve.wait_for("listening on")
    ids = []
    for n in range(3):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/orders", method="POST",
                                     data=json.dumps([{"order": n}]).encode(),
                                     headers={"Content-Type": "application/json"})
        # The flow's HTTP Response node answers, on the worker, through Redis.
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 201
            assert json.loads(resp.read()) == 1
            ids.append(resp.headers["X-Switchboard-Run"])
    for run_id in ids:
        assert final(r, run_id)["status"] == "ok"
        worker_events = stream(r, run_id)
        assert any(e["type"] == "debug" and e["node"] == "show" for e in worker_events)
    assert sorted(out.read_text().split()[1:]) == ["0", "1", "2"]
    for run_id in ids:
        serve.wait_for(f"run {run_id} ok")  # followed to its end, into this history
    serve.proc.send_signal(signal.SIGTERM)
    serve.proc.wait(30)
    listed = switchboard(["runs", "list", "--json"], env)
    assert {run["id"] for run in json.loads(listed.stdout)} >= set(ids)


def test_killed_worker_run_finishes_elsewhere_mail_sent_once(r, env, procs, tmp_path):
    """The done-when: webhook-triggered runs shared by two workers, one
    killed with SIGKILL mid-run; every run ends, every mail goes out once."""
    smtp = SmtpServer().__enter__()
    try:
        open_gate = tmp_path / "go"
        arrived = tmp_path / "arrived"
        arrived.mkdir()
        port = free_port()
        flow = write_flow(tmp_path / "mail.flow.json", "Notify", [
            {"id": "hook", "type": "trigger.webhook",
             "params": {"path": fixed("/ship"), "port": fixed(port)}},
            mail_node(smtp, {"scope": "message", "path": "payload.subject"}),
            gate(open_gate, arrivals=arrived),
            {"id": "show", "type": "core.debug"}],
            [("hook", "mail"), ("mail", "gate"), ("gate", "show")])
        a = start_worker(procs, env)
        b = start_worker(procs, env)
        serve = Proc(["serve", str(flow)], env)
        procs.append(serve)
        serve.wait_for("listening on")
        ids = []
        for n in range(4):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/ship", method="POST",
                                         data=json.dumps({"subject": f"order {n}"}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                ids.append(json.loads(resp.read())["run_id"])
        # Both workers hold a run past its mail, waiting at the gate. (Past
        # the mail node, not just past the SMTP server's receipt: killed in
        # between, before the ledger's entry, a worker's mail would go out
        # again, the window docs/queue.md states; this test kills outside it.)
        until(lambda: len(smtp.received) >= 2 and len(list(arrived.iterdir())) >= 2,
              "two runs at the gate, their mails sent")
        # (Each worker runs one at a time and prefetches nothing: so one of
        # them is in worker a.)
        a.kill()
        open_gate.touch()
        for run_id in ids:
            rec = final(r, run_id)
            assert rec["state"] == "finished" and rec["status"] == "ok", rec
        subjects = sorted(m["Subject"] for m in smtp.messages)
        assert subjects == [f"order {n}" for n in range(4)], subjects
        assert len({m["Message-ID"] for m in smtp.messages}) == 4
        retried = [i for i in ids if int(run_record(r, i)["attempts"]) > 1]
        assert retried, "the killed worker's run ran again"
        for run_id in retried:
            texts = [e.get("text", "") for e in stream(r, run_id)]
            assert any("was lost" in t for t in texts), texts
        assert b.proc.poll() is None
    finally:
        smtp.__exit__()


def test_cancel_and_timeout_across_processes(r, env, procs, tmp_path):
    start_worker(procs, env)
    flow = write_flow(tmp_path / "slow.flow.json", "Slow", [
        {"id": "start", "type": "core.inject"}, gate(tmp_path / "never"),
        {"id": "show", "type": "core.debug"}], [("start", "gate"), ("gate", "show")])
    waiting = Proc(["submit", str(flow), "--wait"], env, stdout=subprocess.PIPE)
    procs.append(waiting)
    run_id = waiting.proc.stdout.readline().strip()
    until(lambda: run_record(r, run_id).get("state") == "running", "the run to start")
    done = switchboard(["runs", "cancel", run_id], env)
    assert done.returncode == 0, done.stderr
    assert waiting.proc.wait(WAIT) == 130
    rec = final(r, run_id)
    assert rec["state"] == "cancelled" and rec["reason"] == "interrupted"
    assert switchboard(["runs", "cancel", "nosuchrun"], env).returncode == 2
    # The run's time limit is kept by the worker: 124, as `run --timeout` says.
    timed = switchboard(["submit", str(flow), "--wait", "--timeout", "1"], env)
    assert timed.returncode == 124, timed.stderr
    assert final(r, timed.stdout.split()[0])["reason"] == "timeout"


def test_poisoned_run_goes_to_dead_letters(r, env, procs, tmp_path):
    start_worker(procs, env)
    flow = write_flow(tmp_path / "poison.flow.json", "Poison", [
        {"id": "watch", "type": "trigger.file",
         "params": {"folder": fixed(str(tmp_path / "missing-on-the-worker"))}},
        {"id": "show", "type": "core.debug"}], [("watch", "show")])
    done = switchboard(["submit", str(flow), "--wait", "--max-tries", "2"], env)
    assert done.returncode == 1
    assert "dead-lettered after 2 tries" in done.stderr
    run_id = done.stdout.splitlines()[0]
    assert run_record(r, run_id)["state"] == "dead"
    assert int(run_record(r, run_id)["attempts"]) == 2
    letters = switchboard(["queue", "dead-letters", "--json"], env)
    [letter] = json.loads(letters.stdout)
    assert letter["id"] == run_id and "does not exist" in letter["error"]


def test_workers_record_their_runs_in_a_shared_history(r, env, procs, tmp_path):
    """Two workers given one history file (one by --history, one by
    $SWITCHBOARD_SHARED_HISTORY) record the runs they execute there, each
    under its own name; the submitting machine lists its runs as queued."""
    shared = tmp_path / "shared" / "history.sqlite3"
    a = start_worker(procs, env, extra=("--history", str(shared)), wait=False)
    b = start_worker(procs, {**env, "SWITCHBOARD_SHARED_HISTORY": str(shared)}, wait=False)
    for w in (a, b):
        assert str(shared) in w.wait_for("switchboard worker ready")
    go = tmp_path / "go"
    flow = write_flow(tmp_path / "both.flow.json", "Both", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed("done")}},
        gate(go), {"id": "show", "type": "core.debug"}], [("start", "gate"), ("gate", "show")])
    ids = []
    for _ in range(2):
        done = switchboard(["submit", str(flow)], env)
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.strip())
    # Each worker runs one at a time and prefetches nothing: one run each.
    running = until(lambda: len({rec.get("worker") for rec in map(lambda i: run_record(r, i), ids)
                                 if rec.get("state") == "running"}) == 2
                    and {i: run_record(r, i)["worker"] for i in ids}, "a run on each worker")
    go.touch()
    for run_id in ids:
        assert final(r, run_id)["status"] == "ok"
    listed = switchboard(["runs", "list", "--history", str(shared), "--json"], env)
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == set(ids)
    for run_id in ids:
        assert rows[run_id]["status"] == "ok"
        assert rows[run_id]["worker"] == running[run_id]
    assert len({row["worker"] for row in rows.values()}) == 2
    table = switchboard(["runs", "list", "--history", str(shared)], env).stdout
    assert "WORKER" in table and running[ids[0]] in table
    shown = json.loads(switchboard(["runs", "show", ids[0], "--history", str(shared),
                                    "--json"], env).stdout)
    assert shown["debug"] == [{"node": "show", "name": "Debug", "value": "done"}]
    assert shown["worker"] == running[ids[0]]
    # Rerun here from the shared history: recorded in this machine's.
    rerun = switchboard(["runs", "rerun", ids[0], "--history", str(shared)], env)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["value"] == "done"
    # It says where each run is (a diff of the two would find only one).
    assert f"runs show {ids[0]} --history {shared}" in rerun.stderr
    assert "runs diff" not in rerun.stderr
    # Submitted without --wait: here only as queued, no events.
    local = {row["id"]: row for row in
             json.loads(switchboard(["runs", "list", "--json"], env).stdout)}
    assert {local[i]["status"] for i in ids} == {"queued"}
    assert [row["rerun_of"] for row in local.values() if row["status"] == "ok"] == [ids[0]]
    assert local[ids[0]]["path"] == str(flow.resolve())
    missing = switchboard(["runs", "list", "--history", str(tmp_path / "nope.sqlite3")], env)
    assert missing.returncode == 2 and "no such history file" in missing.stderr


def test_shared_history_path_is_checked_before_the_worker_starts(env, tmp_path):
    """A history the worker cannot open is bad input (exit 2, named); the
    filesystem a path is on is told from the mounts (a network one warns)."""
    from runtime.queue.shared import NETWORK_FILESYSTEMS, filesystem_of, prepare

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = switchboard(["worker", "--history", str(blocked / "history.sqlite3")], env)
    assert done.returncode == 2
    assert f"--history {blocked / 'history.sqlite3'}: cannot open it as a run history" \
        in done.stderr
    assert filesystem_of(Path("/proc/self")) == "proc"
    assert filesystem_of(tmp_path) not in NETWORK_FILESYSTEMS
    assert prepare(tmp_path / "h.sqlite3") is None and (tmp_path / "h.sqlite3").is_file()


#: A node package a test installs on the worker (a module and its
#: dist-info on PYTHONPATH: found through the switchboard.nodes entry point
#: as a pip-installed package is): a node that keeps the run's event loop
#: busy in plain blocking Python, deaf to the run's stop.
STUCK_NODE = """
import time

from runtime.node import Node, node


@node("test.stuck", name="Stuck", category="Test")
class Stuck(Node):
    def on_message(self, msg):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.05)
"""


def install_stuck_node(env: dict[str, str], site: Path) -> dict[str, str]:
    (site / "stuck_nodes-0.1.dist-info").mkdir(parents=True)
    (site / "stuck_nodes.py").write_text(STUCK_NODE)
    (site / "stuck_nodes-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: stuck-nodes\nVersion: 0.1\n")
    (site / "stuck_nodes-0.1.dist-info" / "entry_points.txt").write_text(
        "[switchboard.nodes]\nstuck = stuck_nodes\n")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site),
                                                              env.get("PYTHONPATH")]))}


def test_stuck_run_is_ended_past_its_time_limit_and_its_cancel(r, env, procs, tmp_path):
    """A node that blocks the event loop ignores both the run's deadline and
    its cancel: the worker's watch thread ends the run anyway, with the
    status the deadline or the cancel gives, records its end in the shared
    history, and the worker (its pool process replaced) runs the next run."""
    env = install_stuck_node(env, tmp_path / "site")
    shared = tmp_path / "history.sqlite3"
    worker = start_worker(procs, env, concurrency=2, extra=("--history", str(shared)))
    flow = write_flow(tmp_path / "stuck.flow.json", "Stuck", [
        {"id": "start", "type": "core.inject"}, {"id": "stuck", "type": "test.stuck"},
        {"id": "show", "type": "core.debug"}], [("start", "stuck"), ("stuck", "show")])
    timed = Proc(["submit", str(flow), "--wait", "--timeout", "1"], env, stdout=subprocess.PIPE)
    procs.append(timed)
    timed_id = timed.proc.stdout.readline().strip()
    cancelled = switchboard(["submit", str(flow)], env)
    cancel_id = cancelled.stdout.strip()
    until(lambda: run_record(r, cancel_id).get("state") == "running", "the run to start")
    assert switchboard(["runs", "cancel", cancel_id], env).returncode == 0
    assert timed.proc.wait(WAIT) == 124
    ends = {}
    for run_id, state, reason in ((timed_id, "finished", "timeout"),
                                  (cancel_id, "cancelled", "interrupted")):
        rec = final(r, run_id)
        assert (rec["state"], rec["reason"]) == (state, reason), rec
        [end] = [e for e in stream(r, run_id) if e["type"] == "run.finished"]
        assert "did not stop on time: node 'stuck' kept" in end["message"]
        ends[run_id] = end
    assert ends[timed_id]["in_flight"] == {"stuck": 1}
    with History(shared) as history:
        assert history.run(timed_id).status == "timeout"
        assert history.run(cancel_id).status == "stopped"
    # The worker lives on with fresh pool processes: the next run runs.
    quick = write_flow(tmp_path / "quick.flow.json", "Quick", [
        {"id": "start", "type": "core.inject", "params": {"payload": fixed(1)}},
        {"id": "show", "type": "core.debug"}], [("start", "show")])
    done = switchboard(["submit", str(quick), "--wait"], env)
    assert done.returncode == 0, done.stderr
    assert worker.proc.poll() is None
    # The tasks of the ended runs, put back when their processes exited,
    # were dropped (their runs were final): none runs again.
    for run_id in (timed_id, cancel_id):
        assert int(run_record(r, run_id)["attempts"]) == 1

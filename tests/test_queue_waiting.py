"""A queued run whose tool call waits for approval, through ``switchboard
serve`` and a real worker (Debian's redis-server, subprocesses, the real
CLI): every event the worker sends reads back cleanly, and neither log shows
an error. Helpers and fixtures are test_queue's."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest

from runtime.events import NodeStatus, read_event
from runtime.queue.events import decode
from tests.servers.redis import available, free_port
from tests.test_queue import (  # noqa: F401 - the fixtures are used by name
    WAIT,
    Proc,
    env,
    final,
    fixed,
    procs,
    r,
    redis_server,
    start_worker,
)

pytestmark = pytest.mark.timeout(240)

#: What no log line of a clean run holds.
TROUBLE = ("Traceback", "ValidationError", "could not handle", "ERROR", "Error:",
           "PydanticSerializationUnexpectedValue", "serializer warnings")


def approval_flow(path: Path, port: int, outbox: Path) -> Path:
    """A webhook starts an agent whose one send_email call asks for approval
    (a Send Mail tool with no policy: sensitive, so it always asks)."""
    path.write_text(json.dumps({
        "format": "switchboard.flow/1", "name": "Approve mail",
        "nodes": [
            {"id": "hook", "type": "trigger.webhook", "position": [0, 0],
             "params": {"path": fixed("/mail"), "port": fixed(port)}},
            {"id": "agent", "type": "ai.agent", "position": [200, 0],
             "params": {"provider": fixed("scripted"), "script": fixed([
                 {"tool_calls": [{"name": "send_email", "arguments": {
                     "to": "john@example.com", "subject": "Order shipped",
                     "body": "It shipped."}}]},
                 {"text": "Done: {last_result}"}])}},
            {"id": "show", "type": "core.debug", "position": [400, 0]},
            {"id": "mail", "type": "mail.send", "position": [400, 200],
             "params": {"to": {"scope": "ai"}, "subject": {"scope": "ai"},
                        "body": {"scope": "ai"}, "delivery": fixed("outbox"),
                        "outbox_dir": fixed(str(outbox))}}],
        "wires": [{"from": ["hook", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]},
                  {"from": ["agent", "tools"], "to": ["mail", "in"]}]}))
    return path


@pytest.mark.skipif(not available(), reason="needs Debian's redis-server")
def test_an_approval_waiting_run_through_serve_and_a_worker_logs_no_error(
        r, env, procs, tmp_path):  # noqa: F811 - fixtures
    worker = start_worker(procs, env)
    port = free_port()
    outbox = tmp_path / "outbox"
    flow = approval_flow(tmp_path / "approve.flow.json", port, outbox)
    serve = Proc(["serve", str(flow), "--approve", "auto"], env)
    procs.append(serve)
    serve.wait_for("listening on")
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mail", method="POST",
                                 data=b"{}", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=WAIT) as resp:
        run_id = json.loads(resp.read())["run_id"]
    assert final(r, run_id)["status"] == "ok"
    serve.wait_for(f"run {run_id} ok")  # followed to its end by serve
    assert len(list(outbox.glob("*.eml"))) == 1  # approved (auto), so sent

    serve.proc.send_signal(signal.SIGTERM)
    serve.proc.wait(30)
    worker.proc.send_signal(signal.SIGTERM)
    worker.proc.wait(30)
    worker._reader.join(10)
    serve._reader.join(10)
    for name, proc in (("serve", serve), ("worker", worker)):
        bad = [line for line in proc.lines if any(t in line for t in TROUBLE)]
        assert not bad, f"{name} logged:\n" + "\n".join(proc.lines[-40:])

    # The worker said that the call waited, and every entry reads back.
    entries = [f["e"] for _id, f in r.xrange(f"switchboard:run:{run_id}:events")]
    events = [decode(e)[0] for e in entries]
    waiting = [e for e in events if isinstance(e, NodeStatus) and e.state == "waiting"]
    assert waiting and waiting[0].node == "mail" and waiting[0].text == "waiting for approval"
    for raw in entries:
        obj = json.loads(raw)
        if not obj["type"].startswith("queue."):
            assert read_event(raw) is not None


#: A node package whose node sets a status no event may hold as such.
ODD_STATUS = '''
from runtime.node import Node, node


@node("oddstatus.node", name="Odd status", category="Test")
class Odd(Node):
    def on_message(self, msg):
        self.show_status("paused here", "orange", "paused")
        self.show_status("asking", "yellow", "waiting")
'''


async def test_a_plugins_status_of_any_value_makes_an_event_that_reads_back(tmp_path):
    """A plugin process (any language) may send any color and state: the
    host keeps the ones an event may hold and drops the others, so a queue
    follower or the history reads every event it writes."""
    import sys

    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import parse_flow
    from runtime.plugin import host
    from runtime.registry import Registry
    from tests.servers.flows import Recorder

    (tmp_path / "oddstatus_nodes.py").write_text(ODD_STATUS)
    root = Path(__file__).resolve().parents[1]
    plugin = host.Plugin(host.PluginManifest(
        name="odd", command=[sys.executable, "-m", "runtime.plugin", "serve", "oddstatus_nodes",
                             "--name", "odd"],
        env={"PYTHONPATH": f"{tmp_path}:{root}"}), None, "test")
    process = host.PluginProcess(plugin)
    try:
        _version, specs = process.describe()
        registry = Registry([*Registry.default(), *(host.remote_class(s, process)
                                                    for s in specs)])
        flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
            {"id": "ask", "type": "core.inject"}, {"id": "odd", "type": "oddstatus.node"}],
            "wires": [{"from": ["ask", "out"], "to": ["odd", "in"]}]})
        rec = Recorder()
        bus = EventBus()
        bus.subscribe(rec)
        result = await Engine(flow, registry, bus).run(30)
    finally:
        process.stop()
    assert result.status == "ok"
    shown = [(e.text, e.color, e.state) for e in rec.of("node.status") if e.node == "odd"]
    assert ("paused here", "", "idle") in shown  # orange and paused are no status values
    assert ("asking", "yellow", "waiting") in shown
    for event in rec.events:
        assert read_event(event.model_dump_json()) == event

"""`switchboard runs list|show|diff|rerun` on real runs: the example flows run
by the real CLI (a subprocess), mail to a real SMTP server on loopback, one
history per test (SWITCHBOARD_DATA_DIR)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.engine import REPLAY_INPUTS, Engine
from runtime.events import EventBus
from runtime.history import History
from runtime.node import Node, node
from tests.runtime_fixtures import N, make_flow, registry
from tests.servers.smtp import SmtpServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"


def sb(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env=full, timeout=60)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return r


def newest(n: int = 1) -> list[dict]:
    return json.loads(ok(sb("runs", "list", "--json", "--limit", str(n))).stdout)


def mail_run_args(port: int) -> list[str]:
    """order-mails through the SMTP server instead of its outbox folder."""
    return ["run", str(EXAMPLES / "order-mails.flow.json"), "--set", "mail.delivery=smtp",
            "--set", "mail.smtp_host=127.0.0.1", "--set", f"mail.smtp_port={port}"]


def subjects(smtp: SmtpServer, start: int = 0) -> list[str]:
    """The subjects received from the ``start``-th mail on, sorted: the mail
    node sends its messages concurrently, so they may arrive in any order."""
    return sorted(m["Subject"] for m in smtp.messages[start:])


# -- list and show ---------------------------------------------------------------------

def test_list_and_show_real_runs(data_dir):
    ok(sb("run", str(EXAMPLES / "hello.flow.json")))
    ok(sb("run", str(EXAMPLES / "hello.flow.json"), "--set", "start.payload={\"name\": \"Ada\"}"))
    ok(sb("run", str(EXAMPLES / "order-triage.flow.json")))
    rows = newest(10)
    assert [r["flow"] for r in rows] == ["Order triage", "Hello", "Hello"]
    assert all(r["status"] == "ok" and r["duration_ms"] > 0 for r in rows)
    assert rows[0]["path"] == str(EXAMPLES / "order-triage.flow.json")

    text = ok(sb("runs", "list", "--flow", "hello")).stdout.splitlines()
    assert text[0].split() == ["ID", "STARTED", "FLOW", "STATUS", "DURATION", "ERRORS", "COST"]
    assert len(text) == 3 and all("Hello" in line for line in text[1:])
    # Columns line up: every row has its flow where the header has FLOW.
    col = text[0].index("FLOW")
    assert all(line[col:].startswith("Hello") for line in text[1:])
    assert len(ok(sb("runs", "list", "--limit", "1")).stdout.splitlines()) == 2

    ada = rows[1]["id"]
    shown = ok(sb("runs", "show", ada[:6])).stdout
    assert shown.startswith(f"run {ada}  Hello")
    assert "'Show' (show)  \"Hello, Ada!\"" in shown
    assert "status    ok (completed)" in shown
    assert "rerun --from NODE can replay: greet (1), show (1)" in shown
    data = json.loads(ok(sb("runs", "show", ada, "--json")).stdout)
    assert data["debug"] == [{"node": "show", "name": "Show", "value": "Hello, Ada!"}]
    assert data["nodes"]["greet"] == {"in": 1, "out": 1, "errors": 0, "active": 0}
    assert data["replayable"] == {"greet": {"recorded": 1, "received": 1},
                                  "show": {"recorded": 1, "received": 1}}

    triage = json.loads(ok(sb("runs", "show", "last", "--json")).stdout)
    assert [e["caught"] for e in triage["node_errors"]] == [True]
    assert "can't multiply" in triage["node_errors"][0]["message"]


def test_an_unknown_run_is_bad_input(data_dir):
    r = sb("runs", "show", "abc123")
    assert r.returncode == 2 and "no run 'abc123' in history" in r.stderr
    r = sb("runs", "rerun", "last")
    assert r.returncode == 2 and "no runs in history yet" in r.stderr
    r = sb("runs", "list")
    assert r.returncode == 0 and r.stdout == "" and "no runs in history" in r.stderr


def test_an_ambiguous_prefix_lists_the_runs_it_could_be(data_dir, capsys):
    from runtime.cli import main

    flow = make_flow([N("a", "core.inject", payload=1), N("d", "core.debug")], ["a->d"])
    ids: dict[str, list[str]] = {}
    with History() as history:
        # Real runs until two ids share a first digit (at most 17).
        while not any(len(v) > 1 for v in ids.values()):
            bus = EventBus()
            recorder = history.recorder()
            bus.subscribe(recorder)
            engine = Engine(flow, bus=bus)
            asyncio.run(engine.run())
            recorder.close()
            ids.setdefault(engine.run_id[0], []).append(engine.run_id)
    prefix, same = next((k, v) for k, v in ids.items() if len(v) > 1)
    assert main(["runs", "show", prefix]) == 2
    err = capsys.readouterr().err
    assert f"run id '{prefix}' is ambiguous" in err and all(i in err for i in same)
    assert main(["runs", "show", same[0]]) == 0


# -- rerun from a node -------------------------------------------------------------------

@node("test.count_calls", name="Count calls", category="Test")
class CountCalls(Node):
    """Counts its calls across runs (a class attribute), passes messages on."""

    calls = 0

    def on_message(self, msg):
        CountCalls.calls += 1


async def test_rerun_from_a_node_never_runs_what_is_upstream(data_dir):
    from runtime.rerun import plan_rerun

    reg = registry(CountCalls)
    flow = make_flow([N("src", "core.inject", payload={"n": 1}, count=3),
                      N("up", "test.count_calls"),
                      N("tpl", "core.template", template="n={{ payload.n }}"),
                      N("show", "core.debug")], ["src->up", "up->tpl", "tpl->show"])

    async def run(engine_flow, prepare=None):
        bus = EventBus()
        debug: list = []
        bus.subscribe(lambda e: debug.append(e.value) if e.type == "debug" else None)
        with History() as history:
            recorder = history.recorder()
            bus.subscribe(recorder)
            engine = Engine(engine_flow, reg, bus)
            if prepare is not None:
                prepare(engine)
            result = await engine.run()
            recorder.close()
        return engine, result, debug

    CountCalls.calls = 0
    first, _, debug = await run(flow)
    assert CountCalls.calls == 3 and debug == ["n=1"] * 3
    with History() as history:
        plan = plan_rerun(history, first.run_id, from_node="tpl", sets=["msg.payload.n=7"],
                          registry=reg)
    again, result, debug = await run(plan.flow, plan.prepare)
    assert result.status == "ok"
    assert CountCalls.calls == 3  # not one call more
    assert debug == ["n=7"] * 3
    counts = again.stats().nodes
    assert counts["src"]["out"] == 0 and counts["up"]["in"] == 0 and counts["tpl"]["in"] == 3
    with History() as history:
        started = history.events(again.run_id)[0]
        assert (started.rerun_of, started.from_node) == (first.run_id, "tpl")


async def test_a_node_keeps_a_bounded_sample_of_what_reached_it(data_dir):
    flow = make_flow([N("src", "core.inject", payload="x", count=50), N("show", "core.debug")],
                     ["src->show"])
    bus = EventBus()
    got = []
    bus.subscribe(got.append)
    await Engine(flow, bus=bus).run()
    [replay] = [e for e in got if e.type == "run.replay"]
    assert replay.received == {"show": 50}
    assert len(replay.inputs["show"]) == REPLAY_INPUTS
    assert all(m["payload"] == "x" for m in replay.inputs["show"])
    assert [e.type for e in got[-2:]] == ["run.replay", "run.finished"]


@pytest.mark.parametrize("record", [True, False])
async def test_recording_leaves_a_sources_messages_on_the_fast_path(record):
    """What a rerun keeps is recorded while a node's budget lasts; past it
    (and at a source, which receives nothing) messages take the chain loop,
    whose count is the wire's ``fast``."""
    flow = make_flow([N("src", "core.inject", payload=1, count=400), N("show", "core.debug")],
                     ["src->show"])
    bus = EventBus()
    bus.subscribe(lambda e: None)
    engine = Engine(flow, bus=bus, record=record)
    await engine.run()
    [wire] = engine.nodes["src"].out_routes
    assert wire.count == 400 and wire.fast > 200


def test_rerun_the_mail_node_with_another_subject_over_real_smtp(data_dir, tmp_path):
    """The issue's 'done when': rerun only the mail node, with a different
    subject, and compare the two runs in the terminal."""
    with SmtpServer() as smtp:
        ok(sb(*mail_run_args(smtp.port), env={"SHOP_NAME": "Acme"}))
        assert subjects(smtp) == ["Acme: order A-1001 shipped (2 items)",
                                  "Acme: order B-2002 shipped (1 item)"]
        [first] = newest()

        # An edited message: the shop's name comes from the flow variable the
        # first run set; had 'Shop name' run again it would say Northwind.
        r = ok(sb("runs", "rerun", first["id"][:5], "--from", "mail",
                  "--set", "msg.payload.order=Z-9", env={"SHOP_NAME": None}))
        assert subjects(smtp, 2) == ["Acme: order Z-9 shipped (1 item)",
                                     "Acme: order Z-9 shipped (2 items)"]
        assert sorted(json.loads(line)["value"][0] for line in r.stdout.splitlines()) == [
            "Ann <ann@example.com>", "Bob <bob@example.com>"]
        [edited] = newest()
        assert (edited["rerun_of"], edited["from_node"]) == (first["id"], "mail")
        assert f"rerun of {first['id']} from 'mail' (2 messages)" in r.stderr
        shown = json.loads(ok(sb("runs", "show", edited["id"], "--json")).stdout)
        for upstream in ("orders", "shop", "split"):
            assert shown["nodes"][upstream] == {"in": 0, "out": 0, "errors": 0, "active": 0}
        assert shown["nodes"]["mail"]["in"] == 2

        # A param override, by the node's name this time.
        ok(sb("runs", "rerun", first["id"], "--from", "Tell the customer",
              "--set", "mail.subject=Different subject"))
        assert subjects(smtp, 4) == ["Different subject"] * 2
        [other] = newest()

    text = ok(sb("runs", "diff", first["id"], other["id"])).stdout
    assert f"A  {first['id']}  Order mails  ok" in text
    assert "flow (what was set differently)" in text
    [line] = [x for x in text.splitlines() if "params.subject.value" in x]
    assert line.rstrip().endswith('"Different subject"')
    assert "not rerun in B: 'Orders shipped today' (orders), 'Shop name' (shop), " \
           "'One per order' (split)" in text

    d = json.loads(ok(sb("runs", "diff", first["id"], edited["id"], "--json")).stdout)
    assert d["partial"] == "b" and d["not_rerun"] == ["orders", "shop", "split"]
    assert {"node": "mail", "path": "payload.order", "a": "B-2002", "b": "Z-9"} in d["inputs"]
    assert d["flow"] == [] and d["messages"] == []
    assert [r["field"] for r in d["summary"] if not r["same"]] == ["duration_ms"]


def test_rerun_without_from_runs_the_flow_as_it_ran(data_dir, tmp_path):
    flow = tmp_path / "hello.flow.json"
    shutil.copy(EXAMPLES / "hello.flow.json", flow)
    ok(sb("run", str(flow)))
    [first] = newest()
    flow.write_text(flow.read_text(encoding="utf-8").replace("World", "Moon"), encoding="utf-8")
    r = ok(sb("runs", "rerun", "last"))
    assert json.loads(r.stdout)["value"] == "Hello, World!"
    assert f"{flow} differs from the flow run {first['id']} ran" in r.stderr
    [again] = newest()
    assert again["rerun_of"] == first["id"] and again["from_node"] == ""
    d = json.loads(ok(sb("runs", "diff", first["id"], again["id"], "--json")).stdout)
    assert d["same"] and d["partial"] == ""


BAD_RERUNS = [
    (["--from", "nosuch"], "--from nosuch: no node 'nosuch' in the flow of run"),
    (["--from", "start"], "'start' got no message in run"),
    (["--set", "msg.payload=1"], "--set msg.PATH=VALUE edits the messages of a rerun --from"),
    (["--from", "greet", "--call", "x"], "--from and --call do not go together"),
    (["--args", "{}"], "--args goes with --call"),
    (["--call", "nope"], "--call nope: no tool call of run"),
    (["--from", "greet", "--set", "greet.nosuch=1"], "node 'greet' (core.template) has no param"),
    (["--timeout", "0"], "--timeout 0: must be more than 0 seconds"),
]


def test_rerun_bad_input_exits_2_naming_it(data_dir):
    ok(sb("run", str(EXAMPLES / "hello.flow.json")))
    for args, why in BAD_RERUNS:
        r = sb("runs", "rerun", "last", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert why in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    assert len(newest(10)) == 1  # nothing ran


# -- rerun one tool call -----------------------------------------------------------------

def test_rerun_one_tool_call_with_edited_arguments_over_real_smtp(data_dir):
    flow = str(EXAMPLES / "email-assistant.flow.json")
    with SmtpServer() as smtp:
        ok(sb("run", flow, "--set", "mail.delivery=smtp", "--set", f"mail.smtp_port={smtp.port}"))
        assert subjects(smtp) == ["Your order A-1001 has shipped"]
        [first] = newest()
        [call] = json.loads(ok(sb("runs", "show", first["id"], "--json")).stdout)["tool_calls"]
        assert call["tool"] == "send_email" and call["status"] == "success"

        r = ok(sb("runs", "rerun", first["id"], "--call", call["caller_id"],
                  "--args", '{"subject": "Edited subject"}'))
        assert subjects(smtp, 1) == ["Edited subject"]
        out = json.loads(r.stdout)
        assert out["tool"] == "send_email" and out["status"] == "success"
        assert out["data"]["accepted"] == ["john@example.com"]
        [edited] = newest()
        assert edited["call"] == call["caller_id"] and edited["rerun_of"] == first["id"]
        assert edited["tokens"] == 0  # the LLM was not asked again

        # smtp_host is the designer's: the AI never had it, nor has a rerun.
        r = sb("runs", "rerun", first["id"], "--call", call["caller_id"],
               "--args", '{"smtp_host": "127.0.0.2"}')
        assert r.returncode == 2, r.stderr
        assert "unknown argument 'smtp_host' (send_email accepts: to, subject, body)" in r.stderr
        assert json.loads(r.stdout)["status"] == "refused"
        assert len(smtp.received) == 2

        r = sb("runs", "rerun", first["id"], "--call", call["caller_id"], "--args", "{oops")
        assert r.returncode == 2 and "--args: not JSON" in r.stderr

    text = ok(sb("runs", "diff", first["id"], edited["id"])).stdout
    [line] = [x for x in text.splitlines() if "send_email #1  args.subject" in x]
    assert '"Your order A-1001 has shipped"' in line and line.rstrip().endswith('"Edited subject"')
    assert "not rerun in B: 'Ask' (ask), 'Assistant' (agent)" in text
    d = json.loads(ok(sb("runs", "diff", first["id"], edited["id"], "--json")).stdout)
    assert {"tool": "send_email", "index": 1, "caller_a": call["caller_id"],
            "caller_b": edited_caller(edited["id"]), "path": "args.subject",
            "a": "Your order A-1001 has shipped", "b": "Edited subject"} in d["tool_calls"]
    assert {"field": "tokens", "a": 506, "b": 0, "same": False} in d["summary"]


def edited_caller(run_id: str) -> str:
    [call] = json.loads(ok(sb("runs", "show", run_id, "--json")).stdout)["tool_calls"]
    return call["caller_id"]


def test_a_call_a_person_edited_is_compared_and_repeated_as_it_ran():
    """At a breakpoint (or approving with changes) a person edited the call:
    the diff and `runs rerun --call` use the arguments it ran with; the
    LLM's stay under "asked"."""
    from runtime.events import DebugResumed, ToolCall, ToolDecision, ToolResult
    from runtime.rerun import _call_args
    from runtime.rundiff import diff_runs, facts

    def run(subject_asked: str, subject_ran: str | None, via: str = "breakpoint") -> list:
        events = [ToolCall(agent="agent", node="mail", tool="send_email", caller_id="c-1",
                           args={"to": "a@example.com", "subject": subject_asked})]
        if subject_ran is not None and via == "breakpoint":
            events.append(DebugResumed(hold=1, node="mail", caller_id="c-1", action="edited",
                                       edited=True, msg={"to": "a@example.com",
                                                         "subject": subject_ran}))
        elif subject_ran is not None:
            events.append(ToolDecision(agent="agent", tool="send_email", caller_id="c-1",
                                       decision="edited",
                                       by="designer", args={"to": "a@example.com",
                                                            "subject": subject_ran}))
        events.append(ToolResult(agent="agent", node="mail", tool="send_email", caller_id="c-1",
                                 status="success", data={"ok": True}))
        return events

    edited = run("Asked by the LLM", "Edited at the stop")
    [call] = facts(edited).calls
    assert call["args"]["subject"] == "Edited at the stop" and call["edited"] is True
    assert call["asked"]["subject"] == "Asked by the LLM"
    assert _call_args(call, None)["subject"] == "Edited at the stop"  # what a rerun repeats
    approved = facts(run("Asked", "Changed when approved", via="approval")).calls[0]
    assert approved["args"]["subject"] == "Changed when approved"
    # Two runs whose LLM asked alike but one was edited: the diff shows it.
    diff = diff_runs(run("Same", None), edited)
    assert [(c["path"], c["a"], c["b"]) for c in diff["tool_calls"]] == [
        ("args.subject", "Same", "Edited at the stop")]

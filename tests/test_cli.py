"""`switchboard` as a user runs it: a subprocess on real files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.events import parse_event
from tests.runtime_fixtures import N, flow_data

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "resources" / "examples"


def sb(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "runtime.cli", *args] if code is None else [
        sys.executable, "-c", code, *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def write(tmp_path: Path, data, name: str = "f.flow.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2),
                    encoding="utf-8")
    return str(path)


# -- run ------------------------------------------------------------------------------


def test_run_order_triage_prints_the_expected_lines():
    r = sb("run", str(EXAMPLES / "order-triage.flow.json"))
    assert r.returncode == 0, r.stderr
    got = lines(r.stdout)
    # The two summaries wait in a delay; compare without relying on its timing.
    assert sorted(got, key=json.dumps) == sorted([
        {"node": "report", "name": "Report", "value": "Order A-1001 for Ada: 2 lines, small"},
        {"node": "report", "name": "Report", "value": "Order A-1002 for Grace: 14 lines, large"},
        {"node": "problem", "name": "Problems",
         "value": "template: can't multiply sequence by non-int of type 'float'"},
    ], key=json.dumps)
    assert "Traceback" not in r.stderr


def test_order_triage_uses_every_core_node():
    data = json.loads((EXAMPLES / "order-triage.flow.json").read_text(encoding="utf-8"))
    used = {n["type"] for n in data["nodes"]}
    assert used >= {"core.inject", "core.debug", "core.change", "core.switch", "core.template",
                    "core.delay", "core.catch", "core.split"}


def test_run_hello():
    r = sb("run", str(EXAMPLES / "hello.flow.json"))
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout) == [{"node": "show", "name": "Show", "value": "Hello, World!"}]


def test_set_parses_json_when_it_parses_else_text():
    hello = str(EXAMPLES / "hello.flow.json")
    r = sb("run", hello, "--set", 'start.payload={"name": "Ada"}', "--set", "start.count=2")
    assert r.returncode == 0, r.stderr
    assert [x["value"] for x in lines(r.stdout)] == ["Hello, Ada!", "Hello, Ada!"]
    r = sb("run", hello, "--set", "start.payload=Grace", "--set",
           "greet.template=Hi {{ payload }}")
    assert [x["value"] for x in lines(r.stdout)] == ["Hi Grace"]
    # A str param gets the raw text even when it would parse as JSON.
    r = sb("run", hello, "--set", "greet.template=123")
    assert [x["value"] for x in lines(r.stdout)] == ["123"]


@pytest.mark.parametrize("item, why", [
    ("nope.x=1", "no node 'nope'"),
    ("start.colour=1", "has no param 'colour'"),
    ("start.count=abc", "params.count.value: expected an integer"),
    ("start=1", "expected NODE.PARAM=VALUE"),
])
def test_bad_set_is_bad_input(item, why):
    r = sb("run", str(EXAMPLES / "hello.flow.json"), "--set", item)
    assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_events_file_holds_every_event_as_json_lines(tmp_path):
    events = tmp_path / "events.jsonl"
    r = sb("run", str(EXAMPLES / "hello.flow.json"), "--events", str(events), "--trace")
    assert r.returncode == 0, r.stderr
    parsed = [parse_event(line) for line in events.read_text(encoding="utf-8").splitlines()]
    kinds = [e.type for e in parsed]
    assert kinds[0] == "run.started" and kinds[-1] == "run.finished"
    assert kinds.count("message.sent") == 2 and "stats" in kinds
    [debug] = [e for e in parsed if e.type == "debug"]
    assert debug.value == "Hello, World!"


def test_events_to_an_unwritable_place_is_bad_input(tmp_path):
    r = sb("run", str(EXAMPLES / "hello.flow.json"), "--events",
           str(tmp_path / "no" / "such" / "dir" / "e.jsonl"))
    assert r.returncode == 2 and "--events" in r.stderr and "Traceback" not in r.stderr


def test_timeout_with_work_unfinished_exits_124_and_says_what(tmp_path):
    path = write(tmp_path, flow_data([N("a", "core.inject", payload=1),
                                      N("wait", "core.delay", seconds=3600),
                                      N("d", "core.debug")], ["a->wait", "wait->d"]))
    events = tmp_path / "e.jsonl"
    r = sb("run", path, "--timeout", "0.2", "--events", str(events))
    assert r.returncode == 124 and r.stdout == ""
    assert "stopped after 0.2 s; unfinished: wait (1)" in r.stderr
    fin = finished(events)
    assert fin.reason == "timeout" and fin.in_flight == {"wait": 1}


def test_timeout_of_a_long_running_flow_with_nothing_in_flight_exits_0(tmp_path):
    # An inject that repeats forever is how a user runs a service; its
    # timeout is how they stop it, and nothing was left half done.
    path = write(tmp_path, flow_data([N("a", "core.inject", payload=1, repeat_seconds=3600,
                                        count=0), N("d", "core.debug")], ["a->d"]))
    events = tmp_path / "e.jsonl"
    r = sb("run", path, "--timeout", "0.3", "--events", str(events))
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout) == [{"node": "d", "name": "Debug", "value": 1}]
    assert "nothing was in flight" in r.stderr
    fin = finished(events)
    assert fin.reason == "timeout" and fin.in_flight == {}


def finished(events: Path):
    evs = [parse_event(line) for line in events.read_text(encoding="utf-8").splitlines()]
    assert evs and evs[-1].type == "run.finished", [e.type for e in evs[-3:]]
    return evs[-1]


STORM = [N("src", "core.inject", payload="x"), N("loop", "core.change"),
         N("a", "core.change"), N("b", "core.change")]
STORM_WIRES = ["src->loop", "loop->a", "loop->b", "a->loop", "b->loop"]


def test_fan_out_cycle_fails_as_a_message_storm_within_its_memory_bound(tmp_path):
    # Each lap doubles the messages; this once grew to 2.7 GB, past --timeout.
    path = write(tmp_path, flow_data(STORM, STORM_WIRES))
    events = tmp_path / "e.jsonl"
    # This run's own peak memory: a wrapper process runs the CLI and reports
    # its children's (only the CLI's) largest resident size, not the largest
    # of every child this test session has had.
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print('maxrss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
               "file=sys.stderr); sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "runtime.cli",
                        "run", path, "--timeout", "5", "--events", str(events)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1, r.stderr
    fin = finished(events)
    assert fin.reason == "failed" and fin.status == "error"
    assert fin.message.startswith("message storm at ") and "100000 messages in flight" in fin.message
    assert "message storm at" in r.stderr and "Traceback" not in r.stderr
    [maxrss] = [int(line.split()[1]) for line in r.stderr.splitlines()
                if line.startswith("maxrss ")]
    assert 0 < maxrss < 500 * 1024  # KB: far below the 2.7 GB the storm once took


def test_max_in_flight_is_a_run_option(tmp_path):
    path = write(tmp_path, flow_data(STORM, STORM_WIRES))
    r = sb("run", path, "--timeout", "5", "--max-in-flight", "1000")
    assert r.returncode == 1
    assert "messages in flight (the limit is 1000)" in r.stderr


def test_run_help_documents_the_exit_codes():
    r = sb("run", "--help")
    assert r.returncode == 0
    for code, word in (("124", "--timeout"), ("130", "SIGINT"), ("143", "SIGTERM"),
                       ("2", "bad input"), ("1", "failed")):
        assert any(line.strip().startswith(code) and word in line
                   for line in r.stdout.splitlines()), (code, r.stdout)


def _start(tmp_path: Path, path: str, *extra: str, code: str | None = None):
    events = tmp_path / "e.jsonl"
    cmd = ([sys.executable, "-m", "runtime.cli"] if code is None
           else [sys.executable, "-c", code]) + ["run", path, "--events", str(events), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)
    return proc, events


LONG_FLOW = [N("a", "core.inject", payload="started"), N("d", "core.debug"),
             N("wait", "core.delay", seconds=3600)]
LONG_WIRES = ["a->d", "a->wait"]


@pytest.mark.parametrize("signame, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_ends_the_run_with_run_finished_and_its_exit_code(tmp_path, data_dir, signame,
                                                                   code):
    import signal

    from runtime.history import History

    path = write(tmp_path, flow_data(LONG_FLOW, LONG_WIRES))
    proc, events = _start(tmp_path, path)
    # The first debug line proves the run is going; the delay holds it open.
    assert json.loads(proc.stdout.readline())["value"] == "started"
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    fin = finished(events)
    assert fin.reason == "interrupted" and fin.message == f"interrupted by {signame}"
    assert fin.in_flight == {"wait": 1}
    with History() as h:
        [run] = h.runs()
        assert run.id == fin.run_id and run.status == "stopped"
        assert [e.type for e in h.events(run.id)][-1] == "run.finished"


# A node that never returns to the event loop: only the watchdog can end it.
STUCK = """
import sys, time
from runtime.node import Node, node
from runtime.registry import Registry

@node("test.stuck", name="Stuck", category="Test")
class Stuck(Node):
    def on_message(self, msg):
        t = time.monotonic()
        while time.monotonic() - t < 120:
            pass

Registry.default()._classes["test.stuck"] = Stuck
from runtime.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_stuck_in_inline_work_still_ends_at_its_timeout(tmp_path, data_dir):
    from runtime.history import History

    path = write(tmp_path, flow_data([N("a", "core.inject", payload=1), N("s", "test.stuck")],
                                     ["a->s"]))
    proc, events = _start(tmp_path, path, "--timeout", "0.5", code=STUCK)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 124, err
    assert "did not stop on time: node 's' kept the event loop busy" in err
    fin = finished(events)
    assert fin.reason == "timeout" and fin.in_flight == {"s": 1}
    assert [e.type for e in map(parse_event, events.read_text().splitlines())][0] == "run.started"
    with History() as h:
        [run] = h.runs()
        assert run.status == "timeout"


def test_sigterm_ends_a_run_stuck_in_inline_work(tmp_path, data_dir):
    import signal

    path = write(tmp_path, flow_data([N("a", "core.inject", payload=1), N("d", "core.debug"),
                                      N("s", "test.stuck")], ["a->d", "a->s"]))
    proc, events = _start(tmp_path, path, code=STUCK)
    assert json.loads(proc.stdout.readline())["value"] == 1
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    fin = finished(events)
    assert fin.reason == "interrupted" and fin.message == "interrupted by SIGTERM"


def test_every_cli_run_is_recorded_in_history(tmp_path, data_dir):
    from runtime.history import History

    r = sb("run", str(EXAMPLES / "hello.flow.json"))
    assert r.returncode == 0, r.stderr
    r = sb("run", str(EXAMPLES / "hello.flow.json"), "--no-history")
    with History() as h:
        [run] = h.runs()
        assert run.status == "ok" and run.path.endswith("hello.flow.json")
        assert "debug" in {e.type for e in h.events(run.id)}


def test_uncaught_node_error_exits_1(tmp_path):
    path = write(tmp_path, flow_data([N("a", "core.inject", payload="x"),
                                      N("t", "core.template", template="{{ payload * 1.5 }}"),
                                      N("d", "core.debug")], ["a->t", "t->d"]))
    r = sb("run", path)
    assert r.returncode == 1 and r.stdout == ""
    assert "error: node 'Template' (t): template:" in r.stderr and "Traceback" not in r.stderr


def test_a_param_read_at_start_that_needs_a_message_is_bad_input_naming_the_node(tmp_path):
    """A Switch reads its path when the flow starts, before any message: an
    expression of msg there is the flow's fault (exit 2, the node named),
    not an internal error (found by the fuzz test on an on_tool hook)."""
    switch = N("s", "core.switch", rules=[{"op": "else"}])
    switch["params"]["path"] = {"scope": "expression", "value": "{{ 'x' * msg.payload }}"}
    path = write(tmp_path, flow_data([N("a", "core.inject", payload=1), switch,
                                      N("d", "core.debug")], ["a->s", "s.out0->d"]))
    r = sb("run", path)
    assert r.returncode == 2, r.stderr
    assert "node 's': read when the flow starts, before any message: params.path:" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_caught_error_is_printed_as_caught_with_the_nodes_name():
    r = sb("run", str(EXAMPLES / "order-triage.flow.json"))
    assert r.returncode == 0, r.stderr
    assert "handled: node 'Price with VAT' (bad) failed: template:" in r.stderr
    assert "error:" not in r.stderr


# -- bad input ------------------------------------------------------------------------

GOOD = flow_data([N("a", "core.inject"), N("b", "core.debug")], ["a->b"])


def with_node(node: dict, wire: str | None = "a->x") -> dict:
    data = flow_data([N("a", "core.inject"), node], [wire] if wire else [])
    return data


BAD = {
    "invalid-json": ('{"format": "switchboard.flow/1", "nodes": [\n', [
        ("", "line 2 column 1", "invalid JSON")]),
    "unknown-format": ({**GOOD, "format": "node-red/1"}, [("", "format", "unknown format")]),
    "unknown-type": (with_node(N("x", "core.nope")), [
        ("node 'x'", "type", "unknown node type 'core.nope'")]),
    "unknown-port": (flow_data([N("a", "core.inject"), N("b", "core.debug")], ["a.nope->b"]), [
        ("node 'a'", "wires[0].from", "unknown output port 'nope'")]),
    "wrong-param-type": (with_node(N("x", "core.inject", count="three"), None), [
        ("node 'x'", "params.count.value", "expected an integer")]),
    "scope-not-allowed": (with_node({"id": "x", "type": "core.template",
                                     "params": {"template": {"scope": "ai"}}}), [
        ("node 'x'", "params.template.scope", "scope 'ai' is not allowed")]),
    "duplicate-ids": (flow_data([N("a", "core.inject"), N("b", "core.debug"),
                                 N("b", "core.debug")], ["a->b"]), [
        ("node 'b'", "id", "duplicate node id 'b'")]),
    "two-problems": (flow_data([N("a", "core.inject", count=1.5), N("b", "core.nope")]), [
        ("node 'a'", "params.count.value", "expected an integer"),
        ("node 'b'", "type", "unknown node type")]),
}


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_with_one_line_per_problem(tmp_path, case, command):
    data, expected = BAD[case]
    path = write(tmp_path, data)
    r = sb(command, path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == len(expected), err
    for line, (node, field, why) in zip(err, expected, strict=True):
        assert line.startswith(path + ":")
        assert node in line and field in line and why in line, line


def test_missing_file_is_bad_input(tmp_path):
    r = sb("run", str(tmp_path / "nope.flow.json"))
    assert r.returncode == 2 and "file not found" in r.stderr and "Traceback" not in r.stderr


def test_usage_errors_exit_2():
    r = sb("run")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = sb("frobnicate")
    assert r.returncode == 2 and "Traceback" not in r.stderr


# -- validate, nodes, no args -------------------------------------------------------------


def test_validate_ok_and_warnings(tmp_path):
    path = write(tmp_path, flow_data([N("a", "core.inject"), N("b", "core.debug"),
                                      N("lonely", "core.debug")], ["a->b"]))
    r = sb("validate", path)
    assert r.returncode == 0
    assert r.stdout.strip() == f"{path}: ok (3 nodes, 1 wires)"
    assert f"{path}: node 'lonely', in: warning: input is not connected" in r.stderr


def test_nodes_lists_the_catalog():
    r = sb("nodes")
    assert r.returncode == 0
    types = {line.split()[0] for line in r.stdout.splitlines()}
    assert {"core.inject", "core.debug", "core.change", "core.switch", "core.template",
            "core.delay", "core.catch", "core.split"} <= types


def test_nodes_json_is_the_full_specs():
    r = sb("nodes", "--json")
    assert r.returncode == 0
    specs = {s["type"]: s for s in json.loads(r.stdout)}
    inject = specs["core.inject"]
    assert {p["name"] for p in inject["params"]} == {"payload_type", "payload", "topic",
                                                     "repeat_seconds", "count"}
    assert inject["source"] and inject["inputs"] == []
    assert [p["name"] for p in specs["core.switch"]["params"]] == ["path", "rules", "mode"]


def test_no_args_without_the_designer_prints_help():
    blocked = ("import sys; sys.modules['designer'] = None; sys.argv[0] = 'switchboard'; "
               "from runtime.cli import main; sys.exit(main(sys.argv[1:]))")
    r = sb(code=blocked)
    assert r.returncode == 0 and "usage: switchboard" in r.stdout
    assert "run" in r.stdout and "Traceback" not in r.stderr


def test_help():
    r = sb("--help")
    assert r.returncode == 0 and "validate" in r.stdout


def test_designer_without_a_display_says_so_instead_of_aborting(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    out = subprocess.run([sys.executable, "-m", "runtime.cli"], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "no display found" in out.stderr and "switchboard run FLOW" in out.stderr
    assert "Traceback" not in out.stderr


def test_max_in_flight_is_a_flow_setting_and_the_option_wins(tmp_path):
    data = flow_data(STORM, STORM_WIRES)
    data["settings"] = {"max_in_flight": 2000}
    path = write(tmp_path, data)
    r = sb("run", path, "--timeout", "5")
    assert r.returncode == 1 and "(the limit is 2000)" in r.stderr
    r = sb("run", path, "--timeout", "5", "--max-in-flight", "500")
    assert r.returncode == 1 and "(the limit is 500)" in r.stderr


@pytest.mark.parametrize("value", [0, -5, "many", 10**12])
def test_a_bad_max_in_flight_setting_is_refused_where_it_is(tmp_path, value):
    data = flow_data(STORM, STORM_WIRES)
    data["settings"] = {"max_in_flight": value}
    r = sb("validate", write(tmp_path, data))
    assert r.returncode == 2 and "settings.max_in_flight" in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_what_a_node_logs_reaches_the_terminal(tmp_path):
    # A webhook says where it listens; with port 0 that is the only way to know.
    path = write(tmp_path, flow_data([N("hook", "trigger.webhook", port=0)], []))
    r = sb("run", path, "--timeout", "1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"node 'Webhook' \(hook\): listening on http://127\.0\.0\.1:\d+/webhook",
                     r.stderr)


# -- approval and tool errors, headless ------------------------------------------------------


def mail_agent_flow(tmp_path: Path, calls: list[dict], mail: dict | None = None) -> str:
    """Ask -> scripted agent -> Answer, Send Mail (outbox) on its tools port;
    the agent makes ``calls`` in one turn, then answers."""
    fixed = lambda v: {"scope": "custom", "value": v}  # noqa: E731
    return write(tmp_path, {
        "format": "switchboard.flow/1", "name": "Mail",
        "nodes": [
            {"id": "ask", "type": "core.inject", "params": {"payload": fixed("go")}},
            {"id": "agent", "type": "ai.agent", "name": "Assistant", "params": {
                "provider": fixed("scripted"),
                "script": fixed([{"tool_calls": calls}, {"text": "Done: {last_result}"}])}},
            {"id": "show", "type": "core.debug", "name": "Answer"},
            {"id": "mail", "type": "mail.send", "name": "Send Mail", **(mail or {}),
             "params": {"to": {"scope": "ai"}, "subject": {"scope": "ai"},
                        "body": fixed("hello"), "delivery": fixed("outbox"),
                        "outbox_dir": fixed(str(tmp_path / "outbox"))}}],
        "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["show", "in"]},
                  {"from": ["agent", "tools"], "to": ["mail", "in"]}]})


def test_approval_without_a_terminal_says_the_way_out_once_per_run(tmp_path):
    """No terminal (a new session, as in CI): each call that needs approval
    is rejected, and the run's last line, once, names --approve auto,
    --approve POLICY.json and the tool's approval setting."""
    two = [{"name": "send_email", "arguments": {"to": f"{who}@example.com", "subject": "Hi"}}
           for who in ("john", "eve")]
    flow = mail_agent_flow(tmp_path, two)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "run", flow], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=60, start_new_session=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "outbox").exists()  # neither ran
    said = [line for line in r.stderr.splitlines() if "--approve" in line]
    assert len(said) == 1, r.stderr
    [line] = said
    assert line == r.stderr.splitlines()[-1]
    assert line.startswith("switchboard: 2 calls of send_email needed approval and did not "
                           "run: there is no terminal to ask on.")
    for way in ("--approve auto", "--approve POLICY.json", "docs/tools.md#approval-policy-files",
                "approval to never"):
        assert way in line
    # Each call's rejection, as the agent read it, is short: the way out is
    # the run's to say, not the LLM's.
    [answer] = lines(r.stdout)
    assert "approval needed, but there is no terminal to ask on" in answer["value"]
    assert "--approve" not in answer["value"]
    # With a way to decide, nothing is said.
    auto = sb("run", flow, "--approve", "auto")
    assert auto.returncode == 0 and "--approve" not in auto.stderr
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 2


def test_a_failed_tool_call_is_handled_by_its_agent_not_a_catch_node(tmp_path):
    """A tool node's error goes back to the agent as the tool's result: the
    CLI says so, and names no Catch node where the flow has none."""
    bad = [{"name": "send_email", "arguments": {"to": "not an address", "subject": "Hi"}}]
    flow = mail_agent_flow(tmp_path, bad, {"tool": {"approval": {"mode": "never"}}})
    r = sb("run", flow)
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("handled:")]
    assert line.startswith("handled: node 'Send Mail' (mail) failed: ")
    assert line.endswith("(agent 'Assistant' got it as the tool's result)")
    assert "Catch" not in r.stderr


@pytest.mark.parametrize("command", ["validate", "tools", "run"])
def test_a_tool_name_an_llm_cannot_call_is_refused_by_every_command(tmp_path, command):
    """`validate` refuses it, naming the node and field, as `tools` and `run`
    do: no command reaches an "internal error" on it."""
    flow = mail_agent_flow(tmp_path, [], {"tool": {"name": "bad name!"}})
    r = sb(command, flow)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        f"{flow}: node 'mail', tool.name: tool name \"bad name!\" is not a name an LLM can "
        "call: use 1-64 letters, digits, '_' or '-' (e.g. notify_ops)"]
    assert "internal error" not in r.stderr


# -- a plugin that needs its npm packages ----------------------------------------------------


def test_a_plugin_without_its_npm_packages_is_named_where_its_nodes_matter(tmp_path):
    """A Node.js plugin copied without node_modules (a fresh clone, `pip
    install -e .` and no npm step): commands that do not touch its nodes say
    nothing of it; the catalog says it once; a flow using one of its nodes
    is refused naming the plugin and the command that sets it up."""
    data = tmp_path / "data"
    plugin = data / "plugins" / "shouter"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text(json.dumps(
        {"name": "shouter", "language": "node", "command": ["node", "index.js"]}))
    (plugin / "package.json").write_text('{"name": "shouter", "version": "0.1.0"}')
    (plugin / "package-lock.json").write_text('{"lockfileVersion": 3}')
    (plugin / "index.js").write_text("const sb = require('./switchboard');\n"
                                     "sb.node('shout.loud', {name: 'Loud', category: 'Text'});\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(data)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=60)

    hello = str(EXAMPLES / "hello.flow.json")
    for args in (("validate", hello), ("run", hello), ("runs", "list"), ("tools", hello)):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        assert "npm" not in done.stderr, (args, done.stderr)
    listed = run("nodes")
    assert listed.returncode == 0
    said = [line for line in listed.stderr.splitlines() if "npm" in line]
    assert said == [f"warning: plugin 'shouter' needs its npm packages: run `npm ci` in {plugin}"]
    flow = write(tmp_path, flow_data([N("ask", "core.inject"), N("loud", "shout.loud")],
                                     ["ask->loud"]))
    for command in ("validate", "run"):
        refused = run(command, flow)
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"{flow}: node 'loud', type: unknown node type 'shout.loud': the plugin package "
            "'shouter' in data/plugins/shouter provides it, but needs its npm packages first: "
            "run `npm ci` in data/plugins/shouter"]

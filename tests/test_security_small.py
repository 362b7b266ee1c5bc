"""Small hostile inputs, each through the real part that meets it:

- NaN, Infinity and 1e400 (JSON has none of them; Python's json reads and
  writes them): a webhook body is refused with 400, HTTP Response will not
  send one as application/json, a flow file holding one fails validate
  naming the node and field, ``--set`` refuses one, and ``switchboard run``'s
  JSON-lines output stays JSON when a script computes one;
- core.delay seconds must be finite and bounded (NaN passed at once,
  Infinity held the message for ever);
- control characters (terminal escape codes, newlines) in a node id, a
  node's error or what it prints are escaped wherever the CLI quotes them;
- a 300-character file name from the AI is refused naming the bound, never
  with "OSError" and never showing the base folder's location.

Real loopback HTTP, real ``switchboard`` subprocesses, the real script
worker and the scripted LLM provider through the real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.files.file_nodes import ReadFile, WriteFile
from nodes.files.paths import MAX_NAME_BYTES, PathRefused, confined_path
from runtime.flow import FlowError, load_flow, parse_flow, validate_flow
from runtime.registry import Registry
from runtime.text import NotFiniteError, finite_loads, finite_or_none, printable, quoted
from tests import servers
from tests.runtime_fixtures import N, make_flow, run
from tests.servers.flows import agent_flow, fixed, scripted
from tests.test_http_nodes import Served, hook

ROOT = Path(__file__).resolve().parents[1]
WAIT = 30  # seconds a run or a subprocess may take at most; never a measured time
ESC = "\x1b"


def sb(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=WAIT * 2)


def strict_json(line: str):
    """json.loads that fails on NaN/Infinity, as any other JSON parser does."""
    def refuse(name: str):
        raise ValueError(f"{name} in {line!r}")
    return json.loads(line, parse_constant=refuse)


def flow_text(nodes: str, wires: str = "[]") -> str:
    """A flow file's text, written by hand: json.dumps could not write NaN
    in the places a hostile file has it."""
    return ('{"format": "switchboard.flow/1", "name": "hostile", '
            f'"nodes": [{nodes}], "wires": {wires}}}')


def python_node(node_id: str, code: str) -> dict:
    return N(node_id, "core.python", code=code)


# -- the helpers themselves ------------------------------------------------------------

def test_printable_escapes_controls_and_keeps_ordinary_text():
    assert printable("plain text, café, 日本, emoji 👩‍💻") == "plain text, café, 日本, emoji 👩‍💻"
    assert printable(f"a{ESC}[31mred\nerror: forged\r\t") == "a\\x1b[31mred\\nerror: forged\\r\\t"
    assert printable("\u202eevil\u2066x\u2028y\x7f\x9b") == "\\u202eevil\\u2066x\\u2028y\\x7f\\x9b"
    assert quoted("x" * 300, 10) == "'" + "x" * 10 + "…'"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_printable_output_is_always_one_safe_line(text):
    shown = printable(text)
    assert "\n" not in shown and "\r" not in shown and ESC not in shown
    assert all(not (ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f) for c in shown)
    assert "\u202e" not in shown and "\u2028" not in shown
    if text.isprintable():
        assert shown == text


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=12))
def test_finite_loads_refuses_exactly_what_json_cannot_carry(value):
    text = json.dumps(value)  # allow_nan: may write NaN, Infinity, -Infinity
    try:
        json.dumps(value, allow_nan=False)
        carried = True
    except ValueError:
        carried = False
    if carried:
        assert finite_loads(text) == json.loads(text)
    else:
        with pytest.raises(NotFiniteError):
            finite_loads(text)
        strict_json(json.dumps(finite_or_none(value), allow_nan=False))


def test_finite_loads_names_an_overflowing_number():
    with pytest.raises(NotFiniteError, match=r"1e400 is out of range"):
        finite_loads('{"a": [1e400]}')
    with pytest.raises(NotFiniteError, match="-Infinity is not a JSON number"):
        finite_loads("[-Infinity]")
    assert finite_loads('{"a": 1e308, "b": -1e-400}') == {"a": 1e308, "b": -0.0}


# -- webhook and HTTP Response ---------------------------------------------------------

@pytest.mark.parametrize("body, why", [
    (b'{"n": NaN}', "NaN is not a JSON number"),
    (b'{"n": [Infinity]}', "Infinity is not a JSON number"),
    (b'-Infinity', "-Infinity is not a JSON number"),
    (b'{"n": 1e400}', "1e400 is out of range"),
    (b'{"n": 1' + b"0" * 400 + b'.5}', "is out of range"),
])
async def test_webhook_refuses_a_json_body_with_nan_or_infinity(body, why):
    nodes = [hook(), N("show", "core.debug"), N("reply", "http.response")]
    async with Served(nodes, ["hook->show", "hook->reply"]) as s, httpx.AsyncClient() as c:
        r = await c.post(s.url, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, r.text
        assert r.text.startswith("the body is not valid JSON: ") and why in r.text
        assert s.debug() == []  # no message reached the flow
        # An ordinary body is still served, and its answer is JSON.
        r = await c.post(s.url, content=b'{"n": 1.5e300}',
                         headers={"Content-Type": "application/json"})
        assert r.status_code == 200 and strict_json(r.text) == {"n": 1.5e300}


async def test_http_response_never_sends_nan_as_json():
    # A script computes NaN; HTTP Response refuses to send it as JSON (the
    # client's parser would fail on it) and a Catch node answers 500 instead.
    nodes = [hook(),
             python_node("calc", "msg['payload'] = {'ratio': float('nan'), 'n': 1}\nreturn msg"),
             N("reply", "http.response"),
             N("catch", "core.catch", nodes=["reply"]),
             N("oops", "http.response", status=500,
               body={"scope": "message", "path": "error.message"})]
    wires = ["hook->calc", "calc->reply", "catch->oops"]
    async with Served(nodes, wires) as s, httpx.AsyncClient(timeout=WAIT) as c:
        r = await c.post(s.url, json={"n": 1})
    assert r.status_code == 500, r.text
    assert r.text == ("body.ratio: NaN cannot be sent as JSON (JSON has no NaN or Infinity); "
                      "turn it into a number or text first")
    [err] = [e for e in s.events if e.type == "node.error"]
    assert err.node == "reply" and err.message == r.text


# -- flow files ------------------------------------------------------------------------

@pytest.mark.parametrize("value, what", [
    ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "Infinity"), ("1e400", "Infinity"),
    ('{"deep": [1, 1' + "0" * 310 + '.0]}', "Infinity"),
])
def test_validate_refuses_a_non_finite_number_naming_node_and_field(tmp_path, value, what):
    path = tmp_path / "nan.flow.json"
    path.write_text(flow_text(
        '{"id": "src", "type": "core.inject", "params": {"payload": {"scope": "custom", '
        '"value": ' + value + '}}}, {"id": "show", "type": "core.debug"}',
        '[{"from": ["src", "out"], "to": ["show", "in"]}]'), encoding="utf-8")
    for command in ("validate", "run"):
        r = sb(tmp_path, command, str(path))
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert r.stdout == ""  # nothing ran, nothing printed as NaN
        [line] = r.stderr.splitlines()
        field = "params.payload.value" + (".deep[1]" if "deep" in value else "")
        assert line.startswith(f"{path}: node 'src', {field}: {what}"), line
        assert "must be finite" in line
    with pytest.raises(FlowError) as err:
        load_flow(path)
    assert [(p.node, p.field) for p in err.value.problems] == [("src", field)]


def test_numbers_that_only_look_like_overflow_still_load(tmp_path):
    # The check runs when the text holds NaN/Infinity/e308 anywhere, strings
    # included; a flow whose numbers are all finite loads all the same.
    path = tmp_path / "fine.flow.json"
    path.write_text(flow_text(
        '{"id": "src", "type": "core.inject", "name": "NaN or Infinity e400", "params": '
        '{"payload": {"scope": "custom", "value": [1e308, -1e-400, 1.7976931348623157e308]}}}'),
        encoding="utf-8")
    assert load_flow(path).node("src").params["payload"].value[0] == 1e308


def test_parse_flow_refuses_non_finite_numbers_too():
    data = {"format": "switchboard.flow/1", "name": "x",
            "nodes": [{"id": "w", "type": "core.delay",
                       "params": {"seconds": {"scope": "custom", "value": float("inf")}}}]}
    with pytest.raises(FlowError) as err:
        parse_flow(data)
    [problem] = err.value.problems
    assert (problem.node, problem.field) == ("w", "params.seconds.value")


def test_set_refuses_nan_and_infinity(tmp_path):
    path = tmp_path / "ok.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "x", "nodes": [
        {"id": "src", "type": "core.inject"}, {"id": "show", "type": "core.debug"}],
        "wires": [{"from": ["src", "out"], "to": ["show", "in"]}]}), encoding="utf-8")
    for value, why in (("NaN", "NaN is not a JSON number"), ("[1e999]", "1e999 is out of range")):
        r = sb(tmp_path, "run", str(path), "--set", f"src.payload={value}")
        assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
        assert why in r.stderr and "JSON has no NaN or Infinity" in r.stderr


def test_run_output_stays_json_when_a_script_computes_nan(tmp_path):
    path = tmp_path / "calc.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "x", "nodes": [
        {"id": "src", "type": "core.inject", "params": {"payload": fixed(2)}},
        {"id": "calc", "type": "core.python", "params": {"code": fixed(
            "msg['payload'] = {'nan': float('nan'), 'inf': [float('inf'), -float('inf')], "
            "'ok': msg['payload'] / 4}\nreturn msg")}},
        {"id": "show", "type": "core.debug"}],
        "wires": [{"from": ["src", "out"], "to": ["calc", "in"]},
                  {"from": ["calc", "out"], "to": ["show", "in"]}]}), encoding="utf-8")
    r = sb(tmp_path, "run", str(path))
    assert r.returncode == 0, r.stderr
    [line] = r.stdout.splitlines()
    assert strict_json(line) == {"node": "show", "name": "Debug",
                                 "value": {"nan": None, "inf": [None, None], "ok": 0.5}}


# -- core.delay ------------------------------------------------------------------------

@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1, 31 * 86_400])
def test_delay_seconds_must_be_finite_and_bounded_when_validated(seconds):
    flow = make_flow([N("src", "core.inject"), N("wait", "core.delay", seconds=seconds)],
                     ["src->wait"])
    errors = [p for p in validate_flow(flow, Registry.default()) if p.severity == "error"]
    assert len(errors) == 1, errors
    [problem] = errors
    assert (problem.node, problem.field) in (("wait", "params.seconds.value"),
                                             ("wait", "params.seconds"))
    assert "finite" in problem.message or "from 0 to 2592000" in problem.message


def test_a_flow_file_with_delay_infinity_fails_validate(tmp_path):
    path = tmp_path / "delay.flow.json"
    path.write_text(flow_text(
        '{"id": "src", "type": "core.inject"}, {"id": "wait", "type": "core.delay", '
        '"params": {"seconds": {"scope": "custom", "value": Infinity}}}',
        '[{"from": ["src", "out"], "to": ["wait", "in"]}]'), encoding="utf-8")
    r = sb(tmp_path, "validate", str(path))
    assert r.returncode == 2
    assert r.stderr.startswith(f"{path}: node 'wait', params.seconds.value: Infinity")


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "-0.5", "10 ** 9"])
async def test_delay_refuses_seconds_from_the_message_out_of_bounds(value):
    # NaN used to pass at once and Infinity to hold the message for ever
    # (this run's timeout is only the bound on a failing test).
    flow = make_flow([N("src", "core.inject"),
                      python_node("calc", f"msg['payload'] = {value}\nreturn msg"),
                      N("wait", "core.delay", seconds={"scope": "message", "path": "payload"}),
                      N("after", "test.sink")], ["src->calc", "calc->wait", "wait->after"])
    r = await run(flow, timeout=WAIT)
    assert r.result.reason == "failed", r.result
    [err] = r.of("node.error")
    assert err.node == "wait"
    assert "seconds must be a number of seconds from 0 to 2592000 (30 days)" in err.message
    assert r.node("after").seen == []


# -- control characters in what the CLI quotes ---------------------------------------

HOSTILE_ID = f"a{ESC}[31mRED\nerror: forged"


def test_validate_escapes_a_node_id_with_escape_codes_and_a_newline(tmp_path):
    path = tmp_path / "esc.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "x", "nodes": [
        {"id": HOSTILE_ID, "type": "core.nosuch"}], "wires": []}), encoding="utf-8")
    r = sb(tmp_path, "validate", str(path))
    assert r.returncode == 2
    [line] = r.stderr.splitlines()  # one line: the newline in the id is not one
    assert ESC not in r.stderr
    assert line.startswith(f"{path}: node 'a\\x1b[31mRED\\nerror: forged', type: ")


def test_run_escapes_node_ids_errors_and_prints(tmp_path):
    src, calc = f"src{ESC}[2J", HOSTILE_ID
    path = tmp_path / "esc.flow.json"
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "x", "nodes": [
        {"id": src, "type": "core.inject", "params": {"payload": fixed(f"x{ESC}[1m\nforged")}},
        {"id": calc, "type": "core.python", "name": f"Calc{ESC}]0;title\x07", "params": {
            "code": fixed(f"print('one\\ntwo {ESC}[2J\\nerror: node \\'x\\': forged')\n"
                          "raise ValueError(msg['payload'])")}}],
        "wires": [{"from": [src, "out"], "to": [calc, "in"]}]}), encoding="utf-8")
    r = sb(tmp_path, "run", str(path), "--trace")
    assert r.returncode == 1, r.stderr
    assert ESC not in r.stderr and "\x07" not in r.stderr
    lines = r.stderr.splitlines()
    who = "node 'Calc\\x1b]0;title\\x07' (a\\x1b[31mRED\\nerror: forged)"
    # Every line of the script's prints carries the node's name first.
    printed = [line for line in lines if "one" in line or "two" in line or "forged'" in line]
    assert printed and all(line.startswith(who + ": ") for line in printed), lines
    [error] = [line for line in lines if line.startswith("error: ")]
    assert error.startswith(f"error: {who}: ") and "\\x1b[1m" in error
    assert not any(line.startswith("error: node 'x'") for line in lines)
    assert [line for line in lines if line.startswith("trace: ")] == [
        "trace: 'Inject' -> 'Calc\\x1b]0;title\\x07' [out] payload=\"x\\u001b[1m\\nforged\""]
    # The run's history, read back later, is quoted the same way.
    shown = sb(tmp_path, "runs", "show", "last")
    assert shown.returncode == 0, shown.stderr
    assert ESC not in shown.stdout and "\x07" not in shown.stdout
    [error] = [line for line in shown.stdout.splitlines() if "ValueError" in line]
    assert error.startswith("  'Calc\\x1b]0;title\\x07' (a\\x1b[31mRED\\nerror: forged): ")


# -- file names from the AI ------------------------------------------------------------

def file_tools(base: Path) -> list[dict]:
    where = {"base_folder": fixed(str(base))}
    return [{"id": "write", "type": "files.write",
             "params": {"path": {"scope": "ai"}, "content": {"scope": "ai"}, **where}},
            {"id": "read", "type": "files.read", "params": {"path": {"scope": "ai"}, **where}}]


@pytest.mark.parametrize("raw, why", [
    ("a" * 300 + ".txt", "the name 'aaaa"),
    ("notes/" + "é" * 200 + ".txt", "is 404 bytes long"),
    # 4,090 characters: under the bound on the text; over PATH_MAX once joined
    ("/".join(["d" * 200] * 20) + "/" + "f" * 69, "more than the 4,000 a path may have here"),
])
async def test_a_long_file_name_from_the_ai_is_refused_naming_the_bound(tmp_path, raw, why):
    base = tmp_path / "base"
    base.mkdir()
    turns = [{"tool_calls": [{"name": "write_file", "arguments": {"path": raw, "content": "x"}},
                             {"name": "read_file", "arguments": {"path": raw}}]},
             {"text": "done"}]
    flow = agent_flow(scripted(turns), file_tools(base), "Save it")
    result, rec, _ = await servers.flows.run(
        flow, reg=Registry([Inject, DebugNode, Agent, WriteFile, ReadFile]))
    assert result.status == "ok", rec.of("node.error")
    [answer] = rec.debug_values()
    calls = answer["agent"]["tool_calls"]
    assert [c["status"] for c in calls] == ["error", "error"], calls
    for call in calls:
        assert call["error"].startswith("path: ") and why in call["error"], call["error"]
        assert "OSError" not in call["error"] and "failed unexpectedly" not in call["error"]
        bound = f"at most {MAX_NAME_BYTES} bytes" if "4,000" not in why else "4,000"
        assert bound in call["error"]
    for event in rec.of("node.error"):  # the node's own error text too
        assert str(tmp_path) not in event.message and "OSError" not in event.message
    assert list(base.iterdir()) == []  # nothing was created


def test_confined_path_bounds_names_in_bytes():
    with pytest.raises(PathRefused, match=r"is 256 bytes long; a file or folder name may have at"):
        confined_path("/tmp", "x" * 256)
    assert confined_path("/tmp", "x" * 255).name == "x" * 255

"""core.python: each test runs a real flow whose script runs in a real
worker process (no mocks). Time limits are asserted by what happens (the
message fails, the next one gets a new worker), never by the clock."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nodes.core.code import ScriptWorker, script_problem
from runtime.flow import FlowError, FlowNode, validate_flow
from runtime.message import Message
from runtime.node import CUSTOM, Node, Param, node
from runtime.spec import ParamValue, Scope
from runtime.tools import tool_schema
from tests.runtime_fixtures import N, engine_for, make_flow, registry, run
from tests.servers.flows import agent_flow, fixed, scripted


@node("test.code.emit", name="Emit messages", category="Test", inputs=())
class Emit(Node):
    """A source that sends the messages it is given, in order."""

    messages = Param("json", "The messages to send", default=[], allow=CUSTOM)

    async def generate(self) -> None:
        for m in self.messages.get():
            self.send(Message(m))


@node("test.code.setish", name="Set-ish", category="Test")
class Setish(Node):
    """Puts a value JSON cannot carry into the payload."""

    def on_message(self, msg):
        msg["payload"] = {1, 2}


REG = registry(Emit, Setish)


def python_flow(code: str, messages: list[dict], **params: Any):
    nodes = [N("src", "test.code.emit", messages=messages),
             N("py", "core.python", code=code, **params),
             N("sink", "test.sink")]
    return make_flow(nodes, ["src->py", "py->sink"])


async def run_python(code: str, *payloads: Any, **params: Any):
    r = await run(python_flow(code, [{"payload": p} for p in payloads], **params), reg=REG,
                  timeout=60)
    return r, r.node("sink").seen


def errors(r) -> list[str]:
    return [e.message for e in r.of("node.error")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def processes_with(token: str) -> list[int]:
    """Live processes (zombies do not count) whose command line or
    environment holds ``token``, read from this machine's /proc. Scripts
    may run in a PID namespace of their own, where os.getpid() is not the
    pid the host sees; a token given to a worker (an environment variable
    the node lists, an argument of a child) finds them wherever they are."""
    needle = token.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                continue
            if needle in Path(f"/proc/{entry}/cmdline").read_bytes() or \
                    needle in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


@pytest.fixture
def token(monkeypatch) -> str:
    """A unique value in an environment variable the test's workers are
    given (env_vars=WORKER_TOKEN_VAR): their processes carry it."""
    value = f"sbtoken{os.urandom(8).hex()}"
    monkeypatch.setenv(WORKER_TOKEN_VAR, value)
    return value


WORKER_TOKEN_VAR = "SB_TEST_WORKER_TOKEN"
#: A global of the script that is new in each worker.
WORKER_ID = ('global worker_id\n'
             'try:\n'
             '    worker_id\n'
             'except NameError:\n'
             '    worker_id = __import__("os").urandom(8).hex()\n')


async def test_doubles_the_payload_in_a_worker_process():
    r, seen = await run_python('msg["payload"] = msg["payload"] * 2\n'
                               'import os\nmsg["pid"] = os.getpid()\nreturn msg', 21, 5)
    assert [m["payload"] for m in seen] == [42, 10]
    assert r.result.errors == 0
    # Both ran in one warm worker, which is not this process.
    assert seen[0]["pid"] == seen[1]["pid"] != os.getpid()
    assert seen[0]["_msgid"] and seen[0]["_msgid"] != seen[1]["_msgid"]


async def test_returning_nothing_sends_the_changed_message_on():
    _, seen = await run_python('msg["payload"] += 1', 1)
    assert [m["payload"] for m in seen] == [2]


async def test_returning_a_list_sends_each_message():
    r, seen = await run_python('return [{"payload": msg["payload"] + i} for i in range(3)]', 10)
    assert [m["payload"] for m in seen] == [10, 11, 12]
    assert len({m["_msgid"] for m in seen}) == 3
    assert r.result.errors == 0


@pytest.mark.parametrize("code", ["return DROP", "return False", "return []"])
async def test_drop_false_or_an_empty_list_send_nothing(code):
    r, seen = await run_python(code, 1)
    assert seen == [] and r.result.errors == 0


async def test_a_new_message_gets_the_old_id_and_junk_results_are_refused():
    r, seen = await run_python('if msg["payload"] == 1:\n    return {"payload": "new"}\n'
                               'return 5', 1, 2)
    assert [m["payload"] for m in seen] == ["new"]
    assert errors(r) == ["the script returned int; return msg, a list of messages, None (send "
                         "msg on) or DROP (send nothing)"]


def test_a_syntax_error_names_the_line_of_the_script():
    code = 'x = 1\ny = (\nreturn msg'
    flow = python_flow(code, [])
    problems = [p for p in validate_flow(flow, REG) if p.severity == "error"]
    assert [(p.node, p.field) for p in problems] == [("py", "params.code")]
    assert problems[0].message.startswith("line 2: SyntaxError: '(' was never closed")
    with pytest.raises(FlowError, match="line 2: SyntaxError"):
        from runtime.engine import Engine
        Engine(flow, REG)
    # Line numbers are the user's, however far down: an indentation error on line 4.
    assert script_problem("a = 1\n\nb = 2\n  c = 3\nreturn msg").startswith(
        "line 4: IndentationError")


def test_the_worker_reports_a_syntax_error_by_the_scripts_line():
    """The worker compiles the script itself, once, with the same rules."""
    worker = ScriptWorker("msg['a'] = 1\nfor x in :\n    pass", 256, 10_000)
    try:
        hello = worker.wait_ready()
    finally:
        worker.kill()
    assert hello["ready"] is False
    assert hello["error"].startswith("line 2: SyntaxError: invalid syntax")


async def test_a_runtime_error_names_the_line_and_the_run_goes_on():
    code = ('total = 0\n'
            'for x in msg["payload"]:\n'
            '    total += 10 / x\n'
            'msg["payload"] = total\n'
            'return msg')
    r, seen = await run_python(code, [1, 0], [5])
    assert errors(r) == ["line 3: ZeroDivisionError: division by zero"]
    assert [m["payload"] for m in seen] == [2.0]  # the next message still ran


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
async def test_an_endless_script_is_stopped_and_the_next_message_gets_a_new_worker(token):
    code = (WORKER_ID +
            'if msg["payload"] == "spin":\n'
            '    while True:\n'
            '        pass\n'
            'msg["worker"] = worker_id\n'
            'return msg')
    r, seen = await run_python(code, "a", "spin", "b", timeout_seconds=0.5,
                               env_vars=WORKER_TOKEN_VAR)
    assert errors(r) == ["the script did not finish within 0.5 s (timeout_seconds); its worker "
                         "was stopped, and the next message gets a new one"]
    assert [m["payload"] for m in seen] == ["a", "b"]
    assert seen[0]["worker"] != seen[1]["worker"]
    assert processes_with(token) == []  # killed, reaped; the run's one closed


async def test_a_script_past_the_memory_cap_gets_a_memory_error_and_the_run_goes_on():
    code = ('if msg["payload"] == "big":\n'
            '    x = bytearray(2 * 1024**3)\n'
            'msg["payload"] = "small"\n'
            'return msg')
    r, seen = await run_python(code, "big", "ok", max_memory_mb=256)
    assert errors(r) == ["line 2: MemoryError: the script needs more memory than "
                         "max_memory_mb=256 allows"]
    assert [m["payload"] for m in seen] == ["small"]
    assert r.result.reason == "failed" and r.result.errors == 1  # one message failed, not the run


async def test_the_smallest_cap_still_leaves_the_script_its_megabytes():
    """The cap counts what the script uses, not address space glibc reserves
    per thread (64 MB an arena) for the worker's own watchdog thread."""
    r, seen = await run_python('msg["payload"] = len(bytearray(20 * 1024**2))\nreturn msg', 1,
                               max_memory_mb=64)
    assert errors(r) == [] and [m["payload"] for m in seen] == [20 * 1024**2]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
async def test_the_worker_is_gone_after_the_run(token):
    r, seen = await run_python(f'import os\nmsg["payload"] = os.environ[{WORKER_TOKEN_VAR!r}]\n'
                               'return msg', 1, env_vars=WORKER_TOKEN_VAR)
    assert seen[0]["payload"] == token  # the worker had the token
    assert r.node("py").worker_pid is None
    assert processes_with(token) == []


async def test_the_result_is_bounded_by_max_output_bytes():
    r, seen = await run_python('return {"payload": "x" * 5000}', 1, max_output_bytes=1024)
    assert seen == []
    assert errors(r) == ["the script's result is 5015 bytes of JSON, more than "
                         "max_output_bytes=1024"]


async def test_prints_go_to_the_nodes_log_and_not_to_the_protocol():
    code = 'print("hello", msg["payload"])\nimport os\nos.write(1, b"raw\\n")\nreturn msg'
    r, seen = await run_python(code, 7)
    assert [m["payload"] for m in seen] == [7]
    assert [(e.node, e.text) for e in r.of("log")] == [("py", "hello 7\n")]


async def test_a_message_that_is_not_json_is_refused_with_its_reason():
    nodes = [N("src", "core.inject", payload=1), N("bad", "test.code.setish"),
             N("py", "core.python", code="return msg"), N("sink", "test.sink")]
    r = await run(make_flow(nodes, ["src->bad", "bad->py", "py->sink"]), reg=REG, timeout=60)
    assert errors(r) == ["the message cannot be given to the script: Object of type set is "
                         "not JSON serializable"]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
async def test_stopping_the_run_kills_a_running_script(tmp_path, token):
    marker = tmp_path / "running"
    code = (f'open({str(marker)!r}, "w").write("yes")\n'
            'while True:\n    pass')
    engine, _ = engine_for(python_flow(code, [{"payload": 1}], timeout_seconds=600,
                                       env_vars=WORKER_TOKEN_VAR), reg=REG)
    task = asyncio.create_task(engine.run())
    for _ in range(3000):  # a bounded wait for the script to be running: at most 30 s
        if marker.exists() and marker.read_text():
            break
        await asyncio.sleep(0.01)
    assert marker.read_text() == "yes"
    assert processes_with(token) != []
    engine.stop("test")
    result = await task
    assert result.reason == "interrupted"
    assert processes_with(token) == []


@pytest.mark.parametrize("param, value, why", [
    ("timeout_seconds", 0, "timeout_seconds must be more than 0"),
    ("max_memory_mb", 8, "max_memory_mb must be between 64 and"),
    ("max_output_bytes", 10, "max_output_bytes must be between 1024 and"),
])
def test_bounds_are_checked_with_the_flow(param, value, why):
    problems = validate_flow(python_flow("return msg", [], **{param: value}), REG)
    assert any(p.field == f"params.{param}" and why in p.message for p in problems), problems


def test_only_the_input_is_for_the_ai():
    from nodes.core.code import Python

    allowed = {p.name: [s.value for s in p.allowed_scopes] for p in Python.spec.params}
    assert allowed["input"] == ["ai", "custom", "message"]
    assert all(v == ["custom"] for k, v in allowed.items() if k != "input")
    schema = tool_schema(Python.spec, FlowNode(id="py", type="core.python",
                                               params={"input": ParamValue(scope=Scope.AI)}))
    assert list(schema["properties"]) == ["input"] and schema["required"] == ["input"]


async def test_as_a_tool_the_script_gets_args_and_answers_with_the_payload():
    code = 'msg["payload"] = {"sum": args["a"] + args["b"]}\nreturn msg'
    flow = agent_flow(
        scripted([{"tool_calls": [{"name": "run_python", "arguments": {"input": {"a": 2, "b": 3}}},
                                  {"name": "run_python", "arguments": {"input": {"a": 2}}}]},
                  {"text": "done"}]),
        [{"id": "py", "type": "core.python",
          "params": {"code": fixed(code), "input": {"scope": "ai"}}}])
    r = await run(flow, reg=REG, timeout=60)
    [final] = r.debug("show")
    calls = final["agent"]["tool_calls"]
    assert calls[0]["status"] == "success" and calls[0]["data"] == {"result": {"sum": 5}}
    # A script error is the script author's text: the LLM reads which line failed.
    assert calls[1]["status"] == "error"
    assert calls[1]["error"] == "line 1: KeyError: 'b'"
    # The tool ran on its own clone: nothing flowed on from the node.
    assert final["payload"] == "done"



HOST = """
import sys, time
sys.path.insert(0, {root!r})
from nodes.core.code import ScriptWorker
worker = ScriptWorker("while True:\\n    pass", 256, 10_000)
worker.wait_ready()
worker.proc.stdin.write(b'{{"msg": {{}}}}\\n')
worker.proc.stdin.flush()
print(worker.pid, flush=True)
time.sleep(600)
"""


def process_state(pid: int) -> str:
    """R, S, Z...; "gone" once reaped (Linux /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_ends_when_its_host_is_killed_even_mid_script():
    """A designer that crashes must not leave a script spinning forever."""
    root = str(Path(__file__).resolve().parents[1])
    host = subprocess.Popen([sys.executable, "-c", HOST.format(root=root)],
                            stdout=subprocess.PIPE, text=True)
    try:
        pid = int(host.stdout.readline())
        assert process_state(pid) in ("R", "S")
    finally:
        host.kill()
        host.wait()
    for _ in range(1000):  # bounded: at most ~20 s
        if process_state(pid) in ("Z", "gone"):
            break
        time.sleep(0.02)
    assert process_state(pid) in ("Z", "gone")

"""Python node packages in their own processes: real plugin processes started
by the host (runtime/plugin/host.py), served by the Python SDK
(``python -m runtime.plugin serve``), over a real gRPC stream."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
from pathlib import Path

import grpc
import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import parse_flow
from runtime.message import Message
from runtime.plugin import host, wire
from runtime.plugin.host import Plugin, PluginError, PluginManifest, PluginProcess
from runtime.plugin.pb import plugin_pb2 as pb
from runtime.plugin.pb import plugin_pb2_grpc as pb_grpc
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from tests.servers.flows import AI_SCOPE, Recorder, agent_flow, fixed, run
from tests.servers.llm import LlmServer, openai_reply

ROOT = Path(__file__).resolve().parents[1]
PKGS = Path(__file__).resolve().parent / "plugin_pkgs"
PYTHONPATH = f"{PKGS}{os.pathsep}{ROOT}"


def ptest_plugin(**overrides) -> Plugin:
    manifest = PluginManifest(
        name="ptest", language="python",
        command=[sys.executable, "-m", "runtime.plugin", "serve", "sbtest_plugin",
                 "--name", "ptest"],
        env={"PYTHONPATH": PYTHONPATH, **overrides.pop("env", {})}, **overrides)
    return Plugin(manifest, None, "test")


def script_plugin(code: str, name: str = "broken", **overrides) -> Plugin:
    return Plugin(PluginManifest(name=name, command=[sys.executable, "-c", code], **overrides),
                  None, "test")


class Ptest:
    """A started ptest plugin and a registry of its nodes next to local ones."""

    def __init__(self, process: PluginProcess) -> None:
        self.process = process
        _version, self.specs = process.describe()
        self.classes = {s.type: host.remote_class(s, process) for s in self.specs}
        self.registry = Registry([Inject, DebugNode, Agent, *self.classes.values()])


@pytest.fixture
def ptest(tmp_path, monkeypatch):
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PTEST_CALLS", str(calls))
    process = PluginProcess(ptest_plugin())
    fixture = Ptest(process)
    fixture.calls = calls  # type: ignore[attr-defined]
    yield fixture
    process.stop()


def seen_by_plugin(calls: Path) -> list[dict]:
    if not calls.exists():
        return []
    return [json.loads(line) for line in calls.read_text().splitlines()]


def flow_of(nodes: list[dict], chain: list[str], **settings) -> object:
    wires = [{"from": [a, "out"], "to": [b, "in"]} for a, b in zip(chain[:-1], chain[1:], strict=True)]
    doc = {"format": "switchboard.flow/1", "name": "t", "nodes": nodes, "wires": wires}
    if settings:
        doc["settings"] = settings
    return parse_flow(doc)


def gone(pid: int) -> bool:
    """The process no longer exists (or is a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):
        return True


async def until(predicate, what: str, limit: float = 30.0) -> None:
    """Wait until ``predicate()`` holds; the limit only keeps a broken test
    from hanging, it is never what a test checks."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not predicate():
        if loop.time() > end:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.01)


# -- describing ---------------------------------------------------------------
def test_describe_gives_the_packages_specs_marked_as_a_plugin(ptest):
    types = {s.type for s in ptest.specs}
    assert {"ptest.upper", "ptest.sleep", "ptest.fail", "ptest.emit", "ptest.count"} <= types
    upper = next(s for s in ptest.specs if s.type == "ptest.upper")
    assert upper.plugin == "ptest"
    assert upper.tool is not None and upper.tool.name == "upper"
    assert [p.name for p in upper.params] == ["text", "suffix"]
    assert ptest.process.pid != os.getpid() and not gone(ptest.process.pid)


# -- RPA mode -------------------------------------------------------------------
async def test_a_chain_through_two_remote_nodes_and_back(ptest):
    flow = flow_of([
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("hello")}},
        {"id": "u1", "type": "ptest.upper", "params": {"suffix": fixed("!")}},
        {"id": "u2", "type": "ptest.upper", "params": {"suffix": fixed("?")}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], ["ask", "u1", "u2", "show"])
    result, rec, engine = await run(flow, reg=ptest.registry)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    assert msg["payload"] == "HELLO!?"
    assert msg["_msgid"]  # the message kept its id across the process boundary
    assert engine.nodes["u1"].count_in == engine.nodes["u1"].count_out == 1
    seen = seen_by_plugin(ptest.calls)
    assert [c["text"] for c in seen] == ["hello", "HELLO!"]
    assert [c["suffix"] for c in seen] == ["!", "?"]


async def test_sends_debug_status_and_logs_of_a_remote_node_are_the_nodes_own(ptest, monkeypatch):
    monkeypatch.setenv("PTEST_SECRET", "s3cret-value-of-the-test")
    flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "e", "type": "ptest.emit", "params": {"secret": fixed({"env": "PTEST_SECRET"})}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
    ], "wires": [{"from": ["ask", "out"], "to": ["e", "in"]},
                 {"from": ["e", "extra"], "to": ["show", "in"]}]})
    result, rec, _ = await run(flow, reg=ptest.registry)
    assert result.status == "ok", rec.of("node.error")
    # The secret was resolved here and handed over with the call, never as a
    # reference in the flow's settings sent at Create.
    assert sorted(rec.debug_values()) == ["first", "second", "secret length 24"]
    assert [e.value for e in rec.of("debug") if e.node == "e"] == [{"seen": "x"}]
    assert any(e.node == "e" and e.text == "emitted" for e in rec.of("node.status"))
    assert any(e.node == "e" and e.text == "emit ran" for e in rec.of("log"))
    assert "s3cret-value-of-the-test" not in rec.dump()


async def test_a_remote_source_sends_its_messages(ptest):
    flow = flow_of([
        {"id": "src", "type": "ptest.count", "params": {"n": fixed(4)}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
    ], ["src", "show"])
    result, rec, _ = await run(flow, reg=ptest.registry)
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values() == [0, 1, 2, 3]


@pytest.mark.parametrize("kind, text", [
    ("config", "param 'kind': this node always fails"),
    ("other", "ValueError: secret internals /home/someone/.cache"),
])
async def test_a_remote_nodes_error_is_a_node_error_with_its_text(ptest, kind, text):
    flow = flow_of([
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed(1)}},
        {"id": "f", "type": "ptest.fail", "params": {"kind": fixed(kind)}},
    ], ["ask", "f"])
    result, rec, _ = await run(flow, reg=ptest.registry)
    assert result.status == "error"
    [err] = rec.of("node.error")
    assert err.node == "f" and err.message == text


async def test_a_call_past_its_timeout_fails_naming_the_plugin_and_the_bound(tmp_path):
    process = PluginProcess(ptest_plugin(call_timeout=0.3))
    try:
        p = Ptest(process)
        flow = flow_of([
            {"id": "ask", "type": "core.inject", "params": {"payload": fixed(1)}},
            {"id": "s", "type": "ptest.sleep", "params": {"seconds": fixed(3600)}},
        ], ["ask", "s"])
        result, rec, _ = await run(flow, reg=p.registry)
        [err] = rec.of("node.error")
        assert err.message == "plugin 'ptest' did not answer within 0.3 s"
        # The plugin was told to stop working on it.
        await until(lambda: _health(process).in_flight == 0, "the call to be cancelled")
    finally:
        process.stop()


def _health(process: PluginProcess):
    channel = grpc.insecure_channel(process.address)
    try:
        return pb_grpc.PluginStub(channel).Health(pb.HealthRequest(), metadata=process.metadata,
                                                  timeout=10)
    finally:
        channel.close()


# -- tool mode ------------------------------------------------------------------
def upper_tool() -> dict:
    return {"id": "up", "type": "ptest.upper", "params": {"text": AI_SCOPE,
                                                            "suffix": fixed("!")}}


def openai_agent(llm: LlmServer) -> dict:
    return {"provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
            "instructions": fixed("Use the tools.")}


async def test_an_agent_calls_a_remote_tool_and_validation_stays_in_the_host(ptest, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-plugin-test")
    with LlmServer() as llm:
        llm.replies = [
            openai_reply(tool_calls=[("upper", {"text": "plugins"}),
                                     # The designer fixed the suffix: refused here.
                                     ("upper", {"text": "x", "suffix": "HACKED"}),
                                     ("upper", {"text": {"nested": "not text"}})]),
            openai_reply("Done."),
        ]
        flow = agent_flow(openai_agent(llm), [upper_tool()])
        result, rec, _ = await run(flow, reg=ptest.registry)
        assert result.status == "ok", rec.of("node.error")
        tool_msgs = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_msgs[0]["content"]) == {"result": "PLUGINS!"}
    assert "suffix" in tool_msgs[1]["content"] and "refused" in tool_msgs[1]["content"]
    assert "text" in tool_msgs[2]["content"]
    # The plugin saw exactly the one valid call, with the designer's suffix.
    [seen] = seen_by_plugin(ptest.calls)
    assert (seen["text"], seen["suffix"]) == ("plugins", "!")
    assert seen["msg"]["__message_type__"] == "tool_request"


async def test_an_unexpected_remote_error_text_never_reaches_the_llm(ptest, monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-plugin-test")
    with LlmServer() as llm:
        llm.replies = [openai_reply(tool_calls=[("fail", {})]), openai_reply("Oh well.")]
        flow = agent_flow(openai_agent(llm), [
            {"id": "f", "type": "ptest.fail", "params": {"kind": fixed("other")}}])
        result, rec, _ = await run(flow, reg=ptest.registry)
        sent = json.dumps(llm.requests[1]["body"])
    assert result.status == "ok"
    assert "ValueError: the tool failed unexpectedly" in sent
    assert "/home/someone" not in sent
    assert "/home/someone" in rec.of("node.error")[0].message


async def test_killing_the_plugin_mid_call_costs_that_call_only(ptest, monkeypatch):
    """kill -9 during a tool call: that call fails, the host restarts the
    plugin, and the agent's next call to it is answered by the new process."""
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-plugin-test")
    first_pid = ptest.process.pid
    with LlmServer() as llm:
        llm.replies = [
            openai_reply(tool_calls=[("sleep", {"seconds": 3600})]),
            openai_reply(tool_calls=[("sleep", {"seconds": 0})]),
            openai_reply("Both done."),
        ]
        flow = agent_flow(openai_agent(llm), [
            {"id": "zz", "type": "ptest.sleep", "params": {"seconds": AI_SCOPE}}])
        killed = []

        def kill_when_sleeping(event):
            if event.type == "node.status" and event.node == "zz" and not killed:
                killed.append(first_pid)
                os.kill(first_pid, signal.SIGKILL)

        def hook(engine):
            engine.bus.subscribe(kill_when_sleeping)

        result, rec, _ = await run(flow, reg=ptest.registry, engine_hook=hook)
        assert result.status == "ok", rec.of("node.error")
        requests = [r["body"] for r in llm.requests]
    assert killed == [first_pid]
    lost = [m for m in requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "plugin 'ptest' stopped during the call (killed by SIGKILL)" in lost
    answered = [m for m in requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    new_pid = json.loads(answered)["pid"]
    assert new_pid != first_pid and new_pid == ptest.process.pid
    assert gone(first_pid)
    [final] = rec.debug_values()
    assert final["payload"] == "Both done."


async def test_killing_the_plugin_mid_message_fails_one_message_and_the_run_goes_on(ptest):
    flow = flow_of([
        {"id": "s", "type": "ptest.sleep", "params": {"seconds": {"scope": "message",
                                                                  "path": "payload"}}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
    ], ["s", "show"])
    bus = EventBus()
    rec = Recorder()
    bus.subscribe(rec)
    engine = Engine(flow, ptest.registry, bus, keep_alive=True)
    task = asyncio.ensure_future(engine.run(timeout=60))
    # Started: its instance created in the plugin (a message sent before
    # that is refused there as "no node instance").
    await until(engine.started.is_set, "the node to start")
    first = ptest.process.pid
    engine.inject("s", {"payload": 3600})
    await until(lambda: any(e.text == "sleeping" for e in rec.of("node.status")),
                "the plugin to be sleeping")
    os.kill(first, signal.SIGKILL)
    await until(lambda: rec.of("node.error"), "the lost call to fail")
    engine.inject("s", {"payload": 0})
    await until(lambda: rec.debug_values(), "the next message to be answered")
    engine.stop("test over")
    await task
    [err] = rec.of("node.error")
    assert err.node == "s" and "stopped during the call (killed by SIGKILL)" in err.message
    assert rec.debug_values() == [ptest.process.pid] and ptest.process.pid != first
    assert ptest.process.starts == 2


async def test_a_call_cancelled_while_its_frame_is_written_costs_that_call_only(ptest):
    """A tool's timeout or a stopped run cancels a call wherever it waits,
    the write of its frame included: that cancels the call, never the
    stream that the other calls in flight share."""
    node = ptest.classes["ptest.sleep"](
        "s", params={"seconds": ParamValue(scope=Scope.MESSAGE, path="payload")})
    await node.start()
    conn = ptest.process.conn
    slow = asyncio.ensure_future(node.on_message(Message({"payload": 3600})))
    await until(lambda: _health(ptest.process).in_flight == 1, "the slow call to be running")
    cancelled = asyncio.ensure_future(node.on_message(Message({"payload": 0})))
    await asyncio.sleep(0)  # its first step: the frame is handed to gRPC, not yet sent
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    answered = await node.on_message(Message({"payload": 0}))  # the stream still serves
    assert answered is None
    assert not slow.done(), slow.exception()
    assert ptest.process.conn is conn and conn.alive and ptest.process.starts == 1
    slow.cancel()
    await until(lambda: _health(ptest.process).in_flight == 0, "the slow call to be cancelled")
    await node.close()


async def test_a_call_cancelled_while_it_waits_on_the_read_costs_that_call_only(ptest):
    """The call that leads (woken by the stream's read itself) is cancelled
    while it waits: the read, which the other calls share, goes on."""
    node = ptest.classes["ptest.sleep"](
        "s", params={"seconds": ParamValue(scope=Scope.MESSAGE, path="payload")})
    await node.start()
    conn = ptest.process.conn
    slow = asyncio.ensure_future(node.on_message(Message({"payload": 3600})))
    # Its "sleeping" status read, the slow call left the lead: the next leads.
    await until(lambda: _health(ptest.process).in_flight == 1 and conn.leader is None,
                "the slow call to be running")
    leading = asyncio.ensure_future(node.on_message(Message({"payload": 3600})))
    await asyncio.sleep(0)  # its first step: the frame sent, it waits on the read
    assert conn.leader is not None and not leading.done()
    leading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leading
    assert await node.on_message(Message({"payload": 0})) is None
    assert not slow.done(), slow.exception()
    assert ptest.process.conn is conn and conn.alive and ptest.process.starts == 1
    await until(lambda: _health(ptest.process).in_flight == 1, "the plugin to drop the call")
    slow.cancel()
    await node.close()


async def test_calls_in_flight_share_writes_and_each_gets_its_own_answer(ptest):
    """16 callers, 10 calls each, one after another: each gets the answer
    to its own text, and the frames of calls made while others wait leave
    together (one write a call would mean 160 writes)."""
    node = ptest.classes["ptest.upper"]("u", params={"suffix": ParamValue(scope=Scope.CUSTOM,
                                                                          value="!")})
    await node.start()
    conn = ptest.process.conn
    write = conn.call.write
    writes = []

    def counted(batch):
        writes.append(len(batch.frames))
        return write(batch)

    conn.call.write = counted

    async def caller(n: int) -> list[str]:
        answers = []
        for i in range(10):
            msg = Message({"payload": f"caller {n} call {i}"})
            await node.on_message(msg)
            answers.append(msg["payload"])
        return answers

    results = await asyncio.gather(*(caller(n) for n in range(16)))
    assert results == [[f"CALLER {n} CALL {i}!" for i in range(10)] for n in range(16)]
    assert sum(writes) == 160
    # About two writes a round of 16: the one call that leads writes at
    # once, the others' frames leave together (before: up to one a call).
    assert len(writes) <= 24, writes
    await node.close()


def test_a_stream_whose_loop_ends_first_ends_with_it(ptest):
    """asyncio.run() returns with the plugin still running: the stream of
    that loop is closed as the loop ends (a gRPC call left open on a closed
    loop raises when it is collected), and the next loop gets its own."""
    node = ptest.classes["ptest.upper"]("u", params={"suffix": ParamValue(scope=Scope.CUSTOM,
                                                                          value="!")})
    broken: list = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = broken.append
    try:
        for text in ("a", "b"):
            msg = Message({"payload": text})
            asyncio.run(node.on_message(msg))
            assert msg["payload"] == text.upper() + "!"
            conn = ptest.process.conn
            gc.collect()  # the stream of the loop before, if it is left open, raises now
            assert not broken, [str(b.exc_value) for b in broken]
            assert not conn.alive and conn.closed
    finally:
        sys.unraisablehook = old_hook
    assert ptest.process.starts == 1


async def test_a_call_on_a_live_stream_does_not_ask_for_the_running_loop(ptest, monkeypatch):
    """asyncio.get_running_loop() is a getpid() system call in Python 3.11:
    a call finds its stream by the thread its loop runs in instead."""
    node = ptest.classes["ptest.upper"]("u", params={"suffix": ParamValue(scope=Scope.CUSTOM,
                                                                          value="!")})
    await node.start()
    asked = []
    real = asyncio.get_running_loop

    def counted():
        if "runtime/plugin" in sys._getframe(1).f_code.co_filename.replace(os.sep, "/"):
            asked.append(1)
        return real()

    monkeypatch.setattr(asyncio, "get_running_loop", counted)
    for text in ("a", "b", "c"):
        msg = Message({"payload": text})
        await node.on_message(msg)
        assert msg["payload"] == text.upper() + "!"
    assert asked == []
    await node.close()


async def test_a_loop_that_does_not_say_its_thread_keeps_its_stream(ptest, monkeypatch):
    """qasync's loop (the designer's) runs without run_forever, so it never
    records its thread: its calls still find their stream at once, by the
    running loop, instead of going through connection() each time."""
    node = ptest.classes["ptest.upper"]("u", params={"suffix": ParamValue(scope=Scope.CUSTOM,
                                                                          value="!")})
    await node.start()
    conn = ptest.process.conn
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "_thread_id", None)
    looked_up = []
    real = ptest.process.connection

    async def connection():
        looked_up.append(1)
        return await real()

    monkeypatch.setattr(ptest.process, "connection", connection)
    for text in ("a", "b"):
        msg = Message({"payload": text})
        await node.on_message(msg)
        assert msg["payload"] == text.upper() + "!"
    assert looked_up == [] and ptest.process.conn is conn
    monkeypatch.undo()
    await node.close()


def test_a_second_loop_in_the_same_thread_gets_its_own_stream(ptest):
    """The first loop is still open (not run, not closed) while a second
    runs in the same thread: a call there must not use the first loop's
    stream, whose futures belong to that loop."""
    node = ptest.classes["ptest.upper"]("u", params={"suffix": ParamValue(scope=Scope.CUSTOM,
                                                                          value="!")})
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        msg = Message({"payload": "a"})
        first.run_until_complete(node.on_message(msg))
        conn = ptest.process.conn
        assert msg["payload"] == "A!" and conn.loop is first
        msg = Message({"payload": "b"})
        second.run_until_complete(node.on_message(msg))
        assert msg["payload"] == "B!"
        assert ptest.process.conn is not conn and ptest.process.conn.loop is second
        msg = Message({"payload": "c"})
        first.run_until_complete(node.on_message(msg))
        assert msg["payload"] == "C!" and ptest.process.conn.loop is first
    finally:
        for loop in (first, second):
            loop.run_until_complete(loop.shutdown_asyncgens())
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()


# -- a package chosen to run out of process -------------------------------------
async def test_a_flow_can_run_a_built_in_package_out_of_process_unchanged():
    """settings.out_of_process: the core package (inject, change, debug)
    runs in a plugin process with no code changed, and gives the same."""
    nodes = [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed({"n": 2})}},
        {"id": "ch", "type": "core.change", "params": {"rules": fixed([
            {"action": "set", "path": "payload.doubled", "value": 4}])}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
    ]
    local = flow_of(nodes, ["ask", "ch", "show"])
    remote = flow_of(nodes, ["ask", "ch", "show"], out_of_process=["core"])
    assert remote.dumps().count('"out_of_process"') == 1
    assert '"out_of_process"' not in local.dumps()
    reg = Registry.default()
    r1, rec1, _ = await run(local, reg=reg)
    r2, rec2, engine = await run(remote, reg=reg)
    assert r1.status == r2.status == "ok", rec2.of("node.error")
    assert rec2.debug_values() == rec1.debug_values() == [{"n": 2, "doubled": 4}]
    proxy = engine.nodes["ch"].node
    assert isinstance(proxy, host.RemoteNode) and proxy.process.pid != os.getpid()


# -- starting, handshake, token ---------------------------------------------------
def test_a_plugin_that_exits_at_start_is_named_with_its_stderr():
    plugin = script_plugin("import sys; sys.stderr.write('boom: no config file\\n'); sys.exit(3)")
    with pytest.raises(PluginError) as info:
        PluginProcess(plugin).start()
    text = str(info.value)
    assert text.startswith("plugin 'broken' exited with code 3 before its handshake")
    assert "boom: no config file" in text


def test_a_plugin_that_prints_garbage_instead_of_a_handshake_is_refused():
    process = PluginProcess(script_plugin(
        "import sys, time; print('Hello from my plugin!'); sys.stdout.flush(); time.sleep(60)"))
    with pytest.raises(PluginError) as info:
        process.start()
    assert "expected a JSON handshake line, got 'Hello from my plugin!'" in str(info.value)
    assert process.proc is None  # killed, not left running


def test_a_handshake_with_a_network_address_is_refused():
    line = json.dumps({"switchboard_plugin": 1, "address": "0.0.0.0:5000", "token": "t" * 32})
    process = PluginProcess(script_plugin(
        f"import time; print({line!r}, flush=True); time.sleep(60)"))
    with pytest.raises(PluginError, match="neither a Unix socket nor loopback"):
        process.start()


def test_a_command_that_does_not_exist_is_named():
    plugin = Plugin(PluginManifest(name="ghost", command=["/nonexistent/ghost-plugin"]),
                    None, "test")
    with pytest.raises(PluginError, match="plugin 'ghost' could not start: /nonexistent/ghost"):
        PluginProcess(plugin).start()


def test_every_call_needs_the_token(ptest):
    process = ptest.process
    channel = grpc.insecure_channel(process.address)
    stub = pb_grpc.PluginStub(channel)
    try:
        for metadata in [(), ((wire.TOKEN_KEY, "0" * 32),)]:
            with pytest.raises(grpc.RpcError) as info:
                stub.Describe(pb.DescribeRequest(protocol=1), metadata=metadata, timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            stream = stub.Channel(iter([pb.Batch()]), metadata=metadata, timeout=10)
            with pytest.raises(grpc.RpcError) as info:
                list(stream)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = stub.Health(pb.HealthRequest(), metadata=process.metadata, timeout=10)
        assert ok.status == "serving" and ok.pid == process.pid
    finally:
        channel.close()


def test_the_plugin_listens_on_a_private_unix_socket(ptest):
    address = ptest.process.address
    assert address.startswith("unix:")
    folder = Path(address[5:]).parent
    assert folder.stat().st_mode & 0o077 == 0  # nobody else may even look


async def test_a_plugin_exits_when_its_host_goes_away(ptest):
    proc = ptest.process.proc
    proc.stdin.close()  # what the host dying (even by kill -9) does
    await until(lambda: proc.poll() is not None, "the plugin to exit")
    assert proc.returncode == 0


def test_stop_leaves_no_process(ptest):
    pid = ptest.process.pid
    ptest.process.stop()
    assert gone(pid)


# -- the spec cache --------------------------------------------------------------
def test_specs_are_cached_until_the_package_changes(data_dir, tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "cachepkg").mkdir(parents=True)
    node_src = (
        "from runtime.node import Node, node\n"
        "@node('cache.{name}', name='{name}', category='Test')\n"
        "class N(Node):\n    pass\n")
    (pkg / "cachepkg" / "__init__.py").write_text(node_src.format(name="one"))
    manifest = {"name": "cachepkg", "command": ["python", "-m", "runtime.plugin", "serve",
                                                "cachepkg"], "env": {"PYTHONPATH": str(ROOT)}}
    (pkg / "plugin.json").write_text(json.dumps(manifest))
    plugin = Plugin(host.read_manifest(pkg / "plugin.json"), pkg, str(pkg))
    assert [s.type for s in host.load_specs(plugin)] == ["cache.one"]
    process = host.process_for(plugin)
    assert process.starts == 1
    process.stop()
    assert [s.type for s in host.load_specs(plugin)] == ["cache.one"]
    assert process.starts == 1 and process.proc is None  # from the cache: nothing started
    (pkg / "cachepkg" / "__init__.py").write_text(node_src.format(name="renamed"))
    try:
        assert [s.type for s in host.load_specs(plugin)] == ["cache.renamed"]
        assert process.starts == 2
    finally:
        process.stop()


def test_bad_manifests_are_named_by_file_and_field(tmp_path):
    path = tmp_path / "plugin.json"
    path.write_text(json.dumps({"name": "Bad Name!", "command": ["x"]}))
    with pytest.raises(ValueError, match=r"plugin.json: name: String should match"):
        host.read_manifest(path)
    path.write_text(json.dumps({"name": "ok", "command": []}))
    with pytest.raises(ValueError, match=r"plugin.json: command: List should have at least 1"):
        host.read_manifest(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"plugin.json"):
        host.read_manifest(path)


def test_specs_a_plugin_gets_wrong_are_refused_by_node_and_field():
    bad = [{"type": "x.y", "name": "Y", "category": "C", "params": [{"name": "p"}]}]
    with pytest.raises(PluginError, match=r"plugin 'x': node spec x.y: params.0.type: Field required"):
        host.parse_specs("x", wire.dumps(bad))


def test_an_unknown_package_to_run_out_of_process_is_a_warning_naming_it():
    from runtime.flow import validate_flow

    flow = flow_of([{"id": "ask", "type": "core.inject"}], ["ask"],
                   out_of_process=["core", "nosuchpkg"])
    problems = validate_flow(flow, Registry.default())
    [p] = [p for p in problems if p.field == "settings.out_of_process"]
    assert p.severity == "warning"
    assert "no node package 'nosuchpkg' to run out of process" in p.message
    assert "core" in p.message


def test_a_node_package_without_its_npm_packages_says_to_run_npm_ci(tmp_path):
    (tmp_path / "package.json").write_text("{}")
    plugin = Plugin(PluginManifest(name="jsless", command=["node", "index.js"]), tmp_path,
                    str(tmp_path))
    with pytest.raises(PluginError, match=r"plugin 'jsless' needs its npm packages: run `npm install` in"):
        PluginProcess(plugin).start()

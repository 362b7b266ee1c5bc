"""The Python plugin SDK (runtime/plugin/server.py) in this process: a real
grpc.aio server serving the test package, a real channel and stream to it,
frames written and read as the host does."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import grpc
import pytest

from runtime.plugin import server as sdk
from runtime.plugin import wire
from runtime.plugin.pb import plugin_pb2 as pb
from runtime.plugin.pb import plugin_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent / "plugin_pkgs"))
TOKEN = "t" * 32
K = pb.Frame


@pytest.fixture
async def plugin(monkeypatch):
    classes = sdk.package_classes("sbtest_plugin")
    servicer = sdk.PluginServer("ptest", "0", classes, TOKEN)
    folder = tempfile.mkdtemp(prefix="sb-sdk-test-")
    address = f"unix:{os.path.join(folder, 'plugin.sock')}"
    server = grpc.aio.server(options=wire.channel_options())
    pb_grpc.add_PluginServicer_to_server(servicer, server)
    server.add_insecure_port(address)
    await server.start()
    channel = grpc.aio.insecure_channel(address, options=wire.channel_options())
    stub = pb_grpc.PluginStub(channel)
    metadata = ((wire.TOKEN_KEY, TOKEN),)
    for instance, type_ in (("up", "ptest.upper"), ("emit", "ptest.emit"), ("fail", "ptest.fail")):
        reply = await stub.Create(pb.CreateRequest(
            instance=instance, type=type_, name=instance, run="r1",
            params_json=wire.dumps({"suffix": {"scope": "custom", "value": "!"}}
                                   if type_ == "ptest.upper" else {})), metadata=metadata)
        assert reply.error == ""
    yield stub, metadata
    await channel.close()
    await server.stop(0)
    shutil.rmtree(folder, ignore_errors=True)


async def test_answers_and_node_events_are_made_in_place_in_the_batch_written(plugin, monkeypatch):
    """A batch of calls gets each its own answer, an error as an ERROR frame,
    and a node's sends, debug, status and log with their instance and port,
    with no Frame made apart and copied into the Batch (upb copies it:
    about three times the cost of making it in place)."""
    stub, metadata = plugin

    def made_apart(*args, **kwargs):
        raise AssertionError("a Frame was made apart from its Batch")

    frame_class = type("Frame", (), {name: getattr(K, name) for name in (
        "CALL", "CANCEL", "GENERATE", "RESULT", "ERROR", "SEND", "DEBUG", "STATUS", "LOG")})
    frame_class.__new__ = made_apart  # type: ignore[assignment]
    monkeypatch.setattr(sdk, "K", frame_class)

    call = stub.Channel(metadata=metadata)
    batch = pb.Batch()
    for i in range(8):
        batch.frames.add(kind=K.CALL, id=i + 1, instance="up",
                         data=wire.dumps({"msg": {"payload": i}, "params": {"text": f"call {i}"}}))
    batch.frames.add(kind=K.CALL, id=20, instance="emit", data=wire.dumps({"msg": {"payload": "e"}}))
    batch.frames.add(kind=K.CALL, id=21, instance="fail", data=wire.dumps({"msg": {}}))
    await call.write(batch)
    got: list = []
    while len([f for f in got if f.kind in (K.RESULT, K.ERROR)]) < 10:
        got.extend((await call.read()).frames)
    await call.done_writing()
    answers = {f.id: wire.loads(f.data) for f in got if f.kind == K.RESULT}
    for i in range(8):
        assert answers[i + 1] == {"msg": {"payload": f"CALL {i}!"}, "ports": None}
    assert answers[20]["ports"] == []  # DROP
    error = next(f for f in got if f.kind == K.ERROR)
    assert error.id == 21 and wire.loads(error.data)["config"] is True
    sends = [(f.id, f.instance, f.port, wire.loads(f.data)["payload"]) for f in got
             if f.kind == K.SEND]
    assert sends == [(20, "emit", "extra", "first"), (20, "emit", "extra", "second")]
    kinds = {f.kind for f in got if f.instance == "emit"}
    assert {K.DEBUG, K.STATUS, K.LOG} <= kinds

"""The Node.js plugin (nodes/textkit-js) on the wire: a real ``node index.js``
process driven with the Python stubs, as the host drives it. Its specs must
be the NodeSpec model exactly, its params follow the Python SDK's rules, and
the process keeps the protocol's promises: one handshake line, the token on
every call, exit when stdin closes."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nodes" / "textkit-js"
NODE = shutil.which("node")

if NODE is None:
    pytest.skip("node is not installed (apt-get install nodejs npm)", allow_module_level=True)
if not (PACKAGE / "node_modules").is_dir():
    pytest.skip("nodes/textkit-js/node_modules is missing (cd nodes/textkit-js && npm ci)",
                allow_module_level=True)

import grpc  # noqa: E402

from runtime.message import (  # noqa: E402
    MESSAGE_TYPE,
    PARAMETERS,
    TOOL_CALLER_ID,
    TOOL_DATA,
    TOOL_NAME,
    TOOL_REQUEST,
)
from runtime.node import Allow, Output, Param, label_for  # noqa: E402
from runtime.plugin import wire  # noqa: E402
from runtime.plugin.pb import plugin_pb2 as pb  # noqa: E402
from runtime.plugin.pb import plugin_pb2_grpc as pb_grpc  # noqa: E402
from runtime.spec import NodeSpec  # noqa: E402

K = pb.Frame
#: A bound on waiting for a process to exit; a bound, not a measurement.
EXIT_WAIT = 30
TYPES = ["text.slugify", "text.word_count", "text.regex_extract", "text.case"]


class Plugin:
    """One ``node index.js`` process, as the host starts it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        env = {**os.environ, wire.PROTO_ENV: str(wire.PROTO_PATH)}
        self.proc = subprocess.Popen(
            [NODE, "index.js"], cwd=PACKAGE, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log.open("wb"))
        self.line = self.proc.stdout.readline(wire.MAX_HANDSHAKE_BYTES)
        if not self.line:
            self.proc.wait(EXIT_WAIT)
            pytest.fail(f"no handshake; stderr:\n{log.read_text(errors='replace')}")
        self.address, self.token = wire.parse_handshake(self.line)
        self.folder = Path(self.address.removeprefix("unix:")).parent
        self.channel = grpc.insecure_channel(self.address, options=wire.channel_options())
        self.stub = pb_grpc.PluginStub(self.channel)
        self.md = ((wire.TOKEN_KEY, self.token),)

    def stop(self) -> int:
        self.channel.close()
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(EXIT_WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()

    def create(self, instance: str, type_: str, params: dict | None = None,
               outputs: dict | None = None) -> str:
        reply = self.stub.Create(pb.CreateRequest(
            instance=instance, type=type_, name=type_, run="run-1",
            params_json=wire.dumps(params or {}), outputs_json=wire.dumps(outputs or {})),
            metadata=self.md, timeout=EXIT_WAIT)
        return reply.error


class Stream:
    """The Channel stream with sync gRPC: Batches in through a queue, frames
    out one at a time (and how many Batches they came in)."""

    def __init__(self, plugin: Plugin, metadata: Any = None) -> None:
        self.out: queue.Queue = queue.Queue()
        self.replies = plugin.stub.Channel(iter(self.out.get, None),
                                           metadata=plugin.md if metadata is None else metadata)
        self.pending: list = []
        self.batches = 0

    def send(self, *frames: Any) -> None:
        self.out.put(pb.Batch(frames=list(frames)))

    def next(self) -> tuple[Any, Any]:
        """(frame, its data decoded)."""
        while not self.pending:
            self.pending = list(next(self.replies).frames)
            self.batches += 1
        frame = self.pending.pop(0)
        return frame, (wire.loads(frame.data) if frame.data else None)

    def close(self) -> None:
        self.out.put(None)
        for _ in self.replies:  # drains to the end of the call
            pass


def call(id: int, instance: str, msg: dict, params: dict) -> Any:
    return K(kind=K.CALL, id=id, instance=instance, data=wire.dumps({"msg": msg, "params": params}))


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Iterator[Plugin]:
    p = Plugin(tmp_path_factory.mktemp("textkit-js") / "stderr.log")
    yield p
    p.stop()


@pytest.fixture
def stream(plugin) -> Iterator[Stream]:
    s = Stream(plugin)
    yield s
    s.close()


def test_handshake_is_one_json_line_with_a_private_socket(plugin):
    data = json.loads(plugin.line)
    assert list(data) == ["switchboard_plugin", "address", "token", "pid"]
    assert data["switchboard_plugin"] == 1
    assert data["pid"] == plugin.proc.pid
    assert len(data["token"]) == 32 and int(data["token"], 16) >= 0
    assert plugin.address.startswith("unix:") and plugin.address.endswith("/plugin.sock")
    assert stat.S_IMODE(plugin.folder.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(Path(plugin.address.removeprefix("unix:")).stat().st_mode)


def test_describe_sends_specs_exactly_in_the_nodespec_model(plugin):
    reply = plugin.stub.Describe(pb.DescribeRequest(protocol=1), metadata=plugin.md)
    manifest = json.loads((PACKAGE / "plugin.json").read_text())
    assert (reply.protocol, reply.name, reply.language) == (1, manifest["name"], "node")
    assert reply.version == manifest["version"] == json.loads(
        (PACKAGE / "package.json").read_text())["version"]
    specs = json.loads(reply.specs_json)
    assert [s["type"] for s in specs] == TYPES
    for raw in specs:
        spec = NodeSpec.model_validate(raw)  # extra="forbid": no unknown key passes
        # Every key there, none defaulted by the model: the dump is the raw spec.
        assert spec.model_dump(mode="json") == raw
        assert spec.package == "textkit" and spec.tool is not None and not spec.source
        assert spec.category == "Text" and spec.inputs[0].name == "in"
        text = spec.param("text")
        assert text is not None and text.default_scope == "message"
        assert text.allowed_scopes == ["ai", "custom", "message"]
        assert spec.results[0].path == "payload"
        assert all(o.path == o.name for o in spec.results[1:])


# Declarations (name, type, options) in both SDKs' terms; Allow flags have
# the same values in JavaScript (AI=4, CUSTOM=1, MESSAGE=2).
PARAMS: list[tuple[str, str, dict]] = [
    ("smtp_host", "str", {}),
    ("api_key_env", "str", {"scope": "ai"}),
    ("base_url", "str", {"allow": Allow.AI | Allow.MESSAGE}),
    ("max_tokens", "int", {"default": 3, "allow": Allow.CUSTOM}),
    ("password", "secret", {}),
    ("dir", "str", {"choices": ["a", "b"], "default": "a"}),
    ("ID_field", "json", {"optional": True, "scope": "message", "path": "payload.x",
                          "multiline": True, "label": "Custom label"}),
    ("temperature", "float", {"default": 1.5, "allow": Allow.AI | Allow.CUSTOM | Allow.MESSAGE,
                              "scope": "custom"}),
    ("flag", "bool", {"default": False, "allow": Allow.CUSTOM | Allow.MESSAGE,
                      "scope": "message"}),
]
OUTPUTS: list[tuple[str, str, dict]] = [
    ("main", "str", {}), ("count", "int", {}), ("moved", "json", {"path": "a.b"})]

JS_DECLARE = """
const sb = require('./switchboard');
const decl = JSON.parse(process.argv[1]);
const params = {}; const outputs = {};
for (const [name, type, opts] of decl.params) params[name] = sb.param(type, 'd', opts);
for (const [name, type, opts] of decl.outputs) outputs[name] = sb.output(type, 'o', opts);
sb.node('t.parity', { name: 'P', category: 'C', params, outputs });
const spec = sb.registry.get('t.parity').spec('pkg');
process.stdout.write(JSON.stringify({ spec, labels: decl.labels.map(sb.labelFor) }));
"""


def test_js_param_and_output_specs_follow_the_python_sdk():
    labels = ["smtp_host", "api_key_env", "base_url", "dir", "x", "ai_model", "ID_field",
              "__", "a__b", "llm", "HTTP_url", "éclair_size"]
    decl = {"params": [[n, t, {k: (v.value if isinstance(v, Allow) else v) for k, v in o.items()}]
                       for n, t, o in PARAMS],
            "outputs": [list(o) for o in OUTPUTS], "labels": labels}
    out = subprocess.run([NODE, "-e", JS_DECLARE, json.dumps(decl)], cwd=PACKAGE,
                         capture_output=True, text=True, timeout=EXIT_WAIT, check=True)
    js = json.loads(out.stdout)

    expected_params = []
    for name, type_, opts in PARAMS:
        p = Param(type_, "d", **opts)
        p.name = name
        expected_params.append(p.spec().model_dump(mode="json"))
    assert js["spec"]["params"] == expected_params
    expected_outputs = []
    for i, (name, type_, opts) in enumerate(OUTPUTS):
        o = Output(type_, "o", **opts)
        o.name = name
        expected_outputs.append(o.spec(main=i == 0).model_dump(mode="json"))
    assert js["spec"]["results"] == expected_outputs
    assert js["labels"] == [label_for(n) for n in labels]
    NodeSpec.model_validate(js["spec"])


def test_word_count_in_rpa_mode(plugin, stream):
    assert plugin.create("wc-rpa", "text.word_count",
                         {"text": {"scope": "message", "path": "payload"}},
                         {"words": "payload", "characters": "stats.chars", "lines": "lines"}) == ""
    msg = {"_msgid": "m1", "payload": "one two three\nfour"}
    stream.send(call(1, "wc-rpa", msg, {"text": msg["payload"]}))
    frame, data = stream.next()
    assert (frame.kind, frame.id) == (K.RESULT, 1)
    assert data == {"msg": {"_msgid": "m1", "payload": 4, "stats": {"chars": 18}, "lines": 2},
                    "ports": None}


def test_word_count_in_tool_mode(plugin, stream):
    assert plugin.create("wc-tool", "text.word_count", {"text": {"scope": "ai"}}) == ""
    msg = {MESSAGE_TYPE: TOOL_REQUEST, TOOL_CALLER_ID: "call-1", TOOL_NAME: "count_words",
           PARAMETERS: {"text": "Hello, tool world"}, "payload": "untouched"}
    stream.send(call(2, "wc-tool", msg, {"text": "Hello, tool world"}))
    frame, data = stream.next()
    assert (frame.kind, frame.id) == (K.RESULT, 2)
    assert data["msg"][TOOL_DATA] == {"words": 3, "characters": 17, "lines": 1}
    assert data["msg"]["payload"] == "untouched"
    assert data["msg"][TOOL_CALLER_ID] == "call-1"


def test_custom_settings_from_create_and_a_config_error(plugin, stream):
    assert plugin.create("slug", "text.slugify", {"separator": {"scope": "custom", "value": "_"}}) == ""
    assert plugin.create("re", "text.regex_extract",
                         {"pattern": {"scope": "custom", "value": "x" * 1001}}) == ""
    stream.send(call(3, "slug", {"payload": "A Title"}, {"text": "A Title"}),
                call(4, "re", {"payload": "xyz"}, {"text": "xyz"}))
    got = dict((f.id, (f.kind, d)) for f, d in (stream.next(), stream.next()))
    assert got[3] == (K.RESULT, {"msg": {"payload": "a_title"}, "ports": None})
    kind, error = got[4]
    assert kind == K.ERROR
    assert error["config"] is True and error["type"] == "NodeConfigError"
    assert error["message"].startswith("pattern: 1001 characters")


def test_many_calls_in_one_batch_answer_in_one_batch(plugin, stream):
    assert plugin.create("wc-many", "text.word_count") == ""
    texts = {i: " ".join(["w"] * i) for i in range(100, 150)}
    stream.send(*(call(i, "wc-many", {"payload": t}, {"text": t}) for i, t in texts.items()))
    results = {}
    for _ in texts:
        frame, data = stream.next()
        assert frame.kind == K.RESULT
        results[frame.id] = data["msg"]["payload"]
    assert results == {i: i for i in texts}
    assert stream.batches == 1  # ready together, packed together


def test_a_bad_frame_costs_that_frame_only(plugin, stream):
    stream.send(K(kind=K.CALL, id=5, instance="slug-x", data=b"{not json"),
                K(kind=K.CALL, id=6, instance="nobody", data=wire.dumps({"msg": {}})),
                K(kind=K.RESULT, id=7))
    errors = [stream.next() for _ in range(3)]
    assert [(f.kind, f.id) for f, _ in errors] == [(K.ERROR, 5), (K.ERROR, 6), (K.ERROR, 7)]
    assert "no instance 'nobody'" in errors[1][1]["message"]
    health = plugin.stub.Health(pb.HealthRequest(), metadata=plugin.md)
    assert (health.status, health.pid) == ("serving", plugin.proc.pid)


def test_cancel_stops_a_runaway_regex_and_the_next_call_runs(plugin, stream):
    # (a+)+$ on "a"*64 + "b" backtracks through 2^64 paths: it never ends by
    # itself, so only the CANCEL can free the worker for the call after it.
    assert plugin.create("re-slow", "text.regex_extract",
                         {"pattern": {"scope": "custom", "value": "(a+)+$"},
                          "timeout_seconds": {"scope": "custom", "value": 60}}) == ""
    assert plugin.create("re-ok", "text.regex_extract",
                         {"pattern": {"scope": "custom", "value": r"\d+"}}) == ""
    stream.send(call(8, "re-slow", {}, {"text": "a" * 64 + "b"}))
    stream.send(K(kind=K.CANCEL, id=8), call(9, "re-ok", {}, {"text": "a1 b22"}))
    frame, data = stream.next()
    assert (frame.kind, frame.id) == (K.RESULT, 9)
    assert data["msg"] == {"payload": ["1", "22"], "count": 2, "truncated": False}
    health = plugin.stub.Health(pb.HealthRequest(), metadata=plugin.md)
    assert health.in_flight == 0


def test_close_runs_and_is_idempotent(plugin):
    assert plugin.create("to-close", "text.case") == ""
    before = plugin.stub.Health(pb.HealthRequest(), metadata=plugin.md).instances
    for _ in range(2):
        reply = plugin.stub.Close(pb.CloseRequest(instance="to-close"), metadata=plugin.md)
        assert reply.error == ""
    assert plugin.stub.Health(pb.HealthRequest(), metadata=plugin.md).instances == before - 1
    assert "no node type 'text.nope'" in plugin.create("x", "text.nope")


@pytest.mark.parametrize("metadata", [(), ((wire.TOKEN_KEY, "0" * 32),)],
                         ids=["no token", "wrong token"])
def test_a_wrong_token_is_refused(plugin, metadata):
    for rpc, request in [(plugin.stub.Describe, pb.DescribeRequest(protocol=1)),
                         (plugin.stub.Health, pb.HealthRequest()),
                         (plugin.stub.Create, pb.CreateRequest(instance="i", type="text.case"))]:
        with pytest.raises(grpc.RpcError) as err:
            rpc(request, metadata=metadata)
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    refused = Stream(plugin, metadata)
    refused.send(call(1, "slug", {}, {"text": "x"}))
    with pytest.raises(grpc.RpcError) as err:
        refused.next()
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    refused.out.put(None)


def test_the_process_exits_when_its_stdin_closes(tmp_path):
    p = Plugin(tmp_path / "stderr.log")
    assert p.stub.Health(pb.HealthRequest(), metadata=p.md).status == "serving"
    p.channel.close()
    p.proc.stdin.close()
    assert p.proc.wait(EXIT_WAIT) == 0
    assert not p.folder.exists()
    assert p.proc.stdout.read() == b""  # nothing after the handshake
    p.proc.stdout.close()


def test_sigterm_stops_it_and_removes_the_socket_folder(tmp_path):
    p = Plugin(tmp_path / "stderr.log")
    p.proc.send_signal(signal.SIGTERM)
    assert p.proc.wait(EXIT_WAIT) == 143
    assert not p.folder.exists()
    p.stop()

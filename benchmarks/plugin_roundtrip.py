"""A tool call to a node in a plugin process, next to a bare grpc.aio
bidirectional-stream ping-pong with the same payload, measured in the same
run over the same kind of socket (Unix, loopback):

- median and p99 of one tool call (ToolBridge.call, the path an agent's call
  takes: arguments checked, message cloned, the RemoteNode's request over the
  plugin's stream, the answer) to a no-op node in a Python plugin, and to a
  Node.js plugin's node (text.word_count on a short text);
- the bare ping-pong: one Python process writes the call's bytes on a
  grpc.aio stream to another that writes them back;
- calls per second with 1, 16 and 256 in flight, both ways (the bare one as
  a window of that many on one stream).

Each figure is the median of R rounds; within a round the two sides
alternate (one-call figures in blocks of 100), so that whatever else the
machine does weighs on both alike, and each ratio is taken round by round.

Goal: one call <= 1.3x the bare round trip; >= 10,000 calls/s at 16 in
flight.

``--pieces`` prints, instead, where a Python plugin's no-op call goes, each
piece interleaved with the bare ping-pong: the stream alone (a CALL frame
out and its RESULT back: both processes, gRPC, the plugin's dispatch),
``RemoteNode.on_message`` (adds params, JSON both ways, the message updated
in place), ``ToolBridge.call`` (adds the agent's checks, the request
clone, the outcome). Next to the wall-clock medians it prints the CPU time
per call of both processes (this one and the plugin, or the echo server for
the bare ping-pong), which a busy machine distorts less than wall-clock
time, at 1 and at 16 calls in flight.

    python benchmarks/plugin_roundtrip.py [--calls N] [--repeat R] [--pieces]

Prints figures; never fails on a time."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PKGS = ROOT / "tests" / "plugin_pkgs"

import grpc  # noqa: E402

METHOD = "/bench.Echo/Ping"


# -- the bare baseline: a grpc.aio echo server in its own process -----------------
async def bare_server() -> None:
    folder = tempfile.mkdtemp(prefix="sb-bench-")
    address = f"unix:{folder}/echo.sock"

    async def ping(request_iterator, context):
        while True:
            data = await context.read()
            if data is grpc.aio.EOF:
                return
            await context.write(data)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "bench.Echo", {"Ping": grpc.stream_stream_rpc_method_handler(ping)})])
    server.add_insecure_port(address)
    await server.start()
    print(address, flush=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        await server.stop(0)
        shutil.rmtree(folder, ignore_errors=True)


class Bare:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--bare-server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.address = self.proc.stdout.readline().strip()

    async def open(self):
        self.channel = grpc.aio.insecure_channel(self.address)
        self.call = self.channel.stream_stream(METHOD)()

    async def ping(self, payload: bytes) -> None:
        await self.call.write(payload)
        await self.call.read()

    async def window(self, payload: bytes, n: int, width: int) -> float:
        """n round trips with ``width`` in flight on the one stream; seconds."""
        sent = 0

        async def writer():
            nonlocal sent
            while sent < n:
                while sent - received[0] >= width:
                    await room.wait()
                    room.clear()
                await self.call.write(payload)
                sent += 1

        received = [0]
        room = asyncio.Event()
        t0 = time.perf_counter()
        w = asyncio.ensure_future(writer())
        while received[0] < n:
            await self.call.read()
            received[0] += 1
            room.set()
        await w
        return time.perf_counter() - t0

    async def close(self):
        await self.call.done_writing()
        await self.channel.close()
        self.proc.stdin.close()
        self.proc.wait()


# -- the plugin side: a real flow's agent tool bridge --------------------------------
def bridge_for(tool_type: str, tool_params: dict | None = None):
    from nodes.ai import Agent
    from nodes.core.inject_debug import DebugNode, Inject
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import parse_flow
    from runtime.registry import Registry
    from runtime.tools import ToolBridge

    reg = Registry.default()
    cls = reg.get(tool_type)
    if cls is None:
        return None
    flow = parse_flow({"format": "switchboard.flow/1", "name": "bench", "nodes": [
        {"id": "ask", "type": "core.inject",
         "params": {"payload": {"scope": "custom", "value": "go"}}},
        {"id": "agent", "type": "ai.agent", "params": {
            "provider": {"scope": "custom", "value": "scripted"},
            "script": {"scope": "custom", "value": [{"text": "x"}]}}},
        {"id": "tool", "type": tool_type, "params": tool_params or {}},
    ], "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
                 {"from": ["agent", "tools"], "to": ["tool", "in"]}]})
    reg2 = Registry([Inject, DebugNode, Agent, cls])
    return ToolBridge(Engine(flow, reg2, EventBus(), record=False), "agent")


async def per_call(fn, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return times


async def in_flight(fn, n: int, width: int) -> float:
    per = n // width

    async def worker():
        for _ in range(per):
            await fn()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return (time.perf_counter() - t0) / (per * width)


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu(pid: int) -> float:
    """Seconds of CPU another process has used (user + system), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _TICK


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99) - 1]


async def main(calls: int, repeat: int) -> None:
    from runtime.message import Message
    from runtime.plugin import host, wire

    os.environ["PYTHONPATH"] = f"{PKGS}{os.pathsep}{ROOT}"
    ptest = host.Plugin(host.PluginManifest(
        name="ptest", language="python",
        command=[sys.executable, "-m", "runtime.plugin", "serve", "sbtest_plugin", "--name",
                 "ptest"]), None, "benchmark")
    process = host.process_for(ptest)
    _v, specs = process.describe()
    from runtime.registry import Registry

    reg = Registry.default()
    noop_spec = next(s for s in specs if s.type == "ptest.noop")
    reg._classes["ptest.noop"] = host.remote_class(noop_spec, process)

    targets = [("Python plugin, no-op node", "ptest.noop", "noop", {}, None)]
    if reg.get("text.word_count") is not None:
        wc = reg.spec("text.word_count")
        targets.append(("Node.js plugin, text.word_count", "text.word_count", wc.tool.name,
                        {wc.params[0].name: "three small words"},
                        {wc.params[0].name: {"scope": "ai"}}))
    else:
        print("(no Node.js figures: nodes/textkit-js is not set up; run npm ci there)")

    bare = Bare()
    await bare.open()
    base = Message.new("go")
    us = 1e6
    med = statistics.median
    print(f"plugin round trips: {calls} calls a round, medians of {repeat} rounds, Python "
          f"{sys.version.split()[0]}, grpcio {grpc.__version__}")
    try:
        for label, type_id, tool, args, params in targets:
            bridge = bridge_for(type_id, params)
            if type_id == "ptest.noop":
                bridge.engine.registry = reg
            payload = wire.dumps({"msg": {**base, "__message_type__": "tool_request",
                                          "__parameters__": args}, "params": args})

            async def tool_call(bridge=bridge, tool=tool, args=args):
                result = await bridge.call(base, "c1", tool, args, 60)
                assert result.status == "success", result

            async def ping(payload=payload):
                await bare.ping(payload)

            for _ in range(300):  # warm both up
                await tool_call()
                await ping()
            rounds: dict[str, list[float]] = {}

            def keep(key: str, value: float, rounds: dict = rounds) -> None:
                rounds.setdefault(key, []).append(value)

            for r in range(repeat):
                b, c = [], []
                for i in range(max(1, calls // 100)):
                    if (i + r) % 2:
                        c += await per_call(tool_call, 100)
                        b += await per_call(ping, 100)
                    else:
                        b += await per_call(ping, 100)
                        c += await per_call(tool_call, 100)
                keep("bare", med(b))
                keep("call", med(c))
                keep("ratio", med(c) / med(b))
                keep("bare p99", p99(b))
                keep("call p99", p99(c))
                for width in (16, 256):
                    n = max(calls, 20 * width)
                    fly = await in_flight(tool_call, n, width)
                    window = await bare.window(payload, n, width) / n
                    keep(f"call {width}", 1 / fly)
                    keep(f"bare {width}", 1 / window)
            print(f"  {label} ({len(payload)} bytes a call):")
            print(f"    bare grpc.aio ping-pong     median {med(rounds['bare']) * us:7.1f} us   "
                  f"p99 {med(rounds['bare p99']) * us:7.1f} us")
            print(f"    tool call through plugin    median {med(rounds['call']) * us:7.1f} us   "
                  f"p99 {med(rounds['call p99']) * us:7.1f} us   "
                  f"{med(rounds['ratio']):4.2f}x  (goal <= 1.3x; rounds "
                  f"{min(rounds['ratio']):.2f}-{max(rounds['ratio']):.2f}x)")
            print(f"    in flight       1: tool calls {1 / med(rounds['call']):9,.0f} /s   "
                  f"bare {1 / med(rounds['bare']):9,.0f} /s")
            for width in (16, 256):
                goal = "  (goal >= 10,000)" if width == 16 else ""
                print(f"    in flight {width:>5}: tool calls {med(rounds[f'call {width}']):9,.0f} /s   "
                      f"bare window {med(rounds[f'bare {width}']):9,.0f} /s{goal}")
    finally:
        await bare.close()
        host.stop_all()


async def pieces(calls: int, repeat: int) -> None:
    from runtime.message import Message
    from runtime.plugin import host, wire
    from runtime.registry import Registry

    os.environ["PYTHONPATH"] = f"{PKGS}{os.pathsep}{ROOT}"
    process = host.process_for(host.Plugin(host.PluginManifest(
        name="ptest", language="python",
        command=[sys.executable, "-m", "runtime.plugin", "serve", "sbtest_plugin", "--name",
                 "ptest"]), None, "benchmark"))
    _v, specs = process.describe()
    reg = Registry.default()
    cls = reg._classes["ptest.noop"] = host.remote_class(
        next(s for s in specs if s.type == "ptest.noop"), process)
    node = cls("noop")
    await node.start()
    bridge = bridge_for("ptest.noop")
    bridge.engine.registry = reg
    base = Message.new("go")
    payload = wire.dumps({"msg": {**base, "__message_type__": "tool_request",
                                  "__parameters__": {}}, "params": {}})
    bare = Bare()
    await bare.open()
    conn = await process.connection()

    async def stream() -> None:
        await conn.request(host.K.CALL, node._instance, payload, 60)

    async def on_message() -> None:
        await node.on_message(Message(base))

    async def tool_call() -> None:
        await bridge.call(base, "c1", "noop", {}, 60)

    # Turns of the event loop per call (each is a select() call): a design
    # that hands an answer from a reader task to its caller costs one more.
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    select = selector.select
    turns = [0]

    def counted(timeout=None):
        turns[0] += 1
        return select(timeout)

    selector.select = counted
    steps = {"bare grpc.aio ping-pong": lambda: bare.ping(payload),
             "the stream: CALL out, RESULT back": stream,
             "RemoteNode.on_message": on_message, "ToolBridge.call": tool_call}
    other = {key: process.proc.pid for key in steps}
    other["bare grpc.aio ping-pong"] = bare.proc.pid
    cpu: dict[tuple[str, int], list[float]] = {}  # (piece, in flight) -> [cpu s, calls]

    async def measured(key: str, width: int, n: int) -> list[float]:
        c0, o0 = time.process_time(), process_cpu(other[key])
        if width == 1:
            times = await per_call(steps[key], n)
        elif key == "bare grpc.aio ping-pong":
            times = [await bare.window(payload, n, width) / n]
        else:
            times = [await in_flight(steps[key], n, width)]
        used = time.process_time() - c0 + process_cpu(other[key]) - o0
        total = cpu.setdefault((key, width), [0.0, 0])
        total[0] += used
        total[1] += n
        return times
    try:
        for _ in range(300):
            for fn in steps.values():
                await fn()
        medians: dict[str, list[float]] = {k: [] for k in steps}
        loop_turns: dict[str, int] = {k: 0 for k in steps}
        for r in range(repeat):
            for i in range(max(1, calls // 100)):
                order = list(steps) if (i + r) % 2 == 0 else list(steps)[::-1]
                for key in order:
                    before = turns[0]
                    medians[key].append(statistics.median(await measured(key, 1, 100)))
                    loop_turns[key] += turns[0] - before
            for key in steps:  # 16 in flight, for the CPU per call only
                await measured(key, 16, max(calls, 320))
        bare_medians = medians["bare grpc.aio ping-pong"]
        print(f"a Python plugin's no-op call by pieces: blocks of 100, {repeat} x {calls} calls, "
              "medians")
        for key, values in medians.items():
            ratio = statistics.median(v / b for v, b in zip(values, bare_medians, strict=True))
            print(f"  {key:36s} {statistics.median(values) * 1e6:7.1f} us   {ratio:4.2f}x bare   "
                  f"{loop_turns[key] / (100 * len(values)):4.2f} loop turns a call")
        print("CPU time per call, this process + the other (the plugin; the echo server for the "
              "bare one), all rounds:")
        bare_key = "bare grpc.aio ping-pong"
        for width in (1, 16):
            b_used, b_n = cpu[(bare_key, width)]
            for key in steps:
                used, n = cpu[(key, width)]
                print(f"  {width:2d} in flight  {key:36s} {used / n * 1e6:7.1f} us   "
                      f"{used / n / (b_used / b_n):4.2f}x bare")
    finally:
        await bare.close()
        host.stop_all()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pieces", action="store_true",
                    help="where a Python plugin's call goes, piece by piece")
    ap.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare_server:
        asyncio.run(bare_server())
    elif args.pieces:
        asyncio.run(pieces(args.calls, args.repeat))
    else:
        asyncio.run(main(args.calls, args.repeat))

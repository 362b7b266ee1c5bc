"""A tool call to a node in a plugin process, next to a bare grpc.aio
bidirectional-stream ping-pong with the same payload, measured in the same
run over the same kind of socket (Unix, loopback):

- median and p99 of one tool call (ToolBridge.call, the path an agent's call
  takes: arguments checked, message cloned, the RemoteNode's request over the
  plugin's stream, the answer) to a no-op node in a Python plugin, and to a
  Node.js plugin's node (text.word_count on a short text);
- the bare ping-pong: one Python process writes the call's bytes on a
  grpc.aio stream to another that writes them back;
- calls per second with 16 in flight, both ways (the bare one as a window
  of 16 on one stream).

Goal: one call <= 1.3x the bare round trip; >= 5,000 calls/s at 16 in flight.

    python benchmarks/plugin_roundtrip.py [--calls N] [--repeat R]

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
        {"id": "ask", "type": "core.inject"},
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
    print(f"plugin round trips: {calls} calls, best of {repeat}, Python "
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
            med_call = med_bare = p99_call = p99_bare = float("inf")
            for _ in range(repeat):
                # Interleaved in blocks of 100, so that whatever else the
                # machine does meanwhile weighs on both sides alike.
                b, c = [], []
                for _ in range(max(1, calls // 100)):
                    b += await per_call(ping, 100)
                    c += await per_call(tool_call, 100)
                med_bare = min(med_bare, statistics.median(b))
                med_call = min(med_call, statistics.median(c))
                p99_bare = min(p99_bare, p99(b))
                p99_call = min(p99_call, p99(c))
            fly_call = min([await in_flight(tool_call, calls, 16) for _ in range(repeat)])
            fly_bare = min([await bare.window(payload, calls, 16) / calls
                            for _ in range(repeat)])
            print(f"  {label} ({len(payload)} bytes a call):")
            print(f"    bare grpc.aio ping-pong     median {med_bare * us:7.1f} us   "
                  f"p99 {p99_bare * us:7.1f} us")
            print(f"    tool call through plugin    median {med_call * us:7.1f} us   "
                  f"p99 {p99_call * us:7.1f} us   {med_call / med_bare:4.2f}x  (goal <= 1.3x)")
            print(f"    16 in flight: tool calls {1 / fly_call:9,.0f} /s  (goal >= 5,000)   "
                  f"bare window of 16 {1 / fly_bare:9,.0f} /s")
    finally:
        await bare.close()
        host.stop_all()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare_server:
        asyncio.run(bare_server())
    else:
        asyncio.run(main(args.calls, args.repeat))

"""Throughput of the RPA nodes, next to a baseline measured in the same run:

- http.request against a local server, at concurrency 1 and 32, next to
  httpx alone (one AsyncClient, the same concurrency) hitting the same
  server: goal >= 0.8x;
- trigger.webhook -> http.response, requests per second as seen by an
  httpx client at concurrency 1 and 32 (reported; no goal yet);
- the csv figures, from benchmarks/rpa_csv.py (csv_rows()) when that file
  exists.

The server runs in its own process (a small asyncio HTTP/1.1 server with
keep-alive), so that it does not share this process's event loop or GIL.
Rounds alternate baseline and node; each figure is the median of the rounds.

    python benchmarks/rpa_nodes.py [--requests N] [--rounds R]

Prints figures; never fails on a time."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BODY = b'{"ok": true, "items": [1, 2, 3]}'


# -- the server process ------------------------------------------------------------

async def _serve() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until closed


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())  # type: ignore[union-attr]
    return proc, f"http://127.0.0.1:{port}/api"


# -- the measurements --------------------------------------------------------------

async def httpx_alone(url: str, n: int, conc: int) -> float:
    import httpx

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None,
                                                     max_keepalive_connections=64)) as client:
        async def worker(count: int) -> None:
            for _ in range(count):
                r = await client.get(url)
                r.json()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
        return (n // conc * conc) / (time.perf_counter() - t0)


def _flow(nodes: list[dict], wires: list[tuple[str, str]]):
    from runtime.flow import parse_flow

    return parse_flow({"format": "switchboard.flow/1", "name": "bench", "nodes": nodes,
                       "wires": [{"from": [a, "out"], "to": [b, "in"]} for a, b in wires]})


def fixed(v):
    return {"scope": "custom", "value": v}


async def http_request_node(url: str, n: int, conc: int) -> float:
    from runtime.engine import Engine
    from runtime.events import EventBus

    n = n // conc * conc
    flow = _flow([{"id": "src", "type": "core.inject", "params": {"count": fixed(n)}},
                  {"id": "req", "type": "http.request",
                   "params": {"url": fixed(url), "max_concurrent": fixed(conc)}}],
                 [("src", "req")])
    engine = Engine(flow, bus=EventBus())
    t0 = time.perf_counter()
    result = await engine.run(timeout=300)
    elapsed = time.perf_counter() - t0
    counts = engine.stats().nodes["req"]
    if result.status != "ok" or counts["errors"]:
        raise SystemExit(f"http.request run failed: {result}")
    return n / elapsed


async def webhook(n: int, conc: int) -> float:
    import httpx

    from runtime.engine import Engine
    from runtime.events import EventBus

    flow = _flow([{"id": "hook", "type": "trigger.webhook",
                   "params": {"port": fixed(0), "path": fixed("/bench"),
                              "max_pending": fixed(max(conc, 1) * 2)}},
                  {"id": "reply", "type": "http.response"}], [("hook", "reply")])
    engine = Engine(flow, bus=EventBus())
    task = asyncio.create_task(engine.run(timeout=300))
    hook = engine.nodes["hook"].node
    await asyncio.wait_for(hook.listening.wait(), 10)
    n = n // conc * conc
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None,
                                                     max_keepalive_connections=64)) as client:
        async def worker(count: int) -> None:
            for i in range(count):
                r = await client.post(hook.url, json={"n": i})
                if r.status_code != 200:
                    raise SystemExit(f"webhook answered {r.status_code}: {r.text}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
        elapsed = time.perf_counter() - t0
    engine.stop("benchmark done")
    await task
    return n / elapsed


def csv_figures() -> None:
    """The csv figures: csv_rows() of benchmarks/rpa_csv.py, written by the
    files nodes' engineer; called outside any event loop (it runs its own)."""
    path = ROOT / "benchmarks" / "rpa_csv.py"
    if not path.exists():
        print("csv: skipped (benchmarks/rpa_csv.py does not exist yet)")
        return
    spec = importlib.util.spec_from_file_location("rpa_csv", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    for row in module.csv_rows():
        print(row if isinstance(row, str) else "  ".join(str(c) for c in row))


async def main(requests: int, rounds: int) -> None:
    proc, url = start_server()
    try:
        await httpx_alone(url, 200, 8)  # warm up both sides
        await http_request_node(url, 200, 8)
        print(f"http.request vs httpx alone, {requests} GET requests per round, "
              f"median of {rounds} rounds (local server in its own process)")
        print(f"{'concurrency':>11}  {'httpx req/s':>12}  {'node req/s':>11}  {'ratio':>6}  goal")
        for conc in (1, 32):
            base, ours, ratios = [], [], []
            for _ in range(rounds):
                b = await httpx_alone(url, requests, conc)
                o = await http_request_node(url, requests, conc)
                base.append(b)
                ours.append(o)
                ratios.append(o / b)
            print(f"{conc:>11}  {statistics.median(base):>12,.0f}  "
                  f"{statistics.median(ours):>11,.0f}  {statistics.median(ratios):>5.2f}x  "
                  ">= 0.8x")
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(10)

    print()
    print(f"trigger.webhook -> http.response, {requests} POST requests per round, "
          f"median of {rounds} rounds (httpx client in this process)")
    print(f"{'concurrency':>11}  {'req/s':>8}")
    for conc in (1, 32):
        figures = [await webhook(requests, conc) for _ in range(rounds)]
        print(f"{conc:>11}  {statistics.median(figures):>8,.0f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        asyncio.run(_serve())
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds))
    print()
    csv_figures()  # <- the csv figures (benchmarks/rpa_csv.py), when that file exists

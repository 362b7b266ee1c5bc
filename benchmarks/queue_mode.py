"""Queue mode on this machine: the figures of docs/scaling.md.

A small flow, webhook -> http.request (POST to a local server) -> csv.write
(append), run three ways:

- in-process: ``switchboard run`` serves the webhook and runs each request's
  flow itself (the baseline);
- queued: ``switchboard serve`` hosts the webhook and queues a run per
  request on ``switchboard worker`` with 1, 2 and 4 pool processes (one run
  each at a time), Debian's redis-server as broker, all on loopback.

Prints, per way: runs/s for a burst of --runs requests sent by 8 clients
(until the last run's CSV row is written), and the latency of single
requests sent one at a time (--samples): from sending the webhook request
to the flow's POST reaching the local server, median and p99. The added
latency of a queued run is the difference of the two. Prints figures;
never fails on a time.

    .venv/bin/python benchmarks/queue_mode.py [--runs 300] [--samples 200] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.servers.redis import RedisServer, free_port  # noqa: E402

SWITCHBOARD = [sys.executable, "-m", "runtime.cli"]
CLIENTS = 8
WAIT = 300.0


class Target:
    """The server the flow's http.request POSTs to: when each request's
    probe id arrived."""

    def __init__(self) -> None:
        self.hits: dict[str, float] = {}
        self.cond = threading.Condition()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                now = time.perf_counter()
                try:
                    probe = json.loads(body).get("probe", "")
                except ValueError:
                    probe = ""
                with target.cond:
                    target.hits[probe] = now
                    target.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_hit(self, probe: str, timeout: float = WAIT) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: probe in self.hits, timeout):
                raise RuntimeError(f"probe {probe} never reached the server")
            return self.hits[probe]


def flow(path: Path, hook_port: int, target_port: int, csv_path: Path) -> Path:
    def fixed(v):
        return {"scope": "custom", "value": v}

    nodes = [
        {"id": "hook", "type": "trigger.webhook", "position": [0, 0],
         "params": {"path": fixed("/bench"), "port": fixed(hook_port),
                    "max_pending": fixed(1000)}},
        {"id": "post", "type": "http.request", "position": [200, 0],
         "params": {"url": fixed(f"http://127.0.0.1:{target_port}/in"), "method": fixed("POST"),
                    "body": {"scope": "message", "path": "payload"}},
         "outputs": {"response_body": "response"}},
        {"id": "log", "type": "csv.write", "position": [400, 0],
         "params": {"path": fixed(str(csv_path)), "mode": fixed("append"),
                    "header": fixed(False),
                    "rows": {"scope": "message", "path": "payload.rows"}}},
        {"id": "answer", "type": "http.response", "position": [600, 0]},
    ]
    wires = [("hook", "post"), ("post", "log"), ("log", "answer")]
    path.write_text(json.dumps({"format": "switchboard.flow/1", "name": "bench", "nodes": nodes,
                                "wires": [{"from": [a, "out"], "to": [b, "in"]}
                                          for a, b in wires]}))
    return path


class Proc:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([*SWITCHBOARD, *args], env=env, cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def wait_for(self, text: str) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: any(text in line for line in self.lines), WAIT):
                raise RuntimeError(f"{self.proc.args}: no {text!r}:\n{''.join(self.lines)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def post(conn: http.client.HTTPConnection, probe: str, row: int) -> None:
    body = json.dumps({"probe": probe, "rows": [[row]]}).encode()
    conn.request("POST", "/bench", body=body,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    if resp.status >= 300:
        raise RuntimeError(f"webhook answered {resp.status}")


def rows(csv_path: Path) -> int:
    try:
        with open(csv_path, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def burst(hook_port: int, n: int, csv_path: Path, tag: str) -> float:
    """runs/s: n requests from CLIENTS clients, until n rows are written."""
    before = rows(csv_path)
    t0 = time.perf_counter()

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", hook_port, timeout=WAIT)
        for i in range(k, n, CLIENTS):
            post(conn, f"{tag}-{i}", i)
        conn.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    deadline = time.monotonic() + WAIT
    while rows(csv_path) < before + n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {rows(csv_path) - before} of {n} runs ended")
        time.sleep(0.005)
    return n / (time.perf_counter() - t0)


def latencies(hook_port: int, target: Target, samples: int, tag: str) -> list[float]:
    """ms from sending a webhook request to the flow's POST arriving, one
    request at a time."""
    out = []
    conn = http.client.HTTPConnection("127.0.0.1", hook_port, timeout=WAIT)
    for i in range(samples):
        probe = f"{tag}-lat-{i}"
        t0 = time.perf_counter()
        post(conn, probe, i)
        out.append((target.wait_hit(probe) - t0) * 1000)
    conn.close()
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and its live descendants (Linux /proc; 0 elsewhere)."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        parents: dict[int, int] = {}
        times: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rpartition(")")[2].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, AttributeError):
        return 0.0
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += times.get(p, 0.0)
        todo.extend(c for c, parent in parents.items() if parent == p)
    return total


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--workers", default="1,2,4")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="sb-queue-bench-"))
    target = Target()
    results = []
    cpu: dict[int, dict[str, float]] = {}
    with RedisServer() as redis_server:
        env = dict(os.environ, SWITCHBOARD_BROKER=redis_server.url,
                   SWITCHBOARD_DATA_DIR=str(tmp / "data"), PYTHONUNBUFFERED="1")
        # In-process: the same flow under `switchboard run`, no broker.
        local_env = {k: v for k, v in env.items() if k != "SWITCHBOARD_BROKER"}
        port = free_port()
        csv_path = tmp / "local.csv"
        f = flow(tmp / "local.flow.json", port, target.port, csv_path)
        run = Proc(["run", str(f), "--no-history"], local_env)
        try:
            run.wait_for("listening on")
            burst(port, 20, csv_path, "warm")
            rate = burst(port, args.runs, csv_path, "local")
            lat = latencies(port, target, args.samples, "local")
        finally:
            run.stop()
        results.append(("in-process", rate, lat))
        for n in counts:
            port = free_port()
            csv_path = tmp / f"queued-{n}.csv"
            f = flow(tmp / f"queued-{n}.flow.json", port, target.port, csv_path)
            worker = Proc(["worker", "--concurrency", str(n)], env)
            serve = Proc(["serve", str(f)], env)
            try:
                worker.wait_for("switchboard worker ready")
                serve.wait_for("listening on")
                burst(port, 4 * n, csv_path, f"warm{n}")  # every pool process once
                pids = {"serve": serve.proc.pid, "worker": worker.proc.pid,
                        "redis": redis_server.proc.pid}
                before = {k: cpu_seconds(v) for k, v in pids.items()}
                rate = burst(port, args.runs, csv_path, f"q{n}")
                cpu[n] = {k: (cpu_seconds(v) - before[k]) * 1000 / args.runs
                          for k, v in pids.items()}
                lat = latencies(port, target, args.samples, f"q{n}")
            finally:
                serve.stop()
                worker.stop()
            results.append((f"queued, {n} worker process{'es' * (n > 1)}", rate, lat))
    base = statistics.median(results[0][2])
    base99 = p99(results[0][2])
    print(f"queue_mode: webhook -> http.request POST -> csv append; {args.runs} runs per burst "
          f"from {CLIENTS} clients, {args.samples} latency samples; {os.cpu_count()} CPUs")
    print(f"{'way':<28} {'runs/s':>8} {'median ms':>10} {'p99 ms':>8} {'added median':>13} "
          f"{'added p99':>10}")
    for name, rate, lat in results:
        med, top = statistics.median(lat), p99(lat)
        print(f"{name:<28} {rate:>8.1f} {med:>10.2f} {top:>8.2f} {med - base:>13.2f} "
              f"{top - base99:>10.2f}")
    print("CPU ms per queued run (burst):")
    for n, parts in cpu.items():
        print(f"  {n} worker process{'es' * (n > 1)}: " + ", ".join(
            f"{k} {v:.1f}" for k, v in parts.items()) + f", total {sum(parts.values()):.1f}")


if __name__ == "__main__":
    main()

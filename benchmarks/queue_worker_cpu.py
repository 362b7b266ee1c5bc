"""Queue mode: the worker's CPU per queued run, and how runs/s grows with
its pool processes (the goals of docs/scaling.md).

The flow and the load are benchmarks/queue_mode.py's (webhook -> http.request
POST -> csv append -> HTTP Response, served by ``switchboard serve``, run by
``switchboard worker --concurrency N``, Debian's redis-server on loopback, 8
clients). Per N it prints runs/s over a burst, the CPU time of the worker's
processes over that burst divided by its runs (the main process, which
takes tasks from Redis and hands them to the pool, and the pool processes,
which run them), serve's and Redis's, and the Redis commands per run (from
INFO commandstats: what each run's traffic is made of). Then the goals:
worker CPU per run at most 5 ms, 4 pool processes at least 1.8x one.

    .venv/bin/python benchmarks/queue_worker_cpu.py [--runs 300] [--workers 1,2,4]
        [--rounds 1] [--profile DIR]

``--profile DIR`` runs the worker under a cProfile of each pool process's
tasks (written to DIR/pool-PID.prof when the pool process ends; the
profile's cost is in the figures then, so compare only the shape). Prints
figures; never fails on a time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from queue_mode import SWITCHBOARD, Proc, Target, burst, cpu_seconds, flow  # noqa: E402

from tests.servers.redis import RedisServer, free_port  # noqa: E402

GOAL_CPU_MS = 5.0
GOAL_SCALING = 1.8

#: Run as the worker under --profile: a cProfile of every task in each pool
#: process, dumped when the pool process exits.
PROFILED_WORKER = r"""
import atexit, cProfile, os, sys
from celery import signals
out = os.environ["SB_BENCH_PROFILE"]
prof = {}

@signals.task_prerun.connect(weak=False)
def _start(**_):
    p = prof.get(os.getpid())
    if p is None:
        import time
        p = prof[os.getpid()] = cProfile.Profile(time.thread_time)
        atexit.register(lambda: p.dump_stats(os.path.join(out, f"pool-{os.getpid()}.prof")))
        @signals.worker_process_shutdown.connect(weak=False)
        def _dump(**_):
            p.dump_stats(os.path.join(out, f"pool-{os.getpid()}.prof"))
    p.enable()

@signals.task_postrun.connect(weak=False)
def _stop(**_):
    p = prof.get(os.getpid())
    if p is not None:
        p.disable()

from runtime.cli import main
sys.argv = ["switchboard", *sys.argv[1:]]
sys.exit(main())
"""


#: The floor under the goal: Celery's prefork worker with the worker's own
#: configuration (``make_app``: late acknowledgement, prefetch 1, the Redis
#: transport) running a task that does nothing but count itself in Redis
#: (one INCR, so the benchmark knows it ran). No flow, no engine, no events.
CELERY_FLOOR = r"""
import sys
from celery import signals
from runtime.queue.app import make_app
broker, concurrency = sys.argv[1], sys.argv[2]
app = make_app(broker)

@app.task(name="bench.floor_noop")
def noop(payload):
    import redis
    global _r
    try:
        r = _r
    except NameError:
        r = _r = redis.Redis.from_url(broker)
    r.incr("bench:floor:done")

@signals.worker_ready.connect(weak=False)
def ready(**_):
    print("switchboard worker ready (floor)", file=sys.stderr, flush=True)

app.worker_main(["worker", f"--concurrency={concurrency}", "--queues=bench-floor",
                 "--without-gossip", "--without-mingle", "--loglevel=WARNING"])
"""


def floor(n: int, runs: int, redis_server: RedisServer) -> dict:
    """Worker CPU per task of Celery's no-op floor with ``n`` pool processes."""
    import time

    import redis

    from runtime.queue.app import make_app

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    saved = list(SWITCHBOARD)
    SWITCHBOARD[:] = [sys.executable, "-c", CELERY_FLOOR]
    try:
        worker = Proc([redis_server.url, str(n)], env)
    finally:
        SWITCHBOARD[:] = saved
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    app = make_app(redis_server.url)

    def send(count: int) -> float:
        r.set("bench:floor:done", 0)
        start = time.perf_counter()
        for i in range(count):
            app.send_task("bench.floor_noop", args=[{"i": i}], queue="bench-floor")
        while int(r.get("bench:floor:done") or 0) < count:
            time.sleep(0.005)
        return count / (time.perf_counter() - start)

    try:
        worker.wait_for("switchboard worker ready")
        send(4 * n)
        pool = children(worker.proc.pid)
        before = _own_cpu(worker.proc.pid), sum(_own_cpu(p) for p in pool)
        rate = send(runs)
        after = _own_cpu(worker.proc.pid), sum(_own_cpu(p) for p in pool)
    finally:
        worker.stop()
    return {"rate": rate, "main": (after[0] - before[0]) * 1000 / runs,
            "pool": (after[1] - before[1]) * 1000 / runs}


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def commandstats(r) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in r.info("commandstats").items()}


def measure(n: int, runs: int, redis_server: RedisServer, target: Target, tmp: Path,
            profile: str) -> dict:
    import redis

    env = dict(os.environ, SWITCHBOARD_BROKER=redis_server.url,
               SWITCHBOARD_DATA_DIR=str(tmp / "data"), PYTHONUNBUFFERED="1")
    port = free_port()
    csv_path = tmp / f"queued-{n}-{os.urandom(3).hex()}.csv"
    f = flow(tmp / f"{csv_path.stem}.flow.json", port, target.port, csv_path)
    if profile:
        Path(profile).mkdir(parents=True, exist_ok=True)
    worker = _start_worker(n, env, profile)
    serve = Proc(["serve", str(f)], env)
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        worker.wait_for("switchboard worker ready")
        serve.wait_for("listening on")
        burst(port, 4 * n, csv_path, f"warm{n}")  # every pool process once
        pool = children(worker.proc.pid)
        before = {"main": _own_cpu(worker.proc.pid), "pool": sum(_own_cpu(p) for p in pool),
                  "serve": cpu_seconds(serve.proc.pid), "redis": cpu_seconds(redis_server.proc.pid)}
        cmds0 = commandstats(r)
        rate = burst(port, runs, csv_path, f"q{n}-{os.urandom(3).hex()}")
        cmds1 = commandstats(r)
        after = {"main": _own_cpu(worker.proc.pid),
                 "pool": sum(_own_cpu(p) for p in pool),
                 "serve": cpu_seconds(serve.proc.pid),
                 "redis": cpu_seconds(redis_server.proc.pid)}
        if sorted(children(worker.proc.pid)) != sorted(pool):
            print(f"  (pool processes changed during the burst: {pool} -> "
                  f"{children(worker.proc.pid)}; its CPU figure is short)", file=sys.stderr)
    finally:
        serve.stop()
        worker.stop()
    cpu = {k: (after[k] - before[k]) * 1000 / runs for k in before}
    cmds = {k: (v - cmds0.get(k, 0)) / runs for k, v in cmds1.items()
            if v - cmds0.get(k, 0) > 0 and k not in ("info|commandstats", "info")}
    return {"rate": rate, "cpu": cpu, "cmds": cmds}


def _own_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return 0.0


def _start_worker(n: int, env: dict[str, str], profile: str) -> Proc:
    args = ["worker", "--concurrency", str(n)]
    if not profile:
        return Proc(args, env)
    worker_env = dict(env, SB_BENCH_PROFILE=str(Path(profile).absolute()))
    saved = list(SWITCHBOARD)
    SWITCHBOARD[:] = [sys.executable, "-c", PROFILED_WORKER]
    try:
        return Proc(args, worker_env)
    finally:
        SWITCHBOARD[:] = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="sb-queue-cpu-"))
    target = Target()
    got: dict[int, list[dict]] = {n: [] for n in counts}
    floors: dict[int, list[dict]] = {n: [] for n in counts}
    with RedisServer() as redis_server:
        for _ in range(args.rounds):
            for n in counts:
                got[n].append(measure(n, args.runs, redis_server, target, tmp, args.profile))
                floors[n].append(floor(n, args.runs, redis_server))
    print(f"queue_worker_cpu: webhook -> http.request POST -> csv append; {args.runs} runs per "
          f"burst from 8 clients; {os.cpu_count()} CPUs; {args.rounds} round(s), best shown")
    print(f"{'pool processes':<15} {'runs/s':>7} {'worker ms/run':>14} {'(main':>6} "
          f"{'pool)':>6} {'serve':>6} {'redis':>6}")
    best = {}
    for n, results in got.items():
        b = best[n] = min(results, key=lambda x: x["cpu"]["main"] + x["cpu"]["pool"])
        rate = max(x["rate"] for x in results)
        b["best_rate"] = rate
        c = b["cpu"]
        print(f"{n:<15} {rate:>7.1f} {c['main'] + c['pool']:>14.2f} {c['main']:>6.2f} "
              f"{c['pool']:>6.2f} {c['serve']:>6.2f} {c['redis']:>6.2f}")
    for n, b in best.items():
        top = sorted(b["cmds"].items(), key=lambda kv: -kv[1])
        print(f"Redis commands per run, {n} pool process{'es' * (n > 1)}: "
              f"{sum(b['cmds'].values()):.1f} (" +
              ", ".join(f"{k} {v:.1f}" for k, v in top if v >= 0.05) + ")")
    print("the floor: Celery's worker, the same configuration, a task that only counts itself "
          "(one INCR)")
    for n, results in floors.items():
        b = min(results, key=lambda x: x["main"] + x["pool"])
        print(f"{n:<15} {max(x['rate'] for x in results):>7.1f} {b['main'] + b['pool']:>14.2f} "
              f"{b['main']:>6.2f} {b['pool']:>6.2f}")
    worst = max(b["cpu"]["main"] + b["cpu"]["pool"] for b in best.values())
    print(f"goal: worker CPU per run <= {GOAL_CPU_MS:g} ms: {worst:.2f} ms at most "
          f"({'met' if worst <= GOAL_CPU_MS else 'not met'})")
    if 1 in best and 4 in best:
        ratio = best[4]["best_rate"] / best[1]["best_rate"]
        print(f"goal: 4 pool processes >= {GOAL_SCALING:g}x one: {ratio:.2f}x "
              f"({'met' if ratio >= GOAL_SCALING else 'not met'})")


if __name__ == "__main__":
    main()

"""The queue commands of the CLI: ``worker``, ``submit``, ``serve``,
``queue status|dead-letters`` and ``runs cancel``. runtime.cli declares them
through ``add_parsers`` and hands what they share with ``run`` (loading a
flow, ``--set``, exit codes) to ``main``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from . import (
    BROKER_ENV,
    DEFAULT_BROKER,
    DEFAULT_MAX_TRIES,
    DEFAULT_QUEUE,
    SHARED_HISTORY_ENV,
    QueueError,
    check_installed,
    require_broker,
)

COMMANDS = ("worker", "submit", "serve", "queue")
BROKER_HELP = f"the Redis broker, e.g. {DEFAULT_BROKER} (default: ${BROKER_ENV})"
#: Highest --max-tries accepted.
MAX_TRIES_LIMIT = 100


def add_parsers(sub: Any, parser_class: type) -> None:
    w = sub.add_parser("worker", help="run queued flows (a Celery worker; queue mode)")
    w.add_argument("--broker", help=BROKER_HELP)
    w.add_argument("--concurrency", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="runs at once, one process each (default: the number of CPUs)")
    w.add_argument("--queues", default=DEFAULT_QUEUE, metavar="Q1,Q2",
                   help=f"the queues to take runs from (default: {DEFAULT_QUEUE})")
    w.add_argument("--visibility-timeout", type=float, metavar="S",
                   help="seconds before a run taken by a worker that vanished (its machine) "
                        "goes back to the queue (default: 300)")
    w.add_argument("--history", metavar="PATH",
                   help="record every run this worker executes in the history database PATH, "
                        "shared with other workers on this machine or volume (default: "
                        f"${SHARED_HISTORY_ENV}; none if unset)")

    s = sub.add_parser("submit", help="queue a run of a flow on the workers; prints its id")
    s.add_argument("flow")
    s.add_argument("--wait", action="store_true",
                   help="follow the run: its debug output as `run` prints it, its exit code")
    s.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override a param with a fixed value (JSON if it parses, else text)")
    s.add_argument("--timeout", type=float, metavar="S", help="stop the run after S seconds")
    _shared(s, DEFAULT_QUEUE, DEFAULT_MAX_TRIES)
    s.add_argument("--trace", action="store_true", help="record every message hop")
    s.add_argument("--max-in-flight", type=int, metavar="N",
                   help="fail the run as a message storm past N messages in flight")

    v = sub.add_parser("serve", help="host the flows' triggers (webhooks, schedules, folder "
                                     "watches) and queue a run on the workers per event")
    v.add_argument("flows", nargs="+", metavar="FLOW")
    v.add_argument("--timeout", type=float, metavar="S", help="stop serving after S seconds")
    v.add_argument("--run-timeout", type=float, metavar="S",
                   help="stop each queued run after S seconds")
    _shared(v, DEFAULT_QUEUE, DEFAULT_MAX_TRIES)

    q = sub.add_parser("queue", help="queue mode: the workers, the queued and running runs, "
                                     "the dead letters")
    qs = q.add_subparsers(dest="queue_command", required=True, parser_class=parser_class)
    st = qs.add_parser("status", help="workers and their load, queued and running runs")
    st.add_argument("--broker", help=BROKER_HELP)
    st.add_argument("--json", action="store_true", help="one JSON object")
    dl = qs.add_parser("dead-letters", help="runs that failed at start on every try")
    dl.add_argument("--broker", help=BROKER_HELP)
    dl.add_argument("--json", action="store_true", help="one JSON array")
    dl.add_argument("--clear", action="store_true", help="empty the list")


def add_cancel_parser(runs_sub: Any) -> None:
    """``runs cancel ID``, in the ``runs`` group."""
    c = runs_sub.add_parser("cancel", help="stop a queued run wherever it runs, or keep it "
                                           "from starting (queue mode)")
    c.add_argument("id", help="the run's id, as submit or serve printed it")
    c.add_argument("--broker", help=BROKER_HELP)


def _shared(p: argparse.ArgumentParser, queue: str, tries: int) -> None:
    p.add_argument("--broker", help=BROKER_HELP)
    p.add_argument("--queue", default=queue, help=f"the queue to put runs on (default: {queue})")
    p.add_argument("--max-tries", type=int, default=tries, metavar="N",
                   help=f"tries of a run that fails at start (or loses its worker) before it "
                        f"goes to the dead-letter list (default: {tries})")
    p.add_argument("--no-history", action="store_true",
                   help="do not record the runs in this machine's history")
    p.add_argument("--approve", choices=["deny", "auto"], default="deny",
                   help="tool calls that need approval on a worker, where no one can be asked: "
                        "deny them (the default) or approve them all")


class Helpers:
    """What the queue commands borrow from runtime.cli (which sits above
    this package): loading a flow, ``--set``, exit codes, usage errors."""

    def __init__(self, load: Callable[..., Any], apply_sets: Callable[..., None],
                 exit_code: Callable[..., int], usage_error: type[Exception]) -> None:
        self.load = load
        self.apply_sets = apply_sets
        self.exit_code = exit_code
        self.usage_error = usage_error


def main(args: argparse.Namespace, helpers: Helpers) -> int:
    try:
        if args.command == "runs":
            return _cancel(args)
        handler = {"worker": _worker, "submit": _submit, "serve": _serve,
                   "queue": _queue}[args.command]
        return handler(args, helpers)
    except QueueError as exc:
        raise helpers.usage_error(str(exc)) from None
    except _broker_errors() as exc:
        print(f"switchboard: cannot reach the broker: {exc}", file=sys.stderr)
        return 1


def _broker_errors() -> tuple[type[BaseException], ...]:
    try:
        import kombu.exceptions
        import redis.exceptions
    except ImportError:
        return ()
    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            kombu.exceptions.OperationalError)


def _connect(args: argparse.Namespace) -> tuple[str, Any]:
    url = require_broker(getattr(args, "broker", None))
    check_installed()
    from . import state

    r = state.client(url)
    r.ping()
    return url, r


def _check_tries(args: argparse.Namespace) -> None:
    if not 1 <= args.max_tries <= MAX_TRIES_LIMIT:
        raise QueueError(f"--max-tries {args.max_tries}: must be 1 to {MAX_TRIES_LIMIT}")


# -- worker ------------------------------------------------------------------------------

def _worker(args: argparse.Namespace, helpers: Helpers) -> int:
    if args.concurrency < 1:
        raise QueueError(f"--concurrency {args.concurrency}: must be at least 1")
    if args.visibility_timeout is not None and args.visibility_timeout < 1:
        raise QueueError(f"--visibility-timeout {args.visibility_timeout:g}: must be at "
                         "least 1 second")
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    if not queues:
        raise QueueError("--queues: name at least one queue")
    url, _r = _connect(args)
    history = _shared_history(args.history)
    from .app import run_worker

    return run_worker(url, concurrency=args.concurrency, queues=queues,
                      visibility=args.visibility_timeout, verbose=args.verbose,
                      history=str(history or ""))


def _shared_history(given: str | None) -> Any:
    """The worker's shared history, created (or checked) before its pool
    processes fork, which find it in the environment; None: none."""
    import sqlite3

    from .shared import prepare, shared_path

    path = shared_path(given)
    if path is None:
        return None
    where = "--history" if given else f"${SHARED_HISTORY_ENV}"
    try:
        warning = prepare(path)
    except (OSError, sqlite3.Error) as exc:
        raise QueueError(f"{where} {path}: cannot open it as a run history: {exc}") from None
    if warning:
        print(f"switchboard: warning: {warning}", file=sys.stderr)
    os.environ[SHARED_HISTORY_ENV] = str(path)
    return path


# -- submit -------------------------------------------------------------------------------

def _submit(args: argparse.Namespace, helpers: Helpers) -> int:
    from ..flow import validate_flow

    _check_tries(args)
    if args.timeout is not None and not args.timeout > 0:
        raise QueueError(f"--timeout {args.timeout:g}: must be more than 0 seconds")
    flow = helpers.load(args.flow, validate=False)
    helpers.apply_sets(flow, args.set, args.flow)
    errors = [p for p in validate_flow(flow, file=args.flow) if p.severity == "error"]
    if errors:
        for problem in errors:
            print(str(problem), file=sys.stderr)
        return 2
    url, r = _connect(args)
    from .app import make_app
    from .submit import enqueue, payload_for

    payload = payload_for(flow, args.flow, timeout=args.timeout, trace=args.trace,
                          max_in_flight=args.max_in_flight, max_tries=args.max_tries,
                          approve=args.approve)
    run_id = enqueue(make_app(url), r, payload, queue=args.queue)
    print(run_id, flush=True)
    if not args.wait:
        if not args.no_history:
            _record_queued(run_id, flow.name, args.flow, payload["submitted"])
        return 0
    return _follow(r, run_id, args, helpers, _names(flow))


def _record_queued(run_id: str, flow_name: str, file: str, submitted: float) -> None:
    """A run not followed here is listed in this machine's history as
    queued; its events are kept where it runs (the workers' shared history)."""
    from pathlib import Path

    from ..history import History

    try:
        with History() as history:
            history.add_queued(run_id, flow_name, str(Path(file).absolute()), submitted)
    except Exception as exc:  # noqa: BLE001 - the run is queued all the same
        print(f"switchboard: run history unavailable: {exc}", file=sys.stderr)


def _names(flow: Any) -> dict[str, str]:
    from ..registry import Registry

    registry = Registry.default()
    return {n.id: n.name or ((s := registry.spec(n.type)) and s.name) or n.id
            for n in flow.nodes}


def _follow(r: Any, run_id: str, args: argparse.Namespace, helpers: Helpers,
            names: dict[str, str]) -> int:
    """``submit --wait``: the run's output as ``switchboard run`` prints it,
    recorded in this machine's history; Ctrl+C stops waiting, not the run."""
    from .submit import HistorySink, wait

    sink = None
    history = None
    if not args.no_history:
        from pathlib import Path

        from ..history import History

        try:
            history = History()
            sink = HistorySink(history, str(Path(args.flow).absolute()))
        except Exception as exc:  # noqa: BLE001 - a run must not fail for want of its record
            print(f"switchboard: run history unavailable: {exc}", file=sys.stderr)
    printer = _printer(names)
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        def on_event(event: Any) -> None:
            printer(event)
            if sink is not None:
                sink(event)

        entry = wait(r, run_id, on_event, stop=interrupted.is_set)
    finally:
        signal.signal(signal.SIGINT, previous)
        if sink is not None:
            sink.close()
        if history is not None:
            history.prune()
            history.close()
    if entry is None:
        print(f"switchboard: stopped waiting; run {run_id} goes on (`switchboard runs cancel "
              f"{run_id}` stops it)", file=sys.stderr)
        return 130
    if entry.get("message"):
        print(f"switchboard: {entry['message']}", file=sys.stderr)
    return helpers.exit_code(entry.get("reason", "failed"), entry.get("in_flight") or {},
                             int(entry.get("errors") or 0), None)


def _printer(names: dict[str, str]) -> Callable[[Any], None]:
    """Debug output on stdout as JSON lines, node errors and logs on stderr:
    what ``switchboard run`` prints for a local run."""
    def who(node_id: str, name: str = "") -> str:
        name = name or names.get(node_id, "")
        return f"'{name}' ({node_id})" if name and name != node_id else f"'{node_id}'"

    def show(event: Any) -> None:
        if event.type == "debug":
            sys.stdout.write(json.dumps({"node": event.node, "name": event.name,
                                         "value": event.value},
                                        ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
        elif event.type == "node.error":
            kind = "handled" if event.caught else "error"
            print(f"{kind}: node {who(event.node, event.name)}: {event.message}",
                  file=sys.stderr)
        elif event.type == "log" and event.level != "debug":
            prefix = "" if event.level == "info" else f"{event.level}: "
            where = f"node {who(event.node)}: " if event.node else ""
            print(f"{prefix}{where}{event.text}", file=sys.stderr)

    return show


# -- serve ----------------------------------------------------------------------------------

def _serve(args: argparse.Namespace, helpers: Helpers) -> int:
    import asyncio

    _check_tries(args)
    for name, value in (("--timeout", args.timeout), ("--run-timeout", args.run_timeout)):
        if value is not None and not value > 0:
            raise QueueError(f"{name} {value:g}: must be more than 0 seconds")
    flows = [(helpers.load(path), path) for path in args.flows]
    from .serve import TriggerServer, check_flows

    check_flows(flows)
    url, r = _connect(args)
    from .app import make_app

    server = TriggerServer(flows, make_app(url), r, queue=args.queue,
                           history=not args.no_history,
                           options={"timeout": args.run_timeout, "max_tries": args.max_tries,
                                    "approve": args.approve})

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, server.stop)
        await server.run(args.timeout)

    try:
        asyncio.run(serve())
    finally:
        server.close(wait=2.0)
    server.say(f"stopped: {server.queued} runs queued, {server.finished} followed to their end")
    return 0


# -- queue status, dead letters, cancel ------------------------------------------------------

def _queue(args: argparse.Namespace, helpers: Helpers) -> int:
    url, r = _connect(args)
    from . import state

    if args.queue_command == "dead-letters":
        letters = state.dead_letters(r)
        if args.clear:
            r.delete(state.DEAD_LETTERS)
        if args.json:
            print(json.dumps([{k: v for k, v in d.items() if k != "payload"} for d in letters],
                             indent=2, ensure_ascii=False))
        elif not letters:
            print("no dead letters")
        for d in [] if args.json else letters:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.get("ts", 0)))
            print(f"{d.get('id')}  {when}  {d.get('flow', '')}  after {d.get('tries')} tries: "
                  f"{d.get('error', '')}")
        if args.clear:
            print(f"cleared {len(letters)} dead letter{'s' * (len(letters) != 1)}",
                  file=sys.stderr)
        return 0
    from .status import snapshot

    snap = snapshot(url, r)
    if args.json:
        print(json.dumps(snap, indent=2, ensure_ascii=False, default=str))
        return 0
    print(f"workers: {len(snap['workers'])}")
    for w in snap["workers"]:
        print(f"  {w['name']}  {w['active']}/{w['concurrency']} busy  {w['done']} runs taken")
    print(f"queued: {snap['queued']}  running: {snap['running']}  "
          f"dead letters: {snap['dead_letters']}")
    for run in snap["runs"][:20]:
        print(f"  {run['id']}  {run.get('state', '')}  {run.get('flow', '')}  "
              f"{run.get('worker', '')}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    url, r = _connect(args)
    from . import state

    rec = state.cancel(r, args.id, f"by {state.worker_name()}")
    if not rec:
        raise QueueError(f"runs cancel {args.id}: no such queued run (ids are kept for a day "
                         "after a run ends)")
    if rec.get("state") in state.FINAL_STATES:
        print(f"run {args.id} is already {rec['state']}", file=sys.stderr)
        return 0
    print(f"cancelling run {args.id} ({rec.get('state')})", file=sys.stderr)
    return 0

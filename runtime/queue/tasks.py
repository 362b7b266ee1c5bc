"""The worker's side: one queued run, from its task message to its final
entry (Celery and redis-py come in through the task and its app; this
module imports neither).

A delivery of a run's task goes through these steps:

1. A run already final (a duplicate delivery) is dropped.
2. The worker takes the run's lease (runtime.queue.state). If another live
   worker holds it (a redelivery while the first still runs), the task is
   put back for later and looks again (a cancel is that worker's to carry
   out); a lease left by a dead process on this host is taken over at once,
   a remote one once it expires. A run cancelled before it started ends
   here as cancelled.
3. The attempt is counted; past ``max_tries`` the run goes to the dead-letter
   list instead of running.
4. The flow travels in the message (content and hash, never a path): it is
   checked against its hash, loaded and validated here, with this worker's
   node packages. Secrets are resolved here too, from this worker's
   environment or keyring, as in any run.
5. The run goes as ``switchboard run`` would, its events to the run's stream
   (and to the shared history when the worker keeps one: runtime.queue.shared),
   the effects ledger set for its nodes, its lease renewed and its cancel
   flag watched by a thread. A run that failed at start (the flow does not
   load here, a node's start failed) goes back to the queue with a growing
   delay, up to max_tries, then to the dead-letter list.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from typing import Any

from ..events import EventBus, NodeError, RunFinished, RunStarted
from . import DEFAULT_MAX_TRIES, MAX_REPLY_BYTES, WEBHOOK_PENDING, WEBHOOK_REQUEST, state
from .events import FINAL, PerProcess, StreamPublisher
from .shared import RunOutput, worker_history

log = logging.getLogger(__name__)

#: Seconds past a run's deadline, or its cancel, before the worker ends it
#: regardless (a node keeping the event loop busy ignores both).
HARD_STOP_GRACE = 5.0
#: Seconds a lease lives without renewal: how long a run of a worker that
#: vanished (a machine, not a process) waits before another takes it over.
LEASE_TTL = 15.0
#: Seconds between looks at the cancel flag (and lease renewals: every
#: LEASE_TTL / 3).
CANCEL_POLL = 0.2
#: Seconds before a redelivered task looks again at a lease held by a live worker.
LEASE_WAIT = 5.0
#: Seconds before a run that failed at start is tried again: times 2 per try.
RETRY_BASE = 1.0
RETRY_MAX = 60.0


#: Hashes of the flows this worker process has validated (a flow served by
#: ``serve`` comes again with every event), at most VALID_CACHE.
_VALID: set[str] = set()
VALID_CACHE = 256


class _Retry(Exception):  # noqa: N818 - a signal to the task, not an error
    """Put the task back in the queue after ``countdown`` seconds."""

    def __init__(self, countdown: float) -> None:
        super().__init__(countdown)
        self.countdown = countdown


class StartFailed(Exception):
    """The run could not start on this worker (what a retry may fix)."""


def execute(r: Any, payload: dict[str, Any], *, retry: Any, node: str = "") -> dict[str, Any]:
    """Run one delivery of a queued run; ``retry(countdown)`` raises the
    task's retry; ``node``: the worker's name as Celery knows it
    (``switchboard-PID@host``, as ``queue status`` lists the workers), which
    the run's record, its events and the histories name it by. Returns the
    run's summary (the task's result)."""
    run_id = str(payload["run_id"])
    pipe = r.pipeline(transaction=False)
    pipe.hgetall(state.run_key(run_id))
    pipe.get(state.run_key(run_id, "cancel"))
    rec, by = pipe.execute()
    if rec.get("state") in state.FINAL_STATES:
        return {"run_id": run_id, "skipped": f"already {rec['state']}"}
    pub = RunOutput(StreamPublisher(r, run_id), node or state.worker_name(), worker_history())
    try:
        return _deliver(r, run_id, payload, pub, rec, by)
    except _Retry as again:
        pub.close()
        raise retry(again.countdown) from None
    finally:
        pub.close()


def _deliver(r: Any, run_id: str, payload: dict[str, Any], pub: RunOutput,
             rec: dict[str, str], by: str | None) -> dict:
    worker = state.worker_name()  # the lease's holder: this process
    name = pub.worker  # the worker, as people see it
    previous = state.take_lease(r, run_id, worker, LEASE_TTL)
    if previous is None:
        # A live worker runs it (this is a redelivery, e.g. past the
        # visibility timeout): look again later, even if it was cancelled,
        # since that worker is the one to end it.
        raise _Retry(LEASE_WAIT)
    if by is not None:
        return _end_early(r, run_id, payload, pub, "cancelled",
                          f"cancelled before it started ({by})", "interrupted")
    pipe = r.pipeline(transaction=False)
    pipe.hincrby(state.run_key(run_id), "attempts", 1)
    state.update(pipe, run_id, state="running", worker=name, started=time.time())
    attempts = int(pipe.execute()[0])
    tries = int(payload.get("max_tries") or DEFAULT_MAX_TRIES)
    last_error = rec.get("error", "")
    if attempts > tries:
        why = f"dead-lettered after {tries} tries" + (f": {last_error}" if last_error else
                                                      " (its worker was lost each time)")
        state.dead_letter(r, run_id, {"flow": payload.get("name", ""), "tries": tries,
                                      "error": last_error or "worker lost", "payload": payload})
        return _end_early(r, run_id, payload, pub, "dead", why, "failed")
    if attempts > 1:
        cause = "its last attempt failed at start" if last_error and not previous \
            else "the worker of its last attempt was lost"
        pub.entry("queue.attempt", run_id=run_id, attempt=attempts, worker=name,
                  text=f"attempt {attempts} of {tries} on {name} ({cause})")
    try:
        result, cancelled_by = _run(r, run_id, payload, pub, worker, attempts)
    except StartFailed as exc:
        text = str(exc)
        if attempts >= tries:
            state.update(r, run_id, error=text)
            state.dead_letter(r, run_id, {"flow": payload.get("name", ""), "tries": tries,
                                          "error": text, "payload": payload})
            return _end_early(r, run_id, payload, pub, "dead",
                              f"dead-lettered after {tries} tries: {text}", "failed")
        delay = min(RETRY_MAX, RETRY_BASE * 2 ** (attempts - 1))
        pub.entry("queue.retry", run_id=run_id, attempt=attempts, level="warning",
                  text=f"failed at start on {name}: {text}; queued again in {delay:g} s "
                       f"(try {attempts} of {tries})")
        state.update(r, run_id, state="queued", error=text)
        r.delete(state.run_key(run_id, "lease"))
        raise _Retry(delay) from None
    summary = {"run_id": run_id, "status": result.status, "reason": result.reason,
               "errors": result.errors, "in_flight": result.in_flight,
               "message": result.message, "duration_ms": result.duration_ms,
               "attempts": attempts, "worker": name}
    pub.entry(FINAL, **summary)
    pub.close()
    state.final(r, run_id, "cancelled" if cancelled_by else "finished", status=result.status,
                reason=result.reason, errors=result.errors)
    return summary


def _end_early(r: Any, run_id: str, payload: dict, pub: RunOutput, final_state: str,
               why: str, reason: str) -> dict:
    """A run that ends without running (cancelled, dead-lettered): a
    run.started (readers keep a run's first), run.finished and final entry,
    so a watcher and the history see it end like any run."""
    pub(RunStarted(run_id=run_id, flow=_flow_name(payload), path=payload.get("name", ""),
                   nodes=len(payload.get("flow", {}).get("nodes", []))))
    pub(RunFinished(run_id=run_id, status="stopped" if reason == "interrupted" else "error",
                    reason=reason, message=why, errors=0 if reason == "interrupted" else 1))
    summary = {"run_id": run_id, "status": final_state, "reason": reason, "message": why,
               "errors": 0 if reason == "interrupted" else 1, "in_flight": {}}
    pub.entry(FINAL, **summary)
    pub.close()
    state.final(r, run_id, final_state, status=summary["status"], reason=reason, error=why)
    return summary


def _flow_name(payload: dict) -> str:
    flow = payload.get("flow")
    return str(flow.get("name", "")) if isinstance(flow, dict) else ""


def _load(payload: dict) -> Any:
    """The flow the message carries, checked against its hash and validated
    with this worker's nodes; StartFailed says why not."""
    from ..engine import flow_hash
    from ..flow import FlowError, parse_flow, validate_flow
    from ..registry import Registry

    data = payload.get("flow")
    name = str(payload.get("name") or "flow")
    if not isinstance(data, dict) or flow_hash(data) != payload.get("hash"):
        raise StartFailed(f"{name}: the flow's content does not match its hash "
                          "(damaged on the way)")
    try:
        flow = parse_flow(data, file=name)
    except FlowError as exc:
        raise StartFailed("; ".join(str(p) for p in exc.problems[:5])) from None
    digest = payload["hash"]
    if digest in _VALID:
        return flow  # this process validated the same flow already
    errors = [p for p in validate_flow(flow, Registry.default(), file=name)
              if p.severity == "error"]
    if errors:
        raise StartFailed("; ".join(str(p) for p in errors[:5]))
    if len(_VALID) >= VALID_CACHE:
        _VALID.clear()
    _VALID.add(digest)
    return flow


def _run(r: Any, run_id: str, payload: dict, pub: RunOutput,
         worker: str, attempt: int = 1) -> tuple[Any, str | None]:
    from ..approval import People, approver_for
    from ..effects import LEDGER
    from ..engine import Engine
    from ..flow import FlowError
    from ..message import Message
    from ..registry import Registry
    from .ledger import RedisLedger

    flow = _load(payload)
    bus = EventBus()
    start_errors: list[str] = []
    engine_box: list[Any] = []

    def watch_start(event: Any) -> None:
        # Node errors before every node has started: the run failed at start.
        if isinstance(event, NodeError) and engine_box and not engine_box[0].started.is_set():
            start_errors.append(f"node '{event.node}': {event.message}")

    bus.subscribe(pub)
    bus.subscribe(watch_start)
    name = str(payload.get("name") or "flow")
    try:
        engine = Engine(flow, Registry.default(), bus, trace=bool(payload.get("trace")),
                        record=True, file=name, max_in_flight=payload.get("max_in_flight"),
                        validated=True)
    except FlowError as exc:
        raise StartFailed("; ".join(str(p) for p in exc.problems[:5])) from None
    engine_box.append(engine)
    engine.run_id = run_id  # the queue's id: the same on the submitting machine and here
    engine.people = People(approver_for(payload.get("approve") or "deny"))  # type: ignore[attr-defined]
    trigger = payload.get("trigger")
    if isinstance(trigger, dict) and trigger.get("node") in engine.nodes:
        node_id, port = trigger["node"], trigger.get("port") or "out"

        async def fire(eng: Any) -> None:
            eng.nodes[node_id].send(Message(trigger.get("msg") or {}), port)

        engine.entry = fire
        request = (trigger.get("msg") or {}).get(WEBHOOK_REQUEST)
        if isinstance(request, str):
            # The flow answers its webhook request (an HTTP Response node):
            # the answer goes back through the stream to serve, which holds
            # the request open.
            engine.resource(WEBHOOK_PENDING, dict)[request] = _ReplyRelay(pub, run_id, request)
    timeout = payload.get("timeout")
    token = LEDGER.set(RedisLedger(r, run_id, first=attempt == 1))
    watch = _Watch(r, run_id, worker, engine, pub)
    try:
        result = asyncio.run(watch.run(float(timeout) if timeout else None))
    finally:
        watch.close()
        LEDGER.reset(token)
    if result.reason == "failed" and start_errors and not watch.cancelled_by:
        raise StartFailed("; ".join(start_errors[:5]))
    return result, watch.cancelled_by


class _ReplyRelay:
    """Stands for a waiting webhook request on the worker: what the HTTP
    Response node sets as its answer goes to the run's stream as a
    ``queue.reply`` entry, for serve to write to the request it holds."""

    def __init__(self, pub: RunOutput, run_id: str, request: str) -> None:
        self.pub = pub
        self.run_id = run_id
        self.request = request
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, reply: Any) -> None:
        import base64

        self._done = True
        status, headers, body = reply.status, list(reply.headers), bytes(reply.body)
        if len(body) > MAX_REPLY_BYTES:
            status, headers = 502, []
            body = f"the flow's answer is larger than {MAX_REPLY_BYTES} bytes".encode()
        self.pub.entry("queue.reply", run_id=self.run_id, request=self.request, status=status,
                       headers=headers, body=base64.b64encode(body).decode())


class _Watch:
    """Beside the run, in the process's watch thread (``_Watcher``): renews
    its lease, stops the run when its cancel flag is set (``switchboard runs
    cancel``, from any machine), and ends it regardless when it has not
    stopped HARD_STOP_GRACE seconds past its deadline or its cancel (a node
    keeping the event loop busy): then it publishes the run's end itself and
    exits the pool process, which Celery replaces; the task it puts back
    finds the run final and is dropped."""

    def __init__(self, r: Any, run_id: str, worker: str, engine: Any,
                 pub: RunOutput) -> None:
        self.r = r
        self.run_id = run_id
        self.worker = worker
        self.engine = engine
        self.pub = pub
        self.cancelled_by: str | None = None
        self._loop_thread: int | None = None
        self._hard_at = 0.0
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._renew_at = 0.0

    async def run(self, timeout: float | None) -> Any:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if timeout is not None:
            self._hard_at = time.monotonic() + timeout + HARD_STOP_GRACE
        self._renew_at = time.monotonic() + LEASE_TTL / 3
        _Watcher.of_this_process().add(self)
        return await self.engine.run(timeout)

    def close(self) -> None:
        self._stop.set()
        _Watcher.of_this_process().remove(self)

    def tick(self) -> None:
        """One look (every CANCEL_POLL seconds while the run runs)."""
        if self._stop.is_set():
            return
        if self._hard_at and time.monotonic() >= self._hard_at:
            self._hard_stop()
        try:
            by = state.cancelled(self.r, self.run_id)
            if by is not None and self.cancelled_by is None:
                self.cancelled_by = by
                self._hard_at = min(self._hard_at or math.inf,
                                    time.monotonic() + HARD_STOP_GRACE)
                loop = self._loop
                if loop is not None and not loop.is_closed():
                    loop.call_soon_threadsafe(self.engine.stop, f"cancelled ({by})")
            if time.monotonic() >= self._renew_at:
                self._renew_at = time.monotonic() + LEASE_TTL / 3
                if not state.renew_lease(self.r, self.run_id, self.worker, LEASE_TTL):
                    log.warning("run %s: lost its lease", self.run_id)
        except Exception as exc:  # noqa: BLE001 - Redis away for a moment: the run goes on
            log.warning("run %s: watching its cancel flag: %s", self.run_id, exc)

    def _hard_stop(self) -> None:
        from ..engine import STATUS_OF_REASON, busy_node

        if self._stop.is_set():
            return  # the run ended meanwhile
        engine = self.engine
        reason = "interrupted" if self.cancelled_by else "timeout"
        in_flight = dict(engine.in_flight())
        stuck = busy_node(engine, self._loop_thread)
        if stuck:
            in_flight[stuck] = in_flight.get(stuck, 0) + 1
        message = ("the run did not stop on time: "
                   f"{f'node {stuck!r}' if stuck else 'a node'} kept the worker's event loop busy")
        summary = {"run_id": self.run_id, "status": STATUS_OF_REASON[reason], "reason": reason,
                   "errors": engine.uncaught, "in_flight": in_flight, "message": message,
                   "duration_ms": engine.elapsed_ms(), "worker": self.pub.worker}
        try:
            self.pub(RunFinished(run_id=self.run_id, status=summary["status"], reason=reason,
                                 message=message, in_flight=in_flight, errors=engine.uncaught,
                                 duration_ms=summary["duration_ms"]))
            self.pub.entry(FINAL, **summary)
            self.pub.close()
            state.final(self.r, self.run_id, "cancelled" if self.cancelled_by else "finished",
                        status=summary["status"], reason=reason, error=message)
        finally:
            log.error("run %s: %s; ending this pool process", self.run_id, message)
            os._exit(1)


class _Watcher(PerProcess):
    """The watch thread of a process: every CANCEL_POLL seconds it looks
    after each run the process has running (``_Watch.tick``), and sleeps
    while there is none. One thread for all runs of a pool process, rather
    than one started and joined per run."""

    def __init__(self) -> None:
        super().__init__()
        self._watches: list[_Watch] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="switchboard-run-watch",
                                        daemon=True)
        self._thread.start()

    def add(self, watch: _Watch) -> None:
        with self._cond:
            self._watches.append(watch)
            self._cond.notify()

    def remove(self, watch: _Watch) -> None:
        with self._cond:
            if watch in self._watches:
                self._watches.remove(watch)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._watches:
                    self._cond.wait()
            time.sleep(CANCEL_POLL)
            with self._cond:
                watches = list(self._watches)
            for watch in watches:
                watch.tick()

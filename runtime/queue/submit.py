"""The submitting side: a run's task message, queuing it, following it.

The message carries the flow's content and its hash (never a path on this
machine: the worker may have no such file) and what the run needs besides:
its timeout, the trigger event that started it (``serve``), how many tries it
gets. No secret goes in: a flow names its secrets (an environment variable,
a keyring entry) and the worker resolves them in its own environment."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events import Event, RunStarted
from . import DEFAULT_MAX_TRIES, DEFAULT_QUEUE, state
from .app import TASK_NAME
from .events import follow

#: Seconds past a run's own timeout before Celery ends its task regardless
#: (a node that keeps the worker's event loop busy).
HARD_LIMIT_GRACE = 60.0


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def payload_for(flow: Any, name: str, *, timeout: float | None = None,
                trigger: dict[str, Any] | None = None, trace: bool = False,
                max_in_flight: int | None = None, max_tries: int = DEFAULT_MAX_TRIES,
                approve: str = "deny", run_id: str | None = None,
                flow_json: dict | None = None, flow_digest: str = "") -> dict[str, Any]:
    """The task message of one run. ``flow_json``/``flow_digest``: the
    flow's JSON and hash when the caller has them already (``serve`` queues
    the same flow for every event)."""
    from ..engine import flow_hash

    data = flow_json if flow_json is not None else flow.to_json()
    return {"run_id": run_id or new_run_id(), "flow": data,
            "hash": flow_digest or flow_hash(data), "name": Path(name).name, "timeout": timeout,
            "trigger": trigger, "trace": trace, "max_in_flight": max_in_flight,
            "max_tries": max_tries, "approve": approve, "submitted": time.time()}


def enqueue(app: Any, r: Any, payload: dict[str, Any], *, queue: str = DEFAULT_QUEUE) -> str:
    """Queue the run; its id. Its record goes first, so a worker that takes
    it at once finds it."""
    run_id = payload["run_id"]
    state.queued(r, run_id, {"flow": payload["flow"].get("name", ""), "file": payload["name"],
                             "queue": queue, "max_tries": payload["max_tries"],
                             "hash": payload["hash"]}, flow=payload["flow"])
    timeout = payload.get("timeout")
    # No Celery result is written (the app's task_ignore_result), so none is
    # waited for either: without this, Celery subscribes to the task's
    # result channel on every send (serve: one SUBSCRIBE per queued run).
    options: dict[str, Any] = {"ignore_result": True}
    if timeout:
        options["time_limit"] = float(timeout) + HARD_LIMIT_GRACE
    app.send_task(TASK_NAME, args=[payload], task_id=run_id, queue=queue, **options)
    return run_id


def wait(r: Any, run_id: str, on_event: Callable[[Event], None], *,
         stop: Callable[[], bool] | None = None) -> dict | None:
    """Follow the run's stream, handing each event to ``on_event``, until
    its final entry (returned), or None if ``stop()`` said so first."""
    for event, entry in follow(r, run_id, stop=stop):
        if event is not None:
            on_event(event)
        if entry is not None and entry.get("type") == "queue.final":
            return entry
    return None


class HistorySink:
    """Records a queued run in this machine's history as it arrives: the
    run's first run.started (an attempt after a lost worker sends another,
    which is dropped here so the record keeps every attempt's events in
    order), with the path of the file it was submitted from."""

    def __init__(self, history: Any, path: str = "") -> None:
        self.history = history
        self.recorder = history.recorder()
        self.path = path
        self._started = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            if self._started:
                return
            self._started = True
            if self.path:
                event = event.model_copy(update={"path": self.path})
        self.recorder(event)
        if event.type == "stats":
            self.recorder.flush()

    def close(self) -> None:
        self.recorder.close()

"""The Celery app of queue mode: Redis as broker and result store, and the
delivery settings the guarantees of docs/queue.md rest on.

- ``task_acks_late``: a task is acknowledged when its run ends, not when a
  worker takes it, so a run whose worker dies is not lost;
- ``task_reject_on_worker_lost``: a pool process killed mid-run puts its
  task back in the queue at once (another worker runs it);
- ``worker_prefetch_multiplier=1``: a worker holds no more tasks than it
  runs, so a killed worker strands none, and a busy one leaves work to idle
  ones;
- ``task_ignore_result``: a run's outcome is kept in its record and its
  stream's final entry (runtime.queue.state, runtime.queue.events), which is
  what every reader looks at; Celery's own result (a SETEX and a PUBLISH per
  run, read by nobody) is not written;
- the Redis transport's ``visibility_timeout``: a task taken by a worker
  that vanished whole (its machine) goes back to the queue after it; a run
  still running then is guarded by its lease (runtime.queue.tasks).

Importing this module imports nothing heavy; ``make_app`` imports Celery."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from . import DEFAULT_QUEUE, check_installed, state

TASK_NAME = "switchboard.run_flow"
#: Seconds before a task taken by a vanished worker goes back to the queue.
DEFAULT_VISIBILITY_TIMEOUT = 300.0
VISIBILITY_ENV = "SWITCHBOARD_VISIBILITY_TIMEOUT"

log = logging.getLogger(__name__)


def visibility_timeout(given: float | None = None) -> float:
    if given is not None:
        return given
    raw = os.environ.get(VISIBILITY_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_VISIBILITY_TIMEOUT
    except ValueError:
        return DEFAULT_VISIBILITY_TIMEOUT


def make_app(broker: str, *, visibility: float | None = None) -> Any:
    check_installed()
    from celery import Celery

    vt = visibility_timeout(visibility)
    app = Celery("switchboard", broker=broker, backend=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_ignore_result=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_default_queue=DEFAULT_QUEUE,
        result_expires=state.RUN_TTL,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": vt,
            # Look for abandoned tasks often enough for the timeout to mean it.
            "unacked_restore_interval": max(1.0, min(10.0, vt / 3)),
            "unacked_restore_throttle": 1,
        },
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        worker_send_task_events=False,
    )

    @app.task(name=TASK_NAME, bind=True, max_retries=None)
    def run_flow(self: Any, payload: dict) -> dict:
        from .tasks import execute

        def retry(countdown: float) -> Any:
            return self.retry(countdown=countdown, max_retries=None)

        return execute(state.client(broker), payload, retry=retry,
                       node=str(getattr(self.request, "hostname", "") or ""))

    return app


def run_worker(broker: str, *, concurrency: int, queues: list[str], visibility: float | None,
               verbose: bool = False, history: str = "") -> int:
    """``switchboard worker``: Celery's prefork worker, its pool processes
    forked after the node packages are loaded (each run then starts warm)."""
    from celery import signals

    from ..registry import Registry

    app = make_app(broker, visibility=visibility)
    Registry.default()
    name = f"switchboard-{os.getpid()}@%h"

    @signals.worker_ready.connect(weak=False)
    def ready(sender: Any = None, **_: Any) -> None:
        print(f"switchboard worker ready: {sender.hostname if sender else name} "
              f"(concurrency {concurrency}, queues {','.join(queues)}, broker "
              f"{_shown(broker)}" + (f", history {history}" if history else "") + ")",
              file=sys.stderr, flush=True)

    argv = ["worker", f"--concurrency={concurrency}", f"--queues={','.join(queues)}",
            f"--hostname={name}", "--without-gossip", "--without-mingle",
            f"--loglevel={'INFO' if verbose else 'WARNING'}"]
    app.worker_main(argv)
    return 0


def _shown(url: str) -> str:
    """A broker URL without its password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + \
            (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=netloc).geturl()
    return url

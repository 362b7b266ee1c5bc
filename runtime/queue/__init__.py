"""Queue mode: flows run on Celery workers with Redis as broker and result
store (docs/queue.md).

``switchboard worker`` runs queued runs; ``submit`` queues one; ``serve``
hosts a flow's triggers and queues a run per event. A run's events travel
back through a Redis stream, so a remote run is watched like a local one.
Celery and redis-py are imported only by the modules that talk to them, and
only when a queue command runs: the rest of the runtime, and the designer's
start, never pay for them. With no broker configured everything stays
in-process."""

from __future__ import annotations

import os

BROKER_ENV = "SWITCHBOARD_BROKER"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
INSTALL_HINT = "pip install -e '.[queue]'"
DEFAULT_QUEUE = "switchboard"
#: Tries of a run that fails at start or loses its worker before it goes to
#: the dead-letter list.
DEFAULT_MAX_TRIES = 3
#: What the webhook trigger (nodes/http/webhook.py) shares with the HTTP
#: Response node that answers its requests: the key of the waiting requests'
#: futures in the run's resources, and the message key naming a request.
#: Named here so that the runtime imports no node package: serve and the
#: worker carry a queued run's answer back to the waiting request.
WEBHOOK_PENDING = "http.webhook.pending"
WEBHOOK_REQUEST = "_http_res"
#: Largest answer body a queued run may send back to its webhook request.
MAX_REPLY_BYTES = 1024 * 1024
#: Where workers on one machine or volume keep one history (queue/shared.py).
SHARED_HISTORY_ENV = "SWITCHBOARD_SHARED_HISTORY"


class QueueError(Exception):
    """Queue mode cannot do what was asked; the text says why and what to do."""


def broker_url(given: str | None = None) -> str | None:
    """The broker: ``--broker``, else ``$SWITCHBOARD_BROKER``, else None
    (queue mode off: runs stay in-process)."""
    url = (given or os.environ.get(BROKER_ENV) or "").strip()
    if not url:
        return None
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise QueueError(f"broker {url!r}: expected a Redis URL such as {DEFAULT_BROKER}")
    return url


def require_broker(given: str | None = None) -> str:
    url = broker_url(given)
    if url is None:
        raise QueueError(f"queue mode is off: give --broker URL or set {BROKER_ENV} "
                         f"(e.g. {DEFAULT_BROKER})")
    return url


def check_installed() -> None:
    """Celery and redis-py are an extra; say how to get them."""
    try:
        import celery  # noqa: F401
        import redis  # noqa: F401
    except ImportError as exc:
        raise QueueError(f"queue mode needs Celery and redis-py ({exc.name} is missing): "
                         f"{INSTALL_HINT}") from None

"""What queue mode looks like now: the workers and their load (asked over
Celery's control channel), the runs queued and running (their records in
Redis), the dead letters. For ``switchboard queue status`` and the
designer's Workers view."""

from __future__ import annotations

from typing import Any

from . import DEFAULT_QUEUE, state
from .app import TASK_NAME

#: Seconds workers get to answer a status request.
INSPECT_TIMEOUT = 1.0


def workers(app: Any, timeout: float = INSPECT_TIMEOUT) -> list[dict[str, Any]]:
    inspect = app.control.inspect(timeout=timeout)
    stats = inspect.stats() or {}
    active = inspect.active() or {}
    out = []
    for name, info in sorted(stats.items()):
        pool = info.get("pool") or {}
        out.append({"name": name,
                    "concurrency": pool.get("max-concurrency") or len(pool.get("processes") or []),
                    "active": len(active.get(name) or []),
                    "done": (info.get("total") or {}).get(TASK_NAME, 0),
                    "pid": info.get("pid")})
    return out


def snapshot(url: str, r: Any, *, app: Any = None) -> dict[str, Any]:
    from .app import make_app

    runs = state.active(r)
    return {
        "workers": workers(app or make_app(url)),
        "queue_length": r.llen(DEFAULT_QUEUE),
        "queued": sum(1 for run in runs if run.get("state") == "queued"),
        "running": sum(1 for run in runs if run.get("state") == "running"),
        "runs": runs,
        "dead_letters": r.llen(state.DEAD_LETTERS),
    }

"""What queue mode keeps in Redis besides Celery's own keys, in one place.

Per run (``switchboard:run:ID`` and keys below it): a hash with its state
(queued, running, finished, dead, cancelled), flow (its name and hash),
worker, attempts and outcome; its event stream (runtime.queue.events); a
cancel flag; a lease the worker running it holds and renews. Then the
effects ledger (runtime.queue.ledger), the dead-letter list, the set of
runs not yet final, and each queued flow's content by its hash
(``switchboard:flow:HASH``: one copy for every run of a flow). Every key
expires (a run's RUN_TTL once final, KEEP_TTL before), so nothing grows
without bound."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

PREFIX = "switchboard:"
#: Seconds a final run's keys (state, events, ledger) are kept.
RUN_TTL = 24 * 3600
#: Seconds a run's keys are kept at most while not final (a bound for a run
#: whose every worker vanished).
KEEP_TTL = 7 * 24 * 3600
DEAD_LETTERS = PREFIX + "deadletter"
#: Entries the dead-letter list keeps (newest first).
MAX_DEAD_LETTERS = 1000
#: Bytes one dead letter may take with its task (the flow travels in it).
MAX_DEAD_LETTER_BYTES = 1024 * 1024
ACTIVE = PREFIX + "active"
FINAL_STATES = frozenset({"finished", "dead", "cancelled"})

_clients: dict[tuple[int, str], Any] = {}


def client(url: str) -> Any:
    """A Redis client for ``url``, one per process (a forked worker child
    makes its own)."""
    key = (os.getpid(), url)
    c = _clients.get(key)
    if c is None:
        import redis

        c = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=5,
                                 health_check_interval=30)
        _clients[key] = c
    return c


def run_key(run_id: str, part: str = "") -> str:
    return f"{PREFIX}run:{run_id}" + (f":{part}" if part else "")


def worker_name() -> str:
    """This process as a lease holder: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


# -- the run's record ---------------------------------------------------------------

def queued(r: Any, run_id: str, fields: dict[str, Any], flow: dict | None = None) -> None:
    """The run's record; with ``flow`` (and ``fields["hash"]``), the flow's
    content too, once per distinct flow (see flow_of)."""
    key = run_key(run_id)
    digest = str(fields.get("hash") or "")
    pipe = r.pipeline()
    pipe.hset(key, mapping={"state": "queued", "submitted": time.time(), "attempts": 0,
                            **{k: _text(v) for k, v in fields.items()}})
    pipe.expire(key, KEEP_TTL)
    pipe.sadd(ACTIVE, run_id)
    if flow is not None and digest:
        pipe.expire(flow_key(digest), KEEP_TTL)  # 0: not there yet
    done = pipe.execute()
    if flow is not None and digest and not done[-1]:
        r.set(flow_key(digest), json.dumps(flow, ensure_ascii=False), ex=KEEP_TTL)


def flow_key(digest: str) -> str:
    return f"{PREFIX}flow:{digest}"


def flow_of(r: Any, run_id: str) -> tuple[str, dict | None]:
    """The hash of the flow a queued run runs, and its content (the task
    carries it to the worker; this copy is for those who watch the run:
    the designer opens a run of another flow on that flow). None when it
    expired or the run was queued without it."""
    digest = r.hget(run_key(run_id), "hash") or ""
    raw = r.get(flow_key(digest)) if digest else None
    try:
        flow = json.loads(raw) if raw else None
    except ValueError:
        flow = None
    return digest, flow if isinstance(flow, dict) else None


def info(r: Any, run_id: str) -> dict[str, str]:
    return r.hgetall(run_key(run_id))


def update(r: Any, run_id: str, **fields: Any) -> None:
    r.hset(run_key(run_id), mapping={k: _text(v) for k, v in fields.items()})


def final(r: Any, run_id: str, state: str, **fields: Any) -> None:
    """The run is over (``state`` in FINAL_STATES): its keys now expire
    after RUN_TTL."""
    pipe = r.pipeline()
    pipe.hset(run_key(run_id), mapping={"state": state, "finished": time.time(),
                                        **{k: _text(v) for k, v in fields.items()}})
    for part in ("", "events", "cancel"):
        pipe.expire(run_key(run_id, part), RUN_TTL)
    pipe.delete(run_key(run_id, "lease"))
    pipe.srem(ACTIVE, run_id)
    pipe.execute()


def active(r: Any, limit: int = 500) -> list[dict[str, str]]:
    """The runs not final yet (queued or running), oldest first; ids whose
    record expired are dropped from the set."""
    ids = sorted(r.smembers(ACTIVE))[: limit * 2]
    pipe = r.pipeline()
    for run_id in ids:
        pipe.hgetall(run_key(run_id))
    out = []
    for run_id, rec in zip(ids, pipe.execute(), strict=True):
        if not rec:
            r.srem(ACTIVE, run_id)
            continue
        out.append({"id": run_id, **rec})
    out.sort(key=lambda rec: float(rec.get("submitted") or 0))
    return out[:limit]


# -- cancel -------------------------------------------------------------------------

def cancel(r: Any, run_id: str, by: str = "") -> dict[str, str]:
    """Ask for the run to stop, wherever it runs (the worker polls the flag),
    or not to start; the run's record before (empty: no such run)."""
    rec = info(r, run_id)
    if rec and rec.get("state") not in FINAL_STATES:
        r.set(run_key(run_id, "cancel"), by or "cancelled", ex=KEEP_TTL)
    return rec


def cancelled(r: Any, run_id: str) -> str | None:
    return r.get(run_key(run_id, "cancel"))


# -- the lease: which worker runs it now ----------------------------------------------

def take_lease(r: Any, run_id: str, holder: str, ttl: float) -> str | None:
    """Hold the run's lease; None if taken, else the holder there was (a
    lost worker's, on this host, whose process is gone, is taken over)."""
    key = run_key(run_id, "lease")
    ms = int(ttl * 1000)
    if r.set(key, holder, nx=True, px=ms):
        return ""
    other = r.get(key) or ""
    if other and _gone(other) and r.set(key, holder, xx=True, px=ms):
        return other
    return None


def renew_lease(r: Any, run_id: str, holder: str, ttl: float) -> bool:
    key = run_key(run_id, "lease")
    if r.get(key) != holder:
        return False
    return bool(r.pexpire(key, int(ttl * 1000)))


def _gone(holder: str) -> bool:
    """A lease holder on this host whose process is no more."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# -- dead letters ----------------------------------------------------------------------

def dead_letter(r: Any, run_id: str, entry: dict[str, Any]) -> None:
    """Add the run to the dead-letter list, with its task (to queue again
    by hand) when that is at most MAX_DEAD_LETTER_BYTES."""
    data = json.dumps({"id": run_id, "ts": time.time(), **entry}, ensure_ascii=False,
                      default=str)
    if len(data) > MAX_DEAD_LETTER_BYTES:
        data = json.dumps({"id": run_id, "ts": time.time(), **entry, "payload": None},
                          ensure_ascii=False, default=str)
    pipe = r.pipeline()
    pipe.lpush(DEAD_LETTERS, data)
    pipe.ltrim(DEAD_LETTERS, 0, MAX_DEAD_LETTERS - 1)
    pipe.execute()


def dead_letters(r: Any, limit: int = 100) -> list[dict[str, Any]]:
    out = []
    for raw in r.lrange(DEAD_LETTERS, 0, limit - 1):
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def _text(value: Any) -> str | float | int:
    if isinstance(value, (int, float, str)):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)

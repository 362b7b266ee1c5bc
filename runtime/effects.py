"""Side effects done once per run, when a run may run twice.

In queue mode a run whose worker dies is run again by another worker
(runtime.queue), so a node with an effect outside the run (a mail sent, an
HTTP POST, a file written) may reach it a second time. Such a node asks
``Node.effect_once(what, *parts)`` before the effect: the answer says whether
an earlier attempt of the same run already did it (then the node skips it and
reports what the ledger kept), and gives a key stable across attempts that
the node hands to its counterpart (a mail's Message-ID, an ``Idempotency-Key``
header) so that the counterpart can tell a repeat too. After the effect the
node calls ``record(result)``.

Which effect is "the same" is decided by the run, the node, a digest of the
effect's own content (``parts``: recipients, subject and body; method, URL
and body) and how many times that same content went out of that node before
in the run: the third identical mail of a loop is the third one again on the
second attempt, whatever order unrelated work finished in.

In-process (no ledger set, the default) ``effect_once`` returns one shared
object that says "not done, no key" after a single context variable look-up,
so nodes cost what they did.

What is and is not guaranteed (docs/queue.md): the ledger entry is written
after the effect, so a worker lost between the two repeats the effect on the
next attempt, with the same idempotency key."""

from __future__ import annotations

import contextvars
import hashlib
import json
import threading
from typing import Any

#: The ledger of the run this context belongs to; None in-process.
LEDGER: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "switchboard_effect_ledger", default=None)

#: What a ledger keeps of one effect's result, at most (a larger result is
#: recorded as done without it, and a repeat reports it as done, no more).
MAX_RESULT_BYTES = 256 * 1024


class Effect:
    """One effect of one node in one run: ``done`` (an earlier attempt did
    it; ``result`` is what it recorded), ``key`` (stable across attempts;
    empty when the run keeps no ledger) and ``record(result)``."""

    __slots__ = ("node", "key", "done", "result", "_ledger")

    def __init__(self, key: str = "", done: bool = False, result: Any = None,
                 ledger: Ledger | None = None, node: str = "") -> None:
        self.node = node
        self.key = key
        self.done = done
        self.result = result
        self._ledger = ledger

    def record(self, result: Any = None) -> None:
        """The effect is done: say so in the ledger (a no-op in-process)."""
        if self._ledger is not None and not self.done:
            self._ledger.put(self.node, self.key, _bounded(result))
            self.done = True
            self.result = result


#: The answer in-process: not done, no key, nothing recorded.
UNTRACKED = Effect()


class Ledger:
    """A run's record of the effects done; subclasses store it (the queue's
    Redis ledger; MemoryLedger for tests). ``run_id`` is the same on every
    attempt of the run."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()  # nodes may ask from worker threads

    def effect(self, node_id: str, what: str, parts: tuple[Any, ...]) -> Effect:
        digest = content_digest(what, parts)
        with self._lock:
            n = self._seen.get((node_id, digest), 0)
            self._seen[(node_id, digest)] = n + 1
        key = hashlib.sha256(f"{self.run_id}\0{node_id}\0{digest}\0{n}".encode()).hexdigest()[:32]
        found = self.get(node_id, key)
        if found is None:
            return Effect(key, ledger=self, node=node_id)
        return Effect(key, done=True, result=found.get("result"), ledger=self, node=node_id)

    # storage: what subclasses provide
    def get(self, node_id: str, key: str) -> dict | None:
        raise NotImplementedError

    def put(self, node_id: str, key: str, result: Any) -> None:
        raise NotImplementedError


class MemoryLedger(Ledger):
    """A ledger in a dict shared by the attempts given it: for tests and
    for a run repeated inside one process."""

    def __init__(self, run_id: str, store: dict | None = None) -> None:
        super().__init__(run_id)
        self.store: dict[str, dict] = {} if store is None else store

    def get(self, node_id: str, key: str) -> dict | None:
        return self.store.get(key)

    def put(self, node_id: str, key: str, result: Any) -> None:
        self.store.setdefault(key, {"result": result})


def effect_once(node_id: str, what: str, parts: tuple[Any, ...]) -> Effect:
    ledger = LEDGER.get()
    if ledger is None:
        return UNTRACKED
    return ledger.effect(node_id, what, parts)


def content_digest(what: str, parts: tuple[Any, ...]) -> str:
    text = json.dumps([what, *parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _bounded(result: Any) -> Any:
    try:
        size = len(json.dumps(result, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return None
    return result if size <= MAX_RESULT_BYTES else None

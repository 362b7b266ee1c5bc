"""The effects ledger in Redis (runtime.effects): one key per effect,
``switchboard:effect:RUN:NODE:KEY``, written with SET NX once the effect is
done and expiring with the run's other keys, so every attempt of a run, on
any worker, sees what the others did.

A run's first attempt has no earlier attempt whose effects it could find:
its ledger answers "not done" without asking Redis (two round trips on the
event loop per effect less) and writes its entries as any attempt does."""

from __future__ import annotations

import json
from typing import Any

from ..effects import Ledger
from . import state

#: Seconds an effect's entry is kept: longer than any run may be retried.
EFFECT_TTL = state.KEEP_TTL


def effect_key(run_id: str, node_id: str, key: str) -> str:
    return f"{state.PREFIX}effect:{run_id}:{node_id}:{key}"


class RedisLedger(Ledger):
    """``first``: this is the run's first attempt (its ``attempts`` count,
    raised before it runs, is 1), so no entry of it can be in Redis yet."""

    def __init__(self, r: Any, run_id: str, *, first: bool = False) -> None:
        super().__init__(run_id)
        self.r = r
        self.first = first

    def get(self, node_id: str, key: str) -> dict | None:
        if self.first:
            return None
        raw = self.r.get(effect_key(self.run_id, node_id, key))
        if raw is None:
            return None
        try:
            found = json.loads(raw)
        except ValueError:
            return {"result": None}
        return found if isinstance(found, dict) else {"result": None}

    def put(self, node_id: str, key: str, result: Any) -> None:
        data = json.dumps({"result": result}, ensure_ascii=False, default=str)
        self.r.set(effect_key(self.run_id, node_id, key), data, nx=True, ex=EFFECT_TTL)

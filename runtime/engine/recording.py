"""What a run records about itself: the ``stats`` event of each tick
(counters, and the last messages of each node and wire for the inspector),
and what a rerun needs (``run.replay``: what reached each node, the tool
requests, the flow variables as the run ended), within the bounds below.
``Recording`` is the part of ``Engine`` (``runtime.engine.core``) that does
it; the engine holds its state.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

from ..events import EventBus, RunReplay, Stats
from ..flow import Flow
from ..message import TOOL_CALLER_ID, to_jsonable
from ..node import redact
from .node_runtime import LAST_MESSAGES, SNAPSHOT_ITEMS, SNAPSHOT_LIMIT, NodeRuntime

STATS_INTERVAL = 0.25
# What a run keeps for a rerun (runs rerun --from, --call): per node the
# newest REPLAY_INPUTS of the messages recorded as they arrived (the same
# snapshots, and the same per-tick budget, as the inspector's last messages:
# a node's first REPLAY_INPUTS messages of each stats tick), the newest
# REPLAY_CALLS tool requests; a recorded message past REPLAY_MESSAGE_BYTES,
# or past REPLAY_BYTES for the whole run, is left out and counted.
REPLAY_INPUTS = 20
REPLAY_CALLS = 100
REPLAY_MESSAGE_BYTES = 256 * 1024
REPLAY_BYTES = 8 * 1024 * 1024


class Recording:
    """The Engine's stats ticks and its record for a rerun (the engine
    inherits these methods)."""

    # Set by Engine.__init__ and run().
    flow: Flow
    bus: EventBus
    nodes: dict[str, NodeRuntime]
    _record: bool
    _record_inputs: bool
    _calls: dict[str, Any] | None
    _variables: Any
    _resources: dict[str, Any]
    _started: float

    # -- what a rerun needs -------------------------------------------------
    def _keep_call(self, request: dict) -> None:
        """A tool request as its node got it (the agent's message and the
        validated arguments), for ``runs rerun --call``; tool calls are rare
        enough to keep each, the newest REPLAY_CALLS."""
        calls = self._calls
        assert calls is not None
        if len(calls) >= REPLAY_CALLS:
            del calls[next(iter(calls))]
        calls[str(request.get(TOOL_CALLER_ID, ""))] = to_jsonable(
            request, limit=SNAPSHOT_LIMIT, text=redact, items=SNAPSHOT_ITEMS)

    def _keep_variables(self) -> Any:
        """The flow variables (Set Variable's flow scope) as the run ends,
        before its resources are closed: a rerun from a node starts with
        them, since the nodes that set them are upstream and do not run."""
        from ..expressions import FLOW_VARIABLES

        found = self._resources.get(FLOW_VARIABLES)
        if not isinstance(found, dict) or not found:
            return {}
        return to_jsonable(found, limit=SNAPSHOT_LIMIT, text=redact, items=SNAPSHOT_ITEMS)

    def replay(self) -> RunReplay:
        """The run.replay event: see events.RunReplay. Built once, at the end."""
        # The flow as the user made it (its subflows not expanded): what a
        # rerun runs again and what the flow hash names.
        flow = to_jsonable(self.source_flow.to_json(), text=redact)
        room = [REPLAY_BYTES]
        dropped = 0

        def fits(value: Any) -> bool:
            size = _json_size(value)
            if size > REPLAY_MESSAGE_BYTES or size > room[0]:
                return False
            room[0] -= size
            return True

        inputs: dict[str, list[Any]] = {}
        for rt in self.nodes.values():
            if rt.inputs:
                kept = [m for m in rt.inputs if fits(m)]
                dropped += len(rt.inputs) - len(kept)
                if kept:
                    inputs[rt.id] = kept
        calls = {}
        for caller_id, request in (self._calls or {}).items():
            if fits(request):
                calls[caller_id] = request
            else:
                dropped += 1
        variables = self._variables if fits(self._variables) else {}
        return RunReplay(
            flow=flow, flow_hash=flow_hash(flow), inputs=inputs,
            received={rt.id: rt.count_in for rt in self.nodes.values() if rt.inputs},
            calls=calls, variables=variables or {}, dropped=dropped,
            busy_ms={rt.id: round(rt.busy * 1000, 3) for rt in self.nodes.values() if rt.busy})

    # -- stats --------------------------------------------------------------
    async def _stats_loop(self) -> None:
        # While a node has budget left, its messages leave the chain loop to
        # be recorded (the gate); a rerun wants more of them than the
        # inspector shows, so recording inputs raises the budget. Inputs and
        # outputs share it (a source's outputs must use it up, or its gate
        # would stay up and its every message miss the fast path): room for
        # REPLAY_INPUTS messages in and out.
        budget = LAST_MESSAGES
        if self._record_inputs:
            budget = REPLAY_INPUTS * 2 if self._record else REPLAY_INPUTS
        # With inputs recorded and outputs not, a source nothing sends to
        # has nothing to record, and a budget it never used up would keep
        # its gate up for good.
        recorded = [rt for rt in self.nodes.values()
                    if self._record or rt.incoming or not rt.spec.source]
        while True:
            if self._record or self._record_inputs:
                for rt in recorded:
                    if rt.budget <= 0:
                        rt.gate += 1
                    rt.budget = budget
            await asyncio.sleep(STATS_INTERVAL)
            if self.bus.active:
                self.bus.publish(self.stats())

    def stats(self) -> Stats:
        nodes = {rt.id: {"in": rt.count_in, "out": rt.count_out, "errors": rt.errors,
                         "active": rt.active} for rt in self.nodes.values()}
        wires: dict[str, int] = {}
        last_wire: dict[str, Any] = {}
        last: dict[str, dict[str, list[Any]]] = {}
        for rt in self.nodes.values():
            for ws in rt.routes.values():
                for w in ws:
                    wires[str(w.index)] = w.count
                    if w.last is not None:
                        last_wire[str(w.index)] = w.last
            if rt.last_in or rt.last_out:
                last[rt.id] = {"in": list(rt.last_in), "out": list(rt.last_out)}
        return Stats(nodes=nodes, wires=wires, last=last, last_wire=last_wire,
                     elapsed_ms=(time.perf_counter() - self._started) * 1000)


def flow_hash(flow_json: dict[str, Any]) -> str:
    """A flow's identity for run history: sha256 of its canonical JSON (key
    order and spacing do not count), so one stored copy serves every run of
    the same flow and a rerun can tell whether a file changed since."""
    text = json.dumps(flow_json, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _json_size(value: Any) -> int:
    try:
        import orjson

        return len(orjson.dumps(value))
    except Exception:  # an int past 64 bits, say: the slow way
        return len(json.dumps(value, ensure_ascii=False, default=str))

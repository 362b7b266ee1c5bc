"""``switchboard serve FLOW...``: host the flows' triggers here and queue a
run per event on the workers.

Only the trigger nodes run in this process (webhooks, schedules, folder
watches: the sources of category Triggers), each with services of its own
(``_Host``) instead of an engine: what a trigger sends becomes a queued run
whose task carries the flow and the event, and the worker starts the flow
from that trigger with that message (its own triggers stay quiet there). A
webhook request of a flow with an HTTP Response node is held open until the
worker's run answers it (the answer comes back through the run's stream;
the webhook's response_timeout_seconds still bounds the wait); one of a
flow without such a node is answered ``202 Accepted`` with the run's id as
soon as the run is queued. Either gets ``503`` if the run could not be
queued.

Each run queued here is followed through its event stream and recorded in
this machine's run history, as if it had run here."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from ..message import to_jsonable
from . import WEBHOOK_PENDING, WEBHOOK_REQUEST
from .events import Follower
from .submit import HistorySink, enqueue, payload_for

log = logging.getLogger(__name__)

#: The header that names the queued run in a flow's answer to its webhook.
RUN_HEADER = "X-Switchboard-Run"
#: Runs recorded in history between two prunes of it.
PRUNE_EVERY = 100


class _Reply:
    """An answer to a waiting webhook request (the shape the webhook writes)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, body: dict[str, Any] | bytes,
                 headers: list[tuple[str, str]] | None = None) -> None:
        self.status = status
        self.headers = headers if headers is not None else [("Content-Type", "application/json")]
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()


class _Host:
    """The services a trigger node gets here (runtime.node.NodeServices)."""

    engine = None

    def __init__(self, server: TriggerServer, flow_ix: int, node_id: str) -> None:
        self.server = server
        self.flow_ix = flow_ix
        self.node_id = node_id

    def send(self, msg: dict, port: str = "out") -> None:
        self.server.fire(self.flow_ix, self.node_id, port, msg)

    def status(self, text: str, color: str = "", state: str = "idle") -> None:
        pass  # the trigger's log lines say what matters (where it listens)

    def debug(self, value: Any, msg: dict | None = None) -> None:
        pass

    def log(self, text: str, level: str = "info") -> None:
        if level != "debug":
            self.server.say(f"{'' if level == 'info' else level + ': '}"
                            f"node '{self.node_id}': {text}")

    def progress(self, fraction: float | None, text: str = "") -> None:
        pass

    def resource(self, key: str, make: Callable[[], Any],
                 close: Callable[[Any], Any] | None = None) -> Any:
        if key not in self.server.resources:
            self.server.resources[key] = make()
            if close is not None:
                self.server.closers.append((key, close))
        return self.server.resources[key]


class TriggerServer:
    """Serves the triggers of ``flows`` ([(flow, file)]) until ``stop()``."""

    def __init__(self, flows: list[tuple[Any, str]], app: Any, r: Any, *, queue: str,
                 options: dict[str, Any], history: bool = True,
                 out: Any = None) -> None:
        from ..engine import flow_hash

        self.flows = [(flow, file, flow.to_json()) for flow, file in flows]
        self.digests = [flow_hash(data) for _, _, data in self.flows]
        #: Per flow: whether it answers its webhook requests itself.
        self.answers = [any(n.type == "http.response" and not n.disabled for n in flow.nodes)
                        for flow, _ in flows]
        self.app = app
        self.r = r
        self.queue = queue
        self.options = options
        self.out = out or sys.stderr
        self.resources: dict[str, Any] = {}
        self.closers: list[tuple[str, Callable[[Any], Any]]] = []
        self.nodes: list[Any] = []
        self.queued = 0
        self.finished = 0
        self._files: dict[str, str] = {}
        self._sinks: dict[str, HistorySink] = {}
        self._history: Any = None
        self._record = history
        self._follower = Follower(r, self._sink, self._done, on_exit=self._close_history)
        #: Runs whose webhook request waits for the flow's answer: run -> request.
        self._requests: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def say(self, text: str) -> None:
        print(f"switchboard serve: {text}", file=self.out, flush=True)

    @staticmethod
    def triggers(flow: Any) -> list[Any]:
        """The flow's nodes this process hosts."""
        from ..registry import Registry

        registry = Registry.default()
        out = []
        for fnode in flow.nodes:
            spec = registry.spec(fnode.type)
            if spec is not None and spec.source and spec.category == "Triggers" \
                    and not fnode.disabled:
                out.append(fnode)
        return out

    async def run(self, timeout: float | None = None) -> None:
        from pathlib import Path

        from ..engine import expand_flow_dir
        from ..registry import Registry

        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._follower.start()
        registry = Registry.default()
        tasks = []
        try:
            for ix, (flow, file, _data) in enumerate(self.flows):
                flow_dir = str(Path(file).resolve().parent)
                for fnode in self.triggers(flow):
                    cls = registry.get(fnode.type)
                    params = expand_flow_dir(fnode.params, flow_dir)
                    node = cls(fnode.id, fnode.name or "", params, fnode.outputs,
                               _Host(self, ix, fnode.id))
                    await node.start()
                    self.nodes.append(node)
                    tasks.append(asyncio.ensure_future(self._generate(node)))
            # Until stopped, or until every trigger is done (a schedule's
            # count reached): one trigger ending leaves the others serving.
            waiter = asyncio.ensure_future(self._stop.wait())
            everything = asyncio.ensure_future(asyncio.wait(tasks)) if tasks else waiter
            await asyncio.wait([waiter, everything], timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            everything.cancel()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for node in self.nodes:
                try:
                    await node.close()
                except Exception as exc:  # noqa: BLE001 - stop the others anyway
                    log.warning("closing %s: %s", node.id, exc)
            for key, close in reversed(self.closers):
                try:
                    result = close(self.resources.pop(key, None))
                    if asyncio.iscoroutine(result):
                        await result
                except Exception as exc:  # noqa: BLE001
                    log.warning("closing %s: %s", key, exc)

    async def _generate(self, node: Any) -> None:
        try:
            await node.generate()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a trigger that cannot serve ends serve
            self.say(f"error: node '{node.id}': {exc}")
            if self._stop is not None:
                self._stop.set()
            raise

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def fire(self, flow_ix: int, node_id: str, port: str, msg: dict) -> None:
        """A trigger's event: queue a run for it; answer a webhook request."""
        flow, file, data = self.flows[flow_ix]
        held = self.answers[flow_ix] and isinstance(msg.get(WEBHOOK_REQUEST), str)
        request = msg.get(WEBHOOK_REQUEST) if held else msg.pop(WEBHOOK_REQUEST, None)
        payload = payload_for(flow, file, flow_json=data, flow_digest=self.digests[flow_ix],
                              trigger={"node": node_id, "port": port, "msg": to_jsonable(msg)},
                              **self.options)
        try:
            run_id = enqueue(self.app, self.r, payload, queue=self.queue)
        except Exception as exc:  # noqa: BLE001 - Redis away: refuse this event, serve on
            self.say(f"error: could not queue a run of '{flow.name}' for node '{node_id}': {exc}")
            self._answer(request, _Reply(503, {"error": "the run could not be queued"}))
            return
        self.queued += 1
        self._files[run_id] = file
        if held:
            self._requests[run_id] = request  # answered when the flow's reply comes back
        self._follower.add(run_id)
        if not held:
            self._answer(request, _Reply(202, {"run_id": run_id, "status": "queued"}))

    def _answer(self, request: str | None, reply: _Reply) -> None:
        if request is None:
            return
        fut = self.resources.get(WEBHOOK_PENDING, {}).get(request)
        if fut is not None and not fut.done():
            fut.set_result(reply)

    # -- history (the follower's thread) ------------------------------------------------
    def _sink(self, run_id: str, event: Any, entry: dict | None) -> None:
        if entry is not None and entry.get("type") == "queue.reply":
            self._reply(run_id, entry)
        if event is None or not self._record:
            return
        sink = self._sinks.get(run_id)
        if sink is None:
            if self._history is None:
                from ..history import History

                self._history = History()
            from pathlib import Path

            path = str(Path(self._files.get(run_id, "")).absolute())
            sink = self._sinks[run_id] = HistorySink(self._history, path)
        sink(event)

    def _reply(self, run_id: str, entry: dict) -> None:
        """The flow's answer to its webhook request, from the worker."""
        import base64

        request = self._requests.pop(run_id, None)
        if request is None or self._loop is None:
            return
        try:
            reply = _Reply(int(entry.get("status") or 200), base64.b64decode(entry.get("body", "")),
                           [(str(k), str(v)) for k, v in entry.get("headers") or []]
                           + [(RUN_HEADER, run_id)])
        except (ValueError, TypeError):
            reply = _Reply(502, {"error": "the run's answer could not be read"})
        self._to_loop(request, reply)

    def _to_loop(self, request: str, reply: _Reply) -> None:
        try:
            self._loop.call_soon_threadsafe(self._answer, request, reply)  # type: ignore[union-attr]
        except RuntimeError:
            pass  # serve has stopped: the request was answered 503 by the webhook

    def _done(self, run_id: str, entry: dict) -> None:
        request = self._requests.pop(run_id, None)
        if request is not None and self._loop is not None:
            # Ended without answering (failed, say): not left to time out.
            self._to_loop(request, _Reply(
                502, {"run_id": run_id, "error": "the run ended without answering",
                      "status": entry.get("status", "")}))
        sink = self._sinks.pop(run_id, None)
        if sink is not None:
            sink.close()
        self._files.pop(run_id, None)
        self.finished += 1
        if self._history is not None and self.finished % PRUNE_EVERY == 0:
            self._history.prune()
        self.say(f"run {run_id} {entry.get('status', '?')}"
                 + (f": {entry['message']}" if entry.get("message") else ""))

    def close(self, wait: float = 0.0) -> None:
        """Stop following runs (after up to ``wait`` s for those in flight)."""
        import time

        deadline = time.monotonic() + wait
        while self._follower.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._follower.stop()

    def _close_history(self) -> None:
        for sink in self._sinks.values():
            sink.close()  # runs not final yet: kept as they are so far
        self._sinks.clear()
        if self._history is not None:
            self._history.close()
            self._history = None


def check_flows(flows: list[tuple[Any, str]]) -> None:
    """Each flow has something to serve, else QueueError."""
    from . import QueueError

    for flow, file in flows:
        if not TriggerServer.triggers(flow):
            raise QueueError(f"{file}: no trigger to serve (a Webhook, Schedule or Watch Folder "
                             "node); queue a one-off run with `switchboard submit`")


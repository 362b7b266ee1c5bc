"""Background tool calls: a call that returns at once with a tracking id
while its node goes on as a task of the run, the ``task_status`` and
``task_cancel`` tools an agent gets while it has such tasks, and the notes
its conversation gets when one ends.

``BackgroundTasks`` is the part of ``ToolBridge`` (``runtime.tools.bridge``)
that does this: the bridge holds its state (``jobs``, ``max_background``,
``wake_on_background``) and runs each call's steps (``_begin``,
``_approve``, ``_start``, ``_wait``) for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..arguments import _parse, event_args, preview, short
from ..events import ToolCall
from ..message import to_jsonable
from .calls import CallStatus, ToolOutcome, _final_phase, _Running, _Waiting, new_caller_id
from .schema import ToolDef

log = logging.getLogger("runtime.tools")  # the name its log lines had as one module

#: The tools an agent gets while it has background tasks.
TASK_STATUS = "task_status"
TASK_CANCEL = "task_cancel"
#: Background tasks one agent may have going at once (ToolBridge.max_background).
MAX_BACKGROUND_TASKS = 4


class _Job:
    """A background call: its task, and how it ended."""

    __slots__ = ("tracking_id", "started", "status", "task", "outcome", "reported",
                 "cancel_reason")

    def __init__(self, tracking_id: str, started: Any, status: CallStatus) -> None:
        self.tracking_id, self.started, self.status = tracking_id, started, status
        self.cancel_reason = "cancelled: the run stopped"
        self.task: asyncio.Task | None = None
        self.outcome: ToolOutcome | None = None
        self.reported = False

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def state(self) -> dict[str, Any]:
        """What task_status answers."""
        out: dict[str, Any] = {"tracking_id": self.tracking_id, "tool": self.status.tool}
        o = self.outcome
        if o is None:
            out["status"] = self.status.phase or "queued"
            if self.status.fraction is not None:
                out["progress"] = round(self.status.fraction, 3)
            if self.status.text:
                out["text"] = self.status.text
            return out
        out["status"] = _final_phase(o)
        if o.status == "success":
            out["result"] = to_jsonable(o.data)
        else:
            out["error"] = o.error
        return out

    def note(self) -> str:
        """The line the agent's conversation gets when the task has ended."""
        o = self.outcome
        assert o is not None
        body = o.content()
        return (f"[background task {self.tracking_id} ({self.status.tool}) "
                f"{_final_phase(o)}: {short(body, 4000)}]")


async def _cancel_all(tasks: set[asyncio.Task]) -> None:
    """The run ended: cancel the background tasks still going, and let each
    record its cancellation (its node sees CancelledError)."""
    going = [t for t in tasks if not t.done()]
    for t in going:
        t.cancel()
    if going:
        await asyncio.wait(going)


class BackgroundTasks:
    """A ToolBridge's background calls (the bridge inherits these methods)."""

    # Set by ToolBridge.__init__.
    engine: Any
    agent_id: str
    tools: dict[str, ToolDef]
    jobs: dict[str, _Job]
    max_background: int
    wake_on_background: bool
    _ended: asyncio.Event
    _live: dict[str, CallStatus]

    def pending(self) -> list[_Job]:
        """Background tasks still going."""
        return [j for j in self.jobs.values() if not j.done]

    def take_ended(self) -> list[str]:
        """Notes on the background tasks that ended since last asked (and
        whose result task_status did not already give): for the agent's
        conversation."""
        out = []
        for j in self.jobs.values():
            if j.done and not j.reported:
                j.reported = True
                out.append(j.note())
        self._ended.clear()
        return out

    def should_wake(self) -> bool:
        """The agent must not finish yet: wake is on and a background task
        is going, or ended and the agent has not heard of it."""
        return self.wake_on_background and any(
            not j.done or not j.reported for j in self.jobs.values())

    async def wait_ended(self) -> None:
        """Until a background task ends (the runtime's loop runs it meanwhile)."""
        while self.pending() and not any(j.done and not j.reported for j in self.jobs.values()):
            self._ended.clear()
            await self._ended.wait()

    def _start_background(self, base: dict, call_id: str, name: str, raw: Any,
                          parent: str) -> ToolOutcome:
        """A background call: checked now (a refusal is answered at once),
        then run as a task of the run; answered with its tracking id."""
        going = self.pending()
        if len(going) >= self.max_background:
            return self.refuse(call_id, name, raw, (
                f"this agent already has {len(going)} background tasks going, its limit "
                f"(max_background_tasks={self.max_background}); wait for one to end or cancel "
                "one with task_cancel"), parent)
        started = self._begin(base, call_id, name, raw, parent, defer=True)
        if isinstance(started, ToolOutcome):
            return started
        status = started.live() if isinstance(started, _Running) else started.status
        tracking_id = "task-" + started.caller_id
        status.tracking_id = tracking_id
        status.publish("queued")  # a background task is shown from its start
        job = _Job(tracking_id, started, status)
        self.jobs[tracking_id] = job
        job.task = asyncio.get_running_loop().create_task(
            self._run_job(base, job, parent), name=f"background {name} {tracking_id}")
        job.task.add_done_callback(lambda t: self._job_ended(job, parent, t))
        # The run's end cancels what is still going and records it.
        self.engine.resource("background-tasks", set, _cancel_all).add(job.task)
        data = {"status": "started", "tracking_id": tracking_id,
                "message": f"{name} started in the background; its result will be reported "
                           f"when it ends (task_status / task_cancel with this tracking_id)"}
        tool = self.tools[name]
        return ToolOutcome(call_id, started.caller_id, name, tool.node_id, started.args,
                           "success", data=data, tracking_id=tracking_id)

    async def _run_job(self, base: dict, job: _Job, parent: str) -> None:
        started, tool = job.started, self.tools[job.status.tool]
        try:
            if isinstance(started, _Waiting):
                started = await self._approve(base, started)
            elif isinstance(started, _Running):
                started = self._start(base, started, tool, parent)
            if isinstance(started, _Running):
                job.started = started
                started = await self._wait(started, None, parent)
            job.outcome = started
        except asyncio.CancelledError:
            pass  # recorded by _job_ended

    def _job_ended(self, job: _Job, parent: str, task: asyncio.Task) -> None:
        """A background task is over: a cancellation (even before its first
        step: a task cancelled then never runs) or a failure of our own is
        recorded here when nothing recorded it yet."""
        if job.outcome is None:
            tool = self.tools[job.status.tool]
            failed = not task.cancelled() and task.exception() is not None
            if failed:
                log.error("background task %s failed", job.tracking_id,
                          exc_info=task.exception())
            out = ToolOutcome("", job.status.caller_id, tool.name, tool.node_id,
                              getattr(job.started, "args", None), "error",
                              error="the background task failed" if failed else job.cancel_reason,
                              tracking_id=job.tracking_id, cancelled=not failed)
            if job.status.caller_id in self._live:  # not yet published (by _wait)
                self._published(out, parent)
            job.outcome = out
        self._ended.set()

    async def _task_tool(self, call_id: str, name: str, raw: Any, parent: str) -> ToolOutcome:
        """task_status / task_cancel, answered here."""
        args, why, bounded = _parse(raw)
        caller_id = new_caller_id()
        if self.engine.bus.active:
            self.engine.bus.publish(ToolCall(agent=self.agent_id, tool=name, caller_id=caller_id,
                                             parent=parent, args=event_args(args, checked=True)))
        job = None
        if why is None:
            tid = args.get("tracking_id") if isinstance(args, dict) else None
            job = self.jobs.get(tid) if isinstance(tid, str) else None
            if job is None:
                known = ", ".join(self.jobs) or "none"
                why = (f"no background task with tracking_id {preview(tid)} "
                       f"(this agent's: {short(known, 500)})")
        if why is not None or job is None:
            out = ToolOutcome(call_id, caller_id, name, "", args, "refused", error=why or "",
                              bounded=bounded)
        else:
            if name == TASK_CANCEL and not job.done and job.task is not None:
                job.cancel_reason = "cancelled by the agent (task_cancel)"
                if isinstance(job.started, _Running):
                    job.started.cancel_reason = job.cancel_reason
                job.task.cancel()
                await asyncio.wait([job.task])  # the node's cleanup runs on this loop
                self._job_ended(job, parent, job.task)  # (its callback may not have run)
            state = job.state()
            if job.done:
                job.reported = True  # the agent has it now: no note later
            out = ToolOutcome(call_id, caller_id, name, "", args, "success", data=state,
                              tracking_id=job.tracking_id)
        self._published(out, parent)
        return out

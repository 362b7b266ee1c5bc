"""Runs the document's flow in the embedded runtime, inside Qt's event loop.

The engine is asyncio; qasync makes Qt's event loop the asyncio loop, so a
run is a task on the GUI thread that only ever awaits: nodes that block do so
in an executor (``asyncio.to_thread``), never here. Events from the engine's
bus are queued and handed to the GUI in batches every ``flush_ms``, with the
redundant ones folded (only the newest ``stats``, the newest status per node,
at most ``MAX_PER_BATCH`` debug lines and hops), so a flow that sends a
million messages costs the GUI a few repaints a second, not a million.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from runtime.engine import Engine, RunResult
from runtime.events import Event, EventBus, Log, RunFinished
from runtime.flow import Flow, FlowError, FlowNode, Problem, Wire, validate_flow
from runtime.message import Message
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope

from .people import DesignerPeople

log = logging.getLogger(__name__)

FLUSH_MS = 100
MAX_PER_BATCH = 200  # debug lines and message hops per batch; the rest is counted


def qt_event_loop() -> asyncio.AbstractEventLoop:
    """The asyncio loop that runs inside Qt's event loop, made on first use.

    ``already_running=True`` makes qasync register the loop as running for
    this thread now, so ``app.exec()`` (the designer's main loop, or
    pytest-qt's ``qtbot.waitUntil`` in tests) drives asyncio callbacks with
    no ``loop.run_forever()`` anywhere. If the application already runs a
    qasync loop (``qasync.run``), that one is used."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    import qasync

    app = QApplication.instance()
    if app is None:
        raise RuntimeError("create the QApplication before running a flow")
    loop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)
    return loop


def fold_events(events: list[Event], limit: int = MAX_PER_BATCH) -> list[Event]:
    """One batch as the GUI needs it: the same story, fewer objects."""
    if len(events) <= 1:
        return events
    last_stats = None
    last_status: dict[str, int] = {}
    debug_total = sum(1 for e in events if e.type == "debug")
    hops_total = sum(1 for e in events if e.type == "message.sent")
    debug_skip = max(0, debug_total - limit)
    hops_skip = max(0, hops_total - limit)
    for i, e in enumerate(events):
        if e.type == "stats":
            last_stats = i
        elif e.type == "node.status":
            last_status[e.node] = i  # type: ignore[attr-defined]
    keep_status = set(last_status.values())
    out: list[Event] = []
    for i, e in enumerate(events):
        kind = e.type
        if kind == "stats" and i != last_stats:
            continue
        if kind == "node.status" and i not in keep_status:
            continue
        if kind == "debug" and debug_skip:
            debug_skip -= 1
            continue
        if kind == "message.sent" and hops_skip:
            hops_skip -= 1
            continue
        out.append(e)
    skipped = max(0, debug_total - limit)
    if skipped:
        out.append(Log(run_id=events[-1].run_id, level="warning",
                       text=f"{skipped} debug messages were not shown, to keep up "
                            f"(the run history has them)"))
    return out


class RunController(QObject):
    """One run at a time of a flow, from the GUI."""

    state_changed = Signal(str)  # idle | running | stopping
    run_started = Signal(str)  # run id
    run_finished = Signal(object)  # RunResult
    events = Signal(list)  # a folded batch of events, on the GUI thread
    problems = Signal(list)  # list[Problem] found before a run (errors and warnings)
    refused = Signal(list)  # list[Problem]: errors that kept the flow from running
    tick = Signal(float)  # elapsed ms, a few times a second while running

    def __init__(self, registry: Registry | None = None, history: Any = None,
                 parent: QObject | None = None, flush_ms: int = FLUSH_MS) -> None:
        super().__init__(parent)
        self.registry = registry or Registry.default()
        self.history = history  # runtime.history.History or None
        self.engine: Engine | None = None
        self.last_result: RunResult | None = None
        self.state = "idle"
        self._task: asyncio.Task | None = None
        self._pending: list[Event] = []
        self._started = 0.0
        self._ended = 0.0
        self._recorder: Any = None
        self._unsubscribe: list[Any] = []
        # Who the runs ask: approval cards and agents' questions in the
        # inspector (the window hosts them; see panels/inspector/dock.py).
        self.people = DesignerPeople(self)
        #: Pinned nodes send their pinned data instead of running (n8n's
        #: manual runs do; Run > Use Pinned Data turns it off).
        self.use_pins = True
        self._timer = QTimer(self)
        self._timer.setInterval(flush_ms)
        self._timer.timeout.connect(self._flush)

    # -- state --------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        return self.state != "idle"

    def elapsed_ms(self) -> float:
        if not self._started:
            return 0.0
        end = self._ended if self.state == "idle" and self._ended else time.perf_counter()
        return (end - self._started) * 1000

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    # -- running ------------------------------------------------------------
    def check(self, flow: Flow, file: str = "") -> list[Problem]:
        problems = validate_flow(flow, self.registry, file=file)
        self.problems.emit(problems)
        errors = [p for p in problems if p.severity == "error"]
        if errors:
            self.refused.emit(errors)
        return errors

    def run(self, flow: Flow, *, file: str = "", trace: bool = False,
            timeout: float | None = None, prepare: Callable[[Engine], None] | None = None) -> bool:
        """Start a run of a snapshot of ``flow`` (unsaved edits included;
        edits made during the run do not reach it). False, with ``refused``
        emitted, if the flow has errors or a run is already going.
        ``prepare(engine)`` sets the engine up before it starts: a rerun's
        entry (runtime.rerun.Rerun.prepare) replaces the flow's sources."""
        if self.is_running:
            return False
        if self.check(flow, file):
            return False
        snapshot = flow.model_copy(deep=True)
        return self._start(snapshot, file=file, trace=trace, timeout=timeout, validated=True,
                           prepare=prepare)

    def send_prompt(self, flow: Flow, agent_id: str, text: str, *, file: str = "") -> bool:
        """Send ``text`` into an agent node as a new message. While a run is
        going it is injected into it; otherwise a run starts in which only
        this prompt enters the flow (the flow's own sources stay quiet)."""
        if self.is_running and self.engine is not None and agent_id in self.engine.nodes:
            self.engine.inject(agent_id, Message.new(text))
            return True
        if self.is_running:
            return False
        if self.check(flow, file):
            return False
        chat = chat_flow(flow, agent_id, text, self.registry)
        return self._start(chat, file=file, trace=False, timeout=None)

    def stop(self) -> None:
        """Cancel everything in flight, tool calls and LLM requests included."""
        if self.engine is not None and self.state == "running":
            self._set_state("stopping")
            self.people.clear()  # nobody waits for a decision any more
            self.engine.stop()

    def _start(self, flow: Flow, *, file: str, trace: bool, timeout: float | None,
               validated: bool = False, prepare: Callable[[Engine], None] | None = None) -> bool:
        bus = EventBus()
        try:
            # check() has just validated this flow; the chat flow adds a node, so it is checked.
            engine = Engine(flow, self.registry, bus, trace=trace, record=True, file=file,
                            validated=validated, use_pins=self.use_pins)
        except FlowError as exc:
            self.problems.emit(exc.problems)
            self.refused.emit(exc.problems)
            return False
        engine.people = self.people  # type: ignore[attr-defined]
        if prepare is not None:
            prepare(engine)
        self._unsubscribe = [bus.subscribe(self._on_event)]
        if self.history is not None:
            self._recorder = self.history.recorder()
            self._unsubscribe.append(bus.subscribe(self._recorder))
        self.engine = engine
        self._pending.clear()
        self._started = time.perf_counter()
        self._ended = 0.0
        loop = qt_event_loop()
        self._task = loop.create_task(self._run(engine, timeout))
        self._timer.start()
        self._set_state("running")
        self.run_started.emit(engine.run_id)
        return True

    async def _run(self, engine: Engine, timeout: float | None) -> None:
        try:
            result = await engine.run(timeout)
        except asyncio.CancelledError:
            result = RunResult(status="stopped")
        except Exception as exc:  # an engine bug must not take the designer down
            log.exception("run failed")
            engine.bus.publish(Log(level="error", text=f"the run failed: {exc}"))
            engine.bus.publish(RunFinished(status="error", reason="failed", errors=1,
                                           message=f"the run failed: {exc}",
                                           duration_ms=self.elapsed_ms()))
            result = RunResult(status="error", errors=1, duration_ms=self.elapsed_ms())
        self._ended = time.perf_counter()
        self.people.clear()  # a run that ended asks nothing any more
        self._timer.stop()
        self._flush()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._recorder is not None:
            try:
                self._recorder.close()
            except Exception:
                log.exception("could not store the run in history")
            self._recorder = None
        self.last_result = result
        self._task = None
        self._set_state("idle")
        self.run_finished.emit(result)

    def _flush(self) -> None:
        if self.state != "idle":
            self.tick.emit(self.elapsed_ms())
        if self._recorder is not None:
            try:
                self._recorder.flush()
            except Exception:
                log.exception("could not store run events in history")
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        self.events.emit(fold_events(batch))

    def _on_event(self, event: Event) -> None:
        self._pending.append(event)

    async def wait(self) -> RunResult | None:
        """For scripts and tests: until the current run ends."""
        task = self._task
        if task is not None:
            await asyncio.shield(task)
        return self.last_result


def chat_flow(flow: Flow, agent_id: str, text: str, registry: Registry) -> Flow:
    """A copy of ``flow`` in which a new inject node sends ``text`` into the
    agent and every other source stays quiet."""
    chat = flow.model_copy(deep=True)
    for fnode in chat.nodes:
        spec = registry.spec(fnode.type)
        if spec is not None and spec.source:
            fnode.disabled = True
    agent = chat.node(agent_id)
    if agent is None:
        raise KeyError(agent_id)
    spec = registry.spec(agent.type)
    port = spec.inputs[0].name if spec and spec.inputs else "in"
    chat_id = chat.new_id("chat")
    chat.nodes.append(FlowNode(id=chat_id, type="core.inject", name="Chat",
                               params={"payload": ParamValue(scope=Scope.CUSTOM, value=text)}))
    chat.wires.append(Wire.model_validate({"from": [chat_id, "out"], "to": [agent_id, port]}))
    return chat

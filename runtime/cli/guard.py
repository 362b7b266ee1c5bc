"""A headless run's end (``run``, ``runs rerun``, ``mcp serve``): the
``--events`` file and the history recorder, signals and the deadline
(``_RunGuard``), and the note on approvals nobody could be asked for.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from .base import UsageError, exit_code, log

#: After a signal or past the deadline, how long the run gets to wind down
#: before the process ends anyway (a node stuck in inline work).
HARD_STOP_GRACE = 1.5


def _recording(bus, args):
    """The run's ``--events`` file writer and history recorder (either may
    be None), both subscribed to ``bus``."""
    from runtime.events import JsonlWriter

    writer = None
    if args.events:
        try:
            writer = JsonlWriter(args.events)
        except OSError as exc:
            raise UsageError(f"--events {args.events}: {exc.strerror}") from None
        bus.subscribe(writer)
    return writer, (None if args.no_history else _history_recorder(bus))


def _history_recorder(bus):
    """A recorder of this run in the history database (flushed at every
    stats tick, so a killed run keeps what it did), or None if the history
    cannot be opened: a run must not fail for want of its record."""
    from runtime.history import History

    try:
        recorder = History().recorder()
    except Exception as exc:  # noqa: BLE001 - sqlite, permissions, a full disk
        log.warning("run history unavailable: %s", exc)
        return None
    bus.subscribe(recorder)

    def flush_on_stats(event) -> None:
        if event.type == "stats":
            recorder.flush()

    bus.subscribe(flush_on_stats)
    return recorder


def _close_recorder(recorder) -> None:
    try:
        recorder.close()
        recorder.history.prune()
        recorder.history.close()
    except Exception as exc:  # noqa: BLE001
        log.warning("could not store the run in history: %s", exc)


class _RunGuard:
    """Ends a headless run on time, whatever it does.

    SIGINT and SIGTERM stop the engine (the run winds down and writes its
    run.finished). The handlers are Python-level, so they run even while a
    node keeps the event loop busy; if the run has not ended ``HARD_STOP_GRACE``
    seconds after a signal or after its deadline (a node stuck in inline
    work), a watchdog thread writes run.finished itself, flushes the events
    file and the history, and ends the process with the run's exit code."""

    def __init__(self, engine, writer, recorder) -> None:
        self.engine = engine
        self.writer = writer
        self.recorder = recorder
        self.signal: int | None = None
        self._timer = None
        self._loop: Any = None  # the run's event loop, once it runs
        self._previous: dict[int, Any] = {}
        self._finished = False

    async def run(self, timeout: float | None):
        import asyncio

        self._loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._on_signal)
        if timeout is not None:
            self._arm(timeout + HARD_STOP_GRACE, "timeout")
        try:
            return await self.engine.run(timeout)
        finally:
            self._finished = True

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal is not None:
            return  # a second Ctrl+C while winding down: the watchdog is armed
        self.signal = signum
        name = signal.Signals(signum).name
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.engine.stop, f"interrupted by {name}")
        self._arm(HARD_STOP_GRACE, "interrupted", f"interrupted by {name}")

    def _arm(self, delay: float, reason: str, message: str = "") -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(delay, self._hard_stop, (reason, message))
        self._timer.daemon = True
        self._timer.start()

    def run_to_end(self, main: Any) -> Any:
        """``asyncio.run(main)`` (a coroutine awaiting ``self.run``), then,
        however it ended, the guard off and the events file and the history
        closed."""
        try:
            import asyncio  # here, not at import: the designer's start needs none

            return asyncio.run(main)
        finally:
            self.disarm()
            if self.writer:
                self.writer.close()
            if self.recorder is not None:
                _close_recorder(self.recorder)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _hard_stop(self, reason: str, message: str) -> None:
        from runtime.engine import STATUS_OF_REASON
        from runtime.events import RunFinished

        if self._finished:
            return
        engine = self.engine
        in_flight = engine.in_flight()
        stuck = _busy_node(engine)
        if stuck:
            in_flight[stuck] = in_flight.get(stuck, 0) + 1
        message = message or ("the run did not stop on time: "
                              f"{f'node {stuck!r}' if stuck else 'a node'} kept the event loop busy")
        event = RunFinished(status=STATUS_OF_REASON[reason], reason=reason,  # type: ignore[arg-type]
                            message=message, in_flight=in_flight, errors=engine.uncaught,
                            run_id=engine.run_id, duration_ms=engine.elapsed_ms())
        try:
            if self.writer is not None:
                self.writer.write_last(event)
            if self.recorder is not None:
                self.recorder.close_from_thread(event)
        except Exception:  # noqa: BLE001 - the process ends either way
            log.debug("could not record the hard stop", exc_info=True)
        finally:
            print(f"switchboard: {message}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(exit_code(reason, in_flight, engine.uncaught, self.signal))


def _busy_node(engine) -> str | None:
    """The node whose code the main thread is running now, if any: what a
    stuck run is stuck in."""
    from runtime.engine import busy_node

    return busy_node(engine, threading.main_thread().ident)


def _say_unasked(approver) -> None:
    """Once per run: calls that needed approval had no terminal to ask on,
    and how to decide without one."""
    from runtime.approval import no_terminal_note

    note = no_terminal_note(approver)
    if note:
        print(f"switchboard: {note}", file=sys.stderr)

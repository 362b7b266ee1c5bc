"""Queue mode in the designer (docs/queue.md): Run > Run on Queue queues the
flow on screen on the workers and shows its run live, as a local one is
shown (the canvas's badges, the inspector, the status bar, then History);
Run > Workers… lists the workers and their load, the runs queued and
running, and watches or cancels one. A watched run of the flow on screen is
shown on it; a run of another flow opens in a window of its own, on that
flow as it runs (designer.running.remote_runs), as an execution of another workflow
opens on its own canvas in n8n. The workers' shared history is listed from
the Workers view too.

A queued run's events come back through its Redis stream, read by a thread
here (``RemoteRun``) and handed to the run session on the GUI thread in
batches, folded like a local run's. Stop cancels the run on whatever worker
runs it. Celery and redis-py are imported only when one of these actions is
used, never when the designer starts."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from runtime.events import RunFinished, RunStarted

from ..control.run_controller import fold_events

log = logging.getLogger(__name__)

BROKER_KEY = "queue/broker"
#: Milliseconds between two batches of a remote run's events on screen.
FLUSH_MS = 100
#: Milliseconds between two refreshes of the Workers view.
REFRESH_MS = 2000


#: Runs watched in this designer that came back finished: run id -> what the
#: Workers view says of it ("finished · ok") while a snapshot taken before
#: its end still lists it (the newest ENDED_KEPT).
ENDED: OrderedDict[str, str] = OrderedDict()
ENDED_KEPT = 200


class _RunEnds(QObject):
    """Tells every open Workers view that a watched run ended, whichever
    window watched it."""

    ended = Signal(str, str)  # run id, its state in words


_run_ends: _RunEnds | None = None


def run_ends() -> _RunEnds:
    global _run_ends
    if _run_ends is None:
        _run_ends = _RunEnds()
    return _run_ends


def note_ended(run_id: str, state: str) -> None:
    ENDED[run_id] = state
    ENDED.move_to_end(run_id)
    while len(ENDED) > ENDED_KEPT:
        ENDED.popitem(last=False)
    run_ends().ended.emit(run_id, state)


def broker() -> str | None:
    """The broker: $SWITCHBOARD_BROKER, else the one the Workers view was
    given last; None: queue mode is off."""
    from runtime.queue import BROKER_ENV, QueueError, broker_url

    try:
        return broker_url(os.environ.get(BROKER_ENV) or QSettings().value(BROKER_KEY, "", str))
    except QueueError:
        return None


class RemoteRun(QObject):
    """Reads one queued run's stream in a thread; its events come out on
    the GUI thread as ``batch`` (folded), its end as ``ended`` (the
    queue.final entry), a lost connection as ``failed``."""

    batch = Signal(list)
    ended = Signal(dict)
    failed = Signal(str)

    def __init__(self, url: str, run_id: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.url = url
        self.run_id = run_id
        self._stop = threading.Event()
        self._pending: list[Any] = []
        self._lock = threading.Lock()
        self._final: dict | None = None
        self._started_seen = False
        self._timer = QTimer(self)
        self._timer.setInterval(FLUSH_MS)
        self._timer.timeout.connect(self._flush)
        self._thread = threading.Thread(target=self._read, name="switchboard-remote-run",
                                        daemon=True)

    def start(self) -> None:
        self._timer.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._timer.stop()

    def _read(self) -> None:
        from runtime.queue import state
        from runtime.queue.events import follow

        try:
            r = state.client(self.url)
            for event, entry in follow(r, self.run_id, stop=self._stop.is_set):
                with self._lock:
                    if event is not None:
                        if isinstance(event, RunStarted):
                            if self._started_seen:
                                continue  # a later attempt's: the run goes on
                            self._started_seen = True
                        self._pending.append(event)
                    if entry is not None and entry.get("type") == "queue.final":
                        self._final = entry
        except Exception as exc:  # noqa: BLE001 - Redis gone: say so on screen
            log.debug("following run %s", self.run_id, exc_info=True)
            if not self._stop.is_set():
                try:
                    self.failed.emit(str(exc))
                except RuntimeError:
                    pass  # its window closed meanwhile

    def _flush(self) -> None:
        with self._lock:
            events, self._pending = self._pending, []
            final, self._final = self._final, None
        if events:
            self.batch.emit(fold_events(events))
        if final is not None:
            self._timer.stop()
            self.ended.emit(final)


class QueueActions(QObject):
    """Run on Queue, Workers…, and the remote run on screen."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.session = session
        self.remote: RemoteRun | None = None
        self.finished: RunFinished | None = None
        self._history_sink: Any = None
        self._started = 0.0
        self._worker = ""  # the worker running the shown run, once its run.started came
        self.workers_dialog: WorkersDialog | None = None
        #: Windows showing runs of other flows (remote_runs.RunWindow).
        self.windows: list[Any] = []
        self.run_action = QAction("Run on &Queue", self)
        self.run_action.setToolTip("Queue the flow on the workers (queue mode) and show its run "
                                   "here as it happens")
        self.run_action.triggered.connect(self.run_on_queue)
        self.workers_action = QAction("&Workers…", self)
        self.workers_action.setToolTip("Queue mode: the workers and their load, the queued and "
                                       "running runs")
        self.workers_action.triggered.connect(self.show_workers)
        menu = session.run_menu()
        if menu is not None:
            menu.addSeparator()
            menu.addAction(self.run_action)
            menu.addAction(self.workers_action)
        session.stop_action.triggered.connect(self.cancel)
        self._tick = QTimer(self)
        self._tick.setInterval(250)
        self._tick.timeout.connect(self._show_elapsed)
        self.run_action.setEnabled(True)

    @property
    def watching(self) -> bool:
        return self.remote is not None

    # -- commands -----------------------------------------------------------------------
    def run_on_queue(self) -> str | None:
        """Queue the flow on screen; its run id, or None (said why)."""
        session = self.session
        url = broker()
        if url is None:
            QMessageBox.information(
                session.window, "Run on Queue",
                "Queue mode is off: set SWITCHBOARD_BROKER (e.g. redis://127.0.0.1:6379/0), "
                "or give the broker in Run > Workers…, and start workers with "
                "`switchboard worker`.")
            return None
        if session.controller.is_running or self.watching:
            return None
        doc = session.document
        file = str(doc.path) if doc.path else ""
        if session.controller.check(doc.flow, file):
            return None  # refused: the problems are shown, as for Run
        try:
            from runtime.queue import check_installed, state
            from runtime.queue.app import make_app
            from runtime.queue.submit import enqueue, payload_for

            check_installed()
            payload = payload_for(doc.flow, file or f"{doc.flow.name}.flow.json",
                                  trace=session.record_action.isChecked())
            run_id = enqueue(make_app(url), state.client(url), payload)
        except Exception as exc:  # noqa: BLE001 - no broker, no extra: a message, not a crash
            QMessageBox.warning(session.window, "Run on Queue", f"Could not queue the run: {exc}")
            return None
        self.watch(run_id, url)
        return run_id

    def watch(self, run_id: str, url: str | None = None) -> None:
        """Show a queued run of the flow on screen live on it."""
        url = url or broker()
        if url is None or self.session.controller.is_running:
            return
        if self.remote is not None:
            self.remote.stop()
        session = self.session
        self.finished = None
        self._started = time.monotonic()
        self._worker = ""
        session.watch_started(run_id)
        self.run_action.setEnabled(False)
        self._history_sink = None
        if session.history is not None:
            from runtime.queue.submit import HistorySink

            path = str(session.document.path) if session.document.path else ""
            self._history_sink = HistorySink(session.history, path)
        self.remote = RemoteRun(url, run_id, self)
        self.remote.batch.connect(self._on_batch)
        self.remote.ended.connect(self._on_ended)
        self.remote.failed.connect(self._on_failed)
        self.remote.start()
        self._tick.start()
        self._show_elapsed()

    def watch_run(self, run_id: str, url: str | None = None) -> Any:
        """Watch a run picked in the Workers view: here when it runs the flow
        on screen (the same content) and nothing else is shown, else in a
        window of its own on its flow as it runs; that window, or None (said
        why)."""
        url = url or broker()
        if url is None:
            return None
        from runtime.engine import flow_hash
        from runtime.queue import state

        try:
            r = state.client(url)
            digest, flow = state.flow_of(r, run_id)
            worker = state.info(r, run_id).get("worker", "")
        except Exception as exc:  # noqa: BLE001 - Redis gone: a message, not a crash
            QMessageBox.warning(self.session.window, "Watch", f"Could not read the run: {exc}")
            return None
        session = self.session
        busy = session.controller.is_running or self.watching
        if digest and not busy and digest == flow_hash(session.document.flow.to_json()):
            self.watch(run_id, url)
            return session.window
        if flow is None:
            QMessageBox.information(
                session.window, "Watch",
                f"Run {run_id} cannot be shown: its flow is no longer kept in Redis.")
            return None
        from .remote_runs import open_run_window

        window = open_run_window(self, flow, run_id, worker)
        if window is not None:
            window.run_session.queue.watch(run_id, url)
        return window

    def stop_watching(self) -> None:
        """Stop following the shown run (its window closes); it goes on."""
        self._tick.stop()
        if self.remote is not None:
            self.remote.stop()
            self.remote = None
        if self._history_sink is not None:
            self._history_sink.close()
            self._history_sink = None

    def show_shared_history(self) -> Any:
        from .remote_runs import SharedHistoryDialog

        dialog = SharedHistoryDialog(self, self.session.window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def cancel(self) -> None:
        """Stop: cancel the run on whatever worker runs it."""
        if self.remote is None:
            return
        url = broker()
        if url is None:
            return
        from runtime.queue import state

        try:
            state.cancel(state.client(url), self.remote.run_id, "by the designer")
        except Exception as exc:  # noqa: BLE001
            QMessageBox.warning(self.session.window, "Stop", f"Could not cancel the run: {exc}")
            return
        self.session.show_status("stopping", "Cancelling the queued run…")

    def show_workers(self) -> WorkersDialog:
        if self.workers_dialog is None:
            self.workers_dialog = WorkersDialog(self, self.session.window)
        self.workers_dialog.show()
        self.workers_dialog.raise_()
        self.workers_dialog.refresh()
        return self.workers_dialog

    # -- the remote run on screen ----------------------------------------------------------
    def _on_batch(self, events: list) -> None:
        for event in events:
            if isinstance(event, RunFinished):
                self.finished = event
            elif isinstance(event, RunStarted) and event.worker:
                self._worker = event.worker
            if self._history_sink is not None:
                try:
                    self._history_sink(event)
                except Exception:  # noqa: BLE001 - the run goes on screen anyway
                    log.exception("could not record the queued run")
        self.session.feed(events)

    def _on_ended(self, entry: dict) -> None:
        remote = self.remote
        self.stop_watching()
        from .remote_runs import run_result

        self.run_action.setEnabled(True)
        result = run_result(self.finished, entry)
        if remote is not None:
            # The Workers view says so now, not at its next look at Redis.
            note_ended(remote.run_id, f"finished · {result.status}")
        self.session.watch_finished(result)

    def _on_failed(self, text: str) -> None:
        self._on_ended({"status": "error", "reason": "failed", "errors": 1,
                        "message": f"lost the queued run's events: {text}"})

    def _show_elapsed(self) -> None:
        if self.remote is None:
            return
        seconds = time.monotonic() - self._started
        where = self._worker or "the queue"
        self.session.show_status("running", f"Running on {where}… {seconds:.1f} s "
                                            f"(run {self.remote.run_id})")


class WorkersDialog(QDialog):
    """The workers and their load, the runs queued and running; watch or
    cancel one. Refreshed every REFRESH_MS in a thread (workers get a
    second to answer)."""

    snapshot_ready = Signal(object)

    def __init__(self, actions: QueueActions, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Workers")
        self.actions = actions
        self._busy = False
        self._app: Any = None
        self._app_url = ""
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Broker:"))
        self.broker_edit = QLineEdit(broker() or "")
        self.broker_edit.setPlaceholderText("redis://127.0.0.1:6379/0")
        self.broker_edit.setReadOnly(bool(os.environ.get("SWITCHBOARD_BROKER")))
        self.broker_edit.editingFinished.connect(self._broker_edited)
        row.addWidget(self.broker_edit, 1)
        layout.addLayout(row)
        self.summary = QLabel("…")
        layout.addWidget(self.summary)
        self.workers = _table(["Worker", "Busy", "Runs taken"])
        # A few workers take a few rows; the runs get the height.
        self.workers.setMaximumHeight(self.workers.horizontalHeader().sizeHint().height()
                                      + 3 * self.workers.verticalHeader().defaultSectionSize() + 4)
        layout.addWidget(self.workers)
        self.runs = _table(["Run", "State", "Flow", "Worker"])
        self.runs.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.runs.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        layout.addWidget(self.runs, 1)
        buttons = QDialogButtonBox()
        self.watch_button = QPushButton("Watch")
        self.watch_button.setToolTip("Show the selected run live: on the flow on screen when it "
                                     "runs that flow, else in a window of its own")
        self.cancel_button = QPushButton("Cancel Run")
        self.shared_button = QPushButton("Shared History…")
        self.shared_button.setToolTip("The runs the workers recorded in their shared history "
                                      "(switchboard worker --history PATH)")
        buttons.addButton(self.watch_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.shared_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        self.watch_button.clicked.connect(self._watch)
        self.runs.itemDoubleClicked.connect(lambda *_: self._watch())
        self.cancel_button.clicked.connect(self._cancel)
        self.shared_button.clicked.connect(self.actions.show_shared_history)
        layout.addWidget(buttons)
        self.snapshot_ready.connect(self._show)
        self._snap: dict | None = None  # the last snapshot shown
        self._again = False  # look again once the snapshot being taken comes
        run_ends().ended.connect(self._on_run_ended)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.resize(640, 420)

    def _broker_edited(self) -> None:
        QSettings().setValue(BROKER_KEY, self.broker_edit.text().strip())
        self.refresh()

    def refresh(self) -> None:
        url = broker()
        if url is None:
            self.summary.setText("Queue mode is off: give the broker (a Redis URL) above.")
            return
        if self._busy or not self.isVisible():
            return
        self._busy = True
        threading.Thread(target=self._snapshot, args=(url,), daemon=True).start()

    def _snapshot(self, url: str) -> None:
        try:
            from runtime.queue import check_installed, state
            from runtime.queue.app import make_app
            from runtime.queue.status import snapshot

            check_installed()
            if self._app is None or self._app_url != url:
                self._app, self._app_url = make_app(url), url
            snap: Any = snapshot(url, state.client(url), app=self._app)
        except Exception as exc:  # noqa: BLE001 - shown in the dialog
            snap = exc
        self.snapshot_ready.emit(snap)

    def _show(self, snap: Any) -> None:
        self._busy = False
        if isinstance(snap, Exception):
            self.summary.setText(f"Cannot reach the broker: {snap}")
            return
        self._render(snap)
        if self._again:  # a run ended while this snapshot was being taken
            self._again = False
            self.refresh()

    def _render(self, snap: dict) -> None:
        self._snap = snap
        # A snapshot taken before a watched run ended still lists it: it is
        # shown as it is now (finished), its worker one run less busy.
        runs = [{**run, "state": ENDED[run["id"]]} if run["id"] in ENDED else run
                for run in snap["runs"]]
        ended = [run for run in snap["runs"] if run["id"] in ENDED
                 and run.get("state") == "running"]
        queued = sum(1 for run in runs if run.get("state") == "queued")
        running = sum(1 for run in runs if run.get("state") == "running")
        self.summary.setText(f"{len(snap['workers'])} worker(s) · {queued} queued · "
                             f"{running} running · {snap['dead_letters']} dead letter(s)")
        self.workers.setRowCount(len(snap["workers"]))
        for i, w in enumerate(snap["workers"]):
            active = max(0, w["active"] - sum(1 for run in ended
                                              if run.get("worker") == w["name"]))
            for j, text in enumerate((w["name"], f"{active} of {w['concurrency']}",
                                      str(w["done"]))):
                self.workers.setItem(i, j, QTableWidgetItem(text))
        selected = self.selected_run()
        self.runs.setRowCount(len(runs))
        for i, run in enumerate(runs):
            for j, text in enumerate((run["id"], run.get("state", ""), run.get("flow", ""),
                                      run.get("worker", ""))):
                self.runs.setItem(i, j, QTableWidgetItem(text))
            if run["id"] == selected:
                self.runs.selectRow(i)

    def _on_run_ended(self, run_id: str, _state: str) -> None:
        """A run watched here came back finished: say so at once, then look
        at Redis again (it has left the runs queued and running)."""
        if self._snap is not None:
            self._render(self._snap)
        self._again = self._busy
        self.refresh()

    def selected_run(self) -> str | None:
        rows = self.runs.selectionModel().selectedRows() if self.runs.selectionModel() else []
        if not rows:
            return None
        item = self.runs.item(rows[0].row(), 0)
        return item.text() if item is not None else None

    def _watch(self) -> None:
        run_id = self.selected_run()
        if run_id:
            self.actions.watch_run(run_id)

    def _cancel(self) -> None:
        run_id = self.selected_run()
        url = broker()
        if not run_id or url is None:
            return
        from runtime.queue import state

        state.cancel(state.client(url), run_id, "by the designer")
        self.refresh()

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        self._timer.stop()
        super().closeEvent(event)

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        self._timer.start()
        super().showEvent(event)


def _table(columns: list[str]) -> QTableWidget:
    """A read-only table whose columns fit their text (a worker's name, a
    run's id) and whose last column takes the rest."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    return table


def install(session: Any) -> QueueActions:
    return QueueActions(session)

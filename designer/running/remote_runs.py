"""Runs of other flows, each on its own canvas (queue mode, docs/queue.md).

A run picked in the Workers view that does not run the flow on screen is
not painted onto it (its node ids would light up the wrong nodes, or none):
it opens in a ``RunWindow`` on its own flow as it runs, taken from the
queue (the flow travels with the run), with its own canvas badges,
inspector and status line, as an execution of another workflow opens on its
own canvas in n8n. The same window shows a run recorded in the workers'
shared history (``SharedHistoryDialog``), replayed from its stored events
onto the flow it kept.

The window is a copy that no file stands behind: the palette and the
properties are put away, nothing is saved unless asked (Save As), and
closing it stops watching, not the run."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
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

from runtime.engine import RunResult
from runtime.events import RunFinished
from runtime.flow import Flow, FlowError, parse_flow

from ..model.document import FlowDocument
from ..panels.inspector.common import fmt_duration

log = logging.getLogger(__name__)

SHARED_KEY = "queue/shared_history"
#: Runs the shared-history list shows (the newest).
SHARED_ROWS = 200


class DesignerWindow(Protocol):
    """What a run window takes from the designer's window class: it is
    built on the class of the window that opened it (``run_window_class``),
    so this module never imports the main window (which reaches it through
    the run session and the queue actions)."""

    palette_dock: Any
    properties_dock: Any
    view: Any
    run_session: Any

    def __init__(self, document: FlowDocument | None = None, *,
                 restore_layout: bool = True) -> None: ...


class RunWindow:
    """One run of a flow that is not the one on screen, on that flow. Mixed
    into the designer's window class by ``run_window_class``."""

    def __init__(self, flow: Flow, title: str) -> None:
        self._title = title  # read by the window's __init__ (the window title)
        super().__init__(FlowDocument(flow), restore_layout=False)  # type: ignore[call-arg]
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # type: ignore[attr-defined]
        self.palette_dock.hide()  # type: ignore[attr-defined]
        self.properties_dock.hide()  # type: ignore[attr-defined]
        self.resize(1280, 800)  # type: ignore[attr-defined]

    def display_name(self) -> str:
        return self._title

    def save_layout(self) -> None:
        """The designer's own window keeps the layout it saved."""

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        queue = getattr(self.run_session, "queue", None)  # type: ignore[attr-defined]
        if queue is not None:
            queue.stop_watching()
        super().closeEvent(event)  # type: ignore[misc]


_run_window_classes: dict[type, type] = {}


def run_window_class(window_class: type[DesignerWindow]) -> type:
    """``RunWindow`` on top of ``window_class`` (the designer's window, or
    the one a run window was opened from: its own base is used), made once."""
    base = window_class
    if issubclass(base, RunWindow):
        base = next(c for c in base.__mro__ if not issubclass(c, RunWindow))
    cls = _run_window_classes.get(base)
    if cls is None:
        cls = type("RunWindow", (RunWindow, base), {"__module__": __name__,
                                                    "__doc__": RunWindow.__doc__})
        _run_window_classes[base] = cls
    return cls


def open_run_window(actions: Any, flow_json: dict, run_id: str, worker: str = "",
                    note: str = "") -> RunWindow | None:
    """A RunWindow on ``flow_json`` (a run's flow as it ran), kept by
    ``actions`` (QueueActions) while it is open; None if the flow cannot be
    read here (said why)."""
    parent = actions.session.window
    try:
        flow = parse_flow(flow_json, file=f"run {run_id}")
    except FlowError as exc:
        QMessageBox.warning(parent, "Show Run", f"The flow of run {run_id} cannot be shown:\n\n"
                            + "\n".join(str(p) for p in exc.problems[:8]))
        return None
    title = f"{flow.name or 'Untitled'} · run {run_id}" + (f" on {worker}" if worker else "") \
        + (f" ({note})" if note else "")
    window = run_window_class(type(parent))(flow, title)
    actions.windows.append(window)
    window.destroyed.connect(
        lambda *_: actions.windows.__setitem__(slice(None),
                                               [w for w in actions.windows if w is not window]))
    window.show()
    QTimer.singleShot(0, window.view.fit_all)
    return window


def run_result(fin: RunFinished | None, entry: dict | None = None) -> RunResult:
    """How a run ended, from its run.finished, else from what the queue
    said of it (a final entry) when none came."""
    if fin is not None:
        return RunResult(status=fin.status, errors=fin.errors, duration_ms=fin.duration_ms,
                         reason=fin.reason, message=fin.message, in_flight=fin.in_flight,
                         usage=fin.usage, cost_usd=fin.cost_usd, tool_cost_usd=fin.tool_cost_usd,
                         failed_tool_calls=fin.failed_tool_calls,
                         offline_requests=fin.offline_requests)
    entry = entry or {}
    return RunResult(status=str(entry.get("status") or "error"),
                     errors=int(entry.get("errors") or 0),
                     reason=str(entry.get("reason") or "failed"),
                     message=str(entry.get("message") or ""))


def show_stored_run(actions: Any, history: Any, run_id: str) -> RunWindow | None:
    """A run of ``history`` on its own flow: its stored events replayed into
    a RunWindow's canvas and inspector. None if the run kept no flow (cut
    off before its end, or still running: watch it from the Workers view)."""
    parent = actions.session.window
    flow = history.flow_of(run_id)
    if flow is None:
        QMessageBox.information(
            parent, "Show Run", f"Run {run_id} kept no copy of its flow: it is still running "
            "(watch it from the Workers view) or was cut off before its end.")
        return None
    started, _last = history.edge_events(run_id)
    window = open_run_window(actions, flow, run_id, getattr(started, "worker", "") or "",
                             "shared history")
    if window is None:
        return None
    events = history.events(run_id)
    fin = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    session = window.run_session
    session.watch_started(run_id)
    session.feed(events)
    info = history.run(run_id)
    session.watch_finished(run_result(fin, {"status": info.status if info else "error"}))
    return window


def shared_history_path() -> str:
    """$SWITCHBOARD_SHARED_HISTORY, else the path given here last."""
    from runtime.queue.shared import SHARED_HISTORY_ENV

    return os.environ.get(SHARED_HISTORY_ENV) or QSettings().value(SHARED_KEY, "", str)


class SharedHistoryDialog(QDialog):
    """The runs the workers recorded in their shared history, newest first,
    with the worker that ran each; Open shows one on its own flow."""

    COLUMNS = ("Run", "Started", "Flow", "Status", "Worker", "Duration")

    def __init__(self, actions: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from runtime.queue.shared import SHARED_HISTORY_ENV

        self.setWindowTitle("Shared History")
        self.actions = actions
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("History file:"))
        self.path_edit = QLineEdit(shared_history_path())
        self.path_edit.setPlaceholderText("the workers' --history PATH")
        self.path_edit.setReadOnly(bool(os.environ.get(SHARED_HISTORY_ENV)))
        self.path_edit.editingFinished.connect(self._path_edited)
        row.addWidget(self.path_edit, 1)
        browse = QPushButton("Browse…")
        browse.setEnabled(not self.path_edit.isReadOnly())
        browse.clicked.connect(self._browse)
        row.addWidget(browse)
        layout.addLayout(row)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.itemDoubleClicked.connect(lambda *_: self.open_selected())
        layout.addWidget(self.table, 1)
        buttons = QDialogButtonBox()
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Show the selected run on its flow, as it ran")
        refresh = QPushButton("Refresh")
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(refresh, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        self.open_button.clicked.connect(self.open_selected)
        refresh.clicked.connect(self.refresh)
        layout.addWidget(buttons)
        self.resize(860, 460)
        self.refresh()

    def _path_edited(self) -> None:
        QSettings().setValue(SHARED_KEY, self.path_edit.text().strip())
        self.refresh()

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Shared History", self.path_edit.text(),
                                              "Run history (*.sqlite3 *.db);;All files (*)")
        if path:
            self.path_edit.setText(path)
            self._path_edited()

    def _open(self) -> Any:
        """The history the path names, or None (the summary says why): a
        path that names no file is not made into an empty history."""
        from runtime.history import History

        text = self.path_edit.text().strip()
        if not text:
            self.summary.setText("Give the history file the workers record in "
                                 "(switchboard worker --history PATH).")
            return None
        path = Path(text).expanduser()
        if not path.is_file():
            self.summary.setText(f"No history file at {path}.")
            return None
        try:
            return History(path)
        except Exception as exc:  # noqa: BLE001 - not a database, no permission
            self.summary.setText(f"Cannot read {path} as a run history: {exc}")
            return None

    def refresh(self) -> None:
        import time

        self.table.setRowCount(0)
        history = self._open()
        if history is None:
            return
        with history:
            runs = history.runs(limit=SHARED_ROWS)
            workers = {}
            for info in runs:
                started, _last = history.edge_events(info.id)
                workers[info.id] = getattr(started, "worker", "") or ""
        self.summary.setText(f"{len(runs)} run{'s' * (len(runs) != 1)} in {history.path}"
                             + (f" (the newest {SHARED_ROWS})" if len(runs) >= SHARED_ROWS
                                else ""))
        self.table.setRowCount(len(runs))
        for i, info in enumerate(runs):
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started))
            cells = (info.id, when, info.flow or "Untitled", info.status, workers[info.id] or "—",
                     fmt_duration(info.duration_ms) if info.duration_ms is not None else "—")
            for j, text in enumerate(cells):
                self.table.setItem(i, j, QTableWidgetItem(text))

    def selected_run(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        item = self.table.item(rows[0].row(), 0) if rows else None
        return item.text() if item is not None else None

    def open_selected(self) -> RunWindow | None:
        run_id = self.selected_run()
        history = self._open() if run_id else None
        if history is None:
            return None
        with history:
            return show_stored_run(self.actions, history, run_id)  # type: ignore[arg-type]

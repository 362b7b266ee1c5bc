"""History: past runs from the SQLite history, the designer's and the
terminal's (``switchboard run`` records in the same file); open one
read-only in the inspector, compare two, delete old ones."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QStackedWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from runtime.cost import fmt_usd
from runtime.cost import summary as cost_summary
from runtime.events import RunFinished, read_event

from .common import COLORS, ElidedLabel, color, failed_calls, fmt_duration, hint_label
from .diff_view import CompareDialog, origin_text

if TYPE_CHECKING:
    from runtime.history import History, RunInfo

RUN_ROLE = Qt.ItemDataRole.UserRole + 40
COST_COLUMN = 5
COMPARE_TIP = ("Compare the two selected runs (or a rerun with the run it repeats): status, "
               "cost, each node's messages, tool calls, answers, durations")


def run_costs(history: History, run_ids: list[str]) -> dict[str, RunFinished]:
    """Each finished run's run.finished event, which carries its cost: the
    run's last stored event (kept even past the event cap), one indexed
    look-up per run."""
    out: dict[str, RunFinished] = {}
    db = history._db
    for run_id in run_ids:
        row = db.execute("SELECT type, data FROM events WHERE run_id=? ORDER BY seq DESC LIMIT 1",
                         (run_id,)).fetchone()
        if row and row[0] == "run.finished":
            try:
                event = read_event(row[1])
            except ValueError:
                continue
            if isinstance(event, RunFinished):
                out[run_id] = event
    return out


def _tokens(usage: dict) -> str:
    n = int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
    return f"{n:,} tok" if n else ""


def fmt_started(ts: float) -> str:
    now = time.time()
    local = time.localtime(ts)
    if time.localtime(now)[:3] == local[:3]:
        return time.strftime("Today %H:%M:%S", local)
    return time.strftime("%Y-%m-%d %H:%M:%S", local)


class HistoryTab(QWidget):
    open_requested = Signal(str)  # run id

    def __init__(self, history: History | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Started", "Flow", "Duration", "Status", "Errors", "Cost",
                                   "Events"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        for col, width in enumerate((170, 260, 90, 230, 60, 90, 90)):
            self.tree.setColumnWidth(col, width)
        # The flow's name takes what the others leave: a rerun's origin
        # follows it ("· rerun of 3fa2… from Send Mail"), and is not cut.
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.tree.itemActivated.connect(lambda item: self.open_requested.emit(item.data(0, RUN_ROLE)))
        self.tree.itemSelectionChanged.connect(self._selection_changed)

        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Show this run in the inspector, read-only")
        self.open_button.clicked.connect(self._open_current)
        self.compare_button = QPushButton("Compare…")
        self.compare_button.setToolTip(COMPARE_TIP)
        self.compare_button.clicked.connect(self.compare_selected)
        self.compare_dialog: CompareDialog | None = None
        self._origins: dict[str, str] = {}  # run id -> the run a rerun repeats
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        # The history file: cut in the middle when the tab is narrow, whole
        # in its tooltip (a long path must not widen the window).
        self.where = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)
        self.where.setStyleSheet(f"color: {COLORS['muted']};")
        self.where.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 6)
        bar.setSpacing(8)
        bar.addWidget(self.open_button)
        bar.addWidget(self.compare_button)
        bar.addWidget(self.delete_button)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.where, 1)
        QShortcut(QKeySequence.StandardKey.Delete, self.tree, self.delete_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)

        self.empty = hint_label("No stored runs yet. Every run is kept here, so that you can "
                                "look at it again after closing the designer.")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.tree)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        self.refresh()

    def refresh(self) -> None:
        runs = self.history.runs() if self.history is not None else []
        if self.history is not None:
            self.where.setText(str(self.history.path))
        selected = {i.data(0, RUN_ROLE) for i in self.tree.selectedItems()}
        self.tree.clear()
        spent = run_costs(self.history, [r.id for r in runs]) if self.history is not None else {}
        self._origins.clear()
        for run in runs:
            item = QTreeWidgetItem(self.tree)
            self._fill(item, run, spent.get(run.id))
            self._show_origin(item, run)
            item.setSelected(run.id in selected)
        self.stack.setCurrentIndex(1 if runs else 0)
        self._selection_changed()

    def _fill(self, item: QTreeWidgetItem, run: RunInfo, finished: RunFinished | None) -> None:
        item.setData(0, RUN_ROLE, run.id)
        item.setText(0, fmt_started(run.started))
        item.setToolTip(0, f"run {run.id}")
        item.setText(1, run.flow or "Untitled")
        item.setToolTip(1, run.path)
        item.setText(2, fmt_duration(run.duration_ms))
        failed = finished.failed_tool_calls if finished is not None else 0
        if run.status == "ok" and failed:
            # Completed, but tools failed under an agent: not a green "ok".
            item.setText(3, f"finished with {failed_calls(failed)}")
            item.setForeground(3, QBrush(color("warning")))
        else:
            item.setText(3, run.status)
            item.setForeground(3, QBrush(color(run.status)))
        item.setToolTip(3, item.text(3))
        item.setText(4, str(run.errors) if run.errors else "")
        if finished is not None:
            # USD where every model had a price; "offline" for a scripted
            # model, which costs nothing; else the tokens alone
            offline = finished.offline_requests > 0 and finished.cost_usd is None
            item.setText(COST_COLUMN, "offline" if offline else
                         fmt_usd(finished.cost_usd) or _tokens(finished.usage))
            item.setToolTip(COST_COLUMN, cost_summary(finished.usage, finished.cost_usd,
                                                      finished.tool_cost_usd, offline)
                            or "no LLM request and no paid tool")
        item.setText(6, f"{run.events:,}" + (f" (+{run.dropped:,} not kept)" if run.dropped else ""))

    def _show_origin(self, item: QTreeWidgetItem, run: RunInfo) -> None:
        """After the flow's name: what a rerun repeats ("· rerun of 3fa2…
        from Send Mail"), and which worker ran a run from the queue ("· on
        worker-1@host"); both from its first event, one indexed look-up."""
        started, _last = self.history.edge_events(run.id) if self.history is not None \
            else (None, None)
        if started is None:
            return
        tips = [run.path] if run.path else []
        origin = ""
        if getattr(started, "rerun_of", ""):
            # Named as the designer names nodes, from the flow the rerun ran.
            flow = self.history.flow_of(run.id) if self.history is not None else None
            names = {n.get("id"): n.get("name") for n in (flow or {}).get("nodes", [])}
            origin = origin_text(started, lambda node: f"{names[node]} ({node})"
                                 if names.get(node) and names[node] != node else node)
        if origin:
            self._origins[run.id] = started.rerun_of  # type: ignore[union-attr]
            item.setText(1, f"{item.text(1)} · {origin}")
            tips.append(origin)
        worker = getattr(started, "worker", "") or ""
        if worker:
            item.setText(1, f"{item.text(1)} · on {worker}")
            tips.append(f"Run from the queue by the worker {worker}")
        item.setToolTip(1, "\n".join(tips))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        # Runs from the terminal land in the same history while the
        # designer is open: coming to this tab shows them.
        super().showEvent(event)
        self.refresh()

    def run_ids(self) -> list[str]:
        return [self.tree.topLevelItem(i).data(0, RUN_ROLE)
                for i in range(self.tree.topLevelItemCount())]

    def select_run(self, run_id: str) -> None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, RUN_ROLE) == run_id:
                self.tree.setCurrentItem(item)

    def delete_selected(self) -> None:
        ids = [i.data(0, RUN_ROLE) for i in self.tree.selectedItems()]
        if ids and self.history is not None:
            self.history.delete(ids)
            self.refresh()

    def _open_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None:
            self.open_requested.emit(item.data(0, RUN_ROLE))

    def compare_pair(self) -> tuple[str, str] | None:
        """What Compare compares: two selected runs, the older as A; or one
        selected rerun and the run it repeats (if still in history)."""
        ids = [i.data(0, RUN_ROLE) for i in self.tree.selectedItems()]
        if len(ids) == 1 and ids[0] in self._origins:
            origin = self._origins[ids[0]]
            return (origin, ids[0]) if origin in self.run_ids() else None
        if len(ids) != 2:
            return None
        order = self.run_ids()  # newest first
        older, newer = sorted(ids, key=order.index, reverse=True)
        return older, newer

    def compare_selected(self) -> CompareDialog | None:
        pair = self.compare_pair()
        if pair is None or self.history is None:
            return None
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self.history, *pair, parent=self.window())
        else:
            self.compare_dialog.compare(*pair)
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        return self.compare_dialog

    def _selection_changed(self) -> None:
        n = len(self.tree.selectedItems())
        self.compare_button.setEnabled(self.compare_pair() is not None)
        self.open_button.setEnabled(n == 1)
        self.delete_button.setEnabled(n > 0)
        self.delete_button.setText(f"Delete {n}" if n > 1 else "Delete")

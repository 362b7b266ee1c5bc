"""File > Import > Node-RED Flow…: a Node-RED export opened as a new,
unsaved flow (runtime.importers), and a dialog with the importer's table
(per Node-RED type: mapped, to review, placeholders)."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
)

log = logging.getLogger(__name__)

NODE_RED_FILTER = "Node-RED exports (*.json);;All files (*)"
COLUMNS = ("Node-RED type", "Mapped", "Review", "Placeholder")


def add_import_menu(window: Any, file_menu: QMenu) -> QMenu:
    """The File menu's Import submenu (one entry per importer)."""
    menu = file_menu.addMenu("&Import")
    window.import_node_red_action = menu.addAction("&Node-RED Flow…",
                                                   lambda: import_node_red_dialog(window))
    window.import_node_red_action.setStatusTip("Open a Node-RED export (flows.json) as a new "
                                               "flow")
    return menu


def import_node_red_dialog(window: Any) -> bool:
    start = str(window.document.dialog_folder(window.recent_files()))
    path, _ = QFileDialog.getOpenFileName(window, "Import Node-RED Flow", start,
                                          NODE_RED_FILTER)
    if not path:
        return False
    return import_node_red_file(window, path)


def import_node_red_file(window: Any, path: str | Path) -> bool:
    """Import ``path`` into ``window`` as a new unsaved flow; show the table.
    Any problem is a message naming it, never a traceback."""
    from runtime.importers import NodeRedImportError, read_node_red

    if not window.maybe_save():
        return False
    path = Path(path)
    try:
        report = read_node_red(path)
    except NodeRedImportError as exc:
        QMessageBox.warning(window, "Cannot import Node-RED flow", str(exc))
        return False
    except Exception as exc:  # noqa: BLE001 - a bug of ours: said plainly, logged in full
        log.exception("importing %s", path)
        QMessageBox.warning(window, "Cannot import Node-RED flow",
                            f"“{path.name}” could not be imported: {exc}")
        return False
    doc = window.document
    doc.reset(report.flow, None)
    doc.undo_stack.resetClean()  # new and unsaved: closing it asks to save
    window.scene.clearSelection()
    window.view.fit_readable()
    dialog = ImportReportDialog(report, path.name, window)
    dialog.node_chosen.connect(lambda node_id: _show_node(window, node_id))
    window.import_report_dialog = dialog
    dialog.show()
    return True


def _show_node(window: Any, node_id: str) -> None:
    item = window.scene.item_for_node(node_id)
    if item is None:
        return
    window.scene.clearSelection()
    item.setSelected(True)
    window.view.centerOn(item)


def review_items(flow: Any) -> list[tuple[str, str]]:
    """(node id, line) for every REVIEW / PLACEHOLDER line of the nodes'
    notes: what a person should look at after the import."""
    out = []
    inner = [(f"subflows.{d.name}/", d.nodes) for d in getattr(flow, "subflows", ())]
    for prefix, nodes in [("", flow.nodes)] + inner:  # a subflow's: subflows.NAME/<id>
        for n in nodes:
            for line in (n.notes or "").splitlines():
                if "REVIEW" in line or line.startswith("PLACEHOLDER"):
                    out.append((prefix + n.id, line))
    return out


class ImportReportDialog(QDialog):
    """What became of each Node-RED type, and what to do next: a table per
    type, and a list of what to review (the nodes' notes), where a click
    selects the node on the canvas."""

    node_chosen = Signal(str)

    def __init__(self, report: Any, name: str, parent: Any = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Imported {name}")
        self.setObjectName("importReport")
        rows = sorted(report.table.items())
        totals = [sum(c[k] for _, c in rows) for k in ("mapped", "review", "placeholder")]
        summary = (f"<b>{html.escape(name)}</b>: {report.total()} Node-RED entries → "
                   f"{len(report.flow.nodes)} nodes, {len(report.flow.wires)} wires.<br>"
                   f"{totals[0]} mapped, {totals[1]} to review (the To review tab), "
                   f"{totals[2]} placeholder{'s' * (totals[2] != 1)}")
        if totals[2]:
            summary += " — the flow does not run until they are replaced."
        else:
            summary += "."
        label = QLabel(summary)
        label.setWordWrap(True)
        self.table = QTableWidget(len(rows) + 1, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.verticalHeader().setDefaultSectionSize(
            self.table.fontMetrics().height() + 8)
        for r, (t, counts) in enumerate(rows + [("Total", None)]):
            values = [t] + ([str(counts[k]) for k in ("mapped", "review", "placeholder")]
                            if counts is not None else [str(v) for v in totals])
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                if col:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if counts is None:
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                self.table.setItem(r, col, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumWidth(420)
        self.table.setCurrentCell(-1, -1)
        height = self.table.horizontalHeader().height() + 4 + sum(
            self.table.rowHeight(r) for r in range(self.table.rowCount()))
        self.table.setMinimumHeight(min(height, 560))
        self.todo = QListWidget(self)
        self.todo.setWordWrap(True)
        names = {n.id: n.name or n.id for n in report.flow.nodes}
        names.update((f"subflows.{d.name}/{n.id}", n.name or n.id)
                     for d in report.flow.subflows for n in d.nodes)
        for node_id, line in review_items(report.flow):
            item = QListWidgetItem(f"{names[node_id]} ({node_id}): {line}")
            item.setData(Qt.ItemDataRole.UserRole, node_id)
            item.setToolTip(line)
            self.todo.addItem(item)
        self.todo.itemClicked.connect(
            lambda item: self.node_chosen.emit(item.data(Qt.ItemDataRole.UserRole)))
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.table, "By Node-RED type")
        self.tabs.addTab(self.todo, f"To review ({self.todo.count()})")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok, self)
        buttons.accepted.connect(self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.tabs)
        for w in report.warnings[:5]:
            note = QLabel(f"⚠ {html.escape(w)}")
            note.setWordWrap(True)
            layout.addWidget(note)
        layout.addWidget(buttons)
        self.summary = label

    def rows(self) -> list[list[str]]:
        return [[self.table.item(r, c).text() for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]

"""Run > Model Prices…: the price table that turns tokens into USD.

Every model the shipped table (resources/prices.json) knows, with the
user's own entries over it ($SWITCHBOARD_DATA_DIR/prices.json). A row the
user edits or adds is theirs ("yours" in the last column) and is what Save
writes; "Reset" gives an edited shipped model its shipped price back. Wrong
input is named in the dialog (which model, which field) and nothing is
written until every row is right."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from runtime import cost

COLUMNS = ["Model", "Input $/M", "Output $/M", "Cached $/M", "From"]
FIELDS = ("input", "output", "cached")
SHIPPED, YOURS, EDITED = "shipped", "yours", "yours (edited)"


def _fmt(value: Any) -> str:
    """Cents as prices are written (0.60, 10.00); finer prices as they are."""
    if value is None:
        return ""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


class PricesDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model Prices")
        self.resize(720, 520)
        intro = QLabel("USD per million tokens. A run's cost uses the price of the model name "
                       "the agent was given, exactly; a model not listed is shown in tokens "
                       "only. Your rows are kept in "
                       f"<code>{cost.user_prices_path()}</code> and win over the shipped ones.")
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c8504a;")
        self.add_button = QPushButton("Add Model")
        self.add_button.clicked.connect(self.add_row)
        self.remove_button = QPushButton("Remove / Reset")
        self.remove_button.setToolTip("Remove a model you added; give an edited shipped model "
                                      "its shipped price back")
        self.remove_button.clicked.connect(self.remove_selected)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                   | QDialogButtonBox.StandardButton.Close)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        self.save_button = buttons.button(QDialogButtonBox.StandardButton.Save)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        row.addWidget(buttons)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.problem)
        layout.addLayout(row)
        self._shipped: dict[str, dict[str, float]] = {}
        self._filling = False
        self.table.itemChanged.connect(self._changed)
        self.refresh()

    # -- filling ------------------------------------------------------------
    def refresh(self) -> None:
        """Read both tables again (the file may have changed meanwhile)."""
        self._shipped = cost.shipped_prices()
        yours = cost.user_prices()
        self._filling = True
        self.table.setRowCount(0)
        for model in sorted(set(self._shipped) | set(yours), key=str.lower):
            entry = yours.get(model) or self._shipped[model]
            origin = SHIPPED if model not in yours else (EDITED if model in self._shipped
                                                         else YOURS)
            self._append(model, entry, origin)
        self._filling = False
        self.problem.clear()

    def _append(self, model: str, entry: dict[str, Any], origin: str) -> int:
        r = self.table.rowCount()
        self.table.insertRow(r)
        name = QTableWidgetItem(model)
        if model in self._shipped:  # a shipped model is edited, not renamed
            name.setFlags(name.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.table.setItem(r, 0, name)
        for col, key in enumerate(FIELDS, start=1):
            item = QTableWidgetItem(_fmt(entry.get(key)))
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(r, col, item)
        src = QTableWidgetItem(origin)
        src.setFlags(src.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.table.setItem(r, 4, src)
        return r

    def _changed(self, item: QTableWidgetItem) -> None:
        self.problem.setStyleSheet("color: #c8504a;")
        if self._filling or item.column() == 4:
            return
        r = item.row()
        model = self.table.item(r, 0).text().strip()
        self._filling = True
        self.table.item(r, 4).setText(EDITED if model in self._shipped else YOURS)
        self._filling = False
        self.problem.clear()

    # -- editing ------------------------------------------------------------
    def add_row(self) -> None:
        self._filling = True
        r = self._append("", {}, YOURS)
        self._filling = False
        self.table.setCurrentCell(r, 0)
        self.table.editItem(self.table.item(r, 0))

    def remove_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedItems()}, reverse=True)
        for r in rows:
            model = self.table.item(r, 0).text().strip()
            if model in self._shipped:
                self._filling = True
                for col, key in enumerate(FIELDS, start=1):
                    self.table.item(r, col).setText(_fmt(self._shipped[model].get(key)))
                self.table.item(r, 4).setText(SHIPPED)
                self._filling = False
            else:
                self.table.removeRow(r)

    # -- reading back ---------------------------------------------------------
    def entries(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The user's rows (edited shipped ones and added ones) as the file
        keeps them, or the first problem: which row, which field."""
        out: dict[str, dict[str, Any]] = {}
        names: set[str] = set()
        for r in range(self.table.rowCount()):
            model = self.table.item(r, 0).text().strip()
            if model and model in names:
                return {}, f"{model} is listed twice"
            names.add(model)
            if self.table.item(r, 4).text() == SHIPPED:
                continue
            entry: dict[str, Any] = {}
            for col, key in enumerate(FIELDS, start=1):
                text = self.table.item(r, col).text().strip().lstrip("$")
                if not text and key == "cached":
                    continue
                try:
                    entry[key] = float(text)
                except ValueError:
                    who = model or f"row {r + 1}"
                    return {}, (f"{who}: {key} must be a number of USD per million tokens, "
                                f"not '{text[:40]}'" if text else f"{who}: {key} is empty")
            problem = cost.price_problem(model, entry)
            if problem:
                return {}, (f"row {r + 1}: {problem}" if not model else problem)
            if entry != self._shipped.get(model):
                out[model] = entry
        return out, None

    def save(self) -> bool:
        models, problem = self.entries()
        if problem is None:
            try:
                cost.save_user_prices(models)
            except (OSError, ValueError) as exc:
                problem = f"Could not save the prices: {exc}"
        if problem is not None:
            self.problem.setStyleSheet("color: #c8504a;")
            self.problem.setText(problem)
            return False
        self.refresh()
        self.problem.setText(f"Saved {len(models)} price{'s' if len(models) != 1 else ''} of "
                             "yours; the next run uses them.")
        self.problem.setStyleSheet("color: #3f9b5b;")
        return True

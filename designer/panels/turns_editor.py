"""The scripted provider's turns as a small table instead of raw JSON.

One row is one reply of the pretend model: either a text answer or a call
of one of the agent's tools with JSON arguments. Turn *n* answers the
agent's *n*-th request, as ``runtime.agent.scripted`` plays them; a row
added with "Call in same turn" joins the turn above it, which is how one
answer makes several tool calls at once (or says something and calls).

Use from the properties panel::

    editor = TurnsEditor(value, tool_names=["send_email"], parent=panel)
    editor.changed.connect(lambda script: ...)   # the whole script, a list
    editor.set_tool_names([...])                 # when the agent's wiring changes

``value()`` (and every ``changed``) is exactly the ``script`` JSON the
scripted provider reads: ``[{"text": ...} | {"tool_calls": [{"name", "arguments"}]}]``.
Arguments that are not a JSON object are kept as the text typed, which the
provider hands the agent as it is (the way a model sends malformed JSON);
the row says so, in the error colour."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemDelegate,
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..look import theme

TEXT = "Text"
_ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # per row: {"join": bool, "turn": {...}, "call": {...}}
_COL_TURN, _COL_REPLY, _COL_CONTENT = range(3)
MAX_ROW_LINES = 4
MAX_TABLE_H = 320
HINT = ("Turn n answers the agent's n-th request. In a text, {prompt} stands for the "
        "prompt and {last_result} for the last tool result.")


def make_turns_editor(value: Any, tool_names: list[str],
                      parent: QWidget | None = None) -> TurnsEditor:
    """The editor of an agent's ``script`` param: ``value`` is the param's
    current value (a list of turns, or None for none), ``tool_names`` the
    names of the tools wired to the agent (offered as calls). Connect
    ``changed(list)`` to store the new script."""
    return TurnsEditor(value, tool_names, parent)


def _dump_arguments(args: Any) -> str:
    if isinstance(args, str):
        return args
    if args in (None, {}):
        return ""
    return json.dumps(args, ensure_ascii=False)


def _parse_arguments(text: str) -> tuple[Any, str | None]:
    """The arguments to store, and a warning when they are not an object."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return text, (f"Not JSON (column {exc.colno}: {exc.msg}); the agent gets this text "
                      "as it is, like malformed JSON from a model")
    if not isinstance(value, dict):
        return text, "Arguments are a JSON object, e.g. {\"to\": \"john@example.com\"}"
    return value, None


class TurnsEditor(QWidget):
    """A table of scripted turns; ``changed(list)`` after every edit, with
    the whole script."""

    changed = Signal(list)

    def __init__(self, value: Any = None, tool_names: list[str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("turnsEditor")
        self._tool_names = list(tool_names or [])
        self._loading = False

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)

        self.table = QTableWidget(0, 3, self)
        self.table.setObjectName("turnsTable")
        # Titles that fit a properties dock of ~280 px (a longer one was cut
        # at both ends); the tooltips say the rest.
        self.table.setHorizontalHeaderLabels(["#", "Reply", "Text or arguments"])
        for col, tip in ((_COL_TURN, "The turn: the agent's n-th request gets turn n"),
                         (_COL_REPLY, "What the pretend model does: answer with text, or "
                                      "call one of the agent's tools"),
                         (_COL_CONTENT, "The text of the answer, or the call's arguments as "
                                        "a JSON object")):
            self.table.horizontalHeaderItem(col).setToolTip(tip)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                   | QAbstractItemView.EditTrigger.EditKeyPressed
                                   | QAbstractItemView.EditTrigger.AnyKeyPressed)
        self.table.setWordWrap(True)  # a call's arguments read whole, over a few lines
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(_COL_TURN, QHeaderView.ResizeMode.Fixed)
        header.setSectionResizeMode(_COL_REPLY, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(_COL_CONTENT, QHeaderView.ResizeMode.Stretch)
        header.setHighlightSections(False)
        # Too narrow, a title keeps its start and ends in "…" (centred, it
        # was cut at both ends: "t or arguments (JSO").
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        header.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setColumnWidth(_COL_TURN, 28)
        self.table.setColumnWidth(_COL_REPLY, 124)
        self.table.verticalHeader().setDefaultSectionSize(28)
        self.table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        layout.addWidget(self.table)

        buttons = QHBoxLayout()
        buttons.setSpacing(4)
        self.add_text_button = self._button("+ Text", "Add a turn that answers with text",
                                            lambda: self.add_turn(TEXT))
        self.add_call_button = self._button("+ Call", "Add a turn that calls a tool",
                                            lambda: self.add_turn(self._tool_names[0]))
        self.add_joined_button = self._button(
            "+ Same turn", "Add a tool call to the selected row's turn (one answer, several "
            "calls)", self.add_call_to_turn)
        for b in (self.add_text_button, self.add_call_button, self.add_joined_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.up_button = self._button("↑", "Move the selected row up", lambda: self.move_row(-1))
        self.down_button = self._button("↓", "Move the selected row down",
                                        lambda: self.move_row(1))
        self.remove_button = self._button("✕", "Remove the selected row", self.remove_row)
        for b in (self.up_button, self.down_button, self.remove_button):
            b.setFixedWidth(22)  # the row fits a properties dock of ~270 px inside
            buttons.addWidget(b)
        layout.addLayout(buttons)

        self.status = QLabel(self)
        self.status.setObjectName("turnsStatus")
        self.status.setWordWrap(True)
        self.status.hide()
        layout.addWidget(self.status)
        self.hint = QLabel(HINT, self)
        self.hint.setObjectName("muted")
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: palette(placeholder-text); font-size: 11px;")
        layout.addWidget(self.hint)

        self.set_value(value)

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(False)
        b.clicked.connect(lambda checked=False: slot())
        return b

    # -- the value ----------------------------------------------------------------
    def set_value(self, value: Any) -> None:
        """Show a script; anything but a list shows no turns and says so."""
        self._loading = True
        try:
            self.table.setRowCount(0)
            problem = None
            if value is not None and not isinstance(value, list):
                problem = "The script is not a list of turns; it shows no turns here."
                value = []
            for turn in value or []:
                if not isinstance(turn, dict):
                    problem = "A turn that is not an object was left out."
                    continue
                extra = {k: v for k, v in turn.items() if k not in ("text", "tool_calls")}
                calls = turn.get("tool_calls") or []
                first = True
                if "text" in turn or not calls:
                    self._insert_row(self.table.rowCount(), TEXT, str(turn.get("text", "")),
                                     join=False, turn=extra)
                    first = False
                for call in calls if isinstance(calls, list) else []:
                    if not isinstance(call, dict):
                        continue
                    name = str(call.get("name", ""))
                    extra_call = {k: v for k, v in call.items() if k not in ("name", "arguments")}
                    self._insert_row(self.table.rowCount(), name,
                                     _dump_arguments(call.get("arguments")), join=not first,
                                     turn=extra if first else {}, call=extra_call)
                    first = False
        finally:
            self._loading = False
        self._refresh(problem)

    def value(self) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for row in range(self.table.rowCount()):
            meta = self._meta(row)
            if not meta["join"] or not turns:
                turns.append(dict(meta.get("turn") or {}))
            turn = turns[-1]
            reply = self.reply(row)
            content = self._content(row)
            if reply == TEXT:
                turn["text"] = f"{turn['text']}\n{content}" if "text" in turn else content
            else:
                call: dict[str, Any] = {"name": reply}
                call["arguments"], _ = _parse_arguments(content)
                call.update(meta.get("call") or {})
                turn.setdefault("tool_calls", []).append(call)
        return turns

    def set_tool_names(self, names: list[str]) -> None:
        """The tools wired to the agent; rows calling others keep their name,
        marked as not wired."""
        self._tool_names = list(names)
        for row in range(self.table.rowCount()):
            self._fill_combo(self._combo(row), self.reply(row))
        self._refresh()

    def tool_names(self) -> list[str]:
        return list(self._tool_names)

    # -- rows -------------------------------------------------------------------------
    def reply(self, row: int) -> str:
        """"Text" or the name of the tool the row calls."""
        combo = self._combo(row)
        data = combo.currentData() if combo is not None else TEXT
        return data if isinstance(data, str) else TEXT

    def turn_of(self, row: int) -> int:
        """The 1-based turn a row belongs to."""
        n = 0
        for r in range(row + 1):
            if r == 0 or not self._meta(r)["join"]:
                n += 1
        return n

    def add_turn(self, reply: str = TEXT) -> int:
        """Append a row that starts a new turn; returns its row."""
        self._finish_editing()
        row = self.table.rowCount()
        self._insert_row(row, reply, "", join=False)
        return self._after_insert(row)

    def add_call_to_turn(self) -> int:
        """Add a tool call after the selected row, in the same turn."""
        self._finish_editing()
        if not self._tool_names:
            return -1
        current = self.current_row()
        if current < 0:
            current = self.table.rowCount() - 1
        if current < 0:
            return self.add_turn(self._tool_names[0])
        row = current + 1
        while row < self.table.rowCount() and self._meta(row)["join"]:
            row += 1
        self._insert_row(row, self._tool_names[0], "", join=True)
        return self._after_insert(row)

    def _after_insert(self, row: int) -> int:
        self.table.selectRow(row)
        self._refresh()
        self._emit()
        # Ready to type: the text, or the arguments of the call.
        self.table.setCurrentCell(row, _COL_CONTENT)
        self.table.editItem(self.table.item(row, _COL_CONTENT))
        return row

    def remove_row(self) -> None:
        self._finish_editing()
        row = self.current_row()
        if row < 0:
            return
        if row + 1 < self.table.rowCount() and not self._meta(row)["join"]:
            # The next row of the same turn now starts it, keeping its extras.
            nxt = self._meta(row + 1)
            if nxt["join"]:
                nxt["join"] = False
                nxt["turn"] = self._meta(row).get("turn") or {}
                self._set_meta(row + 1, nxt)
        self.table.removeRow(row)
        if self.table.rowCount():
            self.table.selectRow(min(row, self.table.rowCount() - 1))
        self._refresh()
        self._emit()

    def move_row(self, step: int) -> None:
        """Move the selected row up or down one place (a call keeps joining
        the turn it lands in only when there is one above it)."""
        self._finish_editing()
        row = self.current_row()
        target = row + step
        if row < 0 or not 0 <= target < self.table.rowCount():
            return
        taken = self._take_row(row)
        self._insert_row(target, *taken)
        if target == 0:
            meta = self._meta(0)
            meta["join"] = False
            self._set_meta(0, meta)
        self.table.selectRow(target)
        self._refresh()
        self._emit()

    def current_row(self) -> int:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else -1

    # -- internals ------------------------------------------------------------------
    def _finish_editing(self) -> None:
        """Commit a cell being typed in before rows move under it."""
        index = self.table.currentIndex()
        editor = self.table.indexWidget(index) if index.isValid() else None
        if editor is not None and index.column() == _COL_CONTENT:
            self.table.commitData(editor)
            self.table.closeEditor(editor, QAbstractItemDelegate.EndEditHint.NoHint)

    def _insert_row(self, row: int, reply: str, content: str, join: bool,
                    turn: dict | None = None, call: dict | None = None) -> None:
        was = self._loading
        self._loading = True
        try:
            self.table.insertRow(row)
            number = QTableWidgetItem()
            number.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            number.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            number.setData(_ROW_ROLE, {"join": join, "turn": dict(turn or {}),
                                       "call": dict(call or {})})
            self.table.setItem(row, _COL_TURN, number)
            filler = QTableWidgetItem()
            filler.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            self.table.setItem(row, _COL_REPLY, filler)
            combo = QComboBox(self.table)
            combo.setObjectName("replyCombo")
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
            self._fill_combo(combo, reply)
            combo.currentIndexChanged.connect(lambda _i, c=combo: self._on_combo(c))
            self.table.setCellWidget(row, _COL_REPLY, combo)
            self.table.setItem(row, _COL_CONTENT, QTableWidgetItem(content))
        finally:
            self._loading = was

    def _take_row(self, row: int) -> tuple:
        meta = self._meta(row)
        taken = (self.reply(row), self._content(row), meta["join"], meta.get("turn"),
                 meta.get("call"))
        self.table.removeRow(row)
        return taken

    def _fill_combo(self, combo: QComboBox, reply: str) -> None:
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("Text", TEXT)
        for name in self._tool_names:
            combo.addItem(name, name)
        if reply != TEXT and reply not in self._tool_names:
            combo.addItem(f"{reply} (not wired)", reply)
        combo.setCurrentIndex(max(0, combo.findData(reply)))
        combo.setToolTip("What the pretend model answers in this row: text, or a call of one "
                         "of the tools wired to the agent")
        combo.blockSignals(False)

    def _combo(self, row: int) -> QComboBox | None:
        w = self.table.cellWidget(row, _COL_REPLY)
        return w if isinstance(w, QComboBox) else None

    def _content(self, row: int) -> str:
        item = self.table.item(row, _COL_CONTENT)
        return item.text() if item is not None else ""

    def _meta(self, row: int) -> dict:
        item = self.table.item(row, _COL_TURN)
        meta = item.data(_ROW_ROLE) if item is not None else None
        return dict(meta) if isinstance(meta, dict) else {"join": False}

    def _set_meta(self, row: int, meta: dict) -> None:
        was = self._loading
        self._loading = True
        self.table.item(row, _COL_TURN).setData(_ROW_ROLE, meta)
        self._loading = was

    def _on_combo(self, combo: QComboBox) -> None:
        if self._loading:
            return
        self._refresh()
        self._emit()

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if self._loading or item.column() != _COL_CONTENT:
            return
        self._refresh()
        self._emit()

    def _emit(self) -> None:
        if not self._loading:
            self.changed.emit(self.value())

    def _refresh(self, problem: str | None = None) -> None:
        """Turn numbers, placeholders, row warnings, the status line, the
        buttons and the table's height (all rows, no inner scrolling up to
        eight)."""
        self._loading, was = True, self._loading
        t = theme.current()
        warnings = []
        try:
            for row in range(self.table.rowCount()):
                joined = row > 0 and self._meta(row)["join"]
                number = self.table.item(row, _COL_TURN)
                number.setText("↳" if joined else str(self.turn_of(row)))
                number.setToolTip(f"Part of turn {self.turn_of(row)}" if joined
                                  else f"Turn {self.turn_of(row)}: answers the agent's request "
                                       f"number {self.turn_of(row)}")
                content = self.table.item(row, _COL_CONTENT)
                reply = self.reply(row)
                warning = None
                if reply == TEXT:
                    content.setToolTip(content.text() or "The answer's text")
                else:
                    _, warning = _parse_arguments(content.text())
                    content.setToolTip(warning or "The call's arguments, a JSON object")
                if warning:
                    warnings.append(f"Row {row + 1}: {warning}")
                content.setForeground(t.color("error") if warning
                                      else self.palette().text().color())
        finally:
            self._loading = was
        text = problem or (warnings[0] if warnings else "")
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {t.error if warnings or problem else t.muted};")
        self.status.setVisible(bool(text))
        self._update_buttons()
        self._fit_rows()

    def _fit_rows(self) -> None:
        """Rows as tall as their wrapped text (up to MAX_ROW_LINES lines), and
        the table as tall as its rows (up to MAX_TABLE_H, then it scrolls)."""
        table = self.table
        base = table.verticalHeader().defaultSectionSize()
        line = table.fontMetrics().lineSpacing()
        table.resizeRowsToContents()
        total = 0
        for row in range(table.rowCount()):
            h = min(max(table.rowHeight(row), base), base + (MAX_ROW_LINES - 1) * line)
            table.setRowHeight(row, h)
            total += h
        total = max(total, base)
        frame = 2 * table.frameWidth()
        table.setFixedHeight(min(table.horizontalHeader().sizeHint().height() + total + frame + 2,
                                 MAX_TABLE_H))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_rows()  # a narrower panel wraps the text over more lines

    def _update_buttons(self) -> None:
        has_tools = bool(self._tool_names)
        self.add_call_button.setEnabled(has_tools)
        self.add_joined_button.setEnabled(has_tools and self.table.rowCount() > 0)
        no_tools = "Wire a node to the agent's tools port to script a call of it"
        self.add_call_button.setToolTip("Add a turn that calls a tool" if has_tools else no_tools)
        row = self.current_row()
        self.up_button.setEnabled(row > 0)
        self.down_button.setEnabled(0 <= row < self.table.rowCount() - 1)
        self.remove_button.setEnabled(row >= 0)

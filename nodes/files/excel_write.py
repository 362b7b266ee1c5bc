"""Tables: the Write Excel node (``excel.write``). Writing keeps numbers
as numbers, writes dates as ISO text, nested values as JSON text, and text
that starts with '=' as text, not as a formula, unless the designer allows
formulas; the workbook is replaced atomically. A workbook appended to is
opened as a read opens one, bounded (``nodes.files.excel_workbook``).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from runtime.message import Message
from runtime.node import AI, CUSTOM, MESSAGE, NodeConfigError, Output, Param, Tool, node

from .common import (
    DEFAULT_MAX_ROWS,
    TABLES_COLOR,
    FileNode,
    allow_absolute_param,
    base_folder_param,
    bound_problems,
    create_folders_param,
    limit,
    mode_param,
    os_problem,
    prepare_folder,
    regular_file,
    replace_atomically,
)
from .csv_nodes import check_columns, check_rows
from .excel_workbook import (
    _DATES,
    DEFAULT_MAX_XLSX_BYTES,
    EXCEL_MAX_CELL_CHARS,
    EXCEL_MAX_ROWS,
    _iso,
    _openpyxl,
    _workbook,
)
from .paths import quote, shown

EXCEL_MODES = ["append", "replace_sheet", "overwrite", "fail_if_exists"]


@node("excel.write", name="Write Excel", category="Tables", icon="file-spreadsheet",
      color=TABLES_COLOR,
      tool=Tool("write_excel", "Write rows to a sheet of an Excel workbook (.xlsx) in the files "
                "folder"))
class WriteExcel(FileNode):
    """Writes rows to a sheet of an .xlsx workbook: objects (one column
    per key; when appending, by the names in the sheet's first row, new
    names added as new columns) or lists. Numbers and true/false stay typed,
    dates are written as ISO text, nested values as JSON text. The file is
    replaced atomically."""

    path = Param(str, "The workbook to write, relative to the files folder, e.g. "
                 "'out/report.xlsx'", scope=AI, allow=AI | CUSTOM | MESSAGE)
    rows = Param("json", "The rows: a list of objects (one column per key) or of lists",
                 scope=MESSAGE, allow=AI | CUSTOM | MESSAGE, path="payload")
    sheet = Param(str, "The sheet to write to, created if missing; empty: the first sheet "
                  "('Sheet1' in a new workbook)", default="", allow=AI | CUSTOM | MESSAGE)
    columns = Param("json", "The columns and their order, e.g. [\"name\", \"total\"]; empty: "
                    "the sheet's header row, or every key of the rows in the order first seen",
                    default=None, optional=True, allow=AI | CUSTOM | MESSAGE)
    header = Param(bool, "Write the column names in the first row of an empty sheet",
                   default=True, allow=AI | CUSTOM | MESSAGE)
    mode = mode_param("append: add rows below the sheet's last row (creates the workbook or "
                      "sheet if missing); replace_sheet: empty that sheet first, keep the "
                      "others; overwrite: a new workbook; fail_if_exists: refuse if the file "
                      "exists", EXCEL_MODES, "append")
    formulas = Param(bool, "Write text that starts with '=' as a formula. Off: as text, so that "
                     "data from the AI or a message cannot become a formula", default=False,
                     allow=CUSTOM, group="advanced")
    create_folders = create_folders_param()
    max_rows = Param(int, "Most rows one message may write; more is refused before the file "
                     "is touched", default=DEFAULT_MAX_ROWS, allow=CUSTOM, group="advanced")
    max_bytes = Param(int, "Largest existing workbook opened to append to, in bytes",
                      default=DEFAULT_MAX_XLSX_BYTES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    file = Output(str, "The workbook written (relative to the base folder when inside it)",
                  path="file")
    rows_written = Output(int, "How many rows this message wrote")
    sheet_name = Output(str, "The sheet written", path="sheet")

    @classmethod
    def check(cls, params):
        return bound_problems(params, "max_rows", "max_bytes")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        rows = self.rows.get(msg)
        sheet = self.sheet.get(msg)
        columns = check_columns(self.columns.get(msg))
        header = bool(self.header.get(msg))
        mode = self.mode.get(msg) or "append"
        formulas = bool(self.formulas.get())
        create = bool(self.create_folders.get())
        max_rows = limit(self, "max_rows")
        max_bytes = limit(self, "max_bytes")
        if mode not in EXCEL_MODES:
            raise NodeConfigError(f"mode: '{quote(str(mode))}' is not one of {', '.join(EXCEL_MODES)}")
        if sheet is not None and not isinstance(sheet, str):
            sheet = str(sheet)
        dicts = check_rows(rows, max_rows)
        base = self.base()

        stop = threading.Event()

        def work() -> tuple[Path, str]:
            target = self.resolve("path", msg, base, raw)
            prepare_folder(target, create, "path", raw)
            name = write_excel(target, raw, rows, dicts, columns, header, sheet or "", mode,
                               formulas, max_bytes, stop)
            return target, name

        try:
            target, name = await self.run_blocking(work)
        finally:
            stop.set()  # cancelled: loading the workbook to append to stops too
        self.written(target, msg)
        where = shown(target, base)
        self.file.set(msg, where)
        self.rows_written.set(msg, len(rows))
        self.sheet_name.set(msg, name)
        self.show_status(f"{len(rows):,} rows in {where} ({name})", "green", "done")


def _sheet_is_empty(ws: Any) -> bool:
    # Not ws["A1"] or iter_rows: in openpyxl they create the cells they
    # visit, and an appended row would then start below them.
    return not any(c.value is not None for c in ws._cells.values())


class _Writer:
    """Turns message values into cells: numbers, bools and text stay typed,
    dates become ISO text, nested values JSON text, and text that Excel
    would take for a formula or an error code stays text."""

    def __init__(self, ws: Any, formulas: bool) -> None:
        from openpyxl.cell.cell import ERROR_CODES, Cell

        self.ws = ws
        self.formulas = formulas
        self.error_codes = ERROR_CODES
        self.cell_class = Cell

    def value(self, v: Any, row: int, column: Any) -> Any:
        t = type(v)
        if t is int or t is float or v is None or t is bool:
            return v
        if t is not str:
            if isinstance(v, (dict, list)):
                v = json.dumps(v, ensure_ascii=False)
            elif isinstance(v, _DATES):
                v = _iso(v)
            elif isinstance(v, (int, float)):
                return v
            else:
                v = str(v)
        if len(v) > EXCEL_MAX_CELL_CHARS:
            raise NodeConfigError(f"rows: row {row}, column {column}: {len(v):,} characters, more "
                                  f"than the {EXCEL_MAX_CELL_CHARS:,} an Excel cell holds")
        if not self.formulas and len(v) > 1 and (v[0] == "=" or v in self.error_codes):
            cell = self.cell_class(self.ws, value=v)
            cell.data_type = "s"
            return cell
        return v

    def append(self, values: list, row: int, names: list | None = None) -> None:
        from openpyxl.utils.exceptions import IllegalCharacterError

        cells = [self.value(v, row, names[i] if names else i + 1) for i, v in enumerate(values)]
        try:
            self.ws.append(cells)
        except IllegalCharacterError:
            from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

            for i, v in enumerate(values):
                if isinstance(v, str) and ILLEGAL_CHARACTERS_RE.search(v):
                    column = names[i] if names else i + 1
                    raise NodeConfigError(f"rows: row {row}, column {column}: holds a control "
                                          "character that Excel cannot store") from None
            raise


def write_excel(path: Path, raw: Any, rows: list, dicts: bool, columns: list[str] | None,
                header: bool, sheet: str, mode: str, formulas: bool, max_bytes: int,
                stop: threading.Event | None = None) -> str:
    openpyxl = _openpyxl()
    exists = os.path.lexists(path)
    if mode == "fail_if_exists" and exists:
        raise NodeConfigError(f"path: '{quote(str(raw))}' already exists (mode fail_if_exists)")
    if exists and mode in ("append", "replace_sheet"):
        regular_file(path, "path", raw, max_bytes)
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise os_problem(exc, "path", raw) from None
        with f:
            wb = _workbook(f, raw, max_bytes, stop, read_only=False)
        ws = _sheet_for_write(wb, sheet)
        if mode == "replace_sheet" and ws.title in wb.sheetnames and not _sheet_is_empty(ws):
            index, title = wb.index(ws), ws.title
            wb.remove(ws)
            ws = wb.create_sheet(title, index)
    else:
        wb = openpyxl.Workbook()
        ws = wb.active
        try:
            ws.title = _check_title(sheet) or "Sheet1"
        except ValueError as exc:
            raise NodeConfigError(f"sheet: '{quote(sheet)}' cannot name a sheet ({exc})") from None

    writer = _Writer(ws, formulas)
    empty = _sheet_is_empty(ws)
    start = 0 if empty else ws.max_row
    names: list[str] | None = None
    if dicts:
        names = columns
        if names is None:
            existing: list = []
            if not empty and header:
                existing = [c.value for c in ws[1]]
                while existing and existing[-1] is None:
                    existing.pop()
            names = [str(v) for v in existing if v is not None] if existing else []
            known = set(names)
            added = []
            for row in rows:
                for key in row:
                    if key not in known:
                        known.add(key)
                        added.append(key)
            if existing:
                # New keys become new columns, named in the header row.
                for offset, key in enumerate(added, len(existing) + 1):
                    ws.cell(row=1, column=offset, value=writer.value(key, 1, offset))
                names = [("" if v is None else str(v)) for v in existing] + added
            else:
                names = added
    header_rows = 1 if header and empty and (dicts or columns) and (names or columns) else 0
    if start + header_rows + len(rows) > EXCEL_MAX_ROWS:
        raise NodeConfigError(f"rows: the sheet '{quote(ws.title)}' would have "
                              f"{start + header_rows + len(rows):,} rows, more than Excel's "
                              f"{EXCEL_MAX_ROWS:,}")
    if header_rows:
        head = names if dicts else columns
        writer.append(list(head or []), 1)
    for i, row in enumerate(rows, 1):
        if dicts:
            writer.append([row.get(k) for k in names or []], i, names)
        else:
            writer.append(row, i)
    try:
        replace_atomically(path, wb.save)
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None
    return ws.title


def _check_title(sheet: str) -> str:
    if len(sheet) > 31:  # openpyxl only warns; Excel refuses to open the file
        raise NodeConfigError(f"sheet: '{quote(sheet)}' is {len(sheet)} characters; a sheet "
                              "name has at most 31")
    return sheet


def _sheet_for_write(wb: Any, sheet: str) -> Any:
    if not sheet and wb.worksheets:
        return wb.worksheets[0]
    if not sheet:  # a damaged workbook that lists none: the first one is made
        sheet = "Sheet1"
    if sheet in wb.sheetnames:
        return wb[sheet]
    _check_title(sheet)
    try:
        return wb.create_sheet(sheet)
    except ValueError as exc:
        raise NodeConfigError(f"sheet: '{quote(sheet)}' cannot name a sheet ({exc})") from None

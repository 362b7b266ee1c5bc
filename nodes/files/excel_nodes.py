"""Tables: the Excel nodes, for .xlsx workbooks, with openpyxl, which is
imported when the first workbook is opened (the palette imports this
module and never needs it). Read Excel is here; Write Excel is in
``nodes.files.excel_write``, imported here. Every workbook is opened
through a bounded reader that holds each part, and all of them together,
to max_bytes (``nodes.files.excel_workbook``).

Reading walks the sheet's XML itself (not openpyxl's iter_rows, which
makes up every missing row between row 1 and row 2,000,000,000): every row
element counts against Excel's 1,048,576 rows whether it is empty or not,
a row numbered past that is refused, and one row may hold at most
MAX_ROW_ELEMENTS XML elements. The worker thread checks a stop flag for
every row and every chunk it unpacks, so a cancelled call (a tool timeout,
the run stopping) stops parsing instead of running on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
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
    limit,
    os_problem,
    regular_file,
    unique_names,
)
from .excel_workbook import (
    _DATES,
    DEFAULT_MAX_XLSX_BYTES,
    EXCEL_MAX_ROWS,
    MAX_ROW_ELEMENTS,
    _check_stop,
    _iso,
    _workbook,
)

# Re-exported: nodes.files.excel_nodes.WriteExcel and the rest keep working.
from .excel_workbook import EXCEL_MAX_CELL_CHARS as EXCEL_MAX_CELL_CHARS
from .excel_workbook import MAX_DIRECTORY_BYTES as MAX_DIRECTORY_BYTES
from .excel_workbook import TOTAL_FACTOR as TOTAL_FACTOR
from .excel_write import EXCEL_MODES as EXCEL_MODES
from .excel_write import WriteExcel as WriteExcel
from .excel_write import write_excel as write_excel
from .paths import quote

#: Widest row read: a sheet or range wider than this is refused.
MAX_COLUMNS = 1024


def pick_sheet(wb: Any, sheet: Any) -> Any:
    """A sheet by name (exact, then ignoring case), or by its position
    counting from 1; empty: the first sheet."""
    names = wb.sheetnames
    if not names:  # a damaged workbook: Excel itself will not open one
        raise NodeConfigError("sheet: the workbook has no sheet (its workbook.xml lists none)")
    if sheet is None or sheet == "":
        return wb[names[0]]
    text = str(sheet)
    if text in names:
        return wb[text]
    for name in names:
        if name.casefold() == text.casefold():
            return wb[name]
    if text.strip().isdigit() and 1 <= int(text) <= len(names):
        return wb[names[int(text) - 1]]
    listed = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
    raise NodeConfigError(f"sheet: the workbook has no sheet '{quote(text)}' (its sheets: "
                          f"{listed}; or give a position counting from 1)")


def parse_range(value: Any) -> tuple[int | None, int | None, int | None, int | None]:
    """(min_col, min_row, max_col, max_row) of "A1:D100", "A:D", "2:10" or
    "B3"; None where the range leaves a side open."""
    from openpyxl.utils.cell import range_boundaries

    text = str(value).replace("$", "").strip().upper()
    try:
        bounds = range_boundaries(text)
    except (ValueError, TypeError):
        raise NodeConfigError(f"range: '{quote(str(value))}' is not a cell range like A1:D100 "
                              "or A:D") from None
    min_col, min_row, max_col, max_row = bounds
    if min_col is not None and max_col is not None and max_col - min_col + 1 > MAX_COLUMNS:
        raise NodeConfigError(f"range: '{quote(str(value))}' is {max_col - min_col + 1:,} columns "
                              f"wide, more than the {MAX_COLUMNS:,} a row may have")
    return bounds


def _plain(values: tuple) -> list:
    for v in values:
        if isinstance(v, _DATES):
            return [_iso(v) for v in values]
    return list(values)


@node("excel.read", name="Read Excel", category="Tables", icon="file-spreadsheet",
      color=TABLES_COLOR,
      tool=Tool("read_excel", "Read rows from a sheet of an Excel workbook (.xlsx) in the "
                "files folder"))
class ReadExcel(FileNode):
    """Reads a sheet of an .xlsx workbook (streamed, read-only). With a
    header row, each row becomes an object keyed by the column names
    (an empty name becomes the column's letter); with header_row 0 each row
    is a list. Numbers stay numbers, dates become ISO text, formulas give
    the value Excel last saved (none for a workbook Excel never opened).
    Empty rows are skipped."""

    path = Param(str, "The workbook, relative to the files folder, e.g. 'data/orders.xlsx'",
                 scope=AI, allow=AI | CUSTOM | MESSAGE)
    sheet = Param(str, "The sheet's name, or its position counting from 1; empty: the first "
                  "sheet", default="", scope=AI, allow=AI | CUSTOM | MESSAGE)
    range = Param(str, "The cells to read, e.g. 'A1:D100' or 'B:E'; empty: the whole sheet",
                  default="", scope=AI, allow=AI | CUSTOM | MESSAGE)
    header_row = Param(int, "Which row of the range (or sheet) holds the column names, counting "
                       "from 1; the rows above it are skipped. 0: no header, rows are lists",
                       default=1, allow=AI | CUSTOM | MESSAGE)
    max_rows = Param(int, "Most rows read; a longer sheet or range is refused",
                     default=DEFAULT_MAX_ROWS, allow=CUSTOM, group="advanced")
    max_bytes = Param(int, "Largest workbook read, in bytes, and most any part of it may "
                      "unpack to (all parts together: 4 times this)",
                      default=DEFAULT_MAX_XLSX_BYTES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    rows = Output("json", "The rows: objects keyed by column name, or lists (header_row 0)")
    columns = Output("json", "The column names (empty with header_row 0)")
    sheet_name = Output(str, "The sheet read", path="sheet")
    count = Output(int, "How many rows")

    @classmethod
    def check(cls, params):
        problems = bound_problems(params, "max_rows", "max_bytes")
        header = params.get("header_row")
        if header is not None and isinstance(header.value, int) and header.value < 0:
            problems.append(("header_row", "header_row must be 0 (no header) or more"))
        return problems

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        sheet = self.sheet.get(msg)
        cell_range = self.range.get(msg)
        header_row = self.header_row.get(msg)
        max_rows = limit(self, "max_rows")
        max_bytes = limit(self, "max_bytes")
        if header_row is None:
            header_row = 1
        if not isinstance(header_row, int) or isinstance(header_row, bool) or header_row < 0:
            raise NodeConfigError("header_row: a row number counting from 1, or 0 for no header")
        bounds = parse_range(cell_range) if cell_range else (None, None, None, None)
        base = self.base()

        stop = threading.Event()

        def work() -> tuple[list, list[str], str]:
            target = self.resolve("path", msg, base, raw, must_exist=True)
            regular_file(target, "path", raw, max_bytes)
            return read_excel(target, raw, sheet, bounds, header_row, max_rows, max_bytes, stop)

        try:
            rows, columns, name = await self.run_blocking(work)
        finally:
            stop.set()  # cancelled (a tool timeout, the run stopping): the worker stops too
        self.rows.set(msg, rows)
        self.columns.set(msg, columns)
        self.sheet_name.set(msg, name)
        self.count.set(msg, len(rows))


def read_excel(path: Path, raw: Any, sheet: Any, bounds: tuple, header_row: int, max_rows: int,
               max_bytes: int, stop: threading.Event | None = None) -> tuple[list, list[str], str]:
    """The rows of a sheet, as ReadExcel outputs them. ``stop``, once set,
    ends the read at the next row or chunk unpacked (the caller gave up)."""
    from openpyxl.utils.cell import get_column_letter

    min_col = bounds[0]
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None
    with f:
        wb = _workbook(f, raw, max_bytes, stop, read_only=True)
        try:
            ws = pick_sheet(wb, sheet)
            first_col = min_col or 1
            columns: list[str] = []
            rows: list = []
            append = rows.append
            width = number_seen = 0
            for number, values in _sheet_rows(wb, ws, raw, bounds, stop):
                number_seen = number
                if number < header_row:
                    continue
                if header_row and not columns:
                    names = list(values) if number == header_row else []
                    while names and names[-1] is None:
                        names.pop()
                    if not names:
                        raise NodeConfigError(f"header_row: row {header_row} of sheet "
                                              f"'{quote(ws.title)}' is empty")
                    columns = _column_names(names, first_col, get_column_letter)
                    width = len(columns)
                    continue
                if all(v is None for v in values):
                    continue
                if len(rows) >= max_rows:
                    raise NodeConfigError(
                        f"max_rows: sheet '{quote(ws.title)}' has more than max_rows={max_rows:,} "
                        "rows; raise max_rows or give a range")
                cells = _plain(values)
                if header_row:
                    if len(cells) < width:
                        cells += [None] * (width - len(cells))
                    append(dict(zip(columns, cells[:width], strict=True)))
                else:
                    append(cells)
            if header_row and not columns and number_seen:
                raise NodeConfigError(f"header_row: sheet '{quote(ws.title)}' has "
                                      f"{number_seen:,} row{'' if number_seen == 1 else 's'} in the range read, fewer than "
                                      f"header_row={header_row}")
            return rows, columns, ws.title
        finally:
            wb.close()


def _sheet_rows(wb: Any, ws: Any, raw: Any, bounds: tuple,
                stop: threading.Event | None) -> Iterator[tuple[int, tuple | list]]:
    """(the row's number in the range, counting from 1; its values) for
    each row the sheet's XML holds in the range, padded to the range's (or
    the sheet's <dimension>'s) last column as openpyxl's read-only rows
    are. Rows the XML leaves out are not made up: read_excel skips empty
    rows anyway, and one at row 2,000,000,000 would take hours of them."""
    from openpyxl.worksheet._reader import (
        DATA_TAG,
        DIMENSION_TAG,
        ROW_TAG,
        WorkSheetParser,
    )
    from openpyxl.xml.functions import iterparse

    min_col, min_row, max_col, max_row = bounds
    first_col = min_col or 1
    first_row = min_row or 1
    title = quote(ws.title)
    part = getattr(ws, "_worksheet_path", None)
    if part is None:
        raise NodeConfigError(f"sheet: '{title}' is a chart sheet; it holds no rows")
    src = wb._archive.open(part)
    parser = WorkSheetParser(src, ws._shared_strings, data_only=True, epoch=wb.epoch,
                             date_formats=wb._date_formats,
                             timedelta_formats=wb._timedelta_formats)
    last = seen = elements = loose = 0
    try:
        with src:
            for _event, el in iterparse(src):
                tag = el.tag
                if tag != ROW_TAG:
                    elements += 1
                    if elements > MAX_ROW_ELEMENTS:
                        where = f"after row {last:,}" if last else "before its first row"
                        raise NodeConfigError(
                            f"path: sheet '{title}' of '{quote(str(raw))}' holds more than "
                            f"{MAX_ROW_ELEMENTS:,} XML elements in one row ({where}); no real "
                            "sheet does")
                    if tag == DATA_TAG:
                        break  # the values are all in <sheetData>
                    if tag == DIMENSION_TAG and not seen and max_col is None:
                        max_col = _dimension_width(el.get("ref"), first_col, title)
                    continue
                valued = any(len(cell) for cell in el)
                # Elements between rows stay in memory (only a row is
                # cleared): they are counted across the whole sheet.
                loose += elements - (sum(1 for _ in el.iter()) - 1 if valued else len(el))
                if loose > MAX_ROW_ELEMENTS:
                    raise NodeConfigError(
                        f"path: sheet '{title}' of '{quote(str(raw))}' holds more than "
                        f"{MAX_ROW_ELEMENTS:,} XML elements outside its rows; no real sheet "
                        "does")
                elements = 0
                seen += 1
                if seen > EXCEL_MAX_ROWS:
                    raise NodeConfigError(
                        f"path: sheet '{title}' of '{quote(str(raw))}' holds more than Excel's "
                        f"{EXCEL_MAX_ROWS:,} rows (empty ones count too)")
                _check_stop(stop)
                if valued:
                    number, cells = parser.parse_row(el)
                    parser.row_dimensions.clear()  # heights and styles: kept by openpyxl
                else:  # no cell holds a value (<c/>): not worth parsing cell by cell
                    r = el.get("r")
                    number = parser.row_counter = int(r) if r else parser.row_counter + 1
                    cells = []
                el.clear()
                if number > EXCEL_MAX_ROWS:
                    raise NodeConfigError(
                        f"path: sheet '{title}' of '{quote(str(raw))}' has a row numbered "
                        f"{number:,}, past Excel's last row {EXCEL_MAX_ROWS:,}")
                if number <= last:
                    continue  # out of order: openpyxl drops it too
                last = number
                if number < first_row:
                    continue
                if max_row is not None and number > max_row:
                    break
                yield number - first_row + 1, _row_values(cells, first_col, max_col, number, title)
            while src.read(1 << 16):
                pass  # unpacked to its end: its CRC and declared size are checked there
    except NodeConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - broken XML, a bad number, a missing string
        raise NodeConfigError(f"path: sheet '{title}' of '{quote(str(raw))}' cannot be read "
                              f"({type(exc).__name__}: {quote(str(exc))})") from None


def _dimension_width(ref: Any, first_col: int, title: str) -> int | None:
    """The last column the sheet's <dimension> names, or None; a sheet
    wider than MAX_COLUMNS from ``first_col`` is refused."""
    from openpyxl.utils.cell import range_boundaries

    try:
        last = range_boundaries(str(ref).upper())[2]
    except (ValueError, TypeError):
        return None  # a broken dimension: each row is as wide as its cells
    if last is not None and last - first_col + 1 > MAX_COLUMNS:
        raise NodeConfigError(f"range: the sheet '{title}' is {last:,} columns wide, more "
                              f"than the {MAX_COLUMNS:,} a row may have; give a range")
    return last


def _row_values(cells: list, first_col: int, max_col: int | None, number: int,
                title: str) -> tuple | list:
    """A row's values from its first column to ``max_col`` (or its last
    cell), None where a cell is missing (openpyxl's ``_get_row``)."""
    if not cells and not max_col:
        return ()
    last = max_col or cells[-1]["column"]
    if last - first_col + 1 > MAX_COLUMNS:
        raise NodeConfigError(
            f"range: row {number:,} of sheet '{title}' is {last - first_col + 1:,} cells wide, "
            f"more than the {MAX_COLUMNS:,} a row may have; give a range")
    values = [None] * (last + 1 - first_col)
    for cell in cells:
        column = cell["column"]
        if first_col <= column <= last:
            values[column - first_col] = cell["value"]
    return values


def _column_names(names: list, first_col: int, letter: Any) -> list[str]:
    """Header cells as column names; an empty one is named by its letter."""
    return unique_names([_iso(n) if n is not None else None for n in names],
                        lambda i: letter(first_col + i))

"""Tables: CSV files read into rows (objects keyed by the header, or lists)
and rows written back, with the same base-folder confinement as the file
nodes. Cells are read as text: CSV has no types."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

from runtime.message import Message
from runtime.node import AI, CUSTOM, MESSAGE, NodeConfigError, Output, Param, Tool, node

from .common import (
    DEFAULT_MAX_ROWS,
    TABLES_COLOR,
    WRITE_MODES,
    FileNode,
    allow_absolute_param,
    base_folder_param,
    bound_problems,
    check_encoding,
    create_folders_param,
    decode_problem,
    encoding_param,
    limit,
    mode_param,
    os_problem,
    prepare_folder,
    regular_file,
    unique_names,
    writing,
)
from .paths import quote, shown

#: Default largest CSV file read (100 MB).
DEFAULT_MAX_CSV_BYTES = 100_000_000
_NAMED_DELIMITERS = {"\\t": "\t", "tab": "\t", "TAB": "\t", "\\u0009": "\t"}


def delimiter_param() -> Param:
    return Param(str, "The character between fields: ',' ';' '|' or '\\t' (tab)", default=",",
                 allow=AI | CUSTOM | MESSAGE)


def check_delimiter(value: Any) -> str:
    text = _NAMED_DELIMITERS.get(value, value) if isinstance(value, str) else value
    if not isinstance(text, str) or len(text) != 1 or text in '\r\n"':
        raise NodeConfigError(f"delimiter: '{quote(str(value))}' is not one character such as "
                              "',' ';' '|' or '\\t' (tab)")
    return text


def _csv_problems(params: dict, *bounds: str) -> list[tuple[str, str]]:
    problems = bound_problems(params, *bounds)
    delim = params.get("delimiter")
    if delim is not None and isinstance(delim.value, str):
        try:
            check_delimiter(delim.value)
        except NodeConfigError as exc:
            problems.append(("delimiter", str(exc)))
    return problems


@node("csv.read", name="Read CSV", category="Tables", icon="table", color=TABLES_COLOR,
      tool=Tool("read_csv", "Read a CSV file from the files folder as a list of rows"))
class ReadCsv(FileNode):
    """Reads a CSV file. With a header line, each row becomes an object
    keyed by the column names (empty names become column_N, repeated ones
    get _2, _3); without, each row is a list. Cells are text; blank lines
    are skipped; a row shorter than the header is filled with empty text."""

    path = Param(str, "The CSV file, relative to the files folder, e.g. 'data/orders.csv'",
                 scope=AI, allow=AI | CUSTOM | MESSAGE)
    delimiter = delimiter_param()
    header = Param(bool, "The first line holds the column names", default=True,
                   allow=AI | CUSTOM | MESSAGE)
    encoding = encoding_param("utf-8-sig")
    max_rows = Param(int, "Most rows read; a longer file is refused", default=DEFAULT_MAX_ROWS,
                     allow=CUSTOM, group="advanced")
    max_bytes = Param(int, "Largest file read, in bytes; a bigger one is refused unread",
                      default=DEFAULT_MAX_CSV_BYTES, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    rows = Output("json", "The rows: objects keyed by column name, or lists without a header")
    columns = Output("json", "The column names (empty without a header)")
    count = Output(int, "How many rows")

    @classmethod
    def check(cls, params):
        return _csv_problems(params, "max_rows", "max_bytes")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        delimiter = check_delimiter(self.delimiter.get(msg))
        header = bool(self.header.get(msg))
        encoding = check_encoding(self.encoding.get(msg) or "utf-8-sig")
        max_rows = limit(self, "max_rows")
        max_bytes = limit(self, "max_bytes")
        base = self.base()

        def work() -> tuple[list, list[str]]:
            target = self.resolve("path", msg, base, raw, must_exist=True)
            regular_file(target, "path", raw, max_bytes)
            return read_csv(target, raw, delimiter, header, encoding, max_rows)

        rows, columns = await self.run_blocking(work)
        self.rows.set(msg, rows)
        self.columns.set(msg, columns)
        self.count.set(msg, len(rows))


def read_csv(path: Path, raw: Any, delimiter: str, header: bool, encoding: str,
             max_rows: int) -> tuple[list, list[str]]:
    rows: list = []
    columns: list[str] = []
    append = rows.append
    try:
        with open(path, newline="", encoding=encoding) as f:
            reader = csv.reader(f, delimiter=delimiter)
            if header:
                for first in reader:
                    if first:
                        columns = unique_names(first)
                        break
            width = len(columns)
            for row in reader:
                if len(rows) >= max_rows:
                    if row:
                        raise NodeConfigError(
                            f"max_rows: '{quote(str(raw))}' has more than max_rows={max_rows:,} "
                            "rows; raise max_rows or split the file")
                    continue
                if not header:
                    if row:
                        append(row)
                    continue
                n = len(row)
                if n == width:
                    append(dict(zip(columns, row, strict=True)))
                elif n == 0:
                    continue
                elif n < width:
                    append(dict(zip(columns, row + [""] * (width - n), strict=True)))
                else:
                    raise NodeConfigError(
                        f"path: '{quote(str(raw))}' line {reader.line_num} has {n} fields, the "
                        f"header has {width}; check the delimiter ('{delimiter}')")
    except UnicodeDecodeError as exc:
        raise decode_problem(exc, str(raw), encoding) from None
    except csv.Error as exc:
        raise NodeConfigError(f"path: '{quote(str(raw))}' is not valid CSV: {exc}") from None
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None
    return rows, columns


@node("csv.write", name="Write CSV", category="Tables", icon="table", color=TABLES_COLOR,
      tool=Tool("write_csv", "Write rows to a CSV file in the files folder"))
class WriteCsv(FileNode):
    """Writes rows to a CSV file: objects (one column per key, in the order
    first seen or as columns says) or lists. Nested values are written as
    JSON text, null as an empty cell. append adds to the end of the file,
    following its header line; overwrite replaces it atomically."""

    # One write at a time, in the order the messages came: two appends at
    # once (a log fed by a hook flow) would both write a header line.
    concurrency = 1

    path = Param(str, "The CSV file to write, relative to the files folder, e.g. "
                 "'out/report.csv'", scope=AI, allow=AI | CUSTOM | MESSAGE)
    rows = Param("json", "The rows: a list of objects (one column per key) or of lists",
                 scope=MESSAGE, allow=AI | CUSTOM | MESSAGE, path="payload")
    columns = Param("json", "The columns and their order, e.g. [\"name\", \"email\"]; empty: "
                    "every key of the rows in the order first seen (appending: the file's "
                    "header line). Keys not listed are left out", default=None, optional=True,
                    allow=AI | CUSTOM | MESSAGE)
    header = Param(bool, "Write the column names as the first line (not when appending to a "
                   "file that already has lines)", default=True, allow=AI | CUSTOM | MESSAGE)
    delimiter = delimiter_param()
    mode = mode_param("overwrite: replace the file (atomically); append: add rows at its end; "
                      "fail_if_exists: refuse if the file exists", WRITE_MODES, "overwrite")
    encoding = encoding_param()
    create_folders = create_folders_param()
    max_rows = Param(int, "Most rows one message may write; more is refused before the file "
                     "is touched", default=DEFAULT_MAX_ROWS, allow=CUSTOM, group="advanced")
    base_folder = base_folder_param()
    allow_absolute = allow_absolute_param()

    file = Output(str, "The file written (relative to the base folder when inside it)",
                  path="file")
    rows_written = Output(int, "How many rows this message wrote")

    @classmethod
    def check(cls, params):
        return _csv_problems(params, "max_rows")

    async def on_message(self, msg: Message) -> None:
        raw = self.path.get(msg)
        rows = self.rows.get(msg)
        columns = self.columns.get(msg)
        header = bool(self.header.get(msg))
        delimiter = check_delimiter(self.delimiter.get(msg))
        mode = self.mode.get(msg) or "overwrite"
        encoding = check_encoding(self.encoding.get(msg) or "utf-8")
        create = bool(self.create_folders.get())
        max_rows = limit(self, "max_rows")
        if mode not in WRITE_MODES:
            raise NodeConfigError(f"mode: '{quote(str(mode))}' is not one of {', '.join(WRITE_MODES)}")
        dicts = check_rows(rows, max_rows)
        columns = check_columns(columns)
        base = self.base()
        # A run that may run twice (queue mode): rows an earlier attempt
        # wrote are not written again (overwrite is write-then-rename anyway).
        effect = self.effect_once("csv", str(raw), mode, rows, columns, header, delimiter)
        if effect.done and isinstance(effect.result, dict):
            self.file.set(msg, effect.result.get("file", ""))
            self.rows_written.set(msg, len(rows))
            self.show_status(f"{len(rows):,} rows already written (an earlier attempt)",
                             "green", "done")
            return

        def work() -> Path:
            target = self.resolve("path", msg, base, raw)
            prepare_folder(target, create, "path", raw)
            write_csv(target, raw, rows, dicts, columns, header, delimiter, mode, encoding)
            return target

        target = await self.run_blocking(work)
        self.written(target, msg)
        where = shown(target, base)
        effect.record({"file": where})
        self.file.set(msg, where)
        self.rows_written.set(msg, len(rows))
        self.show_status(f"{len(rows):,} rows {'added to' if mode == 'append' else 'in'} {where}",
                         "green", "done")


def check_rows(rows: Any, max_rows: int) -> bool:
    """Whether the rows are objects (True) or lists (False); an error names
    the first row that is neither or differs from the first."""
    if not isinstance(rows, list):
        got = "nothing" if rows is None else type(rows).__name__
        raise NodeConfigError(f"rows: expected a list of rows (objects or lists), got {got}")
    if len(rows) > max_rows:
        raise NodeConfigError(f"max_rows: {len(rows):,} rows, more than max_rows={max_rows:,}")
    if not rows:
        return True
    kind = type(rows[0])
    if kind not in (dict, list):
        raise NodeConfigError(f"rows: row 1 is {_kind(rows[0])}; each row is an object or a list")
    for i, row in enumerate(rows, 1):
        if type(row) is not kind:
            raise NodeConfigError(f"rows: row {i} is {_kind(row)}, row 1 is {_kind(rows[0])}; "
                                  "give all rows as objects or all as lists")
    return kind is dict


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"a {type(value).__name__}"


def check_columns(columns: Any) -> list[str] | None:
    if columns is None or columns == "" or columns == []:
        return None
    if isinstance(columns, str):  # "name, email" typed in the designer
        columns = [c.strip() for c in columns.split(",")]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise NodeConfigError("columns: give a list of column names, e.g. [\"name\", \"email\"]")
    return columns


def _keys_in_order(rows: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    last: Any = None
    for row in rows:
        keys = row.keys()
        if keys != last:  # most rows share one shape: one comparison each
            seen.update(dict.fromkeys(keys))
            last = keys
    return list(seen)


def _existing_header(path: Path, delimiter: str, encoding: str) -> tuple[list[str] | None, bool]:
    """The header line of a file being appended to (None: empty or new)
    and whether its last line ends with a line break."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None, True
    if size == 0:
        return None, True
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        ends_with_newline = f.read(1) in (b"\n", b"\r")
    with open(path, newline="", encoding=encoding) as f:
        first = next(csv.reader(f, delimiter=delimiter), None) or []
    if first and first[0].startswith("\ufeff"):  # written as utf-8-sig, appended as utf-8
        first[0] = first[0][1:]
    return first, ends_with_newline


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return value


_CONVERTED = frozenset({dict, list, bool})


def _lines(rows: list, cols: list[str] | None) -> Iterator[Any]:
    """The cells of each row, for csv.writer. Plain scalars (the common
    case) go as they are, looked up with one itemgetter call per row; only
    a row with a nested value or a bool is converted cell by cell."""
    getter = itemgetter(*cols) if cols and len(cols) > 1 else None
    for row in rows:
        if cols is None:
            values = row
        elif getter is not None:
            try:
                values = getter(row)
            except KeyError:  # a row without some key: an empty cell there
                values = [row.get(c) for c in cols]
        else:
            values = [row.get(c) for c in cols]
        if _CONVERTED.isdisjoint(map(type, values)):
            yield values
        else:
            yield [_cell(v) for v in values]


def write_csv(path: Path, raw: Any, rows: list, dicts: bool, columns: list[str] | None,
              header: bool, delimiter: str, mode: str, encoding: str) -> None:
    first_line, ends_with_newline = (None, True)
    if mode == "append":
        try:
            first_line, ends_with_newline = _existing_header(path, delimiter, encoding)
        except UnicodeDecodeError as exc:
            raise decode_problem(exc, str(raw), encoding) from None
        except (OSError, csv.Error):
            first_line = None
    # Appending to a file with lines: no second header; with header on, its
    # first line names the columns the rows are matched to.
    has_lines = first_line is not None
    existing = first_line if header else None
    if dicts:
        if columns is None:
            columns = existing if existing else _keys_in_order(rows)
            if existing:
                known = set(existing)
                for i, row in enumerate(rows, 1):
                    extra = [k for k in row if k not in known]
                    if extra:
                        raise NodeConfigError(
                            f"rows: row {i} has the column '{quote(extra[0])}', which the "
                            f"header of '{quote(str(raw))}' lacks ({quote(', '.join(existing))})")
    try:
        with writing(path, mode, encoding=encoding, newline="") as f:
            if not ends_with_newline:
                f.write("\r\n")
            writer = csv.writer(f, delimiter=delimiter)
            if header and not has_lines and columns:
                writer.writerow(columns)
            writer.writerows(_lines(rows, columns if dicts else None))
    except FileExistsError:
        raise NodeConfigError(f"path: '{quote(str(raw))}' already exists "
                              "(mode fail_if_exists)") from None
    except UnicodeEncodeError as exc:
        raise NodeConfigError(f"encoding: the rows hold '{quote(exc.object[exc.start:exc.end])}', "
                              f"which {encoding} cannot store; use utf-8") from None
    except csv.Error as exc:
        raise NodeConfigError(f"rows: cannot be written as CSV: {exc}") from None
    except OSError as exc:
        raise os_problem(exc, "path", raw) from None

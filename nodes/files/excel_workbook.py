"""An .xlsx workbook opened for the Excel nodes (``nodes.files.excel_nodes``)
without trusting it. openpyxl is imported when the first workbook is opened.

An .xlsx file is a zip of XML parts, and a small one can unpack to
gigabytes, so every part is opened through a bounded reader (_Archive):
its declared size (the zip directory's) and the bytes it really unpacks
are both held to max_bytes, all parts of one read together to
TOTAL_FACTOR x max_bytes, and what it unpacks must match what it declares.
The zip directory itself and each shared string are bounded too, and the
worker thread checks a stop flag for every chunk it unpacks, so a
cancelled call (a tool timeout, the run stopping) stops instead of running
on. Also here: Excel's own limits, and a cell's date or time as ISO text
(``_iso``), for both nodes.
"""

from __future__ import annotations

import datetime as dt
import threading
import zipfile
from typing import Any

from runtime.node import NodeConfigError

from .paths import quote

#: Default largest workbook read or appended to (50 MB), and the most any
#: part of it may unpack to.
DEFAULT_MAX_XLSX_BYTES = 50_000_000
#: What all the parts one read unpacks may add up to, as a multiple of
#: max_bytes (a read unpacks the sheet, the shared strings, the styles and
#: a few small parts; appending loads every sheet).
TOTAL_FACTOR = 4
#: Largest zip directory (the list of parts): each entry costs memory to
#: open, and 4 MB lists tens of thousands of parts, more than any workbook.
MAX_DIRECTORY_BYTES = 4_000_000
#: Most XML elements in one row of a sheet (or between two rows): a row
#: holds at most 16,384 cells, a few elements each, and every element of
#: a row is in memory until the row ends.
MAX_ROW_ELEMENTS = 262_144
#: Excel's own limits.
EXCEL_MAX_ROWS = 1_048_576
EXCEL_MAX_CELL_CHARS = 32_767


def _openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - a core dependency, but installs can be partial
        raise NodeConfigError("the Excel nodes need openpyxl: pip install -e . "
                              "(or pip install openpyxl)") from None
    return openpyxl


class _Stopped(NodeConfigError):
    """The call that wanted the rows was cancelled: the worker stops."""


def _check_stop(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped("the read was cancelled")


class _Part:
    """One part of the workbook as openpyxl reads it: counts what it
    really unpacks, against max_bytes, against the size the zip directory
    declares, and (through the archive) against the read's total."""

    def __init__(self, archive: _Archive, info: Any, fp: Any) -> None:
        self.archive, self.info, self.fp = archive, info, fp
        self.count = 0

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            chunks = []
            while chunk := self.read(1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        archive = self.archive
        _check_stop(archive.stop)
        try:
            data = self.fp.read(n)
        except zipfile.BadZipFile as exc:  # a CRC that does not match what unpacked
            raise archive.problem(self.info, f"is damaged ({quote(str(exc))})") from None
        except Exception as exc:  # noqa: BLE001 - zlib.error, EOFError, OSError
            raise archive.problem(self.info, f"cannot be unpacked ({type(exc).__name__}: "
                                  f"{quote(str(exc))})") from None
        got = len(data)
        self.count += got
        archive.total += got
        declared = self.info.file_size
        if self.count > declared:
            raise archive.problem(self.info, f"unpacks to more than the {declared:,} bytes "
                                  "the zip directory declares for it; the file is damaged or "
                                  "crafted")
        if self.count > archive.max_bytes:  # only when declared > max_bytes slipped by
            raise archive.too_big(self.info, f"more than {archive.max_bytes:,}")
        if archive.total > archive.max_total:
            raise NodeConfigError(
                f"max_bytes: reading '{quote(str(archive.raw))}' unpacked more than "
                f"{archive.max_total:,} bytes in all ({TOTAL_FACTOR} x max_bytes="
                f"{archive.max_bytes:,})")
        if not got and n and self.count != declared:
            raise archive.problem(self.info, f"unpacks to {self.count:,} bytes, not the "
                                  f"{declared:,} the zip directory declares for it; the file "
                                  "is damaged or crafted")
        return data

    def close(self) -> None:
        self.fp.close()

    def __enter__(self) -> _Part:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Archive:
    """The workbook's zip as openpyxl sees it (``namelist``, ``open``,
    ``read``, ``close``): every part is opened through a _Part. The part is
    unpacked as if it declared one byte more than max_bytes, so that what it
    really holds is counted rather than cut at the declared size (Python's
    zip reader stops there silently when the CRC was forged to match)."""

    def __init__(self, zf: zipfile.ZipFile, raw: Any, max_bytes: int,
                 stop: threading.Event | None) -> None:
        self.zip, self.raw, self.max_bytes, self.stop = zf, raw, max_bytes, stop
        self.max_total = TOTAL_FACTOR * max_bytes
        self.total = 0
        self.filename = zf.filename

    def problem(self, info: Any, what: str) -> NodeConfigError:
        return NodeConfigError(f"path: the part {quote(info.filename)} of "
                               f"'{quote(str(self.raw))}' {what}")

    def too_big(self, info: Any, size: str) -> NodeConfigError:
        return NodeConfigError(f"max_bytes: the part {quote(info.filename)} of "
                               f"'{quote(str(self.raw))}' unpacks to {size} bytes, more than "
                               f"max_bytes={self.max_bytes:,}")

    def namelist(self) -> list[str]:
        return self.zip.namelist()

    def infolist(self) -> list:
        return self.zip.infolist()

    def getinfo(self, name: str) -> Any:
        return self.zip.getinfo(name)

    def open(self, name: Any, mode: str = "r", pwd: bytes | None = None) -> _Part:
        import copy

        if mode != "r":
            raise ValueError("the workbook is opened for reading only")
        info = name if isinstance(name, zipfile.ZipInfo) else self.zip.getinfo(name)
        if info.file_size > self.max_bytes:
            raise self.too_big(info, f"{info.file_size:,}")
        _check_stop(self.stop)
        generous = copy.copy(info)
        generous.file_size = self.max_bytes + 1
        return _Part(self, info, self.zip.open(generous, "r", pwd))

    def read(self, name: Any, pwd: bytes | None = None) -> bytes:
        with self.open(name, "r", pwd) as part:
            return part.read()

    def close(self) -> None:
        self.zip.close()


def _not_xlsx(raw: Any) -> NodeConfigError:
    return NodeConfigError(f"path: '{quote(str(raw))}' is not an .xlsx workbook (an old .xls "
                           "file must be saved as .xlsx first)")


def _check_directory(f: Any, raw: Any) -> None:
    """Refuse, before the zip is opened, a directory so long that opening
    it costs memory: a 50 MB zip can list a million empty parts."""
    end_record = getattr(zipfile, "_EndRecData", None)  # what ZipFile itself reads
    try:
        record = end_record(f) if end_record is not None else None
    except OSError:
        record = None
    if end_record is not None and not record:
        raise _not_xlsx(raw)
    size = record[getattr(zipfile, "_ECD_SIZE", 5)] if record else 0
    if size > MAX_DIRECTORY_BYTES:
        raise NodeConfigError(f"path: the zip directory (list of parts) of '{quote(str(raw))}' "
                              f"is {size:,} bytes, more than the {MAX_DIRECTORY_BYTES:,} a "
                              "workbook may have")
    f.seek(0)


def _workbook(f: Any, raw: Any, max_bytes: int, stop: threading.Event | None, *,
              read_only: bool) -> Any:
    """The workbook in ``f``, opened by openpyxl through an _Archive; in
    read-only mode its sheets are not parsed until read_excel walks one."""
    _openpyxl()
    from openpyxl.reader.excel import ExcelReader
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

    class Sheet(ReadOnlyWorksheet):
        def _get_size(self) -> None:
            """openpyxl parses every sheet up to its <dimension> when the
            workbook opens (the whole sheet when it has none); read_excel
            takes the dimension from the one sheet it walks."""

    class Reader(ExcelReader):
        def read_strings(self) -> None:
            from openpyxl.xml.constants import SHARED_STRINGS

            part = self.package.find(SHARED_STRINGS)
            if part is not None:
                with self.archive.open(part.PartName[1:]) as src:
                    self.shared_strings = _shared_strings(src, raw)

        def read_worksheets(self) -> None:
            if not self.read_only:
                return super().read_worksheets()
            for sheet, rel in self.parser.find_sheets():
                if rel.target not in self.valid_files:
                    continue
                if "chartsheet" in rel.Type:
                    self.read_chartsheet(sheet, rel)
                    continue
                ws = Sheet(self.wb, sheet.name, rel.target, self.shared_strings)
                ws.sheet_state = sheet.state
                self.wb._sheets.append(ws)
            return None

    _check_directory(f, raw)
    try:
        reader = Reader(f, read_only=read_only, data_only=read_only)
    except zipfile.BadZipFile:
        raise _not_xlsx(raw) from None
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many kinds on a broken file
        raise _unreadable(raw, exc) from None
    archive = reader.archive = _Archive(reader.archive, raw, max_bytes, stop)
    try:
        for info in archive.infolist():  # every part, read or not, as its directory says
            if info.file_size > max_bytes:
                raise archive.too_big(info, f"{info.file_size:,}")
        reader.read()
    except NodeConfigError:
        reader.archive.close()
        raise
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many kinds on a broken file
        reader.archive.close()
        raise _unreadable(raw, exc) from None
    return reader.wb


def _shared_strings(src: Any, raw: Any) -> list[str]:
    """The workbook's shared strings table, as openpyxl's read_string_table
    gives it (a string's <t> and its runs' <t>, phonetic runs left out),
    but each string dropped from the XML tree once read, and at most
    MAX_ROW_ELEMENTS elements in one string: openpyxl kept an emptied
    element per string, and 50 MB of <si/> took a gigabyte and a minute."""
    from openpyxl.xml.constants import SHEET_MAIN_NS
    from openpyxl.xml.functions import iterparse

    si_tag, t_tag, r_tag = (f"{{{SHEET_MAIN_NS}}}{t}" for t in ("si", "t", "r"))
    strings: list[str] = []
    append = strings.append
    root = None
    depth = elements = 0
    try:
        for event, el in iterparse(src, events=("start", "end")):
            if event == "start":
                if root is None:
                    root = el
                depth += 1
                continue
            depth -= 1
            elements += 1
            if elements > MAX_ROW_ELEMENTS:
                raise NodeConfigError(
                    f"path: the shared strings of '{quote(str(raw))}' hold more than "
                    f"{MAX_ROW_ELEMENTS:,} XML elements in one string; no real workbook does")
            if depth != 1:
                continue
            if el.tag == si_tag:
                plain, runs = None, []
                for child in el:
                    if child.tag == t_tag:
                        plain = child.text
                    elif child.tag == r_tag:
                        text = None
                        for part in child:
                            if part.tag == t_tag:
                                text = part.text
                        if text:
                            runs.append(text)
                text = (plain or "") + "".join(runs) if runs else (plain or "")
                append(text.replace("x005F_", "") if "x005F_" in text else text)
            root.clear()  # type: ignore[union-attr] - set at the first start
            elements = 0
    except NodeConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - broken XML
        raise NodeConfigError(f"path: the shared strings of '{quote(str(raw))}' cannot be "
                              f"read ({type(exc).__name__}: {quote(str(exc))})") from None
    return strings


def _unreadable(raw: Any, exc: BaseException) -> NodeConfigError:
    return NodeConfigError(f"path: '{quote(str(raw))}' is not a workbook openpyxl can read "
                           f"({type(exc).__name__}: {quote(str(exc))})")


def _iso(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    return value


_DATES = (dt.datetime, dt.date, dt.time, dt.timedelta)

"""Hostile .xlsx files against excel.read (and excel.write, which opens a
workbook to append to): each is built here with zipfile, small on disk, and
each is refused with an error that names the bound, quickly and without
unpacking what it hides.

- sparse rows: row 1 and row 2,000,000,000 (openpyxl's iter_rows makes up
  every row between them, so the read never ended);
- every row counts, empty or not: a million empty rows, or one row number
  repeated, is refused at Excel's 1,048,576;
- a zip bomb: a 60 MB sheet part in a 63 KB file (worksheet parts used to be
  exempt from the unpacked-size check);
- a zip directory that lies about a part's size, smaller or larger, with the
  CRC forged to match what Python's zip reader would hand over;
- hundreds of thousands of XML elements in one row (all in memory until the
  row ends), between rows (never cleared), or in one shared string; and
  millions of empty shared strings (openpyxl kept an element for each);
- parts that are each under max_bytes but together unpack to more than
  4 x max_bytes;
- a zip directory over 4 MB (a 50 MB zip can list a million parts);
- a cancelled read (the run stopping, a tool timeout) stops parsing: the
  worker thread ends at its next row instead of running on.

A seeded fuzz round damages a real workbook in many ways (bytes of the zip,
the sheet's XML, the part sizes) and checks that each read ends with rows or
a clear error, never another exception.
"""

from __future__ import annotations

import asyncio
import io
import random
import re
import struct
import threading
import zipfile
import zlib
from pathlib import Path

import openpyxl
import pytest

from nodes.files import excel_nodes
from nodes.files.excel_nodes import EXCEL_MAX_ROWS, MAX_ROW_ELEMENTS, read_excel
from runtime.node import NodeConfigError
from tests.runtime_fixtures import N, engine_for, make_flow, run
from tests.servers.flows import agent_flow, fixed, scripted
from tests.test_file_nodes import fails, ok

SHEET = "xl/worksheets/sheet1.xml"
NS = b"http://schemas.openxmlformats.org/spreadsheetml/2006/main"
WHOLE = (None, None, None, None)


# -- builders --------------------------------------------------------------------

def plain_parts(rows: list | None = None) -> dict[str, bytes]:
    """The parts of a real workbook openpyxl wrote."""
    wb = openpyxl.Workbook()
    for row in rows or [["a"]]:
        wb.active.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def workbook(path: Path, sheet_chunks, *, parts: dict[str, bytes] | None = None) -> Path:
    """A real workbook whose first sheet's part is the bytes of
    ``sheet_chunks``, written as a stream so that a huge part never sits in
    memory; ``parts`` replaces or adds other parts."""
    all_parts = {**plain_parts(), **(parts or {})}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in all_parts.items():
            if name != SHEET:
                z.writestr(name, data)
        with z.open(SHEET, "w", force_zip64=True) as w:
            for chunk in sheet_chunks:
                w.write(chunk)
    return path


def sheet(rows_xml: bytes, before: bytes = b"") -> list[bytes]:
    return [b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="' + NS + b'">', before,
            b"<sheetData>", rows_xml, b"</sheetData></worksheet>"]


def repeated(head: bytes, unit: bytes, count: int, tail: bytes):
    yield head
    block = unit * 65_536
    left = count
    while left > 0:
        n = min(left, 65_536)
        yield block[:len(unit) * n]
        left -= n
    yield tail


def sparse(path: Path, far: int = 2_000_000_000) -> Path:
    return workbook(path, sheet(b'<row r="1"><c r="A1"><v>1</v></c></row>'
                                b'<row r="%d"><c r="A%d"><v>2</v></c></row>' % (far, far)))


def huge_cell(path: Path, size: int) -> Path:
    head = b"".join(sheet(b"")[:3]) + b'<row r="1"><c r="A1" t="inlineStr"><is><t>'
    return workbook(path, repeated(head, b"A", size, b"</t></is></c></row></sheetData>"
                                   b"</worksheet>"))


def set_declared(path: Path, name: str, declared: int, crc: int | None = None) -> None:
    """Make the zip's headers (local and central) say that ``name`` unpacks
    to ``declared`` bytes, and carry ``crc`` if given."""
    data = bytearray(path.read_bytes())
    raw = name.encode()
    for sig, name_at, lens_at, crc_at, size_at in ((b"PK\x03\x04", 30, 26, 14, 22),
                                                   (b"PK\x01\x02", 46, 28, 16, 24)):
        i = data.find(sig)
        while i >= 0:
            if data[i + name_at:i + name_at + len(raw)] == raw:
                if struct.unpack_from("<I", data, i + size_at)[0] == 0xFFFFFFFF:
                    name_len, extra_len = struct.unpack_from("<HH", data, i + lens_at)
                    x = i + name_at + name_len
                    while x < i + name_at + name_len + extra_len:
                        tag, length = struct.unpack_from("<HH", data, x)
                        if tag == 1:  # zip64: the unpacked size comes first
                            struct.pack_into("<Q", data, x + 4, declared)
                        x += 4 + length
                else:
                    struct.pack_into("<I", data, i + size_at, declared)
                if crc is not None:
                    struct.pack_into("<I", data, i + crc_at, crc)
            i = data.find(sig, i + 4)
    path.write_bytes(bytes(data))


def read(path: Path, *, header_row: int = 1, max_bytes: int = 50_000_000,
         stop: threading.Event | None = None):
    more = {"stop": stop} if stop is not None else {}
    return read_excel(path, path.name, "", WHOLE, header_row, 100_000, max_bytes, **more)


def refused(path: Path, **kw) -> str:
    with pytest.raises(NodeConfigError) as err:
        read(path, **kw)
    return str(err.value)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "base"
    folder.mkdir()
    return folder


# -- rows --------------------------------------------------------------------------

async def test_rows_1_and_2_000_000_000_are_refused_at_once(base: Path):
    path = sparse(base / "sparse.xlsx")
    assert path.stat().st_size < 10_000
    error = await fails("excel.read", base, path="sparse.xlsx")
    assert error == ("path: sheet 'Sheet' of 'sparse.xlsx' has a row numbered 2,000,000,000, "
                     "past Excel's last row 1,048,576")


def test_a_row_just_past_excels_last_is_refused(base: Path):
    # Today's code walked the 3,000,000 made-up rows and returned row 1.
    path = sparse(base / "far.xlsx", far=3_000_000)
    assert refused(path, header_row=0) == (
        "path: sheet 'Sheet' of 'far.xlsx' has a row numbered 3,000,000, past Excel's last "
        "row 1,048,576")


def test_empty_rows_count_against_the_row_bound(base: Path):
    # 1,048,577 empty rows, and a row number said 1,048,577 times over:
    # empty or out of order, every row element read is counted.
    for name, unit in (("empty.xlsx", b"<row/>"), ("same.xlsx", b'<row r="5"/>')):
        path = workbook(base / name, repeated(b"".join(sheet(b"")[:3]), unit,
                                              EXCEL_MAX_ROWS + 1, b"</sheetData></worksheet>"))
        assert path.stat().st_size < 100_000
        assert refused(path, header_row=0) == (
            f"path: sheet 'Sheet' of '{name}' holds more than Excel's 1,048,576 rows (empty "
            "ones count too)")


def test_sparse_rows_inside_the_bound_still_read(base: Path):
    path = workbook(base / "gaps.xlsx", sheet(
        b'<row r="1"><c r="A1" t="inlineStr"><is><t>id</t></is></c></row>'
        b'<row r="500000"><c r="A500000"><v>7</v></c></row>'
        b'<row r="1048576"><c r="A1048576"><v>8</v></c></row>'))
    rows, columns, _ = read(path)
    assert columns == ["id"] and rows == [{"id": 7}, {"id": 8}]


def test_one_row_of_junk_elements_is_refused(base: Path):
    head = b"".join(sheet(b"")[:3]) + b'<row r="1"><c r="A1">'
    path = workbook(base / "junk.xlsx", repeated(head, b"<x/>", MAX_ROW_ELEMENTS + 1,
                                                 b"</c></row></sheetData></worksheet>"))
    assert refused(path, header_row=0) == (
        "path: sheet 'Sheet' of 'junk.xlsx' holds more than 262,144 XML elements in one row "
        "(before its first row); no real sheet does")


def test_junk_between_rows_counts_across_the_sheet(base: Path):
    # Elements between rows are never cleared: 1,000 rows each after 300
    # junk elements (under the per-row bound every time) add up past it.
    path = workbook(base / "between.xlsx", sheet((b"<x/>" * 300 + b"<row/>") * 1_000))
    assert refused(path, header_row=0) == (
        "path: sheet 'Sheet' of 'between.xlsx' holds more than 262,144 XML elements outside "
        "its rows; no real sheet does")


SST_TYPE = (b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
            b'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>')


def with_strings(path: Path, sst_chunks, cells: bytes) -> Path:
    parts = plain_parts()
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
        b"</Types>", SST_TYPE + b"</Types>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, b"".join(sheet(cells)) if name == SHEET else data)
        with z.open("xl/sharedStrings.xml", "w") as w:
            for chunk in sst_chunks:
                w.write(chunk)
    return path


def test_shared_strings_read_as_openpyxl_reads_them(base: Path):
    from openpyxl.reader.strings import read_string_table

    sst = (b'<sst xmlns="' + NS + b'"><si><t>plain</t></si><si/><si><t></t></si>'
           b'<si><r><rPr><b/></rPr><t>bold</t></r><r><t xml:space="preserve"> and </t></r>'
           b'<r><t>more</t></r><rPh sb="0" eb="1"><t>PHON</t></rPh></si>'
           b'<si><t>a_x005F_x000D_b</t></si><si><t>lead</t><r><t>run</t></r></si></sst>')
    cells = b"".join(b'<row r="%d"><c r="A%d" t="s"><v>%d</v></c></row>' % (i + 1, i + 1, i)
                     for i in range(6))
    path = with_strings(base / "strings.xlsx", [sst], cells)
    rows, _, _ = read(path, header_row=0)
    expected = read_string_table(io.BytesIO(sst))
    assert [r[0] for r in rows] == expected
    assert expected[3] == "bold and more"


def test_fifty_megabytes_of_empty_shared_strings_stay_small(base: Path):
    # openpyxl kept an emptied element per string: 10 million <si/> (77 KB
    # zipped) took a gigabyte and 80 s of CPU; they are dropped as read now
    # (200,000 here, to stay quick). A string of more than 262,144 elements
    # is refused.
    head = b'<sst xmlns="' + NS + b'">'
    path = with_strings(base / "sst.xlsx", repeated(head, b"<si/>", 200_000, b"</sst>"),
                        b'<row r="1"><c r="A1"><v>1</v></c></row>')
    assert read(path, header_row=0)[0] == [[1]]
    path = with_strings(base / "sst2.xlsx", repeated(head + b"<si>", b"<x/>",
                                                     MAX_ROW_ELEMENTS + 1, b"</si></sst>"),
                        b'<row r="1"><c r="A1"><v>1</v></c></row>')
    assert refused(path, header_row=0) == (
        "path: the shared strings of 'sst2.xlsx' hold more than 262,144 XML elements in one "
        "string; no real workbook does")


# -- unpacked sizes -------------------------------------------------------------------

async def test_a_zip_bomb_sheet_part_is_refused_unread(base: Path):
    # 60 MB of one cell in a 63 KB file: the worksheet part is measured too.
    path = huge_cell(base / "bomb.xlsx", 60_000_000)
    assert path.stat().st_size < 100_000
    error = await fails("excel.read", base, path="bomb.xlsx")
    assert error == ("max_bytes: the part xl/worksheets/sheet1.xml of 'bomb.xlsx' unpacks to "
                     "60,000,211 bytes, more than max_bytes=50,000,000")
    error = await fails("excel.write", base, [[1]], path="bomb.xlsx")
    assert error.startswith("max_bytes: the part xl/worksheets/sheet1.xml of 'bomb.xlsx'")


@pytest.mark.parametrize("forge_crc", [False, True])
def test_a_part_larger_than_its_declared_size_is_refused(base: Path, forge_crc: bool):
    # The directory says 300 bytes; the part holds a megabyte. With the CRC
    # forged to match the first 300 bytes, Python's zip reader hands over
    # just those and today's code read a cut sheet as if it were whole.
    real = b"".join(sheet(b'<row r="1"><c r="A1"><v>1</v></c></row>')) + b" " * 1_000_000
    path = workbook(base / "lie.xlsx", [real])
    set_declared(path, SHEET, 300, zlib.crc32(real[:300]) if forge_crc else None)
    assert refused(path, header_row=0) == (
        "path: the part xl/worksheets/sheet1.xml of 'lie.xlsx' unpacks to more than the 300 "
        "bytes the zip directory declares for it; the file is damaged or crafted")


def test_a_part_smaller_than_its_declared_size_is_refused(base: Path):
    real = b"".join(sheet(b'<row r="1"><c r="A1"><v>1</v></c></row>'))
    path = workbook(base / "short.xlsx", [real])
    set_declared(path, SHEET, 2_000_000)
    assert refused(path, header_row=0) == (
        f"path: the part xl/worksheets/sheet1.xml of 'short.xlsx' unpacks to {len(real):,} "
        "bytes, not the 2,000,000 the zip directory declares for it; the file is damaged or "
        "crafted")
    set_declared(path, SHEET, 60_000_000)  # and a declared size over the bound: unread
    assert refused(path, header_row=0) == (
        "max_bytes: the part xl/worksheets/sheet1.xml of 'short.xlsx' unpacks to 60,000,000 "
        "bytes, more than max_bytes=50,000,000")


def test_parts_under_the_bound_that_add_up_past_it_are_refused(base: Path):
    pad = b"<!--" + b"p" * 900_000 + b"-->"
    parts = plain_parts()
    extra = {name: parts[name].replace(b"?>", b"?>" + pad, 1) if parts[name].startswith(b"<?xml")
             else pad + parts[name]
             for name in ("xl/styles.xml", "xl/workbook.xml", "xl/theme/theme1.xml",
                          "docProps/core.xml")}
    path = workbook(base / "many.xlsx", sheet(b'<row r="1"><c r="A1"><v>1</v></c></row>', pad),
                    parts=extra)
    assert refused(path, header_row=0, max_bytes=1_000_000) == (
        "max_bytes: reading 'many.xlsx' unpacked more than 4,000,000 bytes in all "
        "(4 x max_bytes=1,000,000)")
    rows, _, _ = read(path, header_row=0, max_bytes=2_000_000)
    assert rows == [[1]]


def test_a_zip_directory_over_4_mb_is_refused_before_it_is_read(base: Path):
    # Opening a zip costs memory for every part its directory lists (a
    # 50 MB file can list a million): over 4 MB of directory, it is not
    # opened. Long names fill the directory here, which is quicker to build.
    path = base / "parts.xlsx"
    workbook(path, sheet(b'<row r="1"><c r="A1"><v>1</v></c></row>'),
             parts={f"x/{i:04x}" + "n" * 2_000: b"" for i in range(2_100)})
    error = refused(path, header_row=0)
    assert error.startswith("path: the zip directory (list of parts) of 'parts.xlsx' is ")
    assert error.endswith("bytes, more than the 4,000,000 a workbook may have")


# -- cancel ----------------------------------------------------------------------------

async def test_stopping_the_run_stops_the_parse(base: Path, monkeypatch: pytest.MonkeyPatch):
    """The read is held inside its row loop (a probe in _plain, which the
    loop calls once per row), the run is stopped, the probe lets go: the
    worker must end at its next row, not read the other 19,900."""
    wb = openpyxl.Workbook()
    for i in range(20_000):
        wb.active.append([i, f"name {i}"])
    wb.save(base / "long.xlsx")

    reached, release = threading.Event(), threading.Event()
    calls = [0]
    worker: list[threading.Thread] = []
    plain = excel_nodes._plain

    def probe(values):
        calls[0] += 1
        if calls[0] == 100:
            worker.append(threading.current_thread())
            reached.set()
            release.wait()
        return plain(values)

    monkeypatch.setattr(excel_nodes, "_plain", probe)
    flow = make_flow([N("src", "core.inject"),
                      N("n", "excel.read", path="long.xlsx", header_row=0, base_folder=str(base)),
                      N("show", "core.debug", path="msg")], ["src->n", "n->show"])
    engine, _ = engine_for(flow)
    running = asyncio.ensure_future(engine.run())
    try:
        assert await asyncio.to_thread(reached.wait, 120)
        engine.stop("test")
        result = await running
    finally:
        release.set()
    assert result.reason == "interrupted"
    worker[0].join(120)
    assert not worker[0].is_alive()
    assert calls[0] == 100  # not one row more after the cancel


async def test_a_tool_call_past_its_timeout_stops_the_parse(base: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    """An agent calls read_excel with a 0.05 s tool timeout; the probe holds
    the first row until the run is over, so the timeout always comes first
    (wherever the worker was then). Afterwards the worker must end having
    handed over at most that one row."""
    wb = openpyxl.Workbook()
    for i in range(20_000):
        wb.active.append([i])
    wb.save(base / "long.xlsx")

    release = threading.Event()
    calls = [0]
    plain = excel_nodes._plain

    def probe(values):
        calls[0] += 1
        release.wait()
        return plain(values)

    monkeypatch.setattr(excel_nodes, "_plain", probe)
    before = set(threading.enumerate())
    flow = agent_flow(scripted([{"tool_calls": [{"name": "read_excel",
                                                 "arguments": {"path": "long.xlsx"}}]},
                                {"text": "gave up"}], tool_timeout_seconds=0.05),
                      [{"id": "xl", "type": "excel.read",
                        "params": {"base_folder": fixed(str(base)), "header_row": fixed(0)}}])
    try:
        result = await run(flow)
    finally:
        release.set()
    [answer] = result.of("tool.result")
    assert answer.status == "error" and "did not finish within 0.05 s" in answer.error
    for thread in set(threading.enumerate()) - before:
        if thread.name == "switchboard-blocking-tool":
            thread.join(120)
            assert not thread.is_alive()
    assert calls[0] <= 1


def test_a_set_stop_flag_stops_the_read_at_its_first_part(base: Path):
    wb = openpyxl.Workbook()
    wb.active.append(["a"])
    wb.save(base / "small.xlsx")
    stop = threading.Event()
    stop.set()
    assert refused(base / "small.xlsx", stop=stop) == "the read was cancelled"


async def test_a_workbook_that_lists_no_sheet_is_refused_clearly_and_appended_to(base: Path):
    # A damaged workbook.xml with <sheets/>: reading it (and appending to
    # it) ended in "list index out of range", which the fuzz below found
    # now and then.
    parts = plain_parts()
    empty = re.sub(rb"<sheets>.*</sheets>", b"<sheets/>", parts["xl/workbook.xml"])
    assert empty != parts["xl/workbook.xml"]
    workbook(base / "nosheet.xlsx", sheet(b""), parts={"xl/workbook.xml": empty})
    for which in ("", "Sheet", "1"):
        error = await fails("excel.read", base, path="nosheet.xlsx", sheet=which)
        assert error == "sheet: the workbook has no sheet (its workbook.xml lists none)"
    await ok("excel.write", base, [[1, 2]], path="nosheet.xlsx", header=False)
    out = await ok("excel.read", base, path="nosheet.xlsx", header_row=0)
    assert out["payload"] == [[1, 2]] and out["sheet"] == "Sheet1"


# -- fuzz ------------------------------------------------------------------------------

def test_damaged_workbooks_read_or_fail_clearly(base: Path):
    """Seeded damage to a real workbook: bytes of the zip flipped, the
    sheet's XML cut or spliced, a part's declared size changed. Each read
    gives rows or a NodeConfigError; anything else escapes and fails."""
    rng = random.Random(6)
    parts = plain_parts([["id", "name", "when"], [1, "Ann", 3.5], [2, "Bob", None]] * 20)
    sheet_xml = parts[SHEET]
    good = base / "good.xlsx"
    workbook(good, [sheet_xml], parts=parts)
    clean = good.read_bytes()
    outcomes = {"rows": 0, "refused": 0}
    for i in range(200):
        path = base / f"f{i}.xlsx"
        kind = i % 5
        if kind == 0:
            data = bytearray(clean)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
        elif kind == 1:
            cut = rng.randrange(len(sheet_xml))
            workbook(path, [sheet_xml[:cut] + sheet_xml[cut + rng.randint(1, 40):]], parts=parts)
        elif kind == 2:
            at = rng.randrange(len(sheet_xml))
            splice = rng.choice([b'<row r="0"/>', b'<row r="-3"/>', b'<row r="99999999999"/>',
                                 b'<c r="ZZZ1"><v>1</v></c>', b'<c t="s"><v>999</v></c>',
                                 b'<c><v>1e999999</v></c>', b'<c><v>' + b"9" * 5000 + b'</v></c>',
                                 b'<dimension ref="A1:XFD9"/>', b"<!--", b"&bogus;", b"\xff\xfe"])
            workbook(path, [sheet_xml[:at] + splice + sheet_xml[at:]], parts=parts)
        elif kind == 3:
            workbook(path, [sheet_xml], parts=parts)
            set_declared(path, rng.choice([SHEET, "xl/workbook.xml", "xl/styles.xml"]),
                         rng.choice([0, 1, 299, 10**6, 2**32 - 2]))
        else:
            path.write_bytes(clean[:rng.randrange(len(clean))])
        try:
            read(path, header_row=rng.choice([0, 1]))
        except NodeConfigError as exc:
            assert str(exc) and "Traceback" not in str(exc)
            outcomes["refused"] += 1
        else:
            outcomes["rows"] += 1
    assert outcomes["rows"] and outcomes["refused"], outcomes
    rows, columns, _ = read(good)
    assert columns == ["id", "name", "when"] and len(rows) == 59


async def test_an_ordinary_workbook_reads_as_before(base: Path):
    await ok("excel.write", base, [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bob"}],
             path="plain.xlsx")
    out = await ok("excel.read", base, path="plain.xlsx")
    assert out["payload"] == [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bob"}]

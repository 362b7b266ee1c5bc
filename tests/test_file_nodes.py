"""The Files and Tables nodes on real files in tmp_path: every node
round-trips through the engine, the bounds are named in their errors, and a
path that would leave the base folder (``..``, absolute, a link pointing
outside, a folder link on the way) is refused with nothing touched, also
when an agent's tool call supplies it."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.files.csv_nodes import ReadCsv, WriteCsv
from nodes.files.excel_nodes import ReadExcel, WriteExcel
from nodes.files.file_nodes import DeleteFile, ListFiles, MoveFile, ReadFile, WriteFile
from nodes.files.paths import PathRefused, base_folder, confined_path, default_base
from runtime.flow import FlowNode, validate_flow
from runtime.registry import Registry
from runtime.spec import Scope
from runtime.tools import tool_schema
from tests import servers
from tests.runtime_fixtures import N, make_flow, run
from tests.servers.flows import agent_flow, fixed, scripted

FILE_NODES = [ReadFile, WriteFile, ListFiles, MoveFile, DeleteFile, ReadCsv, WriteCsv, ReadExcel,
              WriteExcel]
AI = {"scope": "ai"}
ROOT = Path(__file__).resolve().parents[1]


def msg_path(path: str) -> dict:
    return {"scope": "message", "path": path}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "base"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the base folder, with one file that must survive."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("outside data")
    return folder


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


async def node_run(type_: str, base: Path, payload=None, **params):
    """inject -> the node -> debug(msg); the message the node sent on (None
    if it failed) and the node.error texts."""
    params.setdefault("base_folder", str(base))
    flow = make_flow([N("src", "core.inject", payload=payload), N("n", type_, **params),
                      N("show", "core.debug", path="msg")], ["src->n", "n->show"])
    result = await run(flow)
    errors = [e.message for e in result.of("node.error")]
    shown = result.debug("show")
    return (shown[0] if shown else None), errors


async def ok(type_: str, base: Path, payload=None, **params) -> dict:
    msg, errors = await node_run(type_, base, payload, **params)
    assert errors == [] and msg is not None, errors
    return msg


async def fails(type_: str, base: Path, payload=None, **params) -> str:
    msg, errors = await node_run(type_, base, payload, **params)
    assert msg is None and len(errors) == 1, (msg, errors)
    return errors[0]


# -- the confinement helper ------------------------------------------------

def test_confined_path_refuses_every_way_out(base: Path, outside: Path):
    (base / "sub").mkdir()
    os.symlink(outside / "keep.txt", base / "out-link")
    os.symlink(outside, base / "out-folder")
    os.symlink(base / "sub", base / "in-folder")
    assert confined_path(base, "sub/../a.txt") == base.resolve() / "a.txt"
    assert confined_path(base, "in-folder/new.txt") == base.resolve() / "sub" / "new.txt"
    assert confined_path(base, ".") == base.resolve()
    refused = {
        "../x": "leads outside the base folder",
        "sub/../../x": "leads outside the base folder",
        str(outside / "keep.txt"): "is an absolute path",
        "out-link": "symbolic link that leads outside",
        "out-folder/keep.txt": "symbolic link that leads outside",
        "out-folder/new.txt": "symbolic link that leads outside",
        "a\0b": "NUL",
        "x" * 4097: "more than the 4,096",
        "": "no path given",
    }
    for raw, why in refused.items():
        with pytest.raises(PathRefused, match=why) as err:
            confined_path(base, raw, param="target")
        assert str(err.value).startswith("target: ")
        assert str(base) not in str(err.value)  # the base folder's location is not told
    with pytest.raises(PathRefused, match="does not exist"):
        confined_path(base, "missing.txt", must_exist=True)
    # follow_last=False names the link itself, not its target.
    os.symlink(base / "sub", base / "sub-link")
    assert confined_path(base, "sub-link", follow_last=False) == base.resolve() / "sub-link"


def test_base_folder_default_is_in_the_data_dir(data_dir: Path):
    assert default_base() == data_dir / "files"
    assert base_folder("") == data_dir / "files"
    assert base_folder("reports") == data_dir / "files" / "reports"
    assert base_folder("~/x") == Path.home() / "x"


# -- files.* ------------------------------------------------------------------

async def test_write_then_read_text_json_and_base64(base: Path):
    out = await ok("files.write", base, path="notes/today.txt", content="café\nline 2",
                   encoding="latin-1")
    assert out["file"] == "notes/today.txt" and out["bytes_written"] == 11
    assert (base / "notes" / "today.txt").read_bytes() == "café\nline 2".encode("latin-1")
    back = await ok("files.read", base, path="notes/today.txt", encoding="latin-1")
    assert back["payload"] == "café\nline 2" and back["size"] == 11
    # Read with the wrong encoding: a clear error, not mojibake.
    error = await fails("files.read", base, path="notes/today.txt")
    assert error.startswith("encoding: 'notes/today.txt' is not valid utf-8 text (byte 0xe9")

    value = {"items": [1, 2.5, None, True], "name": "Zoë"}
    await ok("files.write", base, value, path="data.json", content=msg_path("payload"),
             format="json")
    back = await ok("files.read", base, path="data.json", format="json")
    assert back["payload"] == value

    blob = bytes(range(256))
    await ok("files.write", base, base64.b64encode(blob).decode(), path="x.txt",
             content=msg_path("payload"))
    (base / "blob.bin").write_bytes(blob)
    back = await ok("files.read", base, path="blob.bin", format="base64")
    assert base64.b64decode(back["payload"]) == blob


async def test_write_modes_append_and_fail_if_exists(base: Path):
    await ok("files.write", base, path="log.txt", content="one\n")
    await ok("files.write", base, path="log.txt", content="two\n", mode="append")
    assert (base / "log.txt").read_text() == "one\ntwo\n"
    error = await fails("files.write", base, path="log.txt", content="three", mode="fail_if_exists")
    assert error == "path: 'log.txt' already exists (mode fail_if_exists)"
    assert (base / "log.txt").read_text() == "one\ntwo\n"
    await ok("files.write", base, path="new.txt", content="fresh", mode="fail_if_exists")
    assert (base / "new.txt").read_text() == "fresh"
    # append + json writes one JSON Lines record per message.
    for record in ({"a": 1}, {"a": 2}):
        await ok("files.write", base, record, path="events.jsonl", content=msg_path("payload"),
                 format="json", mode="append")
    lines = (base / "events.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1}, {"a": 2}]


async def test_overwrite_is_atomic_and_keeps_permissions(base: Path):
    target = base / "conf.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    await ok("files.write", base, path="conf.txt", content="new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in base.iterdir()) == ["conf.txt"]  # no temp file left
    # A failed write (content not encodable) leaves the old file as it was.
    error = await fails("files.write", base, path="conf.txt", content="€", encoding="latin-1")
    assert error.startswith("encoding: the content holds '€'")
    assert target.read_text() == "new"
    assert sorted(p.name for p in base.iterdir()) == ["conf.txt"]


async def test_write_folders_and_bad_content(base: Path):
    error = await fails("files.write", base, path="a/b/c.txt", content="x", create_folders=False)
    assert "the folder of 'a/b/c.txt' does not exist" in error
    assert not (base / "a").exists()
    error = await fails("files.write", base, {"k": 1}, path="x.txt", content=msg_path("payload"))
    assert error.startswith("content: format text writes text, got an object")
    (base / "dir").mkdir()
    error = await fails("files.write", base, path="dir", content="x")
    assert error == "path: 'dir' is a folder, not a file"


async def test_read_and_write_bounds_are_named(base: Path):
    (base / "big.txt").write_text("x" * 101)
    error = await fails("files.read", base, path="big.txt", max_bytes=100)
    assert error == "max_bytes: 'big.txt' is 101 bytes, more than max_bytes=100"
    assert (await ok("files.read", base, path="big.txt", max_bytes=101))["size"] == 101
    error = await fails("files.write", base, path="w.txt", content="y" * 51, max_bytes=50)
    assert error.startswith("max_bytes: the content is 51 characters, more than max_bytes=50")
    assert not (base / "w.txt").exists()
    # Two bytes per character in utf-8: measured in bytes after encoding.
    error = await fails("files.write", base, path="w.txt", content="é" * 30, max_bytes=50)
    assert error == "max_bytes: the content is 60 bytes, more than max_bytes=50"
    assert not (base / "w.txt").exists()
    (base / "bad.json").write_text('{"a": 1,,}')
    error = await fails("files.read", base, path="bad.json", format="json")
    assert error.startswith("path: 'bad.json' is not valid JSON (line 1, column 9")


async def test_list_with_glob_recursive_and_max_entries(base: Path, outside: Path):
    (base / "a.csv").write_text("1")
    (base / "b.txt").write_text("22")
    (base / "2024").mkdir()
    (base / "2024" / "c.csv").write_text("333")
    (base / "2024" / "deep").mkdir()
    (base / "2024" / "deep" / "d.csv").write_text("4444")
    os.symlink(outside, base / "escape")  # never listed, never walked
    os.symlink(outside / "keep.txt", base / "escape.csv")

    top = await ok("files.list", base)
    assert [(e["name"], e["is_dir"], e["size"]) for e in top["payload"]] == [
        ("2024", True, None), ("a.csv", False, 1), ("b.txt", False, 2)]
    assert top["count"] == 3
    dt.datetime.fromisoformat(top["payload"][1]["mtime"])

    csvs = await ok("files.list", base, glob="*.csv", recursive=True)
    assert [e["path"] for e in csvs["payload"]] == ["2024/c.csv", "2024/deep/d.csv", "a.csv"]
    sub = await ok("files.list", base, folder="2024", glob="deep/*.csv", recursive=True)
    assert [e["path"] for e in sub["payload"]] == ["2024/deep/d.csv"]

    error = await fails("files.list", base, recursive=True, max_entries=4)
    assert error == ("max_entries: '.' holds more than max_entries=4 matching entries; narrow "
                     "the glob or raise max_entries")
    error = await fails("files.list", base, folder="a.csv")
    assert error == "folder: 'a.csv' is a file, not a folder"


async def test_list_the_default_folder_before_it_exists(data_dir: Path):
    out = await ok("files.list", data_dir, base_folder="")
    assert out["payload"] == [] and not (data_dir / "files").exists()


async def test_move_rename_overwrite_and_folders(base: Path):
    (base / "a.txt").write_text("A")
    (base / "b.txt").write_text("B")
    out = await ok("files.move", base, source="a.txt", destination="archive/2024/a.txt")
    assert out["file"] == "archive/2024/a.txt"
    assert (base / "archive/2024/a.txt").read_text() == "A" and not (base / "a.txt").exists()
    error = await fails("files.move", base, source="b.txt", destination="archive/2024/a.txt")
    assert error == ("destination: 'archive/2024/a.txt' already exists; turn on overwrite to "
                     "replace it")
    assert (base / "b.txt").read_text() == "B"
    await ok("files.move", base, source="b.txt", destination="archive/2024/a.txt", overwrite=True)
    assert (base / "archive/2024/a.txt").read_text() == "B" and not (base / "b.txt").exists()
    await ok("files.move", base, source="archive", destination="old")
    assert (base / "old/2024/a.txt").read_text() == "B"
    error = await fails("files.move", base, source="old", destination="old/inner")
    assert "a folder cannot move into itself" in error
    error = await fails("files.move", base, source="missing.txt", destination="x.txt")
    assert error == "source: 'missing.txt' does not exist in the base folder"
    error = await fails("files.move", base, source=".", destination="x")
    assert "is the base folder or holds it" in error


async def test_delete_files_folders_and_links(base: Path):
    (base / "a.txt").write_text("A")
    out = await ok("files.delete", base, path="a.txt")
    assert out["deleted"] == "a.txt" and not (base / "a.txt").exists()
    (base / "dir" / "sub").mkdir(parents=True)
    (base / "dir" / "sub" / "f.txt").write_text("F")
    error = await fails("files.delete", base, path="dir")
    assert error.startswith("path: 'dir' is a folder; deleting folders needs recursive")
    assert (base / "dir" / "sub" / "f.txt").exists()
    await ok("files.delete", base, path="dir", recursive=True)
    assert not (base / "dir").exists()
    # A link is deleted as a link; what it points to stays.
    (base / "target.txt").write_text("T")
    os.symlink(base / "target.txt", base / "link.txt")
    await ok("files.delete", base, path="link.txt")
    assert not os.path.lexists(base / "link.txt") and (base / "target.txt").read_text() == "T"
    error = await fails("files.delete", base, path=".", recursive=True)
    assert "is the base folder or holds it" in error
    error = await fails("files.delete", base, path=str(base.parent), recursive=True)
    assert "is the base folder or holds it" in error
    assert (base / "target.txt").exists()


# -- escapes: refused before anything is touched -------------------------------

def tree(folder: Path) -> dict:
    """Everything under a folder, links as links (never followed)."""
    out: dict = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                out[key] = ("link", os.readlink(path))
            elif path.is_dir():
                out[key] = "dir"
            else:
                out[key] = path.read_bytes()
    return out


@pytest.fixture
def trap(base: Path, outside: Path) -> None:
    """A base folder holding a link to the outside folder and one to a file
    out there: the ways a path could try to leave."""
    (base / "sub").mkdir()
    (base / "inside.txt").write_text("inside")
    os.symlink(outside, base / "out-link")
    os.symlink(outside / "keep.txt", base / "keep-link")


def all_tools(base: Path) -> list[dict]:
    where = {"base_folder": fixed(str(base))}
    ai_params = {"files.write": ["path", "content"], "files.read": ["path"],
                 "files.delete": ["path"], "files.move": ["source", "destination"],
                 "files.list": ["folder"], "csv.write": ["path", "rows"], "csv.read": ["path"],
                 "excel.write": ["path", "rows"], "excel.read": ["path"]}
    return [{"id": type_.replace(".", "_"), "type": type_,
             "params": {**{p: AI for p in params}, **where}}
            for type_, params in ai_params.items()]


ESCAPES = ["../escape.txt", "sub/../../escape.txt", "ABSOLUTE", "out-link/escape.txt",
           "out-link", "keep-link"]


@pytest.mark.parametrize("raw", ESCAPES)
async def test_an_agent_cannot_reach_outside_the_base_folder(base: Path, outside: Path, trap,
                                                             raw: str):
    if raw == "ABSOLUTE":
        raw = str(outside / "escape.txt")
    before = tree(base.parent)
    calls = [("write_file", {"path": raw, "content": "pwned"}),
             ("read_file", {"path": raw}),
             ("delete_file", {"path": raw}),
             ("move_file", {"source": "inside.txt", "destination": raw}),
             ("move_file", {"source": raw, "destination": "moved.txt"}),
             ("list_files", {"folder": raw}),
             ("write_csv", {"path": raw, "rows": [{"a": 1}]}),
             ("read_csv", {"path": raw}),
             ("write_excel", {"path": raw, "rows": [{"a": 1}]}),
             ("read_excel", {"path": raw})]
    turns = [{"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}, {"text": "done"}]
    flow = agent_flow(scripted(turns), all_tools(base), "Escape")
    result, rec, _ = await servers.flows.run(flow, reg=Registry([Inject, DebugNode, Agent,
                                                                 *FILE_NODES]))
    assert result.status == "ok", rec.of("node.error")
    [answer] = rec.debug_values()
    results = answer["agent"]["tool_calls"]  # in call order
    assert [r["tool"] for r in results] == [name for name, _ in calls]
    for res in results:
        assert res["status"] == "error", res
        assert ("outside the base folder" in res["error"]
                or "is an absolute path" in res["error"]), res
        assert str(base) not in res["error"]
    assert tree(base.parent) == before  # nothing created, changed, moved or deleted


async def test_an_agent_works_inside_the_base_folder(base: Path):
    (base / "inside.txt").write_text("hello from inside")
    turns = [{"tool_calls": [
        {"name": "write_file", "arguments": {"path": "../escape.txt", "content": "pwned"}},
        {"name": "write_file", "arguments": {"path": "notes/ok.txt", "content": "fine"}},
        {"name": "read_file", "arguments": {"path": "inside.txt"}},
        {"name": "write_csv", "arguments": {"path": "t.csv", "rows": [{"a": 1, "b": "x"}]}}]},
        # The calls of one turn run concurrently: what reads their files comes next turn.
        {"tool_calls": [{"name": "list_files", "arguments": {"folder": "notes"}},
                        {"name": "read_csv", "arguments": {"path": "t.csv"}}]},
        {"text": "done"}]
    flow = agent_flow(scripted(turns), all_tools(base), "Save a note")
    result, rec, _ = await servers.flows.run(flow, reg=Registry([Inject, DebugNode, Agent,
                                                                 *FILE_NODES]))
    assert result.status == "ok", rec.of("node.error")
    [answer] = rec.debug_values()
    results = [(c["tool"], c["status"], c.get("error", ""), c.get("data"))
               for c in answer["agent"]["tool_calls"]]  # in call order
    assert results[0] == ("write_file", "error",
                          "path: '../escape.txt' leads outside the base folder", None)
    assert not (base.parent / "escape.txt").exists()
    assert results[1] == ("write_file", "success", "", {"file": "notes/ok.txt", "size": 4})
    assert results[2][3]["content"] == "hello from inside"
    assert results[3][3] == {"file": "t.csv", "rows_written": 1}
    assert [e["path"] for e in results[4][3]["entries"]] == ["notes/ok.txt"]
    assert results[5][3]["rows"] == [{"a": "1", "b": "x"}]
    assert (base / "notes" / "ok.txt").read_text() == "fine"


async def test_designer_paths_may_be_absolute_unless_forbidden(base: Path, outside: Path):
    target = outside / "report.txt"
    out = await ok("files.write", base, path=str(target), content="from the designer")
    assert target.read_text() == "from the designer" and out["file"] == str(target)
    back = await ok("files.read", base, {"p": str(target)}, path=msg_path("payload.p"))
    assert back["payload"] == "from the designer"
    error = await fails("files.read", base, path=str(target), allow_absolute=False)
    assert error.startswith("path: '") and "is an absolute path" in error
    # A relative designer path is confined all the same.
    error = await fails("files.write", base, path="../sneaky.txt", content="x")
    assert error == "path: '../sneaky.txt' leads outside the base folder"
    assert not (base.parent / "sneaky.txt").exists()


@pytest.mark.parametrize("raw", ["../sneaky.txt", "ABSOLUTE"])
async def test_an_ai_param_is_confined_in_a_plain_message_too(base: Path, outside: Path, raw):
    # Outside a tool call an ai-scoped param reads msg[name]; whoever put it
    # there, it is confined as if the AI had sent it.
    raw = str(outside / "sneaky.txt") if raw == "ABSOLUTE" else raw
    flow = make_flow([
        N("src", "core.inject", payload="x"),
        N("set", "core.change", rules=[{"action": "set", "path": "path", "value": raw}]),
        N("w", "files.write", path=AI, content=msg_path("payload"), base_folder=str(base)),
        N("show", "core.debug")], ["src->set", "set->w", "w->show"])
    result = await run(flow)
    [error] = [e.message for e in result.of("node.error")]
    assert "leads outside the base folder" in error or "is an absolute path" in error
    assert not (base.parent / "sneaky.txt").exists() and not (outside / "sneaky.txt").exists()


# -- CSV ---------------------------------------------------------------------

async def test_csv_round_trip_with_header(base: Path):
    rows = [{"name": "Ann", "city": "Oslo", "note": "a, b"},
            {"name": "Bob", "city": "Köln", "extra": {"tags": ["x"]}, "vip": True},
            {"name": "Cy", "note": None}]
    out = await ok("csv.write", base, rows, path="people.csv")
    assert out["rows_written"] == 3 and out["file"] == "people.csv"
    assert (base / "people.csv").read_text(encoding="utf-8").splitlines() == [
        "name,city,note,extra,vip",
        'Ann,Oslo,"a, b",,',
        'Bob,Köln,,"{""tags"": [""x""]}",true',
        "Cy,,,,"]
    back = await ok("csv.read", base, path="people.csv")
    assert back["columns"] == ["name", "city", "note", "extra", "vip"]
    assert back["payload"][0] == {"name": "Ann", "city": "Oslo", "note": "a, b", "extra": "",
                                  "vip": ""}
    assert back["payload"][1]["extra"] == '{"tags": ["x"]}' and back["count"] == 3


async def test_csv_without_header_other_delimiter_and_latin1(base: Path):
    rows = [["Zoë", 1, 2.5], ["Bjørn", None, "x;y"]]
    await ok("csv.write", base, rows, path="t.csv", delimiter=";", encoding="latin-1")
    raw = (base / "t.csv").read_bytes()
    assert raw == "Zoë;1;2.5\r\nBjørn;;\"x;y\"\r\n".encode("latin-1")
    back = await ok("csv.read", base, path="t.csv", delimiter=";", header=False,
                    encoding="latin-1")
    assert back["payload"] == [["Zoë", "1", "2.5"], ["Bjørn", "", "x;y"]]
    assert back["columns"] == []
    await ok("csv.write", base, rows, path="tab.tsv", delimiter="\\t")
    assert (base / "tab.tsv").read_text().startswith("Zoë\t1\t2.5")
    error = await fails("csv.read", base, path="t.csv", delimiter=";")  # utf-8 by default
    assert error.startswith("encoding: 't.csv' is not valid utf-8-sig text")
    error = await fails("csv.read", base, ";;", path="t.csv", delimiter=msg_path("payload"))
    assert error.startswith("delimiter: ';;' is not one character")


async def test_csv_header_quirks(base: Path):
    (base / "q.csv").write_text("\ufeffid,,id,name\n1,2,3\n\n4,5,6,7\n", encoding="utf-8")
    back = await ok("csv.read", base, path="q.csv")
    assert back["columns"] == ["id", "column_2", "id_2", "name"]  # BOM skipped, names unique
    assert back["payload"] == [{"id": "1", "column_2": "2", "id_2": "3", "name": ""},
                               {"id": "4", "column_2": "5", "id_2": "6", "name": "7"}]
    (base / "wide.csv").write_text("a,b\n1,2,3\n")
    error = await fails("csv.read", base, path="wide.csv")
    assert error == ("path: 'wide.csv' line 2 has 3 fields, the header has 2; check the "
                     "delimiter (',')")


async def test_csv_append_follows_the_header(base: Path):
    await ok("csv.write", base, [{"a": 1, "b": 2}], path="log.csv")
    with open(base / "log.csv", "ab") as f:
        f.write(b"9,9")  # a last line without a line break
    await ok("csv.write", base, [{"b": 4, "a": 3}, {"a": 5}], path="log.csv", mode="append")
    assert (base / "log.csv").read_text().splitlines() == ["a,b", "1,2", "9,9", "3,4", "5,"]
    error = await fails("csv.write", base, [{"a": 1, "zzz": 2}], path="log.csv", mode="append")
    assert error == "rows: row 1 has the column 'zzz', which the header of 'log.csv' lacks (a, b)"
    error = await fails("csv.write", base, [{"a": 1}], path="log.csv", mode="fail_if_exists")
    assert error == "path: 'log.csv' already exists (mode fail_if_exists)"
    # A header written with a byte order mark (utf-8-sig) still matches.
    (base / "bom.csv").write_text("a,b\r\n1,2\r\n", encoding="utf-8-sig")
    await ok("csv.write", base, [{"b": 4, "a": 3}], path="bom.csv", mode="append")
    assert (base / "bom.csv").read_text(encoding="utf-8-sig").splitlines() == ["a,b", "1,2", "3,4"]
    # columns picks and orders; keys not listed are left out.
    await ok("csv.write", base, [{"a": 1, "b": 2, "c": 3}], path="cols.csv", columns=["c", "a"])
    assert (base / "cols.csv").read_text().splitlines() == ["c,a", "3,1"]


async def test_csv_bounds_and_bad_rows(base: Path):
    await ok("csv.write", base, [[i] for i in range(5)], path="n.csv", header=False)
    error = await fails("csv.read", base, path="n.csv", header=False, max_rows=4)
    assert error == ("max_rows: 'n.csv' has more than max_rows=4 rows; raise max_rows or split "
                     "the file")
    assert len((await ok("csv.read", base, path="n.csv", header=False, max_rows=5))["payload"]) == 5
    error = await fails("csv.read", base, path="n.csv", max_bytes=3)
    assert error.startswith("max_bytes: 'n.csv' is 15 bytes, more than max_bytes=3")
    error = await fails("csv.write", base, [[1]] * 6, path="m.csv", max_rows=5)
    assert error == "max_rows: 6 rows, more than max_rows=5"
    assert not (base / "m.csv").exists()
    error = await fails("csv.write", base, [{"a": 1}, [1]], path="m.csv")
    assert error.startswith("rows: row 2 is a list, row 1 is an object")
    error = await fails("csv.write", base, "not rows", path="m.csv")
    assert error == "rows: expected a list of rows (objects or lists), got str"


# -- Excel ---------------------------------------------------------------------

async def test_excel_write_then_openpyxl_reads_every_cell(base: Path):
    rows = [{"name": "Ann", "qty": 3, "price": 2.5, "paid": True, "when": "2024-05-01"},
            {"name": "=HYPERLINK(\"http://evil\")", "qty": 0, "price": None, "paid": False,
             "meta": {"k": [1]}},
            {"name": "#N/A", "qty": -7}]
    out = await ok("excel.write", base, rows, path="out/sales.xlsx", sheet="Sales")
    assert out["rows_written"] == 3 and out["sheet"] == "Sales" and out["file"] == "out/sales.xlsx"
    wb = openpyxl.load_workbook(base / "out" / "sales.xlsx")
    assert wb.sheetnames == ["Sales"]
    ws = wb["Sales"]
    got = [[c.value for c in row] for row in ws.iter_rows()]
    assert got == [
        ["name", "qty", "price", "paid", "when", "meta"],
        ["Ann", 3, 2.5, True, "2024-05-01", None],
        ["=HYPERLINK(\"http://evil\")", 0, None, False, None, '{"k": [1]}'],
        ["#N/A", -7, None, None, None, None]]
    assert ws["A3"].data_type == "s" and ws["A4"].data_type == "s"  # text, not a formula/error
    assert ws["B2"].data_type == "n" and ws["D2"].data_type == "b"

    # Append: below the last row, by the header's names; a new key is a new column.
    await ok("excel.write", base, [{"qty": 9, "name": "Dee", "region": "EU"}],
             path="out/sales.xlsx", sheet="Sales")
    ws = openpyxl.load_workbook(base / "out" / "sales.xlsx")["Sales"]
    assert [c.value for c in ws[1]] == ["name", "qty", "price", "paid", "when", "meta", "region"]
    assert [c.value for c in ws[5]] == ["Dee", 9, None, None, None, None, "EU"]

    # Another sheet in the same workbook; the first one stays.
    await ok("excel.write", base, [[1, 2], [3, 4]], path="out/sales.xlsx", sheet="Raw")
    wb = openpyxl.load_workbook(base / "out" / "sales.xlsx")
    assert wb.sheetnames == ["Sales", "Raw"] and wb["Sales"].max_row == 5
    assert [[c.value for c in r] for r in wb["Raw"].iter_rows()] == [[1, 2], [3, 4]]
    await ok("excel.write", base, [[5]], path="out/sales.xlsx", sheet="Raw", mode="replace_sheet")
    wb = openpyxl.load_workbook(base / "out" / "sales.xlsx")
    assert [[c.value for c in r] for r in wb["Raw"].iter_rows()] == [[5]]
    assert wb.sheetnames == ["Sales", "Raw"] and wb["Sales"].max_row == 5

    error = await fails("excel.write", base, [[1]], path="out/sales.xlsx", mode="fail_if_exists")
    assert error == "path: 'out/sales.xlsx' already exists (mode fail_if_exists)"
    await ok("excel.write", base, [{"x": 1}], path="out/sales.xlsx", mode="overwrite")
    wb = openpyxl.load_workbook(base / "out" / "sales.xlsx")
    assert wb.sheetnames == ["Sheet1"]
    assert [[c.value for c in r] for r in wb.active.iter_rows()] == [["x"], [1]]


async def test_excel_formulas_only_when_the_designer_allows(base: Path):
    await ok("excel.write", base, [["=1+1"]], path="f.xlsx", formulas=True)
    ws = openpyxl.load_workbook(base / "f.xlsx").active
    assert ws["A1"].data_type == "f" and ws["A1"].value == "=1+1"


@pytest.fixture
def workbook(base: Path) -> Path:
    """A workbook made with openpyxl directly: a title row, a header on row
    3, typed values, and a second sheet."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws.append(["just a summary"])
    orders = wb.create_sheet("Orders")
    orders.append(["Orders report, May"])
    orders.append([])
    orders.append(["id", "customer", None, "date", "total"])
    orders.append([1, "Ann", "x", dt.datetime(2024, 5, 1), 10.5])
    orders.append([2, "Bob", None, dt.datetime(2024, 5, 2, 14, 30), 7])
    orders.append([None, None, None, None, None])
    orders.append([3, "Cy", None, dt.date(2024, 5, 3), -1])
    path = base / "orders.xlsx"
    wb.save(path)
    return path


async def test_excel_read_sheet_header_row_and_range(base: Path, workbook: Path):
    out = await ok("excel.read", base, path="orders.xlsx", sheet="Orders", header_row=3)
    assert out["columns"] == ["id", "customer", "C", "date", "total"]
    assert out["payload"] == [
        {"id": 1, "customer": "Ann", "C": "x", "date": "2024-05-01", "total": 10.5},
        {"id": 2, "customer": "Bob", "C": None, "date": "2024-05-02T14:30:00", "total": 7},
        {"id": 3, "customer": "Cy", "C": None, "date": "2024-05-03", "total": -1}]
    assert out["sheet"] == "Orders" and out["count"] == 3

    ranged = await ok("excel.read", base, path="orders.xlsx", sheet="orders", range="B3:D5")
    assert ranged["columns"] == ["customer", "C", "date"]
    assert ranged["payload"] == [{"customer": "Ann", "C": "x", "date": "2024-05-01"},
                                 {"customer": "Bob", "C": None, "date": "2024-05-02T14:30:00"}]
    lists = await ok("excel.read", base, path="orders.xlsx", sheet="2", range="A4:B5",
                     header_row=0)
    assert lists["payload"] == [[1, "Ann"], [2, "Bob"]] and lists["columns"] == []
    first = await ok("excel.read", base, path="orders.xlsx")
    assert first["sheet"] == "Summary" and first["columns"] == ["just a summary"]

    error = await fails("excel.read", base, path="orders.xlsx", sheet="Summary", header_row=5)
    assert error == ("header_row: sheet 'Summary' has 1 row in the range read, fewer than "
                     "header_row=5")
    error = await fails("excel.read", base, path="orders.xlsx", sheet="Nope")
    assert error.startswith("sheet: the workbook has no sheet 'Nope' (its sheets: Summary, Orders")
    error = await fails("excel.read", base, path="orders.xlsx", sheet="Orders", header_row=3,
                        max_rows=2)
    assert error == ("max_rows: sheet 'Orders' has more than max_rows=2 rows; raise max_rows or "
                     "give a range")
    error = await fails("excel.read", base, path="orders.xlsx", range="A1:ZZZ")
    assert error.startswith("range: 'A1:ZZZ' is not a cell range")
    error = await fails("excel.read", base, path="orders.xlsx", range="A1:AZZ9")
    assert error == "range: 'A1:AZZ9' is 1,378 columns wide, more than the 1,024 a row may have"
    error = await fails("excel.read", base, path="orders.xlsx", max_bytes=100)
    assert error.startswith("max_bytes: 'orders.xlsx' is")
    (base / "fake.xlsx").write_text("not a zip")
    error = await fails("excel.read", base, path="fake.xlsx")
    assert error.startswith("path: 'fake.xlsx' is not an .xlsx workbook")


async def test_excel_refuses_a_part_that_unpacks_too_big(base: Path):
    # Every part's unpacked size is read from the zip directory before
    # anything is unpacked (tests/test_security_xlsx.py has the worksheet
    # bombs, the lying directories and the sparse rows).
    await ok("excel.write", base, [{"t": "x"}], path="plain.xlsx")
    with zipfile.ZipFile(base / "plain.xlsx") as src, \
            zipfile.ZipFile(base / "bomb.xlsx", "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("xl/sharedStrings.xml", " " * 1_000_000)
    assert (base / "bomb.xlsx").stat().st_size < 100_000
    error = await fails("excel.read", base, path="bomb.xlsx", max_bytes=100_000)
    assert error == ("max_bytes: the part xl/sharedStrings.xml of 'bomb.xlsx' unpacks to "
                     "1,000,000 bytes, more than max_bytes=100,000")
    error = await fails("excel.write", base, [[1]], path="bomb.xlsx", max_bytes=100_000)
    assert error.startswith("max_bytes: the part xl/sharedStrings.xml")


# -- specs ---------------------------------------------------------------------

NEVER_AI = {"base_folder", "allow_absolute", "max_bytes", "max_rows", "max_entries", "encoding",
            "mode", "overwrite", "create_folders", "formulas"}


def test_every_node_has_a_full_spec_and_a_tool():
    icons = ROOT / "resources" / "icons"
    tools = set()
    for cls in FILE_NODES:
        spec = cls.spec
        assert spec.category in ("Files", "Tables") and spec.color.startswith("#")
        assert (icons / f"{spec.icon}.svg").is_file(), spec.icon
        assert spec.description and spec.tool and spec.tool.description
        tools.add(spec.tool.name)
        for p in spec.params:
            assert p.description, (spec.type, p.name)
            if p.name in NEVER_AI or (spec.type == "files.delete" and p.name == "recursive"):
                assert Scope.AI not in p.allowed_scopes, (spec.type, p.name)
        schema = tool_schema(spec, FlowNode(id="n", type=spec.type))
        # A new node offers the LLM its path; safety settings never.
        assert "path" in schema["properties"] or "source" in schema["properties"] \
            or spec.type == "files.list"
        assert not NEVER_AI & set(schema["properties"])
    assert tools == {"read_file", "write_file", "list_files", "move_file", "delete_file",
                     "read_csv", "write_csv", "read_excel", "write_excel"}


def test_flow_checks_name_bad_bounds_and_encodings():
    flow = make_flow([N("src", "core.inject"),
                      N("r", "csv.read", path="x.csv", max_rows=0, encoding="klingon",
                        delimiter="ab")], ["src->r"])
    problems = {(p.field, p.message) for p in validate_flow(flow, Registry(FILE_NODES + [Inject]))}
    fields = {f for f, _ in problems}
    assert {"params.max_rows", "params.encoding", "params.delimiter"} <= fields, problems


def test_importing_the_package_does_not_import_openpyxl():
    code = "import sys, nodes.files; assert 'openpyxl' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_the_docs_examples_run(tmp_path: Path):
    """docs/nodes-files.md's Python examples run as they are and print what
    the page says they print."""
    import re

    text = (ROOT / "docs" / "nodes-files.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(ROOT)}
    outputs = []
    for i, code in enumerate(blocks):
        script = tmp_path / f"example{i}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, timeout=60,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    files_out, tables_out = outputs
    assert "problem path: '../escape.txt' leads outside the base folder" in files_out
    assert "'path': 'notes/today.txt', 'size': 9" in files_out and "show Buy milk" in files_out
    assert not (tmp_path / "data" / "escape.txt").exists()
    assert "show [{'id': '1', 'customer': 'Ann'}, {'id': '2', 'customer': 'Bob'}]" in tables_out
    assert "'error': \"path: '../secrets.csv' leads outside the base folder\"" in tables_out
    wb = openpyxl.load_workbook(tmp_path / "data" / "files" / "report.xlsx")
    assert wb.sheetnames == ["Orders", "Summary"]
    assert [[c.value for c in r] for r in wb["Summary"].iter_rows()] == [
        ["orders", "revenue"], [2, 17.5]]

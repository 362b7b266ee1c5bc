"""The docs' commands, run as a reader runs them: every fenced block that a
page marks runnable, with its documented output checked.

How a page marks a block (the comment is invisible on the rendered page):

- ``<!-- runnable: save NAME -->`` on the line before a fenced block: its
  text is saved as NAME in the page's working folder (a flow the page then
  runs, a policy file, ...).
- ``<!-- runnable -->`` before a ```` ```console ```` block: each ``$ ``
  line is a command (a line ending in ``\\`` goes on on the next), and the
  lines up to the next ``$ `` are what it prints (stdout and stderr, as a
  terminal shows them). The documented lines must appear in that order; a
  ``…`` in one stands for any text, and other lines may come between them.
  Documented output that is JSON as a whole is compared as JSON (a page may
  write it more compactly than the command does).
- ``<!-- runnable -->`` before a ```` ```bash ```` (or plain) block: each
  command must succeed; nothing it prints is checked.

A command must exit 0, unless its comment says otherwise (``# exits 2``).
Each page runs in a fresh folder holding links to the project's
``resources`` and ``.venv``, with ``SWITCHBOARD_DATA_DIR`` inside it, no
terminal (as in CI) and the test's ``switchboard`` first on PATH; blocks run
in page order, so a later block sees what an earlier one saved or wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages that must keep runnable blocks (a lost marker would silently test nothing).
MARKED = ["README.md", "docs/tools.md", "docs/scopes.md", "docs/agents.md"]
#: Bound on one command: the docs' commands run offline in a second or two.
COMMAND_TIMEOUT = 60

_BLOCK = re.compile(r"^[ \t]*<!--\s*runnable(?::\s*(?P<opts>[^>]*?))?\s*-->[ \t]*\n"
                    r"[ \t]*```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
                    re.S | re.M)
_EXIT = re.compile(r"#.*\bexits? (\d+)\s*$")


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)
    checked: bool = False  # a console block's: its output is documented (maybe as nothing)

    @property
    def exit_code(self) -> int:
        m = _EXIT.search(self.text.splitlines()[-1])
        return int(m.group(1)) if m else 0


@dataclass
class Block:
    page: str
    line: int
    save: str | None
    commands: list[Command]


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        opts, lang = (m.group("opts") or "").strip(), m.group("lang")
        body = textwrap.dedent(m.group("body"))  # a block in a list item is indented
        if opts.startswith("save "):
            out.append(Block(page, line, opts[5:].strip(), [Command(body)]))
        elif opts:
            raise AssertionError(f"{page}:{line}: unknown runnable option {opts!r}")
        elif lang == "console":
            out.append(Block(page, line, None, _console(body)))
        else:
            out.append(Block(page, line, None, [Command(c) for c in _joined(body.splitlines())]))
    return out


def _joined(lines: list[str]) -> list[str]:
    """Shell lines with ``\\`` continuations joined; blank and comment lines dropped."""
    out: list[str] = []
    going = False
    for raw in lines:
        if going:
            out[-1] += "\n" + raw
        elif raw.strip() and not raw.lstrip().startswith("#"):
            out.append(raw)
        going = bool(out) and raw.endswith("\\")
    return out


def _console(body: str) -> list[Command]:
    commands: list[Command] = []
    going = False
    for raw in body.splitlines():
        if going:
            commands[-1].text += "\n" + raw
        elif raw.startswith("$ "):
            commands.append(Command(raw[2:], checked=True))
        elif commands:
            commands[-1].expected.append(raw.rstrip())
        else:
            raise AssertionError(f"console block starts with output, not a command: {raw!r}")
        going = bool(commands) and raw.endswith("\\")
    return commands


def _line_matches(want: str, got: str) -> bool:
    if "…" not in want:
        return want == got
    pattern = ".*".join(re.escape(part) for part in want.split("…"))
    return re.fullmatch(pattern, got) is not None


def check_output(command: Command, output: str) -> str | None:
    """Why ``output`` is not what the page documents, or None."""
    expected = [line for line in command.expected if line.strip()]
    if not expected:
        return None
    want_text = "\n".join(expected)
    try:
        want_json = json.loads(want_text)
    except ValueError:
        pass
    else:
        try:
            got_json = json.loads(output)
        except ValueError:
            return f"documented JSON, but it printed no JSON:\n{output}"
        return None if got_json == want_json else f"printed other JSON:\n{output}"
    got = [line.rstrip() for line in output.splitlines()]
    at = 0
    for want in expected:
        while at < len(got) and not _line_matches(want, got[at]):
            at += 1
        if at == len(got):
            return f"no line {want!r} (in order) in what it printed:\n{output}"
        at += 1
    return None


def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "resources").symlink_to(ROOT / "resources")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = dict(os.environ)
    env.update(SWITCHBOARD_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=str(ROOT))
    return tmp_path, env


def run_page(page: str, tmp_path: Path) -> None:
    work, env = workdir(tmp_path)
    for block in blocks_of(ROOT / page):
        where = f"{block.page}:{block.line}"
        if block.save:
            (work / block.save).write_text(block.commands[0].text, encoding="utf-8")
            continue
        for command in block.commands:
            done = subprocess.run(["bash", "-c", command.text], cwd=work, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)  # no terminal, as in CI
            assert done.returncode == command.exit_code, (
                f"{where}: `{command.text}` exited {done.returncode}, not "
                f"{command.exit_code}:\n{done.stdout}")
            why = check_output(command, done.stdout) if command.checked else None
            assert why is None, f"{where}: `{command.text}` {why}"


def _pages_with_blocks() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in PAGES if blocks_of(p)]


@pytest.mark.parametrize("page", _pages_with_blocks())
def test_the_runnable_commands_of_a_page_print_what_it_says(page, tmp_path):
    run_page(page, tmp_path)


def test_the_pages_that_show_commands_mark_them_runnable():
    pages = _pages_with_blocks()
    for page in MARKED:
        assert page in pages, f"{page} has no runnable block"


# -- the checker itself ------------------------------------------------------------------


def test_a_console_block_is_commands_and_their_documented_output(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n<!-- runnable -->\n```console\n$ echo one \\\n    two   # exits 0\n"
                    "one two\n$ false   # exits 1\n```\n\n```console\n$ not marked\n```\n")
    [block] = blocks_of(page)
    assert [c.text for c in block.commands] == ["echo one \\\n    two   # exits 0",
                                                "false   # exits 1"]
    assert block.commands[0].expected == ["one two"]
    assert [c.exit_code for c in block.commands] == [0, 1]


@pytest.mark.parametrize("expected, output, ok", [
    (["a", "c"], "a\nb\nc\n", True),  # in order, other lines between
    (["c", "a"], "a\nb\nc\n", False),  # out of order
    (["run 3f… ok"], "run 3f9c0a ok\n", True),  # … is any text
    (["run 3f… ok"], "run 3f9c0a failed\n", False),
    (['{"a": [1, 2]}'], '{\n  "a": [\n    1,\n    2\n  ]\n}\n', True),  # JSON as JSON
    (['{"a": [1, 2]}'], '{"a": [1]}\n', False),
    (['{"a": 1}'], 'warning: noise\n{"a": 1}\n', False),  # noise around JSON is not JSON
])
def test_documented_output_is_matched_line_by_line_or_as_json(expected, output, ok):
    assert (check_output(Command("x", expected, True), output) is None) is ok


async def test_a_think_call_does_what_docs_agents_md_says():
    """docs/agents.md: a think call runs the Think node's one step (the note
    as a log line, the answer {"noted": "noted"}, counted in 1 / out 1) and
    nothing flows on from it; the page says so, not that no node runs."""
    from runtime.engine import Engine
    from runtime.events import EventBus
    from runtime.flow import parse_flow

    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    bullet = " ".join(text[text.index("- **Think**"):text.index("- **Ask Human**")].split())
    assert "no node runs" not in bullet
    assert "runs the Think node's one step" in bullet
    assert "stats count each call as a message in and its answer as one out" in bullet
    [block] = [b for b in blocks_of(ROOT / "docs" / "agents.md") if b.save == "think-demo.flow.json"]
    events: list = []
    bus = EventBus()
    bus.subscribe(events.append)
    engine = Engine(parse_flow(json.loads(block.commands[0].text)), bus=bus, trace=True)
    result = await engine.run(30)
    assert result.status == "ok"
    [note] = [e for e in events if e.type == "log" and e.node == "think"]
    assert (note.level, note.text) == ("info", "note: Invoices first, the report last")
    [result_event] = [e for e in events if e.type == "tool.result"]
    assert (result_event.status, result_event.data) == ("success", {"noted": "noted"})
    stats = [e for e in events if e.type == "stats"][-1].nodes["think"]
    assert (stats["in"], stats["out"]) == (1, 1)
    hops = [(e.source, e.target) for e in events if e.type == "message.sent"]
    assert ("ask", "agent") in hops and not [h for h in hops if h[0] == "think"]

"""``switchboard run --break``: the real CLI in a child process whose
controlling terminal is a pseudo-terminal (pty.fork), driven as a person
would: read the prompt, type a command. Every wait is for text to appear,
bounded by a generous timeout."""

from __future__ import annotations

import email
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWITCHBOARD = Path(sys.executable).parent / "switchboard"
EXAMPLES = ROOT / "resources" / "examples"
BOUND = 60.0  # seconds: only a bound, never what a test waits for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


class Terminal:
    """``switchboard ARGS`` on a pseudo-terminal of its own."""

    def __init__(self, *args: str, cwd: Path, data: Path) -> None:
        env = dict(os.environ, SWITCHBOARD_DATA_DIR=str(data), COLUMNS="200", TERM="dumb")
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            try:
                os.chdir(cwd)
                os.execve(str(SWITCHBOARD), [str(SWITCHBOARD), *args], env)
            finally:
                os._exit(127)
        self.seen = ""
        self._consumed = 0
        self.code: int | None = None

    def expect(self, pattern: str) -> re.Match:
        """Read until ``pattern`` (a regex) appears after what was matched
        before; fail, with everything seen, if the process ends first."""
        start = self._consumed
        deadline = time.monotonic() + BOUND
        while True:
            found = re.compile(pattern).search(self.seen, start)
            if found:
                self._consumed = found.end()
                return found
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} in:\n{self.seen}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready and not self._read():
                raise AssertionError(f"the run ended before {pattern!r}:\n{self.seen}")

    def _read(self) -> bool:
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def wait(self) -> int:
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                self._read()
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read():
                    pass
                self.code = os.waitstatus_to_exitcode(status)
                os.close(self.fd)
                return self.code
        os.kill(self.pid, 9)
        raise AssertionError(f"the run did not end:\n{self.seen}")


@pytest.fixture
def run_in_pty(tmp_path):
    made: list[Terminal] = []

    def start(*args: str) -> Terminal:
        t = Terminal("run", *args, "--no-history", cwd=tmp_path, data=tmp_path / "data")
        made.append(t)
        return t

    yield start
    for t in made:
        if t.code is None:
            try:
                os.kill(t.pid, 9)
                os.waitpid(t.pid, 0)
            except OSError:
                pass


def test_show_set_and_continue(run_in_pty):
    t = run_in_pty(str(EXAMPLES / "hello.flow.json"), "--break", "greet")
    t.expect(r"--- stopped at 'Greeting' \(greet\) input in")
    t.expect(r'"name": "World"')
    t.expect(r"break> ")
    t.type("show")
    t.expect(r'"_msgid": ')
    t.expect(r"break> ")
    t.type('set payload.name "Ann"')
    t.expect(r'payload.name = "Ann"')
    t.expect(r"break> ")
    t.type("c")
    t.expect(r'"value": "Hello, Ann!"')
    assert t.wait() == 0


def test_step_stops_at_the_next_node_and_quit_stops_the_run(run_in_pty):
    t = run_in_pty(str(EXAMPLES / "hello.flow.json"), "--break", "greet")
    t.expect(r"break> ")
    t.type("step")
    t.expect(r"--- stopped at 'Show' \(show\) input in \(step\)")
    t.expect(r'"payload": "Hello, World!"')  # the template ran on it
    t.expect(r"break> ")
    t.type("bogus")
    t.expect(r"unknown command 'bogus'")
    t.type("q")
    t.expect(r"stopping the run")
    assert t.wait() == 130  # as an interrupted run (DESIGN.md's exit codes)
    assert "switchboard: stopped at a breakpoint (quit)" in t.seen
    assert '{"node": "show"' not in t.seen  # the message never reached the debug node


def test_skip_and_a_condition(run_in_pty, tmp_path):
    flow = json.loads((EXAMPLES / "hello.flow.json").read_text())
    flow["nodes"][0]["params"]["payload"]["value"] = [{"name": "Ann"}, {"name": "Bob"},
                                                      {"name": "Cy"}]
    flow["nodes"].insert(1, {"id": "split", "type": "core.split"})
    flow["wires"][0]["to"] = ["split", "in"]
    flow["wires"].append({"from": ["split", "out"], "to": ["greet", "in"]})
    path = tmp_path / "names.flow.json"
    path.write_text(json.dumps(flow))
    t = run_in_pty(str(path), "--break", "greet", "--break-if", "msg.payload.name != 'Ann'")
    t.expect(r"--- stopped at 'Greeting' \(greet\) input in \(if msg.payload.name != 'Ann'\)")
    t.expect(r'"name": "Bob"')
    t.expect(r"break> ")
    t.type("skip")
    t.expect(r'"name": "Cy"')
    t.expect(r"break> ")
    t.type("c")
    assert t.wait() == 0
    shown = [json.loads(line)["value"] for line in t.seen.splitlines()
             if line.startswith('{"node": "show"')]
    assert shown == ["Hello, Ann!", "Hello, Cy!"]


def test_a_tool_call_stops_before_the_node_with_its_arguments_editable(run_in_pty, tmp_path):
    flow = tmp_path / "email-assistant.flow.json"
    shutil.copy(EXAMPLES / "email-assistant.flow.json", flow)
    outbox = tmp_path / "outbox"
    t = run_in_pty(str(flow), "--break", "mail", "--set", f"mail.outbox_dir={outbox}")
    t.expect(r"--- stopped before tool call 'send_email' of agent '.*' \(agent\) to node "
             r"'Send Mail' \(mail\); its arguments")
    t.expect(r'"subject": "Your order A-1001 has shipped"')
    t.expect(r"break> ")
    t.type("set to 42")  # the schema wants text: refused at continue, the call still waits
    t.expect(r"break> ")
    t.type("c")
    t.expect(r"cannot continue: the edited arguments do not fit the tool: .*to")
    t.type('set to "john@example.com"')
    t.expect(r"break> ")
    t.type('set subject "Shipped: A-1001 (edited at a breakpoint)"')
    t.expect(r"break> ")
    t.type("continue")
    assert t.wait() == 0
    [eml] = outbox.glob("*.eml")
    mail = email.message_from_bytes(eml.read_bytes())
    assert mail["Subject"] == "Shipped: A-1001 (edited at a breakpoint)"
    assert mail["To"] == "john@example.com"


def test_without_a_terminal_break_is_refused(tmp_path):
    done = subprocess.run([str(SWITCHBOARD), "run", str(EXAMPLES / "hello.flow.json"),
                           "--break", "greet", "--no-history"],
                          capture_output=True, text=True, timeout=BOUND, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, start_new_session=True,
                          env=dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path)))
    assert done.returncode == 2
    assert "--break needs a terminal to ask on" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("args, says", [
    (["--break", "nope"], "--break nope: no node 'nope' in the flow"),
    (["--break", "start"], "--break start: node 'start' (core.inject) has no input"),
    (["--break-if", "msg.x"], "--break-if: give it after the --break"),
    (["--break", "greet", "--break-if", "msg.payload >"], "the condition 'msg.payload >'"),
])
def test_bad_breakpoints_are_named(tmp_path, args, says):
    done = subprocess.run([str(SWITCHBOARD), "run", str(EXAMPLES / "hello.flow.json"), *args,
                           "--no-history"], capture_output=True, text=True, timeout=BOUND,
                          cwd=tmp_path, env=dict(os.environ, SWITCHBOARD_DATA_DIR=str(tmp_path)))
    assert done.returncode == 2 and says in done.stderr, done.stderr

"""Secrets in history and at rest (issue T3 1/10, item 7), with real parts:
a loopback HTTP server, the engine, the SQLite run history, the mail node's
outbox, the encrypted credentials file and the designer's autosave.

- A secret the flow names is masked from the run's first event, not only
  once the node that uses it has run.
- A secret echoed back in pieces leaks no run of SECRET_RUN characters.
- The data folder is 0700 and what Switchboard writes into it 0600, even
  under a umask of 022.

Registration is process-wide and for good, so each test makes its own
secrets (random: no other test can have registered them before)."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat
import string
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime import credentials
from runtime.history import History
from runtime.node import SECRET_RUN, redact
from runtime.registry import Registry
from tests.servers.flows import fixed, run

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")


def new_secret(n: int = 26) -> str:
    """Letters and digits only: the same in every text form, so a run of the
    secret found in a JSON dump is a run of the secret itself."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


def runs_in(secret: str, text: str) -> list[str]:
    """Every piece of SECRET_RUN characters of ``secret`` found in ``text``."""
    return [secret[i:i + SECRET_RUN] for i in range(len(secret) - SECRET_RUN + 1)
            if secret[i:i + SECRET_RUN] in text]


# -- a real HTTP server on loopback -------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None,
              reason: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status, reason)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's hook
        server: Server = self.server.owner  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        head, tail = token[:13], token[13:]
        if self.path == "/config":
            # An unauthenticated endpoint that gives the token out (a
            # setup page, a misconfigured debug route): the flow reads it
            # before the node that names the token has run.
            self._send(200, {"service": "demo", "api_token": server.token})
        elif self.path == "/split":
            # The token echoed back in two pieces: the first 13 characters
            # in a header, the rest in the body.
            self._send(200, {"you_sent_tail": tail, "note": f"tail={tail};"},
                       headers={"X-Token-Head": head})
        elif self.path == "/split-error":
            # Both pieces in the status line, which the node's error quotes.
            self._send(401, {"error": "rejected"}, reason=f"Token {head} rejected ({tail})")
        else:
            self._send(404, {"error": "not found"})


class Server:
    def __init__(self, token: str = "") -> None:
        self.token = token
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def flow_of(nodes: list[dict], wires: list[str]) -> Any:
    """``wires``: "a->b" from a's out to b's in."""
    from runtime.flow import parse_flow

    wires = [{"from": [w.split("->")[0], "out"], "to": [w.split("->")[1], "in"]}
             for w in wires]
    return parse_flow({"format": "switchboard.flow/1", "name": "secrets", "nodes": nodes,
                       "wires": wires})


async def run_recorded(flow: Any, tmp_path: Path) -> tuple[Any, Any, str]:
    """Run ``flow`` with a real history; (result, recorder, every stored
    event's JSON as one text)."""
    history = History(tmp_path / "history.sqlite3")
    recorder = history.recorder()
    try:
        result, rec, _ = await run(flow, reg=Registry.default(),
                                   engine_hook=lambda e: e.bus.subscribe(recorder))
        recorder.close()
    finally:
        history.close()
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        stored = "\n".join(row[0] for row in db.execute("SELECT data FROM events"))
    return result, rec, stored


# -- every secret the flow names is registered before the first node runs -------

async def test_a_secret_printed_before_its_node_runs_is_masked(monkeypatch, tmp_path):
    """inject -> GET /config, which gives the token out -> a debug node, and
    (after it) -> GET /other with the token from {"env": ...}: the debug node
    printed it before the node that resolves the token had run; before the
    fix it went into the debug event and the history in plain text."""
    token = new_secret()
    monkeypatch.setenv("T3_PRE_TOKEN", token)
    server = Server(token)
    try:
        flow = flow_of([
            {"id": "src", "type": "core.inject", "params": {"payload": fixed("go")}},
            {"id": "config", "type": "http.request", "params": {
                "url": fixed(server.url + "/config")}},
            {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
            {"id": "api", "type": "http.request", "params": {
                "url": fixed(server.url + "/other"), "auth": fixed("bearer"),
                "token": fixed({"env": "T3_PRE_TOKEN"}),
                "fail_on_error_status": fixed(False)}},
        ], ["src->config", "config->show", "config->api"])
        result, rec, stored = await run_recorded(flow, tmp_path)
    finally:
        server.close()
    assert result.status == "ok", rec.of("node.error")
    [shown] = rec.debug_values("show")
    assert shown == {"service": "demo", "api_token": "***"}
    for text in (rec.dump(), stored):
        assert token not in text and not runs_in(token, text)
    assert '"api_token": "***"' in stored or '"api_token":"***"' in stored


async def test_every_kind_of_secret_reference_is_registered_at_run_start(
        monkeypatch, tmp_path, data_dir):
    """The forms a flow names a secret in, none of them used by a node that
    runs: a secret param's {"env": ...}, a credential of the store
    ({"keyring": "switchboard", ...}), the variable a ``*_env`` param names
    (the agent's api_key_env) and a secret reference in an MCP server's
    ``env``. A message holding all four is printed masked."""
    import keyring
    from keyring.backends import fail

    monkeypatch.setenv(credentials.BACKEND_ENV, "file")
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    env_token, stored_token, agent_key, mcp_key = (new_secret() for _ in range(4))
    monkeypatch.setenv("T3_ENV_TOKEN", env_token)
    monkeypatch.setenv("T3_AGENT_KEY", agent_key)
    monkeypatch.setenv("T3_MCP_KEY", mcp_key)
    try:
        credentials.set("t3-stored", stored_token)
        text = f"a={env_token} b={stored_token} c={agent_key} d={mcp_key}"
        flow = flow_of([
            {"id": "src", "type": "core.inject", "params": {"payload": fixed(text)}},
            {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
            # Named, never run (nothing is wired into them).
            {"id": "http", "type": "http.request", "params": {
                "url": fixed("http://127.0.0.1:9/"), "auth": fixed("bearer"),
                "token": fixed({"env": "T3_ENV_TOKEN"})}},
            {"id": "http2", "type": "http.request", "params": {
                "url": fixed("http://127.0.0.1:9/"), "auth": fixed("bearer"),
                "token": fixed(credentials.reference("t3-stored"))}},
            {"id": "agent", "type": "ai.agent", "params": {
                "provider": fixed("openai"), "base_url": fixed("http://127.0.0.1:9/v1"),
                "api_key_env": fixed("T3_AGENT_KEY")}},
            {"id": "mcp", "type": "mcp.server", "params": {
                "command": fixed("python"), "env": fixed({"KEY": {"env": "T3_MCP_KEY"},
                                                          "PLAIN": "not a secret"})}},
        ], ["src->show"])
        result, rec, stored = await run_recorded(flow, tmp_path)
    finally:
        keyring.set_keyring(previous)
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values("show") == ["a=*** b=*** c=*** d=***"]
    for secret in (env_token, stored_token, agent_key, mcp_key):
        for text in (rec.dump(), stored):
            assert secret not in text and not runs_in(secret, text)
    # The plain value of the MCP server's env is no secret.
    assert redact("not a secret") == "not a secret"


async def test_a_secret_that_cannot_be_resolved_at_start_is_reported_by_its_node(tmp_path):
    """A missing variable is not an error at run start: the node that needs
    it says so when it runs, as before."""
    flow = flow_of([
        {"id": "src", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "api", "type": "http.request", "params": {
            "url": fixed("http://127.0.0.1:9/"), "auth": fixed("bearer"),
            "token": fixed({"env": "T3_NOT_SET_ANYWHERE"})}},
    ], ["src->api"])
    result, rec, _ = await run_recorded(flow, tmp_path)
    [error] = rec.of("node.error")
    assert error.node == "api" and "T3_NOT_SET_ANYWHERE is not set" in error.message


# -- a secret echoed back in pieces -----------------------------------------------

async def test_a_bearer_token_echoed_in_two_pieces_leaks_no_run_of_8(monkeypatch, tmp_path):
    """The server sends the first 13 characters of the 26-character token
    in a header and the other 13 in the body (and, on an error, both in the
    status line, which the node's error quotes). Before the fix only the whole token was masked, and 26 of
    its characters came through in two pieces."""
    token = new_secret(26)
    monkeypatch.setenv("T3_SPLIT_TOKEN", token)
    server = Server()
    try:
        def request(node_id: str, path: str) -> dict:
            return {"id": node_id, "type": "http.request", "params": {
                "url": fixed(server.url + path), "auth": fixed("bearer"),
                "token": fixed({"env": "T3_SPLIT_TOKEN"}), "fail_on_error_status": fixed(True)}}

        flow = flow_of([
            {"id": "src", "type": "core.inject", "params": {"payload": fixed("go")}},
            request("split", "/split"),
            {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
            request("fail", "/split-error"),
        ], ["src->split", "split->show", "src->fail"])
        result, rec, stored = await run_recorded(flow, tmp_path)
    finally:
        server.close()
    [shown] = rec.debug_values("show")
    # The pieces did come back (the test sees the echo) ...
    assert shown["response_headers"]["x-token-head"] == "***"
    assert shown["payload"] == {"you_sent_tail": "***", "note": "tail=***;"}
    [error] = rec.of("node.error")
    assert error.node == "fail" and "401" in error.message and "***" in error.message
    # ... and no run of 8 characters of the token is in any event or the
    # history (log lines: test_verbose_logs_of_an_echoed_token_leak_no_run).
    events = "\n".join(e.model_dump_json() for e in rec.events)
    for text in (json.dumps(shown), error.message, events, stored):
        assert not runs_in(token, text), runs_in(token, text)


# -- the data folder and its files are the user's alone --------------------------

def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


async def test_history_files_are_private_under_umask_022(data_dir, umask_022):
    assert not data_dir.exists()
    flow = flow_of([
        {"id": "src", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
    ], ["src->show"])
    history = History()  # the default one, in the data folder
    try:
        recorder = history.recorder()
        await run(flow, reg=Registry.default(), engine_hook=lambda e: e.bus.subscribe(recorder))
        recorder.flush()
        db = data_dir / "history.sqlite3"
        wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
        assert wal.exists() and shm.exists()  # WAL mode, the connection still open
        assert mode(data_dir) == 0o700
        assert {p.name: mode(p) for p in (db, wal, shm)} == {
            db.name: 0o600, wal.name: 0o600, shm.name: 0o600}
        recorder.close()
    finally:
        history.close()


def test_an_open_data_folder_and_history_left_by_an_older_version_are_tightened(
        data_dir, umask_022):
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    db = data_dir / "history.sqlite3"
    sqlite3.connect(db).close()
    os.chmod(db, 0o644)
    with History():
        assert mode(data_dir) == 0o700
        assert mode(db) == 0o600


def test_a_history_named_by_path_is_made_private_but_an_existing_one_keeps_its_mode(
        tmp_path, umask_022):
    new = tmp_path / "new.sqlite3"
    with History(new):
        pass
    assert mode(new) == 0o600
    shared = tmp_path / "shared.sqlite3"  # a queue's shared history (docs/queue.md)
    sqlite3.connect(shared).close()
    os.chmod(shared, 0o640)
    with History(shared):
        pass
    assert mode(shared) == 0o640


async def test_an_outbox_mail_is_private_under_umask_022(data_dir, umask_022):
    flow = flow_of([
        {"id": "src", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "mail", "type": "mail.send", "params": {
            "to": fixed("ann@example.com"), "subject": fixed("Hi"), "body": fixed("private"),
            "delivery": fixed("outbox")}},
    ], ["src->mail"])
    result, rec, _ = await run(flow, reg=Registry.default())
    assert result.status == "ok", rec.of("node.error")
    [eml] = (data_dir / "outbox").glob("*.eml")
    assert mode(data_dir) == 0o700
    assert mode(data_dir / "outbox") == 0o700
    assert mode(eml) == 0o600


def test_credentials_files_are_private_under_umask_022(data_dir, umask_022, monkeypatch):
    import keyring
    from keyring.backends import fail

    monkeypatch.setenv(credentials.BACKEND_ENV, "file")
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        credentials.set("t3-modes", new_secret())
    finally:
        keyring.set_keyring(previous)
    files = sorted(p.name for p in data_dir.iterdir())
    assert credentials.FILE_NAME in files and credentials.KEY_NAME in files
    assert mode(data_dir) == 0o700
    assert {name: mode(data_dir / name) for name in files} == {name: 0o600 for name in files}


def test_an_autosave_recovery_file_is_private_under_umask_022(qapp, data_dir, umask_022):
    from designer.model.autosave import Autosave
    from designer.model.document import FlowDocument

    doc = FlowDocument()
    auto = Autosave(doc, interval_ms=3_600_000)
    try:
        auto.save_now()
        assert auto.path.parent == data_dir / "recovery"
        assert mode(data_dir) == 0o700
        assert mode(auto.path) == 0o600
    finally:
        auto.stop()
        doc.deleteLater()


def test_verbose_logs_of_an_echoed_token_leak_no_run(tmp_path):
    """``switchboard -v run``: libraries log at DEBUG what the server sent
    (httpcore the response headers, with the token's first piece in one);
    the CLI's log handler masks them like events."""
    import subprocess
    import sys

    token = new_secret(26)
    server = Server()
    flow = {"format": "switchboard.flow/1", "name": "echo", "nodes": [
        {"id": "src", "type": "core.inject", "params": {"payload": fixed("go")}},
        {"id": "split", "type": "http.request", "params": {
            "url": fixed(server.url + "/split"), "auth": fixed("bearer"),
            "token": fixed({"env": "T3_CLI_TOKEN"})}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["src", "out"], "to": ["split", "in"]},
                 {"from": ["split", "out"], "to": ["show", "in"]}]}
    path = tmp_path / "echo.flow.json"
    path.write_text(json.dumps(flow))
    env = {**os.environ, "T3_CLI_TOKEN": token, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data")}
    try:
        r = subprocess.run([sys.executable, "-m", "runtime.cli", "-v", "run", str(path)],
                           capture_output=True, text=True, env=env, timeout=60,
                           cwd=Path(__file__).resolve().parents[1])
    finally:
        server.close()
    assert r.returncode == 0, r.stderr[-2000:]
    assert "x-token-head" in r.stderr.lower()  # the header was logged ...
    assert not runs_in(token, r.stderr + r.stdout), runs_in(token, r.stderr)  # ... masked

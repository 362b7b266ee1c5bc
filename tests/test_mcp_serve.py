"""``switchboard mcp serve``: the email-assistant example's tools served over
MCP to the official SDK's own client, over stdio and streamable HTTP.

Real parts only: the server is the CLI in a subprocess, the mail goes to a
real SMTP server (aiosmtpd) on loopback, the client is ``mcp``'s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from runtime.history import DB_NAME, History
from tests.servers.smtp import SmtpServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "resources" / "examples" / "email-assistant.flow.json"
TOKEN = "test-token-for-the-mcp-server-0123"


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "runtime.cli", *args]


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"), **extra}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SWITCHBOARD_MCP_TOKEN"):
        if key not in extra:
            env.pop(key, None)
    return env


def via_smtp(port: int) -> list[str]:
    """The example mails to its outbox folder; these send it to our server."""
    return ["--set", "mail.delivery=smtp", "--set", f"mail.smtp_port={port}"]


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def the_llms_tools() -> list[dict]:
    """What `switchboard tools` says the example's agent gives its LLM."""
    out = subprocess.run(cli("tools", str(EXAMPLE)), cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    return [t["function"] for t in json.loads(out.stdout)["agent"]]


async def test_stdio_serves_the_agents_tools_and_refuses_what_the_agent_would(tmp_path):
    events = tmp_path / "events.jsonl"
    with SmtpServer() as smtp:
        params = StdioServerParameters(
            command=sys.executable, cwd=str(ROOT), env=env_for(tmp_path),
            args=cli("mcp", "serve", str(EXAMPLE), "--approve", "deny", "--events", str(events),
                     *via_smtp(smtp.port))[1:])
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                listed = (await session.list_tools()).tools

                # The schemas the LLM sees, exactly: only the AI's params.
                expected = the_llms_tools()
                assert [t.name for t in listed] == [f["name"] for f in expected] == ["send_email"]
                assert listed[0].input_schema == expected[0]["parameters"]
                assert listed[0].description == expected[0]["description"]

                sent = await session.call_tool("send_email", {
                    "to": "john@example.com", "subject": "Your order A-1001 has shipped",
                    "body": "It left today."})
                assert not sent.is_error, sent.content
                data = json.loads(sent.content[0].text)
                assert data["accepted"] == ["john@example.com"]
                assert sent.structured_content == data

                hostile = {
                    "extra key": {"to": "john@example.com", "subject": "s", "body": "b",
                                  "smtp_host": "evil.example"},
                    "wrong type": {"to": "john@example.com", "subject": "s", "body": 5},
                    "the designer's param": {"to": "john@example.com", "subject": "s",
                                             "body": "b", "sender": "ceo@example.com"},
                    "missing": {"to": "john@example.com"},
                }
                answers = {k: await session.call_tool("send_email", v)
                           for k, v in hostile.items()}
                unknown = await session.call_tool("format_disk", {})
                # An outside recipient needs approval (the example's rule);
                # --approve deny says no.
                outside = await session.call_tool("send_email", {
                    "to": "mallory@elsewhere.org", "subject": "s", "body": "b"})
        stderr = (tmp_path / "stderr.txt").read_text()
        received = list(smtp.received)

    texts = {k: a.content[0].text for k, a in answers.items()}
    assert all(a.is_error for a in answers.values()), texts
    assert texts["extra key"] == ("refused: unknown argument 'smtp_host' "
                                  "(send_email accepts: to, subject, body)")
    assert texts["wrong type"] == "refused: argument 'body': 5 is not of type 'string'"
    assert texts["the designer's param"].startswith("refused: unknown argument 'sender'")
    assert "missing required argument 'subject'" in texts["missing"]
    assert unknown.is_error
    assert unknown.content[0].text == ("refused: unknown tool 'format_disk' "
                                       "(available tools: send_email)")
    assert outside.is_error
    assert outside.content[0].text == ("rejected: rejected by deny: approval was denied "
                                       "(--approve deny)")

    # One mail, the valid call's, with the designer's sender and server.
    [mail] = received
    assert mail["rcpt_tos"] == ["john@example.com"]
    assert mail["message"]["From"] == "assistant@example.com"
    assert mail["message"]["Subject"] == "Your order A-1001 has shipped"

    # The run: the agent's events, no LLM (the inject stayed quiet), and it
    # completed when the client closed stdio; stdout carried only MCP.
    got = events_of(events)
    kinds = [e["type"] for e in got]
    assert "llm.request" not in kinds
    results = [e for e in got if e["type"] == "tool.result"]
    assert [r["status"] for r in results] == ["success"] + ["refused"] * 5 + ["rejected"]
    assert all(r["agent"] == "agent" for r in results)
    assert "tool.approval" in kinds
    assert got[-1]["type"] == "run.finished"
    assert got[-1]["reason"] == "completed", got[-1]
    assert "call send_email: success" in stderr

    with History(tmp_path / "data" / DB_NAME) as history:
        [run] = history.runs()
        assert run.id == got[0]["run_id"]
        assert run.status == "ok"
        assert "tool.result" in {e.type for e in history.events(run.id)}


def start_http(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.Popen, str, str]:
    """The server, its URL and the token line it printed (stderr)."""
    proc = subprocess.Popen(
        cli("mcp", "serve", str(EXAMPLE), "--http", "127.0.0.1:0", *args), cwd=ROOT,
        env=env_for(tmp_path, **env), stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    first = proc.stderr.readline()
    if " at http://" not in first:
        proc.kill()
        raise AssertionError(f"no URL: {first}{proc.stderr.read()}")
    token_line = proc.stderr.readline().strip()
    return proc, first.split(" at ", 1)[1].strip(), token_line


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


async def test_http_wants_the_bearer_token(tmp_path):
    proc, url, token_line = start_http(tmp_path, SWITCHBOARD_MCP_TOKEN=TOKEN)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert token_line == "token: as given"  # a token we gave is never printed
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx2.AsyncClient() as raw:
            missing = await raw.post(url, json=ping)
            wrong = await raw.post(url, json=ping, headers={"Authorization": "Bearer " + "x" * 34})
            other = await raw.post(url, json=ping, headers={"Authorization": f"Basic {TOKEN}"})
        assert (missing.status_code, wrong.status_code, other.status_code) == (401, 401, 401)
        assert missing.headers["www-authenticate"].startswith("Bearer")

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as client, \
                streamable_http_client(url, http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == ["send_email"]
            sent = await session.call_tool("send_email", {
                "to": "john@example.com", "subject": "Shipped", "body": "Today."})
            refused = await session.call_tool("send_email", {
                "to": "john@example.com", "subject": "Shipped", "body": "Today.",
                "smtp_host": "evil.example"})
    finally:
        code, err = stop(proc)
    assert not sent.is_error, sent.content
    assert sent.structured_content["accepted"] == ["john@example.com"]
    [eml] = (tmp_path / "data" / "outbox").glob("*.eml")  # the example's own delivery
    assert "Subject: Shipped" in eml.read_text()
    assert refused.is_error and "unknown argument 'smtp_host'" in refused.content[0].text
    assert code == 130, err  # SIGINT, as for every run (DESIGN.md)
    assert "interrupted by SIGINT" in err
    assert "Traceback" not in err


async def test_http_makes_a_token_when_none_is_given(tmp_path):
    proc, url, token_line = start_http(tmp_path)
    try:
        assert token_line.startswith("token: ")
        token = token_line.removeprefix("token: ")
        assert len(token) >= 32
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as client, \
                streamable_http_client(url, http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == ["send_email"]
    finally:
        code, err = stop(proc)
    assert code == 130, err


@pytest.mark.parametrize(("args", "message"), [
    (["--agent", "mail"], "--agent mail: node 'mail' (mail.send) is not an agent: it has no "
                          "tools port"),
    (["--agent", "nobody"], "--agent nobody: no node 'nobody' in"),
    (["--http", "localhost"], "--http 'localhost': expected HOST:PORT"),
    (["--http", "127.0.0.1:0", "--token", "short"], "--token: the token must be at least 16"),
    (["--token", TOKEN], "--token goes with --http"),
    (["--approve", "sometimes"], "--approve 'sometimes': expected ask, auto, deny"),
])
def test_bad_input_is_named_with_exit_2(tmp_path, args, message):
    out = subprocess.run(cli("mcp", "serve", str(EXAMPLE), *args), cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=env_for(tmp_path), stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""


# -- docs/mcp.md ----------------------------------------------------------------

def serving_examples() -> list[tuple[str, str]]:
    """(code, printed output) of each Python example in docs/mcp.md's
    "Serving a flow's tools" section: a python block and the plain block
    after it."""
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split("\n## Serving a flow's tools\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    return [(code, blocks[i + 1][1]) for i, (lang, code) in enumerate(blocks)
            if lang == "python"]


def run_example(code: str, tmp_path: Path, **env: str) -> str:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    venv_bin = str(Path(sys.executable).parent)  # where `switchboard` is installed
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120,
                         env=env_for(tmp_path, PATH=venv_bin + os.pathsep + os.environ["PATH"],
                                     **env))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_stdio_example_in_docs_mcp_md_runs(tmp_path):
    [(code, printed), _] = serving_examples()
    assert run_example(code, tmp_path) == printed
    [eml] = (tmp_path / "data" / "outbox").glob("*.eml")
    assert "Subject: Your order shipped" in eml.read_text()


def test_the_http_example_in_docs_mcp_md_runs(tmp_path):
    [_, (code, printed)] = serving_examples()
    proc, url, _ = start_http(tmp_path, SWITCHBOARD_MCP_TOKEN=TOKEN)
    try:
        assert run_example(code, tmp_path, MCP_URL=url, SWITCHBOARD_MCP_TOKEN=TOKEN) == printed
    finally:
        code_, err = stop(proc)
    assert code_ == 130, err

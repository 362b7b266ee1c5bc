"""mail.read against a real Dovecot on loopback (tests/servers/imap.py).

Mails get into the mailbox the way they would in life: mail.send writes the
mail (outbox delivery: the .eml an MTA would carry) and it is appended to the
mailbox over IMAP; mails with attachments, which mail.send does not make,
are built with the standard library's email package. Each test reads its own
folder, so one server serves the module."""

from __future__ import annotations

import uuid
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path

import pytest

from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry
from tests.servers.flows import AI_SCOPE, agent_flow, fixed, run, scripted
from tests.servers.imap import ImapServer, available

REG = Registry.default()
PASSWORD_ENV = "TEST_IMAP_PASSWORD"

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def imap():
    with ImapServer(password="imap-pass-7f3a9c-for-tests") as server:
        yield server


@pytest.fixture
def folder(imap):
    """A fresh, empty folder of the test's own."""
    name = f"t{uuid.uuid4().hex[:10]}"
    with imap.client() as c:
        typ, data = c.create(name)
        assert typ == "OK", data
    return name


@pytest.fixture(autouse=True)
def _password(imap, monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, imap.password)


def reader(imap, **params) -> dict:
    settings = {"host": "127.0.0.1", "port": imap.port, "tls": "none",
                "username": imap.username, "password": {"env": PASSWORD_ENV}}
    settings.update(params)
    return {"id": "read", "type": "mail.read",
            "params": {k: v if isinstance(v, dict) and "scope" in v else fixed(v)
                       for k, v in settings.items()}}


def read_flow(imap, payload="go", **params):
    return parse_flow({"format": "switchboard.flow/1", "name": "read", "nodes": [
        {"id": "tick", "type": "core.inject", "params": {"payload": fixed(payload)}},
        reader(imap, **params),
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["tick", "out"], "to": ["read", "in"]},
                 {"from": ["read", "out"], "to": ["show", "in"]}]})


async def send_to_outbox(tmp_path: Path, **params) -> tuple[bytes, str]:
    """mail.send with outbox delivery: the .eml it writes and its Message-ID."""
    outbox = tmp_path / "outbox"
    flow = parse_flow({"format": "switchboard.flow/1", "name": "send", "nodes": [
        {"id": "in", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "mail", "type": "mail.send", "params": {
            "delivery": fixed("outbox"), "outbox_dir": fixed(str(outbox)),
            **{k: fixed(v) for k, v in params.items()}}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["in", "out"], "to": ["mail", "in"]},
                 {"from": ["mail", "out"], "to": ["show", "in"]}]})
    result, rec, _ = await run(flow, reg=REG)
    assert result.status == "ok", rec.of("node.error")
    [sent] = rec.debug_values()
    return Path(sent["mail_file"]).read_bytes(), sent["message_id"]


def with_attachments(subject: str, attachments: list[tuple[str, bytes, str]]) -> bytes:
    mail = EmailMessage()
    mail["From"] = "Billing <billing@example.com>"
    mail["To"] = "robot@example.com"
    mail["Subject"] = subject
    mail["Date"] = "Tue, 04 Mar 2025 09:30:00 +0100"
    mail["Message-ID"] = "<inv-42@example.com>"
    mail.set_content("Invoice attached.\n")
    mail.add_alternative("<p>Invoice <b>attached</b>.</p>", subtype="html")
    for name, data, ctype in attachments:
        maintype, subtype = ctype.split("/")
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return bytes(mail)


# -- reading what mail.send wrote ------------------------------------------------------

async def test_reads_a_mail_that_mail_send_wrote_then_marks_it_seen(imap, folder, tmp_path):
    raw, message_id = await send_to_outbox(
        tmp_path, to="Robot <robot@example.com>", cc="boss@example.com",
        subject="Order 1043 shipped", body="Your order is on its way.\nTracking: ZX-9",
        sender="Shop <shop@example.com>")
    imap.append(raw, folder)

    result, rec, _ = await run(read_flow(imap, folder=folder), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    mail = msg["payload"]
    assert mail["subject"] == "Order 1043 shipped"
    assert mail["from"] == "Shop <shop@example.com>"
    assert mail["to"] == ["Robot <robot@example.com>"]
    assert mail["cc"] == ["boss@example.com"]
    assert mail["message_id"] == message_id
    assert mail["text"].strip() == "Your order is on its way.\nTracking: ZX-9"
    assert mail["html"] == ""
    assert mail["attachments"] == []
    assert datetime.fromisoformat(mail["date"]).tzinfo is not None
    # The mail is its own message (the trigger's "go" is not sent on).
    assert msg["_msgid"] and msg["payload"] != "go"
    assert "\\Seen" in imap.flags(folder)[0]
    statuses = [e.text for e in rec.of("node.status") if e.node == "read"]
    assert statuses[-1] == "1 mail read"

    # Marked as seen: the next UNSEEN search finds nothing.
    result, rec2, _ = await run(read_flow(imap, folder=folder), reg=REG)
    assert result.status == "ok", rec2.of("node.error")
    assert rec2.debug_values() == []
    assert [e.text for e in rec2.of("node.status")][-1] == "no mail matches UNSEEN"
    # The password is in no event and no log line of either run.
    for r in (rec, rec2):
        assert imap.password not in r.dump()


async def test_attachments_are_saved_inside_the_folder_only(imap, folder, tmp_path):
    pdf = b"%PDF-1.4 fake but real bytes\n" * 20
    imap.append(with_attachments("Invoice March", [
        ("invoice.pdf", pdf, "application/pdf"),
        ("../../escape.txt", b"should land inside", "text/plain"),
        ("/etc/passwd", b"not the real one", "text/plain"),
        ("big.bin", b"\0" * 5000, "application/octet-stream"),
        ("report.txt", b"numbers", "text/plain"),
    ]), folder)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "invoice.pdf").write_bytes(b"older file, kept")
    # A link planted in the folder, leading out of it, under a name the mail uses.
    (tmp_path / "files" / "report.txt").symlink_to(tmp_path / "outside.txt")
    result, rec, _ = await run(read_flow(
        imap, folder=folder, mode="list", attachments_folder=str(tmp_path / "files"),
        max_attachment_bytes=4096), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    [mail] = msg["payload"]
    assert msg["payload"] is not None and isinstance(msg["payload"], list)
    assert mail["text"].strip() == "Invoice attached."
    assert mail["html"].strip() == "<p>Invoice <b>attached</b>.</p>"
    assert mail["date"] == "2025-03-04T09:30:00+01:00"
    by_name = {a["filename"]: a for a in mail["attachments"]}
    assert set(by_name) == {"invoice.pdf", "escape.txt", "passwd", "big.bin", "report.txt"}
    saved = by_name["invoice.pdf"]
    # An existing file is never overwritten: the new one gets a free name.
    assert Path(saved["path"]).name == "invoice-1.pdf"
    assert Path(saved["path"]).read_bytes() == pdf
    assert (tmp_path / "files" / "invoice.pdf").read_bytes() == b"older file, kept"
    assert saved["size"] == len(pdf) and saved["content_type"] == "application/pdf"
    for name in ("escape.txt", "passwd"):
        assert Path(by_name[name]["path"]).parent == tmp_path / "files"
    assert not (tmp_path / "escape.txt").exists()
    assert Path(by_name["report.txt"]["path"]).name == "report-1.txt"
    assert Path(by_name["report.txt"]["path"]).read_bytes() == b"numbers"
    assert not (tmp_path / "outside.txt").exists()
    assert by_name["big.bin"]["path"] is None
    assert "max_attachment_bytes=4096" in by_name["big.bin"]["skipped"]
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == \
        ["escape.txt", "invoice-1.pdf", "invoice.pdf", "passwd", "report-1.txt", "report.txt"]


async def test_max_messages_takes_the_newest_and_peek_leaves_them_unseen(imap, folder, tmp_path):
    for i in range(5):
        raw, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject=f"Report {i}",
                                      body=f"number {i}")
        imap.append(raw, folder)
    result, rec, _ = await run(read_flow(imap, folder=folder, max_messages=2,
                                         mark_as_seen=False), reg=REG)
    assert result.status == "ok", rec.of("node.error")
    assert [m["payload"]["subject"] for m in rec.debug_values()] == ["Report 4", "Report 3"]
    assert not any("\\Seen" in f for f in imap.flags(folder))
    # Not marked: they are found again, and ALL finds every one.
    result, rec, _ = await run(read_flow(imap, folder=folder, search="ALL", mode="list",
                                         mark_as_seen=False, max_messages=50), reg=REG)
    [msg] = rec.debug_values()
    assert [m["subject"] for m in msg["payload"]] == [f"Report {i}" for i in range(4, -1, -1)]


async def test_search_criteria_and_a_non_ascii_folder(imap, tmp_path):
    folder = f"Entwürfe {uuid.uuid4().hex[:6]}"
    raw_a, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject="Grüße aus Köln",
                                    body="Hallo", sender="anna@example.com")
    raw_b, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject="Weekly numbers",
                                    body="42", sender="bob@example.com")
    from nodes.mail.read import _utf7_imap

    on_the_wire = f'"{_utf7_imap(folder)}"'
    assert "ü" not in on_the_wire and "&APw-" in on_the_wire  # modified UTF-7
    with imap.client() as c:
        assert c.create(on_the_wire)[0] == "OK"
    imap.append(raw_a, on_the_wire)
    imap.append(raw_b, on_the_wire)
    for search, expect in (('FROM "bob@example.com"', ["Weekly numbers"]),
                           ('SUBJECT "Grüße"', ["Grüße aus Köln"]),
                           ("ALL", ["Weekly numbers", "Grüße aus Köln"])):
        result, rec, _ = await run(read_flow(imap, folder=folder, search=search,
                                             mark_as_seen=False), reg=REG)
        assert result.status == "ok", (search, rec.of("node.error"))
        assert [m["payload"]["subject"] for m in rec.debug_values()] == expect, search


# -- errors a person can act on ----------------------------------------------------

async def test_a_line_break_in_the_search_cannot_start_another_command(imap, folder, tmp_path):
    raw, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject="keep me", body="x")
    imap.append(raw, folder)
    evil = f"ALL\r\nA999 DELETE {folder}"
    result, rec, _ = await run(read_flow(
        imap, payload={"q": evil}, folder=folder,
        search={"scope": "message", "path": "payload.q"}), reg=REG)
    assert result.status == "error"
    assert rec.of("node.error")[0].message == "search must be one line (no line breaks)"
    with imap.client() as c:
        assert c.select(f'"{folder}"', readonly=True)[0] == "OK"  # still there


async def test_wrong_password_missing_folder_and_bad_search_are_named(imap, folder, monkeypatch):
    wrong = "not-the-password-91c2"
    monkeypatch.setenv("WRONG_IMAP_PASSWORD", wrong)
    result, rec, _ = await run(read_flow(imap, folder=folder,
                                         password={"env": "WRONG_IMAP_PASSWORD"}), reg=REG)
    assert result.status == "error"
    text = rec.of("node.error")[0].message
    assert text.startswith(f"IMAP 127.0.0.1:{imap.port}: login failed for user 'robot'")
    assert wrong not in rec.dump()

    result, rec, _ = await run(read_flow(imap, folder="No such folder"), reg=REG)
    assert rec.of("node.error")[0].message.startswith("folder 'No such folder': cannot open it")

    result, rec, _ = await run(read_flow(imap, folder=folder, search="NONSENSE 12"), reg=REG)
    assert rec.of("node.error")[0].message.startswith("search: the server refused 'NONSENSE 12'")


async def test_nothing_listening_is_a_clear_error():
    from tests.servers.imap import free_port

    port = free_port()
    flow = parse_flow({"format": "switchboard.flow/1", "name": "r", "nodes": [
        {"id": "tick", "type": "core.inject"},
        {"id": "read", "type": "mail.read", "params": {
            "host": fixed("127.0.0.1"), "port": fixed(port), "tls": fixed("none"),
            "username": fixed("u"), "password": fixed({"env": PASSWORD_ENV})}},
    ], "wires": [{"from": ["tick", "out"], "to": ["read", "in"]}]})
    result, rec, _ = await run(flow, reg=REG)
    assert rec.of("node.error")[0].message.startswith(
        f"IMAP 127.0.0.1:{port}: cannot connect (Connection refused)")


@pytest.mark.parametrize("params, field, text", [
    ({"max_messages": 5000}, "params.max_messages", "max_messages must be at most 1000"),
    ({"max_messages": 0}, "params.max_messages", "max_messages must be at least 1"),
    ({"search": "UNSEEN\nDELETE INBOX"}, "params.search",
     "search must be one line (no line breaks)"),
    ({"folder": "x" * 300}, "params.folder",
     "folder is 300 characters; the most it may be is 255"),
    ({"port": 70000}, "params.port", "port must be 0 (the usual one) or 1-65535"),
])
def test_bounds_are_refused_when_the_flow_loads(imap, params, field, text):
    problems = [p for p in validate_flow(read_flow(imap, **params), REG)
                if p.severity == "error"]
    assert [(p.node, p.field, p.message) for p in problems] == [("read", field, text)]


async def test_max_messages_from_a_message_is_bounded_too(imap, folder):
    result, rec, _ = await run(read_flow(
        imap, payload={"n": 100000}, folder=folder,
        max_messages={"scope": "message", "path": "payload.n"}), reg=REG)
    assert rec.of("node.error")[0].message == "max_messages must be 1-1000 (got 100000)"


# -- TLS: certificates are checked ----------------------------------------------------

@pytest.fixture(scope="module")
def tls_imap():
    with ImapServer(password="imap-tls-pass-51b7e0", tls=True) as server:
        yield server


@pytest.mark.parametrize("mode", ["ssl", "starttls"])
async def test_tls_modes_check_the_server_certificate(tls_imap, mode, monkeypatch, tmp_path):
    monkeypatch.setenv(PASSWORD_ENV, tls_imap.password)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    folder = f"t{uuid.uuid4().hex[:10]}"
    with tls_imap.client() as c:
        assert c.create(folder)[0] == "OK"
    raw, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject=f"over {mode}",
                                  body="encrypted all the way")
    tls_imap.append(raw, folder)
    port = tls_imap.tls_port if mode == "ssl" else tls_imap.port
    flow = read_flow(tls_imap, folder=folder, tls=mode, port=port)

    # A self-signed certificate nobody trusts: refused before the password is sent.
    logins = tls_imap.log().count("Login: user=<robot>")
    result, rec, _ = await run(flow, reg=REG)
    assert result.status == "error"
    assert rec.of("node.error")[0].message.startswith(
        f"IMAP 127.0.0.1:{port}: TLS failed (CERTIFICATE_VERIFY_FAILED)")
    assert tls_imap.log().count("Login: user=<robot>") == logins

    # Trusted (as a company CA would be): read over TLS.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_imap.cert))
    result, rec, _ = await run(flow, reg=REG)
    assert result.status == "ok", rec.of("node.error")
    assert [m["payload"]["subject"] for m in rec.debug_values()] == [f"over {mode}"]
    assert tls_imap.password not in rec.dump()


# -- as an agent's tool ----------------------------------------------------------------

async def test_an_agent_reads_mail_through_the_tool(imap, folder, tmp_path):
    raw, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject="Lunch?",
                                  body="Tomorrow at noon?", sender="carol@example.com")
    imap.append(raw, folder)
    raw, _ = await send_to_outbox(tmp_path, to="robot@example.com", subject="Spam",
                                  body="Buy now", sender="spam@example.com")
    imap.append(raw, folder)
    tool = reader(imap, folder=folder, search=AI_SCOPE, max_messages=AI_SCOPE)
    script = [{"tool_calls": [
        {"name": "read_email", "arguments": {"search": 'FROM "carol@example.com"',
                                             "max_messages": 5}},
        {"name": "read_email", "arguments": {"search": "ALL", "host": "evil.example"}}]},
        {"text": "{last_result}"}]
    result, rec, _ = await run(agent_flow(scripted(script), [tool], "Any mail from Carol?"),
                               reg=REG)
    assert result.status == "ok", rec.of("node.error")
    [answer] = rec.debug_values()
    ok, refused = answer["agent"]["tool_calls"]
    assert ok["status"] == "success"
    [mail] = ok["data"]["mails"]
    assert mail["subject"] == "Lunch?" and mail["from"] == "carol@example.com"
    assert refused["status"] == "refused" and "unknown argument 'host'" in refused["error"]
    assert imap.password not in rec.dump()


def test_the_tool_schema_holds_only_search_folder_and_max():
    spec = REG.spec("mail.read")
    ai = {p.name for p in spec.params if any(s.value == "ai" for s in p.allowed_scopes)}
    assert ai == {"search", "folder", "max_messages"}
    assert spec.param("password").secret
    assert spec.category == "Mail" and spec.icon == "inbox" and spec.color

"""mail.send as a plain RPA node: real SMTP to a local aiosmtpd server, the
outbox delivery, and the checks that keep a caller from adding headers."""

from __future__ import annotations

from email import message_from_bytes

import pytest

from runtime.flow import parse_flow
from tests.servers.flows import fixed, run
from tests.servers.smtp import SmtpServer

PASSWORD = "s3cret-smtp-pass-for-tests"

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


def mail_flow(payload, **params):
    return parse_flow({"format": "switchboard.flow/1", "name": "m", "nodes": [
        {"id": "in", "type": "core.inject", "params": {"payload": fixed(payload)}},
        {"id": "mail", "type": "mail.send", "params": params},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["in", "out"], "to": ["mail", "in"]},
                 {"from": ["mail", "out"], "to": ["show", "in"]}]})


def by_message(**paths):
    return {k: {"scope": "message", "path": v} for k, v in paths.items()}


async def test_rpa_mail_with_login_over_real_smtp(monkeypatch):
    monkeypatch.setenv("TEST_MAIL_PASSWORD", PASSWORD)
    with SmtpServer(username="robot", password=PASSWORD) as smtp:
        flow = mail_flow(
            {"email": "Carol <carol@example.com>", "title": "Report", "text": "Numbers attached."},
            **by_message(to="payload.email", subject="payload.title", body="payload.text"),
            cc=fixed("boss@example.com, audit@example.com"),
            sender=fixed("Reports <reports@example.com>"),
            smtp_host=fixed("127.0.0.1"), smtp_port=fixed(smtp.port),
            username=fixed("robot"), password=fixed({"env": "TEST_MAIL_PASSWORD"}))
        result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    [got] = smtp.received
    assert got["mail_from"] == "reports@example.com"
    assert got["rcpt_tos"] == ["carol@example.com", "boss@example.com", "audit@example.com"]
    mail = got["message"]
    assert mail["To"] == "Carol <carol@example.com>"
    assert mail["Cc"] == "boss@example.com, audit@example.com"
    assert mail["Subject"] == "Report"
    assert mail.get_payload().strip() == "Numbers attached."
    assert smtp.logins == ["robot"]
    [msg] = rec.debug_values()
    # RPA: outputs at their paths; the payload is left alone.
    assert msg["message_id"] == mail["Message-ID"]
    assert msg["accepted"] == ["Carol <carol@example.com>", "boss@example.com", "audit@example.com"]
    assert msg["payload"]["title"] == "Report"
    assert PASSWORD not in rec.dump()


async def test_a_line_break_cannot_add_headers():
    with SmtpServer() as smtp:
        flow = mail_flow({"s": "Hi\r\nBcc: spy@example.com"}, to=fixed("a@example.com"),
                         subject={"scope": "message", "path": "payload.s"}, body=fixed("x"),
                         smtp_host=fixed("127.0.0.1"), smtp_port=fixed(smtp.port))
        result, rec, _ = await run(flow)
    assert result.status == "error"
    assert rec.of("node.error")[0].message == "subject must be one line"
    assert smtp.received == []


@pytest.mark.parametrize("to", ["not-an-address", "a@b@c", "@example.com", ""])
async def test_bad_recipients_are_named(to):
    flow = mail_flow("x", to=fixed(to), subject=fixed("s"), body=fixed("b"),
                     delivery=fixed("outbox"))
    result, rec, _ = await run(flow)
    assert result.status == "error"
    message = rec.of("node.error")[0].message
    assert message.startswith("to:")


async def test_no_server_is_a_readable_error():
    from tests.servers.smtp import free_port

    port = free_port()
    flow = mail_flow("x", to=fixed("a@example.com"), subject=fixed("s"), body=fixed("b"),
                     smtp_host=fixed("127.0.0.1"), smtp_port=fixed(port))
    result, rec, _ = await run(flow)
    assert result.status == "error"
    message = rec.of("node.error")[0].message
    assert message.startswith(f"SMTP 127.0.0.1:{port}: ")
    assert "outbox" in message


async def test_outbox_delivery_writes_an_eml_file(tmp_path):
    flow = mail_flow("x", to=fixed("dave@example.com"), subject=fixed("Über"),
                     body=fixed("Grüße"), delivery=fixed("outbox"),
                     outbox_dir=fixed(str(tmp_path / "box")))
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    [eml] = list((tmp_path / "box").glob("*.eml"))
    assert msg["mail_file"] == str(eml)
    assert msg["accepted"] == ["dave@example.com"]
    mail = message_from_bytes(eml.read_bytes())
    assert mail["Message-ID"] == msg["message_id"]
    assert str(mail["Subject"]) == "=?utf-8?q?=C3=9Cber?="
    assert mail.get_payload(decode=True).decode("utf-8").strip() == "Grüße"


async def test_outbox_defaults_to_the_data_folder(data_dir):
    flow = mail_flow("x", to=fixed("e@example.com"), subject=fixed("s"), body=fixed("b"),
                     delivery=fixed("outbox"))
    result, rec, _ = await run(flow)
    assert result.status == "ok", rec.of("node.error")
    assert len(list((data_dir / "outbox").glob("*.eml"))) == 1


# -- bounds (issue 5) -------------------------------------------------------------

@pytest.fixture
def parsed(monkeypatch):
    """The texts handed to getaddresses(), recorded."""
    import nodes.mail as mail_mod

    seen: list[int] = []
    real = mail_mod.getaddresses

    def recording(fields):
        seen.append(sum(len(f) for f in fields))
        return real(fields)

    monkeypatch.setattr(mail_mod, "getaddresses", recording)
    return seen


async def test_too_many_recipients_are_refused_before_any_address_is_parsed(parsed, tmp_path):
    many = ", ".join(f"user{i}@example.com" for i in range(20_000))
    flow = mail_flow("x", to=fixed(many), subject=fixed("s"), body=fixed("b"),
                     delivery=fixed("outbox"), outbox_dir=fixed(str(tmp_path)))
    result, rec, _ = await run(flow)
    assert result.status == "error"
    assert rec.of("node.error")[0].message == (
        "to: too many recipients: a mail goes to at most max_recipients=100 addresses "
        "(to and cc together)")
    assert parsed == []  # refused on a count, not after parsing 20,000 addresses
    assert not list(tmp_path.glob("*.eml"))


@pytest.mark.parametrize(("to", "cc", "ok"), [
    ("a@example.com, b@example.com", "c@example.com", True),
    ("a@example.com, b@example.com", "c@example.com, d@example.com", False),  # 4 > 3 together
    (["a@example.com", "b@example.com", "c@example.com", "d@example.com"], "", False),
    ('"Doe, John" <j@example.com>, "Roe, Jane" <r@example.com>', "x@example.com", True),
])
async def test_max_recipients_counts_to_and_cc_together(to, cc, ok, tmp_path):
    flow = mail_flow({"to": to}, to={"scope": "message", "path": "payload.to"}, cc=fixed(cc),
                     subject=fixed("s"), body=fixed("b"), delivery=fixed("outbox"),
                     outbox_dir=fixed(str(tmp_path)), max_recipients=fixed(3))
    result, rec, _ = await run(flow)
    if ok:
        assert result.status == "ok", rec.of("node.error")
    else:
        assert result.status == "error"
        assert "max_recipients=3" in rec.of("node.error")[0].message


async def test_too_many_recipients_from_the_ai_are_a_tool_error(parsed, tmp_path):
    from tests.servers.flows import AI_SCOPE, agent_flow, scripted

    many = ",".join(f"{i}@x.io" for i in range(20_000))  # under the 256 KB argument bound
    flow = agent_flow(scripted([
        {"tool_calls": [{"name": "send_email", "arguments": {"to": many, "subject": "s",
                                                             "body": "b"}}]},
        {"text": "done"}]),
        [{"id": "mail", "type": "mail.send", "params": {
            "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE, "delivery": fixed("outbox"),
            "outbox_dir": fixed(str(tmp_path))}}])
    result, rec, _ = await run(flow)
    assert result.status == "ok"
    [r] = rec.of("tool.result")
    assert r.status == "error" and "max_recipients=100" in r.error
    assert parsed == []


async def test_a_bad_address_is_quoted_at_most_200_characters():
    flow = mail_flow("x", to=fixed("x" * 50_000), subject=fixed("s"), body=fixed("b"),
                     delivery=fixed("outbox"))
    result, rec, _ = await run(flow)
    assert result.status == "error"
    message = rec.of("node.error")[0].message
    assert message.startswith("to: 'xxx") and message.endswith("…' is not an email address")
    assert message.count("x") <= 200

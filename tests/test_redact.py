"""redact(): a secret is hidden in every form it leaves a process in, not only
raw: base64 (AUTH LOGIN), the AUTH PLAIN token, inside any base64 blob at any
alignment, URL-encoded. End to end: a real SMTP server that echoes the AUTH
line into its error reply must not get the password (in any form) into the
node.error event, the logs, the run history or the next LLM request."""

from __future__ import annotations

import base64
import json
import sqlite3
from urllib.parse import quote, quote_plus

import pytest
from aiosmtpd.controller import Controller

import runtime.node as node_mod
from runtime.history import History
from runtime.node import redact, register_secret, resolve_secret
from tests.servers.flows import AI_SCOPE, agent_flow, fixed, run
from tests.servers.llm import LlmServer, openai_reply
from tests.servers.smtp import free_port

# Each test uses its own secrets: registration is process-wide and for good.
LOGIN_PW = "Login-Pa55word-7731"
PLAIN_PW = "Plain-pa55/word+9014"
BLOB_PW = "blob:secret-4433-xyz"
URL_PW = "url pa55/w&rd+=?x-8812"
SMTP_USER = "bot"
SMTP_PW = "smtp pa55/w&rd+ echo-5521"  # space, /, &, +: every encoding differs


def b64(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def leaked_forms(password: str, user: str | None = None) -> list[str]:
    """What must never appear: the raw password, base64 of it (full and the
    three alignment cores), the AUTH PLAIN token and the URL encodings."""
    raw = password.encode()
    forms = [password, b64(raw), quote(password), quote(password, safe=""),
             quote_plus(password)]
    # For each alignment, the characters that encode the password alone.
    for k in range(3):
        enc = b64(b"\0" * k + raw + b"\0\0")
        forms.append(enc[-(-8 * k // 6):8 * (k + len(raw)) // 6])
    if user is not None:
        forms.append(b64(b"\0" + user.encode() + b"\0" + raw))
    return forms


def client_side(rec) -> str:
    """Every event and log line of the run, except the test SMTP server's
    own log (aiosmtpd logs what it receives: that is the server's side)."""
    rec.records = [r for r in rec.records if not r.name.startswith("mail.log")]
    return rec.dump()


def assert_clean(text: str, password: str, user: str | None = None) -> None:
    for form in leaked_forms(password, user):
        assert form not in text, f"{form!r} leaked"


# -- redact itself ------------------------------------------------------------

def test_raw_secret_is_hidden():
    register_secret(LOGIN_PW)
    assert redact(f"server said: {LOGIN_PW} is wrong") == "server said: *** is wrong"


def test_auth_login_base64_is_hidden():
    register_secret(LOGIN_PW)
    echoed = f"535 5.7.8 rejected {b64(SMTP_USER)} {b64(LOGIN_PW)}"
    assert redact(echoed) == f"535 5.7.8 rejected {b64(SMTP_USER)} ***"
    # Unpadded and base64url forms too.
    unpadded = b64(LOGIN_PW).rstrip("=")
    assert redact(f"x {unpadded} y") == "x *** y"


def test_auth_plain_token_is_hidden_whole_when_the_username_is_known():
    register_secret(PLAIN_PW, username="alice")
    token = b64(b"\0alice\0" + PLAIN_PW.encode())
    assert redact(f"535 5.7.8 rejected AUTH PLAIN {token}") == "535 5.7.8 rejected AUTH PLAIN ***"
    # authzid = user, as some clients send it
    token2 = b64(b"alice\0alice\0" + PLAIN_PW.encode())
    assert redact(f"AUTH PLAIN {token2}.") == "AUTH PLAIN ***."
    # The user name alone is not a secret.
    assert redact("login alice failed") == "login alice failed"


def test_resolve_secret_takes_the_username(monkeypatch):
    pw = "resolved-with-user-6620"
    monkeypatch.setenv("TEST_REDACT_PW", pw)
    assert resolve_secret({"env": "TEST_REDACT_PW"}, param="password", username="carol") == pw
    token = b64(b"\0carol\0" + pw.encode())
    assert redact(f"AUTH PLAIN {token}") == "AUTH PLAIN ***"


@pytest.mark.parametrize("before", [0, 1, 2, 3, 4, 5, 13])
@pytest.mark.parametrize("after", [0, 1, 2, 7])
def test_secret_inside_a_larger_base64_blob_at_every_alignment(before, after):
    register_secret(BLOB_PW)
    # Neighbour bytes that differ from the filler the cores were built with.
    blob = b64(bytes(range(200, 200 + before)) + BLOB_PW.encode() + b"\xff\xfe\x81"[:after]
               + b"tail" * (after // 4))
    core = leaked_forms(BLOB_PW)[5 + before % 3]
    assert core in blob  # the secret is in there, encoded at this alignment
    out = redact(f"data: {blob} end")
    assert "***" in out and out.startswith("data: ") and out.endswith(" end")
    assert_clean(out, BLOB_PW)


def test_url_encoded_forms_are_hidden():
    register_secret(URL_PW)
    assert quote(URL_PW) != URL_PW and quote_plus(URL_PW) != quote(URL_PW)
    for encoded in (quote(URL_PW), quote(URL_PW, safe=""), quote_plus(URL_PW)):
        assert redact(f"GET /login?pw={encoded}&x=1") == "GET /login?pw=***&x=1"


def test_json_escaped_form_is_hidden():
    pw = 'quote"back\\slash-3391'
    register_secret(pw)
    text = json.dumps({"error": f"bad password {pw}"})
    assert pw not in redact(text) and json.dumps(pw)[1:-1] not in redact(text)
    assert json.loads(redact(text)) == {"error": "bad password ***"}


def test_short_secrets_are_not_registered():
    register_secret("abc", username="u")
    assert redact("abc and " + b64("abc")) == "abc and " + b64("abc")


def test_no_secret_costs_nothing(monkeypatch):
    monkeypatch.setattr(node_mod, "_masker", None)
    text = "some text " * 10
    assert redact(text) is text


def test_register_secret_returns_the_value():
    assert register_secret("returned-value-1234", username="u") == "returned-value-1234"
    assert register_secret(None) is None


# -- pieces of a secret: any run of SECRET_RUN characters ------------------------

RUN_PW = "k7Qm2xZp9RtLw4Vb8NcYs3Hd"  # 24 characters, none repeated in a row


def test_any_run_of_8_characters_of_a_secret_is_hidden():
    register_secret(RUN_PW)
    assert node_mod.SECRET_RUN == 8
    for length in range(1, len(RUN_PW) + 1):
        for start in range(len(RUN_PW) - length + 1):
            piece = RUN_PW[start:start + length]
            shown = redact(f"<{piece}>")
            if length >= 8:
                assert shown == "<***>", (start, length, shown)
            else:  # shorter pieces are shown: see docs/credentials.md, Masking
                assert shown == f"<{piece}>", (start, length, shown)


def test_two_pieces_and_a_piece_inside_other_text_are_hidden():
    register_secret(RUN_PW)
    head, tail = RUN_PW[:13], RUN_PW[13:]
    assert redact(f"X-Head: {head}\n\n{{\"tail\": \"{tail}\"}}") == \
        'X-Head: ***\n\n{"tail": "***"}'
    # Glued to other letters on both sides: the run alone goes.
    assert redact(f"abc{RUN_PW[3:15]}xyz") == "abc***xyz"
    # Two pieces back to back are one run of text to hide.
    assert redact(f"{RUN_PW[:10]}{RUN_PW[5:20]}!") == "***!"


def test_runs_of_the_url_encoded_and_json_escaped_forms_are_hidden():
    pw = 'a/b"c d+e&f\\g-runs-7715'
    register_secret(pw)
    assert redact(quote(pw, safe="")[4:20]) == "***"
    assert redact(json.dumps(pw)[5:20]) == "***"


def test_a_secret_under_8_characters_is_hidden_only_whole():
    register_secret("Qx7#kP")
    assert redact("key Qx7#kP") == "key ***"
    assert redact("key Qx7#k and x7#kP") == "key Qx7#k and x7#kP"


@pytest.fixture
def only_these_secrets(monkeypatch):
    """A registry of its own for a test that asserts what is not hidden or
    held (other tests' secrets are registered for good in this process)."""
    monkeypatch.setattr(node_mod, "_resolved_secrets", set())
    monkeypatch.setattr(node_mod, "_resolved_logins", set())
    monkeypatch.setattr(node_mod, "_masker", None)


def test_the_end_of_a_growing_text_is_held_while_it_may_be_the_start_of_a_run(
        only_these_secrets):
    register_secret(RUN_PW)
    assert node_mod.redact_hold("answer: " + RUN_PW[4:11]) == 7  # 7 of a run, 1 more hides it
    assert node_mod.redact_hold("answer: " + RUN_PW[4:9]) >= 5
    assert node_mod.redact_hold("answer: " + RUN_PW[4:8]) >= 4
    # Fewer than 4 characters are not held (they end almost every text).
    assert node_mod.redact_hold("answer: " + RUN_PW[4:7]) == 0


def test_a_long_secret_registers_and_is_hidden_in_pieces():
    # A private key as a secret: thousands of characters, compiled into one
    # search without any recursion limit.
    import random

    rng = random.Random(7)
    pem = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                  for _ in range(4000))
    register_secret(pem)
    assert redact(f"key: {pem}") == "key: ***"
    assert redact(f"[{pem[1000:1009]}] [{pem[2500:2507]}]") == f"[***] [{pem[2500:2507]}]"
    assert redact(b64(pem)) == "***"


# -- end to end: an SMTP server that echoes the AUTH line -----------------------

class EchoingAuth:
    """aiosmtpd handler: rejects every login and quotes the client's AUTH
    exchange back in the 535 reply, as a badly written server does."""

    async def handle_AUTH(self, server, session, envelope, args):  # noqa: N802 - aiosmtpd hook
        if args[0].upper() == "LOGIN":
            password = await server.challenge_auth("Password:")
            return f"535 5.7.8 Authentication failed: AUTH {' '.join(args)} {b64(password)}"
        return f"535 5.7.8 Authentication failed: AUTH {' '.join(args)}"


class EchoingSmtp:
    def __init__(self, mechanism: str) -> None:
        self.port = free_port()
        other = {"PLAIN": "LOGIN", "LOGIN": "PLAIN"}[mechanism]
        self.controller = Controller(EchoingAuth(), hostname="127.0.0.1", port=self.port,
                                     auth_require_tls=False, auth_exclude_mechanism=[other])

    def __enter__(self) -> EchoingSmtp:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()


def mail_params(smtp: EchoingSmtp) -> dict:
    return {"sender": fixed("robot@example.com"), "smtp_host": fixed("127.0.0.1"),
            "smtp_port": fixed(smtp.port), "username": fixed(SMTP_USER),
            "password": fixed({"env": "TEST_ECHO_SMTP_PW"})}


def rpa_mail_flow(smtp: EchoingSmtp):
    from runtime.flow import parse_flow

    return parse_flow({"format": "switchboard.flow/1", "name": "m", "nodes": [
        {"id": "in", "type": "core.inject", "params": {"payload": fixed("x")}},
        {"id": "mail", "type": "mail.send", "params": {
            "to": fixed("a@example.com"), "subject": fixed("s"), "body": fixed("b"),
            **mail_params(smtp)}},
    ], "wires": [{"from": ["in", "out"], "to": ["mail", "in"]}]})


async def run_with_history(flow, tmp_path, **kw):
    history = History(tmp_path / "history.sqlite3")
    recorder = history.recorder()
    try:
        result, rec, engine = await run(flow, engine_hook=lambda e: e.bus.subscribe(recorder),
                                        **kw)
        recorder.close()
    finally:
        history.close()
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        stored = "\n".join(row[0] for row in db.execute("SELECT data FROM events"))
    return result, rec, stored


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
async def test_echoed_auth_never_reaches_events_logs_or_history(mechanism, monkeypatch,
                                                                 tmp_path):
    monkeypatch.setenv("TEST_ECHO_SMTP_PW", SMTP_PW)
    with EchoingSmtp(mechanism) as smtp:
        result, rec, stored = await run_with_history(rpa_mail_flow(smtp), tmp_path)
    assert result.status == "error"
    [error] = rec.of("node.error")
    # The server's reply did come through (so the test sees the echo) ...
    assert f"535 5.7.8 Authentication failed: AUTH {mechanism}" in error.message
    assert "***" in error.message
    # ... without the password in any form, anywhere.
    for text in (error.message, client_side(rec), stored):
        assert_clean(text, SMTP_PW, SMTP_USER)
    assert "node.error" in stored


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
async def test_echoed_auth_never_reaches_the_next_llm_request(mechanism, monkeypatch, tmp_path):
    monkeypatch.setenv("TEST_ECHO_SMTP_PW", SMTP_PW)
    monkeypatch.setenv("TEST_ECHO_OPENAI_KEY", "sk-test-echo-key-0000")
    with EchoingSmtp(mechanism) as smtp, LlmServer() as llm:
        llm.replies = [
            openai_reply(tool_calls=[("send_email", {"to": "ann@example.com",
                                                     "subject": "Hi", "body": "Hello"})]),
            openai_reply("The mail could not be sent."),
        ]
        agent = {"provider": fixed("openai"), "model": fixed("gpt-test"),
                 "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_ECHO_OPENAI_KEY"),
                 "instructions": fixed("You send mail.")}
        tool = {"id": "mail", "type": "mail.send", "params": {
            "to": AI_SCOPE, "subject": AI_SCOPE, "body": AI_SCOPE, **mail_params(smtp)}}
        result, rec, stored = await run_with_history(agent_flow(agent, [tool]), tmp_path)
    assert result.status == "ok", rec.of("node.error")
    assert len(llm.requests) == 2
    second = llm.requests[1]["body"]
    [tool_msg] = [m for m in second["messages"] if m["role"] == "tool"]
    # The LLM was told what the server said ...
    assert f"AUTH {mechanism}" in tool_msg["content"] and "***" in tool_msg["content"]
    # ... and nothing of the password, in what it received or anywhere else.
    sent = json.dumps([r["body"] for r in llm.requests])
    for text in (sent, client_side(rec), stored):
        assert_clean(text, SMTP_PW, SMTP_USER)


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
async def test_echoed_auth_plain_token_is_hidden_whole(monkeypatch, tmp_path):
    """Without the username only the password's base64 core inside the AUTH
    PLAIN token is hidden; the characters that mix it with the user name
    stay. With the login registered the token goes as a whole."""
    monkeypatch.setenv("TEST_ECHO_SMTP_PW", "whole-token-pw-2207")
    with EchoingSmtp("PLAIN") as smtp:
        flow = rpa_mail_flow(smtp)
        result, rec, _ = await run(flow)
    [error] = rec.of("node.error")
    assert error.message.endswith("535 5.7.8 Authentication failed: AUTH PLAIN ***")


# -- messages recorded for the inspector ----------------------------------------------

MSG_PW = "in-a-message-pa55-6620"


async def test_a_secret_inside_a_message_is_masked_in_debug_stats_and_trace():
    # A model that typed a secret into tool arguments, or a node that put one
    # in the message: the recorded copies (stats' last messages, message.sent,
    # debug values) go through redact like every other text that leaves.
    from tests.runtime_fixtures import N, make_flow
    from tests.runtime_fixtures import run as run_flow

    register_secret(MSG_PW)
    flow = make_flow([N("src", "core.inject", payload={"note": f"key={MSG_PW}"}),
                      N("r", "test.record"), N("d", "core.debug", path="msg")],
                     ["src->r", "r->d"])
    r = await run_flow(flow, trace=True, record=True)
    text = json.dumps([e.model_dump(mode="json") for e in r.events])
    assert "key=***" in text
    assert_clean(text, MSG_PW)
    # The message itself is the flow's data and stays as it was.
    assert r.node("r").seen[0]["payload"]["note"] == f"key={MSG_PW}"


def test_a_word_inside_a_secret_of_more_than_letters_stays_readable(only_these_secrets):
    """A run that reads like a word ("credential" of "sk-stored-credential-777")
    is the secret's least secret part and ordinary text's most common one:
    it is shown. The runs around it are not; nor is any run of a secret
    that is letters alone (a passphrase, an app password)."""
    register_secret("sk-worded-credential-5150")
    assert redact("no credential named 'typo'") == "no credential named 'typo'"
    assert redact("key sk-worded-cred") == "key ***"
    assert redact("x=credential-5150") == "x=***"
    # Two secrets sharing a run: each is grown along its own text.
    register_secret("sk-other-credential-77")
    assert redact("x=credential-5150 y=credential-77") == "x=*** y=***"
    register_secret("qwhvmzprtkdlsbna")  # an app password: 16 letters
    assert redact("first half qwhvmzpr") == "first half ***"


def test_random_texts_of_secret_pieces_keep_no_run_of_8_and_lose_nothing_else():
    """Random texts glued from pieces of five secrets (two of them
    overlapping) and other characters: no 8 characters of a secret in a row
    survive, and what is shown is the text's own, in order."""
    import random

    rng = random.Random(20260507)
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789-_/+="  # no lower case: no word-like runs
    secrets = ["".join(rng.choice(alphabet) for _ in range(rng.randint(8, 60)))
               for _ in range(4)]
    secrets.append("ZZ7" + secrets[0][:10] + "QQ9")
    for secret in secrets:
        register_secret(secret)
    pieces = {s[i:i + 8] for s in secrets for i in range(len(s) - 7)}
    for _ in range(500):
        parts = []
        for _ in range(rng.randint(1, 8)):
            secret = rng.choice(secrets)
            a = rng.randint(0, len(secret) - 1)
            parts.append(rng.choice([secret[a:rng.randint(a, len(secret))], secret,
                                     "".join(rng.choice(alphabet + " .,")
                                             for _ in range(rng.randint(0, 15)))]))
        text = "".join(parts)
        shown = redact(text)
        assert not [p for p in pieces if p in shown], (text, shown)
        at = 0
        for kept in shown.split("***"):
            at = text.index(kept, at) + len(kept)

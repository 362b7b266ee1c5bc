"""Mail nodes. ``mail.send`` sends a plain-text mail over SMTP (aiosmtplib,
imported when the first mail goes out), or writes it as an ``.eml`` file to
an outbox folder so that a flow can be tried on a machine with no mail
server."""

from __future__ import annotations

import os
import time
from email.message import EmailMessage
from email.utils import formatdate, getaddresses, make_msgid
from pathlib import Path
from typing import Any

from runtime.message import Message
from runtime.node import (
    AI,
    CUSTOM,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    register_secret,
)

SMTP_TIMEOUT = 30.0
DEFAULT_MAX_RECIPIENTS = 100
#: Characters one address may take in a recipient list, display name and
#: separator included (an address itself is at most 254).
ADDRESS_CHARS = 1000
QUOTE_LIMIT = 200


@node("mail.send", name="Send Mail", category="Mail", icon="mail", color="#2e86c1",
      tool=Tool("send_email", "Send an email message"))
class SendMail(Node):
    """Sends a plain-text email through an SMTP server, or, with delivery
    'outbox', writes it as an .eml file to a folder."""

    to = Param(str, "Recipient email address(es), comma-separated", scope=AI,
               allow=AI | CUSTOM | MESSAGE)
    subject = Param(str, "Subject line", scope=AI, allow=AI | CUSTOM | MESSAGE)
    body = Param(str, "Message body (plain text)", scope=AI, allow=AI | CUSTOM | MESSAGE,
                 multiline=True)
    # Before cc and sender, so that the choice a first try needs (outbox: no
    # server) is in view without scrolling.
    delivery = Param(str, "smtp: send through the SMTP server; outbox: write an .eml file to the "
                     "outbox folder instead (no server needed)", choices=["smtp", "outbox"],
                     default="smtp", allow=CUSTOM)
    outbox_dir = Param(str, "Folder for outbox delivery; empty: 'outbox' in Switchboard's data "
                       "folder", default="", allow=CUSTOM, visible_if={"delivery": ["outbox"]})
    cc = Param(str, "Carbon-copy address(es), comma-separated", default="",
               allow=AI | CUSTOM | MESSAGE)
    sender = Param(str, "From address", default="switchboard@localhost", allow=CUSTOM | MESSAGE)
    # The server: meaningless, and hidden, while mail goes to the outbox.
    smtp_host = Param(str, "SMTP server", default="localhost", allow=CUSTOM | MESSAGE,
                      group="connection", visible_if={"delivery": ["smtp"]})
    smtp_port = Param(int, "SMTP port", default=25, allow=CUSTOM | MESSAGE,
                      group="connection", visible_if={"delivery": ["smtp"]})
    username = Param(str, "SMTP user name; empty: no login", default="", allow=CUSTOM | MESSAGE,
                     group="connection", visible_if={"delivery": ["smtp"]})
    password = Param("secret", "SMTP password: an environment variable or keyring entry",
                     optional=True, group="connection", visible_if={"delivery": ["smtp"]})
    starttls = Param(bool, "Upgrade the connection with STARTTLS", default=False, allow=CUSTOM,
                     group="connection", visible_if={"delivery": ["smtp"]})
    max_recipients = Param(int, "Most recipients (to and cc together) of one mail; more is "
                           "refused before any address is parsed",
                           default=DEFAULT_MAX_RECIPIENTS, allow=CUSTOM, group="advanced")

    message_id = Output(str, "Message-ID of the sent mail", path="message_id")
    accepted = Output("json", "Recipients the server accepted", path="accepted")
    file = Output(str, "outbox delivery: the .eml file written", path="mail_file")

    @classmethod
    def check(cls, params):
        problems = []
        port = params.get("smtp_port")
        if port is not None and isinstance(port.value, int) and not 0 < port.value < 65536:
            problems.append(("smtp_port", "smtp_port must be 1-65535"))
        limit = params.get("max_recipients")
        if limit is not None and isinstance(limit.value, int) and limit.value < 1:
            problems.append(("max_recipients", "max_recipients must be at least 1"))
        return problems

    async def on_message(self, msg: Message) -> None:
        limit = int(self.max_recipients.get() or DEFAULT_MAX_RECIPIENTS)
        to = _addresses("to", self.to.get(msg), limit)
        if not to:
            raise NodeConfigError("to: no recipient")
        cc = _addresses("cc", self.cc.get(msg), limit, used=len(to))
        sender = _one_line("sender", self.sender.get(msg))
        if len(_addresses("sender", sender, 1)) != 1:
            raise NodeConfigError(f"sender: '{_quote(sender)}' is not one email address")
        mail = EmailMessage()
        mail["From"] = sender
        mail["To"] = ", ".join(to)
        if cc:
            mail["Cc"] = ", ".join(cc)
        mail["Subject"] = _one_line("subject", self.subject.get(msg))
        mail["Date"] = formatdate(localtime=True)
        domain = sender.rpartition("@")[2].strip("> ") or "localhost"
        body = self.body.get(msg)
        recipients = to + cc
        # A run that may run twice (queue mode): a mail an earlier attempt
        # sent is not sent again, and the Message-ID is the same on every
        # attempt, so a server or reader can drop a repeat from the window
        # between sending and the ledger's entry (docs/queue.md).
        effect = self.effect_once("mail", sender, to, cc, mail["Subject"], body,
                                  self.delivery.get())
        if effect.done:
            self._already_sent(msg, effect.result or {}, to)
            return
        mid = f"<{effect.key}@{domain}>" if effect.key else make_msgid(domain=domain)
        mail["Message-ID"] = mid
        mail.set_content("" if body is None else str(body))

        written = None
        if self.delivery.get() == "outbox":
            path = self._write_outbox(mail, mid)
            written = str(path)
            accepted = recipients
            self.file.set(msg, str(path))
            self.show_status(f"saved for {', '.join(to)}", "green", "done")
        else:
            accepted = await self._send_smtp(mail, sender, recipients, msg)
            self.show_status(f"sent to {', '.join(accepted)}", "green", "done")
        self.message_id.set(msg, mid)
        self.accepted.set(msg, accepted)
        effect.record({"message_id": mid, "accepted": accepted, "file": written})

    def _already_sent(self, msg: Message, done: dict, to: list[str]) -> None:
        """An earlier attempt of this run sent this mail: its outputs again."""
        self.message_id.set(msg, done.get("message_id", ""))
        self.accepted.set(msg, done.get("accepted", []))
        if done.get("file"):
            self.file.set(msg, done["file"])
        self.show_status(f"already sent to {', '.join(to)} (an earlier attempt)", "green", "done")

    async def _send_smtp(self, mail: EmailMessage, sender: str, recipients: list[str],
                         msg: Message) -> list[str]:
        import aiosmtplib

        host = self.smtp_host.get(msg) or "localhost"
        port = self.smtp_port.get(msg)
        username = self.username.get(msg) or None
        # Registered with the user name, so that the AUTH PLAIN token
        # (base64 of \0user\0password) an echoing server sends back is masked whole.
        password = register_secret(self.password.get(msg), username) if username else None
        try:
            errors, _ = await aiosmtplib.send(
                mail, sender=_bare(sender), recipients=[_bare(r) for r in recipients],
                hostname=host, port=port, username=username, password=password,
                start_tls=bool(self.starttls.get()), timeout=SMTP_TIMEOUT)
        except (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPConnectTimeoutError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or _smtp_reason(exc)
            raise NodeConfigError(f"SMTP {host}:{port}: cannot connect ({reason}); is a mail "
                                  "server running there? To try a flow without one, set "
                                  "delivery to 'outbox'") from None
        except aiosmtplib.SMTPException as exc:
            raise NodeConfigError(f"SMTP {host}:{port}: {_smtp_reason(exc)}") from None
        return [r for r in recipients if _bare(r) not in errors]

    def _write_outbox(self, mail: EmailMessage, mid: str) -> Path:
        folder = self.outbox_dir.get()
        if folder:
            folder_path = Path(os.path.expanduser(folder))
        else:
            from runtime.history import data_dir

            folder_path = data_dir() / "outbox"
        # A mail is the user's alone: its folder 0700 when made here, the
        # file 0600 from its first byte, whatever the umask.
        folder_path.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        token = mid.strip("<>").split("@")[0].replace(".", "")[-10:]
        path = folder_path / f"{stamp}-{token}.eml"
        tmp = path.with_suffix(".eml.tmp")
        tmp.unlink(missing_ok=True)  # a crash's leftover keeps its mode otherwise
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(mail))
        os.replace(tmp, path)
        return path


def _one_line(name: str, value: Any) -> str:
    text = "" if value is None else str(value)
    if "\r" in text or "\n" in text:
        # A line break in a header would let the caller add headers (Bcc: ...).
        raise NodeConfigError(f"{name} must be one line")
    return text


def _addresses(name: str, value: Any, limit: int, used: int = 0) -> list[str]:
    """The addresses in ``value`` (text, comma-separated, or a list); with
    the ``used`` ones before, at most ``limit``. Too many is refused before
    anything is parsed: the length of the text and a count of separators
    bound the number cheaply (parsing 20,000 addresses blocks the event loop
    for seconds)."""
    if value is None or value == "":
        return []
    room = limit - used
    if isinstance(value, list):
        if len(value) > room:
            raise _too_many(name, limit, value)
        value = ", ".join(str(v) for v in value)
    text = _one_line(name, value)
    # Each address holds an '@' and addresses are separated by commas: the
    # smaller count is at least the number of addresses getaddresses() finds.
    if len(text) > max(room, 1) * ADDRESS_CHARS or min(text.count(",") + 1, text.count("@")) > room:
        raise _too_many(name, limit, text)
    out = []
    for display, addr in getaddresses([text]):
        if not addr or addr.count("@") != 1 or " " in addr or addr.startswith("@") \
                or addr.endswith("@"):
            raise NodeConfigError(f"{name}: '{_quote(addr or text)}' is not an email address")
        out.append(f"{display} <{addr}>" if display else addr)
    if len(out) > room:
        raise _too_many(name, limit, text)
    return out


def _too_many(name: str, limit: int, value: Any) -> NodeConfigError:
    if name == "sender":
        return NodeConfigError(f"sender: '{_quote(str(value))}' is not one email address")
    return NodeConfigError(f"{name}: too many recipients: a mail goes to at most "
                           f"max_recipients={limit} addresses (to and cc together)")


def _quote(text: str) -> str:
    """A value as an error may quote it: at most QUOTE_LIMIT characters."""
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"


def _bare(address: str) -> str:
    return getaddresses([address])[0][1] or address


def _smtp_reason(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None) or str(exc)
    return f"{code} {message}" if code else str(message)
from . import read  # noqa: E402,F401  (registers mail.read)

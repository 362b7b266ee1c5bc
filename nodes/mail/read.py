"""``mail.read``: reads mails from an IMAP mailbox (the standard library's
imaplib, run in a worker thread so the flow and the designer stay
responsive).

Each mail becomes a plain dict (subject, from, to, cc, date, text, html,
message_id, attachments); attachments are saved into one folder the flow
names, never outside it, whatever file name the mail claims. Everything a
mail or the AI controls is bounded: how many mails, how big a mail, how big
an attachment, how long a body, how long the search text."""

from __future__ import annotations

import contextlib
import imaplib
import os
import re
import ssl
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from runtime.message import MESSAGE_TYPE, TOOL_REQUEST, Message, deep_copy, new_msgid
from runtime.node import (
    AI,
    CUSTOM,
    DROP,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    redact,
    register_secret,
)

#: The most mails one read may return, whatever max_messages says.
MAX_MESSAGES_CEILING = 1000
DEFAULT_MAX_MESSAGES = 50
DEFAULT_MAX_MESSAGE_BYTES = 25 * 1024 * 1024
DEFAULT_MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
DEFAULT_MAX_BODY_CHARS = 100_000
#: Characters of IMAP search criteria or a folder name the AI or a message may send.
MAX_CRITERIA_CHARS = 1000
MAX_FOLDER_CHARS = 255
DEFAULT_TIMEOUT = 30.0
#: Attachments of one mail that are looked at (a mail made of 10,000 tiny
#: parts must not make 10,000 files).
MAX_ATTACHMENTS = 100
#: Tries to find a free name for an attachment whose name is taken.
MAX_NAME_TRIES = 1000
QUOTE_LIMIT = 200
DEFAULT_PORTS = {"ssl": 993, "starttls": 143, "none": 143}


@node("mail.read", name="Read Mail", category="Mail", icon="inbox", color="#2e86c1",
      tool=Tool("read_email", "Read email messages from the mailbox (IMAP): subject, sender, "
                "recipients, date, text and attachment names. 'search' takes IMAP search "
                "criteria, e.g. UNSEEN, or FROM \"anna@example.com\" SINCE 1-Jan-2025, or "
                "SUBJECT \"invoice\"; 'folder' is the mailbox folder (INBOX unless told)."))
class ReadMail(Node):
    """Reads mails from an IMAP mailbox folder: those matching the search
    criteria (default: unseen ones), newest first, at most max_messages. Sends
    one message per mail (mode 'each', the incoming message is not sent on)
    or one message with the list (mode 'list'). Attachments are saved into
    attachments_folder if one is set."""

    concurrency = 1  # two reads of one mailbox at once would both see the same unseen mails

    host = Param(str, "IMAP server host name", default="localhost", allow=CUSTOM | MESSAGE,
                 group="connection")
    port = Param(int, "IMAP port; 0: the usual one for the TLS mode (993 for ssl, else 143)",
                 default=0, allow=CUSTOM | MESSAGE, group="connection")
    tls = Param(str, "ssl: TLS from the start (port 993); starttls: upgrade a plain "
                "connection (port 143); none: no encryption, the password crosses the "
                "network readable (only for a server on this machine)",
                choices=["ssl", "starttls", "none"], default="ssl", allow=CUSTOM,
                group="connection")
    username = Param(str, "IMAP user name", default="", allow=CUSTOM | MESSAGE, group="connection")
    password = Param("secret", "IMAP password: an environment variable or keyring entry",
                     optional=True, group="connection")
    folder = Param(str, "Mailbox folder to read, e.g. INBOX or Archive/2025", default="INBOX",
                   allow=AI | CUSTOM | MESSAGE)
    search = Param(str, "IMAP search criteria (RFC 3501): UNSEEN, ALL, FROM \"a@example.com\", "
                   "SUBJECT \"invoice\", SINCE 1-Jan-2025, several joined by spaces (all must "
                   "match)", default="UNSEEN", allow=AI | CUSTOM | MESSAGE)
    max_messages = Param(int, f"Most mails read at once (the newest ones), 1-{MAX_MESSAGES_CEILING}",
                         default=DEFAULT_MAX_MESSAGES, allow=AI | CUSTOM | MESSAGE)
    mark_as_seen = Param(bool, "Mark the mails read as seen, so that an UNSEEN search does not "
                         "find them again", default=True, allow=CUSTOM)
    mode = Param(str, "each: one message per mail (payload: the mail); list: one message whose "
                 "payload is the list of mails", choices=["each", "list"], default="each",
                 allow=CUSTOM)
    attachments_folder = Param(str, "Folder to save attachments in (created if missing; a "
                               "relative one is inside the 'files' folder of Switchboard's data "
                               "folder); empty: attachments are listed but not saved",
                               default="", allow=CUSTOM)
    max_attachment_bytes = Param(int, "Largest attachment saved; a bigger one is listed with "
                                 "'skipped' instead", default=DEFAULT_MAX_ATTACHMENT_BYTES,
                                 allow=CUSTOM, group="advanced")
    max_message_bytes = Param(int, "Largest mail downloaded; of a bigger one only the headers "
                              "are read", default=DEFAULT_MAX_MESSAGE_BYTES, allow=CUSTOM,
                              group="advanced")
    max_body_chars = Param(int, "Characters kept of the text and of the HTML body; the rest is "
                           "cut", default=DEFAULT_MAX_BODY_CHARS, allow=CUSTOM, group="advanced")
    timeout_seconds = Param(float, "Time limit of each network operation", default=DEFAULT_TIMEOUT,
                            allow=CUSTOM, group="advanced")

    mails = Output("json", "Each: one mail {subject, from, to, cc, date, text, html, "
                   "message_id, attachments: [{filename, path, size, content_type}]}; "
                   "list (and as a tool): the list of them")

    @classmethod
    def check(cls, params):
        problems = []

        def value(name: str) -> Any:
            p = params.get(name)
            return p.value if p is not None and getattr(p.scope, "value", p.scope) == "custom" \
                else None

        port = value("port")
        if isinstance(port, int) and not 0 <= port < 65536:
            problems.append(("port", "port must be 0 (the usual one) or 1-65535"))
        for name, low in (("max_messages", 1), ("max_attachment_bytes", 0),
                          ("max_message_bytes", 1), ("max_body_chars", 0)):
            v = value(name)
            if isinstance(v, int) and v < low:
                problems.append((name, f"{name} must be at least {low}"))
        v = value("max_messages")
        if isinstance(v, int) and v > MAX_MESSAGES_CEILING:
            problems.append(("max_messages", f"max_messages must be at most {MAX_MESSAGES_CEILING}"))
        t = value("timeout_seconds")
        if isinstance(t, (int, float)) and t <= 0:
            problems.append(("timeout_seconds", "timeout_seconds must be more than 0"))
        for name in ("search", "folder"):
            v = value(name)
            if isinstance(v, str):
                try:
                    _safe_text(name, v, MAX_CRITERIA_CHARS if name == "search" else
                               MAX_FOLDER_CHARS)
                except NodeConfigError as exc:
                    problems.append((name, str(exc)))
        return problems

    async def on_message(self, msg: Message) -> Any:
        s = self._settings(msg)
        self.show_status(f"reading {s['folder']}…", "blue", "running")
        mails = await self.run_blocking(_read_mailbox, s)
        n = len(mails)
        self.show_status(f"{n} mail{'s' * (n != 1)} read" if n else
                         f"no mail matches {_quote(s['search'], 40)}", "green", "done")
        if s["mode"] == "list" or msg.get(MESSAGE_TYPE) == TOOL_REQUEST:
            # A tool call answers with the list, whatever the mode.
            self.mails.set(msg, mails)
            return None
        for mail in mails:
            out = deep_copy(msg)
            out["_msgid"] = new_msgid()
            self.mails.set(out, mail)
            self.send(out)
        return DROP

    def _settings(self, msg: Message) -> dict[str, Any]:
        tls = self.tls.get(msg) or "ssl"
        port = _int("port", self.port.get(msg), 0, 65535) or DEFAULT_PORTS[tls]
        username = str(self.username.get(msg) or "")
        password = self.password.get(msg)
        if password is not None:
            # With the user name, so that an AUTH PLAIN token echoed in an
            # error is masked whole.
            register_secret(password, username or None)
        folder = _safe_text("folder", self.folder.get(msg) or "INBOX", MAX_FOLDER_CHARS)
        search = _safe_text("search", self.search.get(msg) or "ALL", MAX_CRITERIA_CHARS)
        folder_setting = str(self.attachments_folder.get(msg) or "").strip()
        attachments = None
        if folder_setting:
            from nodes.files.paths import base_folder

            attachments = base_folder(folder_setting)
        timeout = self.timeout_seconds.get(msg)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise NodeConfigError("timeout_seconds must be more than 0")
        return {
            "host": str(self.host.get(msg) or "localhost"),
            "port": port,
            "tls": tls,
            "username": username,
            "password": password,
            "folder": folder,
            "search": search,
            "max_messages": _int("max_messages", self.max_messages.get(msg), 1,
                                 MAX_MESSAGES_CEILING),
            "mark_as_seen": bool(self.mark_as_seen.get(msg)),
            "mode": self.mode.get(msg) or "each",
            "attachments_folder": attachments,
            "max_attachment_bytes": _int("max_attachment_bytes",
                                         self.max_attachment_bytes.get(msg), 0, None),
            "max_message_bytes": _int("max_message_bytes", self.max_message_bytes.get(msg), 1,
                                      None),
            "max_body_chars": _int("max_body_chars", self.max_body_chars.get(msg), 0, None),
            "timeout": float(timeout),
        }


# -- checks ------------------------------------------------------------------------

def _int(name: str, value: Any, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise NodeConfigError(f"{name}: {_quote(repr(value))} is not a whole number")
    value = int(value)
    if value < low or (high is not None and value > high):
        span = f"{low}-{high}" if high is not None else f"at least {low}"
        raise NodeConfigError(f"{name} must be {span} (got {value})")
    return value


def _safe_text(name: str, value: Any, limit: int) -> str:
    """Text that goes into an IMAP command line: one line (a line break would
    start a command of the caller's choosing: DELETE INBOX), no NUL, bounded."""
    text = str(value)
    if len(text) > limit:
        raise NodeConfigError(f"{name} is {len(text)} characters; the most it may be is {limit}")
    if any(c in text for c in "\r\n\0"):
        raise NodeConfigError(f"{name} must be one line (no line breaks)")
    if not text.strip():
        raise NodeConfigError(f"{name} is empty")
    return text.strip()


def _quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# -- IMAP (runs in a worker thread) ---------------------------------------------------

def _read_mailbox(s: dict[str, Any]) -> list[dict[str, Any]]:
    where = f"IMAP {s['host']}:{s['port']}"
    client = _connect(s, where)
    try:
        _login(client, s, where)
        typ, data = client.select(_mailbox_name(s["folder"]), readonly=not s["mark_as_seen"])
        if typ != "OK":
            raise NodeConfigError(f"folder '{_quote(s['folder'])}': cannot open it "
                                  f"({_server_text(data)})")
        uids = _search(client, s["search"])
        uids = uids[-s["max_messages"]:][::-1]  # the newest ones, newest first
        mails = [_fetch_one(client, uid, s) for uid in uids]
        if s["mark_as_seen"] and uids:
            typ, data = client.uid("STORE", b",".join(uids), "+FLAGS.SILENT", r"(\Seen)")
            if typ != "OK":
                raise NodeConfigError(f"{where}: could not mark the mails as seen "
                                      f"({_server_text(data)})")
        return mails
    except imaplib.IMAP4.abort as exc:
        raise NodeConfigError(f"{where}: the connection broke ({redact(str(exc))})") from None
    except imaplib.IMAP4.error as exc:
        raise NodeConfigError(f"{where}: {redact(str(exc))}") from None
    except TimeoutError:
        raise NodeConfigError(f"{where}: no answer within timeout_seconds={s['timeout']:g}") \
            from None
    except OSError as exc:
        raise NodeConfigError(f"{where}: {exc.strerror or exc}") from None
    finally:
        try:
            client.logout()
        except Exception:  # noqa: BLE001 - the connection may already be gone
            pass


def _connect(s: dict[str, Any], where: str) -> imaplib.IMAP4:
    try:
        if s["tls"] == "ssl":
            return imaplib.IMAP4_SSL(s["host"], s["port"], ssl_context=ssl.create_default_context(),
                                     timeout=s["timeout"])
        client = imaplib.IMAP4(s["host"], s["port"], timeout=s["timeout"])
        if s["tls"] == "starttls":
            try:
                client.starttls(ssl.create_default_context())
            except Exception:
                with contextlib.suppress(OSError):
                    client.shutdown()  # the socket may be half wrapped, or closed already
                raise
        return client
    except ssl.SSLError as exc:
        raise NodeConfigError(f"{where}: TLS failed ({exc.reason or exc}); check the tls "
                              "mode and port (ssl: 993, starttls: 143)") from None
    except imaplib.IMAP4.error as exc:
        raise NodeConfigError(f"{where}: {exc}") from None
    except TimeoutError:
        raise NodeConfigError(f"{where}: cannot connect within timeout_seconds="
                              f"{s['timeout']:g}") from None
    except OSError as exc:
        raise NodeConfigError(f"{where}: cannot connect ({exc.strerror or exc}); is an IMAP "
                              "server running there?") from None


def _login(client: imaplib.IMAP4, s: dict[str, Any], where: str) -> None:
    if not s["username"]:
        raise NodeConfigError("username: an IMAP server needs a user name to log in")
    if s["password"] is None:
        raise NodeConfigError("password: set the IMAP password (an environment variable or "
                              "keyring entry)")
    try:
        client.login(s["username"], s["password"])
    except imaplib.IMAP4.error as exc:
        raise NodeConfigError(f"{where}: login failed for user '{_quote(s['username'])}' "
                              f"({redact(_decode(exc))})") from None


def _search(client: imaplib.IMAP4, criteria: str) -> list[bytes]:
    try:
        if criteria.isascii():
            typ, data = client.uid("SEARCH", criteria)
        else:
            typ, data = client.uid("SEARCH", "CHARSET", "UTF-8", criteria.encode("utf-8"))
    except imaplib.IMAP4.error as exc:
        raise NodeConfigError(f"search: the server refused '{_quote(criteria)}' "
                              f"({_decode(exc)})") from None
    if typ != "OK":
        raise NodeConfigError(f"search: the server refused '{_quote(criteria)}' "
                              f"({_server_text(data)})")
    found: list[bytes] = []
    for chunk in data:
        if isinstance(chunk, bytes):
            found.extend(chunk.split())
    return sorted(set(found), key=int)


def _fetch_one(client: imaplib.IMAP4, uid: bytes, s: dict[str, Any]) -> dict[str, Any]:
    typ, data = client.uid("FETCH", uid, "(RFC822.SIZE)")
    size = _size_of(data)
    too_big = size is not None and size > s["max_message_bytes"]
    part = "BODY.PEEK[HEADER]" if too_big else "BODY.PEEK[]"
    typ, data = client.uid("FETCH", uid, f"({part})")
    raw = next((d[1] for d in data if isinstance(d, tuple) and len(d) > 1), None)
    if typ != "OK" or raw is None:
        raise NodeConfigError(f"could not fetch mail {uid.decode()} ({_server_text(data)})")
    if not too_big and len(raw) > s["max_message_bytes"]:
        # The size the server announced was wrong: parse no more than the headers.
        raw, too_big = raw.split(b"\r\n\r\n", 1)[0][:s["max_message_bytes"]], True
    mail = _parse(raw, s, uid.decode())
    mail["size"] = size if size is not None else len(raw)
    if too_big:
        mail["skipped"] = (f"the mail is {mail['size']} bytes, more than max_message_bytes="
                           f"{s['max_message_bytes']}; only its headers were read")
    return mail


def _size_of(data: list[Any]) -> int | None:
    for chunk in data:
        line = chunk[0] if isinstance(chunk, tuple) else chunk
        if isinstance(line, bytes):
            m = re.search(rb"RFC822\.SIZE (\d+)", line)
            if m:
                return int(m.group(1))
    return None


def _server_text(data: Any) -> str:
    if isinstance(data, list):
        data = b" ".join(d for d in data if isinstance(d, bytes))
    return _quote(redact(_decode(data)))


def _decode(value: Any) -> str:
    if isinstance(value, BaseException) and value.args:
        value = value.args[0]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _mailbox_name(folder: str) -> str:
    """A folder name as IMAP spells it: modified UTF-7 (RFC 3501 5.1.3),
    always quoted (imaplib sends arguments as they are)."""
    folder = _utf7_imap(folder)
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _utf7_imap(text: str) -> str:
    import base64

    out, run = [], []

    def flush() -> None:
        if run:
            b = base64.b64encode("".join(run).encode("utf-16-be")).decode("ascii")
            out.append("&" + b.rstrip("=").replace("/", ",") + "-")
            run.clear()

    for ch in text:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            run.append(ch)
    flush()
    return "".join(out)


# -- parsing -----------------------------------------------------------------------

def _parse(raw: bytes, s: dict[str, Any], uid: str) -> dict[str, Any]:
    mail = message_from_bytes(raw, policy=policy.default)
    assert isinstance(mail, EmailMessage)
    limit = s["max_body_chars"]
    text, html = _body(mail, "plain", limit), _body(mail, "html", limit)
    return {
        "uid": uid,
        "subject": _header(mail, "Subject"),
        "from": _header(mail, "From"),
        "to": _addresses(mail, "To"),
        "cc": _addresses(mail, "Cc"),
        "date": _date(mail),
        "message_id": _header(mail, "Message-ID"),
        "text": text,
        "html": html,
        "attachments": _attachments(mail, s),
    }


def _header(mail: EmailMessage, name: str) -> str:
    try:
        value = mail.get(name)
    except Exception:  # noqa: BLE001 - a malformed header is shown raw, not fatal
        value = next((v for k, v in mail.raw_items() if k.lower() == name.lower()), "")
    return _quote(" ".join(str(value or "").split()), 2000)


def _addresses(mail: EmailMessage, name: str) -> list[str]:
    try:
        header = mail.get(name)
        if header is None:
            return []
        addresses = getattr(header, "addresses", None)
        if addresses is not None:
            return [str(a) for a in addresses[:MAX_ATTACHMENTS * 10]]
        return [str(header)]
    except Exception:  # noqa: BLE001
        return [_header(mail, name)]


def _date(mail: EmailMessage) -> str | None:
    raw = mail.get("Date")
    if raw is None:
        return None
    try:
        dt = getattr(raw, "datetime", None) or parsedate_to_datetime(str(raw))
        return dt.isoformat() if dt is not None else None
    except (TypeError, ValueError, IndexError):
        return None


def _body(mail: EmailMessage, kind: str, limit: int) -> str:
    try:
        part = mail.get_body(preferencelist=(kind,))
        if part is None:
            return ""
        content = part.get_content()
    except Exception:  # noqa: BLE001 - an undecodable part: no text rather than no mail
        return ""
    if isinstance(content, bytes):
        content = content.decode("utf-8", "replace")
    content = content.replace("\r\n", "\n")  # as stored by the server: CRLF lines
    if len(content) > limit:
        return content[:limit] + f"\n[… cut at max_body_chars={limit}]"
    return content


def _attachments(mail: EmailMessage, s: dict[str, Any]) -> list[dict[str, Any]]:
    folder: Path | None = s["attachments_folder"]
    out = []
    for i, part in enumerate(mail.iter_attachments()):
        if i >= MAX_ATTACHMENTS:
            out.append({"filename": "", "path": None, "size": 0, "content_type": "",
                        "skipped": f"more than {MAX_ATTACHMENTS} attachments; the rest are "
                                   "not read"})
            break
        name = _safe_filename(part.get_filename() or "", i)
        try:
            payload = part.get_payload(decode=True) or b""
        except Exception:  # noqa: BLE001
            payload = b""
        entry: dict[str, Any] = {"filename": name, "path": None, "size": len(payload),
                                 "content_type": part.get_content_type()}
        if len(payload) > s["max_attachment_bytes"]:
            entry["skipped"] = (f"{len(payload)} bytes, more than max_attachment_bytes="
                                f"{s['max_attachment_bytes']}")
        elif folder is not None:
            entry["path"] = str(_save(folder, name, payload))
        out.append(entry)
    return out


_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]")


def _safe_filename(name: str, index: int) -> str:
    """The last path part of what the mail claims, without characters that
    mean something to a file system; never empty, '.' or '..'."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name).strip().lstrip(".")
    if len(name) > 150:
        stem, dot, ext = name.rpartition(".")
        name = (stem[:140] + dot + ext[:9]) if dot and len(ext) < 10 else name[:150]
    return name or f"attachment-{index + 1}"


def _save(folder: Path, name: str, data: bytes) -> Path:
    from nodes.files.paths import PathRefused, confined_path

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NodeConfigError(f"attachments_folder: cannot create {folder} "
                              f"({exc.strerror or exc})") from None
    real_folder = Path(os.path.realpath(folder))
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = name, "", ""
    for n in range(MAX_NAME_TRIES):
        candidate = name if n == 0 else f"{stem}-{n}{dot}{ext}"
        # The name was cleaned already; this is the second lock. A name taken
        # by a link that leads out of the folder is passed over like a taken one.
        try:
            path = confined_path(folder, candidate, param="attachments_folder")
        except PathRefused:
            continue
        if path.parent != real_folder:
            continue  # a link to a file in a subfolder: not where we write
        try:
            # 'x': never overwrite a file, ours or anyone's; O_NOFOLLOW-like
            # safety comes from the exclusive create (a planted symlink exists).
            with open(path, "xb") as f:
                f.write(data)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise NodeConfigError(f"attachments_folder: cannot write {path.name} "
                                  f"({exc.strerror or exc})") from None
    raise NodeConfigError(f"attachments_folder: no free file name like '{_quote(name)}' "
                          f"({MAX_NAME_TRIES} tried); empty the folder")

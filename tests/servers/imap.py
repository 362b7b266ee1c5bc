"""A throw-away Dovecot IMAP server on loopback for the mail.read tests.

Everything lives in one temporary folder: the config, base_dir (sockets,
master.pid), the log, a passwd-file with one user and a plain password, and
the user's maildir. Dovecot runs in the foreground as a child of the test
(``dovecot -F -c CONF``) and is stopped with SIGTERM, as ``doveadm stop``
does (then SIGKILL if it does not go), when the test ends.

Run as root (CI, containers), Dovecot drops its login and internal processes
to its packaged users (``dovenull``, ``dovecot``) and opens the mail as
``nobody``: it refuses mail access as uid 0. Run as an ordinary user, every
process stays that user (Dovecot's "rootless" setup).

``python -m tests.servers.imap`` starts one and prints how to reach it, for
trying mail.read by hand.
"""

from __future__ import annotations

import imaplib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
#: How long Dovecot may take to start or stop (a bound on a wait, not a
#: timing assertion: it is ready as soon as it accepts a login).
READY_WAIT = 20.0


class DovecotUnavailable(RuntimeError):
    """Dovecot is not installed or cannot run here; the text says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available() -> str | None:
    """None when Dovecot can be tried, else the reason it cannot."""
    if not os.path.exists(DOVECOT):
        return f"{DOVECOT} is not installed (apt-get install dovecot-imapd)"
    if not os.path.exists("/usr/lib/dovecot/imap"):
        return "Dovecot's IMAP server is not installed (apt-get install dovecot-imapd)"
    return None


class ImapServer:
    """``with ImapServer() as imap:`` a running Dovecot; ``imap.port``,
    ``imap.username``, ``imap.password``, ``imap.append(raw)``,
    ``imap.client()`` for a logged-in imaplib client."""

    def __init__(self, username: str = "robot", password: str = "imap-test-password-42", *,
                 tls: bool = False) -> None:
        problem = available()
        if problem:
            raise DovecotUnavailable(problem)
        self.username = username
        self.password = password
        self.host = "127.0.0.1"
        self.port = free_port()
        #: With ``tls``: a self-signed certificate for 127.0.0.1 (``self.cert``,
        #: trust it with SSL_CERT_FILE), STARTTLS on ``port`` and implicit TLS
        #: on ``tls_port``.
        self.tls = tls
        self.tls_port = free_port() if tls else 0
        self.dir = Path(tempfile.mkdtemp(prefix="switchboard-dovecot-"))
        self.proc: subprocess.Popen | None = None

    # -- setup --------------------------------------------------------------------
    def _write_config(self) -> Path:
        d = self.dir
        root = os.geteuid() == 0
        if root:
            mail_user = pwd.getpwnam("nobody")
            service_users = ""  # the packaged dovecot / dovenull users
        else:
            mail_user = pwd.getpwuid(os.geteuid())
            me = mail_user.pw_name
            service_users = (f"default_login_user = {me}\n"
                             f"default_internal_user = {me}\n")
        uid, gid = mail_user.pw_uid, mail_user.pw_gid
        for sub in ("run", "state", "mail", "home"):
            (d / sub).mkdir()
        # The mail and home folders belong to the mail user; the rest must be
        # reachable by Dovecot's unprivileged processes.
        os.chmod(d, 0o755)
        for sub in ("mail", "home"):
            os.chown(d / sub, uid, gid)
        (d / "passwd").write_text(
            f"{self.username}:{{PLAIN}}{self.password}:{uid}:{gid}::{d / 'home'}::\n",
            encoding="utf-8")
        ssl = "ssl = no"
        if self.tls:
            self.cert, key = d / "cert.pem", d / "key.pem"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", str(key), "-out", str(self.cert)],
                           check=True, capture_output=True, timeout=READY_WAIT)
            ssl = f"ssl = yes\nssl_cert = <{self.cert}\nssl_key = <{key}"
        conf = d / "dovecot.conf"
        conf.write_text(f"""\
instance_name = switchboard-test-{self.port}
base_dir = {d / 'run'}
state_dir = {d / 'state'}
{service_users}protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
first_valid_uid = 1
log_path = {d / 'dovecot.log'}
mail_location = maildir:{d / 'mail'}/%u
mail_uid = {uid}
mail_gid = {gid}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {d / 'passwd'}
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {d / 'passwd'}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
  }}
  chroot =
}}
service anvil {{
  chroot =
  # Nobody may reach the auth penalty tracker, so Dovecot turns it off: else
  # one test's wrong password delays the next login from 127.0.0.1 by 2-15 s.
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service auth {{
  user = $default_internal_user
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
""", encoding="utf-8")
        return conf

    def start(self) -> ImapServer:
        self.conf = self._write_config()
        self.proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.conf)], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_WAIT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                self._cleanup()
                raise DovecotUnavailable(f"dovecot exited with {self.proc.returncode}: "
                                         f"{out.strip()} {self.log()}".strip())
            try:
                with self.client():
                    return self
            except (OSError, imaplib.IMAP4.error) as exc:
                last = exc
                time.sleep(0.05)
        self.stop()
        raise DovecotUnavailable(f"dovecot did not accept a login within {READY_WAIT:g} s "
                                 f"({last}); its log: {self.log()}")

    def log(self) -> str:
        try:
            return (self.dir / "dovecot.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # -- use ------------------------------------------------------------------------
    def client(self) -> imaplib.IMAP4:
        c = imaplib.IMAP4(self.host, self.port, timeout=10)
        try:
            c.login(self.username, self.password)
        except Exception:
            c.shutdown()
            raise
        return c

    def append(self, raw: bytes, folder: str = "INBOX", flags: str = "") -> None:
        """Deliver one mail (RFC 5322 bytes) into an existing folder (as IMAP
        spells it: quoted, modified UTF-7), as an MTA would."""
        with self.client() as c:
            typ, data = c.append(folder, flags or None, None, raw)
            assert typ == "OK", data

    def flags(self, folder: str = "INBOX") -> list[str]:
        """The flags of every message in the folder, in order."""
        with self.client() as c:
            c.select(folder, readonly=True)
            typ, data = c.fetch("1:*", "(FLAGS)")
            if typ != "OK" or data == [None]:
                return []
            return [d.decode() for d in data if isinstance(d, bytes)]

    # -- teardown ---------------------------------------------------------------------
    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # SIGTERM to the master (our child, in the foreground) is what
            # `doveadm stop` sends, without the second process.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(READY_WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        self._cleanup()

    def _cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ImapServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _main() -> None:
    import argparse
    from email.message import EmailMessage

    parser = argparse.ArgumentParser(description="A throw-away Dovecot on 127.0.0.1 with one "
                                     "user and one unseen mail in INBOX, until Ctrl+C")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    args = parser.parse_args()
    # SIGTERM cleans up like Ctrl+C: Dovecot stopped, its folder deleted.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = ImapServer()
    if args.port:
        server.port = args.port
    with server:
        mail = EmailMessage()
        mail["From"] = "Ada <ada@example.com>"
        mail["To"] = f"{server.username}@example.com"
        mail["Subject"] = "Welcome to the test mailbox"
        mail["Date"] = "Mon, 03 Mar 2025 09:00:00 +0000"
        mail.set_content("This mail was put here by tests/servers/imap.py.\n")
        mail.add_attachment(b"a,b\n1,2\n", maintype="text", subtype="csv", filename="numbers.csv")
        server.append(bytes(mail))
        print(f"Dovecot on 127.0.0.1:{server.port}, user {server.username!r}, one unseen mail "
              "in INBOX. In another shell:")
        print(f"  export IMAP_PASSWORD={server.password}")
        print("Ctrl+C stops it and deletes everything.", flush=True)
        try:
            server.proc.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    _main()

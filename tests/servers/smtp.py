"""A real SMTP server (aiosmtpd) on loopback that keeps what it receives, with
optional AUTH (plain over an unencrypted loopback connection)."""

from __future__ import annotations

import socket
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Handler:
    def __init__(self, box: SmtpServer) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.box.received.append({
            "mail_from": envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "message": message_from_bytes(envelope.original_content or envelope.content),
            "login": getattr(session, "auth_data", None),
        })
        return "250 Message accepted for delivery"


class SmtpServer:
    def __init__(self, username: str | None = None, password: str | None = None) -> None:
        self.received: list[dict[str, Any]] = []
        self.logins: list[str] = []
        self.port = free_port()
        kwargs: dict[str, Any] = {}
        if username is not None:
            def authenticator(server, session, envelope, mechanism, auth_data):
                ok = (isinstance(auth_data, LoginPassword)
                      and auth_data.login.decode() == username
                      and auth_data.password.decode() == password)
                if ok:
                    self.logins.append(username)
                return AuthResult(success=ok)

            kwargs = {"authenticator": authenticator, "auth_require_tls": False,
                      "auth_required": True}
        self.controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port,
                                     **kwargs)

    @property
    def messages(self) -> list[Message]:
        return [r["message"] for r in self.received]

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.controller.stop()

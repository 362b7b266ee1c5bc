"""Where a browser session may go.

A URL that the AI (or a message) picks is checked here before the browser
loads it, and again by the session's guard for every navigation that
follows (a redirect, a clicked link, a script): http and https to the
designer's ``allowed_hosts`` (as the HTTP Request node: empty means any
host for a plain message and none for an agent's tool call), ``file://``
only under the designer's ``file_base_dir``, and nothing else but
``about:blank``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from runtime.node import NodeConfigError

MAX_URL_CHARS = 8192
MAX_HOSTS = 200
QUOTE_LIMIT = 200


def quote(text: Any, limit: int = QUOTE_LIMIT) -> str:
    """A value as an error may quote it: one line, at most ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


def parse_hosts(value: Any, param: str = "allowed_hosts") -> tuple[str, ...]:
    """The host entries of an ``allowed_hosts`` setting: text with entries
    separated by commas (or lines), or a list. Each is ``host``,
    ``host:port`` or ``*.domain`` (its subdomains), lowercased."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = [v for line in value.splitlines() for v in line.split(",")]
    elif isinstance(value, list):
        items = value
    else:
        raise NodeConfigError(f"{param}: a list of host names, or one host per line")
    hosts = []
    for item in items:
        if not isinstance(item, str):
            raise NodeConfigError(f"{param}: '{quote(item)}' is not a host name")
        entry = item.strip().lower()
        if not entry:
            continue
        if "/" in entry or "@" in entry or " " in entry:
            raise NodeConfigError(f"{param}: '{quote(entry)}' is not a host name or host:port "
                                  "(no scheme, path or user)")
        hosts.append(entry)
    if len(hosts) > MAX_HOSTS:
        raise NodeConfigError(f"{param}: {len(hosts)} hosts, more than the {MAX_HOSTS} allowed")
    return tuple(hosts)


def _host_port(netloc_host: str | None, port: int | None, scheme: str) -> tuple[str, int]:
    default = 443 if scheme == "https" else 80
    return (netloc_host or "").lower().rstrip("."), port or default


def host_allowed(url_host: str, url_port: int, scheme: str, allowed: tuple[str, ...]) -> bool:
    for entry in allowed:
        if entry.startswith("*."):
            domain = entry[2:]
            if url_host.endswith("." + domain):
                return True
            continue
        try:
            parts = urlsplit("//" + entry)
            host, port = (parts.hostname or "").rstrip("."), parts.port
        except ValueError:
            continue
        if host == url_host and (port is None or port == url_port):
            return True
    return False


@dataclass(frozen=True)
class UrlPolicy:
    """The rules one goto (or open) gives its session's navigations."""

    allowed_hosts: tuple[str, ...] = ()
    file_base: Path | None = None
    #: An agent's tool call: an empty allow-list allows no host, not every one.
    for_tool: bool = False

    @property
    def restrictive(self) -> bool:
        return bool(self.allowed_hosts) or self.file_base is not None or self.for_tool

    def problem(self, url: str) -> str | None:
        """Why ``url`` may not be loaded, or None when it may."""
        try:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            if scheme in ("http", "https"):
                host, port = _host_port(parts.hostname, parts.port, scheme)
            else:
                host, port = "", 0
        except ValueError as exc:
            return f"'{quote(url)}' is not a valid URL ({exc})"
        if scheme in ("http", "https"):
            if not host:
                return f"'{quote(url)}' names no host"
            if not self.allowed_hosts:
                if self.for_tool:
                    return ("allowed_hosts is empty: as an agent's tool this node opens only the "
                            "hosts the designer lists in allowed_hosts, and none is listed")
                return None
            if not host_allowed(host, port, scheme, self.allowed_hosts):
                return (f"host '{quote(host)}' is not in allowed_hosts "
                        f"({quote(', '.join(self.allowed_hosts))}); only the designer can add "
                        "a host there")
            return None
        if scheme == "file":
            if self.file_base is None:
                return ("file URLs are refused: file_base_dir is not set (the designer "
                        "sets the folder a file URL may read)")
            path = Path(unquote(parts.path))
            if not _inside(path, self.file_base):
                return f"{quote(path)} is outside file_base_dir ({quote(self.file_base)})"
            return None
        if url == "about:blank":
            return None
        return (f"'{quote(url, 60)}': only http, https and file URLs can be opened "
                f"(not '{quote(scheme, 20) or 'no scheme'}')")


def make_policy(hosts: Any, file_base: Any, for_tool: bool = False) -> UrlPolicy:
    base = None
    if file_base:
        base = Path(os.path.expanduser(str(file_base))).resolve()
        if not base.is_dir():
            raise NodeConfigError(f"file_base_dir: {quote(base)} is not a folder")
    return UrlPolicy(parse_hosts(hosts), base, for_tool)


def check_url(url: Any, policy: UrlPolicy, param: str = "url") -> str:
    """The URL as text, or a NodeConfigError naming the param."""
    if url is None or url == "":
        raise NodeConfigError(f"{param}: no URL given")
    if not isinstance(url, str):
        raise NodeConfigError(f"{param}: a URL is text, not {type(url).__name__}")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise NodeConfigError(f"{param}: the URL is {len(url)} characters, more than the "
                              f"{MAX_URL_CHARS} allowed")
    problem = policy.problem(url)
    if problem:
        raise NodeConfigError(f"{param}: {problem}")
    return url


def _inside(path: Path, base: Path) -> bool:
    try:
        path.resolve().relative_to(base)
    except (ValueError, OSError):
        return False
    return True


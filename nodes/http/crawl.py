"""``http.crawl``: read a website page by page from a start URL, following
its links on the same site, and return each page's title, text and links.

Long by nature (a site of 50 pages at a polite pace takes a while), so as
an agent's tool it runs in the background by default (issue 14): the call
answers at once with a tracking id and the agent hears of the pages when
the crawl ends. It reports its progress ("page 2 of 5") as it goes.

Where it may go is the designer's: http and https to ``allowed_hosts``
(empty: any host for a plain message, none for an agent's tool call, as
the HTTP Request node), ``file://`` only under ``file_base_dir``; every
link followed is checked the same way, and it never leaves the start
page's host (or folder, with ``same_folder``). Every size is bounded:
pages, bytes per page, text kept per page, links per page."""

from __future__ import annotations

import asyncio
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from runtime.message import MESSAGE_TYPE, TOOL_REQUEST
from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node

from ..browser.policy import check_url, make_policy, quote

MAX_PAGES_LIMIT = 500
MAX_PAGE_BYTES = 2 * 1024 * 1024
TEXT_PER_PAGE = 4000
LINKS_PER_PAGE = 200
MAX_DELAY = 60.0
DEFAULT_TIMEOUT = 20.0
CLIENT_KEY = "http.crawl.client"


class _Page(HTMLParser):
    """Title, visible text and links of one HTML page (the standard
    library's parser: no dependency, and it never runs the page's code)."""

    SKIP = {"script", "style", "noscript", "template", "svg"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.links: list[str] = []
        self._text: list[str] = []
        self._size = 0
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag == "a" and len(self.links) < LINKS_PER_PAGE * 4:
            href = dict(attrs).get("href")
            if href:
                self.links.append(href.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
            return
        words = " ".join(data.split())
        if words and self._size < TEXT_PER_PAGE:
            self._text.append(words)
            self._size += len(words) + 1

    @property
    def text(self) -> str:
        text = " ".join(self._text)
        return text if len(text) <= TEXT_PER_PAGE else text[:TEXT_PER_PAGE] + "…"


def _bounded(value: Any, name: str, low: float, high: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise NodeConfigError(f"{name}: '{quote(value)}' is not a number") from None
    if not low <= number <= high:
        raise NodeConfigError(f"{name}: {number:g} is outside {low:g} to {high:g}")
    return number


def _scope_of(url: str, same_folder: bool) -> tuple[str, str, str]:
    """(scheme, host, path prefix) a followed link must share with the start."""
    parts = urlsplit(url)
    prefix = parts.path.rsplit("/", 1)[0] + "/" if same_folder else "/"
    return parts.scheme.lower(), (parts.netloc or "").lower(), prefix


@node("http.crawl", name="HTTP Crawl", category="HTTP", icon="globe", color="#3a9d8f",
      tool=Tool("crawl_site", "Crawl a website from a start URL, following its links on the "
                "same site, and return each page's title and text. Runs in the background: "
                "the call answers at once with a tracking id", background=True))
class HttpCrawl(Node):
    """Reads a website page by page: the start URL, then the links it finds
    on the same site (breadth first), up to max_pages. Sends one message at
    the end with ``payload``: a list of {url, title, text, links} per page,
    and ``failed``: the pages that could not be read and why. As an agent's
    tool it runs in the background (the agent gets a tracking id at once)
    and reports "page 2 of 5" as it goes."""

    url = Param(str, "The page to start from (http, https, or file:// under file_base_dir)",
                scope=AI, allow=AI | CUSTOM | MESSAGE)
    max_pages = Param(int, f"Most pages read (1 to {MAX_PAGES_LIMIT})", default=20,
                      allow=AI | CUSTOM | MESSAGE)
    same_folder = Param(bool, "Follow only links under the start page's folder (off: the "
                        "whole site)", default=True, allow=CUSTOM)
    delay_seconds = Param(float, "Pause between two pages, to be polite to the site",
                          default=0.2, allow=CUSTOM, group="advanced")
    allowed_hosts = Param(str, "Hosts the crawl may read, comma-separated (example.com, "
                          "127.0.0.1:8000, *.example.org). Empty: any host for plain messages, "
                          "none as an agent's tool", default="", allow=CUSTOM)
    file_base_dir = Param(str, "Folder that file:// URLs may read from; empty: file URLs are "
                          "refused", default="", allow=CUSTOM, group="advanced")
    timeout_seconds = Param(float, "Longest wait for one page", default=DEFAULT_TIMEOUT,
                            allow=CUSTOM, group="advanced")
    pages = Output("json", "One {url, title, text, links} per page read", path="payload")
    failed = Output("json", "Pages that could not be read: {url, error}")
    count = Output(int, "How many pages were read")

    async def on_message(self, msg: Any) -> None:
        as_tool = msg.get(MESSAGE_TYPE) == TOOL_REQUEST
        policy = make_policy(self.allowed_hosts.get(), self.file_base_dir.get(), for_tool=as_tool)
        start = check_url(self.url.get(msg), policy)
        limit = int(_bounded(self.max_pages.get(msg), "max_pages", 1, MAX_PAGES_LIMIT))
        delay = _bounded(self.delay_seconds.get(), "delay_seconds", 0, MAX_DELAY)
        timeout = _bounded(self.timeout_seconds.get(), "timeout_seconds", 0.1, 600)
        scope = _scope_of(start, bool(self.same_folder.get()))

        queue, seen = [urldefrag(start)[0]], {urldefrag(start)[0]}
        pages: list[dict[str, Any]] = []
        failed: list[dict[str, str]] = []
        while queue and len(pages) + len(failed) < limit:
            url = queue.pop(0)
            done = len(pages) + len(failed)
            self.progress(done / limit, f"page {done + 1} of {min(limit, done + 1 + len(queue))}")
            try:
                html = await self._read(url, timeout)
            except NodeConfigError as exc:
                failed.append({"url": url, "error": str(exc)})
            else:
                page = _Page()
                page.feed(html)
                links = self._follow(url, page.links, scope, policy, seen, queue, limit)
                pages.append({"url": url, "title": " ".join(page.title.split()),
                              "text": page.text, "links": links})
            if queue and delay:
                await asyncio.sleep(delay)
        if not pages:
            raise NodeConfigError(f"url: could not read {quote(start)}: {failed[0]['error']}")
        self.progress(1.0, f"{len(pages)} page{'s' if len(pages) != 1 else ''} read")
        self.pages.set(msg, pages)
        self.failed.set(msg, failed)
        self.count.set(msg, len(pages))
        self.show_status(f"{len(pages)} pages" + (f", {len(failed)} failed" if failed else ""),
                         "green" if not failed else "yellow", "done")

    @staticmethod
    def _follow(url: str, hrefs: list[str], scope: tuple[str, str, str], policy: Any,
                seen: set[str], queue: list[str], limit: int) -> list[str]:
        """The page's links (absolute, on the crawl's site, allowed), each
        queued once while the crawl has room."""
        out: list[str] = []
        for href in hrefs:
            if len(out) >= LINKS_PER_PAGE:
                break
            target = urldefrag(urljoin(url, href))[0]
            parts = urlsplit(target)
            if (parts.scheme.lower(), (parts.netloc or "").lower()) != scope[:2]:
                continue
            if not parts.path.startswith(scope[2]) or policy.problem(target):
                continue
            if target not in out:
                out.append(target)
            if target not in seen and len(seen) < limit * 4:
                seen.add(target)
                queue.append(target)
        return out

    async def _read(self, url: str, timeout: float) -> str:
        """The page's HTML as text; a NodeConfigError says why not."""
        parts = urlsplit(url)
        if parts.scheme == "file":
            path = Path(unquote(parts.path))
            try:
                if path.stat().st_size > MAX_PAGE_BYTES:
                    raise NodeConfigError(f"{quote(path)} is larger than {MAX_PAGE_BYTES:,} bytes")
                data = await asyncio.to_thread(path.read_bytes)
            except OSError as exc:
                raise NodeConfigError(f"cannot read {quote(path)}: {exc.strerror or exc}") from None
            return data.decode("utf-8", errors="replace")
        import httpx

        client = self.run_resource(CLIENT_KEY, lambda: httpx.AsyncClient(
            follow_redirects=False, timeout=timeout), lambda c: c.aclose())
        try:
            async with client.stream("GET", url, headers={"User-Agent": "Switchboard-Crawl/1"},
                                     timeout=timeout) as response:
                if response.status_code >= 400:
                    raise NodeConfigError(f"HTTP {response.status_code}")
                if 300 <= response.status_code < 400:
                    raise NodeConfigError(f"HTTP {response.status_code} redirect (not followed: "
                                          "crawl the page it points to)")
                kind = response.headers.get("content-type", "text/html")
                if "html" not in kind and "text" not in kind:
                    raise NodeConfigError(f"not a web page ({quote(kind, 60)})")
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_PAGE_BYTES:
                        raise NodeConfigError(f"larger than {MAX_PAGE_BYTES:,} bytes")
                    chunks.append(chunk)
                return b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")
        except httpx.HTTPError as exc:
            raise NodeConfigError(f"{type(exc).__name__}: {quote(exc, 120)}") from None

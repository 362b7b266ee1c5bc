"""The browser nodes: open, goto, click, fill, text, attribute, wait,
screenshot, close. Each acts on a named session (see session.py) and each
is also a tool an agent can call."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from runtime.message import MESSAGE_TYPE, TOOL_REQUEST, Message
from runtime.node import AI, CUSTOM, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node

from .policy import check_url, make_policy, parse_hosts, quote
from .session import DEFAULT_EXECUTABLE, Session, Settings, first_line, playwright_api, session_for

CATEGORY = "Browser"
COLOR = "#0f9d8a"
DEFAULT_TIMEOUT = 15.0
MAX_TIMEOUT = 600.0
DEFAULT_MAX_CHARS = 10_000
MAX_MAX_CHARS = 1_000_000
DEFAULT_MAX_MATCHES = 100
MAX_MAX_MATCHES = 10_000
MAX_SELECTOR_CHARS = 2000
MAX_FILL_CHARS = 100_000
MAX_WAIT_SECONDS = 300.0
#: A full-page screenshot keeps at most this many CSS pixels of height.
MAX_SCREENSHOT_HEIGHT = 16_384
MAX_VIEWPORT = 10_000
#: Reads of a page that navigates meanwhile are tried again, at most this often.
READ_ATTEMPTS = 3
VIEWPORT_RE = re.compile(r"^\s*(\d{1,5})\s*[xX×]\s*(\d{1,5})\s*$")

SESSION_HELP = ("Name of the browser session: nodes naming the same session share one browser "
                "and page during a run")
SELECTOR_HELP = ("Which element: a CSS selector such as '#submit' or 'a.result', or Playwright's "
                 "'text=Sign in' / 'xpath=//h1'")
TIMEOUT_HELP = "Longest wait for the page or the element, in seconds"

# Runs in the page: the text (innerText, as a person sees it) or an
# attribute of the first n matches, each cut at m+1 characters so that a
# huge page never crosses to Python whole.
VALUES_JS = """(els, [n, m, attr]) => ({count: els.length, values: els.slice(0, n).map(e => {
  const v = attr === null ? (e.innerText ?? e.textContent ?? '') : e.getAttribute(attr);
  return v === null ? null : v.slice(0, m + 1);
})})"""


def _positive(params: dict, name: str, low: float, high: float, problems: list) -> None:
    setting = params.get(name)
    value = getattr(setting, "value", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not low <= value <= high:
        problems.append((name, f"{name} must be between {low:g} and {high:g}"))


def _session_param(group: str = "advanced") -> Param:
    return Param(str, SESSION_HELP, default="main", allow=CUSTOM, group=group)


def _timeout_param(default: float = DEFAULT_TIMEOUT, text: str = TIMEOUT_HELP) -> Param:
    return Param(float, text, default=default, allow=CUSTOM, group="advanced")


class BrowserNode(Node):
    """What every browser node shares. Each node declares its own params
    (the spec lists them in declaration order, and the action's own come
    first); every one has ``session`` and ``timeout_seconds``."""

    session: Any
    timeout_seconds: Any
    selector: Any
    max_chars: Any
    max_matches: Any

    @classmethod
    def check(cls, params):
        problems: list[tuple[str, str]] = []
        _positive(params, "timeout_seconds", 0.1, MAX_TIMEOUT, problems)
        _positive(params, "max_chars", 1, MAX_MAX_CHARS, problems)
        _positive(params, "max_matches", 1, MAX_MAX_MATCHES, problems)
        hosts = params.get("allowed_hosts")
        if hosts is not None and hosts.value not in (None, ""):
            try:
                parse_hosts(hosts.value)
            except NodeConfigError as exc:
                problems.append(("allowed_hosts", str(exc)))
        return problems

    # -- helpers -------------------------------------------------------------
    def _session(self) -> Session:
        name = str(self.session.get() or "main").strip() or "main"
        return session_for(self, name)

    def _timeout(self) -> float:
        seconds = self.timeout_seconds.get()
        try:
            seconds = float(seconds if seconds is not None else DEFAULT_TIMEOUT)
        except (TypeError, ValueError):
            raise NodeConfigError("timeout_seconds: a number of seconds") from None
        if not 0.1 <= seconds <= MAX_TIMEOUT:
            raise NodeConfigError(f"timeout_seconds must be between 0.1 and {MAX_TIMEOUT:g}")
        return seconds

    def _bounded_int(self, param: Any, default: int, high: int) -> int:
        value = param.get()
        value = default if value is None else value
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise NodeConfigError(f"{param.name} must be a whole number from 1 to {high}")
        return value

    def _selector(self, msg: Message, required: bool = True) -> str:
        sel = self.selector.get(msg)
        if sel is None or (isinstance(sel, str) and not sel.strip()):
            if required:
                raise NodeConfigError("selector: no selector given")
            return ""
        if not isinstance(sel, str):
            raise NodeConfigError(f"selector: a selector is text, not {type(sel).__name__}")
        if len(sel) > MAX_SELECTOR_CHARS:
            raise NodeConfigError(f"selector: {len(sel)} characters, more than the "
                                  f"{MAX_SELECTOR_CHARS} allowed")
        return sel.strip()

    async def _first(self, page: Any, selector: str, state: str, timeout: float,
                     doing: str) -> Any:
        """The first element matching ``selector`` once it is ``state``, or
        an error naming the selector and the timeout."""
        locator = page.locator(selector).first
        await self._guard(locator.wait_for(state=state, timeout=timeout * 1000),
                          page, selector, timeout, doing)
        return locator

    async def _guard(self, action: Any, page: Any, selector: str, timeout: float,
                     doing: str) -> Any:
        """Await a Playwright call, turning its errors into texts a person
        (and an LLM) can act on."""
        api = playwright_api()
        try:
            return await action
        except api.TimeoutError:
            if not selector:
                raise NodeConfigError(f"could not {doing} within {timeout:g} s "
                                      "(timeout_seconds)") from None
            count = await _count(page, selector)
            if count == 0:
                raise NodeConfigError(
                    f"selector '{quote(selector)}': no element matched within {timeout:g} s "
                    f"(timeout_seconds) on {quote(page.url, 120)}") from None
            raise NodeConfigError(
                f"selector '{quote(selector)}': {count} element{'s' if count != 1 else ''} "
                f"matched but could not {doing} within {timeout:g} s (timeout_seconds)") from None
        except api.Error as exc:
            raise NodeConfigError(_problem(exc, selector)) from None

    async def _values(self, page: Any, selector: str, attr: str | None, match: str,
                      timeout: float) -> tuple[Any, int, bool]:
        """(value or list of values, number of matches, whether any was cut)."""
        max_chars = self._bounded_int(self.max_chars, DEFAULT_MAX_CHARS, MAX_MAX_CHARS)
        max_matches = self._bounded_int(self.max_matches, DEFAULT_MAX_MATCHES, MAX_MAX_MATCHES)
        n = 1 if match == "first" else max_matches
        api = playwright_api()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in range(READ_ATTEMPTS):
            left = max(deadline - loop.time(), 0.1)
            await self._first(page, selector, "attached", left if attempt else timeout,
                              "be read")
            try:
                result = await page.locator(selector).evaluate_all(VALUES_JS,
                                                                   [n, max_chars, attr])
            except api.Error as exc:
                # A page that was navigating (a click just before) replaced
                # the elements found: find them again on the new page.
                if attempt + 1 < READ_ATTEMPTS and _replaced(exc):
                    continue
                raise NodeConfigError(_problem(exc, selector)) from None
            if result["count"] or attempt + 1 == READ_ATTEMPTS:
                break
        cut = False
        values = []
        for v in result["values"]:
            if isinstance(v, str) and len(v) > max_chars:
                v, cut = v[:max_chars] + "…", True
            values.append(v)
        count = int(result["count"])
        if match == "first":
            return (values[0] if values else None), count, cut
        return values, count, cut or count > max_matches


async def _count(page: Any, selector: str) -> int:
    try:
        return await page.locator(selector).count()
    except Exception:  # noqa: BLE001 - only used to word an error
        return -1


def _replaced(exc: Exception) -> bool:
    text = str(exc)
    return "Execution context was destroyed" in text or "navigat" in text


def _problem(exc: Exception, selector: str = "") -> str:
    text = str(exc)
    if selector and ("while parsing" in text or "not a valid selector" in text
                     or "Unknown engine" in text or "Unexpected token" in text):
        return f"selector '{quote(selector)}' is not valid: {first_line(text)}"
    if "Target page, context or browser has been closed" in text or "has been closed" in text:
        return "the browser was closed while it worked (browser.close, or it crashed)"
    return first_line(text)


def _policy_params() -> tuple[Param, Param]:
    hosts = Param(str, "Hosts the page may go to, comma-separated (example.com, "
                  "127.0.0.1:8000, *.example.org); checked for redirects and clicked links too. "
                  "Empty: any host for plain messages, none as an agent's tool",
                  default="", allow=CUSTOM)
    base = Param(str, "Folder that file:// URLs may read from; empty: file URLs are refused",
                 default="", allow=CUSTOM, group="advanced")
    return hosts, base


def _viewport(value: Any) -> tuple[int, int]:
    m = VIEWPORT_RE.match(str(value or ""))
    if not m:
        raise NodeConfigError(f"viewport: '{quote(value)}' is not WIDTHxHEIGHT, e.g. 1280x800")
    width, height = int(m.group(1)), int(m.group(2))
    if not (100 <= width <= MAX_VIEWPORT and 100 <= height <= MAX_VIEWPORT):
        raise NodeConfigError(f"viewport: each side must be 100 to {MAX_VIEWPORT} pixels")
    return width, height


async def _navigate(session: Session, page: Any, url: str, wait_until: str,
                    timeout: float) -> Any:
    api = playwright_api()
    session.blocked = None
    try:
        return await page.goto(url, wait_until=wait_until, timeout=timeout * 1000)
    except api.TimeoutError:
        raise NodeConfigError(f"url: {quote(url)} did not finish loading ({wait_until}) within "
                              f"{timeout:g} s (timeout_seconds)") from None
    except api.Error as exc:
        if session.blocked is not None:
            where, why = session.blocked
            if where.rstrip("/") == url.rstrip("/"):
                raise NodeConfigError(f"url: {why}") from None
            raise NodeConfigError(f"url: {quote(url)} led to {quote(where)}, which is refused: "
                                  f"{why}") from None
        raise NodeConfigError(f"url: cannot load {quote(url)}: {first_line(exc)}") from None


def _resolve(url: Any, page: Any) -> Any:
    """A relative URL ('/about', 'page2.html') against the page's own; a bare
    host ('example.com/x') on a blank page as https."""
    if not isinstance(url, str) or not url.strip():
        return url
    url = url.strip()
    if urlsplit(url).scheme:
        return url
    current = page.url if page is not None else "about:blank"
    if urlsplit(current).scheme in ("http", "https", "file"):
        return urljoin(current, url)
    return "https://" + url.lstrip("/")


# -- nodes ------------------------------------------------------------------

@node("browser.open", name="Open Browser", category=CATEGORY, icon="browser", color=COLOR,
      tool=Tool("browser_open", "Open the web browser, optionally at a URL. Other browser "
                "tools open it by themselves, so call this only to start on a page"))
class OpenBrowser(BrowserNode):
    """Starts a browser session (Chromium, driven by Playwright) with its
    settings, and optionally loads a first page. Later browser nodes naming
    the same session use this browser; it is closed when the run ends."""

    url = Param(str, "Page to open first (http, https or file URL); empty: a blank page",
                default="", allow=AI | CUSTOM | MESSAGE)
    headless = Param(bool, "Run without a window (needed on a server or in CI)", default=True,
                     allow=CUSTOM)
    viewport = Param(str, "Page size in CSS pixels, WIDTHxHEIGHT", default="1280x800",
                     allow=CUSTOM, group="advanced")
    executable = Param(str, "Chromium to drive (nothing is downloaded); the environment "
                       "variable SWITCHBOARD_CHROMIUM overrides it",
                       default=DEFAULT_EXECUTABLE, allow=CUSTOM, group="advanced")
    allowed_hosts, file_base_dir = _policy_params()
    session = _session_param()
    timeout_seconds = _timeout_param(30.0, "Longest wait for the browser to start and the "
                                     "first page to load, in seconds")

    page_url = Output(str, "The page's URL", path="browser.url")
    title = Output(str, "The page's title", path="browser.title")

    @classmethod
    def check(cls, params):
        problems = super().check(params)
        vp = params.get("viewport")
        if vp is not None and vp.value:
            try:
                _viewport(vp.value)
            except NodeConfigError as exc:
                problems.append(("viewport", str(exc)))
        return problems

    async def on_message(self, msg: Message) -> None:
        timeout = self._timeout()
        policy = make_policy(self.allowed_hosts.get(), self.file_base_dir.get(),
                             for_tool=msg.get(MESSAGE_TYPE) == TOOL_REQUEST)
        raw = self.url.get(msg)
        url = check_url(raw, policy) if raw and urlsplit(str(raw).strip()).scheme else None
        settings = Settings(executable=str(self.executable.get() or ""),
                            headless=bool(self.headless.get()),
                            viewport=_viewport(self.viewport.get() or "1280x800"),
                            launch_timeout=timeout)
        session = self._session()
        self.show_status(f"opening {session.name}", "blue", "running")
        async with session.lock:
            if session.open and session.settings != settings:
                await session.close_browser()  # other settings: start again with these
            session.settings = settings
            await session.set_policy(policy)
            page = await session.get_page()
            if raw and url is None:
                url = check_url(_resolve(raw, page), policy)
            if url:
                await _navigate(session, page, url, "load", timeout)
            title = await page.title()
            self.page_url.set(msg, page.url)
            self.title.set(msg, title)
        self.show_status(f"{session.name}: {quote(title or page.url, 40)}", "green", "done")


@node("browser.goto", name="Go To URL", category=CATEGORY, icon="globe", color=COLOR,
      tool=Tool("browser_goto", "Load a web page in the browser. Returns the final URL, the "
                "page title and the HTTP status"))
class GoTo(BrowserNode):
    """Loads a URL in the session's page and waits until it has loaded. A
    relative URL is taken against the current page's."""

    url = Param(str, "The URL to load (http, https or file); relative URLs are taken against "
                "the current page", allow=AI | CUSTOM | MESSAGE)
    wait_until = Param(str, "When the page counts as loaded: load (everything), "
                       "domcontentloaded (the HTML), networkidle (no requests for 0.5 s), "
                       "commit (the first byte)",
                       choices=["load", "domcontentloaded", "networkidle", "commit"],
                       default="load", allow=CUSTOM)
    allowed_hosts, file_base_dir = _policy_params()
    session = _session_param()
    timeout_seconds = _timeout_param()

    page_url = Output(str, "The page's URL after redirects", path="browser.url")
    title = Output(str, "The page's title", path="browser.title")
    status = Output(int, "HTTP status of the page (200 for a file that was read)",
                    path="browser.status")

    async def on_message(self, msg: Message) -> None:
        timeout = self._timeout()
        policy = make_policy(self.allowed_hosts.get(), self.file_base_dir.get(),
                             for_tool=msg.get(MESSAGE_TYPE) == TOOL_REQUEST)
        raw = self.url.get(msg)
        absolute = isinstance(raw, str) and urlsplit(raw.strip()).scheme != ""
        if absolute or not raw:
            check_url(raw, policy)  # refused before any browser starts
        session = self._session()
        self.show_status(f"loading {quote(raw, 40)}", "blue", "running")
        async with session.lock:
            page = await session.get_page()
            url = check_url(_resolve(raw, page), policy)
            await session.set_policy(policy)
            response = await _navigate(session, page, url,
                                       self.wait_until.get() or "load", timeout)
            title = await page.title()
            self.page_url.set(msg, page.url)
            self.title.set(msg, title)
            self.status.set(msg, response.status if response is not None else None)
        self.show_status(quote(title or page.url, 40), "green", "done")


@node("browser.click", name="Click", category=CATEGORY, icon="cursor", color=COLOR,
      tool=Tool("browser_click", "Click an element of the current page, found by a CSS "
                "selector"))
class Click(BrowserNode):
    """Clicks the first element matching the selector, once it is visible
    and enabled (scrolling it into view)."""

    selector = Param(str, SELECTOR_HELP, allow=AI | CUSTOM | MESSAGE)
    session = _session_param()
    timeout_seconds = _timeout_param()

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg)
        timeout = self._timeout()
        session = self._session()
        async with session.lock:
            page = await session.get_page()
            await self._guard(page.locator(selector).first.click(timeout=timeout * 1000),
                              page, selector, timeout, "be clicked (hidden, disabled or covered)")
        self.show_status(f"clicked {quote(selector, 40)}", "green", "done")


@node("browser.fill", name="Fill", category=CATEGORY, icon="edit", color=COLOR,
      tool=Tool("browser_fill", "Type text into an input field or text area of the current "
                "page, replacing what it holds"))
class Fill(BrowserNode):
    """Fills an input, text area or contenteditable element with text,
    replacing its content."""

    selector = Param(str, SELECTOR_HELP, allow=AI | CUSTOM | MESSAGE)
    text = Param(str, "The text to type", allow=AI | CUSTOM | MESSAGE, multiline=True)
    session = _session_param()
    timeout_seconds = _timeout_param()

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg)
        text = self.text.get(msg)
        text = "" if text is None else text if isinstance(text, str) else str(text)
        if len(text) > MAX_FILL_CHARS:
            raise NodeConfigError(f"text: {len(text)} characters, more than the "
                                  f"{MAX_FILL_CHARS} a field may be filled with")
        timeout = self._timeout()
        session = self._session()
        async with session.lock:
            page = await session.get_page()
            await self._guard(page.locator(selector).first.fill(text, timeout=timeout * 1000),
                              page, selector, timeout, "be filled (not an editable field?)")
        self.show_status(f"filled {quote(selector, 40)}", "green", "done")


def _reader_params() -> tuple[Param, Param, Param, Param, Param]:
    """match, max_chars, max_matches, session, timeout_seconds."""
    return (Param(str, "first: the first match's value; all: a list, one per match",
                  choices=["first", "all"], default="first", allow=AI | CUSTOM | MESSAGE),
            Param(int, "Longest value returned, in characters; longer ones are cut and end "
                  "with …", default=DEFAULT_MAX_CHARS, allow=CUSTOM, group="advanced"),
            Param(int, "Most matches returned with 'all'; 'count' still says how many there "
                  "were", default=DEFAULT_MAX_MATCHES, allow=CUSTOM, group="advanced"),
            _session_param(), _timeout_param())


def _reader_outputs() -> tuple[Output, Output]:
    """count, truncated (after the node's main output)."""
    return (Output(int, "How many elements matched", path="browser.count"),
            Output(bool, "Whether a value was cut at max_chars or matches at max_matches",
                   path="browser.truncated"))


class _Reader(BrowserNode):
    match: Any
    count: Any
    truncated: Any

    def _match(self, msg: Message) -> str:
        match = self.match.get(msg) or "first"
        if match not in ("first", "all"):
            raise NodeConfigError(f"match: '{quote(match)}' is not 'first' or 'all'")
        return match


@node("browser.text", name="Get Text", category=CATEGORY, icon="browser-text", color=COLOR,
      tool=Tool("browser_text", "Read the visible text of the current page: of the first "
                "element matching a CSS selector ('body' for the whole page), or of all of "
                "them as a list"))
class GetText(_Reader):
    """Reads the text of the first element matching the selector (as a
    person sees it), or of every match as a list. Waits for a first match."""

    selector = Param(str, SELECTOR_HELP + "; 'body' reads the whole page", default="body",
                     allow=AI | CUSTOM | MESSAGE)
    match, max_chars, max_matches, session, timeout_seconds = _reader_params()
    result = Output("json", "The text, or a list of texts with match 'all'")
    count, truncated = _reader_outputs()

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg)
        match = self._match(msg)
        timeout = self._timeout()
        session = self._session()
        async with session.lock:
            page = await session.get_page()
            value, count, cut = await self._values(page, selector, None, match, timeout)
        self.result.set(msg, value)
        self.count.set(msg, count)
        self.truncated.set(msg, cut)
        self.show_status(f"{count} match{'es' if count != 1 else ''}", "green", "done")


@node("browser.attribute", name="Get Attribute", category=CATEGORY, icon="browser-attribute",
      color=COLOR,
      tool=Tool("browser_attribute", "Read an attribute (href, src, value, ...) of the first "
                "element matching a CSS selector on the current page, or of all of them"))
class GetAttribute(_Reader):
    """Reads an attribute of the first element matching the selector, or of
    every match as a list (null where an element lacks it). Values are as
    written in the page: a link's href may be relative."""

    selector = Param(str, SELECTOR_HELP, allow=AI | CUSTOM | MESSAGE)
    attribute = Param(str, "The attribute's name, e.g. href", default="href",
                      allow=AI | CUSTOM | MESSAGE)
    match, max_chars, max_matches, session, timeout_seconds = _reader_params()
    result = Output("json", "The value, or a list of values with match 'all'")
    count, truncated = _reader_outputs()

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg)
        attr = self.attribute.get(msg)
        if not isinstance(attr, str) or not re.fullmatch(r"[^\s\"'>/=\x00-\x1f]{1,200}", attr):
            raise NodeConfigError(f"attribute: '{quote(attr)}' is not an attribute name")
        match = self._match(msg)
        timeout = self._timeout()
        session = self._session()
        async with session.lock:
            page = await session.get_page()
            value, count, cut = await self._values(page, selector, attr, match, timeout)
        self.result.set(msg, value)
        self.count.set(msg, count)
        self.truncated.set(msg, cut)
        self.show_status(f"{count} match{'es' if count != 1 else ''}", "green", "done")


@node("browser.wait", name="Wait For", category=CATEGORY, icon="clock", color=COLOR,
      tool=Tool("browser_wait", "Wait until an element matching a CSS selector appears on "
                "(or disappears from) the current page; with no selector, wait some seconds"))
class WaitFor(BrowserNode):
    """Waits until an element matching the selector is visible (appear) or
    hidden or gone (disappear), at most timeout_seconds; with no selector,
    waits a fixed number of seconds."""

    selector = Param(str, SELECTOR_HELP + "; empty: wait 'seconds'", default="",
                     allow=AI | CUSTOM | MESSAGE)
    until = Param(str, "appear: until the element is visible; disappear: until it is hidden "
                  "or gone", choices=["appear", "disappear"], default="appear",
                  allow=AI | CUSTOM | MESSAGE)
    seconds = Param(float, f"With no selector: how long to wait (at most {MAX_WAIT_SECONDS:g})",
                    default=1.0, allow=AI | CUSTOM | MESSAGE)
    session = _session_param()
    timeout_seconds = _timeout_param()

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg, required=False)
        if not selector:
            seconds = self.seconds.get(msg)
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) \
                    or not 0 <= seconds <= MAX_WAIT_SECONDS:
                raise NodeConfigError(f"seconds: a number from 0 to {MAX_WAIT_SECONDS:g}")
            self.show_status(f"waiting {seconds:g} s", "blue", "running")
            await asyncio.sleep(seconds)
            self.show_status(f"waited {seconds:g} s", "green", "done")
            return
        until = self.until.get(msg) or "appear"
        if until not in ("appear", "disappear"):
            raise NodeConfigError(f"until: '{quote(until)}' is not 'appear' or 'disappear'")
        timeout = self._timeout()
        session = self._session()
        self.show_status(f"waiting for {quote(selector, 40)}", "blue", "running")
        async with session.lock:
            page = await session.get_page()
            if until == "appear":
                await self._first(page, selector, "visible", timeout, "become visible")
            else:
                api = playwright_api()
                try:
                    await page.locator(selector).first.wait_for(state="hidden",
                                                                timeout=timeout * 1000)
                except api.TimeoutError:
                    raise NodeConfigError(f"selector '{quote(selector)}': still visible after "
                                          f"{timeout:g} s (timeout_seconds)") from None
                except api.Error as exc:
                    raise NodeConfigError(_problem(exc, selector)) from None
        self.show_status(f"{quote(selector, 40)} {until}ed", "green", "done")


@node("browser.screenshot", name="Screenshot", category=CATEGORY, icon="camera", color=COLOR,
      tool=Tool("browser_screenshot", "Save a PNG screenshot of the current page (or of one "
                "element) and return the file's path"))
class Screenshot(BrowserNode):
    """Saves a PNG of the visible page, the full page, or one element, to a
    file inside the designer's folder. Shows it in the inspector."""

    selector = Param(str, "Only this element (a CSS selector); empty: the page", default="",
                     allow=AI | CUSTOM | MESSAGE)
    full_page = Param(bool, "The whole scrollable page rather than the visible part (at most "
                      f"{MAX_SCREENSHOT_HEIGHT} pixels high)", default=False,
                      allow=AI | CUSTOM | MESSAGE)
    folder = Param(str, "Folder the screenshots go to; empty: 'screenshots' in Switchboard's "
                   "data folder", default="", allow=CUSTOM)
    filename = Param(str, "File name inside the folder, ending in .png; empty: a new "
                     "timestamped name", default="", allow=AI | CUSTOM | MESSAGE)
    session = _session_param()
    timeout_seconds = _timeout_param()

    path = Output(str, "The PNG file written")

    async def on_message(self, msg: Message) -> None:
        selector = self._selector(msg, required=False)
        file = self._target(msg)
        timeout = self._timeout()
        session = self._session()
        async with session.lock:
            page = await session.get_page()
            if selector:
                locator = await self._first(page, selector, "visible", timeout, "be shown")
                png = await self._guard(locator.screenshot(timeout=timeout * 1000, type="png"),
                                        page, selector, timeout, "be shown")
            else:
                kwargs: dict[str, Any] = {"timeout": timeout * 1000, "type": "png"}
                if self.full_page.get(msg):
                    kwargs["full_page"] = True
                    height = await page.evaluate(
                        "Math.max(document.documentElement.scrollHeight,"
                        " document.body ? document.body.scrollHeight : 0)")
                    if height > MAX_SCREENSHOT_HEIGHT:
                        width = await page.evaluate("document.documentElement.scrollWidth")
                        kwargs["clip"] = {"x": 0, "y": 0, "width": width,
                                          "height": MAX_SCREENSHOT_HEIGHT}
                png = await self._guard(page.screenshot(**kwargs), page, "", timeout,
                                        "be taken")
        await self.run_blocking(_write_atomic, file, png)
        path = str(file)
        self.path.set(msg, path)
        self.debug({"screenshot": path}, msg)
        self.show_status(file.name, "green", "done")

    def _target(self, msg: Message) -> Path:
        folder = self.folder.get()
        if folder:
            base = Path(os.path.expanduser(str(folder)))
        else:
            from runtime.history import data_dir

            base = data_dir() / "screenshots"
        name = self.filename.get(msg)
        if not name:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            name = f"screenshot-{stamp}-{secrets.token_hex(3)}.png"
        if not isinstance(name, str):
            raise NodeConfigError("filename: a file name is text")
        if not name.lower().endswith(".png"):
            raise NodeConfigError(f"filename: '{quote(name)}' must end in .png (screenshots "
                                  "are PNG files)")
        from nodes.files.paths import confined_path  # one confinement check for all nodes

        # Folders on the way are made when the file is written.
        return confined_path(base, name, param="filename")


def _write_atomic(file: Path, data: bytes) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, file)
    finally:
        if tmp.exists():
            tmp.unlink()


@node("browser.close", name="Close Browser", category=CATEGORY, icon="browser-close",
      color=COLOR, tool=Tool("browser_close", "Close the web browser when you are done "
                             "browsing"))
class CloseBrowser(BrowserNode):
    """Closes the session's browser. A later browser node naming the same
    session starts it again (with the settings of its Open Browser). Every
    session is also closed when the run ends, whatever happens."""

    session = _session_param(group="")  # its only param: in view

    async def on_message(self, msg: Message) -> None:
        session = self._session()
        async with session.lock:
            was_open = session.open
            await session.close_browser()
        self.show_status("closed" if was_open else "was not open", "grey", "done")


BROWSER_NODES = [OpenBrowser, GoTo, Click, Fill, GetText, GetAttribute, WaitFor, Screenshot,
                 CloseBrowser]

"""Browser sessions of one run.

A run has one Playwright driver (``browser-playwright``) and one browser
per session name (``browser:<name>``), each with one context and one page,
all made when a node first needs them and closed when the run ends: both
are run resources (Node.run_resource), and the engine closes those in
reverse order, so every session's browser is closed before the driver
stops. Stopping the driver also ends any browser a failed close left
behind: Playwright's driver kills the browsers it launched when it exits.

Playwright is imported here, lazily, when a session first starts: the
designer's palette imports every node package, and most flows drive no
browser."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.node import Node, NodeConfigError

from .policy import UrlPolicy, quote

log = logging.getLogger(__name__)

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
EXECUTABLE_ENV = "SWITCHBOARD_CHROMIUM"
INSTALL_HINT = "install the browser extra: pip install -e '.[browser]'"
LAUNCH_TIMEOUT = 30.0
#: Longest wait for a browser or the driver to close at the end of a run.
CLOSE_TIMEOUT = 10.0
DEFAULT_VIEWPORT = (1280, 800)
DRIVER_KEY = "browser-playwright"
#: Navigations the guard checks (about:srcdoc, data: frames and the like stay inside the page).
NAV_SCHEMES = ("http", "https", "file")


def playwright_api() -> Any:
    """``playwright.async_api``, or the error that says how to install it."""
    try:
        from playwright import async_api
    except ImportError:
        raise NodeConfigError(INSTALL_HINT) from None
    return async_api


def chromium_path(configured: str | None) -> str:
    """The Chromium to drive: ``$SWITCHBOARD_CHROMIUM`` if set (a machine's
    setting wins over a flow's, so a flow made on Debian runs elsewhere),
    else the node's ``executable``, else /usr/bin/chromium. Nothing is ever
    downloaded: a missing browser is an error that says how to install one."""
    env = os.environ.get(EXECUTABLE_ENV, "").strip()
    if env:
        path, source = env, f"${EXECUTABLE_ENV}"
    else:
        path, source = (configured or "").strip() or DEFAULT_EXECUTABLE, "executable"
    file = Path(os.path.expanduser(path))
    if not file.is_file():
        raise NodeConfigError(
            f"executable: no Chromium at {quote(path)} (from {source}); install it with "
            f"`apt install chromium`, or set executable (or ${EXECUTABLE_ENV}) to the "
            "browser's path")
    if not os.access(file, os.X_OK):
        raise NodeConfigError(f"executable: {quote(path)} (from {source}) is not executable")
    return str(file)


@dataclass(frozen=True)
class Settings:
    """What a session's browser starts with (browser.open sets them)."""

    executable: str = ""
    headless: bool = True
    viewport: tuple[int, int] = DEFAULT_VIEWPORT
    launch_timeout: float = LAUNCH_TIMEOUT


class Driver:
    """The run's one Playwright driver process, started on first use.

    The start runs as a task of its own, shielded: a node cancelled while
    the driver starts (a tool timeout, the run stopping) leaves a driver
    that aclose() still stops, never an orphan process."""

    def __init__(self) -> None:
        self._start: asyncio.Future | None = None
        self.closed = False

    async def get(self) -> Any:
        if self.closed:
            raise NodeConfigError("the run has ended: its browsers are closed")
        if self._start is None:
            self._start = asyncio.ensure_future(self._launch())
        return await asyncio.shield(self._start)

    @staticmethod
    async def _launch() -> Any:
        api = playwright_api()
        try:
            return await api.async_playwright().start()
        except Exception as exc:  # noqa: BLE001 - a broken install: say what broke
            raise NodeConfigError(f"Playwright's driver did not start: {first_line(exc)}; "
                                  "reinstall the browser extra: pip install -e '.[browser]'"
                                  ) from None

    async def aclose(self) -> None:
        self.closed = True
        start, self._start = self._start, None
        if start is None:
            return
        try:
            pw = await asyncio.wait_for(asyncio.shield(start), CLOSE_TIMEOUT)
        except Exception:  # noqa: BLE001 - it never started: nothing to stop
            return
        try:
            await asyncio.wait_for(pw.stop(), CLOSE_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - the run is ending; say so, go on
            log.warning("could not stop the Playwright driver: %s", exc)


class Session:
    """One named browser of a run: a browser, a context and its page.

    ``lock`` serialises the actions on the page: two nodes (or two tool
    calls of one turn) acting on one session take turns in the order they
    asked, instead of typing into each other's fields."""

    def __init__(self, name: str, driver: Driver) -> None:
        self.name = name
        self.driver = driver
        self.settings = Settings()
        self.policy = UrlPolicy()
        self.lock = asyncio.Lock()
        self.browser: Any = None
        self.context: Any = None
        self.page: Any = None
        self.blocked: tuple[str, str] | None = None  # (url, why) of the last refused navigation
        self._guard: Any = None  # the CDP session that vets navigations
        self._pending: set[asyncio.Task] = set()
        self.ended = False

    @property
    def open(self) -> bool:
        return (self.page is not None and not self.page.is_closed()
                and self.browser is not None and self.browser.is_connected())

    async def get_page(self) -> Any:
        """The session's page, starting the browser first if needed (call
        with ``lock`` held)."""
        if self.ended:
            raise NodeConfigError(f"browser session '{self.name}': the run has ended")
        if self.open:
            return self.page
        await self.close_browser()  # a crashed or closed browser: start afresh
        settings = self.settings
        executable = chromium_path(settings.executable)
        api = playwright_api()
        pw = await self.driver.get()
        try:
            self.browser = await pw.chromium.launch(
                executable_path=executable, headless=settings.headless,
                timeout=settings.launch_timeout * 1000)
        except api.Error as exc:
            raise NodeConfigError(self._launch_problem(exc, executable)) from None
        width, height = settings.viewport
        # No downloads; no service workers (they could answer a navigation
        # before the guard sees it).
        self.context = await self.browser.new_context(
            viewport={"width": width, "height": height}, accept_downloads=False,
            service_workers="block")
        self.page = await self.context.new_page()
        self.context.on("page", self._on_popup)
        if self.policy.restrictive:
            await self._install_guard()
        return self.page

    async def set_policy(self, policy: UrlPolicy) -> None:
        """Rules for this and every later navigation of the session, until
        the next goto (or open) sets its own."""
        self.policy = policy
        if policy.restrictive and self.context is not None:
            await self._install_guard()

    async def _install_guard(self) -> None:
        """Pause every document request of the page (a goto, each hop of a
        redirect, a clicked link, a script setting location, a frame) until
        the policy has allowed it. Chromium's Fetch domain, asked for
        documents only, so images and scripts never wait; Playwright's own
        route() would not do: it lets redirects through unseen."""
        if self._guard is None:
            cdp = await self.context.new_cdp_session(self.page)
            cdp.on("Fetch.requestPaused", self._on_paused)
            await cdp.send("Fetch.enable", {"patterns": [
                {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]})
            self._guard = cdp

    def _on_paused(self, event: dict) -> None:
        task = asyncio.ensure_future(self._vet(self._guard, event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _vet(self, cdp: Any, event: dict) -> None:
        url = event.get("request", {}).get("url", "")
        why = self.policy.problem(url) if url.partition(":")[0].lower() in NAV_SCHEMES else None
        try:
            if why is None:
                await cdp.send("Fetch.continueRequest", {"requestId": event["requestId"]})
            else:
                self.blocked = (url, why)
                await cdp.send("Fetch.failRequest", {"requestId": event["requestId"],
                                                     "errorReason": "BlockedByClient"})
        except Exception as exc:  # noqa: BLE001 - the page or browser went away meanwhile
            log.debug("browser session %s: navigation guard: %s", self.name, exc)

    def _on_popup(self, page: Any) -> None:
        # A window the page opens (target=_blank, window.open) is outside
        # the guard and no node can act on it: under a policy it is closed.
        if page is not self.page and self.policy.restrictive:
            task = asyncio.ensure_future(page.close())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    def _launch_problem(self, exc: Exception, executable: str) -> str:
        text = str(exc)
        if not self.settings.headless and ("DISPLAY" in text or "display" in text
                                           or "XServer" in text):
            return (f"browser session '{self.name}': cannot show a browser window here "
                    "(no display); set headless to true")
        if "Timeout" in text:
            return (f"browser session '{self.name}': {executable} did not start within "
                    f"{self.settings.launch_timeout:g} s")
        return f"browser session '{self.name}': {executable} did not start: {first_line(text)}"

    async def close_browser(self) -> None:
        """Close the browser (the session may start again later)."""
        browser, self.browser, self.context, self.page = self.browser, None, None, None
        self._guard = None
        for task in list(self._pending):
            task.cancel()
        if browser is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT)

    async def aclose(self) -> None:
        """At the end of the run: close for good."""
        self.ended = True
        await self.close_browser()


def session_for(node: Node, name: str) -> Session:
    """The run's session ``name``, made on first use. The driver is asked
    for first, so that it is closed after every session (run resources are
    closed in reverse order)."""
    driver = node.run_resource(DRIVER_KEY, Driver, Driver.aclose)
    return node.run_resource(f"browser:{name}", lambda: Session(name, driver), Session.aclose)


def first_line(text: str, limit: int = 300) -> str:
    """The part of a Playwright error a person needs: its first line, with
    the "Page.click: " style prefix and the call log dropped."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    head, sep, rest = line.partition(": ")
    if sep and "." in head and " " not in head:
        line = rest
    return quote(line, limit)

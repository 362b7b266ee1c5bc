"""Browser nodes: drive the system's Chromium through Playwright (the
``[browser]`` extra, imported only when a session starts). See
docs/nodes-browser.md."""

from .nodes import (  # noqa: F401
    BROWSER_NODES,
    Click,
    CloseBrowser,
    Fill,
    GetAttribute,
    GetText,
    GoTo,
    OpenBrowser,
    Screenshot,
    WaitFor,
)

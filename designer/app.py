"""Start the designer: ``switchboard`` and ``switchboard design [FLOW]``.

The Qt event loop is a qasync loop, so the runtime's asyncio engine can run
inside it when a flow is run from the designer. Imports stay lazy: a cold
start must show a window within a second, and nothing here may pull in an
LLM client library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "resources" / "examples"
WELCOME_FLOWS = ("email-assistant.flow.json", "order-triage.flow.json")


#: Modules the first phase of the start must not need (see ``show_staged``).
SECOND_PHASE = ("runtime.engine", "designer.running.run_integration",
                "designer.panels.inspector", "designer.panels.properties")


def welcome_flow() -> Path | None:
    for name in WELCOME_FLOWS:
        path = EXAMPLES / name
        if path.exists():
            return path
    return None


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
        if w < 200 or h < 200:
            raise ValueError
        return w, h
    except ValueError:
        raise SystemExit(f"switchboard: --size {text!r}: expected WIDTHxHEIGHT, e.g. 1440x900") from None


def _application(argv: list[str]):
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(argv)
    app.setOrganizationName("Switchboard")
    app.setApplicationName("Switchboard")
    app.setApplicationDisplayName("Switchboard")
    return app


def run_designer(args) -> int:
    """Open the designer window; returns the process exit code."""
    flow = getattr(args, "flow", None)
    screenshot = getattr(args, "screenshot", None)
    size = parse_size(getattr(args, "size", None) or "1440x900")
    mode = getattr(args, "theme", None) or "system"
    if screenshot and not os.environ.get("QT_QPA_PLATFORM") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # headless screenshots need no display
    elif sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # Qt would abort with a plugin dump; say what is wrong and what works.
        print("switchboard: no display found (DISPLAY and WAYLAND_DISPLAY are unset). Open the "
              "designer on a desktop, run flows headless with 'switchboard run FLOW', or use "
              "'xvfb-run switchboard'.", file=sys.stderr)
        return 2

    app = _application(sys.argv[:1])
    from PySide6.QtCore import QSettings

    from .look import theme

    if mode == "system":
        saved = QSettings("Switchboard", "Switchboard").value("theme", "system")
        mode = saved if saved in ("light", "dark", "system") and not screenshot else "system"
    theme.apply(app, theme.resolve(mode))

    from .window.main_window import MainWindow

    # Two phases: the canvas with the flow shows first; the properties panel,
    # the inspector and the run integration are built after the first paint.
    window = MainWindow(restore_layout=not screenshot, staged=True)
    window._theme_mode = mode
    window.theme_actions[mode].setChecked(True)
    if flow:
        # Recovery of the file is offered once the window shows (below).
        ok = window.open_path(flow, ask=False, recover=False)
        if not ok and screenshot:
            window.close()
            return 2
    else:
        welcome = welcome_flow()
        if welcome is not None:
            window.open_path(welcome, as_copy=True, ask=False)

    if screenshot:
        return _screenshot(app, window, Path(screenshot), size)

    hints = app.styleHints()
    if hasattr(hints, "colorSchemeChanged"):
        hints.colorSchemeChanged.connect(lambda *a: window.follow_system_theme())
    show_staged(window)
    from PySide6.QtCore import QTimer

    # After a crash: with a flow named, offer its newer autosave (if any); on
    # a plain start, the newest autosave of any flow.
    if not flow:
        QTimer.singleShot(300, window.offer_recovery)
    elif window.document.path is not None:
        opened = window.document.path
        QTimer.singleShot(300, lambda: window.offer_recovery(opened))
    return _exec(app)


def show_staged(window) -> None:
    """Show a ``MainWindow(staged=True)`` and build the rest of it on the
    event loop's first turn, after the first paint: input that comes
    meanwhile waits in Qt's queue and finds the whole window."""
    from PySide6.QtCore import QTimer

    window.show()
    window.view.fit_readable()
    QTimer.singleShot(0, window, window.complete_start)


def _screenshot(app, window, path: Path, size: tuple[int, int]) -> int:
    window.resize(*size)
    window.show()
    app.processEvents()
    window.view.fit_readable()
    app.processEvents()
    timing = os.environ.get("SWITCHBOARD_TIMING")  # read by benchmarks/designer_*.py
    if timing:
        import resource
        import time

        heavy = [m for m in ("openai", "anthropic", "httpx", "grpc", "asyncio") if m in sys.modules]
        print(f"switchboard-timing shown {time.time():.6f}", file=sys.stderr)
        print(f"switchboard-timing cpu {time.process_time():.6f}", file=sys.stderr)
        print("switchboard-timing modules " + " ".join(heavy), file=sys.stderr)
        packages = sorted({m.split(".")[1] for m in sys.modules
                           if m.startswith("nodes.") and m.count(".") >= 1})
        print("switchboard-timing node-packages " + " ".join(packages), file=sys.stderr)
        later = [m for m in SECOND_PHASE if m in sys.modules]
        print("switchboard-timing second-phase-modules " + " ".join(later), file=sys.stderr)
        print(f"switchboard-timing rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}",
              file=sys.stderr)
    # The picture is of the whole window: the start's second phase, laid out.
    window.complete_start()
    app.processEvents()
    window.view.fit_readable()
    app.processEvents()
    if timing:
        print(f"switchboard-timing ready {time.time():.6f}", file=sys.stderr)
        print(f"switchboard-timing ready_rss "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
    image = window.grab()
    path.parent.mkdir(parents=True, exist_ok=True)
    ok = image.save(str(path))
    window.autosave.stop()
    window.document.undo_stack.setClean()
    window.close()
    window.deleteLater()
    app.processEvents()
    if not ok:
        print(f"switchboard: cannot write {path}", file=sys.stderr)
        return 1
    return 0


def _exec(app) -> int:
    import asyncio

    try:
        import qasync
    except ImportError:  # the designer still works; runs need qasync
        return app.exec()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    closing = asyncio.Event()
    app.aboutToQuit.connect(closing.set)
    with loop:
        loop.run_until_complete(closing.wait())
    return 0

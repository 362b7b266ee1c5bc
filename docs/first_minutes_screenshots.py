"""Screenshots at 1440x900 of what a newcomer meets first (issue 12): the
empty canvas, the inspector folded before a run and open after it, and a
run's results greyed after an edit. For docs/designer.md.

Run from the repository root: .venv/bin/python docs/first_minutes_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp()  # a first session: no remembered sizes
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.control.run_controller import qt_event_loop
from designer.model.commands import RemoveItems, SetParam
from designer.model.document import FlowDocument
from designer.panels.inspector.inspector import TAB_DEBUG, TAB_TOOLS
from designer.window.main_window import MainWindow
from runtime.spec import ParamValue, Scope

qt_event_loop()
EXAMPLE = "resources/examples/email-assistant.flow.json"


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def window(theme: str, path: str | None = None) -> MainWindow:
    w = MainWindow(FlowDocument.open(path) if path else FlowDocument(), restore_layout=False)
    w.set_theme(theme)
    w.resize(1440, 900)
    w.show()
    settle()
    w.view.fit_all()
    settle()
    return w


def save(w: MainWindow, name: str) -> None:
    settle()
    w.grab().save(f"docs/img/{name}.png")
    print(name)


def run(w: MainWindow) -> None:
    w.run_action.trigger()
    while w.run_session.controller.is_running:
        app.processEvents()
    settle()
    w.view.fit_all()


def close(w: MainWindow) -> None:
    w.document.undo_stack.setClean()
    w.close()


for theme in ("light", "dark"):
    suffix = "" if theme == "light" else "-dark"
    w = window(theme)
    save(w, f"canvas-empty{suffix}")
    close(w)

    w = window(theme, EXAMPLE)
    save(w, f"inspector-before-run{suffix}")
    run(w)
    tools = w.run_session.inspector.tools
    w.run_session.inspector.tabs.setCurrentIndex(TAB_TOOLS)
    tools.tree.expandAll()
    save(w, f"inspector-after-run{suffix}")

    # Edit Send Mail's sender and delete the "Tool calls" debug node.
    doc = w.document
    doc.undo_stack.push(SetParam(doc, "mail", "sender",
                                 ParamValue(scope=Scope.CUSTOM, value="orders@example.com")))
    doc.undo_stack.push(RemoveItems(doc, ["calls"]))
    w.run_session.inspector.tabs.setCurrentIndex(TAB_DEBUG)
    debug = w.run_session.inspector.debug
    debug.list.setCurrentItem(debug.list.topLevelItem(0))  # the greyed line shows unselected
    save(w, f"inspector-stale{suffix}")
    close(w)

"""Screenshots for the runtime's part of issue 12 at 1440x900, light and dark:
the Agent tab with tool-call arguments and results as indented JSON.

Run from the repository root: .venv/bin/python docs/runtime_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.window.main_window import MainWindow
from designer.model.document import FlowDocument
from designer.control.run_controller import qt_event_loop
from designer.panels.inspector.inspector import TAB_NAMES
qt_event_loop()

def settle(n=30):
    for _ in range(n): app.processEvents()

for theme, suffix in (("light", ""), ("dark", "-dark")):
    w = MainWindow(FlowDocument.open("resources/examples/email-assistant.flow.json"),
                   restore_layout=False)
    w.resize(1440, 900); w.show(); w.set_theme(theme); settle()
    w.run_action.trigger()
    while w.run_session.controller.is_running: app.processEvents()
    settle()
    ins = w.run_session.inspector
    ins.tabs.setCurrentIndex(TAB_NAMES.index("Agent")); settle()
    view = ins.agent.view
    # Scroll so that the tool call and its result are in view.
    found = view.document().find("calls send_email")
    cursor = QTextCursor(found)
    view.setTextCursor(cursor)
    bar = view.verticalScrollBar()
    bar.setValue(int(view.cursorRect(cursor).top() + bar.value() - 20))
    cursor.clearSelection(); view.setTextCursor(cursor); settle()
    w.grab().save(f"docs/img/agent-tab-json{suffix}.png"); print(f"agent-tab-json{suffix}")
    w.close(); settle()

"""Screenshots of each inspector tab at 1440x900 for docs/inspecting.md.

Run from the repository root: .venv/bin/python docs/inspector_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
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

def window_for(path):
    w = MainWindow(FlowDocument.open(path), restore_layout=False)
    w.resize(1440, 900); w.show(); settle()
    return w

def run(w):
    w.run_action.trigger()
    while w.run_session.controller.is_running: app.processEvents()
    settle(); w.view.fit_all(); settle()

def shot(w, tab, name):
    ins = w.run_session.inspector
    ins.tabs.setCurrentIndex(TAB_NAMES.index(tab)); settle()
    w.grab().save(f"docs/img/{name}.png"); print(name)

ea = window_for("resources/examples/email-assistant.flow.json")
run(ea)
shot(ea, "Tools", "inspector-tools")
shot(ea, "Agent", "inspector-agent")
shot(ea, "Timeline", "inspector-timeline")
ea.select_node("mail"); settle()
shot(ea, "Messages", "inspector-messages")
ot = window_for("resources/examples/order-triage.flow.json")
run(ot)
d = ot.run_session.inspector.debug
d.list.setCurrentItem(d.list.topLevelItem(1)); d.detail.expandAll()
shot(ot, "Debug", "inspector-debug")
shot(ot, "Problems", "inspector-problems")
shot(ot, "History", "inspector-history")
# try as tool
ea.select_node("mail"); settle()
dlg = ea.run_session.try_tool("mail")
dlg.set_args({"to": "grace@example.com", "subject": "Invoice 42", "body": "Hello Grace,\n\nyour invoice is ready."})
dlg.call_button.click()
while dlg.result is None: app.processEvents()
settle(); dlg.grab().save("docs/img/try-as-tool.png"); print("try")
dlg.set_raw('{"to": "x@example.com", "subject": "s", "body": "b", "smtp_host": "evil.example.com"}')
dlg.result = None; dlg.call_button.click()
while dlg.result is None: app.processEvents()
settle(); dlg.grab().save("docs/img/try-as-tool-refused.png"); print("refused")

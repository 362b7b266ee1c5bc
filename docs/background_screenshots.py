"""Screenshots for issue 14 at 1440x900: the site-crawl example running in
the designer (the first answer streamed in while the crawl goes on, a line
per running tool over the prompt, the crawl's badge), the run's cost when it
ends, and Run > Model Prices.

Run from the repository root: .venv/bin/python docs/background_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import os, sys, tempfile, time
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

def until(cond, seconds=60):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        app.processEvents(); time.sleep(0.005)

w = MainWindow(FlowDocument.open("resources/examples/site-crawl.flow.json"),
               restore_layout=False)
w.resize(1440, 900); w.show(); w.set_theme("light"); settle()
w.view.fit_all(); settle()
w.run_action.trigger()
ins = w.run_session.inspector
ins.tabs.setCurrentIndex(TAB_NAMES.index("Agent")); settle()
tab = ins.agent
tab.set_view("transcript", user=True)
# While the first answer streams in and the crawl reads its pages.
until(lambda: "this takes a few" in tab.view.toPlainText()
      and any("page" in line for line in tab.activity_text()))
settle(10)
w.grab().save("docs/img/background-crawl-running.png"); print("background-crawl-running")
until(lambda: not w.run_session.controller.is_running)
settle()
w.grab().save("docs/img/background-crawl-done.png"); print("background-crawl-done")
d = w.show_prices(); d.resize(760, 560); settle()
d.grab().save("docs/img/model-prices.png"); print("model-prices")
d.close(); w.close(); settle()
os._exit(0)  # the run's worker threads need no orderly end here

"""Screenshot for docs/debugging.md, "Pinned data": the real window at
1440x900 on the email-assistant example after a run whose agent was pinned
(Pin Last Output from the run before): the badge on the agent, its
Properties banner, and the inspector showing the pinned answer.

Run from the repository root: .venv/bin/python docs/pins_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()  # the outbox's mail goes here
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow

EXAMPLE = "resources/examples/email-assistant.flow.json"


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def run_and_wait(window) -> None:
    session = window.run_session
    assert session.run(), "the example did not start"
    while session.controller.is_running:
        app.processEvents()
    settle()


w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900)
w.show()
settle()
w.run_session.pins.use_action.setChecked(True)
run_and_wait(w)  # the agent runs (its scripted model) and sends the mail
assert w.run_session.pins.pin_last_output("agent"), "nothing to pin"
run_and_wait(w)  # now the agent is pinned: its answer comes from the pin
w.select_node("agent")
settle()
w.view.fit_all()
settle()
w.grab().save("docs/img/pinned-node.png")
print("pinned-node")
w.document.undo_stack.setClean()
w.close()
settle()

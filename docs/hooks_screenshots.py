"""Screenshot for docs/hooks.md: the real window at 1440x900 on the hooks
example (the email assistant with a blocking on_tool hook wired and a flow
hook), the agent selected and its Hooks section open.

Run from the repository root: .venv/bin/python docs/hooks_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow

EXAMPLE = "resources/examples/hooks-audit.flow.json"


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900)
w.show()
settle()
w.select_node("agent")
settle()
form = w.properties.form
form.sections["hooks"].set_open(True)
settle()
# The Hooks section in view: the panel scrolled to it.
bar = w.properties.scroll.verticalScrollBar()
bar.setValue(form.sections["hooks"].y() + form.sections["hooks"].height() - bar.pageStep() + 16)
w.view.fit_all()
settle()
w.grab().save("docs/img/hooks.png")
print("hooks")
w.document.undo_stack.setClean()
w.close()
settle()

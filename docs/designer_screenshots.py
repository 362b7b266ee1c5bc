"""Screenshots of the editor at 1440x900 for the README and docs/designer.md.

Run from the repository root: .venv/bin/python docs/designer_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def shot(path: str, selected: str | None, theme: str, name: str) -> None:
    w = MainWindow(FlowDocument.open(path), restore_layout=False)
    w.set_theme(theme)
    w.resize(1440, 900)
    w.show()
    settle()
    w.view.fit_all()
    if selected:
        w.select_node(selected)
    settle()
    w.grab().save(f"docs/img/{name}.png")
    print(name)
    w.document.undo_stack.setClean()
    w.close()


shot("resources/examples/email-assistant.flow.json", "mail", "light", "designer-light")
shot("resources/examples/email-assistant.flow.json", "agent", "dark", "designer-dark")
shot("resources/examples/order-triage.flow.json", "size", "light", "order-triage-light")

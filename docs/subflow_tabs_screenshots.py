"""Screenshot for docs/subflows.md, "Editing subflows": the real window at
1440x900 on resources/examples/order-subflows.flow.json with the definition
of its subflow "shipping" open in its own tab (opened as a user does, by
activating an instance), the breadcrumb under the tabs, and a node inside
selected, so that Properties shows a param taken from the subflow's params
(scope Subflow).

Run from the repository root: .venv/bin/python docs/subflow_tabs_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
os.environ.pop("SWITCHBOARD_SUBFLOWS", None)
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


EXAMPLE = Path("resources/examples/order-subflows.flow.json")
w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900)
w.show()
settle()
w.activate_node(w.document, "ship_express")  # what a double-click does
settle()
tab = w.tabs.current()
assert tab is not None and tab.name == "shipping", "the subflow did not open"
tab.view.fit_all()
inner = next((n.id for n in tab.doc.flow.nodes
              if any(v.scope == "subflow" or "subflow." in str(v.value or "")
                     for v in n.params.values())), None)
if inner:
    tab.scene.select_nodes([inner])
settle()
tab.view.fit_all()
settle()
problems = [str(p) for p in w.document.revalidate() if p.severity == "error"]
if problems:
    print("the flow has problems:", *problems, sep="\n  ")
settle()
w.grab().save("docs/img/subflows-editing.png")
print("subflows-editing:", w.tabs.breadcrumb_text())
w.document.undo_stack.setClean()
w.close()
settle()

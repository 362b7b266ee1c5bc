"""Screenshots of a template param and its live preview at 1440x900, light
and dark, for docs/scopes.md: the order-mails example after a run, Send Mail
selected, its subject a template previewed against the last order it got.

Run from the repository root: .venv/bin/python docs/expressions_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, I001 - a linear script, read top to bottom
import os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication, QScrollArea
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.window.main_window import MainWindow
from designer.model.document import FlowDocument
from designer.control.run_controller import qt_event_loop
qt_event_loop()
os.chdir(tempfile.mkdtemp())  # the example writes its mails to ./outbox
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "resources", "examples", "order-mails.flow.json")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "img")


def settle(n=30):
    for _ in range(n): app.processEvents()


def shot(theme, name, typo=False):
    w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
    w.set_theme(theme)
    w.resize(1440, 900); w.show(); settle()
    w.run_action.trigger()
    while w.run_session.controller.is_running: app.processEvents()
    settle()
    w.select_node("mail"); settle()
    w.view.fit_all(); settle()
    row = w.properties.form.rows["subject"]
    if typo:
        edit = row.expression_editor.edit
        edit.setPlainText(edit.toPlainText().replace("msg.payload.order", "msg.payload.ordr"))
    row.expression_editor.edit.setFocus()
    settle()
    for area in w.properties.findChildren(QScrollArea):  # the subject's preview in view
        if area.widget() is not None and area.widget().isAncestorOf(row):
            area.ensureWidgetVisible(row.expression_editor.preview_box, 0, 24)
    settle()
    w.grab().save(os.path.join(OUT, f"{name}.png")); print(name)
    w.document.undo_stack.setClean()
    w.close()


shot("light", "expression-preview")
shot("dark", "expression-preview-dark")
shot("light", "expression-error", typo=True)

"""Screenshots at 1440x900 for docs/debugging.md, "Re-run and compare in the
designer": the email assistant after a run, the mail node's menu open on
Run from Here and the dialog that edits the call's subject
(run-from-here.png); then History comparing that run with the rerun
(run-diff.png). Real runs: the example's scripted agent, its mail written
to the outbox folder of a throwaway data dir.

A menu and a dialog are windows of their own; offscreen, the window's grab
does not hold them, so they are painted onto it where they stand.

Run from the repository root: .venv/bin/python docs/rerun_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication, QPoint, QRect, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.look import theme
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from designer.running.rerun_actions import FROM_HERE_CHANGED, RerunDialog
from designer.control.run_controller import qt_event_loop
qt_event_loop()
OUT = sys.argv[1] if len(sys.argv) > 1 else "docs/img"
EXAMPLE = "resources/examples/email-assistant.flow.json"


def settle(n=30):
    for _ in range(n): app.processEvents()


def until(test):
    while not test(): app.processEvents()


def run_and_wait(w, start):
    assert start() is not False, "the run did not start"
    until(lambda: not w.run_session.controller.is_running)
    settle()


def paint_over(shot, widget, at, title=""):
    """``widget`` (a top-level of its own) painted onto ``shot`` at ``at``,
    in window coordinates; with ``title``, under a plain title bar, as a
    window manager would frame a dialog."""
    t = theme.current()
    painter = QPainter(shot)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    bar = 30 if title else 0
    frame = QRect(at.x(), at.y() - bar, widget.width(), widget.height() + bar)
    for i, alpha in enumerate((40, 26, 14, 6)):  # a soft shadow
        painter.fillRect(frame.adjusted(-i - 1, -i + 1, i + 1, i + 3), QColor(0, 0, 0, alpha))
    if title:
        painter.fillRect(QRect(frame.x(), frame.y(), frame.width(), bar), QColor(t.panel))
        painter.setPen(QColor(t.text))
        painter.drawText(QRect(frame.x(), frame.y(), frame.width(), bar),
                         Qt.AlignmentFlag.AlignCenter, title)
    painter.drawPixmap(at, widget.grab())
    painter.setPen(QColor(t.border))
    painter.drawRect(frame.adjusted(0, 0, -1, -1))
    painter.end()


w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900); w.show(); settle()
w.properties_dock.hide()  # the canvas, the menu and the inspector are the story
session = w.run_session
run_and_wait(w, session.run)  # the agent asks send_email to mail John
first = session.controller.engine.run_id
w.view.fit_all(); settle()  # in the canvas the inspector left
bar = w.view.horizontalScrollBar()
bar.setValue(bar.value() + 230); settle()  # the flow to the left: room for the menu

# -- run-from-here.png: the mail node's menu, and the call's subject edited -------------
w.scene.select_nodes(["mail"]); settle()  # (select_node would scroll to it)
item = w.scene.item_for_node("mail")
corner = w.view.mapFromScene(item.sceneBoundingRect().topRight())
menu_at = w.view.viewport().mapTo(w, corner) + QPoint(12, -40)
menu = w.build_node_menu("mail")
for action in menu.actions():
    if action.text() == FROM_HERE_CHANGED:
        menu.setActiveAction(action)
menu.popup(w.mapToGlobal(menu_at)); settle()
[changed] = [a for a in menu.actions() if a.text() == FROM_HERE_CHANGED]
changed.trigger()
menu.hide(); settle()
[dialog] = [d for d in w.findChildren(RerunDialog) if d.isVisible()]
args = dialog.editor.value()
dialog.set_value({**args, "subject": "Shipped today: order A-1001"})
dialog.resize(620, dialog.layout().totalHeightForWidth(620)); settle()
shot = w.grab()
menu.popup(w.mapToGlobal(menu_at)); settle()
menu.setActiveAction(changed); settle()
paint_over(shot, menu, menu_at)
menu.hide()
# Below the flow, over the inspector, clear of the menu and the node.
paint_over(shot, dialog, QPoint(250, 900 - dialog.height() - 56), dialog.windowTitle())
shot.save(f"{OUT}/run-from-here.png"); print("run-from-here")

# -- run-diff.png: History compares the run with the rerun of its mail ---------------------
run_and_wait(w, dialog.start)
second = session.controller.engine.run_id
history = session.inspector.history_tab
session.inspector.tabs.setCurrentWidget(history); settle()
history.select_run(second); settle()
compare = history.compare_selected()
assert compare.view.pair.a.run_id == first, "not compared with its origin"
compare.resize(1240, 780); settle()
shot = w.grab()
paint_over(shot, compare, QPoint((1440 - compare.width()) // 2, 70), compare.windowTitle())
shot.save(f"{OUT}/run-diff.png"); print("run-diff")

compare.close(); settle()
w.document.undo_stack.setClean(); w.close(); settle()

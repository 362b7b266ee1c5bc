"""Screenshots at 1440x900 for docs/debugging.md: a message paused at a
breakpoint, edited in the inspector's Paused tab (paused-message.png), and
the email assistant's tool call paused before Send Mail runs, its subject
being edited (paused-tool-call.png). Real runs, held by real breakpoints.

Run from the repository root: .venv/bin/python docs/debugging_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import json, os, sys, tempfile
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from designer.control.run_controller import qt_event_loop
qt_event_loop()
OUT = sys.argv[1] if len(sys.argv) > 1 else "docs/img"


def settle(n=30):
    for _ in range(n): app.processEvents()


def until(test):
    while not test(): app.processEvents()


def shown(w, node_id):
    """Until the node's line under the card says it waits (the inspector and
    canvas get a run's events in batches, every 100 ms)."""
    item = w.scene.item_for_node(node_id)
    until(lambda: "paused" in item.run_state_text())


def window(path):
    w = MainWindow(FlowDocument.open(path), restore_layout=False)
    w.set_theme("light")
    w.resize(1440, 900); w.show(); settle()
    w.properties_dock.hide()  # the canvas and the Paused tab are the story here
    settle()
    return w


def done(w):
    debugging = w.run_session.debugging
    debugging.continue_all()
    until(lambda: not w.run_session.controller.is_running)
    settle(); w.document.undo_stack.setClean(); w.close(); settle()


# -- a message paused at a breakpoint, its payload being edited -------------------------
w = window("resources/examples/order-triage.flow.json")
debugging = w.run_session.debugging
debugging.store.set_node("warehouse")  # Delay: where every tagged order goes
debugging.store.set_node("tag-large", "msg.payload.total > 1000")  # a conditional one
w.view.fit_all(); settle()
assert w.run_session.run()
until(lambda: len(debugging.held()) >= 2)
shown(w, "warehouse"); settle()
held = debugging.held()[0]
tab = debugging.tab
view = held.view()
view["payload"]["note"] = "rush: checked by hand"
tab.editor.text_edit.setPlainText(json.dumps(view, indent=2, ensure_ascii=False))
w.view.fit_all(); settle()  # again: the Paused tab took part of the canvas's height
w.grab().save(f"{OUT}/paused-message.png"); print("paused-message")
done(w)

# -- the agent's tool call paused before Send Mail runs -----------------------------------
w = window("resources/examples/email-assistant.flow.json")
debugging = w.run_session.debugging
debugging.store.set_node("mail")
w.view.fit_all(); settle()
assert w.run_session.run()
until(lambda: len(debugging.held()) >= 1)
shown(w, "mail"); settle()
held = debugging.held()[0]
view = dict(held.view(), subject="Order A-1001 shipped today")
debugging.tab.editor.text_edit.setPlainText(json.dumps(view, indent=2, ensure_ascii=False))
settle()
w.grab().save(f"{OUT}/paused-tool-call.png"); print("paused-tool-call")
done(w)

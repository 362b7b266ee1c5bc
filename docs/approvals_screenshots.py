"""Screenshots of the approval and question cards at 1440x900, light and
dark, for docs/tools.md: the triage-delegation example waiting for the
outside recipient's approval, and an agent's question.

Run from the repository root: .venv/bin/python docs/approvals_screenshots.py"""
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
from runtime.flow import parse_flow
from designer.panels.inspector.inspector import TAB_NAMES
qt_event_loop()
OUT = sys.argv[1] if len(sys.argv) > 1 else "docs/img"

def settle(n=30):
    for _ in range(n): app.processEvents()

def spin(seconds):  # the run's events reach the inspector in batches, every 100 ms
    end = time.monotonic() + seconds
    while time.monotonic() < end: app.processEvents()

def window_for(doc, theme):
    w = MainWindow(doc, restore_layout=False)
    w.set_theme(theme)
    w.resize(1440, 900); w.show(); settle()
    return w

def wait_card(w):
    cards = w.run_session.inspector.cards
    while not cards.cards(): app.processEvents()
    spin(0.6); w.view.fit_all(); settle()
    return cards.cards()[0]

def stop(w):
    w.run_session.stop()
    while w.run_session.controller.is_running: app.processEvents()
    settle(); w.close(); settle()

ask_flow = parse_flow({"format": "switchboard.flow/1", "name": "Carrier question", "nodes": [
    {"id": "ask", "type": "core.inject", "name": "Order", "position": [80, 120], "params": {
        "payload": {"scope": "custom", "value": "Ship order A-1001 (2 chairs, 31 kg) to Eve"}}},
    {"id": "agent", "type": "ai.agent", "name": "Shipping agent", "position": [320, 120],
     "params": {"provider": {"scope": "custom", "value": "scripted"},
                "script": {"scope": "custom", "value": [
                    {"tool_calls": [{"name": "ask_human", "arguments": {
                        "question": "Order A-1001 weighs 31 kg, over the 30 kg DHL parcel limit. "
                                    "Which carrier should I book?",
                        "choices": ["DHL freight", "UPS", "Customer picks up"]}}]},
                    {"text": "Booked: {last_result}"}]}}},
    {"id": "show", "type": "core.debug", "name": "Answer", "position": [580, 120]},
    {"id": "human", "type": "ai.ask_human", "name": "Ask Human", "position": [580, 260],
     "params": {"question": {"scope": "ai"}, "choices": {"scope": "ai"}}}],
    "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
              {"from": ["agent", "out"], "to": ["show", "in"]},
              {"from": ["agent", "tools"], "to": ["human", "in"]}]})

for theme, suffix in (("light", ""), ("dark", "-dark")):
    w = window_for(FlowDocument.open("resources/examples/triage-delegation.flow.json"), theme)
    w.run_action.trigger()
    card = wait_card(w)
    w.run_session.inspector.tabs.setCurrentIndex(TAB_NAMES.index("Agent")); settle()
    w.grab().save(f"{OUT}/approval-card{suffix}.png"); print("approval-card" + suffix)
    card.start_editing(); card.fields["to"].editor.setText("eve at example"); settle()
    card.fields["subject"].editor.setText("Your order A-1001 is on its way")
    card.fields["to"].editor.setText("eve@example.com, sales@ourcompany.com"); settle()
    spin(0.2)
    w.run_session.inspector.cards.grab().save(f"{OUT}/approval-card-edit{suffix}.png")
    print("approval-card-edit" + suffix)
    stop(w)
    w = window_for(FlowDocument(ask_flow), theme)
    w.run_action.trigger()
    wait_card(w)
    w.grab().save(f"{OUT}/approval-card-question{suffix}.png"); print("question" + suffix)
    stop(w)

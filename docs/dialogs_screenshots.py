"""Screenshots at 1440x900 for docs/credentials.md, light and dark: the
Credentials dialog over the window after a Test connection against a local
OpenAI-compatible server, the scripted turns editor, and a Send Mail node
pasted twice (numbered, cascading).

Run from the repository root: .venv/bin/python docs/dialogs_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import http.server
import json
import os
import sys
import tempfile
import threading

os.environ["QT_QPA_PLATFORM"] = "offscreen"
home = tempfile.mkdtemp()
os.environ["SWITCHBOARD_DATA_DIR"] = os.path.join(home, ".local", "share", "switchboard")
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"
os.environ.pop("OPENAI_API_KEY", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication, QPoint, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath
from PySide6.QtWidgets import QApplication, QFrame, QLabel, QVBoxLayout

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.panels.turns_editor import TurnsEditor
from designer.window.main_window import MainWindow
from runtime import credentials
from runtime.flow import parse_flow

MODELS = ["llama3.2:3b", "qwen2.5:7b-instruct", "mistral-nemo:12b"]


class Models(http.server.BaseHTTPRequestHandler):
    """GET /v1/models as Ollama's OpenAI-compatible API answers it."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"object": "list", "data": [
            {"id": m, "object": "model", "created": 1730000000, "owned_by": "library"}
            for m in MODELS]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


try:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 11434), Models)
except OSError:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
threading.Thread(target=server.serve_forever, daemon=True).start()
BASE_URL = f"http://127.0.0.1:{server.server_port}/v1"

for name, secret in (("openai", "sk-demo-1"), ("ollama-local", "ollama"),
                     ("smtp-work", "hunter2")):
    credentials.set(name, secret)

FLOW = {
    "format": "switchboard.flow/1",
    "name": "Email assistant",
    "nodes": [
        {"id": "ask", "type": "core.inject", "name": "Ask", "position": [80, 120],
         "params": {"payload": {"scope": "custom",
                                "value": "Tell john@example.com his order shipped"}}},
        {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [340, 120],
         "params": {"provider": {"scope": "custom", "value": "scripted"},
                    "script": {"scope": "custom", "value": [
                        {"tool_calls": [{"name": "send_email", "arguments": {
                            "to": "john@example.com", "subject": "Your order shipped",
                            "body": "Hello John, your order is on its way."}}]},
                        {"text": "Done: {last_result}"}]}}},
        {"id": "show", "type": "core.debug", "name": "Answer", "position": [620, 120]},
        {"id": "mail", "type": "mail.send", "position": [620, 300],
         "params": {"to": {"scope": "ai"}, "subject": {"scope": "ai"}, "body": {"scope": "ai"},
                    "delivery": {"scope": "custom", "value": "outbox"}}},
    ],
    "wires": [
        {"from": ["ask", "out"], "to": ["agent", "in"]},
        {"from": ["agent", "out"], "to": ["show", "in"]},
        {"from": ["agent", "tools"], "to": ["mail", "in"]},
    ],
}


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def over(shot, pane):
    """Offscreen, a window grab has no dialog in it: lay the dialog's own
    grab over the window's, centred, with a soft shadow."""
    at = QPoint((shot.width() - pane.width()) // 2, (shot.height() - pane.height()) // 2)
    p = QPainter(shot)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.fillRect(shot.rect(), QColor(0, 0, 0, 40))
    for i in range(12, 0, -1):
        shadow = QPainterPath()
        shadow.addRoundedRect(QRectF(at.x() - i, at.y() - i + 6, pane.width() + 2 * i,
                                     pane.height() + 2 * i), 10 + i, 10 + i)
        p.fillPath(shadow, QColor(0, 0, 0, 6))
    p.drawPixmap(at, pane)
    p.setPen(QColor(0, 0, 0, 60))
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawRect(QRectF(at.x() - 0.5, at.y() - 0.5, pane.width(), pane.height()))
    p.end()
    return shot


path = os.path.join(home, "email-assistant.flow.json")
with open(path, "w", encoding="utf-8") as f:
    f.write(parse_flow(FLOW).dumps())

for mode, suffix in (("light", ""), ("dark", "-dark")):
    w = MainWindow(FlowDocument.open(path), restore_layout=False)
    w.set_theme(mode)
    w.resize(1440, 900)
    w.show()
    settle()
    w.view.fit_all()
    settle()

    # Credentials, after a Test connection with the local server's key.
    dialog = w.show_credentials()
    settle()
    w.view.fit_all()  # the docks have their final sizes only now
    dialog.names.setCurrentRow(dialog.stored_names().index("ollama-local"))
    dialog.base_url_edit.setText(BASE_URL)
    done = []
    dialog.test_finished.connect(lambda models, error, done=done: done.append((models, error)))
    dialog.test_connection()
    while not done:
        app.processEvents()
    settle()
    if done[0][1]:
        sys.exit(f"test connection failed: {done[0][1]}")
    over(w.grab(), dialog.grab()).save(f"docs/img/credentials-dialog{suffix}.png")
    print(f"credentials-dialog{suffix}")
    dialog.close()

    # Copy Send Mail, paste twice: numbered, a step apart.
    w.scene.select_nodes(["mail"])
    w.editor.copy_selection()
    w.editor.paste()
    w.editor.paste()
    settle()
    w.view.fit_all()
    settle()
    w.grab().save(f"docs/img/paste-numbered{suffix}.png")
    print(f"paste-numbered{suffix}")
    w.document.undo_stack.setClean()
    w.close()
    settle()

    # The turns editor as it sits in the agent's properties.
    frame = QFrame()
    frame.setObjectName("propertiesPanel")
    frame.setAutoFillBackground(True)
    lay = QVBoxLayout(frame)
    lay.setContentsMargins(14, 12, 14, 14)
    title = QLabel("<b>Script</b> &nbsp;<span style='color: palette(placeholder-text)'>"
                   "scripted provider: the turns to play</span>")
    lay.addWidget(title)
    editor = TurnsEditor(FLOW["nodes"][1]["params"]["script"]["value"], ["send_email"])
    lay.addWidget(editor)
    frame.resize(400, 10)
    frame.show()
    settle()
    editor.table.selectRow(0)
    frame.resize(400, frame.sizeHint().height())
    settle()
    frame.grab().save(f"docs/img/turns-editor{suffix}.png")
    print(f"turns-editor{suffix}")
    frame.close()

server.shutdown()

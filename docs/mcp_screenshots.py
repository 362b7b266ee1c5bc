"""Screenshot at 1440x900 for docs/mcp.md: the email-assistant example with
"Serve Tools over MCP…" open on its agent, after an MCP client (the SDK's
own, on a thread) made a good call and a hostile one; the inspector's Tools
tab lists both.

Run from the repository root: .venv/bin/python docs/mcp_screenshots.py"""
# ruff: noqa: E401, E402, E701, E702, E731, I001 - a linear script, read top to bottom
import os, sys, tempfile, threading
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication, QPoint, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath
from PySide6.QtWidgets import QApplication
QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
import anyio, httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from designer.running.mcp_dialog import open_mcp_dialog
from designer.panels.inspector.inspector import TAB_NAMES
from designer.control.run_controller import qt_event_loop
qt_event_loop()
OUT = sys.argv[1] if len(sys.argv) > 1 else "docs/img"

def settle(n=30):
    for _ in range(n): app.processEvents()

def client(url, token, done):
    async def talk():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as s:
            await s.initialize()
            await s.list_tools()
            await s.call_tool("send_email", {"to": "john@example.com",
                                             "subject": "Your order A-1001 has shipped",
                                             "body": "Hello John, your order shipped today."})
            await s.call_tool("send_email", {"to": "john@example.com", "subject": "Hi",
                                             "body": "x", "smtp_host": "mail.evil.example"})
    threading.Thread(target=lambda: (anyio.run(talk), done.append(True)), daemon=True).start()

def over(shot, pane, at):
    """Offscreen, a window grab has no dialog in it: lay the dialog's own
    grab over the window's at ``at``, with a soft shadow."""
    p = QPainter(shot)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    for i in range(12, 0, -1):
        shadow = QPainterPath()
        shadow.addRoundedRect(QRectF(at.x() - i, at.y() - i + 6, pane.width() + 2 * i,
                                     pane.height() + 2 * i), 10 + i, 10 + i)
        p.fillPath(shadow, QColor(0, 0, 0, 6))
    p.drawPixmap(at, pane)
    p.setPen(QColor(0, 0, 0, 60)); p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawRect(QRectF(at.x() - 0.5, at.y() - 0.5, pane.width(), pane.height()))
    p.end()
    return shot

w = MainWindow(FlowDocument.open("resources/examples/email-assistant.flow.json"),
               restore_layout=False)
w.set_theme("light")
w.resize(1440, 900); w.show(); settle()
w.view.fit_all(); settle()
w.select_node("agent"); settle()
dialog = open_mcp_dialog(w.run_session, "agent")
settle()
done = []
client(dialog.url, dialog.token, done)
while not done: app.processEvents()
inspector = w.run_session.inspector
inspector.tabs.setCurrentIndex(TAB_NAMES.index("Tools"))
while len(inspector.tools.calls_shown()) < 2:
    app.processEvents(); inspector.tools.refresh()
settle()
# The flow on the canvas's left, the dialog over its right and the
# Properties panel, clear of the inspector's Tools tab below.
nodes = w.scene.nodes_rect()
nodes.setRight(nodes.right() + nodes.width() * 0.6)
w.view.fit_rect(nodes); settle()
shot = w.grab()
pane = dialog.grab()
at = QPoint(shot.width() - pane.width() - 24, 96)
over(shot, pane, at).save(f"{OUT}/mcp-serve.png"); print("mcp-serve")
dialog.stop()
while w.run_session.controller.is_running: app.processEvents()
settle(); dialog.close(); w.document.undo_stack.setClean(); w.close(); settle()

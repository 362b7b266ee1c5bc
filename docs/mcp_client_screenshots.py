"""Screenshot at 1440x900 for docs/mcp.md ("Using an MCP server's tools"): an agent whose tools port is
wired to an MCP Server node (the demo server of the tests, over stdio), the
node selected, its tools listed by the real List tools, lookup_order renamed
to find_order with its region fixed by the designer (Custom), crash not
offered.

Run from the repository root: .venv/bin/python docs/mcp_client_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.control.run_controller import qt_event_loop
from designer.model.document import FlowDocument
from designer.panels.mcp_tool_cell import COL_TOOL
from designer.window.main_window import MainWindow
from runtime.flow import parse_flow
from runtime.spec import Scope

qt_event_loop()
OUT = sys.argv[1] if len(sys.argv) > 1 else "docs/img"


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def fixed(value):
    return {"scope": "custom", "value": value}


flow = parse_flow({
    "format": "switchboard.flow/1", "name": "Order desk",
    "nodes": [
        {"id": "ask", "type": "core.inject", "name": "Question", "position": [60, 160],
         "params": {"payload": fixed("Where is order A-17?")}},
        {"id": "agent", "type": "ai.agent", "name": "Order agent", "position": [320, 160],
         "params": {"provider": fixed("openai"), "model": fixed("gpt-4o-mini"),
                    "instructions": fixed("You answer questions about orders.")}},
        {"id": "show", "type": "core.debug", "name": "Answer", "position": [600, 160]},
        {"id": "orders", "type": "mcp.server", "name": "Order system", "position": [600, 320],
         "params": {"command": fixed(".venv/bin/python"),
                    "args": fixed(["tests/servers/mcp_demo.py", "stdio"])}},
    ],
    "wires": [{"from": ["ask", "out"], "to": ["agent", "in"]},
              {"from": ["agent", "out"], "to": ["show", "in"]},
              {"from": ["agent", "tools"], "to": ["orders", "in"]}]})

w = MainWindow(FlowDocument(flow), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900)
w.show()
settle()
# A wider Properties dock: the tools table reads better at 460 px.
w.resizeDocks([w.properties_dock], [460], Qt.Orientation.Horizontal)
settle()
w.view.fit_all()
w.select_node("orders")
settle()

section = w.properties.form.mcp_tools
task = section.list_tools()
while not task.done():
    app.processEvents()
assert section.error.isHidden(), section.error.text()
table = section.table
rows = {table.item(r, COL_TOOL).data(Qt.ItemDataRole.UserRole): r
        for r in range(table.rowCount())}
table.item(rows["crash"], COL_TOOL).setCheckState(Qt.CheckState.Unchecked)
table.selectRow(rows["lookup_order"])
settle()
section.rename_edit.setText("find_order")
section.rename_edit.editingFinished.emit()
region = section.arg_rows["region"]
region.switch.buttons[Scope.CUSTOM].click()
region.value_editor.edit.setText("eu-west")
region.value_editor.edit.textEdited.emit("eu-west")
settle()
w.view.fit_all()
bar = w.properties.scroll.verticalScrollBar()
bar.setValue(section.y() - 8)
settle()
w.grab().save(f"{OUT}/mcp-client.png")
print("mcp-client")
w.document.undo_stack.setClean()
w.close()
settle()

"""The MCP Server node's Tools section, through real widgets and the real demo
MCP server (tests/servers/mcp_demo.py, started by List tools): every edit
lands in the flow's ``tools`` param as one command on the undo stack, and
what the agent's LLM is offered follows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFrame, QLabel

from designer.model.document import FlowDocument
from designer.panels import PropertiesPanel
from designer.panels.mcp_tool_cell import COL_TOOL
from nodes.mcp.entries import parse_entries
from runtime.flow import Flow, FlowNode, Wire
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from runtime.tools import agent_tool_specs

DEMO = str(Path(__file__).parents[1] / "servers" / "mcp_demo.py")


def demo_flow(args: list[str] | None = None) -> Flow:
    """An agent whose tools port is wired to the demo server (stdio)."""
    return Flow(name="MCP", nodes=[
        FlowNode(id="agent", type="ai.agent", position=(0, 0),
                 params={"provider": ParamValue(scope=Scope.CUSTOM, value="scripted")}),
        FlowNode(id="demo", type="mcp.server", name="demo", position=(260, 120), params={
            "command": ParamValue(scope=Scope.CUSTOM, value=sys.executable),
            "args": ParamValue(scope=Scope.CUSTOM, value=args or [DEMO, "stdio"])}),
    ], wires=[Wire.model_validate({"from": ["agent", "tools"], "to": ["demo", "in"]})])


@pytest.fixture
def doc():
    return FlowDocument(demo_flow(), Registry.default())


@pytest.fixture
def panel(qtbot, doc):
    p = PropertiesPanel(doc)
    qtbot.addWidget(p)
    p.resize(420, 900)
    p.show()
    p.set_node("demo")
    return p


def entries(doc):
    return {e.name: e for e in parse_entries(doc.node("demo").params["tools"].value)[0]}


def offered(doc) -> dict[str, dict]:
    return {f["function"]["name"]: f["function"]["parameters"]
            for f in agent_tool_specs(doc.flow, doc.registry)["agent"]}


def list_tools(qtbot, section) -> None:
    qtbot.mouseClick(section.list_button, Qt.MouseButton.LeftButton)
    assert not section.list_button.isEnabled()  # one listing at a time
    qtbot.waitUntil(lambda: section.task is not None and section.task.done(), timeout=60_000)


def row_of(section, name: str) -> int:
    table = section.table
    return next(r for r in range(table.rowCount())
                if table.item(r, COL_TOOL).data(Qt.ItemDataRole.UserRole) == name)


def test_list_tools_fills_the_table_and_is_one_undo_step(qtbot, panel, doc):
    section = panel.form.mcp_tools
    assert section is not None and "tools" not in panel.form.rows  # the section edits it
    assert panel.form.tool_box is None  # no one-tool section for a node of several
    assert section.status.text() == "No tools listed yet" and section.table.isHidden()

    list_tools(qtbot, section)
    assert section.error.isHidden(), section.error.text()
    assert section.status.text() == "Listed: 5 tools."
    assert section.table.rowCount() == 5
    assert doc.undo_stack.undoText() == "List tools"
    assert set(offered(doc)) == {"add", "lookup_order", "slow", "crash", "fail"}
    doc.undo_stack.undo()
    assert section.table.rowCount() == 0 and offered(doc) == {}
    doc.undo_stack.redo()
    assert section.table.rowCount() == 5


def test_enable_rename_pin_and_approve_through_the_widgets(qtbot, panel, doc):
    section = panel.form.mcp_tools
    list_tools(qtbot, section)
    table = section.table

    # Disable a tool: the checkbox in the table.
    table.item(row_of(section, "crash"), COL_TOOL).setCheckState(Qt.CheckState.Unchecked)
    assert entries(doc)["crash"].enabled is False and "crash" not in offered(doc)
    assert doc.undo_stack.undoText() == "Stop offering crash"

    # Rename: a double-click on the row goes to its Name for the AI.
    row = row_of(section, "lookup_order")
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualItemRect(table.item(row, COL_TOOL)).center())
    QApplication.processEvents()  # the selected tool's settings come below the table
    qtbot.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton,
                      pos=table.visualItemRect(table.item(row, COL_TOOL)).center())
    assert section.rename_edit.hasFocus() and section.rename_edit.selectedText() == ""
    qtbot.keyClicks(section.rename_edit, "find_order")
    qtbot.keyClick(section.rename_edit, Qt.Key.Key_Return)
    assert entries(doc)["lookup_order"].rename == "find_order"
    assert "find_order" in offered(doc) and "lookup_order" not in offered(doc)
    assert section.detail_title.text() == "find_order()"

    # Pin region: the Custom scope of its row, then its value typed in.
    region = section.arg_rows["region"]
    assert set(section.arg_rows) == {"order_id", "region"}
    assert region.switch.buttons[Scope.MESSAGE].isHidden()
    qtbot.mouseClick(region.switch.buttons[Scope.CUSTOM], Qt.MouseButton.LeftButton)
    region.value_editor.edit.setFocus()
    qtbot.keyClicks(region.value_editor.edit, "eu-west")
    assert entries(doc)["lookup_order"].pinned == {"region": "eu-west"}
    assert set(offered(doc)["find_order"]["properties"]) == {"order_id"}
    assert region.value_editor.edit.hasFocus()  # the form was not rebuilt under the typing
    assert not [p for p in doc.problems_for("demo") if p.severity == "error"]

    # Custom alone pinned nothing (no value yet); the typing was one step:
    # undo it and the AI fills region again.
    assert doc.undo_stack.undoText() == "Fix region of lookup_order"
    doc.undo_stack.undo()
    assert entries(doc)["lookup_order"].pinned == {}
    assert region.switch.scope() is Scope.AI
    assert set(offered(doc)["find_order"]["properties"]) == {"order_id", "region"}
    doc.undo_stack.redo()
    assert entries(doc)["lookup_order"].pinned == {"region": "eu-west"}

    # Approval: every call of find_order waits for a person; a call limit.
    section.mode.setCurrentIndex(section.mode.findData("always"))
    section.mode.activated.emit(section.mode.currentIndex())
    assert entries(doc)["lookup_order"].approval.mode == "always"
    assert "Asks for every call" in section.policy_text.text()
    section.per_run.setValue(3)
    assert entries(doc)["lookup_order"].max_calls_per_run == 3

    # The agent's preview says the same: region fixed by the designer, the approval.
    panel.set_node("agent")
    cards = {c.findChild(QLabel, "toolName").text(): " ".join(w.text() for w in c.findChildren(
        QLabel)) for c in panel.form.cards_box.findChildren(QFrame, "toolCard")}
    assert set(cards) == {"add()", "find_order()", "slow()", "fail()"}
    assert "Fixed by you</b> &nbsp;region" in cards["find_order()"]
    assert "Asks for every call" in cards["find_order()"]
    assert "at most 3 per run" in cards["find_order()"]
    panel.set_node("demo")
    section = panel.form.mcp_tools

    # A second listing keeps every choice.
    list_tools(qtbot, section)
    kept = entries(doc)
    assert kept["crash"].enabled is False and kept["lookup_order"].rename == "find_order"
    assert kept["lookup_order"].pinned == {"region": "eu-west"}
    assert kept["lookup_order"].approval.mode == "always"


def test_a_server_that_cannot_start_says_why_under_the_button(qtbot, tmp_path):
    doc = FlowDocument(demo_flow([str(tmp_path / "no-such-server.py")]), Registry.default())
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("demo")
    section = panel.form.mcp_tools
    list_tools(qtbot, section)
    assert section.list_button.isEnabled()
    assert section.error.text().startswith("cannot connect to MCP server 'demo'")
    assert "no-such-server.py" in section.error.text()  # python's own words, from stderr
    assert doc.undo_stack.count() == 0


def test_two_servers_with_one_tool_name_cannot_both_be_wired(doc):
    tools = ParamValue(scope=Scope.CUSTOM, value=[
        {"name": "add", "input_schema": {"type": "object"}}])
    doc.flow.nodes[1].params["tools"] = tools
    doc.insert_node(FlowNode(id="other", type="mcp.server", params={"tools": tools}))
    ok, why = doc.can_connect("agent", "tools", "other", "in")
    assert not ok and why == "the agent already has a tool named 'add'; rename one in its " \
                             "properties"

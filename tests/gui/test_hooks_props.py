"""An agent's hooks in the designer: the Hooks section of its Properties
(the "Wait for …" switches and the flow hooks of settings.hooks, every edit
one undo step), and its hook ports on the canvas, drawn along the bottom
without crowding each other or the tools port."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QRectF, Qt

from designer.canvas.items import NODE_W, look_for, style
from designer.canvas.scene import FlowScene
from designer.model.document import FlowDocument
from designer.panels.properties import PropertiesPanel
from runtime.flow import FlowHook, load_flow, save_flow
from runtime.registry import Registry

REG = Registry.default()
EXAMPLE = Path(__file__).resolve().parents[2] / "resources" / "examples" / "hooks-audit.flow.json"


@pytest.fixture
def doc():
    return FlowDocument.open(EXAMPLE, REG)


@pytest.fixture
def panel(qtbot, doc):
    p = PropertiesPanel(doc)
    qtbot.addWidget(p)
    p.resize(380, 860)
    p.show()
    p.set_node("agent")
    p.form.sections["hooks"].set_open(True)
    return p


def pick(combo, data):
    i = combo.findData(data)
    assert i >= 0, data
    combo.setCurrentIndex(i)
    combo.activated.emit(i)


def test_the_wait_switch_of_a_hook_is_one_undoable_edit(qtbot, panel, doc):
    form = panel.form
    assert "hooks" in form.sections
    assert [n for n in form.rows if n.startswith("block_")] == [
        "block_on_start", "block_on_turn", "block_on_tool", "block_on_end"]
    box = form.rows["block_on_turn"].value_editor.box
    assert not box.isChecked()
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert doc.node("agent").params["block_on_turn"].value is True
    doc.undo_stack.undo()
    assert "block_on_turn" not in doc.node("agent").params
    assert not box.isChecked()
    # The example's own switch shows as set.
    assert form.rows["block_on_tool"].value_editor.box.isChecked()


def test_flow_hooks_are_added_changed_and_removed_through_the_undo_stack(qtbot, panel, doc):
    editor = panel.form.flow_hooks
    assert editor is not None
    [row] = editor.rows  # the example's: on_tool -> log, all agents, not waiting
    assert (row.port.currentData(), row.node.currentData(), row.agents.currentData(),
            row.blocking.isChecked()) == ("on_tool", "log", "all", False)
    # Agents cannot start a hook flow; nodes with an input can.
    offered = [row.node.itemData(i) for i in range(row.node.count())]
    assert "agent" not in offered and "ask" not in offered and "check" in offered

    qtbot.mouseClick(editor.add_button, Qt.MouseButton.LeftButton)
    assert len(doc.flow.settings.hooks) == 2 and len(editor.rows) == 2
    new = editor.rows[1]
    assert new.isVisible()  # made after the panel was shown, and shown too
    pick(new.port, "on_end")
    pick(new.node, "show")
    pick(new.agents, "this")
    qtbot.mouseClick(new.blocking, Qt.MouseButton.LeftButton)
    assert doc.flow.settings.hooks[1] == FlowHook(port="on_end", node="show", agents=["agent"],
                                                  blocking=True)
    doc.undo_stack.undo()  # the wait switch
    assert doc.flow.settings.hooks[1].blocking is False
    assert not editor.rows[1].blocking.isChecked()
    qtbot.mouseClick(editor.rows[0].remove, Qt.MouseButton.LeftButton)
    assert [h.node for h in doc.flow.settings.hooks] == ["show"]
    assert editor.rows[0].node.currentData() == "show"
    doc.undo_stack.undo()
    assert [h.node for h in doc.flow.settings.hooks] == ["log", "show"]
    for _ in range(4):
        doc.undo_stack.undo()
    assert doc.flow.settings.hooks == [FlowHook(port="on_tool", node="log")]
    assert doc.undo_stack.isClean()


def test_flow_hooks_set_in_the_panel_are_saved_and_validated(qtbot, panel, doc, tmp_path):
    editor = panel.form.flow_hooks
    qtbot.mouseClick(editor.add_button, Qt.MouseButton.LeftButton)
    pick(editor.rows[1].port, "on_start")
    pick(editor.rows[1].node, "show")
    path = tmp_path / "f.flow.json"
    save_flow(doc.flow, path)
    loaded = load_flow(path, REG)
    assert loaded.settings.hooks[1] == FlowHook(port="on_start", node="show")
    # A hook flow node removed from the flow: the problem names the setting.
    doc.flow.settings.hooks.append(FlowHook(port="on_end", node="gone"))
    doc.settings_changed.emit()
    problems = doc.revalidate()
    assert any(p.field == "settings.hooks[2].node" and "no node 'gone'" in p.message
               for p in problems)
    assert editor.rows[2].node.currentText() == "gone (not in this flow)"


def test_hook_ports_sit_along_the_bottom_with_room_for_their_labels(qtbot, doc):
    scene = FlowScene(doc)
    item = scene.item_for_node("agent")
    hooks = [p for p in item.ports if p.kind == "hook"]
    assert [(p.name, p.label) for p in hooks] == [("on_start", "start"), ("on_turn", "turn"),
                                                  ("on_tool", "tool"), ("on_end", "end")]
    assert look_for(doc, "agent").outputs == [("out", "out")]  # no extra rows on the right
    tools = item.port("tools", "tools")
    assert all(p.pos.y() == item.height == tools.pos.y() for p in hooks)
    # Each label (drawn above its port, inside the card) keeps clear of the
    # next one and of the tools port.
    fm = style().port_fm
    rects = [QRectF(p.pos.x() - fm.horizontalAdvance(p.label) / 2, 0,
                    fm.horizontalAdvance(p.label), 10) for p in hooks]
    for a, b in zip(rects, rects[1:], strict=False):
        assert b.left() - a.right() >= 5, (a, b)
    assert rects[0].left() >= 6 and rects[-1].right() <= tools.pos.x() - 15 < NODE_W
    # The wired hook's wire leaves downwards; the others' ports are free.
    [wire] = [w for w in item.wires if w.source is item and w.sport == "on_tool"]
    assert wire.down and not wire.tools
    assert doc.can_connect("agent", "on_end", "show", "in") == (True, "")

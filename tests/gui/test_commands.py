"""Every command's undo and redo restore the model exactly: the flow's JSON
(``flow.dumps()``) before and after, and the scene stays a mirror of it."""

from __future__ import annotations

import pytest

from designer.model.commands import (
    AddNode,
    AddWire,
    MoveNodes,
    RemoveItems,
    RenameNode,
    SetDisabled,
    SetParam,
    SetToolOverride,
    fragment_json,
    new_node,
    paste_command,
)
from runtime.flow import ToolOverride, Wire
from runtime.spec import ParamValue, Scope
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import add, wire


@pytest.fixture
def flow_doc(doc):
    """A small flow with an agent, a tool and a chain, set up directly."""
    add(doc, "src", "test.source", 0, 0)
    add(doc, "fork", "test.fork", 240, 0)
    add(doc, "a", "test.step", 480, -80, name="Step A")
    add(doc, "b", "test.step", 480, 80)
    add(doc, "agent", "test.agent", 720, 0)
    add(doc, "tool", "test.tool", 960, 160)
    add(doc, "sink", "test.sink", 960, 0)
    wire(doc, "src", "out", "fork")
    wire(doc, "fork", "yes", "a")
    wire(doc, "fork", "no", "b")
    wire(doc, "a", "out", "agent")
    wire(doc, "b", "out", "agent")
    wire(doc, "agent", "out", "sink")
    wire(doc, "agent", "tools", "tool")
    return doc


def scene_matches(scene, doc) -> None:
    assert {i.node_id for i in scene.node_items()} == {n.id for n in doc.flow.nodes}
    for i, w in enumerate(doc.flow.wires):
        item = scene.item_for_wire(i)
        assert (item.source.node_id, item.sport) == tuple(w.source)
        assert (item.target.node_id, item.dport) == tuple(w.target)
    assert scene.item_for_wire(len(doc.flow.wires)) is None
    for n in doc.flow.nodes:
        pos = scene.item_for_node(n.id).pos()
        assert (pos.x(), pos.y()) == tuple(n.position)


def check_undo_redo(doc, make_command, repeat: int = 2):
    from designer.canvas.scene import FlowScene

    scene = FlowScene(doc)
    before = doc.flow.dumps()
    doc.undo_stack.push(make_command())
    after = doc.flow.dumps()
    assert after != before, "the command changed nothing"
    scene_matches(scene, doc)
    for _ in range(repeat):
        doc.undo_stack.undo()
        assert doc.flow.dumps() == before
        scene_matches(scene, doc)
        doc.undo_stack.redo()
        assert doc.flow.dumps() == after
        scene_matches(scene, doc)
    return scene


def test_add_node(flow_doc):
    check_undo_redo(flow_doc, lambda: AddNode(flow_doc, new_node(flow_doc, "test.step", (0, 300))))


def test_remove_nodes_in_the_middle_restores_order(flow_doc):
    check_undo_redo(flow_doc, lambda: RemoveItems(flow_doc, ["fork", "agent"]))


def test_remove_wires(flow_doc):
    check_undo_redo(flow_doc, lambda: RemoveItems(flow_doc, [], [1, 4, 6]))


def test_remove_nodes_and_wires_together(flow_doc):
    check_undo_redo(flow_doc, lambda: RemoveItems(flow_doc, ["tool"], [0, 6]))


def test_move_nodes(flow_doc):
    check_undo_redo(flow_doc, lambda: MoveNodes(flow_doc, {
        "a": ((480, -80), (500, -60)), "b": ((480, 80), (520, 120))}))


def test_add_wire(flow_doc):
    check_undo_redo(flow_doc, lambda: AddWire(flow_doc, Wire(source=("src", "out"),
                                                             target=("sink", "in"))))


def test_set_param_value_scope_and_clear(flow_doc):
    check_undo_redo(flow_doc, lambda: SetParam(flow_doc, "a", "label",
                                               ParamValue(scope=Scope.CUSTOM, value="x")))
    check_undo_redo(flow_doc, lambda: SetParam(flow_doc, "tool", "query",
                                               ParamValue(scope=Scope.MESSAGE, path="payload.q")))
    check_undo_redo(flow_doc, lambda: SetParam(flow_doc, "a", "label", None))


def test_typing_merges_into_one_undo_step(flow_doc):
    before = flow_doc.flow.dumps()
    for text in ("h", "he", "hel", "hello"):
        flow_doc.undo_stack.push(SetParam(flow_doc, "b", "label",
                                          ParamValue(scope=Scope.CUSTOM, value=text)))
    assert flow_doc.undo_stack.count() == 1
    assert flow_doc.node("b").params["label"].value == "hello"
    flow_doc.undo_stack.undo()
    assert flow_doc.flow.dumps() == before


def test_scope_changes_show_on_the_node(flow_doc):
    scene = check_undo_redo(flow_doc, lambda: SetParam(
        flow_doc, "tool", "limit", ParamValue(scope=Scope.AI, description="How many rows")))
    assert scene.item_for_node("tool").look.ai_count == 2
    flow_doc.undo_stack.undo()
    assert scene.item_for_node("tool").look.ai_count == 1


def test_rename_node(flow_doc):
    scene = check_undo_redo(flow_doc, lambda: RenameNode(flow_doc, "b", "Second step"))
    assert scene.item_for_node("b").look.title == "Second step"
    check_undo_redo(flow_doc, lambda: RenameNode(flow_doc, "a", None))


def test_tool_override(flow_doc):
    scene = check_undo_redo(flow_doc, lambda: SetToolOverride(
        flow_doc, "tool", ToolOverride(name="find_order", description="Find an order")))
    assert scene.item_for_node("tool").look.tool_name == "find_order"


def test_disable_node(flow_doc):
    scene = check_undo_redo(flow_doc, lambda: SetDisabled(flow_doc, "b", True))
    assert scene.item_for_node("b").look.disabled


def test_paste_fragment(flow_doc):
    text = fragment_json(flow_doc, ["fork", "a", "b"])
    scene = check_undo_redo(flow_doc, lambda: paste_command(flow_doc, text, at=(0, 400)))
    assert len(flow_doc.flow.nodes) == 10 and len(flow_doc.flow.wires) == 9
    assert scene.item_for_node("fork2") is not None


def test_a_long_session_undoes_to_the_start(flow_doc):
    """Many mixed edits, then undo all and redo all."""
    stack = flow_doc.undo_stack
    start = flow_doc.flow.dumps()
    from designer.canvas.scene import FlowScene

    scene = FlowScene(flow_doc)
    stack.push(AddNode(flow_doc, new_node(flow_doc, "test.tool", (960, 320))))
    stack.push(AddWire(flow_doc, Wire(source=("agent", "tools"), target=("tool2", "in"))))
    stack.push(SetToolOverride(flow_doc, "tool2", ToolOverride(name="lookup2")))
    stack.push(RemoveItems(flow_doc, ["b"]))
    stack.push(MoveNodes(flow_doc, {"a": ((480, -80), (480, 0))}))
    stack.push(SetParam(flow_doc, "tool2", "query", ParamValue(scope=Scope.CUSTOM, value="q")))
    stack.push(paste_command(flow_doc, fragment_json(flow_doc, ["a", "agent"])))
    end = flow_doc.flow.dumps()
    while stack.canUndo():
        stack.undo()
    assert flow_doc.flow.dumps() == start
    scene_matches(scene, flow_doc)
    while stack.canRedo():
        stack.redo()
    assert flow_doc.flow.dumps() == end
    scene_matches(scene, flow_doc)

"""The canvas, driven like a user drives it (drops, mouse drags, keys) and
checked on the model: the document's flow and its undo stack."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QPainter
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.canvas.items import GRID, HEADER_H, NODE_W, NodeItem
from designer.canvas.view import NODE_MIME
from designer.canvas.wires import WireItem
from designer.model.commands import AddNode, AddWire, new_node
from tests.gui.editor_fixtures import *  # noqa: F401,F403
from tests.gui.editor_fixtures import add, body_point, drag, port_point, show_all, wire


def wires_of(doc):
    return [(w.source, w.target) for w in doc.flow.wires]


# -- the scene mirrors the document ---------------------------------------------

def test_scene_follows_commands_and_undo(doc, qtbot):
    from designer.canvas.scene import FlowScene

    scene = FlowScene(doc)
    stack = doc.undo_stack
    stack.push(AddNode(doc, new_node(doc, "test.source", (0, 0))))
    stack.push(AddNode(doc, new_node(doc, "test.step", (300, 0))))
    from runtime.flow import Wire

    stack.push(AddWire(doc, Wire(source=("source", "out"), target=("step", "in"))))
    assert isinstance(scene.item_for_node("source"), NodeItem)
    assert isinstance(scene.item_for_wire(0), WireItem)
    assert scene.item_for_wire(0).target is scene.item_for_node("step")
    stack.undo()
    assert scene.item_for_wire(0) is None
    stack.undo()
    assert scene.item_for_node("step") is None
    stack.redo()
    stack.redo()
    assert scene.item_for_wire(0).source is scene.item_for_node("source")


def test_node_shows_tool_badge_ai_params_and_problems(doc, qtbot):
    from designer.canvas.scene import FlowScene

    add(doc, "a", "test.agent", 0, 0)
    add(doc, "t", "test.tool", 300, 200)
    add(doc, "s", "test.step", 300, 0)
    wire(doc, "a", "tools", "t")
    doc.revalidate()
    scene = FlowScene(doc)
    tool = scene.item_for_node("t")
    assert tool.look.tool_name == "lookup"
    assert tool.look.ai_count == 1  # query defaults to AI scope
    agent = scene.item_for_node("a")
    tools_port = agent.port("tools", "tools")
    assert tools_port.kind == "tools"
    # The tools port sits on the bottom edge, apart from the regular outputs.
    assert tools_port.pos.y() == agent.height
    assert scene.item_for_wire(0).tools
    # The agent's input is not connected: a warning badge from doc.problems.
    assert agent.look.warnings


def test_level_of_detail_paints_at_every_zoom(window, qtbot):
    for i in range(30):
        add(window.document, f"n{i}", "test.step", (i % 6) * 240, (i // 6) * 140)
    for i in range(29):
        wire(window.document, f"n{i}", "out", f"n{i + 1}")
    scene = window.scene
    for zoom in (1.0, 0.3, 0.1):
        window.view.set_zoom(zoom)
        assert scene.overview == (zoom < 0.2)
        img = QImage(400, 300, QImage.Format.Format_ARGB32_Premultiplied)
        painter = QPainter(img)
        scene.render(painter)
        painter.end()
        window.view.viewport().repaint()
    window.view.set_zoom(1.0)
    assert scene.item_for_node("n0").opacity() == 1.0


# -- palette and quick add --------------------------------------------------------

def test_palette_drag_drop_creates_node_where_dropped(window, qtbot):
    palette = window.palette
    item = palette.item_for_type("test.tool")
    mime = palette.tree.mimeData([item])
    assert mime.hasFormat(NODE_MIME)
    vp = window.view.viewport()
    pos = QPointF(300, 250)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, enter)
    assert enter.isAccepted()
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, drop)
    flow = window.document.flow
    assert [n.type for n in flow.nodes] == ["test.tool"]
    at = window.view.mapToScene(pos.toPoint())
    x, y = flow.nodes[0].position
    # The node's header is centred on the drop point (snapped to the grid).
    assert abs(x + NODE_W / 2 - at.x()) <= GRID
    assert abs(y + HEADER_H / 2 - at.y()) <= GRID
    assert window.scene.selected_node_ids() == [flow.nodes[0].id]
    window.document.undo_stack.undo()
    assert flow.nodes == []


def test_palette_search_and_enter_adds_at_view_centre(window, qtbot):
    palette = window.palette
    palette.search.setText("look up")
    visible = [i.data(0, Qt.ItemDataRole.UserRole + 1) for i in palette.type_items()
               if not i.isHidden()]
    assert visible == ["test.tool"]
    QTest.keyClick(palette.search, Qt.Key.Key_Return)
    flow = window.document.flow
    assert [n.type for n in flow.nodes] == ["test.tool"]
    centre = window.view.view_center()
    x, y = flow.nodes[0].position
    assert abs(x + NODE_W / 2 - centre.x()) <= GRID
    assert abs(y + HEADER_H / 2 - centre.y()) <= GRID


def test_palette_double_click_adds(window, qtbot):
    item = window.palette.item_for_type("test.step")
    window.palette.tree.itemActivated.emit(item, 0)
    assert [n.type for n in window.document.flow.nodes] == ["test.step"]


def test_typing_on_canvas_opens_quick_add(window, qtbot):
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_L)
    popup = window.editor._quick_add
    assert popup is not None and popup.isVisible()
    assert popup.edit.text() == "l"
    QTest.keyClicks(popup.edit, "ookup")
    assert popup.visible_types() == ["test.tool"]
    QTest.keyClick(popup.edit, Qt.Key.Key_Return)
    assert not popup.isVisible()
    assert [n.type for n in window.document.flow.nodes] == ["test.tool"]


def test_tab_opens_quick_add_and_escape_closes(window, qtbot):
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_Tab)
    popup = window.editor._quick_add
    assert popup.isVisible() and popup.edit.text() == ""
    QTest.keyClick(popup.edit, Qt.Key.Key_Escape)
    assert not popup.isVisible()
    assert window.document.flow.nodes == []


# -- wiring by mouse ----------------------------------------------------------------

def test_wire_by_mouse(window, qtbot):
    doc = window.document
    add(doc, "src", "test.source", 0, 0)
    add(doc, "dst", "test.step", 320, 60)
    show_all(window)
    drag(window, port_point(window, "src", "out"), port_point(window, "dst", "in", "in"))
    assert wires_of(doc) == [(("src", "out"), ("dst", "in"))]
    assert doc.undo_stack.count() == 1
    doc.undo_stack.undo()
    assert wires_of(doc) == []


def test_wire_dragged_backwards_from_an_input(window, qtbot):
    doc = window.document
    add(doc, "src", "test.fork", 0, 0)
    add(doc, "dst", "test.step", 320, 60)
    show_all(window)
    drag(window, port_point(window, "dst", "in", "in"), port_point(window, "src", "no"))
    assert wires_of(doc) == [(("src", "no"), ("dst", "in"))]


def test_tools_wire_to_a_tool_node(window, qtbot):
    doc = window.document
    add(doc, "agent", "test.agent", 0, 0)
    add(doc, "tool", "test.tool", 320, 160)
    show_all(window)
    drag(window, port_point(window, "agent", "tools", "tools"),
         port_point(window, "tool", "in", "in"))
    assert wires_of(doc) == [(("agent", "tools"), ("tool", "in"))]
    assert window.scene.item_for_wire(0).tools


def test_tools_wire_to_node_without_tool_is_refused(window, qtbot):
    doc = window.document
    add(doc, "agent", "test.agent", 0, 0)
    add(doc, "plain", "test.step", 320, 160)
    show_all(window)
    start = port_point(window, "agent", "tools", "tools")
    end = port_point(window, "plain", "in", "in")
    drag(window, start, end, release=False)
    # While hovering, the target port is marked refused and the reason shown.
    item = window.scene.item_for_node("plain")
    assert item._mark == ("in", True, False)
    interaction = window.scene.interaction
    assert "declares no tool" in interaction.draft.reason
    assert "declares no tool" in window.statusBar().currentMessage()
    QTest.mouseRelease(window.view.viewport(), Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier, end)
    assert wires_of(doc) == []
    assert doc.undo_stack.count() == 0
    assert item._mark is None
    assert "declares no tool" in window.statusBar().currentMessage()


def test_duplicate_wire_is_refused(window, qtbot):
    doc = window.document
    add(doc, "src", "test.source", 0, 0)
    add(doc, "dst", "test.step", 320, 60)
    wire(doc, "src", "out", "dst")
    show_all(window)
    drag(window, port_point(window, "src", "out"), port_point(window, "dst", "in", "in"))
    assert len(doc.flow.wires) == 1
    assert doc.undo_stack.count() == 0
    assert "already wired" in window.statusBar().currentMessage()


def test_output_to_output_is_refused(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 320, 60)
    show_all(window)
    drag(window, port_point(window, "a", "out"), port_point(window, "b", "out"))
    assert doc.flow.wires == []
    assert "output to an input" in window.statusBar().currentMessage()


def test_escape_cancels_a_wire(window, qtbot):
    doc = window.document
    add(doc, "src", "test.source", 0, 0)
    add(doc, "dst", "test.step", 320, 60)
    show_all(window)
    drag(window, port_point(window, "src", "out"), port_point(window, "dst", "in", "in"),
         release=False)
    QTest.keyClick(window.view, Qt.Key.Key_Escape)
    assert window.scene.interaction is None
    QTest.mouseRelease(window.view.viewport(), Qt.MouseButton.LeftButton)
    assert doc.flow.wires == []


# -- select, move, delete -------------------------------------------------------------

def test_move_by_mouse_snaps_and_is_one_undo_step(window, qtbot):
    doc = window.document
    add(doc, "a", "test.step", 0, 0)
    add(doc, "b", "test.step", 320, 0)
    wire(doc, "a", "out", "b")
    show_all(window)
    start = body_point(window, "a")
    drag(window, start, start + QPoint(57, 33), steps=6)
    assert doc.node("a").position == (60.0, 40.0)
    assert doc.node("b").position == (320.0, 0.0)
    assert doc.undo_stack.count() == 1
    # The wire followed the node.
    w = window.scene.item_for_wire(0)
    assert w.endpoints()[0] == window.scene.item_for_node("a").port_scene_pos("out", "out")
    doc.undo_stack.undo()
    assert doc.node("a").position == (0.0, 0.0)
    assert window.scene.item_for_node("a").pos() == QPointF(0, 0)


def test_click_without_moving_pushes_nothing(window, qtbot):
    doc = window.document
    add(doc, "a", "test.step", 0, 0)
    show_all(window)
    p = body_point(window, "a")
    QTest.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton,
                     Qt.KeyboardModifier.NoModifier, p)
    assert window.scene.selected_node_ids() == ["a"]
    assert doc.undo_stack.count() == 0


def test_rubber_band_selects_and_moves_together(window, qtbot):
    doc = window.document
    add(doc, "a", "test.step", 0, 0)
    add(doc, "b", "test.step", 240, 0)
    add(doc, "c", "test.step", 0, 400)
    show_all(window)
    tl = window.view.mapFromScene(QPointF(-30, -30))
    br = window.view.mapFromScene(QPointF(440, 80))
    drag(window, tl, br)
    assert window.scene.selected_node_ids() == ["a", "b"]
    start = body_point(window, "b")
    drag(window, start, start + QPoint(40, 40))
    assert doc.node("a").position == (40.0, 40.0)
    assert doc.node("b").position == (280.0, 40.0)
    assert doc.node("c").position == (0.0, 400.0)
    assert doc.undo_stack.count() == 1


def test_delete_key_removes_nodes_and_their_wires(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 240, 0)
    add(doc, "c", "test.sink", 480, 0)
    wire(doc, "a", "out", "b")
    wire(doc, "b", "out", "c")
    before = doc.flow.dumps()
    window.scene.select_nodes(["b"])
    window.view.setFocus()
    QTest.keyClick(window.view, Qt.Key.Key_Delete)
    assert [n.id for n in doc.flow.nodes] == ["a", "c"]
    assert doc.flow.wires == []
    doc.undo_stack.undo()
    assert doc.flow.dumps() == before
    assert window.scene.item_for_wire(1).target is window.scene.item_for_node("c")


def test_delete_a_selected_wire(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 300, 0)
    wire(doc, "a", "out", "b")
    show_all(window)
    w = window.scene.item_for_wire(0)
    mid = window.view.mapFromScene(w._path.pointAtPercent(0.5))
    QTest.mouseClick(window.view.viewport(), Qt.MouseButton.LeftButton,
                     Qt.KeyboardModifier.NoModifier, mid)
    assert window.scene.selected_wire_indices() == [0]
    window.delete_action.trigger()
    assert doc.flow.wires == [] and len(doc.flow.nodes) == 2


def test_copy_paste_between_windows(make_window, qtbot):
    w1, w2 = make_window(), make_window()
    d1 = w1.document
    add(d1, "a", "test.source", 0, 0)
    add(d1, "b", "test.step", 240, 0)
    add(d1, "c", "test.sink", 480, 0)
    wire(d1, "a", "out", "b")
    wire(d1, "b", "out", "c")
    w1.scene.select_nodes(["a", "b"])
    assert w1.editor.copy_selection()
    text = QApplication.clipboard().text()
    assert '"format": "switchboard.flow/1"' in text
    ids = w2.editor.paste(QPointF(100, 100))
    d2 = w2.document
    assert [n.type for n in d2.flow.nodes] == ["test.source", "test.step"]
    assert wires_of(d2) == [((ids[0], "out"), (ids[1], "in"))]
    assert d2.flow.nodes[0].position == (100.0, 100.0)
    assert w2.scene.selected_node_ids() == ids
    # Pasting into the same window renames the ids.
    again = w1.editor.paste(QPointF(0, 300))
    assert set(again).isdisjoint({"a", "b", "c"}) and len(d1.flow.nodes) == 5
    d1.undo_stack.undo()
    assert len(d1.flow.nodes) == 3


def test_duplicate_and_cut(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 240, 0)
    wire(doc, "a", "out", "b")
    window.scene.select_nodes(["a", "b"])
    window.duplicate_action.trigger()
    assert len(doc.flow.nodes) == 4 and len(doc.flow.wires) == 2
    new = window.scene.selected_node_ids()
    assert doc.node(new[0]).position == (40.0, 40.0)
    assert doc.undo_stack.undoText() == "Duplicate"
    window.cut_action.trigger()
    assert len(doc.flow.nodes) == 2
    assert doc.undo_stack.undoText() == "Cut"
    assert "test.source" in QApplication.clipboard().text()


def test_paste_of_foreign_text_does_nothing(window, qtbot):
    QApplication.clipboard().setText("not a flow")
    assert window.editor.paste() == []
    assert window.document.undo_stack.count() == 0


# -- zoom and the run-state API ------------------------------------------------------------

def test_zoom_keys_and_fit(window, qtbot):
    for i in range(4):
        add(window.document, f"n{i}", "test.step", i * 600, 0)
    view = window.view
    view.setFocus()
    view.set_zoom(1.0)
    QTest.keyClick(view, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert view.zoom() > 1.0
    QTest.keyClick(view, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(view, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert view.zoom() < 1.0
    QTest.keyClick(view, Qt.Key.Key_F)
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(window.scene.nodes_rect())
    assert window.zoom_label.text() == f"{round(view.zoom() * 100)}%"


def test_run_state_badges_for_the_integration(window, qtbot):
    doc = window.document
    add(doc, "a", "test.source", 0, 0)
    add(doc, "b", "test.step", 240, 0)
    wire(doc, "a", "out", "b")
    node = window.scene.item_for_node("a")
    node.set_run_state("running", 3, "sending")
    assert (node.run_state, node.run_count) == ("running", 3)
    window.scene.item_for_wire(0).set_activity(5)
    window.view.viewport().repaint()
    window.scene.clear_run_state()
    assert node.run_state == "idle" and window.scene.item_for_wire(0).activity == 0
    window.select_node("b")
    assert window.scene.selected_node_ids() == ["b"]


def test_wire_dropped_on_empty_canvas_offers_nodes_that_can_take_it(window, qtbot):
    doc = window.document
    add(doc, "agent", "test.agent", 0, 0)
    show_all(window)
    start = port_point(window, "agent", "tools", "tools")
    drag(window, start, start + QPoint(220, 160))
    popup = window.editor._quick_add
    assert popup is not None and popup.isVisible()
    # From a tools port, only nodes that declare a tool are offered.
    assert popup.visible_types() == ["test.tool"]
    popup._choose()
    assert [n.type for n in doc.flow.nodes] == ["test.agent", "test.tool"]
    new_id = doc.flow.nodes[1].id
    assert wires_of(doc) == [(("agent", "tools"), (new_id, "in"))]
    # One undo step removes both the node and its wire.
    doc.undo_stack.undo()
    assert [n.id for n in doc.flow.nodes] == ["agent"] and wires_of(doc) == []


def test_wire_dropped_from_an_input_connects_the_new_nodes_output(window, qtbot):
    doc = window.document
    add(doc, "dst", "test.step", 400, 0)
    show_all(window)
    start = port_point(window, "dst", "in", "in")
    drag(window, start, start - QPoint(240, 0))
    popup = window.editor._quick_add
    assert "test.sink" not in popup.visible_types()  # a sink has no output
    popup.edit.setText("source")
    popup._choose()
    src = doc.flow.nodes[-1]
    assert src.type == "test.source"
    assert wires_of(doc) == [((src.id, "out"), ("dst", "in"))]


def test_palette_lists_categories_in_the_order_a_flow_is_built(qtbot):
    from designer.panels.palette import CATEGORY_ORDER, Palette
    from runtime.registry import Registry

    palette = Palette(Registry.default())
    qtbot.addWidget(palette)
    shown = [palette.tree.topLevelItem(i).text(0)
             for i in range(palette.tree.topLevelItemCount())]
    known = [c.upper() for c in CATEGORY_ORDER if c.upper() in shown]
    assert shown[:len(known)] == known  # the known ones first, in that order
    assert shown[len(known):] == sorted(shown[len(known):])  # then A to Z
    assert shown.index("CORE") < shown.index("AI") < shown.index("MAIL")

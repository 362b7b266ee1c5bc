"""Running a flow with subflow instances in the designer (docs/subflows.md,
"Running and inspecting"): real runs in the main window; the canvas's wire
counts and badges are the flow's as written (the engine runs the flat flow),
a definition's tab shows its nodes' badges, breakpoints and pins set on a
definition's node reach every instance, and the inspector names inner nodes
by their instance and groups them by it."""

from __future__ import annotations

from typing import Any

import pytest

from designer.model.document import FlowDocument
from runtime.flow import Flow
from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.gui.inspector_fixtures import qt_loop  # noqa: F401 - the fixture
from tests.gui.subflow_fixtures import registry  # noqa: F401 - the fixture
from tests.subflow_fixtures import P, W, _own_library  # noqa: F401 - the autouse fixture


def SET(id: str, path: str, value: Any, name: str = "") -> dict:
    return {"id": id, "type": "core.change", "name": name, "position": [300, 80],
            "params": {"rules": P([{"action": "set", "path": path, "value": value}])}}


# "fan": its input feeds two nodes, both feed its output.
FAN = {"name": "fan", "label": "Fan", "params": [],
       "nodes": [{"id": "i", "type": "subflow.in", "position": [60, 80]},
                 SET("a", "payload.a", 1, "Set A"),
                 {**SET("b", "payload.b", 2, "Set B"), "position": [300, 220]},
                 {"id": "o", "type": "subflow.out", "position": [560, 80]},
                 {"id": "show", "type": "core.debug", "name": "Show B", "position": [560, 220]}],
       "wires": [W("i", "a"), W("i", "b"), W("a", "o"), W("b", "o"), W("b", "show")]}
# "risky": a template that fails on a message without payload.total.
RISKY = {"name": "risky", "label": "Risky", "params": [],
         "nodes": [{"id": "i", "type": "subflow.in", "position": [60, 80]},
                   {"id": "p", "type": "core.template", "name": "Price", "position": [300, 80],
                    "params": {"template": P("{{ payload.total * 1.2 }}")}},
                   {"id": "o", "type": "subflow.out", "position": [560, 80]}],
         "wires": [W("i", "p"), W("p", "o")]}


def flow() -> Flow:
    return Flow.model_validate({
        "format": "switchboard.flow/1", "name": "Fans",
        "nodes": [{"id": "src", "type": "core.inject", "name": "Go", "position": [60, 200],
                   "params": {"payload": P({"x": 1}), "payload_type": P("JSON")}},
                  {"id": "fan1", "type": "subflow:fan", "name": "First fan", "position": [300, 80]},
                  {"id": "fan2", "type": "subflow:fan", "name": "Second fan",
                   "position": [300, 220]},
                  {"id": "risky", "type": "subflow:risky", "name": "Risky", "position": [300, 360]},
                  {"id": "d1", "type": "core.debug", "name": "Out 1", "position": [560, 80]},
                  {"id": "d2", "type": "core.debug", "name": "Out 2", "position": [560, 220]},
                  {"id": "d3", "type": "core.debug", "name": "Out 3", "position": [560, 360]}],
        "wires": [W("src", "fan1"), W("fan1", "d1"), W("src", "fan2"), W("fan2", "d2"),
                  W("src", "risky"), W("risky", "d3")],
        "subflows": [FAN, RISKY]})


def open_window(make_window, registry, f: Flow | None = None):  # noqa: F811
    w = make_window(FlowDocument(f or flow(), registry))
    w.complete_start()
    return w


def needs_tabs(w, menu: bool = False) -> None:
    """The definition tabs are sfedit's (designer/window/subflow_tabs.py):
    while the main window does not have them (or, ``menu``, does not ask
    ``definition_node_actions`` for a definition's node menu), these wait."""
    if not hasattr(w, "tabs") or not hasattr(w.tabs, "open_definition"):
        pytest.skip("the main window has no subflow definition tabs yet")
    if menu and not hasattr(w, "definition_node_actions"):
        pytest.skip("the main window does not ask definition_node_actions yet")


def run_to_end(qtbot, w) -> Any:
    session = w.run_session
    assert session.run()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=15000)
    return session.controller.last_result


def wire_count(w, index: int) -> int:
    return w.scene.item_for_wire(index).activity


def test_wire_counts_are_the_flows_wires_and_instances_show_what_ran_inside(
        make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    result = run_to_end(qtbot, w)
    assert result.errors == 1
    # One message into each fan (its input feeds two nodes: still one), two
    # out of it (both nodes inside feed the output); before, the flat flow's
    # wire indexes were taken for the flow's: wrong wires, wrong counts.
    assert [wire_count(w, i) for i in range(6)] == [1, 2, 1, 2, 1, 0]
    fan = w.scene.item_for_node("fan1")
    assert (fan.run_state, fan.run_count) == ("done", 1)
    assert "fan1.a" in fan.toolTip() and "fan1.b" in fan.toolTip()
    risky = w.scene.item_for_node("risky")
    assert risky.run_state == "error"
    assert risky.run_text.startswith("Risky › Price: ")
    assert "risky.p: error" in risky.toolTip()
    # The inspector names inner nodes by their instance.
    assert w.run_session.inspector.ctx.name_of("risky.p") == "Risky › Price"
    assert w.run_session.inspector.ctx.name_of("fan2.b") == "Second fan › Set B"


def test_a_definitions_tab_shows_its_nodes_badges_over_every_instance(
        make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    needs_tabs(w)
    run_to_end(qtbot, w)
    tab = w.tabs.open_definition(w.document.flow.subflow("fan"))
    a = tab.scene.item_for_node("a")
    # Two instances, one message each: added up; the tooltip says each.
    assert (a.run_state, a.run_count) == ("done", 2)
    assert "fan1.a" in a.toolTip() and "fan2.a" in a.toolTip()
    assert tab.scene.item_for_node("i").run_state == "idle"
    risky = w.tabs.open_definition(w.document.flow.subflow("risky"))
    assert risky.scene.item_for_node("p").run_state == "error"
    # A new run clears them first.
    w.run_session.run()
    assert tab.scene.item_for_node("a").run_state in ("idle", "running", "done")
    qtbot.waitUntil(lambda: not w.run_session.controller.is_running, timeout=15000)
    assert tab.scene.item_for_node("a").run_count == 2


# -- breakpoints ------------------------------------------------------------------------
def click_gutter(view, scene, qtbot, node_id: str) -> None:
    """A real left click in the gutter left of the node's input."""
    from PySide6.QtCore import QPointF, Qt

    from designer.canvas.breakpoint_marks import GUTTER_X, input_ports

    item = scene.item_for_node(node_id)
    view.centerOn(item)
    port = input_ports(item)[0]
    at = view.mapFromScene(item.mapToScene(QPointF(GUTTER_X, port.pos.y())))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=at)


def held_nodes(w) -> list[str]:
    return sorted(h.node for h in w.run_session.debugging.held())


def test_a_breakpoint_set_in_a_definitions_tab_stops_every_instance(
        make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    needs_tabs(w)
    debugging = w.run_session.debugging
    tab = w.tabs.open_definition(w.document.flow.subflow("fan"))
    click_gutter(tab.view, tab.scene, qtbot, "a")
    assert debugging.store.for_inner("fan", "a") is not None
    assert debugging.store.for_node("a") is None  # not a node of the flow
    # The definition's input takes none: a run passes straight through it.
    debugging.tab_marks.toggle(tab, "o")
    assert debugging.store.for_inner("fan", "o") is None
    assert w.run_session.run()
    qtbot.waitUntil(lambda: len(debugging.held()) == 2, timeout=15000)
    assert held_nodes(w) == ["fan1.a", "fan2.a"]
    # The tab rings its node; the flow's canvas rings each instance.
    assert debugging.tab_marks._made[id(tab)][1]._halos["a"].count == 2
    assert set(debugging.marks._halos) == {"fan1", "fan2"}
    debugging.continue_all()
    qtbot.waitUntil(lambda: not w.run_session.controller.is_running, timeout=15000)


def test_breakpoints_on_an_instance_and_on_its_wire_stop_inside_the_run(
        make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    debugging = w.run_session.debugging
    debugging.store.set_node("risky")  # where messages enter it
    debugging.store.set_wire(1)  # fan1 -> d1: both nodes inside feed it
    assert w.run_session.run()
    qtbot.waitUntil(lambda: len(debugging.held()) == 3, timeout=15000)
    held = debugging.held()
    assert sorted(h.node for h in held if h.wire < 0) == ["risky.p"]
    flat = w.run_session.controller.engine.flow.wires
    on_wires = sorted((tuple(flat[h.wire].source), tuple(flat[h.wire].target))
                      for h in held if h.wire >= 0)
    assert on_wires == [(("fan1.a", "out"), ("d1", "in")), (("fan1.b", "out"), ("d1", "in"))]
    debugging.continue_all()
    qtbot.waitUntil(lambda: not w.run_session.controller.is_running, timeout=15000)


# -- pinned data -------------------------------------------------------------------------
def menu_texts(menu) -> list[str]:
    return [a.text() for a in menu.actions() if a.text()]


def test_pinning_a_definitions_node_in_its_tab_pins_it_in_every_instance(
        make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    needs_tabs(w, menu=True)
    run_to_end(qtbot, w)
    tab = w.tabs.open_definition(w.document.flow.subflow("fan"))
    menu = w.build_node_menu("a")
    assert "Pin Last Output" in menu_texts(menu) and "Pin Data…" in menu_texts(menu)
    assert "Pin Data…" not in menu_texts(w.build_node_menu("o"))  # a run passes through it
    assert w.run_session.pins.pin_last_output("a", tab.doc)
    # The pin is the definition's (its tab's document edits it in place),
    # so the flow file keeps it and every instance's run uses it.
    pin = w.document.flow.subflow("fan").nodes[1].pin
    assert pin["out"][0]["payload"] == {"x": 1, "a": 1}
    run_to_end(qtbot, w)
    assert sorted(w.run_session.controller.engine.pinned) == ["fan1.a", "fan2.a"]
    menu = w.build_node_menu("a")
    assert "Unpin" in menu_texts(menu)
    w.run_session.pins.unpin("a", tab.doc)
    assert w.document.flow.subflow("fan").nodes[1].pin is None


# -- the inspector groups by instance ------------------------------------------------------
def test_the_inspector_groups_inner_nodes_by_instance(make_window, registry, qtbot):  # noqa: F811
    w = open_window(make_window, registry)
    run_to_end(qtbot, w)
    inspector = w.run_session.inspector
    debug = inspector.debug
    qtbot.waitUntil(lambda: debug.list.topLevelItemCount() == 6, timeout=5000)
    shows = {debug.filter.itemText(i): debug.filter.itemData(i)
             for i in range(debug.filter.count())}
    assert shows["Instance First fan: everything inside"] == "instance:fan1"
    assert shows["First fan › Show B"] == "fan1.show"
    # Show: one instance -> the lines of nodes inside it, and no other.
    debug.filter.setCurrentIndex(debug.filter.findData("instance:fan1"))
    assert [e.node for e in debug.entries()] == ["fan1.show"]
    item = next(debug.list.topLevelItem(i) for i in range(debug.list.topLevelItemCount())
                if not debug.list.topLevelItem(i).isHidden())
    assert item.text(1) == "First fan › Show B" and item.toolTip(1) == "fan1.show"
    # Timeline: a row per instance, its nodes under it.
    rows = inspector.timeline.canvas.rows()
    at = rows.index("instance:fan1")
    assert set(rows[at + 1:at + 4]) == {"fan1.a", "fan1.b", "fan1.show"}
    assert "fan1.a" not in rows[:at]
    # A click on an inner node's row selects its instance on the canvas and
    # shows the inner node's messages.
    inspector.timeline.canvas.node_selected.emit("fan1.b")
    assert w.scene.selected_node_ids() == ["fan1"]
    assert inspector.messages.node_id == "fan1.b"
    assert inspector.messages.header.text() == "First fan › Set B"

"""RunSnapshot: what of the last run still describes the flow on screen
(issue 12, item 5). No window: the flow model and the snapshot alone."""

from __future__ import annotations

from designer.panels.inspector.staleness import RunSnapshot
from runtime.flow import Flow, FlowNode, FlowSettings, Wire
from runtime.spec import ParamValue, Scope


def flow() -> Flow:
    return Flow(nodes=[
        FlowNode(id="a", type="core.inject", position=(0, 0),
                 params={"payload": ParamValue(scope=Scope.CUSTOM, value="hi")}),
        FlowNode(id="b", type="core.debug", position=(200, 0)),
        FlowNode(id="c", type="core.debug", position=(200, 100)),
    ], wires=[Wire(source=("a", "out"), target=("b", "in")),
              Wire(source=("a", "out"), target=("c", "in"))])


def edited(now: Flow, snap: RunSnapshot, node_id: str) -> bool:
    return snap.node_edited(node_id, now.node(node_id))


def test_moves_and_notes_change_nothing_the_run_showed():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    now.node("a").position = (500, 500)
    now.node("a").notes = "the start"
    assert not edited(now, snap, "a")
    assert snap.stale == set() and not snap.changed


def test_a_param_rename_or_disable_makes_a_node_stale_and_undo_makes_it_current():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    now.node("a").params["payload"] = ParamValue(scope=Scope.CUSTOM, value="bye")
    assert edited(now, snap, "a") and snap.stale == {"a"} and snap.changed
    assert snap.why_stale("a", now) == "edited"
    now.node("a").params["payload"] = ParamValue(scope=Scope.CUSTOM, value="hi")
    assert edited(now, snap, "a") and snap.stale == set() and not snap.changed
    now.node("b").name = "Shown"
    now.node("c").disabled = True
    edited(now, snap, "b")
    edited(now, snap, "c")
    assert snap.stale == {"b", "c"}


def test_deleted_and_added_nodes():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    now.nodes = [n for n in now.nodes if n.id != "c"]
    assert edited(now, snap, "c") and snap.why_stale("c", now) == "deleted"
    assert snap.ran_node("c").type == "core.debug"  # still named from the run
    now.nodes.append(FlowNode(id="d", type="core.debug"))
    assert edited(now, snap, "d") and snap.added == {"d"} and "d" not in snap.stale
    assert snap.why_stale("d", now) == ""  # nothing of it in the run to grey


def test_wires_and_settings():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    del now.wires[0]
    assert snap.wires_edited(now) and snap.changed
    now.wires.insert(0, Wire(source=("a", "out"), target=("b", "in")))
    assert snap.wires_edited(now) and not snap.changed
    now.settings = FlowSettings(out_of_process=["core"])
    assert snap.settings_edited(now) and snap.changed


def test_wire_indices_of_the_run_follow_their_wires():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    assert snap.wire_map(now) == {0: 0, 1: 1}
    del now.wires[0]  # a -> c moves from 1 to 0
    assert snap.wire_map(now) == {1: 0}
    assert snap.current_wire(now, 1) == 0 and snap.current_wire(now, 0) is None
    assert snap.run_wire(now, 0) == 1
    now.wires.append(Wire(source=("b", "out"), target=("c", "in")))
    assert snap.run_wire(now, 1) is None  # drawn after the run


def test_two_wires_between_the_same_ports_keep_their_order():
    ran = Flow(nodes=[FlowNode(id="a", type="core.inject"), FlowNode(id="b", type="core.debug")],
               wires=[Wire(source=("a", "out"), target=("b", "in"))] * 2)
    now = ran.model_copy(deep=True)
    snap = RunSnapshot(ran)
    assert snap.wire_map(now) == {0: 0, 1: 1}
    del now.wires[1]
    assert snap.wire_map(now) == {0: 0}


def test_recompute_agrees_with_one_edit_at_a_time():
    ran, now = flow(), flow()
    snap = RunSnapshot(ran)
    now.node("b").name = "Shown"
    now.nodes = [n for n in now.nodes if n.id != "c"]
    now.nodes.append(FlowNode(id="d", type="core.debug"))
    snap.recompute(now)
    assert snap.stale == {"b", "c"} and snap.added == {"d"}

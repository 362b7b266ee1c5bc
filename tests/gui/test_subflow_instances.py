"""Subflow instances in the designer (#25 item 2), with real widgets: the
palette's Subflows category (the flow's own definitions and the library's,
in a tmp library folder), placing an instance from the palette (drag,
double-click, quick add) with the library version pinned, its ports on the
canvas, its params in Properties (AI only where the definition allows it),
the newer-version badge, Update and Update all (one undo step each), and
the scope Subflow inside a definition."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from designer.model.commands import current_pin
from designer.model.document import FlowDocument
from designer.panels.palette import TAG_ROLE, TYPE_ROLE, Palette, QuickAdd
from designer.panels.properties import PropertiesPanel
from runtime.flow import Flow, FlowNode, Wire
from runtime.flow.model import SubflowDef, SubflowParam, SubflowPin
from runtime.flow.subflows import IN_TYPE, OUT_TYPE, port_names, save_to_library
from runtime.spec import ParamValue, Scope
from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.gui.subflow_fixtures import registry  # noqa: F401 - the fixture

STOCK = "subflow:check_stock"


def fixed(value):
    return {"scope": "custom", "value": value}


def check_stock(version: str, *, params=None) -> SubflowDef:
    """A library subflow: an input 'order', outputs 'ok' and 'missing'."""
    return SubflowDef.model_validate({
        "name": "check_stock", "label": "Check stock", "version": version,
        "description": "Look up whether a SKU is in stock",
        "params": params if params is not None else [
            {"name": "sku", "label": "SKU", "type": "str", "ai_allowed": True},
            {"name": "warehouse", "type": "str", "default": "main"}],
        "nodes": [
            {"id": "in", "type": IN_TYPE, "params": {"name": fixed("order")}},
            {"id": "look", "type": "core.delay", "params": {"seconds": fixed(0)}},
            {"id": "ok", "type": OUT_TYPE, "params": {"name": fixed("ok")}},
            {"id": "missing", "type": OUT_TYPE, "params": {"name": fixed("missing")}}],
        "wires": [{"from": ["in", "out"], "to": ["look", "in"]},
                  {"from": ["look", "out"], "to": ["ok", "in"]},
                  {"from": ["look", "out"], "to": ["missing", "in"]}]})


#: Version 1.1.0 drops 'warehouse' and adds 'qty'.
V11_PARAMS = [{"name": "sku", "label": "SKU", "type": "str", "ai_allowed": True},
              {"name": "qty", "type": "int", "default": 1, "ai_allowed": True}]


def own_definition() -> SubflowDef:
    """A definition kept in the flow file: params of three types."""
    return SubflowDef.model_validate({
        "name": "notify", "label": "Notify team",
        "params": [{"name": "channel", "type": "str"}, {"name": "wait", "type": "int"},
                   {"name": "urgent", "type": "bool"}],
        "nodes": [{"id": "in", "type": IN_TYPE},
                  {"id": "pause", "type": "core.delay"},
                  {"id": "get", "type": "http.request"}],
        "wires": [{"from": ["in", "out"], "to": ["pause", "in"]},
                  {"from": ["pause", "out"], "to": ["get", "in"]}]})


@pytest.fixture
def flow_file(tmp_path, data_dir) -> Path:
    """An empty flow file whose own subflows/ folder holds check_stock 1.0.0."""
    folder = tmp_path / "flows"
    save_to_library(check_stock("1.0.0"), folder / "subflows")
    path = folder / "orders.flow.json"
    path.write_text(Flow(name="Orders", subflows=[own_definition()]).dumps())
    return path


def open_window(make_window, flow_file):  # noqa: F811 - the fixture
    return make_window(FlowDocument.open(flow_file))


def palette_entries(palette: Palette) -> dict[str, str]:
    """type -> tag of the entries under SUBFLOWS."""
    for i in range(palette.tree.topLevelItemCount()):
        cat = palette.tree.topLevelItem(i)
        if cat.text(0) == "SUBFLOWS":
            return {cat.child(j).data(0, TYPE_ROLE): cat.child(j).data(0, TAG_ROLE)
                    for j in range(cat.childCount())}
    return {}


def drop_from_palette(window, type_id: str, at: QPointF) -> str:
    palette = window.palette
    mime = palette.tree.mimeData([palette.item_for_type(type_id)])
    vp = window.view.viewport()
    QApplication.sendEvent(vp, QDragEnterEvent(at.toPoint(), Qt.DropAction.CopyAction, mime,
                                               Qt.MouseButton.LeftButton,
                                               Qt.KeyboardModifier.NoModifier))
    QApplication.sendEvent(vp, QDropEvent(at, Qt.DropAction.CopyAction, mime,
                                          Qt.MouseButton.LeftButton,
                                          Qt.KeyboardModifier.NoModifier))
    return window.document.flow.nodes[-1].id


def place(doc: FlowDocument, node_id: str, pin: SubflowPin | None = None, **params) -> None:
    doc.insert_node(FlowNode(id=node_id, type=STOCK, position=(0, 0), subflow=pin,
                             params={k: {"scope": "custom", "value": v}
                                     for k, v in params.items()}))


# -- the palette -------------------------------------------------------------------------

def test_palette_lists_the_flows_and_the_librarys_subflows(make_window, flow_file,  # noqa: F811
                                                          tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    save_to_library(SubflowDef.model_validate({
        "name": "send_invoice", "label": "Send invoice", "version": "2.3.0",
        "nodes": [{"id": "in", "type": IN_TYPE}]}), shared)
    monkeypatch.setenv("SWITCHBOARD_SUBFLOWS", str(shared))
    window = open_window(make_window, flow_file)
    entries = palette_entries(window.palette)
    # The library's with their current version, the flow's own as such;
    # the definitions' input and output nodes only inside a definition.
    assert entries == {STOCK: "v1.0.0", "subflow:send_invoice": "v2.3.0",
                       "subflow:notify": "this flow"}
    item = window.palette.item_for_type(STOCK)
    assert item.text(0) == "Check stock"
    assert "check_stock.subflow.json" in item.toolTip(0)
    # First in the palette: the team's own pieces.
    assert window.palette.tree.topLevelItem(0).text(0) == "SUBFLOWS"


def test_the_palette_follows_definitions_and_the_library(make_window, flow_file):  # noqa: F811
    window = open_window(make_window, flow_file)
    doc = window.document
    assert "subflow:triage" not in palette_entries(window.palette)
    # A definition added to the flow (what Convert Selection does).
    doc.flow.subflows.append(SubflowDef(name="triage", label="Triage"))
    doc.sync_subflows()
    assert palette_entries(window.palette)["subflow:triage"] == "this flow"
    assert doc.registry.spec("subflow:triage").name == "Triage"
    # A new library file, seen when the library is read again (focus, open).
    save_to_library(check_stock("1.0.0").model_copy(update={"name": "reorder"}),
                    flow_file.parent / "subflows")
    assert "subflow:reorder" not in palette_entries(window.palette)
    doc.sync_subflows(rescan=True)
    assert palette_entries(window.palette)["subflow:reorder"] == "v1.0.0"
    # Gone again.
    doc.flow.subflows.pop()
    (flow_file.parent / "subflows" / "reorder.subflow.json").unlink()
    doc.sync_subflows(rescan=True)
    entries = palette_entries(window.palette)
    assert "subflow:triage" not in entries and "subflow:reorder" not in entries
    assert doc.registry.spec("subflow:triage") is None


def test_the_library_is_read_again_when_the_window_comes_back(make_window,  # noqa: F811
                                                               flow_file):
    from PySide6.QtCore import QEvent

    window = open_window(make_window, flow_file)
    save_to_library(check_stock("1.0.0").model_copy(update={"name": "reorder"}),
                    flow_file.parent / "subflows")
    assert "subflow:reorder" not in palette_entries(window.palette)
    QApplication.sendEvent(window, QEvent(QEvent.Type.WindowActivate))
    assert palette_entries(window.palette)["subflow:reorder"] == "v1.0.0"


# -- placing an instance -------------------------------------------------------------------

def test_placing_a_library_subflow_pins_its_current_version(make_window, flow_file):  # noqa: F811
    window = open_window(make_window, flow_file)
    doc = window.document
    defn = check_stock("1.0.0")
    # Dragged from the palette onto the canvas.
    dropped = drop_from_palette(window, STOCK, QPointF(300, 200))
    node = doc.node(dropped)
    assert node.type == STOCK and node.id == "check_stock"
    assert node.params == {}  # the definition's defaults apply
    assert node.subflow == SubflowPin(version="1.0.0", hash=defn.content_hash())
    # Double-clicked (activated) in the palette.
    window.palette.tree.itemActivated.emit(window.palette.item_for_type(STOCK), 0)
    second = doc.flow.nodes[-1]
    assert second.id == "check_stock2" and second.subflow == node.subflow
    # Picked in the quick-add popup.
    window.editor.open_quick_add("check", QPointF(0, 0), window.mapToGlobal(window.rect().center()))
    popup = window.editor._quick_add
    assert STOCK in popup.visible_types()
    popup.edit.setText("check stock")
    popup._choose()
    third = doc.flow.nodes[-1]
    assert third.type == STOCK and third.subflow == node.subflow
    # The flow's own definition: no pin (the file holds it).
    window.palette.tree.itemActivated.emit(window.palette.item_for_type("subflow:notify"), 0)
    own = doc.flow.nodes[-1]
    assert own.type == "subflow:notify" and own.subflow is None
    # All four are saved as placed: type and pin in the file.
    doc.save()
    saved = Flow.model_validate_json(flow_file.read_text())
    assert [(n.type, n.subflow) for n in saved.nodes] == [
        (STOCK, node.subflow)] * 3 + [("subflow:notify", None)]


def test_a_new_instance_pins_the_version_the_flows_instances_pin(make_window,  # noqa: F811
                                                                   flow_file):
    window = open_window(make_window, flow_file)
    doc = window.document
    old_pin = current_pin(check_stock("1.0.0"))
    place(doc, "stock", old_pin)
    save_to_library(check_stock("1.1.0", params=V11_PARAMS), flow_file.parent / "subflows")
    doc.sync_subflows(rescan=True)
    assert palette_entries(window.palette)[STOCK] == "v1.1.0"
    # A flow runs one version of a subflow: the new one joins the old pin
    # (and shows the badge); Update all then moves both.
    added = window.editor.add_node(STOCK)
    assert doc.node(added).subflow == old_pin
    assert window.scene.item_for_node(added).look.newer == "1.1.0"
    assert not [p for p in doc.revalidate()
                if p.node in ("stock", added) and (p.field or "").startswith("subflow")]


def test_an_instance_draws_the_definitions_ports(make_window, flow_file):  # noqa: F811
    window = open_window(make_window, flow_file)
    doc = window.document
    place(doc, "stock", current_pin(check_stock("1.0.0")))
    item = window.scene.item_for_node("stock")
    ins = [p.name for p in item.ports if p.kind == "in"]
    outs = [p.name for p in item.ports if p.kind == "out"]
    assert ins == port_names(check_stock("1.0.0"), IN_TYPE) == ["order"]
    assert outs == port_names(check_stock("1.0.0"), OUT_TYPE) == ["ok", "missing"]
    assert item.look.subflow and item.look.subtitle == "Subflow v1.0.0"
    assert item.look.tools_port is None and item.look.tool_name == "check_stock"
    # A wire to a named port is accepted; to a port it lacks, refused.
    doc.insert_node(FlowNode(id="src", type="core.inject", position=(-300, 0)))
    assert doc.can_connect("src", "out", "stock", "order") == (True, "")
    ok, why = doc.can_connect("src", "out", "stock", "in")
    assert not ok and "no input 'in'" in why


def test_an_instance_of_an_edited_definition_follows_its_ports(make_window,  # noqa: F811
                                                               flow_file):
    window = open_window(make_window, flow_file)
    doc = window.document
    doc.insert_node(FlowNode(id="n", type="subflow:notify", position=(0, 0)))
    item = window.scene.item_for_node("n")
    assert [p.name for p in item.ports if p.kind == "out"] == []
    # The definition, edited in its own document (its tab): an output added.
    sub = doc.for_definition(doc.flow.subflow("notify"))
    sub.insert_node(FlowNode(id="done", type=OUT_TYPE, position=(400, 0),
                             params={"name": fixed("done")}))
    assert [p.name for p in item.ports if p.kind == "out"] == ["done"]
    assert doc.flow.subflow("notify").nodes[-1].id == "done"  # edited in place


# -- properties ------------------------------------------------------------------------------

def test_properties_show_the_params_and_refuse_ai_where_not_allowed(make_window,  # noqa: F811
                                                                    flow_file):
    window = open_window(make_window, flow_file)
    doc = window.document
    place(doc, "stock", current_pin(check_stock("1.0.0")))
    window.select_node("stock")
    form = window.properties.form
    assert form is not None and list(form.rows) == ["sku", "warehouse"]
    sku, warehouse = form.rows["sku"], form.rows["warehouse"]
    assert sku.switch.buttons[Scope.AI].isEnabled()
    assert not warehouse.switch.buttons[Scope.AI].isEnabled()
    assert "definition does not allow AI" in warehouse.switch.buttons[Scope.AI].toolTip()
    # The usual switches work: AI for sku writes scope ai.
    QTest.mouseClick(sku.switch.buttons[Scope.AI], Qt.MouseButton.LeftButton)
    assert doc.node("stock").params["sku"].to_json() == {"scope": "ai"}
    # What it runs and where from.
    section = form.subflow_section
    assert "from the library, version <b>1.0.0</b>" in section.title.text()
    assert section.source.text() == "subflows/check_stock.subflow.json"  # beside the flow
    assert str(flow_file.parent / "subflows" / "check_stock.subflow.json") in \
        section.source.toolTip()
    assert section.buttons.isHidden()  # nothing newer


def test_a_newer_library_version_shows_on_the_node(make_window, flow_file):  # noqa: F811
    window = open_window(make_window, flow_file)
    doc = window.document
    place(doc, "stock", current_pin(check_stock("1.0.0")))
    item = window.scene.item_for_node("stock")
    assert item.look.newer is None and item.newer_badge_text() == ""
    save_to_library(check_stock("1.1.0", params=V11_PARAMS), flow_file.parent / "subflows")
    doc.sync_subflows(rescan=True)  # the window does this when it gets the focus back
    assert item.look.newer == "1.1.0"
    assert item.newer_badge_text() == "v1.1.0 available"
    assert "Version 1.1.0 is in the library" in item.toolTip()
    # Still drawn as what it pins (1.0.0 has 'warehouse', 1.1.0 has not).
    assert [p.name for p in doc.spec("stock").params] == ["sku", "warehouse"]


def test_update_is_one_undo_step_and_drops_params_that_are_gone(make_window,  # noqa: F811
                                                                 flow_file):
    window = open_window(make_window, flow_file)
    doc = window.document
    old_pin = current_pin(check_stock("1.0.0"))
    place(doc, "stock", old_pin, sku="A-1", warehouse="north")
    save_to_library(check_stock("1.1.0", params=V11_PARAMS), flow_file.parent / "subflows")
    doc.sync_subflows(rescan=True)
    window.select_node("stock")
    section = window.properties.form.subflow_section
    assert section.update_button.isVisible() and section.update_button.isEnabled()
    assert section.update_all_button.isHidden()  # the only instance
    steps = doc.undo_stack.count()
    QTest.mouseClick(section.update_button, Qt.MouseButton.LeftButton)
    node = doc.node("stock")
    assert node.subflow == current_pin(check_stock("1.1.0", params=V11_PARAMS))
    assert list(node.params) == ["sku"]  # warehouse is no param of 1.1.0
    assert doc.undo_stack.count() == steps + 1
    # The form is the new version's, and says what was dropped.
    form = window.properties.form
    assert list(form.rows) == ["sku", "qty"]
    assert "warehouse" in form.subflow_section.note.text()
    assert not form.subflow_section.note.isHidden()
    assert window.scene.item_for_node("stock").look.newer is None
    doc.undo_stack.undo()
    node = doc.node("stock")
    assert node.subflow == old_pin
    assert {k: v.value for k, v in node.params.items()} == {"sku": "A-1", "warehouse": "north"}
    assert list(window.properties.form.rows) == ["sku", "warehouse"]
    assert window.scene.item_for_node("stock").look.newer == "1.1.0"


def test_update_all_is_one_undo_step_for_every_instance(make_window, flow_file):  # noqa: F811
    window = open_window(make_window, flow_file)
    doc = window.document
    old_pin = current_pin(check_stock("1.0.0"))
    place(doc, "a", old_pin, warehouse="north")
    place(doc, "b", old_pin, sku="B-2")
    save_to_library(check_stock("1.1.0", params=V11_PARAMS), flow_file.parent / "subflows")
    doc.sync_subflows(rescan=True)
    window.select_node("a")
    section = window.properties.form.subflow_section
    assert section.update_all_button.isVisible()
    assert section.update_all_button.text() == "Update all instances in this flow (2)"
    # Updating one alone would leave the flow with two versions of one
    # subflow, which it cannot run: only Update all, and the box says why.
    assert section.update_button.isHidden()
    assert "update all 2 instances together" in section.newer.text()
    steps = doc.undo_stack.count()
    QTest.mouseClick(section.update_all_button, Qt.MouseButton.LeftButton)
    new_pin = current_pin(check_stock("1.1.0", params=V11_PARAMS))
    assert [doc.node(n).subflow for n in "ab"] == [new_pin, new_pin]
    assert doc.node("a").params == {} and list(doc.node("b").params) == ["sku"]
    assert doc.undo_stack.count() == steps + 1
    assert "2 instances" in doc.undo_stack.undoText()
    doc.undo_stack.undo()
    assert [doc.node(n).subflow for n in "ab"] == [old_pin, old_pin]
    assert doc.node("a").params["warehouse"].value == "north"
    doc.undo_stack.redo()
    assert [doc.node(n).subflow for n in "ab"] == [new_pin, new_pin]


# -- inside a definition: the scope Subflow ----------------------------------------------

def test_inside_a_definition_a_param_can_take_a_subflow_param(qtbot, flow_file):
    owner = FlowDocument.open(flow_file)
    doc = owner.for_definition(owner.flow.subflow("notify"))
    assert doc.definition is owner.flow.subflow("notify")
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("pause")  # core.delay: seconds, a number
    row = panel.form.rows["seconds"]
    button = row.switch.buttons[Scope.SUBFLOW]
    assert button.isEnabled() and not row.switch.isHidden()
    # Only the subflow's params of a fitting type: a whole number fits a
    # number; text and on/off do not.
    combo = row.subflow_combo
    assert [combo.itemData(i) for i in range(combo.count())] == ["wait"]
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    setting = doc.node("pause").params["seconds"]
    assert setting.to_json() == {"scope": "subflow", "param": "wait"}
    assert owner.flow.subflow("notify").nodes[1].params["seconds"] is setting
    assert not row.subflow_box.isHidden() and row.value_editor.isHidden()
    # A param added to the subflow (its header's editor calls
    # sync_subflows) is offered at once.
    owner.flow.subflow("notify").params.append(SubflowParam(name="pause_for", type="float"))
    doc.sync_subflows()
    combo = panel.form.rows["seconds"].subflow_combo
    assert [combo.itemData(i) for i in range(combo.count())] == ["wait", "pause_for"]
    # A text param picks among the text ones.
    panel.set_node("get")
    url = panel.form.rows["url"]
    assert [url.subflow_combo.itemData(i) for i in range(url.subflow_combo.count())] == \
        ["channel"]
    QTest.mouseClick(url.switch.buttons[Scope.SUBFLOW], Qt.MouseButton.LeftButton)
    assert doc.node("get").params["url"].to_json() == {"scope": "subflow", "param": "channel"}
    doc.undo_stack.undo()
    assert "url" not in doc.node("get").params
    auth = panel.form.rows["auth"]  # one of a list: text may be a choice
    assert [auth.subflow_combo.itemData(i) for i in range(auth.subflow_combo.count())] == \
        ["channel"]
    # A secret takes only a secret (never lands in plain text); this
    # subflow has none, so the button is off and says why.
    token = panel.form.rows["token"]
    assert not token.switch.buttons[Scope.SUBFLOW].isEnabled()
    assert "declares no param" in token.switch.buttons[Scope.SUBFLOW].toolTip()


def test_outside_a_definition_there_is_no_subflow_scope(qtbot, flow_file):
    doc = FlowDocument.open(flow_file)
    doc.insert_node(FlowNode(id="pause", type="core.delay", position=(0, 0)))
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("pause")
    assert Scope.SUBFLOW not in panel.form.rows["seconds"].switch.buttons


def test_the_palette_offers_subflow_ports_only_inside_a_definition(qtbot, flow_file):
    owner = FlowDocument.open(flow_file)
    palette = Palette(owner.registry)
    qtbot.addWidget(palette)
    assert palette.item_for_type(IN_TYPE) is None and palette.item_for_type(OUT_TYPE) is None
    popup = QuickAdd(owner.registry)
    assert IN_TYPE not in popup.visible_types()
    popup.deleteLater()
    sub = owner.for_definition(owner.flow.subflow("notify"))
    palette.set_document(sub)
    assert palette.item_for_type(IN_TYPE) is not None
    assert palette.item_for_type(OUT_TYPE) is not None
    assert palette.item_for_type(STOCK) is not None  # a subflow may hold others
    popup = QuickAdd(sub.registry)
    assert IN_TYPE in popup.visible_types()
    popup.deleteLater()
    palette.set_document(owner)
    assert palette.item_for_type(IN_TYPE) is None


def test_a_definitions_document_is_checked_as_a_definition(qtbot, flow_file):
    owner = FlowDocument.open(flow_file)
    defn = owner.flow.subflow("notify")
    alone = FlowDocument(defn.as_flow(), owner.registry)
    # Checked as a flow of its own, its input node would be refused...
    assert any(p.node == "in" for p in alone.problems)
    doc = owner.for_definition(defn)
    # ...as a definition it is right, and a problem inside is named by the
    # inner id (the owner's check says subflows.notify/get).
    assert not [p for p in doc.problems if p.node == "in"]
    seen = []
    doc.problems_changed.connect(seen.append)
    doc.insert_wire(Wire(source=("pause", "out"), target=("get", "nope")))
    doc.revalidate()
    assert seen and "get" in {p.node for p in doc.problems}
    assert any(p.node == "subflows.notify/get" for p in owner.problems)
    doc.remove_wire(len(defn.wires) - 1)
    doc.revalidate()
    assert "get" not in {p.node for p in doc.problems}
    alone.deleteLater()


def test_a_template_inside_a_definition_previews_the_subflow_params(qtbot, flow_file):
    owner = FlowDocument.open(flow_file)
    defn = owner.flow.subflow("notify")
    defn.params[0].default = "ops"
    defn.nodes[2].params["url"] = ParamValue(
        scope=Scope.EXPRESSION, value="http://127.0.0.1/{{ subflow.channel }}/{{ subflow.wait }}")
    doc = owner.for_definition(defn)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_node("get")
    editor = panel.form.rows["url"].expression_editor
    editor.refresh_preview()
    assert editor.error == ""
    assert editor.value == "http://127.0.0.1/ops/‹subflow.wait›"

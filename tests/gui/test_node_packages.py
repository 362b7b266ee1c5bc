"""Plugins in the designer, through real widgets: the palette and the
properties panel mark a node served by a plugin, and Run > Node Packages
edits ``flow.settings.out_of_process`` through the undo stack.

Plugin nodes here are real ``remote_class`` proxies over a plugin process
that is never started: nothing in the designer may start one just to show
a node (the last assertions of the palette tests check that)."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyleOptionViewItem

from designer.model.commands import SetOutOfProcess
from designer.model.document import FlowDocument
from designer.panels import PropertiesPanel
from designer.panels.palette import PLUGIN_ROLE, TYPE_ROLE, Palette, QuickAdd
from runtime.flow import Flow, FlowNode
from runtime.plugin import host
from runtime.registry import Registry
from runtime.spec import NodeSpec, PortSpec

from .editor_fixtures import *  # noqa: F401,F403
from .editor_fixtures import FAKE_NODES, FakeStep

NOTE = "Runs in its own process: plugin 'textkit'"


def textkit_process() -> host.PluginProcess:
    """A process of its own (not the runtime's shared one for textkit, which
    another test may have started), made and never started."""
    manifest = host.PluginManifest(name="textkit", version="0.1.0", language="node",
                                   command=["node", "index.js"])
    return host.PluginProcess(host.Plugin(manifest, None, "the designer's tests"))


def plugin_class(type_id: str, name: str, category: str = "Text", process=None):
    spec = NodeSpec(type=type_id, name=name, category=category, plugin="textkit",
                    description="Turns a title into a URL slug.", icon="edit", color="#4f7cac",
                    inputs=[PortSpec(name="in", kind="in")], outputs=[PortSpec(name="out")])
    return host.remote_class(spec, process or textkit_process())


@pytest.fixture
def plugin_registry() -> Registry:
    return Registry([*FAKE_NODES, plugin_class("text.slugify", "Slugify")])


def show(qtbot, widget, w=260, h=700):
    qtbot.addWidget(widget)
    widget.resize(w, h)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def colours_at_right(tree, item) -> set[int]:
    """The colours in the right-hand 56 px of an entry's row (where the tag goes)."""
    img = tree.viewport().grab().toImage()
    rect = tree.visualItemRect(item)
    dpr = img.devicePixelRatio()
    seen = set()
    for x in range(rect.right() - 56, rect.right() - 4):
        for y in range(rect.top() + 4, rect.bottom() - 4):
            seen.add(img.pixel(round(x * dpr), round(y * dpr)))
    return seen


# -- the palette ---------------------------------------------------------------------

def test_palette_marks_a_node_served_by_a_plugin(qtbot, plugin_registry):
    palette = show(qtbot, Palette(plugin_registry))
    plugin_item = palette.item_for_type("text.slugify")
    local_item = palette.item_for_type(FakeStep.spec.type)
    assert plugin_item.data(0, PLUGIN_ROLE) == "textkit"
    assert local_item.data(0, PLUGIN_ROLE) is None
    assert NOTE in plugin_item.toolTip(0)
    assert "own process" not in local_item.toolTip(0)
    # The tag is drawn: the right end of the plugin's row has a pill with
    # text in it, the same place in a built-in node's row is plain background.
    assert len(colours_at_right(palette.tree, plugin_item)) > 3
    assert len(colours_at_right(palette.tree, local_item)) == 1
    # A plugin's nodes are found by the plugin's name, and by "plugin".
    for words in ("textkit", "plugin"):
        palette.search.setText(words)
        shown = [i.data(0, TYPE_ROLE) for i in palette.type_items() if not i.isHidden()]
        assert shown == ["text.slugify"]
    assert plugin_registry.get("text.slugify").process.proc is None  # nothing started


def test_a_long_plugin_node_name_is_elided_before_the_tag(qtbot):
    process = textkit_process()
    registry = Registry([plugin_class("text.a", "Slugify", process=process),
                         plugin_class("text.b", "Extract every match of a regular expression",
                                      process=process)])
    palette = show(qtbot, Palette(registry), w=240)
    tree = palette.tree
    short, long = palette.item_for_type("text.a"), palette.item_for_type("text.b")
    tree.setCurrentItem(None)
    tree.clearSelection()
    img = tree.viewport().grab().toImage()
    dpr = img.devicePixelRatio()

    def tag_pixels(item):
        option = QStyleOptionViewItem()
        option.initFrom(tree.viewport())
        option.rect = tree.visualItemRect(item)
        tag = tree.itemDelegate().tag_rect(option)
        return [img.pixel(round(x * dpr), round(y * dpr))
                for x in range(tag.left() - 4, tag.right() + 1)
                for y in range(tag.top(), tag.bottom() + 1)]

    # The tag and the gap before it look the same whatever the name's length:
    # no glyph of the long name runs under or into the tag.
    assert tag_pixels(long) == tag_pixels(short)


def test_quick_add_marks_plugin_nodes_too(qtbot, plugin_registry):
    popup = QuickAdd(plugin_registry)
    qtbot.addWidget(popup)
    items = {popup.list.item(i).data(TYPE_ROLE): popup.list.item(i)
             for i in range(popup.list.count())}
    assert items["text.slugify"].data(PLUGIN_ROLE) == "textkit"
    assert NOTE in items["text.slugify"].toolTip()
    assert items[FakeStep.spec.type].data(PLUGIN_ROLE) is None
    popup.edit.setText("textkit")
    assert popup.visible_types() == ["text.slugify"]


def test_plugin_categories_sort_among_the_known_ones(qtbot):
    process = textkit_process()
    registry = Registry([*FAKE_NODES,
                         plugin_class("text.slugify", "Slugify", "Text", process),
                         # A plugin may spell a known category its own way.
                         plugin_class("pk.inject", "Plugin Inject", "core ", process),
                         plugin_class("pk.zebra", "Zebra", "Zoo", process),
                         plugin_class("pk.misc", "Misc", "", process)])
    palette = show(qtbot, Palette(registry))
    shown = [palette.tree.topLevelItem(i).text(0)
             for i in range(palette.tree.topLevelItemCount())]
    # Known categories in the order a flow is built, then the rest A to Z.
    assert shown == ["CORE", "TEXT", "AI", "OTHER", "TEST", "ZOO"]
    core = palette.tree.topLevelItem(0)
    assert [core.child(i).data(0, TYPE_ROLE) for i in range(core.childCount())] == ["pk.inject"]


# -- the properties panel ----------------------------------------------------------------

def test_properties_header_marks_a_plugin_node(qtbot, plugin_registry):
    flow = Flow(nodes=[FlowNode(id="slug", type="text.slugify", position=(0, 0)),
                       FlowNode(id="step", type=FakeStep.spec.type, position=(200, 0))])
    panel = show(qtbot, PropertiesPanel(FlowDocument(flow, plugin_registry)), 380, 700)
    panel.set_node("slug")
    tag = panel.form.process_tag
    assert tag.isVisible() and tag.text() == "plugin" and tag.toolTip() == NOTE
    panel.set_node("step")
    assert not panel.form.process_tag.isVisible()


def test_properties_header_marks_a_node_whose_package_this_flow_isolates(qtbot):
    registry = Registry.default()
    assert registry.package_of("mail.send") == "mail"
    doc = FlowDocument(Flow(nodes=[FlowNode(id="mail", type="mail.send", position=(0, 0))]),
                       registry)
    panel = show(qtbot, PropertiesPanel(doc), 380, 700)
    panel.set_node("mail")
    assert not panel.form.process_tag.isVisible()
    doc.undo_stack.push(SetOutOfProcess(doc, "mail", True))
    tag = panel.form.process_tag
    assert tag.isVisible() and tag.text() == "own process" and "'mail'" in tag.toolTip()
    doc.undo_stack.undo()
    assert not panel.form.process_tag.isVisible()


# -- Run > Node Packages -----------------------------------------------------------------

@pytest.fixture
def packages_window(make_window):
    return make_window(FlowDocument(Flow(nodes=[
        FlowNode(id="mail", type="mail.send", position=(0, 0))]), Registry.default()))


def click(box) -> None:
    QTest.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))


def test_the_dialog_lists_every_in_process_package_with_a_box(packages_window):
    dialog = packages_window.show_node_packages()
    try:
        assert list(dialog.boxes) == packages_window.document.registry.packages()
        assert "mail" in dialog.boxes and not any(b.isChecked() for b in dialog.boxes.values())
        reg = packages_window.document.registry
        mail_nodes = sum(1 for s in reg.specs() if reg.package_of(s.type) == "mail")
        assert dialog.counts["mail"].text() == f"{mail_nodes} nodes · 1 in this flow"
        assert dialog.counts["http"].text().endswith("nodes")  # none of http in this flow
    finally:
        dialog.close()


def test_toggling_a_package_is_an_undoable_edit_that_saves(packages_window, tmp_path):
    w = packages_window
    doc = w.document
    action = next(a for m in w.menuBar().actions() if m.menu()
                  for a in m.menu().actions() if a is w.packages_action)
    action.trigger()
    dialog = w.packages_dialog
    try:
        assert dialog.isVisible() and not doc.modified
        click(dialog.boxes["mail"])
        assert doc.flow.settings.out_of_process == ["mail"]
        assert doc.modified and w.isWindowModified()
        click(dialog.boxes["core"])
        # Kept in the registry's package order, whatever the order of the clicks.
        assert doc.flow.settings.out_of_process == [
            p for p in doc.registry.packages() if p in ("core", "mail")]
        doc.undo_stack.undo()
        assert doc.flow.settings.out_of_process == ["mail"]
        assert not dialog.boxes["core"].isChecked() and dialog.boxes["mail"].isChecked()
        doc.undo_stack.undo()
        assert doc.flow.settings.out_of_process == []
        assert not dialog.boxes["mail"].isChecked() and not doc.modified
        doc.undo_stack.redo()
        assert dialog.boxes["mail"].isChecked()

        path = tmp_path / "isolated.flow.json"
        doc.save(path)
        assert not doc.modified
        assert json.loads(path.read_text())["settings"] == {"out_of_process": ["mail"]}
        reopened = FlowDocument.open(path, doc.registry)
        assert reopened.flow.settings.out_of_process == ["mail"]

        # Unticked and saved again, the setting leaves the file.
        click(dialog.boxes["mail"])
        assert doc.flow.settings.out_of_process == []
        doc.save(path)
        assert "settings" not in json.loads(path.read_text())

        # Opening the file that has it ticks the box of the open dialog.
        doc.undo_stack.undo()
        doc.save(tmp_path / "again.flow.json")
        assert w.open_path(tmp_path / "again.flow.json", ask=False, recover=False)
        assert dialog.boxes["mail"].isChecked()
    finally:
        dialog.close()


def test_ctrl_z_in_the_dialog_undoes(packages_window, qtbot):
    w = packages_window
    dialog = w.show_node_packages()
    try:
        qtbot.waitExposed(dialog)
        click(dialog.boxes["http"])
        assert w.document.flow.settings.out_of_process == ["http"]
        assert w.undo_action in dialog.actions()
        dialog.activateWindow()
        QTest.keyClick(dialog.boxes["http"], Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert w.document.flow.settings.out_of_process == []
        assert not dialog.boxes["http"].isChecked()
    finally:
        dialog.close()


def test_a_package_the_flow_names_but_no_one_installed_can_be_unticked(make_window):
    flow = Flow(settings={"out_of_process": ["mail", "ocr"]})
    w = make_window(FlowDocument(flow, Registry.default()))
    dialog = w.show_node_packages()
    try:
        assert dialog.boxes["ocr"].isChecked()
        assert list(dialog.boxes)[-1] == "ocr"  # after the installed ones
        click(dialog.boxes["ocr"])
        assert w.document.flow.settings.out_of_process == ["mail"]
        w.document.undo_stack.undo()
        assert w.document.flow.settings.out_of_process == ["mail", "ocr"]
    finally:
        dialog.close()


def test_the_dialog_shows_plugin_packages_and_what_failed_to_load(make_window, data_dir):
    good = data_dir / "plugins" / "echo"
    good.mkdir(parents=True)
    (good / "plugin.json").write_text(json.dumps({
        "name": "echo", "version": "2.1.0", "language": "python",
        "description": "Says it back", "command": ["python", "echo.py"]}))
    bad = data_dir / "plugins" / "broken"
    bad.mkdir()
    (bad / "plugin.json").write_text('{"name": "broken"}')  # no command
    registry = Registry(FAKE_NODES)
    registry.load_errors.append("nodes.ocr: No module named 'tesseract'")
    w = make_window(FlowDocument(registry=registry))
    dialog = w.show_node_packages()
    try:
        names = [p.name for p in dialog.plugins]
        assert "echo" in names and "broken" not in names
        cell = dialog.findChild(type(dialog.page), "plugin:echo")
        text = " ".join(label.text() for label in cell.findChildren(type(w.counts_label)))
        assert "echo" in text and "2.1.0" in text and "Python" in text
        assert "Says it back" in text
        folder = [lab for lab in cell.findChildren(type(w.counts_label))
                  if getattr(lab, "full_text", "")]
        assert folder and folder[0].full_text.endswith("plugins/echo")
        assert any("broken" in p and "command" in p for p in dialog.problems)
        assert "nodes.ocr: No module named 'tesseract'" in dialog.problems
        shown = [lab.text() for lab in dialog.page.findChildren(type(w.counts_label))
                 if lab.objectName() == "fieldError"]
        assert "nodes.ocr: No module named 'tesseract'" in shown
        # Plugins are always out of process: nothing to tick for them.
        assert "echo" not in dialog.boxes
        # A plugin installed while the dialog was closed appears when it opens again.
        dialog.close()
        late = data_dir / "plugins" / "late"
        late.mkdir()
        (late / "plugin.json").write_text(json.dumps({"name": "late", "command": ["x"]}))
        assert "late" in [p.name for p in w.show_node_packages().plugins]
    finally:
        dialog.close()

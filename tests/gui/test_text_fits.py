"""Text that reads whole (issue T3 2/10, item 5): a long answer wraps in the
Debug tab (three lines in the list, all of it in the detail pane), the
scripted turns table's headers fit their columns, and a problem's full
text is on screen, selectable, in the Problems tab, not only in a tooltip.
The main window at 1440x900 with long values, real runs, real clicks."""

from __future__ import annotations

import json

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QTextLayout, QTextOption
from PySide6.QtWidgets import QHeaderView, QStyle, QStyleOptionViewItem, QTreeWidget, QWidget

from designer.panels.inspector.inspector import TAB_DEBUG, TAB_PROBLEMS
from tests.gui.layout_checks import settle, shot
from tests.gui.long_values import *  # noqa: F403 - open_window and the flows
from tests.gui.long_values import ANSWER, EMAIL_ASSISTANT, email_flow


def run(window, qtbot) -> None:
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.run_session.controller.is_running, timeout=15000)
    settle()


def text_room(tree: QTreeWidget, item, column: int) -> tuple[int, int]:
    """(the height the view gives ``item``'s text, the height its text
    needs): the text rectangle the style draws in (Qt's own
    SE_ItemViewItemText, padding and all), and the text laid out in it as
    Qt's style lays it out (QTextOption.WordWrap)."""
    index = tree.model().index(tree.indexOfTopLevelItem(item), column)
    opt = QStyleOptionViewItem()
    tree.itemDelegate().initStyleOption(opt, index)
    opt.rect = tree.visualRect(index)
    rect = tree.style().subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, tree)
    margin = tree.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, tree) + 1
    layout = QTextLayout(item.text(column).replace("\n", "\u2028"), opt.font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    layout.setTextOption(option)
    height = 0.0
    layout.beginLayout()
    while (line := layout.createLine()).isValid():
        line.setLineWidth(rect.width() - 2 * margin)
        height += line.height()
    layout.endLayout()
    return rect.height(), int(height)


def click_item(qtbot, tree: QTreeWidget, item, column: int = 0) -> None:
    rect = tree.visualItemRect(item)
    x = tree.header().sectionViewportPosition(column) + 10
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.topLeft() + QRect(
        0, 0, x, rect.height() // 2).bottomRight())


def cut_headers(header: QHeaderView, texts: list[str]) -> list[str]:
    """The visible sections whose title does not fit their width."""
    margin = header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    out = []
    for col, text in enumerate(texts):
        if header.isSectionHidden(col) or not text:
            continue
        need = header.fontMetrics().horizontalAdvance(text) + 2 * margin
        if header.sectionSize(col) < need:
            out.append(f"{text!r}: {header.sectionSize(col)} px of {need}")
    return out


# -- the Debug tab ------------------------------------------------------------------------------
def test_a_long_answer_wraps_in_the_debug_list_and_reads_whole_in_the_detail(open_window, qtbot,
                                                                             tmp_path):
    window = open_window(email_flow(tmp_path))
    run(window, qtbot)
    inspector = window.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_DEBUG)
    settle()
    debug = inspector.debug
    [row] = [debug.list.topLevelItem(i) for i in range(debug.list.topLevelItemCount())
             if debug.list.topLevelItem(i).text(1) == "Answer"]
    line = debug.list.fontMetrics().lineSpacing()
    # In the list: three lines of the answer, not one cut short.
    assert debug.list.visualItemRect(row).height() >= 3 * line
    click_item(qtbot, debug.list, row, 1)
    settle()
    shot(window, "debug-detail")
    # In the detail pane: all of it, wrapped, the row as tall as the text.
    root = debug.detail.topLevelItem(0)
    assert root.text(1) == json.dumps(ANSWER)
    room, need = text_room(debug.detail, root, 1)
    assert room >= need > 3 * line  # several lines, every one of them shown
    assert not cut_headers(debug.list.header(), ["Time", "Node", "Value"])


# -- headers ------------------------------------------------------------------------------------
def test_the_turns_table_headers_read_whole_in_the_properties_dock(open_window, tmp_path):
    window = open_window(email_flow(tmp_path))
    window.select_node("agent")
    settle()
    editor = window.properties.findChild(QWidget, "turnsEditor")
    window.properties.scroll.ensureWidgetVisible(editor)
    settle()
    shot(window, "turns-headers")
    table = editor.table
    texts = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert not cut_headers(table.horizontalHeader(), texts)


# -- the Problems tab -----------------------------------------------------------------------------
def test_an_unknown_node_types_problem_reads_whole_and_its_text_can_be_selected(
        open_window, qtbot, tmp_path):
    data = json.loads(EMAIL_ASSISTANT.read_text())
    data["nodes"].append({"id": "crm", "type": "acme.crm_lookup", "name": "CRM lookup",
                          "position": [80, 300]})
    path = tmp_path / "unknown.flow.json"
    path.write_text(json.dumps(data))
    window = open_window(path)
    inspector = window.run_session.inspector
    bar = inspector.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(TAB_PROBLEMS).center())
    settle()
    problems = inspector.problems
    [item] = [problems.tree.topLevelItem(i) for i in range(problems.tree.topLevelItemCount())
              if "acme.crm_lookup" in problems.tree.topLevelItem(i).text(3)]
    message = item.text(3)
    assert message.startswith("unknown node type 'acme.crm_lookup': no installed node package")
    # The row shows all of it, wrapped.
    room, need = text_room(problems.tree, item, 3)
    assert room >= need > problems.tree.fontMetrics().lineSpacing()
    click_item(qtbot, problems.tree, item, 3)
    settle()
    shot(window, "problem-detail")
    # Below the list, the selected problem's whole text, selectable with the mouse and keys.
    detail = problems.detail
    assert detail.isVisibleTo(window) and message in detail.text()
    flags = detail.textInteractionFlags()
    assert flags & Qt.TextInteractionFlag.TextSelectableByMouse
    assert flags & Qt.TextInteractionFlag.TextSelectableByKeyboard
    assert detail.height() >= detail.heightForWidth(detail.width())

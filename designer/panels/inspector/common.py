"""Small pieces the inspector tabs share: colours, formatting, the JSON tree."""

from __future__ import annotations

import json
import math
from typing import Any

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QSplitter,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

# A calm palette: one hue per meaning, muted enough to sit beside the canvas.
COLORS = {
    "running": "#3b82c4",
    "success": "#3f9b5b",
    "ok": "#3f9b5b",
    "done": "#3f9b5b",
    "error": "#c8504a",
    "refused": "#c98a2b",
    "warning": "#c98a2b",
    "stopped": "#7c8593",
    "timeout": "#c98a2b",
    "cancelled": "#7c8593",
    "interrupted": "#7c8593",
    "llm": "#8569c2",
    "node": "#6f9fd8",
    "debug": "#4f9a94",
    "muted": "#7c8593",
}

ROLE_COLORS = {
    "system": "#7c8593",
    "user": "#3b82c4",
    "assistant": "#8569c2",
    "tool": "#3f9b5b",
}

PREVIEW_CHARS = 160
#: Characters of a text value the detail pane shows (wrapped, whole below this).
DETAIL_CHARS = 20_000
#: A column narrower than this (px of text) shows one line: wrapped, it would
#: stand a word per line.
MIN_WRAP_WIDTH = 80
KEY_WIDTH = 180  # a JSON pane's Key column, where the pane has room


def color(name: str) -> QColor:
    return QColor(COLORS.get(name, COLORS["muted"]))


def mono_font() -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    return font


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """One line of a JSON value, as a person scanning a list wants it."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_json_text(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def step_text(step: Any) -> str:
    """A node inside a subflow tool call, as the Tools and Agent tabs say
    it (a model.StepRecord): "✓ ran", "✓ ran 3×", "✕ failed: <why>",
    "… running", "■ cancelled"."""
    if step.status == "running":
        return "… running"
    if step.status == "cancelled":
        return "■ cancelled"
    if step.status == "error":
        return f"✕ failed: {step.text}" if step.text else "✕ failed"
    ran = "✓ ran" + (f" {step.runs}×" if step.runs > 1 else "")
    return ran + (f" ({step.errors} failed)" if step.errors else "")


def fmt_duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    if ms < 1:
        return f"{ms * 1000:.0f} µs"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    minutes, seconds = divmod(ms / 1000, 60)
    return f"{int(minutes)} min {seconds:.0f} s"


def failed_calls(n: int) -> str:
    """"1 failed tool call", "3 failed tool calls"."""
    return f"{n} failed tool call{'s' if n != 1 else ''}"


def run_outcome(status: str, failed_tool_calls: int = 0) -> tuple[str, str]:
    """(words, colour state) for how a run ended: a run that completed while
    tool calls failed under it says so in the warning colour, never a green
    "Finished"."""
    words = {"ok": "Finished", "error": "Finished with errors", "stopped": "Stopped",
             "timeout": "Timed out"}.get(status, status)
    if status == "ok" and failed_tool_calls:
        return f"Finished with {failed_calls(failed_tool_calls)}", "warning"
    if failed_tool_calls:
        words += f", {failed_calls(failed_tool_calls)}"
    return words, status


def fmt_seconds(t: float) -> str:
    return f"{t * 1000:.0f} ms" if t < 1 else f"{t:.2f} s"


def copy_text(text: str) -> None:
    clipboard = QGuiApplication.clipboard()
    if clipboard is not None:
        clipboard.setText(text)


def call_tree_columns(tree: QTreeWidget, first_width: int) -> None:
    """A tool-call tree's five columns: the first sized by hand, the two in
    the middle (arguments, result) sharing what the last two (status or
    duration, id) leave, so no column hides past a scroll bar."""
    header = tree.header()
    header.setStretchLastSection(False)
    header.setMinimumSectionSize(60)
    for col, mode in enumerate((QHeaderView.ResizeMode.Interactive,
                                QHeaderView.ResizeMode.Stretch,
                                QHeaderView.ResizeMode.Stretch,
                                QHeaderView.ResizeMode.ResizeToContents,
                                QHeaderView.ResizeMode.ResizeToContents)):
        header.setSectionResizeMode(col, mode)
    tree.setColumnWidth(0, first_width)


def hint_label(text: str) -> QLabel:
    """The grey sentence an empty view shows, saying how to fill it."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setStyleSheet(f"color: {COLORS['muted']}; padding: 16px;")
    return label


def hint_or(owner: QWidget, hint: str, content: QWidget) -> tuple[QLabel, QStackedWidget]:
    """A tab's two faces, filling ``owner``: the hint it shows while empty
    (page 0, hint_label) and its content (page 1). Returns both: the tab
    turns the page."""
    empty = hint_label(hint)
    stack = QStackedWidget()
    stack.addWidget(empty)
    stack.addWidget(content)
    layout = QVBoxLayout(owner)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(stack)
    return empty, stack


class ElidedLabel(QLabel):
    """One line of plain text beside a tab's buttons (a file path, a
    usage summary) that gives way when the inspector is narrow: whole when
    it fits, else cut with "…" (in the middle, for a path) and whole in its
    tooltip. Its minimum is a few characters, never the text's width, so a
    long text cannot widen the window."""

    def __init__(self, text: str = "", mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = mode
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self._update_tip()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self.fontMetrics().horizontalAdvance("x" * 8)),
                     hint.height())

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._update_tip()

    def _update_tip(self) -> None:
        self.setToolTip(self.text() if self.is_elided() else "")

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), self.mode, rect.width())
        painter = QPainter(self)
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(),
                                  self.isEnabled(), text, self.foregroundRole())


class ButtonRow(QWidget):
    """Tool buttons side by side with their text beside their icons, that
    give way when the row is narrow: then they show their icons alone (the
    text stays in the tooltip), so the row never widens the window."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.setSpacing(6)
        self._compact = False

    def buttons(self) -> list[QToolButton]:
        return [self.row.itemAt(i).widget() for i in range(self.row.count())
                if isinstance(self.row.itemAt(i).widget(), QToolButton)]

    def _width(self, style: Qt.ToolButtonStyle) -> int:
        m, own = self.row.contentsMargins(), self.contentsMargins()
        width = m.left() + m.right() + own.left() + own.right()
        shown = [b for b in self.buttons() if not b.isHidden()]
        for b in shown:
            text = b.text() if style != Qt.ToolButtonStyle.ToolButtonIconOnly else ""
            width += b.iconSize().width() + 14 + (
                b.fontMetrics().horizontalAdvance(text) + 6 if text else 0)
        return width + self.row.spacing() * max(0, len(shown) - 1)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        return QSize(self._width(Qt.ToolButtonStyle.ToolButtonIconOnly), hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(self._width(Qt.ToolButtonStyle.ToolButtonTextBesideIcon),
                     super().sizeHint().height())

    @property
    def compact(self) -> bool:
        return self._compact

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        compact = self.width() < self._width(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        if compact != self._compact:
            self._compact = compact
            style = (Qt.ToolButtonStyle.ToolButtonIconOnly if compact
                     else Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            for b in self.buttons():
                b.setToolButtonStyle(style)


RERUN_CALL_TEXT = "Re-run This Call…"


def rerun_call_menu(parent: QWidget, call: Any, model_status: str, rerun: Any) -> QMenu:
    """A tool call's context menu (Tools tab, Agent tab): "Re-run This
    Call…" asks ``rerun(caller_id)``; disabled, with the reason as its tip,
    for a call no node answered or a run still going."""
    menu = QMenu(parent)
    action = menu.addAction(RERUN_CALL_TEXT, lambda: rerun(call.caller_id))
    action.setToolTip("Repeat this call through the agent's tool bridge, with the same or "
                      "edited arguments, as a new run; the LLM is not asked")
    why = ("the agent answered it itself: no node to call again" if not call.node
           else "the run is still going: re-run its calls once it has ended"
           if model_status == "running" else "")
    if why:
        action.setEnabled(False)
        action.setToolTip(why[:1].upper() + why[1:])
    menu.setToolTipsVisible(True)
    menu.addAction("Copy Arguments", lambda: copy_text(to_json_text(call.args)))
    return menu


# -- wrapped rows -------------------------------------------------------------

def wrapped_text_height(text: str, font: QFont, width: int) -> int:
    """The height ``text`` takes wrapped at ``width`` as an item view draws
    it (Qt's style lays it out with QTextOption.WordWrap: at word
    boundaries; a word longer than the line stays on one), newlines kept."""
    layout = QTextLayout(text.replace("\n", "\u2028"), font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    layout.setTextOption(option)
    height = 0.0
    layout.beginLayout()
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        height += line.height()
    layout.endLayout()
    return math.ceil(height)


#: Sizes a remembering WrapDelegate keeps (texts of up to a few hundred
#: characters each); past it, it starts again.
REMEMBERED_SIZES = 4096


class WrapDelegate(QStyledItemDelegate):
    """Rows as tall as their wrapped text in the columns ``columns`` (all
    when None), up to ``max_lines`` lines (None: no bound), so a long value
    reads whole where a one-line row would cut it with "…". A QTreeView
    sizes its rows as if every column were endless; this measures the text
    at the column's width, and ``follow_widths`` lays the rows out again
    when a column or the view changes width."""

    def __init__(self, view: QTreeWidget, columns: tuple[int, ...] | None = None,
                 max_lines: int | None = None, wraps: Any = None, remember: bool = False) -> None:
        super().__init__(view)
        self.view = view
        # remember: a flat list whose column has one font for every row (the
        # debug list) keeps each (column, width, text)'s size. Without it,
        # every row added lays out every row again (a QTreeView with rows of
        # their own heights does), and a busy run's 1,000 debug rows cost
        # 3,000 text layouts per refresh: 300 ms and more on the GUI thread.
        self._sizes: dict[tuple[int, int, str], QSize] | None = {} if remember else None
        self.measured = 0  # text layouts made (what remember saves; tests read it)
        self.columns = columns
        self.max_lines = max_lines  # a row cut there ends its last line with "…"
        self.wraps = wraps  # index -> bool: which rows wrap (None: all)
        view.setWordWrap(True)
        view.setUniformRowHeights(False)
        # A row taller than the view is scrolled through, not jumped over.
        view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        view.setItemDelegate(self)
        self._relayout = QTimer(view)
        self._relayout.setSingleShot(True)
        self._relayout.setInterval(0)
        self._relayout.timeout.connect(view.doItemsLayout)
        view.header().sectionResized.connect(lambda *_: self._relayout.start())
        self._width = -1
        view.viewport().installEventFilter(self)

    def eventFilter(self, obj: Any, event: Any) -> bool:  # noqa: N802 - Qt override
        if event.type() == event.Type.Resize and obj.width() != self._width:
            self._width = obj.width()
            self._relayout.start()
        return False

    def wrapped(self, index: Any) -> bool:
        """Whether ``index`` wraps (its column and row are among those that do)."""
        return ((self.columns is None or index.column() in self.columns)
                and (self.wraps is None or bool(self.wraps(index))))

    def initStyleOption(self, option: QStyleOptionViewItem, index: Any) -> None:  # noqa: N802
        super().initStyleOption(option, index)
        if not self.wrapped(index):
            # One line, cut with "…", never a second line peeking out.
            option.features &= ~QStyleOptionViewItem.ViewItemFeature.WrapText
        if not self.max_lines:
            # In a row of many lines, every column starts on the first (a
            # row cut at max_lines stays centred: the style then ends its
            # last whole line with "…" and shows no part of the next).
            horizontal = option.displayAlignment & Qt.AlignmentFlag.AlignHorizontal_Mask
            option.displayAlignment = horizontal | Qt.AlignmentFlag.AlignTop

    def _padding(self, opt: QStyleOptionViewItem) -> tuple[int, int]:
        """What the style adds around an item's text, across and down (its
        margins, an icon, a style sheet's padding): a one-line item's size
        less its text's."""
        probe = QStyleOptionViewItem(opt)
        probe.text = "x"
        probe.features &= ~QStyleOptionViewItem.ViewItemFeature.WrapText
        size = self.view.style().sizeFromContents(QStyle.ContentsType.CT_ItemViewItem, probe,
                                                  QSize(), self.view)
        metrics = probe.fontMetrics
        return (size.width() - metrics.horizontalAdvance("x"),
                max(0, size.height() - metrics.height()))

    def text_width(self, option: QStyleOptionViewItem, index: Any) -> int:
        """The width the text of ``index`` has in its column."""
        view = self.view
        width = view.header().sectionSize(index.column())
        if index.column() == view.header().logicalIndex(0):
            depth, parent = 0, index.parent()
            while parent.isValid():
                depth, parent = depth + 1, parent.parent()
            width -= view.indentation() * (depth + (1 if view.rootIsDecorated() else 0))
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        return width - self._padding(opt)[0]

    def sizeHint(self, option: QStyleOptionViewItem, index: Any) -> QSize:  # noqa: N802
        sizes = self._sizes
        if sizes is None:
            return self._size_hint(option, index)
        column = index.column()
        text = index.data(Qt.ItemDataRole.DisplayRole)
        key = (column, self.view.header().sectionSize(column), text if isinstance(text, str) else "")
        size = sizes.get(key)
        if size is None:
            if len(sizes) >= REMEMBERED_SIZES:
                sizes.clear()
            size = sizes[key] = self._size_hint(option, index)
        return size

    def _size_hint(self, option: QStyleOptionViewItem, index: Any) -> QSize:
        hint = super().sizeHint(option, index)
        if not self.wrapped(index):
            return hint
        text = index.data(Qt.ItemDataRole.DisplayRole)
        if not isinstance(text, str) or not text:
            return hint
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        metrics = opt.fontMetrics
        width = self.text_width(option, index)
        if width < MIN_WRAP_WIDTH:
            # A column squeezed (or scrolled) out of sight: one line, not a
            # tower of one word per line.
            return hint
        height = wrapped_text_height(text, opt.font, width)
        self.measured += 1
        if self.max_lines:
            height = min(height, metrics.lineSpacing() * self.max_lines)
        return QSize(hint.width(), max(hint.height(), height + self._padding(opt)[1]))


# -- JSON trees ---------------------------------------------------------------

VALUE_ROLE = Qt.ItemDataRole.UserRole + 1
PATH_ROLE = Qt.ItemDataRole.UserRole + 2


def fill_json_item(item: QTreeWidgetItem, key: str, value: Any, path: str, value_col: int = 1,
                   font: QFont | None = None) -> None:
    """Make ``item`` show one JSON value; its children are built when it is
    first expanded, so a 10 MB payload costs nothing until someone looks."""
    item.setText(0, key)
    item.setData(0, VALUE_ROLE, value)
    item.setData(0, PATH_ROLE, path)
    if isinstance(value, dict):
        summary = f"{{{len(value)}}}  " + preview(value, 120) if value else "{}"
    elif isinstance(value, list):
        summary = f"[{len(value)}]  " + preview(value, 120) if value else "[]"
    else:
        # A text whole (wrapped by the tree's WrapDelegate), up to DETAIL_CHARS.
        summary = preview(value, 400) if not isinstance(value, str) else json.dumps(
            value if len(value) <= DETAIL_CHARS else value[:DETAIL_CHARS - 1] + "…",
            ensure_ascii=False)
    item.setText(value_col, summary)
    item.setToolTip(value_col, preview(value, 1000))
    if font is not None:
        item.setFont(value_col, font)
    if not isinstance(value, str):
        kind = "null" if value is None else type(value).__name__
        item.setForeground(value_col, QColor(_VALUE_COLORS.get(kind, "#3d4450")))
    if isinstance(value, (dict, list)) and value:
        item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)


_VALUE_COLORS = {"int": "#2f6fb0", "float": "#2f6fb0", "bool": "#8569c2", "null": "#7c8593",
                 "dict": "#7c8593", "list": "#7c8593"}


def expand_json_item(item: QTreeWidgetItem, value_col: int = 1, font: QFont | None = None) -> None:
    if item.childCount() or not isinstance(item.data(0, VALUE_ROLE), (dict, list)):
        return
    value = item.data(0, VALUE_ROLE)
    path = item.data(0, PATH_ROLE) or ""
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child_value in list(pairs)[:2000]:
        child = QTreeWidgetItem(item)
        key_text = str(key) if isinstance(value, dict) else f"[{key}]"
        child_path = (f"{path}.{key}" if path else str(key)) if isinstance(value, dict) \
            else f"{path}[{key}]"
        fill_json_item(child, key_text, child_value, child_path, value_col, font)
    if len(value) > 2000:
        more = QTreeWidgetItem(item)
        more.setText(0, f"… {len(value) - 2000} more")


class JsonTree(QTreeWidget):
    """An expandable view of one JSON value (or several, one per root)."""

    value_copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(2)
        self.setHeaderLabels(["Key", "Value"])
        self.setAlternatingRowColors(True)
        # A long value wraps onto as many lines as it needs; an object's or
        # a list's one-line summary stays one line (it opens instead).
        self.wrap = WrapDelegate(self, columns=(1,), wraps=lambda index: not isinstance(
            index.siblingAtColumn(0).data(VALUE_ROLE), (dict, list)))
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)
        self.itemExpanded.connect(lambda item: expand_json_item(item, 1, self._mono))
        self._mono = mono_font()
        self.header().setStretchLastSection(True)
        self.setColumnWidth(0, KEY_WIDTH)
        self._key_width_set = False  # the user dragged the Key column's edge
        self.header().sectionResized.connect(self._key_resized)
        copy = QAction("Copy value", self)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.copy_selected)
        self.addAction(copy)

    def _key_resized(self, index: int, _old: int, _new: int) -> None:
        if index == 0 and not getattr(self, "_fitting", False):
            self._key_width_set = True

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if not self._key_width_set:
            # In a narrow pane the keys leave the values room (40%).
            self._fitting = True
            self.setColumnWidth(0, max(80, min(KEY_WIDTH, self.viewport().width() * 2 // 5)))
            self._fitting = False

    def set_roots(self, roots: list[tuple[str, Any]], expand: bool = True) -> None:
        self.clear()
        for key, value in roots:
            item = QTreeWidgetItem(self)
            fill_json_item(item, key, value, "", 1, self._mono)
            if expand and len(roots) <= 3:
                item.setExpanded(True)

    def set_value(self, value: Any, key: str = "msg") -> None:
        self.set_roots([(key, value)])

    def copy_selected(self) -> None:
        item = self.currentItem()
        if item is not None:
            text = to_json_text(item.data(0, VALUE_ROLE))
            copy_text(text)
            self.value_copied.emit(text)

    def _menu(self, pos: Any) -> None:
        item = self.itemAt(pos)
        if item is None:
            return
        menu = QMenu(self)
        menu.addAction("Copy value", self.copy_selected)
        path = item.data(0, PATH_ROLE)
        if path:
            menu.addAction("Copy path", lambda: copy_text(path))
        menu.exec(self.viewport().mapToGlobal(pos))


def grey_rows(item: QTreeWidgetItem, columns: int, grey: bool) -> None:
    """Draw a row in the muted colour (it is about a node edited since the
    run), or back in the view's own colours."""
    for col in range(columns):
        if grey:
            item.setForeground(col, color("muted"))
        else:
            item.setData(col, Qt.ItemDataRole.ForegroundRole, None)
    font = item.font(0)
    if font.italic() != grey:
        for col in range(columns):
            f = item.font(col)
            f.setItalic(grey)
            item.setFont(col, f)


def tree_with_detail(tree: QWidget, detail: JsonTree, sizes: tuple[int, int],
                     stretch: tuple[int, int]) -> tuple[QSplitter, QLabel]:
    """A list on the left and, on the right, the selected row's detail as a
    JSON tree under a bold title (the Tools and Agent tabs): the splitter,
    and the title label to fill."""
    title = QLabel()
    title.setStyleSheet("font-weight: 600; padding: 6px 8px 2px 8px;")
    title.setWordWrap(True)
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(0)
    lay.addWidget(title)
    lay.addWidget(detail, 1)
    split = QSplitter(Qt.Orientation.Horizontal)
    split.addWidget(tree)
    split.addWidget(box)
    split.setStretchFactor(0, stretch[0])
    split.setStretchFactor(1, stretch[1])
    split.setSizes(list(sizes))
    return split, title

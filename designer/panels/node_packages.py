"""Run > Node Packages…: where this flow's node packages run.

One row per in-process package (``Registry.packages()``) with a "Run in its
own process" box that edits ``flow.settings.out_of_process`` through the
undo stack (designer.model.commands.SetOutOfProcess), as any other edit; and,
read-only, the plugin packages found (``runtime.plugin.host.find_plugins``),
which always run in their own process, with what could not be loaded.

The dialog is a view of the document: it follows ``settings_changed`` (an
undo from the main window flips the box back) and stays open beside the
canvas rather than blocking it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from designer.model.commands import SetOutOfProcess
from designer.model.document import FlowDocument
from runtime.plugin import host

from .panel_style import is_dark, label, panel_style, section

#: How a manifest's ``language`` is shown.
LANGUAGES = {"python": "Python", "node": "Node.js", "nodejs": "Node.js", "js": "JavaScript",
             "javascript": "JavaScript", "typescript": "TypeScript", "go": "Go", "rust": "Rust",
             "java": "Java"}

INTRO = ("A package in its own process cannot take a run down when it crashes or hangs: "
         "that call fails, the package restarts, the run goes on. Each of its calls then "
         "crosses a process boundary. The choice is saved with this flow and takes effect "
         "the next time it runs.")

DIALOG_STYLE = """
QLabel#packageName { font-weight: 600; }
QLabel#problemText { font-family: monospace; }
QWidget#packagesPage { background: palette(window); }
"""


class ElidedLabel(QLabel):
    """One line that elides in the middle when narrow (a folder path keeps
    both its root and its last folder); the whole text is the tooltip."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.full_text = text
        self.setToolTip(text)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def paintEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setPen(self.palette().color(self.foregroundRole()))
        shown = QFontMetrics(self.font()).elidedText(self.full_text, Qt.TextElideMode.ElideMiddle,
                                                     self.contentsRect().width())
        p.drawText(self.contentsRect(), int(self.alignment()), shown)
        p.end()


def language_name(language: str) -> str:
    return LANGUAGES.get(language.lower(), language) if language else ""


def _nodes(n: int) -> str:
    return f"{n} node{'s' * (n != 1)}"


def _home_relative(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class NodePackagesDialog(QDialog):
    """``boxes`` maps a package name to its checkbox; ``plugins`` holds the
    plugin packages shown; ``problems`` the texts of the load errors."""

    def __init__(self, doc: FlowDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("nodePackagesDialog")
        self.doc = doc
        self.boxes: dict[str, QCheckBox] = {}
        self.counts: dict[str, QLabel] = {}
        self.plugins: list[host.Plugin] = []
        self.problems: list[str] = []
        self.setWindowTitle("Node Packages")
        self.setMinimumWidth(560)
        self.resize(680, 640)

        self.page = QWidget()
        self.page.setObjectName("packagesPage")
        self.body = QVBoxLayout(self.page)
        self.body.setContentsMargins(20, 16, 20, 16)
        self.body.setSpacing(8)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self.page)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 12)
        layout.setSpacing(8)
        layout.addWidget(scroll, 1)
        bottom = QVBoxLayout()
        bottom.setContentsMargins(20, 0, 20, 0)
        bottom.addWidget(buttons)
        layout.addLayout(bottom)
        self._apply_style()

        self.rebuild()
        doc.settings_changed.connect(self.sync)
        doc.flow_reset.connect(self.sync)
        doc.changed.connect(self._update_counts)

    # -- content -----------------------------------------------------------------
    def rebuild(self) -> None:
        """Read the packages again (a plugin installed meanwhile appears)."""
        while self.body.count():
            item = self.body.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
            elif item.layout() is not None:
                _clear(item.layout())
        self.boxes.clear()
        self.counts.clear()
        page = self.page
        title = label("Where this flow's nodes run", "emptyTitle", page)
        self.body.addWidget(title)
        self.body.addWidget(label(INTRO, "muted", page))

        self.body.addWidget(section("Packages", page))
        grid = QGridLayout()
        grid.setHorizontalSpacing(16)
        grid.setVerticalSpacing(10)
        grid.setColumnStretch(0, 1)
        known = self.doc.registry.packages()
        chosen = self.doc.flow.settings.out_of_process
        missing = [p for p in chosen if p not in known]
        for row, name in enumerate(known + missing):
            grid.addWidget(self._package_cell(name, installed=name in known), row, 0)
            box = QCheckBox("Run in its own process", page)
            box.setObjectName(f"outOfProcess:{name}")
            box.setToolTip(f"Run the nodes of package '{name}' in a process of their own "
                           "in this flow")
            box.clicked.connect(lambda on, name=name: self._toggle(name, bool(on)))
            self.boxes[name] = box
            grid.addWidget(box, row, 1, Qt.AlignmentFlag.AlignVCenter)
        self.body.addLayout(grid)

        self.body.addWidget(section("Plugin packages", page))
        self.body.addWidget(label("Always in their own process; they are installed with "
                                  "<tt>switchboard package install FOLDER</tt>.", "muted", page))
        found, errors = host.find_plugins()
        self.plugins = found
        if found:
            per_plugin = Counter(s.plugin for s in self.doc.registry.specs() if s.plugin)
            grid = QGridLayout()
            grid.setHorizontalSpacing(16)
            grid.setVerticalSpacing(10)
            grid.setColumnStretch(0, 1)
            for row, plugin in enumerate(found):
                grid.addWidget(self._plugin_cell(plugin, per_plugin[plugin.name]), row, 0)
        else:
            grid = None
            self.body.addWidget(label("None found.", "muted", page))
        if grid is not None:
            self.body.addLayout(grid)

        self.problems = list(dict.fromkeys(self.doc.registry.load_errors + errors))
        if self.problems:
            self.body.addWidget(section("Could not be loaded", page))
            for text in self.problems:
                problem = label(text, "fieldError", page)
                problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                problem.setTextFormat(Qt.TextFormat.PlainText)
                self.body.addWidget(problem)
        self.body.addStretch(1)
        self.sync()
        self._update_counts()

    def _package_cell(self, name: str, *, installed: bool) -> QWidget:
        cell = QWidget(self.page)
        lay = QVBoxLayout(cell)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        lay.addWidget(label(name, "packageName", cell, wrap=False))
        count = label("", "muted", cell, wrap=False)
        if not installed:
            count.setObjectName("fieldWarning")
            count.setText("not installed: this flow names it, but no package of that name "
                          "is loaded")
            count.setWordWrap(True)
        else:
            self.counts[name] = count
        lay.addWidget(count)
        return cell

    def _plugin_cell(self, plugin: host.Plugin, nodes: int) -> QWidget:
        cell = QWidget(self.page)
        cell.setObjectName(f"plugin:{plugin.name}")
        lay = QVBoxLayout(cell)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        m = plugin.manifest
        head = f"{plugin.name} <span style='font-weight:400'>{m.version}</span>"
        name = label(head, "packageName", cell, wrap=False)
        name.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(name)
        facts = [language_name(m.language), _nodes(nodes) if nodes else "no nodes loaded"]
        lay.addWidget(label(" · ".join(f for f in facts if f), "muted", cell, wrap=False))
        where = _home_relative(plugin.folder) if plugin.folder else plugin.origin
        lay.addWidget(ElidedLabel(where, cell))
        if m.description:
            lay.addWidget(label(m.description, "muted", cell))
        return cell

    # -- following the document ------------------------------------------------------
    def sync(self) -> None:
        chosen = set(self.doc.flow.settings.out_of_process)
        missing = [p for p in chosen if p not in self.boxes]
        if missing:  # a flow opened that names a package not listed yet
            self.rebuild()
            return
        for name, box in self.boxes.items():
            box.blockSignals(True)
            box.setChecked(name in chosen)
            box.blockSignals(False)

    def _update_counts(self) -> None:
        if not self.counts:
            return
        reg = self.doc.registry
        total = Counter(reg.package_of(s.type) for s in reg.specs())
        used = Counter(reg.package_of(n.type) for n in self.doc.flow.nodes)
        for name, count in self.counts.items():
            text = _nodes(total[name])
            if used[name]:
                text += f" · {used[name]} in this flow"
            count.setText(text)

    def _toggle(self, name: str, on: bool) -> None:
        if (name in self.doc.flow.settings.out_of_process) != on:
            self.doc.undo_stack.push(SetOutOfProcess(self.doc, name, on))

    # -- looks -----------------------------------------------------------------------
    def _apply_style(self) -> None:
        self._dark = is_dark(QApplication.palette())
        self.setStyleSheet(panel_style(self._dark) + DIALOG_STYLE)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        if (event.type() == QEvent.Type.PaletteChange
                and is_dark(QApplication.palette()) != getattr(self, "_dark", None)):
            self._apply_style()
        super().changeEvent(event)


def _clear(layout) -> None:
    while layout.count():
        item = layout.takeAt(0)
        if item.widget() is not None:
            item.widget().deleteLater()
        elif item.layout() is not None:
            _clear(item.layout())

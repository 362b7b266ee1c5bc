"""Subflow definitions in tabs of their own (issue #25, docs/subflows.md).

Double-click (or Enter) on a subflow instance opens its definition in a
tab over the canvas, in the same window; the flow itself is the first tab.
Each tab is a full editor: its own FlowDocument (``for_definition``: it
edits the definition in place), scene, view, canvas editor, properties
panel and undo stack. The window's undo and redo follow the current tab
(one ``QUndoGroup``); the palette lists what the current tab can place
(the subflow's inputs and outputs only inside a definition).

A breadcrumb under the tabs says where the tab is: "Orders › Check stock",
one more level for each subflow opened from inside another; each part
but the last goes to its tab.

- A definition kept in the flow file is edited in place: an edit there is
  an edit of the flow file (the title's ``*``, autosave, Save writes it).
  Closing its tab keeps the edits and its undo history (opened again, the
  tab comes back as it was), until another flow is opened.
- A library definition (NAME.subflow.json) is edited as a copy; the tab
  offers "Save to Library…", which writes a new version (instances then
  offer Update). Its edits are not the flow file's.

The tab bar shows only while a definition tab is open, so a flow without
subflows looks as it always did."""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QUndoGroup
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStackedWidget,
    QTabBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from runtime.flow.model import SubflowDef
from runtime.flow.subflows import LibraryEntry, find_library, is_instance_type, subflow_name

from ..canvas.editor import CanvasEditor
from ..canvas.interactions import MouseInteractions
from ..canvas.scene import FlowScene
from ..canvas.view import FlowView
from ..look import icons, theme
from ..model.document import FlowDocument

log = logging.getLogger(__name__)

#: Between the parts of the breadcrumb.
CRUMB_SEP = " › "


@dataclass(eq=False)
class DefinitionTab:
    """One definition's editor: its document and canvas, where it came from
    (``library``: the library file a copy was made of; None: the flow
    file's own definition) and the breadcrumb's names down to it."""

    doc: FlowDocument
    scene: FlowScene
    view: FlowView
    editor: CanvasEditor
    library: LibraryEntry | None
    trail: list[str] = field(default_factory=list)
    properties: QWidget | None = None

    @property
    def definition(self) -> SubflowDef:
        return self.doc.definition

    @property
    def name(self) -> str:
        return self.definition.name

    def title(self) -> str:
        defn = self.definition
        text = defn.label or defn.name
        if self.library is not None:
            text += f" v{self.library.definition.version}"
        return text


class SubflowTabs(QObject):
    """The window's canvas area: a tab bar and breadcrumb over a stack of
    canvases, the flow's own first. ``window`` is the MainWindow: its view
    is the first tab's; it handles every tab's scene signals."""

    current_changed = Signal()

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.main_doc: FlowDocument = window.document
        self.tabs: list[DefinitionTab] = []  # open, in tab order after the flow's own
        self._closed: list[DefinitionTab] = []  # closed, kept with their edits
        self._main_clean: int | None = None

        self.undo_group = QUndoGroup(self)
        self.undo_group.addStack(self.main_doc.undo_stack)
        self.undo_group.setActiveStack(self.main_doc.undo_stack)

        self.widget = QWidget(window)
        self.widget.setObjectName("canvasArea")
        self.bar = QTabBar(self.widget)
        self.bar.setObjectName("subflowTabs")
        self.bar.setDocumentMode(True)
        self.bar.setTabsClosable(True)
        self.bar.setExpanding(False)
        self.bar.setElideMode(Qt.TextElideMode.ElideRight)
        self.bar.addTab(self._flow_title())
        self.bar.setTabButton(0, QTabBar.ButtonPosition.RightSide, None)
        self.bar.setTabButton(0, QTabBar.ButtonPosition.LeftSide, None)
        self.crumbs = QLabel(self.widget)
        self.crumbs.setObjectName("subflowBreadcrumb")
        self.crumbs.setTextFormat(Qt.TextFormat.RichText)
        self.crumbs.linkActivated.connect(self._crumb_clicked)
        self.save_button = QPushButton("Save to Library…", self.widget)
        self.save_button.setObjectName("subflowSaveToLibrary")
        self.save_button.setToolTip("Save this subflow as a file of the subflow library, "
                                    "for other flows to use")
        self.props_button = QPushButton("Properties…", self.widget)
        self.props_button.setObjectName("subflowProperties")
        self.props_button.setToolTip("This subflow's label, description, result and params")
        self.crumb_row = QWidget(self.widget)
        self.crumb_row.setObjectName("subflowCrumbRow")
        row = QHBoxLayout(self.crumb_row)
        row.setContentsMargins(12, 4, 8, 4)
        row.setSpacing(8)
        row.addWidget(self.crumbs, 1)
        row.addWidget(self.props_button)
        row.addWidget(self.save_button)
        self.stack = QStackedWidget(self.widget)
        self.stack.addWidget(window.view)
        layout = QVBoxLayout(self.widget)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.bar)
        layout.addWidget(self.crumb_row)
        layout.addWidget(self.stack, 1)
        self.bar.currentChanged.connect(self._on_current)
        self.bar.tabCloseRequested.connect(self.close_tab)

        d = self.main_doc
        d.flow_reset.connect(self.reset)
        d.changed.connect(self._prune)
        d.path_changed.connect(lambda *_: self._refresh_crumbs())
        d.undo_stack.indexChanged.connect(lambda *_: self._sync_modified())
        self.refresh_style()
        self._update_chrome()

    # -- what is current ----------------------------------------------------------
    def current(self) -> DefinitionTab | None:
        i = self.bar.currentIndex()
        return self.tabs[i - 1] if 0 < i <= len(self.tabs) else None

    def current_definition(self) -> SubflowDef | None:
        tab = self.current()
        return tab.definition if tab is not None else None

    def doc(self) -> FlowDocument:
        tab = self.current()
        return tab.doc if tab is not None else self.main_doc

    def scene(self) -> FlowScene:
        tab = self.current()
        return tab.scene if tab is not None else self.window.scene

    def view(self) -> FlowView:
        tab = self.current()
        return tab.view if tab is not None else self.window.view

    def editor(self) -> CanvasEditor:
        tab = self.current()
        return tab.editor if tab is not None else self.window.editor

    def all_tabs(self) -> list[DefinitionTab]:
        """Open and closed-but-kept tabs."""
        return [*self.tabs, *self._closed]

    def tab_for(self, defn: SubflowDef) -> DefinitionTab | None:
        return next((t for t in self.all_tabs() if t.definition is defn), None)

    def doc_for(self, defn: SubflowDef) -> FlowDocument | None:
        """The document of ``defn``'s tab, open or closed (flow_edit.DocsFor)."""
        tab = self.tab_for(defn)
        return tab.doc if tab is not None else None

    # -- opening -----------------------------------------------------------------------
    def open_instance(self, doc: FlowDocument, node_id: str) -> DefinitionTab | None:
        """Open the definition of the instance ``node_id`` of ``doc`` (the
        flow's document or a definition tab's): the flow's own definition,
        else the library's current version of it, as a copy. None (and a
        status message) if it is neither."""
        fnode = doc.node(node_id)
        if fnode is None or not is_instance_type(fnode.type):
            return None
        name = subflow_name(fnode.type)
        parent = self.tab_of_doc(doc)
        trail = [*(parent.trail if parent is not None else []), name]
        own = self.main_doc.flow.subflow(name)
        if own is not None:
            return self.open_definition(own, trail)
        entry = self._library_entry(name)
        if entry is None:
            self.window.statusBar().showMessage(
                f"Subflow '{name}' is neither in this flow nor in the subflow library", 6000)
            return None
        return self.open_library(entry, trail)

    def tab_of_doc(self, doc: FlowDocument) -> DefinitionTab | None:
        return next((t for t in self.all_tabs() if t.doc is doc), None)

    def _library_entry(self, name: str) -> LibraryEntry | None:
        current = getattr(self.main_doc, "library_current", None)
        if current is not None:
            return current(name)
        try:
            return find_library(name, str(self.main_doc.path or ""))
        except Exception:
            return None

    def open_definition(self, defn: SubflowDef, trail: list[str] | None = None) -> DefinitionTab:
        """Open (or go to) the tab of one of the flow's own definitions."""
        tab = self.tab_for(defn)
        if tab is None:
            tab = self._make_tab(defn, None)
        if trail:
            tab.trail = list(trail)
        elif not tab.trail:
            tab.trail = [defn.name]
        self._show(tab)
        return tab

    def open_library(self, entry: LibraryEntry, trail: list[str] | None = None) -> DefinitionTab:
        """Open (or go to) a tab editing a copy of a library definition."""
        tab = next((t for t in self.all_tabs() if t.library is not None
                    and t.library.path == entry.path and t.name == entry.definition.name), None)
        if tab is None:
            tab = self._make_tab(entry.definition.model_copy(deep=True), entry)
        tab.trail = list(trail or [entry.definition.name])
        self._show(tab)
        return tab

    def _make_tab(self, defn: SubflowDef, library: LibraryEntry | None) -> DefinitionTab:
        w = self.window
        make = getattr(self.main_doc, "for_definition", None)
        if make is not None:
            doc = make(defn, self)
        else:  # a document without subflow support: edit the lists in place
            doc = FlowDocument(defn.as_flow(), self.main_doc.registry, None, self)
            doc.definition = defn
        scene = FlowScene(doc, w, interactions=MouseInteractions())
        scene.snap_to_grid = w.scene.snap_to_grid
        view = FlowView(scene, self.stack)
        editor = CanvasEditor(scene, view, w)
        tab = DefinitionTab(doc, scene, view, editor, library)
        w.connect_canvas(scene, view, editor)
        view.addActions(w.view_actions)
        self.undo_group.addStack(doc.undo_stack)
        doc.undo_stack.cleanChanged.connect(lambda *_: self._on_tab_clean(tab))
        if library is None:
            doc.changed.connect(self._definition_edited)
            doc.undo_stack.indexChanged.connect(lambda *_: self._sync_modified())
        return tab

    def _show(self, tab: DefinitionTab) -> None:
        if tab in self._closed:
            self._closed.remove(tab)
        if tab not in self.tabs:
            self.tabs.append(tab)
            self.stack.addWidget(tab.view)
            i = self.bar.addTab(tab.title())
            self.bar.setTabButton(i, QTabBar.ButtonPosition.RightSide, self._close_button(tab))
            self._set_tab_look(tab)
            QTimer.singleShot(0, tab.view.fit_readable)
            tab.view.fit_readable()
        self.bar.setCurrentIndex(self.tabs.index(tab) + 1)
        self._update_chrome()
        tab.view.setFocus()  # its canvas takes the keys (Enter, shortcuts)

    # -- closing -----------------------------------------------------------------------
    def _close_button(self, tab: DefinitionTab) -> QToolButton:
        """A quiet × in the theme's muted colour (the style's own is a red box)."""
        button = QToolButton(self.bar)
        button.setObjectName("subflowTabClose")
        button.setAutoRaise(True)
        button.setIcon(icons.icon("close", theme.current().muted, 16))
        button.setIconSize(QSize(14, 14))
        button.setFixedSize(18, 18)
        button.setToolTip("Close this subflow's tab (its edits stay)")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda: self.close_tab(self.tabs.index(tab) + 1)
                               if tab in self.tabs else None)
        return button

    def close_tab(self, index: int) -> None:
        """Close a definition tab (not the flow's): its edits stay, and so
        does its undo history, for when it is opened again."""
        if index <= 0 or index > len(self.tabs):
            return
        tab = self.tabs.pop(index - 1)
        self.bar.removeTab(index)
        self.stack.removeWidget(tab.view)
        tab.view.hide()
        self._closed.append(tab)
        self._update_chrome()

    def close_current(self) -> bool:
        i = self.bar.currentIndex()
        if i <= 0:
            return False
        self.close_tab(i)
        return True

    def _drop(self, tab: DefinitionTab) -> None:
        """Forget a tab for good (its definition is gone, or another flow opened)."""
        if tab in self.tabs:
            i = self.tabs.index(tab) + 1
            self.tabs.remove(tab)
            self.bar.removeTab(i)
            self.stack.removeWidget(tab.view)
        if tab in self._closed:
            self._closed.remove(tab)
        self.undo_group.removeStack(tab.doc.undo_stack)
        if self.window.properties_dock.widget() is tab.properties and tab.properties is not None:
            self.window.show_properties(None)
        for obj in (tab.properties, tab.view):
            if obj is not None:
                obj.hide()
                obj.deleteLater()
        tab.editor.deleteLater()
        tab.scene.deleteLater()
        tab.doc.deleteLater()

    def reset(self) -> None:
        """Another flow (New, Open, a recovery): every tab goes."""
        for tab in list(self.all_tabs()):
            self._drop(tab)
        self._main_clean = None
        self.bar.setCurrentIndex(0)
        self._update_chrome()

    def _prune(self) -> None:
        """Drop the tabs of the flow's definitions that are no longer in it
        (Save to Library moved one out, an undo took one away)."""
        if not self.tabs and not self._closed:
            return  # every edit of the flow comes here: nothing to do, at once
        own = {id(d) for d in self.main_doc.flow.subflows}
        gone = [t for t in self.all_tabs() if t.library is None and id(t.definition) not in own]
        for tab in gone:
            self._drop(tab)
        if gone:
            self._update_chrome()

    # -- the edits of the flow's own definitions are the flow file's ---------------------
    def _definition_edited(self) -> None:
        # Autosave, the counts, the inspector's flow. (The tab's document
        # checks the definition as part of the flow: the owner's check.)
        self.main_doc.changed.emit()

    def _inflow_dirty(self) -> bool:
        return any(not t.doc.undo_stack.isClean() for t in self.all_tabs() if t.library is None)

    def _sync_modified(self) -> None:
        """The flow is modified while a definition tab has unsaved edits:
        the flow's own stack is then marked not clean (``resetClean``), and
        clean again when the definitions' edits are undone and the flow is
        back where it was saved."""
        try:
            self._sync_modified_now()
        except RuntimeError:  # the window is going: its stacks went first
            pass

    def _sync_modified_now(self) -> None:
        main = self.main_doc.undo_stack
        if self._inflow_dirty():
            if main.cleanIndex() >= 0:
                self._main_clean = main.cleanIndex()
                main.resetClean()
        elif self._main_clean is not None and main.index() == self._main_clean:
            self._main_clean = None
            main.setClean()

    def mark_saved(self) -> None:
        """The flow file was saved: the definitions' edits with it."""
        self._main_clean = None
        for t in self.all_tabs():
            if t.library is None:
                t.doc.undo_stack.setClean()

    def _on_tab_clean(self, tab: DefinitionTab) -> None:
        try:
            if tab in self.tabs:
                self._set_tab_look(tab)
            self._update_chrome()
        except RuntimeError:  # the window is going
            pass

    # -- tab switching -----------------------------------------------------------------
    def _on_current(self, index: int) -> None:
        tab = self.current()
        if index >= 0:
            self.stack.setCurrentWidget(tab.view if tab is not None else self.window.view)
        doc = tab.doc if tab is not None else self.main_doc
        self.undo_group.setActiveStack(doc.undo_stack)
        self._update_chrome()
        self.current_changed.emit()

    def _update_chrome(self) -> None:
        several = bool(self.tabs)
        self.bar.setVisible(several)
        self.crumb_row.setVisible(several)
        tab = self.current()
        self.save_button.setVisible(tab is not None)
        self.props_button.setVisible(tab is not None)
        if tab is not None:
            # A library copy saves a new version once it has edits to save.
            self.save_button.setEnabled(tab.library is None or not tab.doc.undo_stack.isClean())
        self.bar.setTabText(0, self._flow_title())
        self._refresh_crumbs()

    def _set_tab_look(self, tab: DefinitionTab) -> None:
        i = self.tabs.index(tab) + 1
        dirty = tab.library is not None and not tab.doc.undo_stack.isClean()
        self.bar.setTabText(i, tab.title() + (" •" if dirty else ""))
        where = (f"Library subflow {tab.library.definition.version}: {tab.library.path}"
                 if tab.library is not None else "Subflow defined in this flow file")
        self.bar.setTabToolTip(i, f"{tab.definition.label or tab.name} — {where}")

    def _flow_title(self) -> str:
        flow = self.main_doc.flow
        if flow.name and flow.name != "Untitled":
            return flow.name
        return self.window.display_name()

    def breadcrumb(self) -> list[str]:
        """The breadcrumb's parts for the current tab: the flow, then each
        subflow down to the current one (by label, else name)."""
        tab = self.current()
        parts = [self._flow_title()]
        if tab is None:
            return parts
        for name in tab.trail:
            defn = self.main_doc.flow.subflow(name)
            if defn is None and tab.library is not None and name == tab.name:
                defn = tab.definition
            parts.append((defn.label or defn.name) if defn is not None else name)
        if tab.library is not None:
            parts[-1] += f" (library v{tab.library.definition.version})"
        return parts

    def breadcrumb_text(self) -> str:
        return CRUMB_SEP.join(self.breadcrumb())

    def _refresh_crumbs(self) -> None:
        parts = self.breadcrumb()
        t = theme.current()
        links = []
        for i, part in enumerate(parts):
            text = html.escape(part)
            if i < len(parts) - 1:
                links.append(f'<a href="{i}" style="color:{t.accent}; text-decoration:none">'
                             f"{text}</a>")
            else:
                links.append(f"<b>{text}</b>")
        sep = f'<span style="color:{t.muted}">{html.escape(CRUMB_SEP)}</span>'
        self.crumbs.setText(sep.join(links))

    def _crumb_clicked(self, href: str) -> None:
        """A breadcrumb part: the flow's tab, or the tab of that subflow."""
        try:
            level = int(href)
        except ValueError:
            return
        tab = self.current()
        if level == 0 or tab is None:
            self.bar.setCurrentIndex(0)
            return
        name = tab.trail[level - 1]
        defn = self.main_doc.flow.subflow(name)
        if defn is not None:
            self.open_definition(defn, tab.trail[:level])

    def refresh_style(self) -> None:
        t = theme.current()
        self.crumb_row.setStyleSheet(
            f"QWidget#subflowCrumbRow {{ background: {t.panel}; "
            f"border-bottom: 1px solid {t.border}; }}"
            f"QLabel#subflowBreadcrumb {{ color: {t.text}; }}")
        self.bar.setStyleSheet(
            f"QTabBar#subflowTabs {{ background: {t.window}; }}"
            "QToolButton#subflowTabClose { padding: 0; border: none; border-radius: 4px; }"
            f"QToolButton#subflowTabClose:hover {{ background: {t.border}; }}")
        for tab in self.all_tabs():
            tab.scene.refresh_theme()
            tab.view.resetCachedContent()
        for button in self.bar.findChildren(QToolButton, "subflowTabClose"):
            button.setIcon(icons.icon("close", t.muted, 16))
        self._refresh_crumbs()

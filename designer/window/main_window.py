"""The designer's main window: canvas in the middle, palette on the left,
properties on the right, the inspector reserved at the bottom; menus and a
toolbar for files, editing and view; the layout in QSettings. What it does
with flow files (open, save, recent files, recovery) is ``files.FileActions``.

It holds one FlowDocument for its whole life: opening a file resets that
document, so the scene, panels and autosave stay connected to it."""

from __future__ import annotations

import logging

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ..canvas.editor import CanvasEditor
from ..canvas.interactions import MouseInteractions
from ..canvas.scene import FlowScene
from ..canvas.view import FlowView, flow_file_from_mime
from ..look import icons, theme
from ..look.settings import settings
from ..model.autosave import Autosave
from ..model.document import FlowDocument
from ..panels.palette import Palette
from .files import FileActions
from .subflow_actions import SubflowActions
from .subflow_tabs import SubflowTabs

log = logging.getLogger(__name__)

APP_NAME = "Switchboard"


#: What the second phase of a staged start builds (see ``complete_start``).
STAGED = frozenset({"properties", "run_session"})


class MainWindow(FileActions, QMainWindow):
    """``staged=True`` (the designer's own start, ``designer.app``) builds
    the canvas, palette, menus and toolbar first, and the properties panel,
    inspector and run integration in ``complete_start``, after the first
    paint; anything that needs them before (F5, a selection, ``properties``
    or ``run_session`` read) completes the start there and then."""

    def __init__(self, document: FlowDocument | None = None, *, registry=None,
                 autosave_interval_ms: int | None = None, restore_layout: bool = True,
                 staged: bool = False) -> None:
        super().__init__()
        self._complete = False
        self.setObjectName("SwitchboardMainWindow")
        self.document = document or FlowDocument(registry=registry)
        if staged:
            self.document.hold_validation(True)  # until complete_start
        self.scene = FlowScene(self.document, self, interactions=MouseInteractions())
        self.view = FlowView(self.scene, self)
        self.editor = CanvasEditor(self.scene, self.view, self)
        #: The canvas area: the flow's canvas, and a tab per subflow definition opened.
        self.tabs = SubflowTabs(self)
        self.setCentralWidget(self.tabs.widget)
        #: Canvas shortcuts (view_only actions): on every tab's view.
        self.view_actions: list[QAction] = []
        self.node_context_actions: list = []
        #: The same for a node of a subflow definition's tab: each is called
        #: with the tab's document and the node id (pins, run/pins.py).
        self.definition_node_actions: list = []
        self._theme_mode = "system"
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(False)

        self._build_docks()
        self._build_actions()
        self.subflow_actions = SubflowActions(self)
        self._build_menus()
        self._build_toolbar()
        self._build_status()

        kwargs = {"interval_ms": autosave_interval_ms} if autosave_interval_ms else {}
        self.autosave = Autosave(self.document, parent=self, **kwargs)

        d = self.document
        d.undo_stack.cleanChanged.connect(self._update_title)
        d.path_changed.connect(self._update_title)
        d.flow_reset.connect(self._update_title)
        d.changed.connect(self._update_counts)
        d.problems_changed.connect(self._update_counts)
        self.connect_canvas(self.scene, self.view, self.editor)
        self.tabs.current_changed.connect(self._on_tab_changed)
        self.palette.add_requested.connect(self._add_from_palette)

        # Shortcuts work as soon as a dialog closes (see _dialog_closed).
        self._focus_before_dialog: QWidget | None = None
        app = QApplication.instance()
        if app is not None:
            app.focusChanged.connect(self._focus_changed)

        self.resize(1360, 860)
        if restore_layout:
            self._restore_layout()
        self._update_title()
        self._update_counts()
        self._update_zoom(self.view.zoom())
        if not staged:
            self.complete_start()

    def connect_canvas(self, scene: FlowScene, view: FlowView, editor: CanvasEditor) -> None:
        """Wire one tab's canvas (the flow's, or a subflow definition's) to
        the window: selection, messages, menus, activation, drops."""
        doc = scene.doc
        scene.selectionChanged.connect(lambda: self._on_canvas_selection(scene))
        scene.message.connect(self._show_message)
        scene.node_context_menu.connect(self._node_menu)
        scene.canvas_context_menu.connect(self._canvas_menu)
        scene.node_activated.connect(lambda node_id: self.activate_node(doc, node_id))
        view.node_dropped.connect(lambda t, pos: editor.add_node(t, pos))
        view.file_dropped.connect(self.open_path)
        view.quick_add_requested.connect(editor.open_quick_add)
        scene.wire_dropped.connect(editor.open_wire_picker)
        editor.type_over.connect(self._type_over)
        view.zoom_changed.connect(lambda z: self._on_canvas_zoom(view, z))
        if doc is not self.document:
            doc.changed.connect(self._update_counts)

    def _on_canvas_selection(self, scene: FlowScene) -> None:
        try:
            if scene is self.tabs.scene():
                self._on_selection()
                self.subflow_actions.update_actions()
        except RuntimeError:  # the window is going: its scenes went first
            pass

    def _on_canvas_zoom(self, view: FlowView, z: float) -> None:
        try:
            if view is self.tabs.view():
                self._update_zoom(z)
        except RuntimeError:
            pass

    def current_definition(self):
        """The subflow definition the current tab edits (runtime SubflowDef),
        or None on the flow's own tab."""
        return self.tabs.current_definition()

    def complete_start(self) -> None:
        """The start's second phase: the properties panel, the inspector and
        the run integration (which imports the engine). Once; a no-op after."""
        if self._complete:
            return
        self._complete = True
        self.properties = self._make_properties()
        self.show_properties(self.properties)
        if self.tabs.current() is not None:
            self._on_tab_changed()
        self._install_run_integration()
        self.document.hold_validation(False)
        if self.scene.selected_node_ids():
            self._on_selection()

    def __getattr__(self, name: str):
        # Only for the parts of a staged start not built yet: reading one
        # builds them (Python calls this for missing attributes only).
        if name in STAGED and self.__dict__.get("_complete") is False:
            self.complete_start()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- construction -----------------------------------------------------------
    def _dock(self, title: str, name: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        self.palette = Palette(self.document.registry)
        self.palette_dock = self._dock("Nodes", "palette", self.palette,
                                       Qt.DockWidgetArea.LeftDockWidgetArea)
        # Its panel comes in complete_start (the dock keeps its place in the layout).
        self.properties_dock = self._dock("Properties", "properties", QWidget(),
                                          Qt.DockWidgetArea.RightDockWidgetArea)
        self.inspector_dock = self._dock("Inspector", "inspector", QWidget(),
                                         Qt.DockWidgetArea.BottomDockWidgetArea)
        self.inspector_dock.hide()  # the run integration shows it, folded to its tab strip
        # The inspector spans the canvas and the palette, not the properties:
        # those keep the full height they need beside an open inspector.
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.resizeDocks([self.palette_dock, self.properties_dock], [230, 320],
                         Qt.Orientation.Horizontal)

    def _make_properties(self, document: FlowDocument | None = None) -> QWidget:
        try:
            from ..panels.properties import PropertiesPanel
        except ImportError:
            return _PropertiesPlaceholder()
        try:
            return PropertiesPanel(document or self.document, self)
        except Exception:  # a broken panel must not take the window down
            log.exception("cannot build the properties panel")
            return _PropertiesPlaceholder()

    def _action(self, text: str, slot=None, shortcut=None, icon: str | None = None,
                tip: str = "", view_only: bool = False) -> QAction:
        action = QAction(text, self)
        if icon:
            action.setIcon(icons.icon(icon, theme.current().text, 18))
            action.setData(icon)
        if shortcut is not None:
            keys = shortcut if isinstance(shortcut, list) else [shortcut]
            action.setShortcuts([QKeySequence(k) for k in keys])
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(f"{text.replace('&', '').replace('…', '')}"
                              f"{' (' + action.shortcut().toString(QKeySequence.SequenceFormat.NativeText) + ')' if shortcut is not None else ''}")
        if slot is not None:
            action.triggered.connect(lambda checked=False: slot())
        if view_only:
            # Canvas shortcuts must not fire while typing in a panel; every
            # tab's canvas has them (SubflowTabs adds them to a new one).
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.view.addAction(action)
            self.view_actions.append(action)
            for tab in self.tabs.all_tabs():
                tab.view.addAction(action)
        return action

    def _build_actions(self) -> None:
        K = QKeySequence.StandardKey
        a = self._action
        self.new_action = a("&New", self.new_flow, K.New, "new", "Start an empty flow")
        self.open_action = a("&Open…", self.open_dialog, K.Open, "open", "Open a flow file")
        self.save_action = a("&Save", self.save, K.Save, "save", "Save the flow")
        self.save_as_action = a("Save &As…", self.save_as, K.SaveAs, None, "Save under a new name")
        self.quit_action = a("&Quit", self.close, K.Quit)
        # Undo and redo follow the current tab's stack (the flow's, or a subflow's).
        stack = self.tabs.undo_group
        self.undo_action = stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcuts([QKeySequence(K.Undo)])
        self.undo_action.setIcon(icons.icon("undo", theme.current().text, 18))
        self.undo_action.setData("undo")
        self.redo_action = stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        self.redo_action.setIcon(icons.icon("redo", theme.current().text, 18))
        self.redo_action.setData("redo")
        # The edit and view actions act on the current tab's canvas.
        ed, vw = self.tabs.editor, self.tabs.view
        self.cut_action = a("Cu&t", lambda: ed().cut_selection(), K.Cut, view_only=True)
        self.copy_action = a("&Copy", lambda: ed().copy_selection(), K.Copy, view_only=True)
        self.paste_action = a("&Paste", lambda: ed().paste(), K.Paste, view_only=True)
        self.duplicate_action = a("D&uplicate", lambda: ed().duplicate_selection(), "Ctrl+D",
                                  view_only=True)
        self.delete_action = a("&Delete", lambda: ed().delete_selection(),
                               [QKeySequence(K.Delete), QKeySequence("Backspace")], view_only=True)
        self.select_all_action = a("Select &All", lambda: ed().select_all(), K.SelectAll,
                                   view_only=True)
        self.zoom_in_action = a("Zoom &In", lambda: vw().zoom_in(), [K.ZoomIn, "Ctrl+="],
                                view_only=True)
        self.zoom_out_action = a("Zoom &Out", lambda: vw().zoom_out(), K.ZoomOut, view_only=True)
        self.zoom_reset_action = a("&Actual Size", lambda: vw().reset_zoom(), "Ctrl+0",
                                   view_only=True)
        self.fit_action = a("&Fit to Window", lambda: vw().fit_all(), "F", "fit",
                            "Show the whole flow", view_only=True)
        self.snap_action = a("&Snap to Grid")
        self.snap_action.setCheckable(True)
        self.snap_action.setChecked(True)
        self.snap_action.toggled.connect(self._set_snap)
        self.packages_action = a("Node &Packages…", self.show_node_packages, None, None,
                                 "Choose which node packages run in their own process")
        self.packages_dialog = None
        self.credentials_action = a("&Credentials…", self.show_credentials, None, None,
                                    "Store the API keys and passwords your flows name")
        self.credentials_dialog = None
        self.prices_action = a("Model &Prices…", self.show_prices, None, None,
                               "The USD per million tokens that turn a run's tokens into cost")
        self.run_action = a("&Run", self._run_placeholder, "F5", "run", "Run the flow")
        self.stop_action = a("S&top", self._stop_placeholder, "Shift+F5", "stop", "Stop the run")
        self.stop_action.setEnabled(False)

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        m.addActions([self.new_action, self.open_action])
        self.recent_menu = m.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        from .importing import add_import_menu

        add_import_menu(self, m)
        m.addSeparator()
        m.addActions([self.save_action, self.save_as_action])
        m.addSeparator()
        m.addAction(self.quit_action)
        m = mb.addMenu("&Edit")
        m.addActions([self.undo_action, self.redo_action])
        m.addSeparator()
        m.addActions([self.cut_action, self.copy_action, self.paste_action,
                      self.duplicate_action, self.delete_action])
        m.addSeparator()
        m.addAction(self.select_all_action)
        m = mb.addMenu("&View")
        m.addActions([self.zoom_in_action, self.zoom_out_action, self.zoom_reset_action,
                      self.fit_action])
        m.addSeparator()
        m.addAction(self.snap_action)
        m.addSeparator()
        for dock in (self.palette_dock, self.properties_dock, self.inspector_dock):
            m.addAction(dock.toggleViewAction())
        m.addSeparator()
        tm = m.addMenu("&Theme")
        group = QActionGroup(self)
        self.theme_actions = {}
        for mode, label in (("system", "Follow &System"), ("light", "&Light"), ("dark", "&Dark")):
            act = tm.addAction(label)
            act.setCheckable(True)
            act.setChecked(mode == "system")
            act.triggered.connect(lambda checked=False, mode=mode: self.set_theme(mode))
            group.addAction(act)
            self.theme_actions[mode] = act
        m = mb.addMenu("&Run")
        m.addActions([self.run_action, self.stop_action])
        # Where the flow's nodes run is a setting of how it runs.
        m.addSeparator()
        m.addAction(self.packages_action)
        m.addAction(self.credentials_action)
        m.addAction(self.prices_action)
        self.subflow_menu = self.subflow_actions.add_menu(mb)
        m = mb.addMenu("&Help")
        m.addAction("&Keyboard Shortcuts", self._show_shortcuts)
        m.addAction(f"&About {APP_NAME}", self._about)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main", self)
        tb.setObjectName("main_toolbar")
        tb.setMovable(False)
        tb.setIconSize(QSize(18, 18))
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        tb.addActions([self.new_action, self.open_action, self.save_action])
        tb.addSeparator()
        tb.addActions([self.undo_action, self.redo_action])
        tb.addSeparator()
        tb.addAction(self.run_action)
        tb.addAction(self.stop_action)
        tb.addSeparator()
        tb.addAction(self.fit_action)
        for act in (self.run_action, self.stop_action):
            btn = tb.widgetForAction(act)
            if btn is not None:
                btn.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.addToolBar(tb)
        self.toolbar = tb

    def _build_status(self) -> None:
        sb = self.statusBar()
        self.problems_label = QLabel()
        self.counts_label = QLabel()
        self.zoom_label = QLabel()
        for w in (self.problems_label, self.counts_label, self.zoom_label):
            w.setContentsMargins(8, 0, 8, 0)
            sb.addPermanentWidget(w)

    def _install_run_integration(self) -> None:
        try:
            from ..running import run_integration
        except ImportError as exc:
            if getattr(exc, "name", "") != f"{__package__}.run_integration":
                log.warning("run integration unavailable: %s", exc)
            return
        try:
            run_integration.install(self)
        except Exception:
            log.exception("cannot install the run integration")

    # -- title, status ----------------------------------------------------------
    def display_name(self) -> str:
        doc = self.document
        if doc.path:
            return doc.path.name
        return doc.flow.name or "Untitled"

    def _update_title(self, *args) -> None:
        self.setWindowTitle(f"{self.display_name()}[*] — {APP_NAME}")
        self.setWindowModified(self.document.modified)

    def _update_counts(self, *args) -> None:
        flow = self.tabs.doc().flow  # the current tab's; the problems are the whole file's
        n, w = len(flow.nodes), len(flow.wires)
        self.counts_label.setText(f"{n} node{'s' * (n != 1)} · {w} wire{'s' * (w != 1)}")
        errors = sum(1 for p in self.document.problems if p.severity == "error")
        warnings = len(self.document.problems) - errors
        t = theme.current()
        if errors:
            self.problems_label.setText(f"● {errors} error{'s' * (errors != 1)}")
            self.problems_label.setStyleSheet(f"color: {t.error};")
        elif warnings:
            self.problems_label.setText(f"▲ {warnings} warning{'s' * (warnings != 1)}")
            self.problems_label.setStyleSheet(f"color: {t.warning};")
        else:
            self.problems_label.setText("")
        tips = "\n".join(str(p) for p in self.document.problems[:20])
        self.problems_label.setToolTip(tips)

    def _update_zoom(self, z: float) -> None:
        self.zoom_label.setText(f"{round(z * 100)}%")

    def _show_message(self, text: str) -> None:
        if text:
            self.statusBar().showMessage(text, 6000)
        else:
            self.statusBar().clearMessage()

    # -- selection and the run integration's entry points ------------------------
    def _on_selection(self) -> None:
        ids = self.tabs.scene().selected_node_ids()
        panel = self.active_properties()
        set_nodes = getattr(panel, "set_nodes", None)
        set_node = getattr(panel, "set_node", None)
        try:
            if set_nodes is not None:
                set_nodes(ids)  # one id: its form; several: a summary
            elif set_node is not None:
                set_node(ids[0] if len(ids) == 1 else None)
        except Exception:
            log.exception("properties panel failed on %s", ids)

    def select_node(self, node_id: str) -> None:
        """Select a node (a click in the inspector): the canvas stays where
        the user was working, and pans only to bring in a node out of view."""
        if self.document.node(node_id) is not None:
            self.tabs.bar.setCurrentIndex(0)  # a node of the flow: its own tab
        self.scene.select_nodes([node_id])
        item = self.scene.item_for_node(node_id)
        seen = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        if item is not None and not seen.contains(item.sceneBoundingRect()):
            self.view.center_on_node(node_id)

    def _edit_node(self, node_id: str) -> None:
        self.properties_dock.show()
        self.properties_dock.raise_()
        self.active_properties().setFocus()

    def activate_node(self, doc: FlowDocument, node_id: str) -> None:
        """Double-click or Enter on a node: a subflow instance opens its
        definition in a tab; any other node shows its properties."""
        fnode = doc.node(node_id)
        if fnode is not None and fnode.type.startswith("subflow:"):
            if self.tabs.open_instance(doc, node_id) is not None:
                return
        self._edit_node(node_id)

    # -- tabs: the properties and palette follow the current one -------------------
    def active_properties(self) -> QWidget:
        """The properties panel of the current tab (each tab has its own)."""
        tab = self.tabs.current()
        if tab is None:
            return self.properties
        if tab.properties is None:
            tab.properties = self._make_properties(tab.doc)
        return tab.properties

    def show_properties(self, panel: QWidget | None) -> None:
        """Put a tab's panel in the Properties dock (None: the flow's)."""
        panel = panel if panel is not None else self.properties
        if self.properties_dock.widget() is not panel:
            self.properties_dock.setWidget(panel)

    def _on_tab_changed(self) -> None:
        doc = self.tabs.doc()
        follow = getattr(self.palette, "set_document", None)
        if follow is not None:
            follow(doc)
        if self._complete:
            self.show_properties(self.active_properties())
            self._on_selection()
        self._update_zoom(self.tabs.view().zoom())
        self._update_counts()

    # -- focus after a dialog -------------------------------------------------------
    def _focus_changed(self, old: QWidget | None, now: QWidget | None) -> None:
        """Where the keys went in this window before a dialog took them; and
        a dialog of this window that closed leaving no widget with the keys
        (no window manager gives the focus back, as under Xvfb): this window
        takes them back (see _dialog_closed)."""
        try:
            if old is not None and now is not None and old.window() is self \
                    and now.window() is not self:
                self._focus_before_dialog = old
            elif old is not None and now is None:
                top = old.window()
                parent = top.parentWidget() if top is not self else None
                if parent is not None and parent.window() is self:
                    # (with self as context: dropped if the window goes first)
                    QTimer.singleShot(0, self, lambda: self._dialog_closed(top))
        except RuntimeError:  # a widget deleted meanwhile
            pass

    def _dialog_closed(self, dialog: QWidget) -> None:
        """Shortcuts work as soon as a dialog closes: with no window active,
        this one is made active and the keys go back where they were. (A
        dialog still shown lost the keys to another application: nothing
        to do.)"""
        try:
            if dialog.isVisible():
                return
        except RuntimeError:
            pass  # deleted: closed indeed
        if QApplication.activeWindow() is not None or QApplication.activeModalWidget() is not None \
                or not self.isVisible() or self.isMinimized():
            return
        self.activateWindow()
        target = self._focus_before_dialog
        try:
            usable = target is not None and target.window() is self and target.isVisible()
        except RuntimeError:  # deleted meanwhile (a form rebuilt)
            usable = False
        (target if usable else self.view).setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    def _type_over(self, node_id: str) -> None:
        """A node just placed holds a sample payload: its field takes the
        keys, the sample selected, so that typing replaces it."""
        form = getattr(self.active_properties(), "form", None)
        row = form.rows.get("payload") if form is not None and form.node_id == node_id else None
        edit = getattr(getattr(row, "value_editor", None), "edit", None)
        if edit is not None:
            self.properties_dock.show()
            edit.setFocus(Qt.FocusReason.OtherFocusReason)
            edit.selectAll()

    def _add_from_palette(self, type_id: str) -> None:
        self.tabs.editor().add_node(type_id)
        self.tabs.view().setFocus()

    def build_node_menu(self, node_id: str) -> QMenu:
        menu = QMenu(self)
        doc, editor = self.tabs.doc(), self.tabs.editor()
        fnode = doc.node(node_id)
        menu.addAction("Edit Properties", lambda: self._edit_node(node_id))
        if fnode is not None and fnode.type.startswith("subflow:"):
            sf = self.subflow_actions
            sf.update_actions()
            menu.addAction(sf.open_action)
            menu.addAction(sf.expand_action)
            if sf.save_action.isEnabled():
                menu.addAction(sf.save_action)
        menu.addSeparator()
        menu.addActions([self.duplicate_action, self.copy_action, self.cut_action,
                         self.delete_action])
        if len(self.tabs.scene().selected_node_ids()) >= 1:
            menu.addAction(self.subflow_actions.convert_action)
        menu.addSeparator()
        menu.addAction("Enable" if fnode and fnode.disabled else "Disable",
                       lambda: editor.toggle_disabled(node_id))
        extra = []
        # The run's actions (pins, reruns) are about the flow's own nodes;
        # a definition's nodes get those that know of definitions.
        inner = doc is not self.document
        for make in self.definition_node_actions if inner else self.node_context_actions:
            try:
                action = make(doc, node_id) if inner else make(node_id)
            except Exception:
                log.exception("node context action failed")
                continue
            if action is not None:
                extra.append(action)
        if extra:
            menu.addSeparator()
            menu.addActions(extra)
        return menu

    def _node_menu(self, node_id: str, global_pos) -> None:
        menu = self.build_node_menu(node_id)
        menu.exec(global_pos)
        menu.deleteLater()

    def _canvas_menu(self, scene_pos, global_pos) -> None:
        menu = QMenu(self)
        editor = self.tabs.editor()
        menu.addAction("Add Node…", lambda: editor.open_quick_add(
            "", scene_pos, global_pos))
        paste = menu.addAction("Paste", lambda: editor.paste(scene_pos))
        paste.setShortcut(self.paste_action.shortcut())
        menu.addSeparator()
        menu.addActions([self.select_all_action, self.fit_action])
        menu.exec(global_pos)
        menu.deleteLater()

    def show_node_packages(self):
        """Run > Node Packages…: beside the canvas, not blocking it, so
        that undo and the canvas stay at hand; opened again, it reads the
        packages again (a plugin installed meanwhile appears)."""
        from ..panels.node_packages import NodePackagesDialog

        dialog = self.packages_dialog
        if dialog is None:
            dialog = self.packages_dialog = NodePackagesDialog(self.document, self)
            # Ctrl+Z in the dialog undoes, as in the window.
            dialog.addActions([self.undo_action, self.redo_action])
        else:
            dialog.rebuild()
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def show_credentials(self):
        """Run > Credentials…: beside the window, not blocking it; opened
        again, it reads the store again."""
        from ..dialogs.credentials_dialog import CredentialsDialog

        dialog = self.credentials_dialog
        if dialog is None:
            dialog = self.credentials_dialog = CredentialsDialog(self)
        else:
            dialog.refresh()
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def show_prices(self):
        """Run > Model Prices…: the price table, edited and saved to the
        user's price file (modal: a run started meanwhile would price with
        half an edit)."""
        from ..dialogs.prices_dialog import PricesDialog

        dialog = PricesDialog(self)
        dialog.setModal(True)
        dialog.show()
        return dialog

    def _set_snap(self, on: bool) -> None:
        self.scene.snap_to_grid = on
        for tab in self.tabs.all_tabs():
            tab.scene.snap_to_grid = on

    def _run_placeholder(self) -> None:
        if not self._complete:  # F5 before the start's second phase: finish it, then run
            self.complete_start()
            if getattr(self, "run_session", None) is not None:
                self.run_action.trigger()
                return
        self.statusBar().showMessage("Running from the designer is not available in this build; "
                                     "use `switchboard run FLOW`.", 6000)

    def _stop_placeholder(self) -> None:
        pass

    # -- files ------------------------------------------------------------------
    def set_theme(self, mode: str) -> None:
        self._theme_mode = mode
        if mode in self.theme_actions:
            self.theme_actions[mode].setChecked(True)
        app = QApplication.instance()
        theme.apply(app, theme.resolve(mode))
        self.refresh_theme()
        settings().setValue("theme", mode)

    def follow_system_theme(self) -> None:
        if self._theme_mode == "system":
            theme.apply(QApplication.instance(), theme.resolve("system"))
            self.refresh_theme()

    def refresh_theme(self) -> None:
        color = theme.current().text
        for act in self.findChildren(QAction):
            name = act.data()
            if isinstance(name, str) and name:
                act.setIcon(icons.icon(name, color, 18))
        self.scene.refresh_theme()
        self.view.resetCachedContent()
        self.tabs.refresh_style()
        self.palette.populate()
        self._update_counts()

    # -- layout -------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        s = settings()
        geometry = s.value("window/geometry")
        state = s.value("window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state)
        snap_on = s.value("view/snap", True)
        self.snap_action.setChecked(snap_on not in (False, "false", 0, "0"))

    def save_layout(self) -> None:
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("view/snap", self.snap_action.isChecked())

    # -- window events ------------------------------------------------------------------
    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        if not self.maybe_save():
            event.ignore()
            return
        self.save_layout()
        self.autosave.stop()
        event.accept()

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        if flow_file_from_mime(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        path = flow_file_from_mime(event.mimeData())
        if path:
            event.acceptProposedAction()
            QTimer.singleShot(0, lambda: self.open_path(path))

    def _show_shortcuts(self) -> None:
        QMessageBox.information(self, "Keyboard shortcuts", SHORTCUTS)

    def _about(self) -> None:
        QMessageBox.about(self, f"About {APP_NAME}",
                          f"<b>{APP_NAME}</b><br>A desktop flow designer for RPA with AI agents.")


SHORTCUTS = """Canvas
  Type or Tab — add a node at the cursor
  Drag from a port — connect; Esc cancels
  Del / Backspace — delete the selection
  Ctrl+C, Ctrl+X, Ctrl+V — copy, cut, paste (flow JSON)
  Ctrl+D — duplicate
  Ctrl+A — select all
  Wheel, Ctrl++ / Ctrl+- — zoom; Ctrl+0 — 100%
  F — fit the flow in the window
  Middle drag, or Space+drag — pan
  Alt while dragging — do not snap to the grid

Subflows
  Ctrl+Shift+G — convert the selection to a subflow
  Enter or double-click — open a subflow instance's definition in a tab
  Ctrl+Shift+E — expand a subflow instance into its nodes
  Ctrl+W — close the subflow's tab (its edits stay)

Files
  Ctrl+N, Ctrl+O, Ctrl+S, Ctrl+Shift+S
  Ctrl+Z — undo; Ctrl+Shift+Z — redo

Run
  F5 — run; Shift+F5 — stop
  Ctrl+J — open or fold the inspector

Debugging (a message held at a breakpoint)
  Click left of a node's input — set or remove a breakpoint
  F8 — continue; F10 — step to the next node
  Shift+F8 — skip the message; Ctrl+F8 — continue all"""


class _PropertiesPlaceholder(QWidget):
    """Stands in until the properties panel is part of the build."""

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        label = QLabel("Select a node to see its settings.")
        label.setWordWrap(True)
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        label.setStyleSheet(f"color: {theme.current().muted};")
        layout.addWidget(label)

    def set_node(self, node_id: str | None) -> None:
        pass

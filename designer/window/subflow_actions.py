"""The Subflow menu (issue #25, docs/subflows.md): Convert Selection to
Subflow (Ctrl+Shift+G), Open Subflow (Enter, or a double-click on an
instance), Expand Subflow (Ctrl+Shift+E), Save to Library… and Close
Subflow Tab (Ctrl+W).

Each edit is one undo step (``flow_edit.ApplyFlow``) on the undo stack of
the tab it was made in; Save to Library's goes on the flow's own stack
(the definition leaves the flow file, and its tab closes). What the edits
do is runtime.flow.subflow_edit's; a refusal is said in a dialog or the
status bar, in its own words."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

from runtime.flow.subflows import find_library, is_instance_type, library_dirs, subflow_name

from ..panels.panel_style import form_error_and_buttons


def _edits():
    """runtime.flow.subflow_edit, imported when first used (not before the
    designer's first paint)."""
    from runtime.flow import subflow_edit

    return subflow_edit


CONVERT_SHORTCUT = "Ctrl+Shift+G"
EXPAND_SHORTCUT = "Ctrl+Shift+E"
CLOSE_TAB_SHORTCUT = "Ctrl+W"


# -- dialogs ----------------------------------------------------------------------------
class _Form(QDialog):
    """A small form with an error line that a refused OK fills in (the
    dialog stays open, with what was typed)."""

    def __init__(self, parent: QWidget | None, title: str, intro: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setModal(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        lead = QLabel(intro)
        lead.setWordWrap(True)
        layout.addWidget(lead)
        self.form = QFormLayout()
        self.form.setSpacing(8)
        layout.addLayout(self.form)
        self.error, self.buttons = form_error_and_buttons(self, layout, self._ok)
        self.setMinimumWidth(420)
        #: Called on OK; returns an error text to show, or "" to close.
        self.check = lambda: ""

    def say(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _ok(self) -> None:
        why = self.check()
        self.say(why)
        if not why:
            self.accept()


class SubflowNameDialog(_Form):
    """Convert Selection to Subflow: the new subflow's name and label."""

    def __init__(self, parent: QWidget | None, name: str, count: int) -> None:
        super().__init__(parent, "Convert to Subflow",
                         f"The {count} selected node{'s' * (count != 1)} become a subflow kept "
                         "in this flow file, and one instance of it takes their place. "
                         "Wires that cross the selection's edge become its inputs and outputs.")
        self.name_edit = QLineEdit(name)
        self.name_edit.setObjectName("subflowName")
        self.name_edit.setPlaceholderText("check_stock")
        self.name_edit.setToolTip("The subflow's name: its node type (subflow:NAME), its "
                                  "library file and its tool name. Letters, digits and _.")
        self.label_edit = QLineEdit("")
        self.label_edit.setObjectName("subflowLabel")
        self.label_edit.setPlaceholderText("Check stock")
        self.form.addRow("Name", self.name_edit)
        self.form.addRow("Label", self.label_edit)
        self.name_edit.selectAll()


class SaveToLibraryDialog(_Form):
    """Save to Library…: the folder (one the flow looks in) and version."""

    def __init__(self, parent: QWidget | None, name: str, folders: list[Path], version: str,
                 fixed_folder: bool, intro: str) -> None:
        super().__init__(parent, f"Save {name} to Library", intro)
        self.folder = QComboBox()
        self.folder.setObjectName("libraryFolder")
        for f in folders:
            self.folder.addItem(str(f), str(f))
        self.folder.setEnabled(not fixed_folder and len(folders) > 1)
        self.version_edit = QLineEdit(version)
        self.version_edit.setObjectName("libraryVersion")
        self.version_edit.setToolTip("MAJOR.MINOR.PATCH; instances keep the version they pin "
                                     "until updated")
        self.form.addRow("Folder", self.folder)
        self.form.addRow("Version", self.version_edit)

    def chosen(self) -> tuple[Path, str]:
        return Path(self.folder.currentData()), self.version_edit.text().strip()


# -- the actions ------------------------------------------------------------------------
class SubflowActions(QObject):
    """The Subflow menu's actions, for ``window`` (MainWindow) and its tabs
    (``window.tabs``). The dialogs they open are ``self.dialog`` while shown."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.dialog: QDialog | None = None
        a = window._action
        self.convert_action = a("Convert Selection to &Subflow…", self.convert, CONVERT_SHORTCUT,
                                None, "Turn the selected nodes into a subflow of this flow",
                                view_only=True)
        self.open_action = a("&Open Subflow", self.open_selected, None, None,
                             "Open the selected instance's subflow in a tab (Enter, or "
                             "double-click it)")
        self.expand_action = a("&Expand Subflow", self.expand, EXPAND_SHORTCUT, None,
                               "Put the selected instance's nodes in its place", view_only=True)
        self.save_action = a("Save to &Library…", self.save_to_library, None, None,
                             "Save a subflow as a file of the subflow library")
        self.props_action = a("Subflow &Properties…", self.edit_properties, None, None,
                              "Edit the current subflow's label, description, result and "
                              "params")
        self.close_tab_action = a("&Close Subflow Tab", window.tabs.close_current,
                                  CLOSE_TAB_SHORTCUT, None, "Close the current subflow's tab "
                                  "(its edits stay)")
        window.tabs.save_button.clicked.connect(lambda: self.save_to_library())
        window.tabs.props_button.clicked.connect(lambda: self.edit_properties())
        window.tabs.current_changed.connect(self.update_actions)

    def add_menu(self, menubar) -> QMenu:
        m = menubar.addMenu("S&ubflow")
        m.addActions([self.convert_action, self.expand_action])
        m.addSeparator()
        m.addActions([self.open_action, self.props_action, self.save_action])
        m.addSeparator()
        m.addAction(self.close_tab_action)
        m.aboutToShow.connect(self.update_actions)
        return m

    def actions(self) -> list[QAction]:
        return [self.convert_action, self.open_action, self.expand_action, self.save_action,
                self.props_action, self.close_tab_action]

    def update_actions(self) -> None:
        tabs = self.window.tabs
        ids = tabs.scene().selected_node_ids()
        inst = self._selected_instance(quiet=True)
        tab = tabs.current()
        self.convert_action.setEnabled(bool(ids) and (tab is None or tab.library is None))
        self.open_action.setEnabled(inst is not None)
        self.expand_action.setEnabled(inst is not None and (tab is None or tab.library is None))
        self.save_action.setEnabled(tab is not None or (
            inst is not None and self.window.document.flow.subflow(
                subflow_name(tabs.doc().node(inst).type)) is not None))
        self.close_tab_action.setEnabled(tab is not None)
        self.props_action.setEnabled(tab is not None)

    # -- helpers --------------------------------------------------------------------
    def _say(self, text: str) -> None:
        self.window.statusBar().showMessage(text, 8000)

    def _selected_instance(self, quiet: bool = False) -> str | None:
        tabs = self.window.tabs
        ids = tabs.scene().selected_node_ids()
        doc = tabs.doc()
        insts = [i for i in ids if is_instance_type(doc.node(i).type)]
        if len(ids) == 1 and insts:
            return insts[0]
        if not quiet:
            self._say("Select one subflow instance first" if len(ids) != 1 or not insts
                      else "")
        return None

    def _within(self) -> str | None:
        tab = self.window.tabs.current()
        return tab.name if tab is not None else None

    def _exec(self, dialog: QDialog) -> bool:
        self.dialog = dialog
        try:
            return dialog.exec() == QDialog.DialogCode.Accepted
        finally:
            self.dialog = None
            dialog.deleteLater()

    def _library_names(self) -> list[str]:
        return list(getattr(self.window.document, "library", {}) or {})

    def _flow_file(self) -> str:
        path = self.window.document.path
        return str(path) if path else ""

    def _command(self, after, text: str):
        from ..model.flow_edit import ApplyFlow

        return ApplyFlow(self.window.document, after, text, self.window.tabs.doc_for)

    # -- Convert Selection to Subflow ------------------------------------------------
    def convert(self, name: str | None = None, label: str = "") -> str | None:
        """Turn the current tab's selection into a subflow, one undo step on
        that tab's stack; the new instance is selected. Without ``name``, a
        dialog asks for it (and the label). Returns the instance's id."""
        w, tabs = self.window, self.window.tabs
        tab = tabs.current()
        if tab is not None and tab.library is not None:
            self._say("Convert Selection works in the flow and in its own subflows; save "
                      "this library subflow first, or convert in the flow that uses it")
            return None
        scene, doc = tabs.scene(), tabs.doc()
        ids = scene.selected_node_ids()
        if not ids:
            self._say("Select the nodes to turn into a subflow first")
            return None
        flow = w.document.flow
        kw = dict(within=self._within(), registry=w.document.registry,
                  taken=self._library_names())
        result = {}

        def attempt(n: str, lbl: str) -> str:
            try:
                result["flow"] = _edits().convert_selection(flow, ids, n, lbl, **kw)
            except ValueError as exc:
                return str(exc)
            result["name"] = n
            return ""

        if name is None:
            dialog = SubflowNameDialog(w, self._free_name(), len(ids))
            dialog.check = lambda: attempt(dialog.name_edit.text().strip(),
                                           dialog.label_edit.text().strip())
            if not self._exec(dialog):
                return None
        else:
            why = attempt(name, label)
            if why:
                QMessageBox.warning(w, "Cannot convert to a subflow", why)
                return None
        before = {n.id for n in doc.flow.nodes}
        doc.undo_stack.push(self._command(result["flow"], f"Convert to subflow {result['name']}"))
        new = [n.id for n in doc.flow.nodes if n.id not in before]
        scene.select_nodes(new)
        tabs.view().setFocus()
        return new[0] if new else None

    def _free_name(self) -> str:
        taken = {d.name for d in self.window.document.flow.subflows} | set(self._library_names())
        i = 1
        while f"subflow{i}" in taken:
            i += 1
        return f"subflow{i}"

    # -- Open ---------------------------------------------------------------------------
    def open_selected(self):
        inst = self._selected_instance()
        if inst is None:
            return None
        return self.window.tabs.open_instance(self.window.tabs.doc(), inst)

    # -- Expand ---------------------------------------------------------------------------
    def expand(self, node_id: str | None = None) -> list[str]:
        """Put an instance's nodes in its place (the selected one, or
        ``node_id`` of the current tab), one undo step; they are selected."""
        w, tabs = self.window, self.window.tabs
        tab = tabs.current()
        if tab is not None and tab.library is not None:
            self._say("Expand Subflow works in the flow and in its own subflows, not in a "
                      "library subflow's copy")
            return []
        node_id = node_id or self._selected_instance()
        if node_id is None:
            return []
        doc, scene = tabs.doc(), tabs.scene()
        try:
            after = _edits().expand_instance(w.document.flow, node_id, within=self._within(),
                                    flow_file=self._flow_file())
        except ValueError as exc:
            QMessageBox.warning(w, "Cannot expand the subflow", str(exc))
            return []
        before = {n.id for n in doc.flow.nodes}
        doc.undo_stack.push(self._command(after, f"Expand subflow {node_id}"))
        new = [n.id for n in doc.flow.nodes if n.id not in before]
        scene.select_nodes(new)
        tabs.view().setFocus()
        return new

    # -- Subflow Properties ------------------------------------------------------------
    def edit_properties(self) -> bool:
        """The current subflow tab's header and params (subflow_props), one
        undo step on that tab's stack. True if they changed."""
        from .subflow_props import SubflowPropsDialog, apply_properties

        tab = self.window.tabs.current()
        if tab is None:
            self._say("Open a subflow's tab first to edit its properties")
            return False
        dialog = SubflowPropsDialog(self.window, tab.definition, tab.library is not None)
        if not self._exec(dialog):
            return False
        return apply_properties(self.window, tab, dialog.result, dialog.renames)

    # -- Save to Library --------------------------------------------------------------
    def save_to_library(self, folder: Path | None = None, version: str | None = None):
        """On a library subflow's tab: save its edits as a new version. On
        one of the flow's own subflows (its tab, or a selected instance of
        it): move it to a library file; the flow's instances pin that
        version (one undo step on the flow's stack; the file stays written).
        ``folder`` and ``version`` given: no dialog. Returns the file, or
        None."""
        tabs = self.window.tabs
        tab = tabs.current()
        if tab is not None and tab.library is not None:
            return self._save_library_copy(tab, version)
        if tab is not None:
            name = tab.name
        else:
            inst = self._selected_instance(quiet=True)
            fnode = tabs.doc().node(inst) if inst is not None else None
            name = subflow_name(fnode.type) if fnode is not None else None
            if name is None or self.window.document.flow.subflow(name) is None:
                self._say("Select an instance of one of this flow's own subflows, or open "
                          "the subflow's tab, to save it to the library")
                return None
        return self._move_to_library(name, folder, version)

    def _move_to_library(self, name: str, folder: Path | None, version: str | None):
        w = self.window
        flow_file = self._flow_file()
        folders = library_dirs(flow_file)
        try:
            existing = find_library(name, flow_file)
        except Exception:
            existing = None
        start = _edits().bump_patch(existing.definition.version) if existing is not None else "1.0.0"
        result = {}

        def attempt(f: Path, v: str) -> str:
            try:
                result["flow"] = _edits().move_to_library(w.document.flow, name, f, v,
                                                 flow_file=flow_file)
            except ValueError as exc:
                return str(exc)
            except OSError as exc:
                return f"cannot write to {f}: {exc.strerror or exc}"
            result["path"] = Path(f) / f"{name}.subflow.json"
            result["version"] = v
            return ""

        if folder is None or version is None:
            where = ("" if flow_file else " Save the flow first to keep the subflow in a "
                     "subflows/ folder beside it.")
            dialog = SaveToLibraryDialog(
                w, name, folders, version or start, fixed_folder=False,
                intro=(f"'{name}' leaves this flow file for a library file, "
                       f"{name}.subflow.json, that other flows can use; the instances here "
                       f"keep working, pinned to the version saved.{where}"))
            if existing is not None:
                i = dialog.folder.findData(str(existing.path.parent))
                if i >= 0:
                    dialog.folder.setCurrentIndex(i)
            dialog.check = lambda: attempt(*dialog.chosen())
            if not self._exec(dialog):
                return None
        else:
            why = attempt(folder, version)
            if why:
                QMessageBox.warning(w, "Cannot save to the library", why)
                return None
        w.tabs.bar.setCurrentIndex(0)
        w.document.undo_stack.push(self._command(
            result["flow"], f"Save {name} to library ({result['version']})"))
        sync = getattr(w.document, "sync_subflows", None)
        if sync is not None:
            sync(rescan=True)
        self._say(f"Saved {name} {result['version']} to {result['path']}")
        return result["path"]

    def _save_library_copy(self, tab, version: str | None):
        w = self.window
        entry = tab.library
        folder = entry.path.parent
        start = _edits().bump_patch(entry.definition.version)
        result = {}

        def attempt(v: str) -> str:
            if not re.match(r"^\S+$", v or ""):
                return "Give a version, e.g. " + start
            try:
                result["path"] = _edits().save_new_version(tab.definition, folder, v)
            except ValueError as exc:
                return str(exc)
            except OSError as exc:
                return f"cannot write to {folder}: {exc.strerror or exc}"
            result["version"] = v
            return ""

        if version is None:
            dialog = SaveToLibraryDialog(
                w, tab.name, [folder], start, fixed_folder=True,
                intro=(f"Save your edits of '{tab.name}' as a new version in the library "
                       f"(it is {entry.definition.version} now; that file is kept). Instances "
                       "keep the version they pin until you update them."))
            dialog.check = lambda: attempt(dialog.chosen()[1])
            if not self._exec(dialog):
                return None
        else:
            why = attempt(version)
            if why:
                QMessageBox.warning(w, "Cannot save to the library", why)
                return None
        from runtime.flow.subflows import LibraryEntry, read_library_file

        saved = read_library_file(result["path"])
        tab.library = LibraryEntry(result["path"], saved)
        tab.definition.version = saved.version
        tab.doc.undo_stack.setClean()
        w.tabs._set_tab_look(tab)
        w.tabs._update_chrome()
        sync = getattr(w.document, "sync_subflows", None)
        if sync is not None:
            sync(rescan=True)
        self._say(f"Saved {tab.name} {result['version']} to {result['path']}; instances offer "
                  "Update in their properties")
        return result["path"]

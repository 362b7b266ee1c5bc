"""The main window's files: New, Open, Save, Save As, the recent files and
the offer to recover an autosaved flow (``FileActions``, mixed into
``MainWindow``)."""

from __future__ import annotations

import html
import logging
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QMessageBox,
)

from runtime.flow import Flow, FlowError, Problem, load_flow

from ..look.settings import settings
from ..model.autosave import Recovery, find_recoverable

log = logging.getLogger(__name__)

MAX_RECENT = 10
FLOW_FILTER = "Flows (*.flow.json);;JSON files (*.json);;All files (*)"


def describe_problems(problems: list[Problem], limit: int = 12) -> str:
    lines = []
    for p in problems[:limit]:
        where = []
        if p.node:
            where.append(f"node '{p.node}'")
        elif p.node_index is not None:
            where.append(f"node #{p.node_index}")
        if p.field:
            where.append(p.field)
        prefix = f"{', '.join(where)}: " if where else ""
        lines.append(f"• {prefix}{p.message}")
    if len(problems) > limit:
        lines.append(f"… and {len(problems) - limit} more")
    return "\n".join(lines)


class FileActions:
    """What the window does with flow files. Uses the window's document,
    autosave, status bar and ``add_recent``/``display_name``."""

    def maybe_save(self) -> bool:
        """True when it is fine to drop the current flow (saved or discarded),
        and the unsaved edits of library subflows open in tabs with it."""
        if not self._library_edits_may_go():
            return False
        if not self.document.modified:
            return True
        answer = QMessageBox.question(
            self, "Unsaved changes",
            f"Save the changes to “{self.display_name()}” before closing it?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Save)
        if answer == QMessageBox.StandardButton.Save:
            return self.save()
        return answer == QMessageBox.StandardButton.Discard

    def _library_edits_may_go(self) -> bool:
        """Edits of library subflows (their tabs edit copies, saved with
        Save to Library, not with the flow) are not lost without a word."""
        tabs = getattr(self, "tabs", None)
        dirty = [t for t in (tabs.all_tabs() if tabs is not None else ())
                 if t.library is not None and not t.doc.undo_stack.isClean()]
        if not dirty:
            return True
        names = ", ".join(f"“{t.name}”" for t in dirty)
        answer = QMessageBox.question(
            self, "Unsaved subflow edits",
            f"The edits of the library subflow{'s' * (len(dirty) > 1)} {names} are not saved "
            "to the library. Discard them?",
            QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Discard

    def new_flow(self) -> None:
        if not self.maybe_save():
            return
        self.document.reset(Flow(name="Untitled"), None)
        self.view.reset_zoom()
        self.view.centerOn(400, 300)

    def open_dialog(self) -> None:
        start = str(self.document.dialog_folder(self.recent_files()))
        path, _ = QFileDialog.getOpenFileName(self, "Open Flow", start, FLOW_FILTER)
        if path:
            self.open_path(path)

    def open_path(self, path: str | Path, *, as_copy: bool = False, ask: bool = True,
                  recover: bool = True) -> bool:
        """Open a flow file in this window. A file that cannot be read opens
        a dialog naming every problem; the current flow stays as it was.
        ``as_copy`` opens it untitled (the welcome example must not be
        overwritten by Save). When a crashed designer left a newer autosave
        of the file, it is offered (``recover=False``: the caller offers it
        later, see offer_recovery)."""
        if ask and not self.maybe_save():
            return False
        path = Path(path)
        try:
            flow = load_flow(path, self.document.registry, validate=False)
        except FlowError as exc:
            self.remove_recent(path)
            QMessageBox.warning(
                self, "Cannot open flow",
                f"“{path.name}” could not be opened:\n\n{describe_problems(exc.problems)}")
            return False
        self.document.reset(flow, None if as_copy else path)
        if not as_copy:
            self.add_recent(path)
        self.scene.clearSelection()
        # Again once the window is laid out (the view's size is final then).
        QTimer.singleShot(0, self.view.fit_readable)
        self.view.fit_readable()
        if recover and not as_copy:
            self.offer_recovery(path)
        return True

    def save(self) -> bool:
        if self.document.path is None:
            return self.save_as()
        return self._save_to(self.document.path)

    def save_as(self) -> bool:
        doc = self.document
        if doc.path:
            start = str(doc.path)
        else:
            slug = "-".join(doc.flow.name.lower().split()) or "untitled"
            folder = doc.dialog_folder(self.recent_files(), saving=True)
            start = str(folder / f"{slug}.flow.json")
        path, _ = QFileDialog.getSaveFileName(self, "Save Flow As", start, FLOW_FILTER)
        if not path:
            return False
        if not path.endswith(".json"):
            path += ".flow.json"
        return self._save_to(Path(path))

    def _save_to(self, path: Path) -> bool:
        try:
            self.document.save(path)
        except OSError as exc:
            QMessageBox.warning(self, "Cannot save flow",
                                f"“{path}” could not be written:\n\n{exc.strerror or exc}")
            return False
        tabs = getattr(self, "tabs", None)
        if tabs is not None:
            tabs.mark_saved()  # the flow's own subflows were saved with it
        self.add_recent(path)
        self.statusBar().showMessage(f"Saved {path.name}", 4000)
        return True

    # -- recent files -------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = settings().value("recent_files", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def add_recent(self, path: Path) -> None:
        p = str(Path(path).resolve())
        files = [p] + [f for f in self.recent_files() if f != p]
        settings().setValue("recent_files", files[:MAX_RECENT])

    def remove_recent(self, path: Path) -> None:
        p = str(Path(path).resolve())
        settings().setValue("recent_files", [f for f in self.recent_files() if f != p])

    def _fill_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        files = self.recent_files()
        for f in files:
            act = menu.addAction(Path(f).name, lambda f=f: self.open_path(f))
            act.setStatusTip(f)
            act.setToolTip(f)
        if not files:
            menu.addAction("No recent flows").setEnabled(False)
        else:
            menu.addSeparator()
            menu.addAction("Clear Recent", lambda: settings().setValue("recent_files", []))

    # -- crash recovery -------------------------------------------------------------
    def offer_recovery(self, path: str | Path | None = None) -> bool:
        """Offer the newest autosave a crashed designer left behind; with
        ``path``, the newest of that flow file (just opened), if it is newer
        than the file. Yes opens the recovered copy, unsaved; No keeps what
        is open and deletes the copy. True when work was recovered."""
        found = find_recoverable(self.autosave.directory, path=path)
        if not found:
            return False
        newest = found[0]
        if path is None:
            text = f"Switchboard did not close properly last time. Recover {newest.title}?"
        else:
            # Rich text: the name stands out, and the date never wraps apart.
            when = time.strftime("%Y-%m-%d&nbsp;%H:%M", time.localtime(newest.saved_at))
            text = (f"<p><b>{html.escape(Path(path).name)}</b> has unsaved changes from a "
                    f"session that did not close properly (autosaved {when}). "
                    "Recover them?</p>"
                    "<p><b>Yes</b> opens the recovered changes, not yet saved.<br>"
                    "<b>No</b> opens the file as last saved and deletes the autosave.</p>")
        answer = QMessageBox.question(
            self, "Recover unsaved work", text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.Yes)
        # Older copies of the same file are outdated by the newest, either way.
        for older in found[1:] if path is not None else ():
            older.discard()
        if answer == QMessageBox.StandardButton.Yes:
            self.recover(newest)
            return True
        newest.discard()
        return False

    def recover(self, recovery: Recovery) -> None:
        self.document.reset(recovery.flow, recovery.original)
        # Recovered work is unsaved work: mark it modified until saved.
        self.document.undo_stack.resetClean()
        self._update_title()
        recovery.discard()
        self.autosave.save_now()
        self.view.fit_readable()

    # -- theme ------------------------------------------------------------------------

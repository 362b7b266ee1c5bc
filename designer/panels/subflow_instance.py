"""The properties of a subflow instance, beside its params: what it runs
(the flow's own definition, or the library version it pins and the file
it comes from) and, when the library holds a newer version, Update (this
instance) and Update all (every instance of the subflow in this flow),
each one undo step. Params the new version no longer declares are dropped
from the instance, and the section says which."""

from __future__ import annotations

import weakref

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QVBoxLayout, QWidget

from designer.model.commands import UpdateSubflow, current_pin, instances_of
from designer.model.document import FlowDocument
from runtime.flow.subflows import subflow_name

from ..canvas.items import SUBFLOW_COLOR
from .editor_base import esc

#: What the last Update did, per document and node: (version, text), shown
#: while the node still pins that version (the form is built again when the
#: node's params change with its version).
_notes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def update_note(doc: FlowDocument, node_id: str) -> str:
    fnode = doc.node(node_id)
    version, text = _notes.get(doc, {}).get(node_id, ("", ""))
    pinned = fnode.subflow.version if fnode is not None and fnode.subflow else None
    return text if text and pinned == version else ""


def shown_path(doc: FlowDocument, path) -> str:
    """A library file as the section shows it: beside the flow, relative
    to the flow's folder (subflows/NAME.subflow.json); else in full, the
    home folder as ~."""
    from pathlib import Path

    path = Path(path)
    _flow, file = doc.subflow_scope()
    if file:
        try:
            return str(path.relative_to(Path(file).resolve().parent))
        except ValueError:
            pass
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class SubflowSection(QFrame):
    """Under a subflow instance's name: where its definition comes from,
    and Update / Update all while the library has a newer version."""

    def __init__(self, doc: FlowDocument, node_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc, self.node_id = doc, node_id
        self.setObjectName("subflowBox")
        self.setStyleSheet(f"QFrame#subflowBox {{ border: 1px solid {SUBFLOW_COLOR}; "
                           "border-radius: 6px; }")
        self.title = QLabel(self)
        self.title.setObjectName("subflowTitle")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.source = QLabel(self)
        self.source.setObjectName("muted")
        self.source.setWordWrap(True)
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.newer = QLabel(self)
        self.newer.setObjectName("subflowNewer")
        self.newer.setTextFormat(Qt.TextFormat.RichText)
        self.newer.setWordWrap(True)
        self.update_button = QPushButton("Update this instance", self)
        self.update_button.setToolTip("Pin this instance to the library's current version "
                                      "(one undo step)")
        self.update_button.clicked.connect(lambda: self.update_instances(every=False))
        self.update_all_button = QPushButton("Update all instances in this flow", self)
        self.update_all_button.setToolTip("Pin every instance of this subflow in this flow to "
                                          "the library's current version (one undo step)")
        self.update_all_button.clicked.connect(lambda: self.update_instances(every=True))
        self.note = QLabel(self)
        self.note.setObjectName("subflowNote")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # One above the other: side by side they would not fit a 320 px dock.
        self.buttons = QWidget(self)
        buttons = QVBoxLayout(self.buttons)
        buttons.setContentsMargins(0, 4, 0, 0)
        buttons.setSpacing(4)
        buttons.addWidget(self.update_button)
        buttons.addWidget(self.update_all_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(3)
        for w in (self.title, self.source, self.newer, self.buttons, self.note):
            layout.addWidget(w)
        self.sync()

    def sync(self) -> None:
        doc, fnode = self.doc, self.doc.node(self.node_id)
        if fnode is None:
            return
        name = subflow_name(fnode.type)
        defn = doc.subflow_definition(self.node_id)
        label = (defn.label or defn.name) if defn is not None else name
        entry = doc.library_entry(self.node_id)
        where = shown_path(doc, entry.path) if entry is not None else ""
        if fnode.subflow is not None:
            self.title.setText(f"<b>{esc(label)}</b> from the library, version "
                               f"<b>{esc(fnode.subflow.version)}</b>")
            self.source.setText(where or "Not in the library folders")
            self.source.setToolTip(
                (f"{entry.path}<br>" if entry is not None else "")
                + f"Pins content {esc(fnode.subflow.hash)}: the flow file keeps the version "
                "and the hash, so that a run is the same run tomorrow")
        elif entry is not None:
            self.title.setText(f"<b>{esc(label)}</b> from the library, no version pinned")
            self.source.setText(where)
            self.source.setToolTip(str(entry.path))
        else:
            self.title.setText(f"<b>{esc(label)}</b>, defined in this flow")
            self.source.setText("Edit its definition (double-click the node) to change every "
                                "instance at once.")
            self.source.setToolTip("")
        newer = doc.newer_version(self.node_id)
        behind = self.behind()
        self.newer.setVisible(bool(newer) or (entry is not None and fnode.subflow is None))
        others = [n for n in behind if n != self.node_id]
        if newer:
            self.newer.setText(
                f"Version <b>{esc(newer)}</b> is in the library."
                + (f" A flow runs one version of a subflow: update all {len(behind)} "
                   "instances together." if others and self.node_id in behind else ""))
        elif entry is not None and fnode.subflow is None:
            self.newer.setText(f"Pin it to version <b>{esc(entry.definition.version or '')}"
                               "</b>, the library's current one.")
        self.buttons.setVisible(bool(behind))
        # Alone, it would pin another version than the other instances, and
        # the flow would not run (one version of a subflow per flow): then
        # only Update all is offered, and the line above says why.
        self.update_button.setVisible(self.node_id in behind and not others)
        n = len(behind)
        self.update_all_button.setVisible(n > 1 or (n == 1 and self.node_id not in behind))
        self.update_all_button.setText("Update all instances in this flow"
                                       + (f" ({n})" if n > 1 else ""))
        note = update_note(doc, self.node_id)
        self.note.setText(note)
        self.note.setVisible(bool(note))

    def behind(self) -> list[str]:
        """The instances of this subflow in the flow that do not pin the
        library's current version (and content)."""
        fnode = self.doc.node(self.node_id)
        entry = self.doc.library_entry(self.node_id)
        if fnode is None or entry is None:
            return []
        pin = current_pin(entry.definition)
        return [nid for nid in instances_of(self.doc, fnode.type)
                if (n := self.doc.node(nid)) is not None and n.subflow != pin]

    def update_instances(self, every: bool) -> UpdateSubflow | None:
        """Update this instance, or (``every``) all of them, in one step."""
        ids = self.behind() if every else [self.node_id]
        if not ids:
            return None
        command = UpdateSubflow(self.doc, ids)
        if not command.changes:
            return None
        doc = self.doc
        notes = _notes.setdefault(doc, {})
        for nid in ids:
            gone = command.dropped.get(nid, [])
            text = f"Updated to version {command.version}."
            if gone:
                text += (" Dropped the setting" + ("s" if len(gone) > 1 else "") + " of "
                         + ", ".join(gone) + ": the new version has no such param.")
            notes[nid] = (command.version, text)
        # After the notes: the form is built again for the new version's params.
        doc.undo_stack.push(command)
        said = command.text()
        dropped = sum(len(v) for v in command.dropped.values())
        if dropped:
            said += f"; {dropped} setting{'s' * (dropped != 1)} dropped (no such param now)"
        bar = getattr(self.window(), "statusBar", None)
        if callable(bar):
            bar().showMessage(said, 10000)
        return command

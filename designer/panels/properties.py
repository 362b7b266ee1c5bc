"""The properties panel: a form generated from the selected node's spec.

For each param the designer picks who supplies the value (AI, a fixed
Custom value, or the incoming Message) and edits it; for an agent the panel
shows, live, the tools and JSON schemas its LLM will see.

The panel is a view: every edit is a command on the document's undo stack
(designer.model.commands) and the editors follow the document's signals. The form
is built once per selected node; later changes (typing, undo, a scope flip,
wires coming and going) update the widgets in place, so focus and cursor
survive while the user types.

The form of one node is ``node_form.NodeForm`` (its tool and agent-preview
parts in ``node_tool_form``, what it decides without widgets in
``form_rules``); this module holds the panel that shows one form, a
summary of several nodes, or the empty page."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from designer.model.document import FlowDocument
from runtime.spec import Scope

from .editor_base import AI_COLOR, MESSAGE_COLOR, esc
from .node_form import NodeForm
from .panel_style import is_dark, label, panel_style

# -- the panel ------------------------------------------------------------------------

class PropertiesPanel(QWidget):
    """The right dock's content. ``set_node(id)`` for a single selection,
    ``set_nodes(ids)`` for any selection (several nodes: a summary)."""

    node_shown = Signal(str)  # id, or "" when the form goes away

    def __init__(self, document: FlowDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("propertiesPanel")
        self.doc = document
        self.node_id: str | None = None
        self.selection: list[str] = []
        self.form: NodeForm | None = None

        self.stack = QStackedWidget(self)
        self.empty_page = self._build_empty()
        self.summary_page = QWidget(self)
        self.summary_page.setObjectName("propertiesPage")
        self.summary_layout = QVBoxLayout(self.summary_page)
        self.summary_layout.setContentsMargins(16, 16, 16, 16)
        self.summary_layout.setSpacing(6)
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        summary_scroll = QScrollArea(self)
        summary_scroll.setWidgetResizable(True)
        summary_scroll.setFrameShape(QFrame.Shape.NoFrame)
        summary_scroll.setWidget(self.summary_page)
        for page in (self.empty_page, summary_scroll, self.scroll):
            self.stack.addWidget(page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self.setMinimumWidth(280)
        self._apply_style()

        d = document
        d.node_changed.connect(self._on_node_changed)
        d.node_removed.connect(self._on_node_removed)
        d.node_added.connect(self._on_node_added)
        d.flow_reset.connect(self._on_flow_reset)
        d.problems_changed.connect(self._on_problems)
        d.changed.connect(self._on_changed)
        d.subflows_changed.connect(self._on_subflows_changed)
        self.set_node(None)

    # -- selection ------------------------------------------------------------------
    def set_node(self, node_id: str | None) -> None:
        self.set_nodes([node_id] if node_id else [])

    def set_nodes(self, node_ids: list[str]) -> None:
        ids = [n for n in node_ids if self.doc.node(n) is not None]
        self.selection = ids
        if len(ids) == 1:
            if ids[0] != self.node_id or self.form is None:
                self._build_form(ids[0])
            self.stack.setCurrentIndex(2)
            return
        self._drop_form()
        if ids:
            self._fill_summary(ids)
            self.stack.setCurrentIndex(1)
        else:
            self.stack.setCurrentIndex(0)

    def _build_form(self, node_id: str) -> None:
        self._drop_form()
        if self.doc.spec(node_id) is None:  # unknown type: nothing to edit
            self.node_id = None
            self._fill_summary([node_id])
            self.stack.setCurrentIndex(1)
            return
        self.node_id = node_id
        self.form = NodeForm(self.doc, node_id)
        self.scroll.setWidget(self.form)
        self.node_shown.emit(node_id)

    def _drop_form(self) -> None:
        if self.form is not None:
            old = self.scroll.takeWidget()
            if old is not None:
                old.deleteLater()
            self.form = None
            self.node_id = None
            self.node_shown.emit("")

    # -- document signals -------------------------------------------------------------
    def _on_node_changed(self, node_id: str) -> None:
        if self.form is not None and node_id == self.node_id:
            spec = self.doc.spec(node_id)
            if spec is not self.form.spec and spec != self.form.spec:
                # Its params themselves changed (a subflow instance updated
                # to another version, its definition edited): a new form.
                self._build_form(node_id)
                return
            self.form.sync()
        elif len(self.selection) > 1 and node_id in self.selection:
            self._fill_summary(self.selection)

    def _on_subflows_changed(self) -> None:
        # Inside a definition the Subflow scope lists the subflow's params:
        # they may have changed (added, renamed, retyped).
        if self.form is not None and self.node_id is not None \
                and getattr(self.doc, "definition", None) is not None:
            self._build_form(self.node_id)

    def _on_node_removed(self, node_id: str, _index: int) -> None:
        if node_id in self.selection:
            self.set_nodes([n for n in self.selection if n != node_id])

    def _on_node_added(self, _node_id: str) -> None:
        pass  # the canvas decides what is selected; nothing to show until it says

    def _on_flow_reset(self) -> None:
        # A new flow object: rebuild, so no widget holds the old flow's state.
        keep = [n for n in self.selection if self.doc.node(n) is not None]
        self._drop_form()
        self.set_nodes(keep)

    def _on_problems(self, _problems: list) -> None:
        if self.form is not None and self.node_id is not None:
            self.form.set_problems(self.doc.problems_for(self.node_id))

    def _on_changed(self) -> None:
        if self.form is not None:
            self.form.refresh_live()

    # -- pages ---------------------------------------------------------------------------
    def _build_empty(self) -> QWidget:
        page = QWidget(self)
        page.setObjectName("propertiesPage")
        lay = QVBoxLayout(page)
        lay.setContentsMargins(24, 24, 24, 24)
        lay.setSpacing(10)
        lay.addStretch(1)
        title = label("Nothing selected", "emptyTitle", page)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = label("Select a node on the canvas to edit its settings here.", "muted", page)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        lay.addWidget(hint)
        explain = label(
            "Every parameter says where its value comes from:<br><br>"
            f"<b style='color:{AI_COLOR}'>AI</b> &nbsp;the agent's model fills it in when it "
            "calls the node as a tool.<br>"
            "<b>Custom</b> &nbsp;a value you fix here; the AI never sees it.<br>"
            f"<b style='color:{MESSAGE_COLOR}'>Message</b> &nbsp;read from the incoming "
            "message, e.g. <tt>payload.email</tt>.", "muted", page)
        explain.setTextFormat(Qt.TextFormat.RichText)
        explain.setContentsMargins(8, 12, 8, 0)
        lay.addWidget(explain)
        lay.addStretch(2)
        return page

    def _fill_summary(self, ids: list[str]) -> None:
        while self.summary_layout.count():
            item = self.summary_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        n = len(ids)
        self.summary_layout.addWidget(
            label(f"{n} node{'s' * (n != 1)} selected", "emptyTitle", self.summary_page))
        ai = 0
        for nid in ids:
            fnode, spec = self.doc.node(nid), self.doc.spec(nid)
            if fnode is None:
                continue
            kind = spec.name if spec else f"unknown type {fnode.type}"
            name = fnode.name or (spec.name if spec else fnode.type)
            line = label(f"<b>{esc(name)}</b> &nbsp;<span>{esc(kind)}</span>",
                          "", self.summary_page)
            line.setToolTip(f"id {nid}")
            line.setTextFormat(Qt.TextFormat.RichText)
            self.summary_layout.addWidget(line)
            if spec:
                ai += sum(1 for p in spec.params
                          if (fnode.params[p.name].scope if p.name in fnode.params
                              else p.default_scope) is Scope.AI)
        if ai:
            self.summary_layout.addWidget(label(
                f"{ai} parameter{'s' * (ai != 1)} in this selection filled by the AI.",
                "muted", self.summary_page))
        tip = ("Select a single node to edit its settings." if n > 1 else
               "This node's type is not installed, so its settings cannot be edited.")
        self.summary_layout.addSpacing(8)
        self.summary_layout.addWidget(label(tip, "muted", self.summary_page))
        self.summary_layout.addStretch(1)

    # -- looks -----------------------------------------------------------------------------
    def _apply_style(self) -> None:
        # Read darkness from the application's palette: our own stylesheet
        # changes this widget's palette, and reading that back flipped the
        # answer and re-applied the style forever (a crash on theme change).
        self._dark = is_dark(QApplication.palette())
        self.setStyleSheet(panel_style(self._dark))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        if (event.type() == QEvent.Type.PaletteChange
                and is_dark(QApplication.palette()) != getattr(self, "_dark", None)):
            self._apply_style()
        super().changeEvent(event)

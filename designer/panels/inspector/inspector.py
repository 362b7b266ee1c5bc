"""The inspector: a bottom dock of tabs over one RunModel, fed only by events.

Live runs arrive as batches from the RunController; a stored run is replayed
from the history into a second model and shown read-only, with a banner
that leads back to the live run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTabWidget, QVBoxLayout, QWidget

from runtime.events import Event
from runtime.flow import Flow, Problem
from runtime.registry import Registry

from .agent_tab import AgentTab
from .context import InspectorContext
from .debug_tab import DebugTab
from .history_tab import HistoryTab, fmt_started
from .messages_tab import MessagesTab
from .model import AGENTS, DEBUG, ERRORS, LOGS, RUN, STATS, TOOLS, RunModel
from .problems_tab import ProblemsTab
from .timeline import Timeline
from .tools_tab import ToolsTab

if TYPE_CHECKING:
    from runtime.history import History


TAB_DEBUG, TAB_MESSAGES, TAB_TOOLS, TAB_TIMELINE, TAB_AGENT, TAB_PROBLEMS, TAB_HISTORY = range(7)
TAB_NAMES = ["Debug", "Messages", "Tools", "Timeline", "Agent", "Problems", "History"]


class Inspector(QWidget):
    node_selected = Signal(str)
    prompt_submitted = Signal(str, str)  # agent node id, text

    def __init__(self, registry: Registry | None = None, history: History | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Inspector")
        self.ctx = InspectorContext(registry)
        self.live = self.ctx.model
        self.history = history
        self._shown_run = ""

        self.banner = QWidget()
        self.banner.setObjectName("InspectorBanner")
        self.banner.setStyleSheet("#InspectorBanner { background: #f3ecd9; }"
                                  "#InspectorBanner QLabel { color: #5d4a1c; }")
        self.banner_text = QLabel()
        back = QPushButton("Back to the live run")
        back.clicked.connect(self.show_live)
        bl = QHBoxLayout(self.banner)
        bl.setContentsMargins(10, 4, 10, 4)
        bl.addWidget(self.banner_text, 1)
        bl.addWidget(back)
        self.banner.hide()

        self.debug = DebugTab(self.ctx)
        self.messages = MessagesTab(self.ctx)
        self.tools = ToolsTab(self.ctx)
        self.timeline = Timeline(self.ctx)
        self.agent = AgentTab(self.ctx)
        self.problems = ProblemsTab(self.ctx)
        self.history_tab = HistoryTab(history)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for widget, name in zip((self.debug, self.messages, self.tools, self.timeline, self.agent,
                                 self.problems, self.history_tab), TAB_NAMES, strict=True):
            self.tabs.addTab(widget, name)

        for tab in (self.debug, self.tools, self.timeline, self.problems, self.agent):
            tab.node_selected.connect(self.node_selected)
        self.agent.prompt_submitted.connect(self.prompt_submitted)
        self.history_tab.open_requested.connect(self.open_run)
        self.problems.count_changed.connect(self._update_titles)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.tabs, 1)
        self._update_titles()

    # -- inputs -------------------------------------------------------------
    def set_flow(self, flow: Flow | None) -> None:
        """The document's flow, for node names and the list of agents."""
        self.ctx.flow = flow
        self.agent.reload_agents()

    def apply_events(self, events: list[Event]) -> None:
        changed = self.live.apply(events)
        if self.ctx.model is not self.live or not changed:
            return
        self._refresh(changed)

    def show_validation(self, problems: list[Problem]) -> None:
        self.problems.set_validation(problems)

    def show_refused(self, problems: list[Problem]) -> None:
        """The flow was not run: show why, where the user will look."""
        self.problems.set_validation(problems)
        self.tabs.setCurrentIndex(TAB_PROBLEMS)

    def select_node(self, node_id: str | None) -> None:
        self.messages.show_node(node_id)

    def select_wire(self, index: int | None) -> None:
        self.messages.show_wire(index)

    # -- stored runs --------------------------------------------------------
    def open_run(self, run_id: str) -> bool:
        if self.history is None:
            return False
        info = self.history.run(run_id)
        if info is None:
            return False
        stored = RunModel()
        stored.apply(self.history.events(run_id))
        self.ctx.model = stored
        self.ctx.read_only = True
        self.banner_text.setText(
            f"Viewing a stored run of <b>{info.flow or 'Untitled'}</b> from "
            f"{fmt_started(info.started)} ({info.status}). Read-only.")
        self.banner.show()
        self._reset_tabs()
        self._refresh({RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS})
        self.tabs.setCurrentIndex(TAB_DEBUG if stored.debug else TAB_TIMELINE)
        return True

    def show_live(self) -> None:
        self.ctx.model = self.live
        self.ctx.read_only = False
        self.banner.hide()
        self._reset_tabs()
        self._refresh({RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS})

    @property
    def viewing_stored(self) -> bool:
        return self.ctx.model is not self.live

    def run_finished(self) -> None:
        self.history_tab.refresh()

    # -- refresh ------------------------------------------------------------
    def _reset_tabs(self) -> None:
        self.debug.reset()
        self.tools.reset()
        self.agent.reset()
        self._shown_run = self.ctx.model.run_id

    def _refresh(self, changed: set[str]) -> None:
        if self.ctx.model.run_id != self._shown_run:
            self._reset_tabs()
            changed = changed | {DEBUG, TOOLS, AGENTS, ERRORS, STATS}
        if DEBUG in changed:
            self.debug.refresh()
        if changed & {STATS, RUN}:
            self.messages.refresh()
        if TOOLS in changed:
            self.tools.refresh()
        if AGENTS in changed:
            self.agent.refresh()
        if changed & {ERRORS, LOGS, RUN}:
            self.problems.refresh()
        self.timeline.refresh()
        self._update_titles()

    def _update_titles(self, *_: Any) -> None:
        model = self.ctx.model
        counts = {
            TAB_DEBUG: model.debug_seq,
            TAB_TOOLS: len(model.tool_calls),
            TAB_PROBLEMS: self.problems.count(),
        }
        for index, name in enumerate(TAB_NAMES):
            n = counts.get(index, 0)
            self.tabs.setTabText(index, f"{name} ({n})" if n else name)
        if self.problems.count():
            self.tabs.tabBar().setTabTextColor(TAB_PROBLEMS, Qt.GlobalColor.darkRed)
        else:
            self.tabs.tabBar().setTabTextColor(TAB_PROBLEMS, self.palette().text().color())

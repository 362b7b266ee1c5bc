"""The inspector: a bottom dock of tabs over one RunModel, fed only by events.

Live runs arrive as batches from the RunController; a stored run is replayed
from the history into a second model and shown read-only, with a banner
that leads back to the live run.

Its first line is a strip: the tab names (with their counts) and a button
that folds the rest away. Folded, the inspector is that strip alone, so an
empty inspector costs the canvas one line; clicking a tab opens it. The
dock around it (see dock.py) decides the heights."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QTabBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from runtime.events import Event
from runtime.flow import Flow, Problem, parse_flow
from runtime.registry import Registry

from ...look import icons, theme
from .agent_tab import AgentTab
from .approvals import PersonCards
from .context import InspectorContext
from .debug_tab import DebugTab
from .history_tab import HistoryTab, fmt_started
from .messages_tab import MessagesTab
from .model import AGENTS, DEBUG, ERRORS, LOGS, RUN, STATS, TOOLS, RunModel
from .problems_tab import ProblemsTab
from .staleness import RunSnapshot
from .timeline import Timeline
from .tools_tab import ToolsTab

if TYPE_CHECKING:
    from runtime.history import History

log = logging.getLogger(__name__)


TAB_DEBUG, TAB_MESSAGES, TAB_TOOLS, TAB_TIMELINE, TAB_AGENT, TAB_PROBLEMS, TAB_HISTORY = range(7)
TAB_NAMES = ["Debug", "Messages", "Tools", "Timeline", "Agent", "Problems", "History"]

TOGGLE_SHORTCUT = "Ctrl+J"  # as VS Code's panel
NO_RUN_HINT = "Run the flow (F5): its messages, tool calls and agent turns show here"
STALE_NOTE = ("From the previous run: the flow has been edited since. Greyed rows are about "
              "nodes that changed. Run again (F5) to see the flow as it is now.")


class TabPages(QObject):
    """A tab bar and a stack of pages, with QTabWidget's API, kept apart so
    that the bar can be the inspector's one-line strip and notes can sit
    between it and the pages."""

    currentChanged = Signal(int)  # noqa: N815 - as QTabWidget's
    #: a tab came (the Paused tab is added by the debugger, after the others)
    tab_added = Signal(int)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.bar = QTabBar()
        self.bar.setDocumentMode(True)
        self.bar.setDrawBase(False)
        self.bar.setExpanding(False)
        self.bar.setUsesScrollButtons(True)
        self.bar.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.stack = QStackedWidget()
        self.bar.currentChanged.connect(self._changed)

    def _changed(self, index: int) -> None:
        self.stack.setCurrentIndex(index)
        self.currentChanged.emit(index)

    def addTab(self, widget: QWidget, name: str) -> int:  # noqa: N802 - as QTabWidget's
        self.stack.addWidget(widget)
        index = self.bar.addTab(name)
        self.tab_added.emit(index)
        return index

    def tabBar(self) -> QTabBar:  # noqa: N802
        return self.bar

    def count(self) -> int:
        return self.bar.count()

    def currentIndex(self) -> int:  # noqa: N802
        return self.bar.currentIndex()

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802
        self.bar.setCurrentIndex(index)

    def currentWidget(self) -> QWidget:  # noqa: N802
        return self.stack.currentWidget()

    def widget(self, index: int) -> QWidget:
        return self.stack.widget(index)

    def indexOf(self, widget: QWidget) -> int:  # noqa: N802
        return self.stack.indexOf(widget)

    def setCurrentWidget(self, widget: QWidget) -> None:  # noqa: N802
        self.setCurrentIndex(self.indexOf(widget))

    def tabText(self, index: int) -> str:  # noqa: N802
        return self.bar.tabText(index)

    def setTabText(self, index: int, text: str) -> None:  # noqa: N802
        self.bar.setTabText(index, text)


class Inspector(QWidget):
    node_selected = Signal(str)
    prompt_submitted = Signal(str, str)  # agent node id, text
    # The user asked to fold (True) or open (False) the inspector: the
    # strip's button, or a tab clicked while folded. The dock obeys.
    collapse_requested = Signal(bool)
    # Another run is shown: a stored one (History's Open) or the live one
    # again. The canvas shows that run's badges.
    shown_run_changed = Signal()

    def __init__(self, registry: Registry | None = None, history: History | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Inspector")
        self.ctx = InspectorContext(registry)
        self.live = self.ctx.live
        self.history = history
        self._shown_run = ""
        self._collapsed = False

        self.banner = QWidget()
        self.banner.setObjectName("InspectorBanner")
        self.banner_text = QLabel()
        back = QPushButton("Back to the live run")
        back.clicked.connect(self.show_live)
        bl = QHBoxLayout(self.banner)
        bl.setContentsMargins(10, 4, 10, 4)
        bl.addWidget(self.banner_text, 1)
        bl.addWidget(back)
        self.banner.hide()

        self.stale_banner = QLabel(STALE_NOTE)
        self.stale_banner.setObjectName("InspectorStale")
        self.stale_banner.setWordWrap(True)
        self.stale_banner.hide()

        self.debug = DebugTab(self.ctx)
        self.messages = MessagesTab(self.ctx)
        self.tools = ToolsTab(self.ctx)
        self.timeline = Timeline(self.ctx)
        self.agent = AgentTab(self.ctx)
        self.problems = ProblemsTab(self.ctx)
        self.history_tab = HistoryTab(history)
        self.tabs = TabPages(self)
        for widget, name in zip((self.debug, self.messages, self.tools, self.timeline, self.agent,
                                 self.problems, self.history_tab), TAB_NAMES, strict=True):
            self.tabs.addTab(widget, name)
        self.tabs.bar.tabBarClicked.connect(self._tab_clicked)
        self.tabs.currentChanged.connect(self._color_tabs)
        # A tab added later (Paused) gets the strip's colours too, not black.
        self.tabs.tab_added.connect(self._color_tabs)

        # The strip: tabs, a hint while there is nothing to show, the fold button.
        self.hint = QLabel(NO_RUN_HINT)
        self.hint.setObjectName("InspectorHint")
        self.hint.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # It gives way to the tabs when the window is narrow.
        self.hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hint.installEventFilter(self)  # elided to its width
        self.toggle_button = QToolButton()
        self.toggle_button.setObjectName("InspectorToggle")
        self.toggle_button.setAutoRaise(True)
        self.toggle_button.setIconSize(QSize(16, 16))
        self.toggle_button.clicked.connect(lambda: self.collapse_requested.emit(not self._collapsed))
        self.strip = QWidget()
        self.strip.setObjectName("InspectorStrip")
        sl = QHBoxLayout(self.strip)
        sl.setContentsMargins(4, 0, 6, 0)
        sl.setSpacing(8)
        sl.addWidget(self.tabs.bar, 0, Qt.AlignmentFlag.AlignBottom)
        sl.addWidget(self.hint, 1)
        sl.addWidget(self.toggle_button)
        self.strip.installEventFilter(self)  # a double-click on the strip folds or opens

        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(0)
        body.addWidget(self.banner)
        body.addWidget(self.stale_banner)
        # Tool calls waiting for approval and agents' questions: a column
        # beside the tabs, shown while any waits (the dock opens for them).
        self.cards = PersonCards(self.ctx.name_of)
        pages = QHBoxLayout()
        pages.setContentsMargins(0, 0, 0, 0)
        pages.setSpacing(0)
        pages.addWidget(self.tabs.stack, 1)
        pages.addWidget(self.cards)
        body.addLayout(pages, 1)

        for tab in (self.debug, self.tools, self.timeline, self.problems, self.agent):
            tab.node_selected.connect(self.node_selected)
        self.agent.prompt_submitted.connect(self.prompt_submitted)
        self.history_tab.open_requested.connect(self.open_run)
        self.problems.count_changed.connect(self._update_titles)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.strip)
        layout.addWidget(self.body, 1)
        self._restyle()
        self._update_titles()
        self._update_strip()

    # -- folding ------------------------------------------------------------
    @property
    def collapsed(self) -> bool:
        return self._collapsed

    def set_collapsed(self, collapsed: bool) -> None:
        """Fold to the strip, or open. Only the dock calls this: it sizes
        itself to match."""
        self._collapsed = collapsed
        self.body.setVisible(not collapsed)
        # Folded, no tab is "the one on show": the strip drops its underline.
        self.strip.setProperty("folded", collapsed)
        self.strip.style().unpolish(self.strip)
        self.strip.style().polish(self.strip)
        self.tabs.bar.style().unpolish(self.tabs.bar)
        self.tabs.bar.style().polish(self.tabs.bar)
        self._color_tabs()
        self._update_strip()
        self.updateGeometry()

    def strip_height(self) -> int:
        return self.strip.sizeHint().height()

    def _tab_clicked(self, index: int) -> None:
        if self._collapsed and index >= 0:
            self.collapse_requested.emit(False)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is self.strip and event.type() == QEvent.Type.MouseButtonDblClick:
            self.collapse_requested.emit(not self._collapsed)
            return True
        if obj is self.hint and event.type() == QEvent.Type.Resize:
            self._fit_hint()
        return super().eventFilter(obj, event)

    def _fit_hint(self) -> None:
        """The hint whole where it fits, else cut at its end with "…"
        (never its first words clipped away beside the tabs)."""
        metrics = self.hint.fontMetrics()
        self.hint.setText(metrics.elidedText(NO_RUN_HINT, Qt.TextElideMode.ElideRight,
                                             max(0, self.hint.width() - 4)))

    def _update_strip(self) -> None:
        t = theme.current()
        name = "chevron-up" if self._collapsed else "chevron-down"
        self.toggle_button.setIcon(icons.icon(name, t.text, 16))
        verb = "Show" if self._collapsed else "Hide"
        self.toggle_button.setToolTip(f"{verb} the inspector ({TOGGLE_SHORTCUT})")
        self.hint.setVisible(self._collapsed and not self.live.run_id and not self.viewing_stored)

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
        if RUN in changed:
            self._update_strip()

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

    # -- the run and the flow on screen ---------------------------------------
    def clear_run(self) -> None:
        """Another flow is on screen (New, Open): what the last run showed
        is about a flow that is gone, so it goes too. History keeps it."""
        self.ctx.snapshot = None
        if self.viewing_stored:
            self.show_live()
        self.live.reset()
        self.messages.show_node(None)
        self._reset_tabs()
        self._refresh({RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS})
        self.update_staleness()

    def set_run_map(self, run_id: str, run_map: Any) -> None:
        """The live run's map of its subflow instances (None: it has none)."""
        self.ctx.maps = {k: v for k, v in self.ctx.maps.items() if k == self.ctx.model.run_id}
        if run_map is not None:
            self.ctx.maps[run_id] = run_map

    def set_snapshot(self, snapshot: RunSnapshot | None) -> None:
        """The flow the live run ran, as it was when it started."""
        self.ctx.snapshot = snapshot
        self.update_staleness()

    def update_staleness(self) -> None:
        """The flow was edited: grey what the live run says about nodes that
        changed, and say so above the tabs."""
        snapshot = self.ctx.snapshot
        changed = bool(snapshot is not None and snapshot.changed and self.live.run_id
                       and not self.viewing_stored)
        self.stale_banner.setVisible(changed)
        self.debug.restyle()
        self.tools.restyle()
        self.messages.refresh()
        self.timeline.refresh()

    @property
    def showing_stale(self) -> bool:
        return self.stale_banner.isVisibleTo(self)

    # -- stored runs --------------------------------------------------------
    def open_run(self, run_id: str) -> bool:
        if self.history is None:
            return False
        info = self.history.run(run_id)
        if info is None:
            return False
        stored = RunModel()
        stored.apply(self.history.events(run_id))
        self._map_stored(run_id, info)
        self.ctx.model = stored
        self.ctx.read_only = True
        self.banner_text.setText(
            f"Viewing a stored run of <b>{info.flow or 'Untitled'}</b> from "
            f"{fmt_started(info.started)} ({info.status}). Read-only.")
        self.banner.show()
        self.stale_banner.hide()
        self._reset_tabs()
        self._refresh({RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS})
        self.tabs.setCurrentIndex(TAB_DEBUG if stored.debug else TAB_TIMELINE)
        self._update_strip()
        self.shown_run_changed.emit()
        return True

    def _map_stored(self, run_id: str, info: Any) -> None:
        """The map of a stored run of a flow with subflow instances, from the
        flow it kept (library definitions found again by their pins)."""
        if run_id in self.ctx.maps:
            return
        try:
            kept = self.history.flow_of(run_id) if self.history is not None else None
            if not kept:
                return
            from ...control.subflow_run import RunMap

            run_map = RunMap.of(parse_flow(kept), self.ctx.registry, getattr(info, "path", "") or "")
        except Exception:  # a flow this registry cannot read: ids stay as they are
            log.debug("no subflow map for stored run %s", run_id, exc_info=True)
            return
        if run_map is not None:
            self.ctx.maps[run_id] = run_map

    def show_live(self) -> None:
        self.ctx.model = self.live
        self.ctx.read_only = False
        self.banner.hide()
        self._reset_tabs()
        self._refresh({RUN, DEBUG, STATS, TOOLS, AGENTS, ERRORS, LOGS})
        self.update_staleness()
        self._update_strip()
        self.shown_run_changed.emit()

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
        if changed & {AGENTS, TOOLS}:  # the agent tab's tree shows the calls too
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
        self._color_tabs()

    def _color_tabs(self, *_: Any) -> None:
        """The tab on show in the text colour, the others muted (all muted
        while folded), and Problems red while it has any."""
        t = theme.current()
        bar = self.tabs.tabBar()
        for index in range(bar.count()):
            if index == TAB_PROBLEMS and self.problems.count():
                tint = t.error
            elif index == bar.currentIndex() and not self._collapsed:
                tint = t.text
            else:
                tint = t.muted
            bar.setTabTextColor(index, QColor(tint))

    # -- theme ----------------------------------------------------------------
    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._restyle()

    def _restyle(self) -> None:
        """Colours from the theme, so that the strip and the notes read in
        light and dark alike."""
        t = theme.current()
        note_bg = _blend(t.warning, t.base, 0.16)
        self.setStyleSheet(
            f"#InspectorStrip {{ background: {t.panel}; border-top: 1px solid {t.border}; }}"
            # The tabs' text colours are set per tab (_update_titles): a style
            # sheet colour would hide Problems' red.
            f"#InspectorStrip QTabBar::tab {{ padding: 6px 12px; margin: 0; border: none;"
            f" border-bottom: 2px solid transparent; background: transparent; }}"
            f"#InspectorStrip QTabBar::tab:selected {{ border-bottom-color: {t.accent}; }}"
            f"#InspectorStrip[folded=\"true\"] QTabBar::tab:selected {{"
            f" border-bottom-color: transparent; }}"
            f"#InspectorHint {{ color: {t.muted}; }}"
            f"#InspectorBanner {{ background: {note_bg}; }}"
            f"#InspectorBanner QLabel {{ color: {t.text}; }}"
            f"#InspectorStale {{ background: {note_bg}; color: {t.text}; padding: 5px 10px; }}")
        self._update_strip()
        self._update_titles()


def _blend(color: str, base: str, amount: float) -> str:
    """``amount`` of ``color`` over ``base``: a tint that works on either theme."""
    a, b = QColor(color), QColor(base)
    mix = QColor(round(a.red() * amount + b.red() * (1 - amount)),
                 round(a.green() * amount + b.green() * (1 - amount)),
                 round(a.blue() * amount + b.blue() * (1 - amount)))
    return mix.name()

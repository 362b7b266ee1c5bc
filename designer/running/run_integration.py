"""Wires running and inspecting into the main window.

``MainWindow.__init__`` calls ``install(window)`` last. The window provides
``document``, ``scene`` (``item_for_node``, ``item_for_wire``,
``clear_run_state``), ``run_action``, ``stop_action``, ``inspector_dock`` and
``select_node``; everything about runs lives here and in the inspector, so
the editor knows nothing of the runtime's events.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QLabel, QMenu, QMessageBox

from runtime.cost import summary as cost_summary
from runtime.engine import RunResult
from runtime.events import Event
from runtime.flow import Flow, Problem, parse_flow

from ..control.run_controller import RunController
from ..control.subflow_run import RunMap
from ..look.settings import settings
from ..panels.inspector import Inspector
from ..panels.inspector.common import COLORS, failed_calls, fmt_duration, run_outcome
from ..panels.inspector.dock import InspectorDock
from ..panels.inspector.inspector import TAB_AGENT, TAB_DEBUG, TAB_PROBLEMS
from ..panels.inspector.staleness import RunSnapshot
from ..panels.inspector.tools_tab import status_text
from .mcp_dialog import serve_action_for
from .subflow_view import SubflowBadges

log = logging.getLogger(__name__)

TRACE_KEY = "run/record_every_message"


def _settings() -> QSettings:
    return settings()


#: The history files whose cut-off runs this process has marked: once each,
#: at the first window's start (a second window, e.g. one showing a queued
#: run, must not mark the first one's run in progress).
_MARKED: set[str] = set()


def open_history() -> Any:
    """The run history, or None if the data dir cannot be written (then runs
    still work, they are just not kept)."""
    try:
        from runtime.history import History

        history = History()
        if str(history.path) not in _MARKED:
            _MARKED.add(str(history.path))
            history.mark_interrupted()
        return history
    except Exception:
        log.exception("run history is not available")
        return None


class RunSession(QObject):
    """Everything one window needs to run its document and show the run."""

    def __init__(self, window: Any, history: Any = None) -> None:
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.history = history if history is not None else open_history()
        registry = self.document.registry
        self.controller = RunController(registry=registry, history=self.history, parent=self)
        self.inspector = Inspector(registry=registry, history=self.history)
        self.inspector.set_flow(self.document.flow)
        self.inspector.show_validation(list(getattr(self.document, "problems", [])))
        self.dock = InspectorDock(window, window.inspector_dock, self.inspector, _settings)
        self._node_state: dict[str, tuple[str, int, str]] = {}
        #: Agent id -> its tool calls that failed or were refused in this run.
        self._failed: dict[str, int] = {}
        self._result: RunResult | None = None
        # The flow the current (or last) run ran, to tell what was edited
        # since; None once another flow is on screen.
        self.snapshot: RunSnapshot | None = None
        self._wire_map: dict[int, int] | None = None  # run's wire index -> index now
        # A run of a flow with subflow instances ran the flat flow: its wire
        # indexes and inner node paths, against the flow as written.
        self.run_map: RunMap | None = None
        self.subflows = SubflowBadges(self)
        self._run_on_screen = False  # the running flow is the one on screen
        # The canvas shows the live run's badges; False while it shows a
        # stored run's (History's Open): the live run's are kept, not drawn.
        self._paint = True
        self._stored_snapshot: RunSnapshot | None = None  # the stored run's, while shown

        # status bar
        self.status = QLabel("Ready")
        self.status.setContentsMargins(8, 0, 8, 0)
        status_bar = window.statusBar() if hasattr(window, "statusBar") else None
        if status_bar is not None:
            status_bar.addPermanentWidget(self.status)

        # actions
        self.run_action: QAction = window.run_action
        self.stop_action: QAction = window.stop_action
        for action in (self.run_action, self.stop_action):
            try:  # the editor's placeholders ("not available in this build")
                action.triggered.disconnect()
            except (RuntimeError, TypeError):
                pass
        self.run_action.triggered.connect(self.run)
        self.stop_action.triggered.connect(self.stop)
        self.record_action = QAction("Record Every Message", self)
        self.record_action.setCheckable(True)
        self.record_action.setToolTip("Keep each hop of each message: the timeline shows when "
                                      "every node ran and each wire keeps its last message. "
                                      "Turn off for flows that send very many messages.")
        self.record_action.setChecked(QSettings().value(TRACE_KEY, True, type=bool))
        self.record_action.toggled.connect(lambda on: QSettings().setValue(TRACE_KEY, on))
        self.try_action = QAction("Try as Tool…", self)
        self.try_action.setToolTip("Call the selected tool node the way an agent would, with "
                                   "arguments you type; no LLM involved")
        self.try_action.triggered.connect(self.try_selected_tool)
        self._add_menu_actions()

        # signals
        c = self.controller
        c.events.connect(self._on_events)
        c.state_changed.connect(self._on_state)
        c.run_started.connect(self._on_started)
        c.run_finished.connect(self._on_finished)
        c.refused.connect(self._on_refused)
        c.problems.connect(self.inspector.show_validation)
        c.tick.connect(self._on_tick)
        self.inspector.node_selected.connect(self._select_node)
        self.inspector.prompt_submitted.connect(self.send_prompt)
        self.inspector.shown_run_changed.connect(self._show_run_on_canvas)
        doc = self.document
        for sig in ("changed", "flow_reset"):
            if hasattr(doc, sig):
                getattr(doc, sig).connect(lambda *_: self.inspector.set_flow(doc.flow))
        doc.flow_reset.connect(self._on_flow_reset)
        doc.node_changed.connect(self._on_node_edited)
        doc.node_removed.connect(lambda node_id, _index: self._on_node_edited(node_id))
        doc.node_added.connect(self._on_node_added)
        doc.wire_added.connect(self._on_wires_edited)
        doc.wire_removed.connect(self._on_wires_edited)
        doc.settings_changed.connect(self._on_settings_edited)
        if hasattr(doc, "problems_changed"):
            doc.problems_changed.connect(self._on_document_problems)
        scene = getattr(window, "scene", None)
        if scene is not None and hasattr(scene, "selectionChanged"):
            scene.selectionChanged.connect(self._on_selection)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._on_state("idle")

    def _add_menu_actions(self) -> None:
        extra = getattr(self.window, "node_context_actions", None)
        if isinstance(extra, list):
            # the editor calls each with the node id and adds what comes back
            extra.append(self._try_action_for)
            extra.append(lambda node_id: serve_action_for(self, node_id))
        menu = self._menu_of(self.run_action)
        if menu is not None:
            menu.addSeparator()
            menu.addAction(self.record_action)
            menu.addAction(self.try_action)
        elif hasattr(self.window, "addAction"):
            self.window.addAction(self.try_action)

    def _menu_of(self, action: QAction) -> QMenu | None:
        bar = self.window.menuBar() if hasattr(self.window, "menuBar") else None
        if bar is None:
            return None
        for top in bar.actions():
            menu = top.menu()
            if menu is not None and action in menu.actions():
                return menu
        return None

    # -- commands -----------------------------------------------------------
    def run(self) -> bool:
        if self.controller.is_running:
            return False
        if self.inspector.viewing_stored:
            self.inspector.show_live()
        path = self.document.path
        return self.controller.run(self.document.flow, file=str(path) if path else "",
                                   trace=self.record_action.isChecked())

    def stop(self) -> None:
        self.controller.stop()

    def send_prompt(self, agent_id: str, text: str) -> None:
        if self.inspector.viewing_stored:
            self.inspector.show_live()
        path = self.document.path
        if self.controller.send_prompt(self.document.flow, agent_id, text,
                                       file=str(path) if path else ""):
            self.inspector.tabs.setCurrentIndex(TAB_AGENT)
            self.inspector.agent.select_agent(agent_id)

    def selected_node(self) -> str | None:
        scene = getattr(self.window, "scene", None)
        if scene is not None and hasattr(scene, "selected_node_ids"):
            ids = scene.selected_node_ids()
            return ids[0] if ids else None
        return None

    def _try_action_for(self, node_id: str) -> QAction | None:
        fnode = self.document.flow.node(node_id)
        spec = self.document.registry.spec(fnode.type) if fnode else None
        if spec is None or spec.tool is None:
            return None
        if hasattr(self.document.registry.get(spec.type), "tool_entries"):
            return None  # several tools (an MCP server's): the one-tool dialog does not fit
        action = QAction(f"Try as Tool ({spec.tool.name})…", self.window)
        action.triggered.connect(lambda: self.try_tool(node_id))
        return action

    def try_selected_tool(self) -> Any:
        node_id = self.selected_node()
        fnode = self.document.flow.node(node_id) if node_id else None
        spec = self.document.registry.spec(fnode.type) if fnode else None
        if spec is None or spec.tool is None:
            QMessageBox.information(self.window, "Try as Tool",
                                    "Select a node that can serve as a tool (it has a tool "
                                    "badge), then try again.")
            return None
        return self.try_tool(node_id)  # type: ignore[arg-type]

    def try_tool(self, node_id: str) -> Any:
        from ..panels.try_tool import TryToolDialog

        try:
            dialog = TryToolDialog(self.document.flow.model_copy(deep=True), node_id,
                                   self.document.registry, self.window)
        except Exception as exc:  # a tool name the flow got wrong, say
            QMessageBox.warning(self.window, "Try as Tool", str(exc))
            return None
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def shutdown(self) -> None:
        if self.controller.is_running:
            self.controller.stop()

    # -- a run elsewhere (queue mode), shown as a local one ------------------
    def run_menu(self) -> QMenu | None:
        return self._menu_of(self.run_action)

    def watch_started(self, run_id: str) -> None:
        """A run of the flow on screen that runs in another process (a queue
        worker) is now the one shown: the canvas and the inspector are set
        for it as for a local run's start, and Stop is enabled."""
        self._on_started(run_id)
        self._on_state("running")

    def feed(self, events: list[Event]) -> None:
        """The shown run's events, as the controller hands a local run's
        (folded: run_controller.fold_events)."""
        self._on_events(events)

    def watch_finished(self, result: RunResult) -> None:
        self._on_state("idle")
        self._on_finished(result)

    def show_status(self, state: str, text: str) -> None:
        """The status bar's run line ("Running on the queue… 2.4 s")."""
        self._set_status(state, text)

    # -- controller signals -------------------------------------------------
    def _on_state(self, state: str) -> None:
        running = state != "idle"
        self.run_action.setEnabled(not running)
        self.stop_action.setEnabled(state == "running")
        self._update_try_enabled()

    def _update_try_enabled(self) -> None:
        node_id = self.selected_node()
        fnode = self.document.flow.node(node_id) if node_id else None
        spec = self.document.registry.spec(fnode.type) if fnode else None
        self.try_action.setEnabled(spec is not None and spec.tool is not None)

    def _on_started(self, run_id: str) -> None:
        self._node_state.clear()
        self._failed.clear()
        scene = getattr(self.window, "scene", None)
        if scene is not None and hasattr(scene, "clear_run_state") and self._paint:
            scene.clear_run_state()
        # Emitted from inside controller.run(), before any edit can land:
        # the document's flow is the one that runs.
        self.snapshot = RunSnapshot(self.document.flow.model_copy(deep=True))
        self._wire_map = None
        engine = self.controller.engine
        path = self.document.path
        self.run_map = RunMap.of(self.snapshot.flow, self.document.registry,
                                 str(path) if path else "",
                                 getattr(engine, "expansion", None)
                                 if engine is not None and engine.run_id == run_id else None)
        self.inspector.set_run_map(run_id, self.run_map)
        self.subflows.start()
        self._run_on_screen = True
        self.inspector.set_snapshot(self.snapshot)
        self._set_status("running", "Running… 0.0 s")
        self.dock.open(by_run=True)

    # -- the flow on screen changes under the run's results -------------------
    def _on_flow_reset(self) -> None:
        """New, Open, a recovery: the last run is about a flow that is no
        longer on screen. Its badges went with the old items; its results
        leave the inspector (History keeps them), and a run still going is
        stopped, as deploying another flow stops the old one in Node-RED."""
        self._run_on_screen = False
        self.snapshot = None
        self._wire_map = None
        self.run_map = None
        self._node_state.clear()
        self._failed.clear()
        if self.controller.is_running:
            self.controller.stop()
        self.inspector.clear_run()
        self.dock.fold_after_run()
        self.status.setText("Ready")
        self.status.setToolTip("")

    def _on_node_edited(self, node_id: str) -> None:
        if self.snapshot is not None and self.snapshot.node_edited(
                node_id, self.document.node(node_id)):
            self._show_staleness()
        stored = self._stored_snapshot
        if not self._paint and stored is not None and stored.node_edited(
                node_id, self.document.node(node_id)):
            self.window.scene.set_run_stale(stored.stale)  # the stored run's badges

    def _on_node_added(self, node_id: str) -> None:
        # Undoing a delete brings the node back: its badge comes back too.
        state = self._node_state.get(node_id)
        item = self.window.scene.item_for_node(node_id)
        if state is not None and item is not None and self._paint:
            item.set_run_state(*state)
        self._on_node_edited(node_id)

    def _on_wires_edited(self, *_: Any) -> None:
        self._wire_map = None
        if self.snapshot is None:
            return
        if self.snapshot.wires_edited(self.document.flow):
            self._show_staleness()
        else:
            self.inspector.messages.refresh()  # a selected wire may have a new index

    def _on_settings_edited(self) -> None:
        if self.snapshot is not None and self.snapshot.settings_edited(self.document.flow):
            self._show_staleness()

    def _show_staleness(self) -> None:
        stale = self.snapshot.stale if self.snapshot is not None else set()
        scene = getattr(self.window, "scene", None)
        if scene is not None and hasattr(scene, "set_run_stale") and self._paint:
            scene.set_run_stale(stale)
        self.inspector.update_staleness()

    def _wire_counts(self, counts: dict) -> dict[int, int]:
        """The run's wire counts (its stats', by flat index) by the index of
        the wire in the flow that ran, as written."""
        if self.run_map is not None:
            return self.run_map.user_wire_counts(counts)
        return {int(index): n for index, n in counts.items()}

    def _current_wire(self, run_index: int) -> int | None:
        """The index now of the wire ``run_index`` of the flow that ran (as
        written: see _wire_counts), or None if it is gone."""
        if self.snapshot is None:
            return run_index
        if self._wire_map is None:
            self._wire_map = self.snapshot.wire_map(self.document.flow)
        return self._wire_map.get(run_index)

    def _on_tick(self, ms: float) -> None:
        if self.controller.state == "stopping":
            self._set_status("stopping", f"Stopping… {ms / 1000:.1f} s")
        else:
            self._set_status("running", f"Running… {ms / 1000:.1f} s")

    def _on_finished(self, result: RunResult) -> None:
        self._result = result
        # nodes still shown running when the run ended did finish (or stop)
        for node_id, (state, count, text) in list(self._node_state.items()):
            if state == "running":
                self._badge(node_id, "done", count, text)
        self.subflows.flush()
        failed = getattr(result, "failed_tool_calls", 0)
        words, state = run_outcome(result.status, failed)
        text = f"{words} in {fmt_duration(result.duration_ms)}"
        if result.errors:
            text += f" · {result.errors} error{'s' if result.errors != 1 else ''}"
        offline = getattr(result, "offline_requests", 0) > 0 and result.cost_usd is None
        spent = cost_summary(result.usage, result.cost_usd, result.tool_cost_usd, offline)
        if spent:
            text += f" · {spent}"  # "$0.0110 · 4,300 tokens", "offline · 4,300 tokens"
        if result.reason == "failed" and result.message:
            text += f" · {result.message}"  # a bound ended it: "message storm at loop: ..."
        self._set_status(state, text)
        self.inspector.run_finished()
        if result.errors and self.inspector.tabs.currentIndex() == TAB_DEBUG \
                and not self.inspector.live.debug:
            self.inspector.tabs.setCurrentIndex(TAB_PROBLEMS)

    def _on_refused(self, problems: list[Problem]) -> None:
        self.inspector.show_refused(problems)
        n = len(problems)
        self._set_status("error", f"Not run: {n} problem{'s' if n != 1 else ''} to fix")
        self.dock.open(by_run=True)

    def _on_document_problems(self, problems: list[Problem]) -> None:
        if not self.controller.is_running:
            self.inspector.show_validation(problems)

    def _set_status(self, state: str, text: str) -> None:
        tint = COLORS.get(state, COLORS["muted"])
        self.status.setText(f"<span style='color:{tint}'>●</span> {text}")
        self.status.setToolTip(text)

    # -- events -> canvas ---------------------------------------------------
    def _on_events(self, events: list[Event]) -> None:
        if not self._run_on_screen:
            return  # the end of a run of a flow that was closed meanwhile
        self.inspector.apply_events(events)
        try:
            self._update_canvas(events)
            self.subflows.flush()
        except Exception:  # the canvas changed under a run (an edit): never crash
            log.debug("could not update run state on the canvas", exc_info=True)

    def _update_canvas(self, events: list[Event]) -> None:
        scene = getattr(self.window, "scene", None)
        if scene is None:
            return
        flow = self.document.flow
        for e in events:
            kind = e.type
            if kind == "stats":
                for node_id, counts in e.nodes.items():
                    prev = self._node_state.get(node_id, ("idle", 0, ""))
                    if prev[0] == "error" or counts.get("errors", 0):
                        state = "error"
                    elif counts.get("active", 0):
                        state = "running"
                    elif counts.get("in", 0) or prev[0] != "idle":
                        state = "done"
                    else:
                        continue
                    self._badge(node_id, state, counts.get("in", 0), prev[2])
                for index, count in self._wire_counts(e.wires).items():
                    now = self._current_wire(index)
                    item = scene.item_for_wire(now) if now is not None else None
                    if item is not None and self._paint:
                        item.set_activity(count)
            elif kind == "node.error":
                prev = self._node_state.get(e.node, ("idle", 0, ""))
                self._badge(e.node, "error", prev[1], e.message[:80])
            elif kind == "node.status":
                prev = self._node_state.get(e.node, ("idle", 0, ""))
                state = e.state if e.state != "idle" or not prev[1] else prev[0]
                if state == "idle" and e.text and self._is_source(flow, e.node):
                    # A trigger waiting ("watching invoices", "next: 12:00")
                    # is at work even though no message has come in.
                    state = "running"
                if prev[0] == "error" and state != "error":
                    state = "error"
                self._badge(e.node, state, prev[1], e.text)
            elif kind == "llm.request":
                prev = self._node_state.get(e.agent, ("idle", 0, ""))
                self._badge(e.agent, "running", prev[1], f"LLM turn {e.turn}")
            elif kind == "tool.call" and e.node:
                prev = self._node_state.get(e.node, ("idle", 0, ""))
                self._badge(e.node, "running", prev[1] + 1, e.tool)
                self._tool_wire_activity(scene, flow, e.agent, e.node)
            elif kind == "tool.result" and e.node:
                prev = self._node_state.get(e.node, ("idle", 0, ""))
                state = "done" if e.status == "success" else "error"
                self._badge(e.node, state, prev[1], e.status if e.status != "success" else "")
                if e.status in ("error", "refused"):
                    # The agent goes on, and may say all went well: its badge
                    # says a call failed under it.
                    self._failed[e.agent] = self._failed.get(e.agent, 0) + 1
                    self._badge(e.agent, *self._node_state.get(e.agent, ("done", 0, "")))
            elif kind == "tool.status" and e.node:
                self._tool_status(e)

    def _tool_status(self, e: Any) -> None:
        """A tool call's live status: its progress text on the node's badge
        ("page 2 of 5"), the Tools tab's line; the end is tool.result's."""
        self.inspector.tools.show_status(e)
        if e.phase in ("progress", "waiting_approval") or (e.phase == "running" and e.tracking_id):
            prev = self._node_state.get(e.node, ("idle", 0, ""))
            self._badge(e.node, "running", prev[1], status_text(e.phase, e.progress, e.text))

    def _is_source(self, flow: Any, node_id: str) -> bool:
        fnode = flow.node(node_id)
        spec = self.controller.registry.spec(fnode.type) if fnode is not None else None
        return bool(spec is not None and spec.source)

    def _badge(self, node_id: str, state: str, count: int, text: str) -> None:
        failed = self._failed.get(node_id, 0)
        if failed and state in ("done", "warning"):
            # An agent whose tool calls failed ends in the warning colour,
            # however well its answer says it went ("1 failed tool call":
            # the line under a card holds no more).
            state, text = "warning", failed_calls(failed)
        value = (state, count, text)
        if self._node_state.get(node_id) == value:
            return
        self._node_state[node_id] = value
        if self.run_map is not None:
            self.subflows.changed(node_id)
        item = self.window.scene.item_for_node(node_id)
        if item is not None and self._paint:
            item.set_run_state(state, count, text)

    def _tool_wire_activity(self, scene: Any, flow: Any, agent: str, node: str) -> None:
        if not self._paint:
            return
        # The run being drawn: the live one, or a stored one History opened.
        calls = sum(1 for c in self.inspector.ctx.model.tool_calls.values()
                    if c.agent == agent and c.node == node)
        for index, wire in enumerate(flow.wires):
            if wire.source[0] == agent and wire.target[0] == node:
                item = scene.item_for_wire(index)
                if item is not None:
                    item.set_activity(calls)

    def _show_run_on_canvas(self) -> None:
        """The inspector shows another run: the canvas's badges and wire
        counts become that run's. A stored run's are drawn from its events
        (as they were drawn live), on the flow as it is now: nodes edited
        since it ran are greyed, wires since deleted show nothing. Back on
        the live run, its badges come back as they are by now."""
        scene = getattr(self.window, "scene", None)
        if scene is None or not hasattr(scene, "clear_run_state"):
            return
        scene.clear_run_state()
        self._stored_snapshot = None
        if not self.inspector.viewing_stored:
            self._paint = True
            for node_id, state in self._node_state.items():
                item = scene.item_for_node(node_id)
                if item is not None:
                    item.set_run_state(*state)
            self.subflows.repaint()
            for index, count in self._wire_counts(self.inspector.live.wire_counts).items():
                now = self._current_wire(index)
                wire = scene.item_for_wire(now) if now is not None else None
                if wire is not None and count:
                    wire.set_activity(count)
            if self.snapshot is not None:
                self._show_staleness()
            return
        run_id = self.inspector.ctx.model.run_id
        if self.history is None or not run_id:
            self._paint = False
            return
        live = (self._node_state, self._failed, self.snapshot, self._wire_map, self.run_map)
        self._node_state, self._failed, self._wire_map = {}, {}, None
        kept = self.history.flow_of(run_id)
        try:
            ran = parse_flow(kept) if kept else Flow()
        except Exception:  # a flow this registry cannot read: its wires are not drawn
            ran = Flow()
        self.run_map = self.inspector.ctx.run_map
        self.snapshot = self._stored_snapshot = RunSnapshot(ran)
        self.snapshot.recompute(self.document.flow)
        self._paint = True
        try:
            self._update_canvas(self.history.events(run_id))
            for node_id, (state, count, text) in list(self._node_state.items()):
                if state == "running":  # it ended when the run did
                    self._badge(node_id, "done", count, text)
            self.subflows.flush(all_tabs=True)
            scene.set_run_stale(self.snapshot.stale)
        except Exception:  # the canvas changed under it: never crash
            log.debug("could not draw the stored run on the canvas", exc_info=True)
        finally:
            self._node_state, self._failed, self.snapshot, self._wire_map, self.run_map = live
            self._paint = False

    # -- selection ----------------------------------------------------------
    def _select_node(self, node_id: str) -> None:
        """A node the inspector names: selected on the canvas; one inside a
        subflow instance selects the instance, and the inspector shows the
        inner node's messages."""
        shown = node_id
        if self.document.flow.node(node_id) is None:
            node_id = self.inspector.ctx.instance_of(node_id) or ""
            if self.document.flow.node(node_id) is None:
                return
        select = getattr(self.window, "select_node", None)
        if select is not None:
            select(node_id)
        self.inspector.select_node(shown)

    def _on_selection(self) -> None:
        scene = self.window.scene
        try:
            nodes = scene.selected_node_ids() if hasattr(scene, "selected_node_ids") else []
            wires = scene.selected_wire_indices() if hasattr(scene, "selected_wire_indices") else []
        except RuntimeError:  # the scene is being torn down
            return
        if nodes:
            self.inspector.select_node(nodes[0])
        elif wires:
            self.inspector.select_wire(wires[0])
        self._update_try_enabled()


def install(window: Any) -> RunSession:
    session = RunSession(window)
    window.run_session = session
    from .pins import PinActions

    session.pins = PinActions(session)  # type: ignore[attr-defined]
    from .debugging import DebugSession

    session.debugging = DebugSession(session)  # type: ignore[attr-defined]
    from .rerun_actions import RerunActions

    session.reruns = RerunActions(session)  # type: ignore[attr-defined]
    from .queue_panel import QueueActions

    session.queue = QueueActions(session)  # type: ignore[attr-defined]
    return session

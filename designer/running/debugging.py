"""Breakpoints in the window: the gutter dots and the node and wire menus
that set them, Run > Continue / Step / Skip / Continue All / Pause All,
the inspector's Paused tab, and the runtime's Debugger attached to each
run that has a breakpoint (or gets one while it runs).

The engine runs on the GUI thread (qasync), so a held message is read and
let go directly: the Debugger calls back on each change, and the window
redraws its marks and the tab once per turn of the event loop however many
messages were held in it."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QInputDialog, QLineEdit, QMenu, QMessageBox

from runtime.debugger import Debugger

from ..control.breakpoints import BreakpointStore, check_condition, wire_index
from ..look import icons, theme

log = logging.getLogger(__name__)

CONDITION_PROMPT = ("Stop only the messages for which this is true, an expression over msg "
                    "(a tool call's arguments are msg.args):")
CONDITION_EXAMPLE = "msg.payload > 5"


class DebugSession(QObject):
    """Installed by the run integration (designer.running.run_integration.install)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.session = session
        self.window = session.window
        self.document = session.document
        self.controller = session.controller
        self.store = BreakpointStore(self.document, self)
        self.debugger: Debugger | None = None
        self._made: list[QAction] = []  # the last context menu's actions
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(self.refresh)
        self._had_held = False

        self._make_actions()
        self._add_to_window()
        from ..panels.inspector.paused_tab import PausedTab

        inspector = session.inspector
        self.tab = PausedTab(inspector.ctx)
        self.tab.add_buttons([self.continue_action, self.step_action, self.skip_action],
                             [self.continue_all_action, self.pause_all_action])
        self.tab_index = inspector.tabs.addTab(self.tab, "Paused")
        self.tab.node_selected.connect(session._select_node)
        self.tab.selection_changed.connect(self._update_actions)

        scene = getattr(self.window, "scene", None)
        self.marks = None
        if scene is not None and hasattr(scene, "node_items_near"):
            from ..canvas.breakpoint_marks import CanvasMarks, GutterFilter

            self.marks = CanvasMarks(scene)
            self.gutter = GutterFilter(scene, self.marks, self.toggle_node, self._wire_menu,
                                       self._gutter_menu, scene.message.emit,
                                       remove_wire=self.store.remove_wire)
            doc = self.document
            for sig in (doc.flow_reset, doc.node_added, doc.node_changed, doc.wire_added,
                        doc.wire_removed, doc.node_removed):
                sig.connect(lambda *_: self._later())

        from .subflow_breakpoints import TabMarks

        self.tab_marks = TabMarks(self)
        self.store.changed.connect(self._on_breakpoints)
        self.controller.run_started.connect(self._on_run_started)
        self.controller.run_finished.connect(self._on_run_finished)
        self.refresh()

    # -- actions --------------------------------------------------------------------
    def _make_actions(self) -> None:
        t = theme.current()

        def act(name: str, text: str, icon: str, shortcut: str, tip: str, slot: Any) -> QAction:
            a = QAction(icons.icon(icon, t.text, 18), text, self.window)
            a.setObjectName(name)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
                tip += f" ({shortcut})"
            a.setToolTip(tip)
            a.triggered.connect(slot)
            return a

        self.continue_action = act(
            "continue", "Continue", "debug-continue", "F8",
            "Let the selected paused message go on, as edited", lambda: self.resume("continue"))
        self.step_action = act(
            "step", "Step", "debug-step", "F10",
            "Let it go on and stop it again at the next node it reaches",
            lambda: self.resume("step"))
        self.skip_action = act(
            "skip", "Skip", "debug-skip", "Shift+F8",
            "Drop the selected paused message (a tool call: the agent is told it was skipped)",
            lambda: self.resume("skip"))
        self.continue_all_action = act(
            "continue_all", "Continue All", "debug-continue-all", "Ctrl+F8",
            "Let every paused message go on, and stop at no breakpoint for the rest of this run",
            self.continue_all)
        self.pause_all_action = act(
            "pause_all", "Pause All", "debug-pause", "",
            "When a breakpoint stops a message, pause the whole run: every other message "
            "waits at the next node it reaches until that one goes on", lambda: None)
        self.pause_all_action.setCheckable(True)
        self.pause_all_action.toggled.connect(self._set_pause_all)
        self.resume_actions = [self.continue_action, self.step_action, self.skip_action]

    def _add_to_window(self) -> None:
        menu = self.session._menu_of(self.session.stop_action)
        actions = [*self.resume_actions, self.continue_all_action, self.pause_all_action]
        toolbar = getattr(self.window, "toolbar", None)
        for bar in (menu, toolbar):
            if bar is None:
                continue
            after = self._after(bar.actions(), self.session.stop_action)
            if after is None:
                bar.addSeparator()
                bar.addActions(actions)
            else:
                bar.insertSeparator(after)
                bar.insertActions(after, actions)
        if menu is None and toolbar is None and hasattr(self.window, "addActions"):
            self.window.addActions(actions)  # the shortcuts still work
        extra = getattr(self.window, "node_context_actions", None)
        if isinstance(extra, list):
            extra += [self._node_action, self._node_condition_action]

    @staticmethod
    def _after(actions: list[QAction], anchor: QAction) -> QAction | None:
        """The action after ``anchor`` in a menu or toolbar (None: the end)."""
        if anchor not in actions:
            return None
        i = actions.index(anchor)
        return actions[i + 1] if i + 1 < len(actions) else None

    def _update_actions(self) -> None:
        held = self.tab.current()
        for a in self.resume_actions:
            a.setEnabled(held is not None)
        self.step_action.setEnabled(held is not None and not held.is_tool)
        self.continue_all_action.setEnabled(bool(self.debugger and self.debugger.held))

    # -- the node and wire menus ------------------------------------------------------
    def _fresh(self, text: str, slot: Any) -> QAction:
        action = QAction(text, self.window)
        action.triggered.connect(slot)
        self._made.append(action)
        return action

    def _forget_made(self) -> None:
        for action in self._made:
            action.deleteLater()
        self._made = []

    def _has_input(self, node_id: str) -> bool:
        fnode = self.document.flow.node(node_id)
        spec = self.document.registry.spec(fnode.type) if fnode is not None else None
        return bool(spec is not None and spec.inputs)

    def _node_action(self, node_id: str) -> QAction | None:
        self._forget_made()
        if not self._has_input(node_id):
            return None
        if self.store.for_node(node_id) is not None:
            return self._fresh("Remove Breakpoint", lambda: self.store.remove_node(node_id))
        return self._fresh("Add Breakpoint", lambda: self.toggle_node(node_id))

    def _node_condition_action(self, node_id: str) -> QAction | None:
        if not self._has_input(node_id):
            return None
        bp = self.store.for_node(node_id)
        text = "Edit Breakpoint Condition…" if bp is not None and bp.condition \
            else "Add Conditional Breakpoint…"
        return self._fresh(text, lambda: self.ask_node_condition(node_id))

    def _gutter_menu(self, node_id: str, global_pos: Any) -> None:
        menu = QMenu(self.window)
        for make in (self._node_action, self._node_condition_action):
            action = make(node_id)
            if action is not None:
                menu.addAction(action)
        menu.exec(global_pos)
        menu.deleteLater()

    def _wire_menu(self, index: int, global_pos: Any) -> None:
        self._forget_made()
        scene = self.window.scene
        scene.clearSelection()
        item = scene.item_for_wire(index)
        if item is not None:
            item.setSelected(True)
        menu = QMenu(self.window)
        bp = self.store.for_wire(index)
        if bp is None:
            menu.addAction(self._fresh("Add Breakpoint", lambda: self.store.set_wire(index)))
            menu.addAction(self._fresh("Add Conditional Breakpoint…",
                                       lambda: self.ask_wire_condition(index)))
        else:
            menu.addAction(self._fresh("Remove Breakpoint", lambda: self.store.remove_wire(index)))
            menu.addAction(self._fresh("Edit Breakpoint Condition…",
                                       lambda: self.ask_wire_condition(index)))
        delete = getattr(self.window, "delete_action", None)
        if delete is not None:
            menu.addSeparator()
            menu.addAction(delete)
        menu.exec(global_pos)
        menu.deleteLater()

    def toggle_node(self, node_id: str) -> None:
        if self._has_input(node_id):
            self.store.toggle_node(node_id)

    def ask_condition(self, title: str, current: str) -> str | None:
        """The condition the person types (checked; asked again while it does
        not compile), or None when they cancel."""
        text = current or CONDITION_EXAMPLE
        while True:
            text, ok = QInputDialog.getText(self.window, title, CONDITION_PROMPT,
                                            QLineEdit.EchoMode.Normal, text)
            if not ok:
                return None
            why = check_condition(text)
            if why is None:
                return text.strip()
            QMessageBox.warning(self.window, title, f"This condition cannot be used: {why}")

    def ask_node_condition(self, node_id: str) -> None:
        bp = self.store.for_node(node_id)
        name = self.session.inspector.ctx.name_of(node_id)
        condition = self.ask_condition(f"Breakpoint at {name}", bp.condition if bp else "")
        if condition is not None:
            self.store.set_node(node_id, condition)

    def ask_wire_condition(self, index: int) -> None:
        bp = self.store.for_wire(index)
        condition = self.ask_condition("Breakpoint on the wire", bp.condition if bp else "")
        if condition is not None:
            self.store.set_wire(index, condition)

    # -- runs -------------------------------------------------------------------------
    def _on_run_started(self, _run_id: str) -> None:
        self.debugger = None
        if len(self.store) or self.pause_all_action.isChecked():
            self._attach()
        self.refresh()

    def _attach(self) -> Debugger | None:
        engine = self.controller.engine
        if engine is None or not self.controller.is_running:
            return None
        if self.debugger is None or self.debugger.engine is not engine:
            self.debugger = Debugger(self._for_run(engine))
            self.debugger.pause_all = self.pause_all_action.isChecked()
            self.debugger.on_change.append(self._later)
            self.debugger.attach(engine)
        return self.debugger

    def _on_breakpoints(self) -> None:
        """The person set or removed a breakpoint: the run going on gets it
        at once (a debugger is attached if it had none)."""
        if self.controller.is_running:
            debugger = self.debugger or (self._attach() if len(self.store) else None)
            if debugger is not None:
                wanted = {bp.key: bp for bp in self._for_run(debugger.engine)}
                for key in list(debugger.breakpoints):
                    if key not in wanted:
                        debugger.remove(key)
                for key, bp in wanted.items():
                    have = debugger.breakpoints.get(key)
                    if have is None or have.condition != bp.condition:
                        debugger.add(bp)
        self.refresh()

    def _for_run(self, engine: Any) -> list[Any]:
        """The store's breakpoints for ``engine``'s run: of the flow as
        written, through the run's map when it ran it flat (subflows)."""
        run_map = getattr(self.session, "run_map", None)
        source = getattr(engine, "source_flow", engine.flow)
        return self.store.for_run(source if run_map is not None else engine.flow, run_map)

    def _set_pause_all(self, on: bool) -> None:
        if self.controller.is_running:
            debugger = self.debugger or (self._attach() if on else None)
            if debugger is not None:
                debugger.set_pause_all(on)

    def _on_run_finished(self, _result: Any) -> None:
        if self.debugger is not None:
            self.debugger.detach()
            self.debugger.on_change.clear()
        self.debugger = None
        self.refresh()

    # -- the person's decisions ---------------------------------------------------------
    def resume(self, action: str) -> bool:
        """Continue, step or skip the hold selected in the Paused tab, with
        the tab's edit; False (and the tab says why) when it cannot."""
        held = self.tab.current()
        if held is None or self.debugger is None:
            return False
        edited, why = (None, None) if action == "skip" else self.tab.edit()
        if why is None:
            why = self.debugger.resume(held.id, action, edited)
        if why is not None:
            self.tab.show_error(why)
            return False
        return True

    def continue_all(self) -> None:
        if self.debugger is not None:
            self.debugger.continue_all()

    # -- showing ----------------------------------------------------------------------------
    def _later(self) -> None:
        self._refresh_timer.start()

    def held(self) -> list[Any]:
        debugger = self.debugger
        if debugger is None:
            return []
        return sorted((h for h in debugger.held.values() if not h.future.done()),
                      key=lambda h: h.id)

    def refresh(self) -> None:
        held = self.held()
        self.tab.set_held(held)
        inspector = self.session.inspector
        inspector.tabs.setTabText(self.tab_index, f"Paused ({len(held)})" if held else "Paused")
        if held and not self._had_held:
            # The first message to stop: show it, as an approval card shows itself.
            self.session.dock.open(by_run=True)
            inspector.tabs.setCurrentIndex(self.tab_index)
        self._had_held = bool(held)
        self._update_actions()
        self._show_marks(held)

    def _show_marks(self, held: list[Any]) -> None:
        if self.marks is None:
            return
        flow = self.document.flow
        nodes, wires = {}, {}
        for bp in self.store.items():
            state = "conditional" if bp.condition else "set"
            if bp.wire is not None:
                index = wire_index(flow, bp.wire)
                if index is not None:
                    wires[index] = state
            elif flow.node(bp.node) is not None:
                nodes[bp.node] = state
        held_nodes: dict[str, int] = {}
        held_wires: dict[int, int] = {}
        run_flow = self.debugger.engine.flow if self.debugger is not None else None
        run_map = getattr(self.session, "run_map", None)
        if run_map is not None:
            run_flow = run_map.source
        for h in held:
            wire = h.wire if run_map is None or h.wire < 0 else run_map.user_wire(h.wire)
            if wire is not None and wire >= 0 and run_flow is not None and not h.is_tool:
                ends = run_flow.wires[wire]
                index = wire_index(flow, (tuple(ends.source), tuple(ends.target)))
                if index is not None:
                    held_wires[index] = held_wires.get(index, 0) + 1
                    continue
            node = h.node
            if run_map is not None and flow.node(node) is None:
                node = run_map.top_instance(node) or node  # held inside: on its instance
            held_nodes[node] = held_nodes.get(node, 0) + 1
        self.marks.show(nodes, wires, held_nodes, held_wires)
        self.tab_marks.show(held, run_map)


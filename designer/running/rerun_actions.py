"""Rerunning part of a run from the window: the node menu's Run from Here
and Run from Here with Changes…, and a tool call's Re-run This Call… in
the inspector's Tools and Agent tabs.

The run these start from is the one the inspector shows, live or opened
from History; runtime.rerun plans them (``plan_rerun``, as ``switchboard
runs rerun`` does) and the RunController runs them like the Run button,
so the inspector shows them live and History keeps them. What runs is the
flow on screen, edits included (the recorded messages, variables and tool
requests are the run's): change a node, then run it again from where it
got its input, as n8n's partial runs do. The terminal's rerun runs the flow
as it ran then, since there it has nothing else to go by.

A node that only ran as an agent's tool got no message of its own to
replay; its Run from Here repeats the last call the agent made to it."""

from __future__ import annotations

import html
import json
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from runtime.rerun import Rerun, RunsError, plan_rerun
from runtime.rundiff import changes

from ..look import theme
from ..panels.inspector.inspector import TAB_TOOLS
from ..panels.json_editor import INVALID, JsonEditor

FROM_HERE = "Run from Here"
FROM_HERE_CHANGED = "Run from Here with Changes…"
#: Paths an edit of the first replayed message may change in all of them.
MAX_EDITS = 200
#: Lines of JSON the rerun dialog shows at once (longer text scrolls).
EDITOR_LINES = 14


class RerunActions(QObject):
    """Installed by the run integration (designer.running.run_integration.install)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.session = session
        self.window = session.window
        self.document = session.document
        self.controller = session.controller
        self._made: list[QAction] = []  # the last node menu's actions
        self._pending: Rerun | None = None  # the rerun started last, until it ends
        self.last_error = ""
        extra = getattr(self.window, "node_context_actions", None)
        if isinstance(extra, list):
            extra += [self._from_here_action, self._from_here_changed_action]
        inspector = session.inspector
        inspector.tools.rerun_call_requested.connect(self.ask_rerun_call)
        inspector.agent.calls.rerun_call_requested.connect(self.ask_rerun_call)
        self.controller.run_finished.connect(self._on_finished)

    # -- what the run on screen kept --------------------------------------------------
    @property
    def model(self) -> Any:
        return self.session.inspector.ctx.model

    def last_call_of(self, node_id: str) -> Any:
        """The newest tool call the node answered in the run shown, or None."""
        calls = [c for c in self.model.tool_calls.values() if c.node == node_id]
        return calls[-1] if calls else None

    def why_not(self, node_id: str) -> str:
        """Why Run from Here cannot start at this node now; "" if it can."""
        model = self.model
        if self.controller.is_running:
            return "A run is going: stop it or let it end first"
        if not model.run_id:
            return "Run the flow first: Run from Here replays what reached the node then"
        if model.status == "running":
            return "The run shown has not ended yet"
        if self.session.history is None:
            return "Run history is not available (its folder cannot be written)"
        if model.replay_inputs.get(node_id) or self.last_call_of(node_id) is not None:
            return ""
        return (f"'{self._label(node_id)}' got no message in the run shown, so there is "
                "nothing to replay")

    # -- the node menu --------------------------------------------------------------
    def _fresh(self, text: str, slot: Any) -> QAction:
        action = QAction(text, self.window)
        action.triggered.connect(slot)
        self._made.append(action)
        return action

    def _from_here_action(self, node_id: str) -> QAction | None:
        for old in self._made:  # the actions of the menu before this one
            old.deleteLater()
        self._made = []
        if self.document.node(node_id) is None:
            return None
        action = self._fresh(FROM_HERE, lambda: self.run_from_here(node_id))
        self._explain(action, node_id)
        return action

    def _from_here_changed_action(self, node_id: str) -> QAction | None:
        if self.document.node(node_id) is None:
            return None
        action = self._fresh(FROM_HERE_CHANGED, lambda: self.ask_run_from_here(node_id))
        self._explain(action, node_id)
        return action

    def _explain(self, action: QAction, node_id: str) -> None:
        why = self.why_not(node_id)
        action.setEnabled(not why)
        n = self.model.replay_inputs.get(node_id, 0)
        call = self.last_call_of(node_id) if not n else None
        action.setToolTip(why or (
            f"Run this node and everything after it again with the {n} message"
            f"{'s' if n != 1 else ''} it got in the run shown; nothing before it runs" if n
            else f"Call {call.tool} on this node again as the agent last did (the LLM is not "
                 "asked)"))
        action.setStatusTip(action.toolTip())

    # -- commands ---------------------------------------------------------------------
    def run_from_here(self, node_id: str, first: dict | None = None) -> bool:
        """Rerun the node with what reached it in the run shown (``first``:
        the first message as the person edited it; the paths they changed
        are changed in every replayed message). A node that only ran as a
        tool repeats its last call (``first``: the edited arguments)."""
        self.last_error = ""
        why = self.why_not(node_id)
        if why:
            return self._fail(why)
        if not self.model.replay_inputs.get(node_id):
            call = self.last_call_of(node_id)
            ran = call.ran_args if isinstance(call.ran_args, dict) else None
            return self.rerun_call(call.caller_id, first if first is not None else ran)
        run_id = self.model.run_id
        try:
            sets: list[str] = []
            if first is not None:
                recorded = self._plan(run_id, from_node=node_id).messages[0]
                sets = [f"msg.{c['path']}={json.dumps(c['b'], ensure_ascii=False)}"
                        for c in changes(recorded, first, limit=MAX_EDITS) if "b" in c]
            plan = self._plan(run_id, from_node=node_id, sets=sets)
            if first is not None:
                plan.messages[0] = json.loads(json.dumps(first))  # deletions too
        except RunsError as exc:
            return self._fail(str(exc))
        return self._start(plan)

    def rerun_call(self, caller_id: str, args: dict | None = None) -> bool:
        """Repeat one tool call of the run shown through its agent's tool
        bridge, with the recorded arguments or ``args``."""
        self.last_error = ""
        model = self.model
        if self.controller.is_running:
            return self._fail("A run is going: stop it or let it end first")
        if model.status == "running" or not model.run_id:
            return self._fail("The run shown has not ended yet")
        if self.session.history is None:
            return self._fail("Run history is not available (its folder cannot be written)")
        try:
            plan = self._plan(model.run_id, call=caller_id,
                              args_json=json.dumps(args) if args is not None else None)
        except RunsError as exc:
            return self._fail(str(exc))
        for node in (plan.call["agent"], plan.call["node"]):
            if self.document.flow.node(node) is None:
                return self._fail(f"'{node}' is no longer in the flow: the call cannot be "
                                  "repeated")
        if args is not None:
            plan.args = dict(args)  # as typed: a key removed stays removed
        if not self._start(plan):
            return False
        self.session.inspector.tabs.setCurrentIndex(TAB_TOOLS)
        return True

    def _plan(self, run_id: str, **how: Any) -> Rerun:
        return plan_rerun(self.session.history, run_id, flow=self.document.flow,
                          registry=self.document.registry, **how)

    def _start(self, plan: Rerun) -> bool:
        session = self.session
        if session.inspector.viewing_stored:
            session.inspector.show_live()
        path = self.document.path
        started = self.controller.run(self.document.flow, file=str(path) if path else "",
                                      trace=session.record_action.isChecked(),
                                      prepare=plan.prepare)
        if not started:  # the flow has errors: refused, and listed in Problems
            return self._fail("The flow has problems to fix first (see the Problems tab)")
        self._pending = plan
        for note in plan.notes:
            self._say(note)
        return True

    def _on_finished(self, _result: Any) -> None:
        plan, self._pending = self._pending, None
        if plan is None or plan.engine is None:
            return
        history = self.session.inspector.history_tab
        history.select_run(plan.engine.run_id)  # Compare… then compares it with its origin
        outcome = plan.outcome
        if outcome is not None and outcome.status != "success":
            self._say(f"The repeated call was {outcome.status}: {outcome.error}")
        else:
            self._say(f"Rerun of {plan.run_id} done: History > Compare… shows what changed")

    # -- dialogs ----------------------------------------------------------------------
    def ask_run_from_here(self, node_id: str) -> RerunDialog | None:
        """The first replayed message (or the tool call's arguments) in an
        editor; Run starts the rerun with what the person changed."""
        why = self.why_not(node_id)
        if why:
            self._fail(why)
            return None
        if not self.model.replay_inputs.get(node_id):
            return self.ask_rerun_call(self.last_call_of(node_id).caller_id,
                                       f"Run from Here: {self._label(node_id)}")
        try:
            plan = self._plan(self.model.run_id, from_node=node_id)
        except RunsError as exc:
            self._fail(str(exc))
            return None
        n = len(plan.messages)
        label = self._label(node_id)
        more = (f" What you change here is changed in all {n} of them (a field you delete is "
                "deleted from this first one only).") if n > 1 else ""
        intro = (f"Runs <b>{_esc(label)}</b> and everything after it with the "
                 f"{'message' if n == 1 else f'{n} messages'} it got in run {plan.run_id}; "
                 f"nothing before it runs.{more} The flow runs as it is on the canvas now.")
        return self._open(RerunDialog(f"Run from Here: {label}", intro, plan.messages[0],
                                      lambda value: self.run_from_here(node_id, value)))

    def ask_rerun_call(self, caller_id: str, title: str = "") -> RerunDialog | None:
        call = self.model.tool_calls.get(caller_id)
        if call is None:
            return None
        args: Any = call.ran_args
        if not isinstance(args, dict):
            args = {}
            note = (" Its arguments were not recorded whole (too large, or not a JSON object): "
                    "type them.")
        elif args is not call.args:
            note = " These are the arguments as a person edited them before the call ran."
        else:
            note = ""
        intro = (f"Calls <b>{_esc(call.tool)}</b> on <b>{_esc(self._label(call.node))}</b> "
                 f"again as <b>{_esc(self._label(call.agent))}</b> did, through the agent's "
                 "tool bridge: the tool's schema, approval rules and scopes apply as they did "
                 f"for the LLM, which is not asked. The result shows in the Tools tab.{note}")
        return self._open(RerunDialog(title or f"Re-run Call: {call.tool}", intro, args,
                                      lambda value: self.rerun_call(caller_id, value)))

    def _open(self, dialog: RerunDialog) -> RerunDialog:
        dialog.setParent(self.window, dialog.windowFlags())
        dialog.why = lambda: self.last_error
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    # -- saying things ------------------------------------------------------------------
    def _label(self, node_id: str) -> str:
        return self.session.inspector.ctx.name_of(node_id)

    def _fail(self, why: str) -> bool:
        """False, with the reason where the person looks (the refusal of a
        flow with errors is the Problems tab's already)."""
        self.last_error = why
        if why:
            self._say(why)
        return False

    def _say(self, text: str) -> None:
        bar = self.window.statusBar() if hasattr(self.window, "statusBar") else None
        if bar is not None:
            bar.showMessage(text, 8000)


class RerunDialog(QDialog):
    """A JSON object to edit, and Run: the rerun starts and the dialog
    closes, or it stays open with the reason it did not start."""

    def __init__(self, title: str, intro: str, value: dict, run: Any,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("RerunDialog")
        self._run = run
        #: The reason the last Run did not start (the actions' last error).
        self.why: Any = lambda: ""
        text = QLabel(intro, self)
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.RichText)
        self.editor = JsonEditor(parent=self)
        # As tall as a message usually is, whatever its text: the editor
        # sizes itself to its lines, and growing with each one would move
        # the buttons under the pointer.
        self.editor.text_edit.min_lines = self.editor.text_edit.max_lines = EDITOR_LINES
        self.editor.set_value(value)
        self.error = QLabel(self)
        self.error.setObjectName("RerunError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {theme.current().error};")
        self.error.hide()
        self.editor.value_changed.connect(lambda _v: self.error.hide())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.run_button = buttons.addButton("Run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.run_button.setDefault(True)
        buttons.accepted.connect(self.start)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addWidget(text)
        layout.addWidget(self.editor)
        layout.addWidget(self.error)
        layout.addStretch(1)
        layout.addWidget(buttons)
        # As tall as its content at this width (the intro wraps).
        self.resize(660, layout.totalHeightForWidth(660))

    def set_value(self, value: Any) -> None:
        self.editor.set_value(value)

    def start(self) -> bool:
        value = self.editor.value()
        if value is INVALID or not isinstance(value, dict):
            return self._refuse(f"Not run: {self.editor.error}" if value is INVALID
                                else "Not run: expected a JSON object { … }")
        if not self._run(value):
            return self._refuse(f"Not run: {self.why() or 'see the Problems tab'}")
        self.accept()
        return True

    def _refuse(self, text: str) -> bool:
        self.error.setText(text)
        self.error.show()
        return False


def _esc(text: str) -> str:
    return html.escape(text)

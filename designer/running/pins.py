"""Pinned data in the window: the node menu's Pin Last Output, Pin Data… /
Edit Pinned Data… and Unpin, and Run > Use Pinned Data.

"Last output" is the newest message the node sent in the run the inspector
shows (its stats' last messages, as the engine recorded them: redacted,
and cut where long). A cut one, or one of a node with several output ports
(the record does not say which port it left on), opens the editor to be
checked instead of being pinned as is. Runs from the designer use pins
unless the Run menu's switch is off, as n8n's manual runs do.

In a subflow definition's tab the same actions pin the definition's node:
the pin is part of the definition, so every instance of it sends the
pinned data (the run's ``order.check_stock``, ``returns.check_stock``);
"last output" is that node's newest output in any instance of the run
shown. The window asks ``definition_node_actions`` (each called with the
tab's document and the node id) for a definition's nodes."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QSettings
from PySide6.QtGui import QAction

from runtime.flow.subflows import IN_TYPE, OUT_TYPE
from runtime.pins import recorded_to_pin, shortened

from ..panels.pin_dialog import check_pin, data_ports, node_label, open_pin_dialog, push_pin

USE_PINS_KEY = "run/use_pinned_data"


class PinActions(QObject):
    """Installed by the run integration (designer.running.run_integration.install)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.session = session
        self.document = session.document
        self.window = session.window
        self.use_action = QAction("Use Pinned Data", self)
        self.use_action.setCheckable(True)
        self.use_action.setToolTip("Pinned nodes send their pinned data instead of running "
                                   "(off: every node runs, as `switchboard run` does without "
                                   "--use-pins)")
        self.use_action.setChecked(QSettings().value(USE_PINS_KEY, True, type=bool))
        self.use_action.toggled.connect(self._set_use_pins)
        self._set_use_pins(self.use_action.isChecked())
        menu = session._menu_of(session.run_action)
        if menu is not None:
            menu.insertAction(session.try_action, self.use_action)
        self._made: list[QAction] = []  # the last node menu's actions, deleted with the next
        extra = getattr(self.window, "node_context_actions", None)
        if isinstance(extra, list):
            extra += [self._pin_last_action, self._edit_action, self._unpin_action]
        inner = getattr(self.window, "definition_node_actions", None)
        if isinstance(inner, list):
            inner += [lambda doc, node_id: self._pin_last_action(node_id, doc),
                      lambda doc, node_id: self._edit_action(node_id, doc),
                      lambda doc, node_id: self._unpin_action(node_id, doc)]

    def _set_use_pins(self, on: bool) -> None:
        self.session.controller.use_pins = on
        QSettings().setValue(USE_PINS_KEY, on)

    # -- what a run recorded -------------------------------------------------
    def last_output(self, node_id: str, doc: Any = None) -> Any:
        """The newest message the node sent in the run on screen, or None.
        A definition's node (``doc`` a definition tab's document): its
        newest in the first instance of it that sent one."""
        ctx = self.session.inspector.ctx
        model = ctx.model
        ids = [node_id]
        definition = getattr(doc, "definition", None) if doc is not None else None
        if definition is not None and doc is not self.document:
            run_map = ctx.run_map
            ids = run_map.paths_of(definition.name, node_id) if run_map is not None else []
        for flat in ids:
            outs = (model.last.get(flat) or {}).get("out") or []
            if outs:
                return outs[-1]
        return None

    # -- commands -----------------------------------------------------------
    def pin_last_output(self, node_id: str, doc: Any = None) -> bool:
        """Pin the node's last output; True if it was pinned at once (False:
        nothing to pin, or the editor was opened to check it first).
        ``doc``: a definition tab's document (None: the flow's)."""
        doc = doc or self.document
        recorded = self.last_output(node_id, doc)
        ports = data_ports(doc, node_id)
        if recorded is None or not ports:
            self._say(f"'{node_label(doc, node_id)}' sent nothing in the run shown: "
                      "run the flow first, or type the data with Pin Data…")
            return False
        port = "out" if "out" in ports else ports[0]
        pin = {port: [recorded_to_pin(recorded)]}
        note = ""
        if shortened(recorded):
            note = ("The run kept a shortened copy of this output (long texts and lists are "
                    "cut where runs record them): complete it before pinning.")
        elif len(ports) > 1:
            note = (f"The run does not record which port this output left on; it is listed "
                    f"under '{port}' here: move it if it left on another "
                    f"({', '.join(ports)}).")
        pin_ok, why = check_pin(doc, node_id, pin)
        if note or pin_ok is None:
            open_pin_dialog(doc, node_id, self.window, value=pin, note=note or why)
            return False
        push_pin(doc, node_id, pin_ok, "Pin last output")
        every = " in every instance" if doc is not self.document else ""
        self._say(f"Pinned the last output of '{node_label(doc, node_id)}': it does "
                  f"not run while pinned{every}")
        return True

    def edit(self, node_id: str, doc: Any = None) -> Any:
        return open_pin_dialog(doc or self.document, node_id, self.window)

    def unpin(self, node_id: str, doc: Any = None) -> None:
        doc = doc or self.document
        fnode = doc.node(node_id)
        if fnode is not None and fnode.pin is not None:
            push_pin(doc, node_id, None)

    def _say(self, text: str) -> None:
        bar = self.window.statusBar() if hasattr(self.window, "statusBar") else None
        if bar is not None:
            bar.showMessage(text, 6000)

    # -- the node menu ------------------------------------------------------
    def _action(self, text: str, slot: Any) -> QAction:
        action = QAction(text, self.window)
        action.triggered.connect(slot)
        self._made.append(action)
        return action

    def _pin_last_action(self, node_id: str, doc: Any = None) -> QAction | None:
        for old in self._made:  # the actions of the menu before this one
            old.deleteLater()
        self._made = []
        doc = doc or self.document
        if not _pinnable(doc, node_id):
            return None  # nothing leaves this node: nothing to pin
        action = self._action("Pin Last Output", lambda: self.pin_last_output(node_id, doc))
        action.setEnabled(self.last_output(node_id, doc) is not None)
        return action

    def _edit_action(self, node_id: str, doc: Any = None) -> QAction | None:
        doc = doc or self.document
        fnode = doc.node(node_id)
        if fnode is None or not _pinnable(doc, node_id):
            return None
        text = "Edit Pinned Data…" if fnode.pin is not None else "Pin Data…"
        return self._action(text, lambda: self.edit(node_id, doc))

    def _unpin_action(self, node_id: str, doc: Any = None) -> QAction | None:
        doc = doc or self.document
        fnode = doc.node(node_id)
        if fnode is None or fnode.pin is None:
            return None
        return self._action("Unpin", lambda: self.unpin(node_id, doc))


def _pinnable(doc: Any, node_id: str) -> bool:
    """A node whose output can be pinned: it has data ports, and is not a
    subflow definition's input or output (a run passes through those)."""
    fnode = doc.node(node_id)
    if fnode is not None and fnode.type in (IN_TYPE, OUT_TYPE):
        return False
    return bool(data_ports(doc, node_id))

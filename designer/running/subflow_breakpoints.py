"""Breakpoints in a subflow definition's tab (docs/subflows.md, "Running and
inspecting"): the same gutter as the flow's canvas, a click left of an
inner node's input sets a breakpoint that stops messages at that node in
every instance of the definition (BreakpointStore.set_inner); a message
held at ``order.check_stock`` shows its amber ring on ``check_stock`` in the
tab (and on the instance ``order`` on the flow's canvas). The definition's
input and output nodes take none: a run passes straight through them."""

from __future__ import annotations

from typing import Any

from runtime.flow.subflows import IN_TYPE, OUT_TYPE

WIRE_HINT = ("Breakpoints inside a subflow go on its nodes: click left of the input of the "
             "node the wire leads to")


class TabMarks:
    """The breakpoint marks and gutters of every definition tab."""

    def __init__(self, debugging: Any) -> None:
        self.debugging = debugging
        self._made: dict[int, tuple[Any, Any, Any]] = {}  # id(tab) -> (tab, marks, gutter)
        tabs = getattr(debugging.window, "tabs", None)
        signal = getattr(tabs, "current_changed", None)
        if signal is not None:
            signal.connect(self._on_tabs)

    def _tabs(self) -> list[Any]:
        tabs = getattr(self.debugging.window, "tabs", None)
        try:
            return list(tabs.all_tabs()) if tabs is not None else []
        except RuntimeError:
            return []

    def _on_tabs(self) -> None:
        self.install()
        self.debugging.refresh()

    def install(self) -> None:
        """Marks and a gutter on each tab's canvas that has none yet."""
        from ..canvas.breakpoint_marks import CanvasMarks, GutterFilter

        alive = {id(t) for t in self._tabs()}
        for key in [k for k in self._made if k not in alive]:
            del self._made[key]
        for tab in self._tabs():
            if id(tab) in self._made:
                continue
            scene = tab.scene
            marks = CanvasMarks(scene)
            gutter = GutterFilter(
                scene, marks, lambda node_id, t=tab: self.toggle(t, node_id),
                lambda _index, _pos, s=scene: s.message.emit(WIRE_HINT),
                lambda node_id, pos, t=tab: self._gutter_menu(t, node_id, pos),
                scene.message.emit)
            self._made[id(tab)] = (tab, marks, gutter)

    def takes_breakpoint(self, tab: Any, node_id: str) -> bool:
        fnode = tab.doc.node(node_id)
        if fnode is None or fnode.type in (IN_TYPE, OUT_TYPE):
            return False
        spec = tab.doc.registry.spec(fnode.type)
        return bool(spec is not None and spec.inputs)

    def toggle(self, tab: Any, node_id: str) -> None:
        if self.takes_breakpoint(tab, node_id):
            self.debugging.store.toggle_inner(tab.definition.name, node_id)

    def _gutter_menu(self, tab: Any, node_id: str, global_pos: Any) -> None:
        from PySide6.QtWidgets import QMenu

        if not self.takes_breakpoint(tab, node_id):
            return
        store = self.debugging.store
        name = tab.definition.name
        menu = QMenu(self.debugging.window)
        if store.for_inner(name, node_id) is not None:
            menu.addAction("Remove Breakpoint", lambda: store.remove_inner(name, node_id))
        else:
            menu.addAction("Add Breakpoint", lambda: store.set_inner(name, node_id))
        menu.addAction("Add Conditional Breakpoint…", lambda: self._ask(tab, node_id))
        menu.exec(global_pos)
        menu.deleteLater()

    def _ask(self, tab: Any, node_id: str) -> None:
        store = self.debugging.store
        bp = store.for_inner(tab.definition.name, node_id)
        fnode = tab.doc.node(node_id)
        label = (fnode.name if fnode is not None and fnode.name else node_id)
        condition = self.debugging.ask_condition(
            f"Breakpoint at {label} (every instance)", bp.condition if bp else "")
        if condition is not None:
            store.set_inner(tab.definition.name, node_id, condition)

    def show(self, held: list[Any], run_map: Any) -> None:
        """Each tab's dots, and the messages held at its nodes in any instance."""
        store = self.debugging.store
        self.install()
        for tab, marks, _gutter in list(self._made.values()):
            name = tab.definition.name
            try:
                flow = tab.doc.flow
            except RuntimeError:
                continue
            nodes = {bp.node: "conditional" if bp.condition else "set"
                     for bp in store.inner_items(name) if flow.node(bp.node) is not None}
            held_nodes: dict[str, int] = {}
            if run_map is not None:
                for h in held:
                    instance = run_map.expansion.owner.get(h.node)
                    inst = run_map.expansion.instances.get(instance) if instance else None
                    if inst is not None and inst.definition.name == name:
                        inner = h.node[len(instance) + 1:]
                        held_nodes[inner] = held_nodes.get(inner, 0) + 1
            try:
                marks.show(nodes, {}, held_nodes, {})
            except RuntimeError:  # the tab's scene went
                continue

"""Badges of a run with subflow instances (docs/subflows.md, "Running and
inspecting").

The run's nodes inside an instance are paths (``ship_express.carrier``);
the flow's canvas has only the instance. So:

- the instance's card shows the merge of its inner nodes' states
  (designer.control.subflow_run.RunMap.instance_badge): an error inside
  shows on it as ``Carrier: <message>``, and its tooltip lists every node
  inside that ran, by path;
- a definition's tab (designer/window/subflow_tabs.py) shows on each inner
  node its states over every instance of that definition in the run shown
  (counts added up; the tooltip says each instance's), drawn when a tab is
  opened or shown and after each batch of events.

The run session (run_integration.RunSession) keeps the states of every
node by flat id (``_node_state``); this only derives from them, once per
batch for the instances whose nodes changed.
"""

from __future__ import annotations

import html
import logging
from typing import Any

log = logging.getLogger(__name__)


class SubflowBadges:
    def __init__(self, session: Any) -> None:
        self.session = session
        self._dirty: set[str] = set()
        self._tabs_hooked = False

    # -- feeding --------------------------------------------------------------------
    def start(self) -> None:
        """A new run (its map set on the session): the tabs' badges go."""
        self._dirty.clear()
        self._hook_tabs()
        for tab in self._tabs():
            self._clear(tab.scene)

    def changed(self, node_id: str) -> None:
        run_map = self.session.run_map
        top = run_map.top_instance(node_id) if run_map is not None else None
        if top is not None:
            self._dirty.add(top)

    def flush(self, all_tabs: bool = False) -> None:
        """Redraw the instances whose nodes changed, then the open tabs."""
        run_map = self.session.run_map
        if run_map is None:
            self._dirty.clear()
            return
        dirty, self._dirty = self._dirty, set()
        counts = self._user_counts()
        for instance in dirty:
            self._draw_instance(instance, counts)
        if dirty or all_tabs:
            self.paint_tabs()

    def repaint(self) -> None:
        """The live run's badges drawn again (back from a stored run)."""
        run_map = self.session.run_map
        if run_map is None:
            return
        counts = self._user_counts()
        for instance in run_map.inside:
            self._draw_instance(instance, counts)
        self.paint_tabs()

    # -- the instance on the flow's canvas ---------------------------------------------
    def _user_counts(self) -> dict[int, int]:
        model = self.session.inspector.ctx.model
        run_map = self.session.run_map
        return run_map.user_wire_counts(model.wire_counts) if run_map is not None else {}

    def _draw_instance(self, instance: str, counts: dict[int, int]) -> None:
        s = self.session
        badge = s.run_map.instance_badge(instance, s._node_state, counts, self._name)
        if badge is None:
            return
        s._badge(instance, badge.state, badge.count, badge.text)
        item = s.window.scene.item_for_node(instance)
        if item is not None and s._paint and hasattr(item, "set_run_detail"):
            item.set_run_detail(self._detail(badge.detail))

    def _name(self, node_id: str) -> str:
        return self.session.inspector.ctx.name_of(node_id)

    @staticmethod
    def _detail(lines: list[str]) -> str:
        if not lines:
            return ""
        shown = lines[:12]
        more = f"<br>… and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
        return "Inside this run:<br>" + "<br>".join(html.escape(x) for x in shown) + more

    # -- the definitions' tabs ----------------------------------------------------------
    def _tabs(self) -> list[Any]:
        tabs = getattr(self.session.window, "tabs", None)
        all_tabs = getattr(tabs, "all_tabs", None)
        try:
            return list(all_tabs()) if all_tabs is not None else []
        except RuntimeError:  # the window is going
            return []

    def _hook_tabs(self) -> None:
        """Draw a tab's badges when it is opened or shown."""
        if self._tabs_hooked:
            return
        tabs = getattr(self.session.window, "tabs", None)
        signal = getattr(tabs, "current_changed", None)
        if signal is not None:
            signal.connect(self.paint_tabs)
            self._tabs_hooked = True

    @staticmethod
    def _clear(scene: Any) -> None:
        if hasattr(scene, "clear_run_state"):
            scene.clear_run_state()

    def paint_tabs(self) -> None:
        s = self.session
        run_map = s.run_map
        if not s._paint:
            return
        for tab in self._tabs():
            try:
                self._paint_tab(tab, run_map)
            except RuntimeError:  # a tab going away
                continue

    def _paint_tab(self, tab: Any, run_map: Any) -> None:
        scene = tab.scene
        ids = [n.id for n in tab.doc.flow.nodes]
        badges = run_map.definition_badges(tab.definition.name, ids, self.session._node_state,
                                           self._name) if run_map is not None else {}
        for node_id in ids:
            item = scene.item_for_node(node_id)
            if item is None:
                continue
            badge = badges.get(node_id)
            if badge is None:
                if getattr(item, "run_state", "idle") != "idle":
                    item.set_run_state("idle")
                continue
            item.set_run_state(badge.state, badge.count, badge.text)
            if hasattr(item, "set_run_detail"):
                item.set_run_detail(self._detail(badge.detail))

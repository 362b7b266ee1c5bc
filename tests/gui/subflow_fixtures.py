"""What the subflow GUI tests share: the real node registry (the subflow
nodes and the core ones) and a node's place on a view to click."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication

from runtime.registry import Registry


@pytest.fixture
def registry() -> Registry:
    return Registry.default()


def center(view, scene, node_id: str) -> QPoint:
    """Where node ``node_id`` is on ``view`` (scrolled into view first)."""
    item = scene.item_for_node(node_id)
    assert item is not None, node_id
    view.centerOn(item)
    QApplication.processEvents()
    return view.mapFromScene(item.sceneBoundingRect().center())

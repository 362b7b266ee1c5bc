"""Side panels of the designer: palette, properties, inspector.

Imported lazily, so that ``designer.panels.inspector`` does not pay for the
properties form (and the other way round)."""

from __future__ import annotations

from typing import Any

__all__ = ["PropertiesPanel"]


def __getattr__(name: str) -> Any:
    if name == "PropertiesPanel":
        from .properties import PropertiesPanel

        return PropertiesPanel
    raise AttributeError(name)

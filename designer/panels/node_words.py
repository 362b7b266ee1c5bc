"""Words about a node that more than one panel shows (a shared module of
the panels: the palette and the properties form both say a node runs in a
plugin, without importing each other)."""

from __future__ import annotations


def plugin_note(spec) -> str:
    """The sentence that says a node runs out of process, or ""."""
    return f"Runs in its own process: plugin '{spec.plugin}'" if spec.plugin else ""

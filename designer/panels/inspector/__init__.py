"""The run inspector (bottom dock): Debug, Messages, Tools, Timeline, Agent,
Problems and History tabs, all fed by runtime events."""

from .context import InspectorContext
from .inspector import Inspector
from .model import RunModel

__all__ = ["Inspector", "InspectorContext", "RunModel"]

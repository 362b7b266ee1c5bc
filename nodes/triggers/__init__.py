"""Triggers: nodes that start a flow by themselves and keep its run serving
until it is stopped. ``trigger.schedule`` fires on a cron expression or an
interval; ``trigger.file`` fires when files in a folder are added, changed or
deleted. Their libraries (croniter, watchfiles) are imported when a run or a
check needs them, not when the palette lists the nodes."""

from .file import FileWatch
from .schedule import Schedule

__all__ = ["FileWatch", "Schedule"]

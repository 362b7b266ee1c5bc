"""Core nodes, Node-RED-like: inject, debug, change, switch, template, delay, catch."""

from . import flow_control, inject_debug, transform  # noqa: F401

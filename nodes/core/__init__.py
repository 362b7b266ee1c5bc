"""Core nodes, Node-RED-like: inject, debug, change, switch, template, delay, catch,
python, join, rate limit, loop, variables."""

from . import code, flow_control, inject_debug, sequence, transform, variables  # noqa: F401

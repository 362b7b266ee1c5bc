"""Core nodes, Node-RED-like: inject, debug, change, switch, template, delay, catch,
python, join, rate limit, loop, variables."""

from . import code, flow_control, inject_debug, placeholder, sequence, transform, variables  # noqa: F401

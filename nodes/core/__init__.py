"""Core nodes, Node-RED-like: inject, debug, change, switch, template, delay, catch,
python, join, rate limit, loop, variables."""

from . import (  # noqa: F401
    code,
    flow_control,
    inject_debug,
    placeholder,
    sequence,
    subflow_ports,
    transform,
    variables,
)

"""The engine: runs a flow (``runtime.engine.core``).

``runtime.engine`` is the public face of the package: import from here.
"""

from __future__ import annotations

from .core import (
    DRAIN_BATCH,
    MAX_CATCHES,
    MAX_DEPTH,
    MAX_IN_FLIGHT,
    STATUS_OF_REASON,
    Engine,
    RunResult,
    busy_node,
)
from .errors import error_text
from .node_runtime import (
    DEBUG_ITEMS,
    LAST_MESSAGES,
    SNAPSHOT_ITEMS,
    SNAPSHOT_LIMIT,
    NodeRuntime,
    WireRuntime,
)
from .params import (
    FLOW_DIR,
    WORKSPACE,
    expand_flow_dir,
    expand_workspace,
)
from .recording import (
    REPLAY_BYTES,
    REPLAY_CALLS,
    REPLAY_INPUTS,
    REPLAY_MESSAGE_BYTES,
    STATS_INTERVAL,
    flow_hash,
)
from .tool_mode import tool_response

__all__ = [
    "DEBUG_ITEMS",
    "DRAIN_BATCH",
    "FLOW_DIR",
    "LAST_MESSAGES",
    "MAX_CATCHES",
    "MAX_DEPTH",
    "MAX_IN_FLIGHT",
    "REPLAY_BYTES",
    "REPLAY_CALLS",
    "REPLAY_INPUTS",
    "REPLAY_MESSAGE_BYTES",
    "SNAPSHOT_ITEMS",
    "SNAPSHOT_LIMIT",
    "STATS_INTERVAL",
    "STATUS_OF_REASON",
    "WORKSPACE",
    "Engine",
    "NodeRuntime",
    "RunResult",
    "WireRuntime",
    "busy_node",
    "error_text",
    "expand_flow_dir",
    "expand_workspace",
    "flow_hash",
    "tool_response",
]

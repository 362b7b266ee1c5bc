"""The engine: runs a flow, passing messages from node to node.

Dispatch is direct. A node whose ``on_message`` is a plain function runs
inline in the sender's call (no queue, no task); a coroutine gets a task per
message so that slow I/O overlaps. Inline chains are bounded in depth: past
``MAX_DEPTH`` hops (or while a node already has deferred messages, to keep
its order) a message continues on the next turn of the event loop. The run
counts what is in flight and ends the moment the last message settles.

Per-message facts are counters on the node and wire runtimes, published as a
periodic ``stats`` event; only with tracing on does every hop become an event.

- ``core``: ``Engine``, one run: build, start, end, resources, ``RunResult``.
- ``dispatch``: the hot path, a message from node to node, and node errors.
- ``node_runtime``: the engine's side of a node and a wire (``NodeRuntime``).
- ``tool_mode``: a node run for an agent's tool call (``run_as_tool``).
- ``recording``: stats ticks and what a rerun needs (``run.replay``).
- ``params``: ``{flow_dir}`` and ``{workspace}`` in a node's params.
- ``errors``: what a user is told when a node raises.

``runtime.engine`` is the public face of the package: import from here.
"""

from __future__ import annotations

from .core import (
    MAX_IN_FLIGHT,
    STATUS_OF_REASON,
    Engine,
    RunResult,
    busy_node,
)
from .dispatch import DRAIN_BATCH, MAX_CATCHES, MAX_DEPTH
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

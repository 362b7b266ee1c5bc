"""An agent's tools: the schemas its LLM sees, and the bridge that turns
the LLM's tool calls into ``tool_request`` messages to the tool nodes.

- ``schema``: each tool's definition (``ToolDef``) and its validation: the
  JSON schema from the node's ``ai``-scoped params, the compiled check,
  refusal texts; ``agent_tools`` / ``agent_tool_specs``.
- ``bridge``: ``ToolBridge``, a call's way from the LLM to its node:
  checks, limits, approval, breakpoints, timeout, events.
- ``calls``: one call's state: on its way, waiting, its live status
  (``CallStatus``), what it came to (``ToolOutcome``).
- ``background``: background calls, ``task_status`` and ``task_cancel``.

``runtime.tools`` is the public face of the package: import from here.
"""

from __future__ import annotations

from ..flow import TOOL_NAME_RE
from .background import (
    MAX_BACKGROUND_TASKS,
    TASK_CANCEL,
    TASK_STATUS,
    _cancel_all,
)
from .bridge import (
    DEFAULT_TOOL_TIMEOUT,
    HANDOFF,
    MAX_HANDOFF_DOCUMENTS,
    MAX_TOOL_CALLS_PER_TURN,
    ToolBridge,
)
from .calls import (
    PROGRESS_INTERVAL,
    AgentCalls,
    CallStatus,
    ToolOutcome,
    _resume,
    new_caller_id,
)
from .schema import (
    AGENT_TOOL_SCHEMA,
    HANDOFF_SCHEMA,
    TRACKING_SCHEMA,
    ToolDef,
    agent_tool_specs,
    agent_tools,
    ai_params,
    build_offered_tools,
    build_tool,
    compile_check,
    flat_schema,
    function_spec,
    strict_compatible,
    tool_schema,
)

__all__ = [
    "AGENT_TOOL_SCHEMA",
    "DEFAULT_TOOL_TIMEOUT",
    "HANDOFF",
    "HANDOFF_SCHEMA",
    "MAX_BACKGROUND_TASKS",
    "MAX_HANDOFF_DOCUMENTS",
    "MAX_TOOL_CALLS_PER_TURN",
    "PROGRESS_INTERVAL",
    "TASK_CANCEL",
    "TASK_STATUS",
    "TOOL_NAME_RE",
    "TRACKING_SCHEMA",
    "AgentCalls",
    "CallStatus",
    "ToolBridge",
    "ToolDef",
    "ToolOutcome",
    "_cancel_all",
    "_resume",
    "agent_tool_specs",
    "agent_tools",
    "ai_params",
    "build_offered_tools",
    "build_tool",
    "compile_check",
    "flat_schema",
    "function_spec",
    "new_caller_id",
    "strict_compatible",
    "tool_schema",
]

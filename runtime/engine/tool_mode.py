"""Tool mode: one node run for an agent's tool call, its outcome turned
into a ``tool_response`` (``ToolMode`` is the part of ``Engine``,
``runtime.engine.core``, that does it; ``runtime.tools`` calls it).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..events import EventBus, NodeError
from ..message import (
    AGENT_NODE_ID,
    MESSAGE_TYPE,
    TOOL_CALLER_ID,
    TOOL_DATA,
    TOOL_ERROR,
    TOOL_NAME,
    TOOL_RESPONSE,
    TOOL_STATUS,
)
from ..node import NodeConfigError, run_in_thread
from .errors import _log_traceback, error_text
from .node_runtime import NodeRuntime


class ToolMode:
    """The Engine's tool mode (the engine inherits this method)."""

    # Set by Engine.__init__ and run().
    bus: EventBus
    nodes: dict[str, NodeRuntime]
    _record: bool
    _calls: dict[str, Any] | None

    # -- tool mode ----------------------------------------------------------
    async def run_as_tool(self, node_id: str, msg: dict) -> dict:
        """Run one node's ``on_message`` in tool mode on ``msg`` (a
        ``tool_request`` whose arguments were already validated) and turn the
        outcome into a ``tool_response``. Nothing flows on from the node.

        A plain-function node that declares ``blocking`` runs in a thread;
        any other plain function inline. An exception that is not a
        NodeConfigError reaches the response only as its type and a generic
        reason; its text goes to the ``node.error`` event."""
        rt = self.nodes[node_id]
        rt.n_in += 1
        if rt.budget > 0 and self._record:
            rt.record(rt.last_in, msg)
        if self._calls is not None:
            self._keep_call(msg)
        rt.active += 1
        msg.pop(TOOL_DATA, None)
        t0 = time.perf_counter()
        try:
            if rt.is_async:
                if rt.sem is not None:
                    async with rt.sem:
                        await rt.on_message(msg)
                else:
                    await rt.on_message(msg)
            elif rt.node.blocking:
                # In a thread, so that the caller's timeout can fire.
                await run_in_thread(rt.on_message, msg)
            else:
                rt.on_message(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            rt.errors += 1
            text = error_text(exc)
            _log_traceback("tool node %s raised", rt.id, exc)
            if self.bus.active:
                self.bus.publish(NodeError(node=rt.id, name=rt.node.name, message=text,
                                           msgid=msg.get("_msgid", ""), caught=True))
            if not isinstance(exc, NodeConfigError):
                # The LLM gets what a node author wrote for users; the raw
                # text of anything else (paths, host names) stays in the
                # node.error event and the inspector.
                text = (f"{type(exc).__name__}: the tool failed unexpectedly; details are in "
                        "the run's events")
            return tool_response(msg, error=text)
        finally:
            rt.active -= 1
            rt.busy += time.perf_counter() - t0
        data = msg.pop(TOOL_DATA, None) or {"status": "completed"}
        rt.n_out += 1
        response = tool_response(msg, data=data)
        if self._record:
            # What the node sent back is its "last out" in tool mode; a
            # tool call is rare enough to record every one.
            rt.record(rt.last_out, response)
        return response


def tool_response(request: dict, *, data: Any = None, error: str | None = None) -> dict:
    """The answer to a tool_request: the same message, retyped in place (the
    request is the call's own clone, and nobody reads it after the node)."""
    resp = request
    resp[MESSAGE_TYPE] = TOOL_RESPONSE
    if error is None:
        resp[TOOL_STATUS] = "success"
        resp[TOOL_DATA] = data
        resp.pop(TOOL_ERROR, None)
    else:
        resp[TOOL_STATUS] = "error"
        resp[TOOL_ERROR] = error
        resp.pop(TOOL_DATA, None)
    for key in (TOOL_CALLER_ID, AGENT_NODE_ID, TOOL_NAME):
        resp.setdefault(key, "")
    return resp

"""Typed run events and the bus that carries them.

Rare facts are events; per-message facts are counters published as a
periodic ``stats`` event (see engine). With nobody subscribed, publishing is
one attribute test, and callers check ``bus.active`` before building an
event so that not even the model is constructed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

log = logging.getLogger(__name__)


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    ts: float = Field(default_factory=time.time)
    run_id: str = ""


class RunStarted(Event):
    type: Literal["run.started"] = "run.started"
    flow: str = ""
    path: str = ""
    nodes: int = 0
    trace: bool = False


class RunFinished(Event):
    type: Literal["run.finished"] = "run.finished"
    # ok: everything settled; error: an uncaught node error; stopped: stop()
    # was called; timeout: the run's time limit ended it.
    status: Literal["ok", "error", "stopped", "timeout"] = "ok"
    duration_ms: float = 0.0
    errors: int = 0


class NodeStatus(Event):
    type: Literal["node.status"] = "node.status"
    node: str
    text: str = ""
    color: Literal["grey", "blue", "green", "yellow", "red", ""] = ""
    state: Literal["idle", "running", "done", "error"] = "idle"


class Debug(Event):
    type: Literal["debug"] = "debug"
    node: str
    name: str = ""
    value: Any = None
    msgid: str = ""


class NodeError(Event):
    type: Literal["node.error"] = "node.error"
    node: str
    name: str = ""
    message: str
    msgid: str = ""
    caught: bool = False


class ToolCall(Event):
    type: Literal["tool.call"] = "tool.call"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    args: Any = None  # exactly as the LLM sent them (parsed if it parsed, else the raw text)


class ToolResult(Event):
    type: Literal["tool.result"] = "tool.result"
    agent: str
    node: str = ""
    tool: str
    caller_id: str
    # refused: the arguments did not pass the schema, the node never ran.
    status: Literal["success", "error", "refused"]
    data: Any = None
    error: str = ""
    ms: float = 0.0


class LlmRequest(Event):
    type: Literal["llm.request"] = "llm.request"
    agent: str
    provider: str = ""
    model: str = ""
    turn: int = 0
    message_count: int = 0
    tools: list[str] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)


class LlmResponse(Event):
    type: Literal["llm.response"] = "llm.response"
    agent: str
    turn: int = 0
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    ms: float = 0.0


class Stats(Event):
    type: Literal["stats"] = "stats"
    # node id -> {"in": n, "out": n, "errors": n, "active": n}
    nodes: dict[str, dict[str, int]] = Field(default_factory=dict)
    # wire index (in the flow's wire list) -> messages carried
    wires: dict[str, int] = Field(default_factory=dict)
    # node id -> {"in": [msg, ...], "out": [msg, ...]} newest last
    last: dict[str, dict[str, list[Any]]] = Field(default_factory=dict)
    # wire index -> its last message
    last_wire: dict[str, Any] = Field(default_factory=dict)
    elapsed_ms: float = 0.0


class MessageSent(Event):
    type: Literal["message.sent"] = "message.sent"
    source: str
    port: str
    target: str
    wire: int = -1
    msg: Any = None


class Log(Event):
    type: Literal["log"] = "log"
    node: str = ""
    level: Literal["debug", "info", "warning", "error"] = "info"
    text: str = ""


AnyEvent = Annotated[
    RunStarted | RunFinished | NodeStatus | Debug | NodeError | ToolCall | ToolResult
    | LlmRequest | LlmResponse | Stats | MessageSent | Log,
    Field(discriminator="type"),
]
_adapter: TypeAdapter[Any] = TypeAdapter(AnyEvent)


def parse_event(data: str | bytes | dict) -> Event:
    """One JSON line (or dict) back into its typed event."""
    if isinstance(data, dict):
        return _adapter.validate_python(data)
    return _adapter.validate_json(data)


Subscriber = Callable[[Event], None]


class EventBus:
    """Synchronous fan-out of events to any number of subscribers.

    A subscriber that raises is logged and skipped: an inspector bug must
    never stop a run."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self.active = False
        self.run_id = ""

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)
        self.active = True

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)
            self.active = bool(self._subscribers)

        return unsubscribe

    def publish(self, event: Event) -> None:
        if not self.active:
            return
        if not event.run_id:
            event.run_id = self.run_id
        for fn in tuple(self._subscribers):
            try:
                fn(event)
            except Exception:
                log.exception("event subscriber %r failed on %s", fn, event.type)


class JsonlWriter:
    """Writes every event as one JSON object per line."""

    def __init__(self, path: str | Path) -> None:
        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def __call__(self, event: Event) -> None:
        self._fh.write(event.model_dump_json())
        self._fh.write("\n")

    def close(self) -> None:
        self._fh.close()


def read_jsonl(path: str | Path) -> list[Event]:
    with open(path, encoding="utf-8") as fh:
        return [parse_event(line) for line in fh if line.strip()]

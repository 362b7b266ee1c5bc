"""Where messages start and where they are looked at."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from typing import Any

from runtime.message import Message, deep_copy, get_path, new_msgid
from runtime.node import CUSTOM, DROP, Node, NodeConfigError, Param, node
from runtime.spec import Scope


class _AnyEnv:
    """An environment in which every variable is set: what check() reads an
    env payload against, so that only the name itself is judged."""

    def __contains__(self, name: object) -> bool:
        return True

    def __getitem__(self, name: str) -> str:
        return ""


#: What the payload text is read as, in Node-RED's words. An old flow that
#: names no type keeps its payload as it is: text stays text, any other JSON
#: value (a number, an object) is taken as JSON.
PAYLOAD_TYPES = ["string", "number", "boolean", "JSON", "timestamp", "env variable"]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables that usually hold a secret: an inject would copy it into every
# message, where debug output, run history and an LLM's prompt would show it.
_SECRET_ENV = re.compile(r"(^|_)(API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASS|PWD|"
                         r"CREDENTIALS?|PRIVATE|AUTH)($|_)|SECRET|TOKEN|PASSWORD|APIKEY")


def payload_type_of(params: dict) -> str:
    """The payload type an inject with these flow settings uses: the one it
    names, else "JSON" for a payload that is not text (flows made before
    there was a type), else "string"."""
    chosen = params.get("payload_type")
    if chosen is not None and chosen.scope is Scope.CUSTOM and chosen.value in PAYLOAD_TYPES:
        return chosen.value
    payload = params.get("payload")
    if payload is None or payload.scope is not Scope.CUSTOM or isinstance(payload.value, str):
        return "string"
    return "JSON"  # null included: an old flow's explicit null payload stays null


class PayloadError(ValueError):
    pass


def read_payload(kind: str, value: Any, environ: Any = os.environ) -> Any:
    """The payload of a message: ``value`` (the text the designer typed, or
    an old flow's JSON value) read as ``kind``. PayloadError says what is
    wrong in words for the designer's Problems list."""
    if kind == "timestamp":
        return int(time.time() * 1000)
    if kind == "string":
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if kind == "number":
        number: Any = value
        if isinstance(value, str):
            text = value.strip()
            try:
                number = int(text)
            except ValueError:
                try:
                    number = float(text)  # 3.5, 1e3, .5 - what a person types
                except ValueError:
                    number = None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise PayloadError(f"{_shown(value)} is not a number (e.g. 42 or 3.5)")
        if not math.isfinite(number):
            raise PayloadError(f"{_shown(value)} is not a finite number")
        return number
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text in ("true", "false"):
            return text == "true"
        raise PayloadError(f"{_shown(value)} is not true or false")
    if kind == "JSON":
        if not isinstance(value, str):
            return value  # already a JSON value (an old flow, or a file written by hand)
        if not value.strip():
            raise PayloadError("empty: JSON needs a value, e.g. {\"name\": \"Ada\"}")
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise PayloadError(f"not valid JSON (line {exc.lineno} column {exc.colno}: "
                               f"{exc.msg}); to send text, choose the string type") from None
        except RecursionError:
            raise PayloadError("JSON nested too deeply") from None
    if kind == "env variable":
        if not isinstance(value, str):
            raise PayloadError(f"{_shown(value)} is not the name of an environment variable")
        name = value.strip()
        problem = env_name_problem(name)
        if problem:
            raise PayloadError(problem)
        if name not in environ:
            raise PayloadError(f"environment variable {name} is not set")
        return environ[name]
    raise PayloadError(f"unknown payload type {kind!r} (one of {', '.join(PAYLOAD_TYPES)})")


def env_name_problem(name: str) -> str | None:
    if not name:
        return "give the name of an environment variable, e.g. HOME"
    if not _ENV_NAME.match(name):
        return f"{_shown(name)} is not the name of an environment variable (letters, digits, _)"
    if _SECRET_ENV.search(name.upper()):
        return (f"{name} looks like it holds a secret, and an inject would copy it into every "
                "message (debug output, run history, an LLM's prompt); let the node that needs "
                "it name it as a credential instead")
    return None


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(text if len(text) <= 40 else text[:39] + "…")


@node("core.inject", name="Inject", category="Core", icon="play", color="#5b8def",
      inputs=())
class Inject(Node):
    """Starts a flow: sends a message with a payload and topic, once or
    repeatedly. The payload is typed as text and read as its type says."""

    payload_type = Param(str, "How the payload is read. timestamp: the time in epoch "
                         "milliseconds; env variable: the value of the variable it names",
                         choices=PAYLOAD_TYPES, default="string", allow=CUSTOM)
    payload = Param("json", "e.g. hello, 42, true, {\"name\": \"Ada\"}, or a variable's name",
                    default="", allow=CUSTOM,
                    visible_if={"payload_type": [t for t in PAYLOAD_TYPES if t != "timestamp"]})
    topic = Param(str, "The topic of each message", default="", allow=CUSTOM)
    repeat_seconds = Param(float, "Seconds between messages; empty sends them back to back",
                           optional=True, allow=CUSTOM)
    count = Param(int, "How many messages to send (0 with a repeat: until stopped)",
                  default=1, allow=CUSTOM)

    @classmethod
    def check(cls, params):
        problems = []
        kind = payload_type_of(params)
        payload = params.get("payload")
        if payload is not None and payload.scope is Scope.CUSTOM and kind != "timestamp":
            try:
                # Against an environment where every variable is set: the run
                # may not have the designer's environment, so a variable that
                # is missing is for the run to report.
                read_payload(kind, payload.value, environ=_AnyEnv())
            except PayloadError as exc:
                problems.append(("payload", f"{kind} payload: {exc}"))
        elif payload is None and kind in ("number", "boolean", "JSON", "env variable"):
            problems.append(("payload", f"{kind} payload: "
                             + ("give the name of an environment variable, e.g. HOME"
                                if kind == "env variable" else "empty")))
        count = params.get("count")
        if count is not None and isinstance(count.value, int) and count.value < 0:
            problems.append(("count", "count must be 0 or more"))
        rep = params.get("repeat_seconds")
        if rep is not None and isinstance(rep.value, (int, float)) and rep.value is not None \
                and rep.value < 0:
            problems.append(("repeat_seconds", "repeat_seconds must not be negative"))
        return problems

    def __init__(self, id: str, name: str = "", params: dict | None = None,
                 outputs: dict | None = None, runtime: Any = None) -> None:
        super().__init__(id, name, params, outputs, runtime)
        settings = params or {}
        self._kind = payload_type_of(settings)
        chosen = settings.get("payload_type")
        # An expression may choose the type per message; a fixed one is known now.
        self._kind_fixed = chosen is None or chosen.scope is Scope.CUSTOM
        # (payload, topic) once read, when every message gets the same: the
        # type, payload and topic are no templates and the type reads neither
        # the clock nor the environment (which may change between messages).
        self._same: tuple[Any, Any] | None = None
        self._same_each = self._kind_fixed and self._kind not in ("timestamp", "env variable") \
            and all((settings.get(k) is None or settings[k].scope is not Scope.EXPRESSION)
                    for k in ("payload", "topic"))

    def make(self, i: int = 0) -> Message:
        same = self._same
        if same is not None:
            payload, topic = same
            if isinstance(payload, (dict, list)):
                payload = deep_copy(payload)  # each message its own
            return Message(_msgid=new_msgid(), payload=payload, topic=topic)
        kind = self._kind if self._kind_fixed else self.payload_type.get()
        if kind not in PAYLOAD_TYPES:
            raise NodeConfigError(f"payload_type: {kind!r} is not one of "
                                  f"{', '.join(PAYLOAD_TYPES)}")
        try:
            payload = read_payload(kind, self.payload.get())
        except PayloadError as exc:
            raise NodeConfigError(f"payload: {kind} payload: {exc}") from None
        topic = self.topic.get()
        if self._same_each:
            self._same = (payload, topic)  # read once: JSON is not parsed per message
        if isinstance(payload, (dict, list)):
            payload = deep_copy(payload)  # each message its own; str/number/bool are immutable
        return Message(_msgid=new_msgid(), payload=payload, topic=topic)

    async def generate(self) -> None:
        count = self.count.get()
        repeat = self.repeat_seconds.get()
        forever = count == 0 and repeat
        i = 0
        while forever or i < count:
            if i and repeat:
                await asyncio.sleep(repeat)
            self.send(self.make(i))
            i += 1
            if not repeat and i % 1000 == 0:
                await asyncio.sleep(0)  # let stop() and the GUI in on long bursts


@node("core.debug", name="Debug", category="Core", icon="bug", color="#7a869a", outputs=())
class DebugNode(Node):
    """Shows a value of each message in the debug output (the CLI prints it as
    a JSON line; the designer's inspector lists it)."""

    path = Param(str, "What to show: a message path, or 'msg' for the whole message",
                 default="payload", allow=CUSTOM)

    def on_message(self, msg):
        path = self.path.get() or "payload"
        self.debug(dict(msg) if path == "msg" else get_path(msg, path), msg)
        return DROP

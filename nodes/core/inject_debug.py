"""Where messages start and where they are looked at."""

from __future__ import annotations

import asyncio

from runtime.message import Message, deep_copy, get_path, new_msgid
from runtime.node import CUSTOM, DROP, Node, Param, node


@node("core.inject", name="Inject", category="Core", icon="play", color="#5b8def",
      inputs=())
class Inject(Node):
    """Starts a flow: sends a message with a payload and topic, once or
    repeatedly."""

    payload = Param("json", "The payload of each message", default="", allow=CUSTOM)
    topic = Param(str, "The topic of each message", default="", allow=CUSTOM)
    repeat_seconds = Param(float, "Seconds between messages; empty sends them back to back",
                           optional=True, allow=CUSTOM)
    count = Param(int, "How many messages to send (0 with a repeat: until stopped)",
                  default=1, allow=CUSTOM)

    @classmethod
    def check(cls, params):
        problems = []
        count = params.get("count")
        if count is not None and isinstance(count.value, int) and count.value < 0:
            problems.append(("count", "count must be 0 or more"))
        rep = params.get("repeat_seconds")
        if rep is not None and isinstance(rep.value, (int, float)) and rep.value is not None \
                and rep.value < 0:
            problems.append(("repeat_seconds", "repeat_seconds must not be negative"))
        return problems

    def make(self, i: int = 0) -> Message:
        payload = self.payload.get()
        if isinstance(payload, (dict, list)):
            payload = deep_copy(payload)  # each message its own; str/number/bool are immutable
        return Message(_msgid=new_msgid(), payload=payload, topic=self.topic.get())

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

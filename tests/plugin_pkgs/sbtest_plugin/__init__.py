"""A node package for the plugin tests, written with the ordinary node API:
served out of process by ``python -m runtime.plugin serve sbtest_plugin``."""

from __future__ import annotations

import asyncio
import json
import os

from runtime.node import AI, CUSTOM, DROP, MESSAGE, Node, NodeConfigError, Output, Param, Tool, node


@node("ptest.upper", name="Upper", category="Plugin test",
      tool=Tool("upper", "Upper-case a text"))
class Upper(Node):
    """Upper-cases a text."""

    text = Param(str, "The text", scope=MESSAGE, allow=AI | CUSTOM | MESSAGE, path="payload")
    suffix = Param(str, "Appended", default="")
    result = Output(str, "The upper-cased text")

    def on_message(self, msg):
        text, suffix = self.text.get(msg), self.suffix.get(msg)
        if os.environ.get("PTEST_CALLS"):  # what the plugin saw, for the tests to read
            with open(os.environ["PTEST_CALLS"], "a") as f:
                f.write(json.dumps({"text": text, "suffix": suffix, "msg": msg}) + "\n")
        self.result.set(msg, str(text).upper() + suffix)


@node("ptest.noop", name="No-op", category="Plugin test", tool=Tool("noop", "Do nothing"))
class Noop(Node):
    """Returns at once (the benchmark's node)."""

    def on_message(self, msg):
        return None


@node("ptest.sleep", name="Sleep", category="Plugin test",
      tool=Tool("sleep", "Wait, then answer"))
class Sleep(Node):
    """Waits, then answers with its pid (the fault tests kill it meanwhile)."""

    seconds = Param(float, "How long", scope=AI, allow=AI | CUSTOM | MESSAGE)
    pid = Output(int, "The plugin's process id")

    async def on_message(self, msg):
        self.show_status("sleeping", "blue", "running")
        await asyncio.sleep(float(self.seconds.get(msg, 0)))
        self.pid.set(msg, os.getpid())


@node("ptest.fail", name="Fail", category="Plugin test", tool=Tool("fail", "Always fails"))
class Fail(Node):
    """Raises: a config error (text for users) or an unexpected one."""

    kind = Param(str, "config or other", default="config", choices=["config", "other"])

    def on_message(self, msg):
        if self.kind.get(msg) == "config":
            raise NodeConfigError("param 'kind': this node always fails")
        raise ValueError("secret internals /home/someone/.cache")


@node("ptest.emit", name="Emit", category="Plugin test", outputs=("out", "extra"))
class Emit(Node):
    """Sends two more messages, debug, status and a log line, then drops."""

    secret = Param("secret", "A secret it is given", optional=True)

    def on_message(self, msg):
        self.send({"payload": "first"}, "extra")
        self.send({"payload": "second"}, "extra")
        self.debug({"seen": msg.get("payload")}, msg)
        self.show_status("emitted", "green")
        self.log("emit ran")
        s = self.secret.get(msg)
        if s:
            self.send({"payload": f"secret length {len(s)}"}, "extra")
        return DROP


@node("ptest.count", name="Count", category="Plugin test", outputs=("out",))
class Count(Node):
    """A source: sends n messages."""

    n = Param(int, "How many", default=3)

    async def generate(self):
        for i in range(self.n.get()):
            self.send({"payload": i})

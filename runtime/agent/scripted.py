"""A deterministic offline provider: plays turns written in the flow, so
examples, demos and tests run with no key and no network.

A script is a list of turns; turn *n* answers the agent's *n*-th request:

    [{"tool_calls": [{"name": "send_email",
                      "arguments": {"to": "john@example.com", "subject": "...", "body": "..."}}]},
     {"text": "Done: I told John his order shipped."}]

``arguments`` may be an object or JSON text (to play a model that sends bad
JSON). A turn may give ``usage``: {"input_tokens": n, "output_tokens": n}
and ``seconds``: how long its text takes to stream in, word by word (a
demo that shows an answer growing; at most MAX_TYPING_SECONDS). In a turn's
text, ``{prompt}`` is replaced by the prompt and ``{last_result}`` by the
last tool result the agent got (a background task's report counts). After
the last turn the agent gets an empty final answer."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from ..node import NodeConfigError
from .base import LlmReply, OnDelta, Provider, ToolCallRequest

#: How a background task's report starts (runtime.tools _Job.note).
BACKGROUND_NOTE = "[background task "

#: Pieces a scripted answer's text streams in (so the designer shows it grow offline).
STREAM_PIECES = 4
#: Longest a turn's ``seconds`` may make its text take.
MAX_TYPING_SECONDS = 30.0
TURN_KEYS = frozenset({"text", "tool_calls", "usage", "seconds"})


def script_problems(script: Any) -> list[str]:
    if script is None:
        return []
    if not isinstance(script, list):
        return ["the script must be a list of turns"]
    out = []
    for i, turn in enumerate(script):
        # "turn N" is written only for a problem: a script of thousands of
        # turns is checked as each run of it starts.
        if not isinstance(turn, dict) or not TURN_KEYS.issuperset(turn):
            out.append(f"turn {i + 1}: a turn is an object with text and/or tool_calls (and "
                       "usage, seconds)")
            continue
        seconds = turn.get("seconds", 0)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not 0 <= seconds <= MAX_TYPING_SECONDS:
            out.append(f"turn {i + 1}: seconds must be a number from 0 to "
                       f"{MAX_TYPING_SECONDS:g}")
        if "text" in turn and not isinstance(turn["text"], str):
            out.append(f"turn {i + 1}: text must be a string")
        calls = turn.get("tool_calls", [])
        if not isinstance(calls, list):
            out.append(f"turn {i + 1}: tool_calls must be a list")
            continue
        for j, c in enumerate(calls):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                out.append(f"turn {i + 1}, call {j + 1}: a call needs a name (and arguments)")
    return out


class ScriptedProvider(Provider):
    name = "scripted"
    #: Plays turns written in the flow: no request leaves the machine, so
    #: nothing is priced, whatever model it plays (runtime.cost).
    offline = True

    def __init__(self, *, script: Any = None, **_: Any) -> None:
        problems = script_problems(script)
        if problems:
            raise NodeConfigError("script: " + "; ".join(problems))
        self.script: list[dict[str, Any]] = list(script or [])

    async def complete(self, *, system, messages, tools, model, temperature, max_tokens, turn=0,
                       on_delta: OnDelta | None = None) -> LlmReply:
        # Stateless: the loop says which turn this is (the number of answers
        # so far), so one node can serve many messages at once.
        if turn >= len(self.script):
            return LlmReply()
        step = self.script[turn]
        calls = [ToolCallRequest(id=c.get("id") or f"call_{turn + 1}_{j + 1}", name=c["name"],
                                 arguments=c.get("arguments", {}))
                 for j, c in enumerate(step.get("tool_calls") or [])]
        text = step.get("text", "")
        if text and "{" in text:
            text = self._fill(text, messages)
        if on_delta is not None and text:
            seconds = float(step.get("seconds") or 0)
            if seconds:  # word by word over that time, as a model types
                pieces = re.findall(r"\S+\s*|\s+", text)
                for piece in pieces:
                    on_delta(piece)
                    await asyncio.sleep(seconds / len(pieces))
            else:
                size = -(-len(text) // STREAM_PIECES)
                for at in range(0, len(text), size):
                    on_delta(text[at:at + size])
                    await asyncio.sleep(0)  # let whoever watches see the pieces arrive
        usage = step.get("usage") or {}
        return LlmReply(text=text, tool_calls=calls,
                        usage={"input_tokens": int(usage.get("input_tokens", 0)),
                               "output_tokens": int(usage.get("output_tokens", 0))})

    @staticmethod
    def _fill(text: str, messages: list[dict[str, Any]]) -> str:
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        last = next((m["content"] for m in reversed(messages) if m["role"] == "tool"
                     or (m["role"] == "user" and str(m["content"]).startswith(BACKGROUND_NOTE))),
                    "")
        return text.replace("{prompt}", str(prompt)).replace("{last_result}", str(last))

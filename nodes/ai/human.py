"""Tools that are not functions: asking a person (``ai.ask_human``) and
thinking out loud (``ai.think``). Wired to an agent's ``tools`` port like
any tool node; neither sends anything on in RPA mode."""

from __future__ import annotations

import time
from typing import Any

from runtime.approval import people_of
from runtime.node import AI, CUSTOM, Node, NodeConfigError, Output, Param, Tool, node

MAX_QUESTION = 4000
MAX_CHOICES = 20


@node("ai.ask_human", name="Ask Human", category="AI", icon="user", color="#9b59b6",
      tool=Tool("ask_human", "Ask a person a question and wait for the answer. Use it when "
                "you need a decision or a fact only a person has; give choices when the "
                "answer is one of a few"))
class AskHuman(Node):
    """The agent asks a person: the designer shows the question in the chat
    panel, `switchboard run` asks on the terminal; the answer is the tool's
    result. A fixed answer (tests, unattended runs) answers at once."""

    question = Param(str, "The question for the person", scope=AI, allow=AI | CUSTOM,
                     multiline=True)
    choices = Param("json", "A few possible answers to pick from (a list of texts); empty: "
                    "free text", default=None, optional=True, allow=AI | CUSTOM)
    timeout_seconds = Param(float, "How long to wait for the answer", default=600.0,
                            allow=CUSTOM, group="advanced")
    fixed_answer = Param(str, "Answer every question with this, without asking (tests, "
                         "unattended runs); empty: ask", default="", allow=CUSTOM,
                         group="advanced")
    answer = Output(str, "What the person answered")
    by = Output(str, "Who answered: designer, terminal or fixed", path="answered_by")

    async def on_message(self, msg: Any) -> None:
        question = str(self.question.get(msg) or "").strip()
        if not question:
            raise NodeConfigError("question: ask something")
        if len(question) > MAX_QUESTION:
            raise NodeConfigError(f"question: over {MAX_QUESTION} characters")
        choices = self.choices.get(msg)
        if choices is not None:
            if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
                raise NodeConfigError("choices: a list of texts")
            if len(choices) > MAX_CHOICES:
                raise NodeConfigError(f"choices: at most {MAX_CHOICES}")
            choices = [c[:200] for c in choices] or None
        fixed = self.fixed_answer.get(msg)
        if fixed:
            self.answer.set(msg, fixed)
            self.by.set(msg, "fixed")
            return
        people = people_of(getattr(self._rt, "engine", None))
        timeout = float(self.timeout_seconds.get(msg) or 600)
        self.show_status("waiting for an answer", "yellow", "waiting")
        t0 = time.monotonic()
        try:
            reply = await people.ask(question, choices, timeout=timeout, node=self.id,
                                     agent=str(msg.get("__agent_node_id__", "")))
        finally:
            self.show_status("", "", "idle")
        if reply.answer is None:
            raise NodeConfigError(reply.reason or "no answer")
        if choices and reply.answer not in choices:
            raise NodeConfigError(f"the answer {reply.answer!r} is none of the choices")
        self.answer.set(msg, reply.answer)
        self.by.set(msg, reply.by)
        self.log(f"answered by {reply.by} after {time.monotonic() - t0:.1f} s", "debug")


@node("ai.think", name="Think", category="AI", icon="lightbulb", color="#9b59b6",
      tool=Tool("think", "Stop and think: write down your reasoning or your plan for the next "
                "steps. Nothing is done; the note is kept in the run's timeline"))
class Think(Node):
    """A tool that does nothing but keep the agent's note: the call shows in
    the timeline and is answered at once."""

    thought = Param(str, "Your reasoning or plan", scope=AI, allow=AI, multiline=True)
    noted = Output(str, "What was kept")

    def on_message(self, msg: Any) -> None:
        text = str(self.thought.get(msg) or "")[:10_000]
        self.log(f"note: {text}", "info")
        self.noted.set(msg, "noted")

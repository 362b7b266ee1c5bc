"""The designer's People: the person at the screen decides tool calls that
need approval, and answers an agent's questions (``ai.ask_human``).

The run is a task on the GUI thread (qasync), so a waiting call is an
asyncio future on that thread and a card is a widget resolving it: no lock,
no second thread. This module holds the waiting calls and questions and
says when one comes and goes; ``panels/inspector/approvals.py`` draws them.
A call nobody decides in time is rejected, as the runtime's People rejects
it, and its card goes; a Stop clears every card.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal

from runtime.approval import ApprovalRequest, Decision, People, Reply

BY = "designer"
_ids = itertools.count(1)


@dataclass(eq=False)
class PendingApproval:
    """A tool call waiting for the person's decision."""

    request: ApprovalRequest
    future: asyncio.Future
    deadline: float  # time.monotonic() when the policy rejects it
    id: int = field(default_factory=lambda: next(_ids))

    def seconds_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    @property
    def open(self) -> bool:
        return not self.future.done()

    def approve(self, args: dict | None = None) -> bool:
        """Run the call: as the agent asked, or with ``args`` (the person's edit)."""
        return self._settle(Decision(True, by=BY, args=args))

    def reject(self, reason: str = "") -> bool:
        return self._settle(Decision(False, by=BY, reason=reason.strip()
                                     or "the person at the designer rejected it"))

    def _settle(self, decision: Decision) -> bool:
        if self.future.done():
            return False
        self.future.set_result(decision)
        return True


@dataclass(eq=False)
class PendingQuestion:
    """An agent's question waiting for the person's answer."""

    question: str
    choices: list[str] | None
    node: str
    agent: str
    future: asyncio.Future
    deadline: float
    id: int = field(default_factory=lambda: next(_ids))

    def seconds_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    @property
    def open(self) -> bool:
        return not self.future.done()

    def answer(self, text: str) -> bool:
        text = text.strip()
        if not text or self.future.done():
            return False
        if self.choices and text not in self.choices:
            return False
        self.future.set_result(Reply(text[:10_000], by=BY))
        return True


class DesignerPeople(QObject, People):
    """``engine.people`` of every run the designer starts."""

    asked = Signal(object)  # a PendingApproval or PendingQuestion: show its card
    settled = Signal(object)  # that one is decided, timed out or cleared: its card goes

    def __init__(self, parent: QObject | None = None) -> None:
        QObject.__init__(self, parent)
        People.__init__(self)
        self._pending: list[PendingApproval | PendingQuestion] = []

    @property
    def pending(self) -> list[PendingApproval | PendingQuestion]:
        return list(self._pending)

    async def approve(self, request: ApprovalRequest) -> Decision:
        loop = asyncio.get_running_loop()
        pending = PendingApproval(request, loop.create_future(),
                                  time.monotonic() + request.timeout)
        try:
            return await self._wait(pending, request.timeout)
        except TimeoutError:
            # The same words as the runtime's People: the LLM and the
            # history read one story whoever was asked.
            return Decision(False, by="timeout",
                            reason=f"no decision within {request.timeout:g} s; not run")

    async def ask(self, question: str, choices: list[str] | None, *, timeout: float,
                  node: str = "", agent: str = "") -> Reply:
        loop = asyncio.get_running_loop()
        pending = PendingQuestion(question, list(choices) if choices else None, node, agent,
                                  loop.create_future(), time.monotonic() + timeout)
        try:
            return await self._wait(pending, timeout)
        except TimeoutError:
            return Reply(None, by="timeout", reason=f"no answer within {timeout:g} s")

    async def _wait(self, pending: PendingApproval | PendingQuestion, timeout: float):
        self._pending.append(pending)
        self.asked.emit(pending)
        try:
            return await asyncio.wait_for(pending.future, timeout)
        finally:
            # Decided, timed out, or the run was stopped (cancelled): the card goes.
            if not pending.future.done():
                pending.future.cancel()
            if pending in self._pending:  # else clear() has already said so
                self._pending.remove(pending)
                self.settled.emit(pending)

    def clear(self) -> None:
        """The run stops: nobody waits any more, every card goes."""
        for pending in list(self._pending):
            self._pending.remove(pending)
            if not pending.future.done():
                pending.future.cancel()
            self.settled.emit(pending)

"""Blocking work off the event loop: ``run_in_thread`` runs a call in a
daemon thread of its own that the awaiting task may stop waiting for (a
blocking node's on_message in tool mode, Node.run_blocking, a sandbox's
start); ``runs_here`` tells whether a loop is the one running the caller."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def runs_here(loop: Any) -> bool:
    """Whether ``loop`` is the event loop running the caller. A loop that
    says which thread runs it (asyncio's own, in run_forever: only one loop
    runs in a thread at a time) is checked by thread, since
    ``asyncio.get_running_loop()`` costs a getpid() system call in Python
    3.11 (per call to a plugin, per timed tool call); any other (one that
    does not say, or qasync's, running without run_forever) is compared
    with the running loop."""
    thread = getattr(loop, "_thread_id", None)
    if thread is not None:
        return thread == threading.get_ident()
    import asyncio

    return loop is asyncio.get_running_loop()


async def run_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new daemon thread; awaiting it can be cancelled (a
    tool timeout, the run stopping) though the thread cannot be: it runs on
    and its result is dropped. A daemon thread rather than an executor's
    worker, so that a call that never returns keeps neither the loop's
    shutdown nor the process's exit waiting for it."""
    import asyncio
    import contextvars

    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return  # cancelled meanwhile: the result is dropped
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def work() -> None:
        try:
            result = ctx.run(fn, *args)
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome: tuple[bool, Any] = (False, exc)
        except BaseException as exc:  # SystemExit in a thread: an error, not an exit
            outcome = (False, RuntimeError(f"{type(exc).__name__} in a blocking node"))
        else:
            outcome = (True, result)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for this any more

    threading.Thread(target=work, name="switchboard-blocking-tool", daemon=True).start()
    return await fut

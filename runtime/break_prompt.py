"""Headless breakpoints: ``switchboard run FLOW --break NODE[.port]
[--break-if EXPR]`` stops messages (and tool calls) there and asks on the
terminal what to do with each (runtime.debugger does the holding):

    show               the message (or the tool call's arguments) as JSON
    set PATH VALUE     set one dotted path; VALUE is JSON, else text
    continue, c        let it go on, as it is now
    step, s            let it go on, and stop at the next node it reaches
    skip               drop it (a tool call is answered as rejected)
    quit, q            stop the run (exit 130, as an interrupted run)

The prompt talks to the controlling terminal (``/dev/tty``), as ``--approve
ask`` does, so stdout stays the run's debug lines; with no terminal,
``--break`` is refused before the run starts. While the prompt waits, the
rest of the run goes on: a daemon thread (it never keeps the process alive)
reads the line and hands it to the run's event loop. It reads only while a
prompt waits, so between prompts the terminal is free for ``--approve ask``.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

HELP = "show | set PATH VALUE | continue (c) | step (s) | skip | quit (q)"


class _BreakOption(argparse.Action):
    """``--break`` and ``--break-if`` in the order given: a condition
    belongs to the ``--break`` before it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None):
        items = list(getattr(namespace, "breaks", None) or [])
        kind = "if" if option_string == "--break-if" else "at"
        if kind == "if" and not items:
            parser.error("--break-if: give it after the --break it is the condition of")
        items.append((kind, values))
        namespace.breaks = items


def add_break_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(breaks=[])
    parser.add_argument("--break", action=_BreakOption, dest="breaks", metavar="NODE[.PORT]",
                        help="stop each message that reaches NODE (or a tool call of it) and ask "
                             "on the terminal what to do: show, set PATH VALUE, continue, step, "
                             "skip, quit (repeatable; 'wire:N' breaks on a wire)")
    parser.add_argument("--break-if", action=_BreakOption, dest="breaks", metavar="EXPR",
                        help="only stop where EXPR, an expression over msg (msg.payload > 5; "
                             "a tool call's arguments are msg.args), is true: the condition "
                             "of the --break before it")


def breakpoints_from(items: list[tuple[str, str]], flow: Any, registry: Any) -> list[Any]:
    """The Breakpoints ``--break``/``--break-if`` name; BreakpointError
    (a ValueError) naming the option that is wrong."""
    from .debugger import BreakpointError, parse_target

    pairs: list[list[str]] = []
    for kind, value in items:
        if kind == "at":
            pairs.append([value, ""])
        elif pairs[-1][1]:
            raise BreakpointError(f"--break-if {value!r}: --break {pairs[-1][0]} has a "
                                  "condition already")
        else:
            pairs[-1][1] = value
    out = []
    for target, condition in pairs:
        try:
            out.append(parse_target(target, flow, registry, condition))
        except BreakpointError as exc:
            raise BreakpointError(f"--break {target}: {str(exc).partition(': ')[2]}") from None
    return out


def open_terminal(tty_path: str = "/dev/tty") -> int:
    """A file descriptor of the controlling terminal; BreakpointError when
    there is none (a pipe, CI, a service)."""
    from .debugger import BreakpointError

    no_tty = BreakpointError("--break needs a terminal to ask on, and this run has none; run "
                             "it from a terminal (the designer's breakpoints work anywhere)")
    try:
        fd = os.open(tty_path, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise no_tty from None
    if not os.isatty(fd):
        os.close(fd)
        raise no_tty
    return fd


class BreakPrompt:
    """Asks on the terminal about each held message, oldest first."""

    def __init__(self, debugger: Any, engine: Any, names: dict[str, str], fd: int) -> None:
        self.debugger, self.engine, self.names, self.fd = debugger, engine, names, fd
        self._pending: asyncio.Future | None = None  # the line being read
        self.wake: asyncio.Event | None = None
        self.task: asyncio.Task | None = None
        self.quit = False
        debugger.on_change.append(self._changed)

    # -- plumbing ---------------------------------------------------------------
    def _changed(self) -> None:
        """A message was held or let go (on the run's loop)."""
        if self.task is None:
            import asyncio  # here: the CLI's parser (and the designer's start) needs none

            self.wake = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self._serve())
        assert self.wake is not None
        self.wake.set()

    def _read_line(self, loop: asyncio.AbstractEventLoop, got: asyncio.Future) -> None:
        """One line from the terminal, in a daemon thread, only while the
        prompt waits for one: between prompts the terminal is free for
        --approve ask. None when the terminal goes away."""
        buf = b""
        while b"\n" not in buf:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
        line = buf.decode("utf-8", "replace").strip() if buf else None
        try:
            loop.call_soon_threadsafe(lambda: got.done() or got.set_result(line))
        except RuntimeError:  # the loop has closed: the run is over
            pass

    def _write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            pass

    # -- the conversation -------------------------------------------------------
    async def _serve(self) -> None:
        assert self.wake is not None
        while not self.quit:
            open_holds = [h for h in self.debugger.held.values() if not h.future.done()]
            if not open_holds:
                self.wake.clear()
                await self.wake.wait()
                continue
            await self._ask(min(open_holds, key=lambda h: h.id))

    def _who(self, node_id: str) -> str:
        name = self.names.get(node_id, "")
        return f"'{name}' ({node_id})" if name and name != node_id else f"'{node_id}'"

    def _header(self, held: Any) -> str:
        if held.is_tool:
            where = (f"before tool call '{held.tool}' of agent {self._who(held.agent)} to "
                     f"node {self._who(held.node)}; its arguments")
        elif held.wire >= 0:
            where = f"on wire {held.wire} into {self._who(held.node)}"
        else:
            where = f"at {self._who(held.node)} input {held.port}"
        why = {"step": " (step)", "paused": " (pause all)"}.get(held.reason, "")
        if held.condition:
            why += f" (if {held.condition})"
        waiting = len(self.debugger.held) - 1
        more = f"; {waiting} more waiting" if waiting > 0 else ""
        note = f"\nnote: {held.note}" if held.note else ""
        return f"\n--- stopped {where}{why}{more}{note}\n"

    def _show(self, held: Any) -> None:
        self._write(json.dumps(held.view(), ensure_ascii=False, indent=2, default=str) + "\n")

    async def _ask(self, held: Any) -> None:
        self._write(self._header(held))
        self._show(held)
        self._write(f"({HELP})\n")
        while held.id in self.debugger.held and not self.quit:
            self._write("break> ")
            line = await self._line(held)
            if line is _GONE:
                self._write("\n(it went on: the run ended or let it go)\n")
                return
            self._command(held, line)

    async def _line(self, held: Any) -> Any:
        """The next line typed, or _GONE when ``held`` is let go meanwhile
        (the run stopped); None at the end of the terminal."""
        import asyncio

        if self._pending is None:  # a line asked for before and not typed yet stays asked
            loop = asyncio.get_running_loop()
            self._pending = loop.create_future()
            threading.Thread(target=self._read_line, args=(loop, self._pending), daemon=True,
                             name="break prompt").start()
        got = self._pending
        await asyncio.wait({got, held.future}, return_when=asyncio.FIRST_COMPLETED)
        if not got.done():
            return _GONE
        self._pending = None
        return got.result()

    def _command(self, held: Any, line: str | None) -> None:
        if line is None:
            line = "quit"  # nobody is left to answer
        word, _, rest = line.partition(" ")
        word = word.lower()
        if not word:
            return
        if word in ("show", "p", "print"):
            self._show(held)
        elif word == "set":
            self._set(held, rest.strip())
        elif word in ("continue", "c", "step", "s", "skip"):
            action = {"c": "continue", "s": "step"}.get(word, word)
            why = self.debugger.resume(held.id, action)
            if why is not None:
                self._write(f"cannot {action}: {why}\n")
        elif word in ("quit", "q", "exit"):
            self.quit = True
            self._write("stopping the run\n")
            self.engine.stop("stopped at a breakpoint (quit)")
        elif word in ("help", "h", "?"):
            self._write(f"{HELP}\n")
        else:
            self._write(f"unknown command {word!r}: {HELP}\n")

    def _set(self, held: Any, rest: str) -> None:
        path, _, raw = rest.partition(" ")
        if not path or not raw.strip():
            self._write('set needs a path and a value, e.g. set payload.name "Ann"\n')
            return
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw.strip()
        try:
            held.set(path, value)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self._write(f"cannot set {path}: {exc}\n")
            return
        self._write(f"{path} = {json.dumps(held.get(path), ensure_ascii=False, default=str)}\n")


_GONE = object()


def prepare_breaks(items: list[tuple[str, str]], flow: Any, registry: Any = None,
                   tty_path: str = "/dev/tty") -> Any:
    """For ``switchboard run``: check ``--break``/``--break-if`` against
    ``flow`` and find the terminal, before the run starts (BreakpointError,
    a ValueError, naming what is wrong); then ``attach(engine, names)``
    gives the run its debugger and the prompt."""
    from .debugger import Debugger
    from .registry import Registry

    breakpoints = breakpoints_from(items, flow, registry or Registry.default())
    fd = open_terminal(tty_path)

    def attach(engine: Any, names: dict[str, str]) -> BreakPrompt:
        return BreakPrompt(Debugger(breakpoints).attach(engine), engine, names, fd)

    return attach

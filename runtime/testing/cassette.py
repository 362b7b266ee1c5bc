"""LLM record and replay for flow tests: ``FLOW.cassette.json`` beside
``FLOW.tests.json`` (format ``switchboard.cassette/1``) keeps, per case,
every request an agent sent and the answer it got. A recording run calls
the real model through the agent's provider and keeps what it said; a
replaying run answers from the cassette, offline and without a key, and
fails with "the conversation changed at turn N" and a diff when the flow
asks something the cassette does not hold (docs/testing.md).

Requests are kept masked (runtime.node.redact: no registered secret is
written) and keyed by a hash of the masked model, system text, messages
and tools, so that a key is the same on a machine with other secrets."""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

from runtime.agent.base import LlmReply, OnDelta, Provider, ToolCallRequest
from runtime.node import NodeConfigError, redact

from .cases import TestFileError

FORMAT = "switchboard.cassette/1"
#: Largest cassette file read or written.
MAX_CASSETTE_BYTES = 20 * 1024 * 1024
#: The engine resource a run's tape is shared under (nodes/ai asks for it).
RESOURCE = "testing.cassette"


def cassette_beside(tests_file: Path) -> Path:
    return tests_file.with_name(tests_file.name.removesuffix(".tests.json") + ".cassette.json")


def _mask(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask(v) for v in value]
    return value


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def request_key(request: dict[str, Any]) -> str:
    """The canonical hash of a (masked) request's model, system text,
    messages and tools."""
    keyed = {k: request.get(k) for k in ("model", "system", "messages", "tools")}
    text = json.dumps(keyed, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class Cassette:
    """The cassette file of one test file: case name -> interactions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cases: dict[str, list[dict[str, Any]]] = {}
        self.changed = False
        if not path.exists():
            return
        try:
            size = path.stat().st_size
            if size > MAX_CASSETTE_BYTES:
                raise TestFileError(f"{path}: {size} bytes, more than a cassette may hold "
                                    f"({MAX_CASSETTE_BYTES}); record fewer or shorter cases")
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TestFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise TestFileError(f"{path}: not JSON ({exc}); record it again with "
                                "--rerecord") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT \
                or not isinstance(data.get("cases"), dict) \
                or not all(isinstance(v, list) for v in data["cases"].values()):
            raise TestFileError(f"{path}: not a cassette (expected format {FORMAT} with "
                                "'cases': {name: [interactions]}); record it again with --rerecord")
        self.cases = data["cases"]

    def save(self) -> None:
        text = json.dumps({"format": FORMAT, "cases": self.cases}, ensure_ascii=False, indent=1,
                          sort_keys=True)
        size = len(text.encode("utf-8"))
        if size > MAX_CASSETTE_BYTES:
            raise TestFileError(f"{self.path}: the recording is {size} bytes, more than a "
                                f"cassette may hold ({MAX_CASSETTE_BYTES}); nothing was written")
        try:
            self.path.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise TestFileError(f"{self.path}: cannot be written "
                                f"({exc.strerror or exc})") from None

    def tape(self, case: str, record: bool) -> Tape:
        return Tape(self, case, record)


class Tape:
    """One case's run against the cassette: replays its interactions, or
    (``record``) records new ones through the real provider. ``problem``:
    (what went wrong, a diff) when replaying met a request not recorded."""

    def __init__(self, cassette: Cassette, case: str, record: bool) -> None:
        self.cassette = cassette
        self.case = case
        self.record = record
        self.recorded: list[dict[str, Any]] = list(cassette.cases.get(case, []))
        self.new: list[dict[str, Any]] = []
        self.used: set[int] = set()
        self.turns = 0
        self.problem: tuple[str, str] | None = None

    def provider(self, make: Any) -> CassetteProvider:
        """The agent's provider: ``make()`` makes the real one, only when
        recording (replay needs no key)."""
        return CassetteProvider(self, make)

    def keep(self) -> None:
        """After a recording run: the case's interactions into the cassette."""
        if self.record and self.new and self.problem is None:
            self.cassette.cases[self.case] = self.new
            self.cassette.changed = True

    def replay(self, request: dict[str, Any], key: str) -> LlmReply:
        self.turns += 1
        turn = self.turns
        for i, it in enumerate(self.recorded):
            if i not in self.used and it.get("key") == key:
                self.used.add(i)
                return _reply(it.get("reply") or {})
        if not self.recorded:
            text = (f"no LLM answers recorded for case '{self.case}' in {self.cassette.path}; "
                    "run 'switchboard test --record' once against the real model")
            self.problem = (text, "")
            raise NodeConfigError(text)
        if turn <= len(self.recorded):
            closest = self.recorded[turn - 1].get("request")
        else:
            want = _show(request)
            closest = max((it.get("request") for it in self.recorded),
                          key=lambda r: difflib.SequenceMatcher(None, want, _show(r)).ratio())
        diff = "\n".join(difflib.unified_diff(
            _show(closest).splitlines(), _show(request).splitlines(),
            f"recorded (turn {min(turn, len(self.recorded))})", f"now (turn {turn})",
            lineterm="", n=2))
        text = (f"the conversation changed at turn {turn}: the flow asked something "
                f"{self.cassette.path.name} does not hold for case '{self.case}' (run with "
                "--rerecord if the change is meant)")
        self.problem = (text, diff)
        raise NodeConfigError(f"{text}:\n{diff}")


def _reply(data: dict[str, Any]) -> LlmReply:
    calls = [ToolCallRequest(str(c.get("id", "")), str(c.get("name", "")), c.get("arguments"))
             for c in data.get("tool_calls") or []]
    usage = data.get("usage") or {"input_tokens": 0, "output_tokens": 0}
    return LlmReply(text=str(data.get("text") or ""), tool_calls=calls, usage=dict(usage))


class CassetteProvider(Provider):
    """A provider that records the real one's answers on the tape, or
    replays them from it."""

    name = "cassette"

    def __init__(self, tape: Tape, make: Any) -> None:
        self.tape = tape
        self._make = make
        self._real: Provider | None = None

    async def complete(self, *, system: str, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]], model: str, temperature: float | None,
                       max_tokens: int, turn: int = 0, on_delta: OnDelta | None = None) -> LlmReply:
        request = _mask({"model": model, "system": system, "messages": messages, "tools": tools,
                         "temperature": temperature, "max_tokens": max_tokens})
        key = request_key(request)
        if not self.tape.record:
            reply = self.tape.replay(request, key)
            if on_delta is not None and reply.text:
                on_delta(reply.text)
            return reply
        if self._real is None:
            self._real = self._make()
        reply = await self._real.complete(
            system=system, messages=messages, tools=tools, model=model, temperature=temperature,
            max_tokens=max_tokens, turn=turn, on_delta=on_delta)
        self.tape.new.append({"key": key, "request": request, "reply": _mask({
            "text": reply.text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in reply.tool_calls],
            "usage": reply.usage})})
        return reply

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()

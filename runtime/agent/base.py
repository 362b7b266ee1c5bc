"""What every provider shares: the neutral conversation, replies, errors and
retries."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..node import NodeConfigError, redact

#: Seconds before the first retry; doubled each time. Tests set it tiny.
RETRY_BASE_ENV = "SWITCHBOARD_RETRY_BASE"
DEFAULT_RETRY_BASE = 0.5
#: Longest backoff between two attempts when the server names no delay.
MAX_RETRY_DELAY = 30.0
#: Longest Retry-After honoured (the agent's max_retry_wait_seconds).
DEFAULT_MAX_RETRY_WAIT = 60.0
#: Seconds one LLM request may take (the agent's request_timeout_seconds).
DEFAULT_REQUEST_TIMEOUT = 120.0

# The neutral conversation the loop keeps (providers translate it):
#   {"role": "user", "content": str}
#   {"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}
#   {"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}


@dataclass(slots=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: Any  # text as the LLM sent it (OpenAI), or an object (Anthropic, scripted)


@dataclass
class LlmReply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})


def _count(obj: Any, name: str) -> int:
    n = getattr(obj, name, None) if not isinstance(obj, dict) else obj.get(name)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def openai_usage(u: Any) -> dict[str, int]:
    """Token usage of an OpenAI-compatible answer: prompt tokens, of which
    ``prompt_tokens_details.cached_tokens`` were read from the provider's
    prompt cache (priced at the cached rate), and completion tokens."""
    details = getattr(u, "prompt_tokens_details", None)
    return _usage(_count(u, "prompt_tokens"), _count(u, "completion_tokens"),
                  _count(details, "cached_tokens") if details is not None else 0)


def anthropic_usage(u: Any) -> dict[str, int]:
    """Token usage of an Anthropic answer. Anthropic's ``input_tokens``
    leaves out what was read from or written to the prompt cache; here
    input counts all of it and ``cached_tokens`` the part read from cache,
    as OpenAI reports it, so one price rule fits both."""
    read = _count(u, "cache_read_input_tokens")
    written = _count(u, "cache_creation_input_tokens")
    return _usage(_count(u, "input_tokens") + read + written, _count(u, "output_tokens"), read)


def _usage(inp: int, out: int, cached: int) -> dict[str, int]:
    """``cached_tokens`` only where some were: most answers have none."""
    usage = {"input_tokens": inp, "output_tokens": out}
    if cached:
        usage["cached_tokens"] = min(cached, inp)
    return usage


class ProviderError(NodeConfigError):
    """The LLM could not be reached or refused the request. The text names the
    provider and the HTTP status, never the key (it is redacted)."""

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        self.provider = provider
        self.status = status
        where = f"HTTP {status}" if status else "request failed"
        super().__init__(redact(f"{provider}: {where}: {message}"))


class StreamBroken(Exception):
    """A streamed answer ended before the server said it was complete (the
    connection closed, or the stream stopped with no finish reason). The
    request is retried as a whole, or fails: a half answer is never final."""


#: What a provider gives the text of an answer as it streams in. The loop
#: passes a DeltaCoalescer; a provider calls ``restart(on_delta)`` before
#: it plays a broken stream again.
OnDelta = Callable[[str], None]


class Provider:
    name = "provider"

    async def complete(self, *, system: str, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]], model: str, temperature: float | None,
                       max_tokens: int, turn: int = 0, on_delta: OnDelta | None = None) -> LlmReply:
        """``on_delta(text)``: called with each piece of the answer's text as
        it streams in (providers that stream); the reply still carries the
        whole text."""
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def restart(on_delta: OnDelta | None) -> None:
    """A stream is played again from its start: what was shown of it goes."""
    again = getattr(on_delta, "restart", None)
    if again is not None:
        again()


#: The coalescer's clock (a test replaces it with one that counts).
clock: Callable[[], float] = time.monotonic

#: Longest a provider reads already-arrived stream pieces without letting the
#: rest of the loop run (the designer's GUI shares it: qasync).
STREAM_SLICE = 0.005


class Pause:
    """``await pause()`` in a loop over stream pieces: gives the event loop
    a turn when the loop has held it for STREAM_SLICE seconds. Pieces that
    arrived together are parsed without a wait, so without this a fast
    stream would freeze the designer for as long as it lasts."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def __call__(self) -> None:
        now = time.monotonic()
        if now - self._since >= STREAM_SLICE:
            await asyncio.sleep(0)
            self._since = time.monotonic()


#: Seconds between two published deltas of one agent's turn (at most ~20 a second).
DELTA_INTERVAL = 0.05
#: Seconds buffered text waits for the next piece before it is published
#: anyway (a stream that pauses still shows what came); None: DELTA_INTERVAL.
STALL_FLUSH: float | None = None


class DeltaCoalescer:
    """Buffers a turn's streamed text and hands it to ``publish`` at most once
    every ``interval`` seconds (whatever arrived since the last time, in one
    piece), so that a fast model cannot flood the bus. ``flush()`` at the end
    of the turn publishes the rest. ``restart()`` drops the buffer and
    publishes an empty text: the stream is being played again from its
    start, and a viewer clears what it showed of it. Text held back waits at
    most STALL_FLUSH seconds on the running loop's timer: a stream that
    pauses (a slow model, a held last piece) still shows what came.

    ``clock`` is read once per piece (tests give one that counts)."""

    def __init__(self, publish: Callable[[str], None], interval: float | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.publish = publish
        self.interval = DELTA_INTERVAL if interval is None else interval
        self.clock = clock or globals()["clock"]
        self._buffer: list[str] = []
        self._last: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.published = 0

    def __call__(self, text: str) -> None:
        if not text:
            return
        self._buffer.append(text)
        now = self.clock()
        if self._last is None or now - self._last >= self.interval:
            self._last = now
            self._emit()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop: flush() at the end publishes it
            wait = self.interval if STALL_FLUSH is None else STALL_FLUSH
            self._timer = loop.call_later(wait, self._stalled)

    def _stalled(self) -> None:
        self._timer = None
        if self._buffer:
            self._last = self.clock()
            self._emit()

    def flush(self) -> None:
        self._cancel_timer()
        if self._buffer:
            self._emit()

    def restart(self) -> None:
        self._cancel_timer()
        self._buffer.clear()
        self._last = None
        self.publish("")
        self.published += 1

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _emit(self) -> None:
        self._cancel_timer()
        text = "".join(self._buffer)
        self._buffer.clear()
        self.publish(text)
        self.published += 1


def retry_base() -> float:
    try:
        return max(0.0, float(os.environ.get(RETRY_BASE_ENV, DEFAULT_RETRY_BASE)))
    except ValueError:
        return DEFAULT_RETRY_BASE


async def _sleep(seconds: float) -> None:
    """The wait between attempts (a test replaces it to record the delays)."""
    await asyncio.sleep(seconds)


async def with_retries(provider: str, attempt: Callable[[], Awaitable[Any]],
                       classify: Callable[[BaseException], tuple[int | None, bool, str] | None],
                       retries: int, max_wait: float = DEFAULT_MAX_RETRY_WAIT) -> Any:
    """Run ``attempt``; on a retryable failure (HTTP 429, 5xx, a dropped
    connection) wait and try again, ``retries`` times. The wait is what the
    server asked for (Retry-After), or else base * 2**n with jitter (at most
    MAX_RETRY_DELAY). A server that asks for more than ``max_wait`` seconds
    is not retried early: the call fails at once, saying so.
    ``classify(exc)`` -> (status, retryable, message), or None for an error
    that is not the provider's (re-raised as is)."""
    n = 0
    while True:
        try:
            return await attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            info = classify(exc)
            if info is None:
                raise
            status, retryable, message = info
            if not retryable or n >= retries:
                if retryable and retries:
                    message = f"{message} (gave up after {n + 1} attempts)"
                raise ProviderError(provider, message, status) from None
            delay = retry_after(exc)
            if delay is not None and delay > max_wait:
                raise ProviderError(provider, f"{message} (the server asked to retry after "
                                    f"{delay:g} s, more than max_retry_wait_seconds={max_wait:g})",
                                    status) from None
            if delay is None:
                delay = min(retry_base() * (2 ** n) * (1 + random.random() / 4), MAX_RETRY_DELAY,
                            max_wait)
            await _sleep(delay)
            n += 1


def retry_after(exc: BaseException) -> float | None:
    """The delay the server asked for, in seconds: ``retry-after-ms`` (sent
    by OpenAI), ``retry-after`` in seconds or as an HTTP date; None if it
    named none (or nonsense)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000
            return value if value >= 0 else None
    except (TypeError, ValueError):
        pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(str(raw))
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - time.time())
    return value if value >= 0 and value == value else None


def sdk_error(exc: BaseException, status_error: type, conn_error: type,
              timeout_error: type | None = None,
              request_timeout: float | None = None) -> tuple[int | None, bool, str] | None:
    """Classify an OpenAI/Anthropic SDK exception (both SDKs share a shape)."""
    if isinstance(exc, status_error):
        status = getattr(exc, "status_code", None)
        retryable = status == 429 or (status is not None and status >= 500)
        return status, retryable, _short(_status_message(exc))
    if timeout_error is not None and isinstance(exc, timeout_error):
        limit = f" within request_timeout_seconds={request_timeout:g}" if request_timeout else ""
        return None, True, f"timed out: the server did not answer{limit}"
    if isinstance(exc, conn_error):
        return None, True, _short(str(exc) or type(exc).__name__)
    return None


def stream_error(exc: BaseException) -> tuple[int | None, bool, str] | None:
    """A stream that broke mid-way (closed early, or the connection failed
    while the answer came in): retryable, as a whole request."""
    if isinstance(exc, StreamBroken):
        return None, True, str(exc)
    for timeout, transport in _http_errors():
        if isinstance(exc, timeout):
            return None, True, "timed out: the stream stopped sending"
        if isinstance(exc, transport):
            return None, True, _short(f"the stream broke mid-way: {exc or type(exc).__name__}")
    return None


def _http_errors() -> list[tuple[type, type]]:
    """(timeout, transport) errors of the HTTP clients the SDKs use (httpx,
    or httpx2 in newer SDKs): raised as they are while a stream is read."""
    import importlib

    out = []
    for name in ("httpx2", "httpx"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        out.append((mod.TimeoutException, mod.TransportError))
    return out


def stream_unsupported(exc: ProviderError) -> bool:
    """The server refused the request for asking to stream (a server or
    model that cannot): the provider asks again without streaming."""
    return exc.status in (400, 404, 422, 501) and "stream" in str(exc).lower()


def _status_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", "") or exc)


def _short(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


async def stream_or_plain(provider: Any, on_delta: OnDelta | None,
                          stream: Callable[[], Awaitable[LlmReply]],
                          plain: Callable[[], Awaitable[Any]],
                          classify: Callable[[BaseException], Any]) -> Any:
    """A request streamed when ``on_delta`` asks for it and the server can:
    a stream broken mid-way is played again whole (``restart`` tells the
    viewer) within the provider's retries; a server that says it cannot
    stream is asked plainly from then on (``provider.streams``). ``plain``
    is the request without streaming, retries and all; its reply is the
    SDK's, for the caller to convert."""
    if on_delta is not None and provider.streams:
        attempts = 0

        async def attempt() -> LlmReply:
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                restart(on_delta)
            return await stream()

        try:
            return await with_retries(provider.name, attempt, classify, provider.retries,
                                      provider.max_retry_wait)
        except ProviderError as exc:
            if not stream_unsupported(exc):
                raise
            provider.streams = False  # the server said it cannot stream: ask plainly
    return await plain()

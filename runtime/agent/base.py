"""What every provider shares: the neutral conversation, replies, errors and
retries."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..node import NodeConfigError, redact

#: Seconds before the first retry; doubled each time. Tests set it tiny.
RETRY_BASE_ENV = "SWITCHBOARD_RETRY_BASE"
DEFAULT_RETRY_BASE = 0.5
MAX_RETRY_DELAY = 30.0

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


class ProviderError(NodeConfigError):
    """The LLM could not be reached or refused the request. The text names the
    provider and the HTTP status, never the key (it is redacted)."""

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        self.provider = provider
        self.status = status
        where = f"HTTP {status}" if status else "request failed"
        super().__init__(redact(f"{provider}: {where}: {message}"))


class Provider:
    name = "provider"

    async def complete(self, *, system: str, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]], model: str, temperature: float | None,
                       max_tokens: int, turn: int = 0) -> LlmReply:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def retry_base() -> float:
    try:
        return max(0.0, float(os.environ.get(RETRY_BASE_ENV, DEFAULT_RETRY_BASE)))
    except ValueError:
        return DEFAULT_RETRY_BASE


async def with_retries(provider: str, attempt: Callable[[], Awaitable[Any]],
                       classify: Callable[[BaseException], tuple[int | None, bool, str] | None],
                       retries: int) -> Any:
    """Run ``attempt``; on a retryable failure (HTTP 429, 5xx, a dropped
    connection) wait base * 2**n (with jitter, or the server's Retry-After
    when it is shorter than the cap) and try again, ``retries`` times.
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
            if delay is None:
                delay = retry_base() * (2 ** n) * (1 + random.random() / 4)
            await asyncio.sleep(min(delay, MAX_RETRY_DELAY))
            n += 1


def retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return min(float(value), retry_base() * 64) if value is not None else None
    except ValueError:
        return None


def sdk_error(exc: BaseException, status_error: type, conn_error: type) -> tuple[int | None, bool, str] | None:
    """Classify an OpenAI/Anthropic SDK exception (both SDKs share a shape)."""
    if isinstance(exc, status_error):
        status = getattr(exc, "status_code", None)
        retryable = status == 429 or (status is not None and status >= 500)
        return status, retryable, _short(_status_message(exc))
    if isinstance(exc, conn_error):  # includes timeouts
        return None, True, _short(str(exc) or type(exc).__name__)
    return None


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


PROVIDERS = ("openai", "anthropic", "scripted")


def make_provider(name: str, **config: Any) -> Provider:
    """A provider by name; SDKs are imported here, not before."""
    if name == "openai":
        from .openai_provider import OpenAIProvider

        return OpenAIProvider(**config)
    if name == "anthropic":
        from .anthropic_provider import AnthropicProvider

        return AnthropicProvider(**config)
    if name == "scripted":
        from .scripted import ScriptedProvider

        return ScriptedProvider(**config)
    raise NodeConfigError(f"unknown provider '{name}' (one of: {', '.join(PROVIDERS)})")

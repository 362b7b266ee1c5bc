"""OpenAI chat completions through the official SDK. With ``base_url`` the
same code serves any OpenAI-compatible server (Ollama, vLLM, LM Studio,
llama.cpp server)."""

from __future__ import annotations

import json
from typing import Any

from .base import (
    DEFAULT_MAX_RETRY_WAIT,
    DEFAULT_REQUEST_TIMEOUT,
    LlmReply,
    OnDelta,
    Pause,
    Provider,
    StreamBroken,
    ToolCallRequest,
    openai_usage,
    sdk_error,
    stream_error,
    stream_or_plain,
    with_retries,
)


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(self, *, api_key: str, base_url: str | None = None, retries: int = 3,
                 request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        import openai

        self._openai = openai
        self.retries = retries
        self.request_timeout = request_timeout
        self.max_retry_wait = max_retry_wait
        # The SDK's own retries are off: ours log nothing and back off as
        # configured (tests keep it tiny).
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None,
                                         max_retries=0, timeout=request_timeout)
        #: False once the server refused to stream: plain requests from then on.
        self.streams = True

    async def complete(self, *, system, messages, tools, model, temperature, max_tokens, turn=0,
                       on_delta: OnDelta | None = None) -> LlmReply:
        kwargs: dict[str, Any] = {"model": model, "messages": to_openai(system, messages)}
        if tools:
            kwargs["tools"] = tools
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        oa = self._openai

        def classify(exc: BaseException):
            return stream_error(exc) or sdk_error(exc, oa.APIStatusError, oa.APIConnectionError,
                                                  oa.APITimeoutError, self.request_timeout)

        async def plain() -> LlmReply:
            return from_openai(await with_retries(self.name, lambda: self.client.chat.completions.create(**kwargs), classify,
                                            self.retries, self.max_retry_wait))

        return await stream_or_plain(self, on_delta, lambda: self._stream(kwargs, on_delta),
                                     plain, classify)

    async def _stream(self, kwargs: dict[str, Any], on_delta: OnDelta) -> LlmReply:
        """One streamed request: text pieces to ``on_delta``, tool-call
        arguments assembled from theirs, usage from the last chunk. A server
        that answers with a plain body (it does not stream) is read as one."""
        stream = await self.client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True})
        response = stream.response
        if "json" in response.headers.get("content-type", ""):
            await response.aread()
            return from_openai(self._openai.types.chat.ChatCompletion.model_validate(response.json()))
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = None
        finished = False
        pause = Pause()
        sdk = self._openai
        try:
            async with stream:
                async for chunk in stream:
                    await pause()  # the GUI and other agents run meanwhile
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices or []:
                        delta = choice.delta
                        if delta is not None and delta.content:
                            text.append(delta.content)
                            on_delta(delta.content)
                        for tc in (getattr(delta, "tool_calls", None) or []):
                            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": []})
                            if tc.id:
                                call["id"] = tc.id
                            fn = tc.function
                            if fn is not None:
                                if fn.name:
                                    call["name"] = fn.name
                                if fn.arguments:
                                    call["arguments"].append(fn.arguments)
                        if choice.finish_reason:
                            finished = True
        except sdk.APITimeoutError:
            raise
        except sdk.APIConnectionError as exc:  # the connection broke while the answer came in
            cause = exc.__cause__ or exc
            raise StreamBroken(f"the stream broke mid-way ({cause or type(cause).__name__})") from exc
        if not finished:
            raise StreamBroken("the stream ended before the answer was complete")
        return LlmReply(
            text="".join(text),
            tool_calls=[ToolCallRequest(id=c["id"], name=c["name"], arguments="".join(c["arguments"]))
                        for _, c in sorted(calls.items()) if c["name"]],
            usage=openai_usage(usage))

    async def aclose(self) -> None:
        await self.client.close()


def to_openai(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in messages:
        role = m["role"]
        if role == "user":
            out.append({"role": "user", "content": m["content"]})
        elif role == "assistant":
            a: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
            if m.get("tool_calls"):
                a["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": _as_text(c["arguments"])}}
                    for c in m["tool_calls"]]
            out.append(a)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
    return out


def _as_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def from_openai(resp: Any) -> LlmReply:
    choice = resp.choices[0] if resp.choices else None
    message = choice.message if choice is not None else None
    calls = []
    for tc in (getattr(message, "tool_calls", None) or []):
        fn = getattr(tc, "function", None)
        if fn is None:  # a custom (non-function) tool call: not ours
            continue
        calls.append(ToolCallRequest(id=tc.id, name=fn.name, arguments=fn.arguments))
    usage = getattr(resp, "usage", None)
    return LlmReply(
        text=(getattr(message, "content", None) or ""),
        tool_calls=calls,
        usage=openai_usage(usage),
    )

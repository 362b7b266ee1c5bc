"""Anthropic messages with tools, through the official SDK."""

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
    anthropic_usage,
    sdk_error,
    stream_error,
    stream_or_plain,
    with_retries,
)


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None = None, retries: int = 3,
                 request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        import anthropic

        self._anthropic = anthropic
        self.retries = retries
        self.request_timeout = request_timeout
        self.max_retry_wait = max_retry_wait
        self.client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or None,
                                               max_retries=0, timeout=request_timeout)
        #: False once the server refused to stream: plain requests from then on.
        self.streams = True

    async def complete(self, *, system, messages, tools, model, temperature, max_tokens, turn=0,
                       on_delta: OnDelta | None = None) -> LlmReply:
        kwargs: dict[str, Any] = {"model": model, "messages": to_anthropic(messages),
                                  "max_tokens": max_tokens or 1024}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = [anthropic_tool(t) for t in tools]
        if temperature is not None:
            kwargs["temperature"] = temperature
        an = self._anthropic

        def classify(exc: BaseException):
            return stream_error(exc) or sdk_error(exc, an.APIStatusError, an.APIConnectionError,
                                                  an.APITimeoutError, self.request_timeout)

        async def plain() -> LlmReply:
            return from_anthropic(await with_retries(self.name, lambda: self.client.messages.create(**kwargs), classify,
                                            self.retries, self.max_retry_wait))

        return await stream_or_plain(self, on_delta, lambda: self._stream(kwargs, on_delta),
                                     plain, classify)

    async def _stream(self, kwargs: dict[str, Any], on_delta: OnDelta) -> LlmReply:
        """One streamed request (the SDK's raw events): text pieces to
        ``on_delta``, tool inputs assembled from their JSON pieces, usage
        from message_start and message_delta. A plain body (a server that
        does not stream) is read as one."""
        stream = await self.client.messages.create(**kwargs, stream=True)
        response = stream.response
        if "json" in response.headers.get("content-type", ""):
            await response.aread()
            return from_anthropic(self._anthropic.types.Message.model_validate(response.json()))
        blocks: dict[int, dict[str, Any]] = {}
        usage = anthropic_usage(None)
        finished = False
        pause = Pause()
        sdk = self._anthropic
        try:
            async with stream:
                async for event in stream:
                    await pause()  # the GUI and other agents run meanwhile
                    kind = event.type
                    if kind == "message_start":
                        usage = anthropic_usage(event.message.usage)
                    elif kind == "content_block_start":
                        b = event.content_block
                        blocks[event.index] = {"type": b.type, "text": [], "json": [],
                                               "id": getattr(b, "id", ""), "name": getattr(b, "name", "")}
                    elif kind == "content_block_delta":
                        block = blocks.setdefault(event.index, {"type": "text", "text": [], "json": [],
                                                                "id": "", "name": ""})
                        d = event.delta
                        if d.type == "text_delta" and d.text:
                            block["text"].append(d.text)
                            on_delta(d.text)
                        elif d.type == "input_json_delta":
                            block["json"].append(d.partial_json)
                    elif kind == "message_delta":
                        out = getattr(event.usage, "output_tokens", None)
                        if out is not None:
                            usage["output_tokens"] = out
                    elif kind == "message_stop":
                        finished = True
        except sdk.APITimeoutError:
            raise
        except sdk.APIConnectionError as exc:  # the connection broke while the answer came in
            cause = exc.__cause__ or exc
            raise StreamBroken(f"the stream broke mid-way ({cause or type(cause).__name__})") from exc
        if not finished:
            raise StreamBroken("the stream ended before the answer was complete")
        texts, calls = [], []
        for _, b in sorted(blocks.items()):
            if b["type"] == "text":
                texts.append("".join(b["text"]))
            elif b["type"] == "tool_use":
                raw = "".join(b["json"])
                try:
                    args = json.loads(raw) if raw else {}
                except ValueError:
                    args = raw  # bad JSON: the bridge tells the model so
                calls.append(ToolCallRequest(id=b["id"], name=b["name"], arguments=args))
        return LlmReply(text="".join(texts), tool_calls=calls, usage=usage)

    async def aclose(self) -> None:
        await self.client.close()


def anthropic_tool(function_spec: dict[str, Any]) -> dict[str, Any]:
    """OpenAI function format (what `switchboard tools` shows) -> Anthropic."""
    fn = function_spec["function"]
    return {"name": fn["name"], "description": fn.get("description", ""),
            "input_schema": fn["parameters"]}


def to_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results of one turn go back together in one user message, as the
    messages API requires."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "user":
            out.append({"role": "user", "content": m["content"]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                args = c["arguments"]
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {}
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["name"],
                               "input": args if isinstance(args, dict) else {}})
            out.append({"role": "assistant", "content": blocks or ""})
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                     "content": m["content"]}
            if m.get("is_error"):
                block["is_error"] = True
            last = out[-1] if out else None
            if last and last["role"] == "user" and isinstance(last["content"], list) \
                    and last["content"] and last["content"][0].get("type") == "tool_result":
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out


def from_anthropic(resp: Any) -> LlmReply:
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for block in resp.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            calls.append(ToolCallRequest(id=block.id, name=block.name, arguments=block.input))
    usage = getattr(resp, "usage", None)
    return LlmReply(text="".join(texts), tool_calls=calls,
                    usage=anthropic_usage(usage))

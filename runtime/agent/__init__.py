"""LLM providers and the agent loop.

Providers speak their SDK's wire format and nothing else: ``openai`` (chat
completions through the official SDK; any OpenAI-compatible server via
``base_url``), ``anthropic`` (messages through the official SDK) and
``scripted`` (plays turns given in the flow, offline). The loop in
``runtime.agent.loop`` is the same for all of them.

Nothing here imports an SDK at module import: a designer that never runs an
agent never pays for loading one."""

from __future__ import annotations

from .base import LlmReply, Provider, ProviderError, ToolCallRequest
from .providers import make_provider

__all__ = ["LlmReply", "Provider", "ProviderError", "ToolCallRequest", "make_provider"]

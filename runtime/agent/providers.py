"""The provider factory: a provider by name. A module of its own so that
base (what every provider shares) never imports a provider, and providers
never import each other (import-linter holds both)."""

from __future__ import annotations

from typing import Any

from ..node import NodeConfigError
from .base import Provider

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

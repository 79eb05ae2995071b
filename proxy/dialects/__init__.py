"""Upstream-side adapters: the core's composed request in an upstream's wire API, and the
upstream's answer read back as the core's (a Chat Completions answer).

A route's `api` (`upstream.api`, `routes[].api`) names its dialect: `openai` (Chat
Completions, the default) or `anthropic` (the Messages API). The turn's lifecycle, the
summarizer and the pass-through of `X-Context-Strategy: off` go upstream only through
`dialect_for(client.api)`, so no other code knows which API an upstream speaks.
"""

from __future__ import annotations

from proxy.dialects.base import Dialect, Outgoing
from proxy.dialects.messages import AnthropicMessages
from proxy.dialects.openai import CHAT_PATH, OpenAIChat

_DIALECTS: dict[str, Dialect] = {"openai": OpenAIChat(), "anthropic": AnthropicMessages()}


def dialect_for(api: str) -> Dialect:
    return _DIALECTS[api]


def register(api: str, dialect: Dialect) -> None:
    """Another upstream API, for `upstream.api` / `routes[].api` to name (the config checks
    the names it knows; a plug-in or a test registers its own)."""
    _DIALECTS[api] = dialect


__all__ = ["CHAT_PATH", "Dialect", "Outgoing", "dialect_for", "register"]

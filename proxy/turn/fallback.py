"""When a turn falls back to another model, and the request it sends that model.

A fallback is tried only before anything was relayed: when the upstream answered 429 or
a 5xx, timed out, or could not be reached. Any other answer (a 4xx but 429 included) is
the client's to see. The fallback request is the client's own with the model replaced;
the turn re-fits the context to the fallback's window before sending it.
"""

from __future__ import annotations

from dataclasses import replace

from proxy.context.model import ChatRequest
from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.upstream import Answer

Attempt = Answer | UpstreamUnavailable | UpstreamTimeout
"""What one forward came to: an answer (not read yet), or the upstream could not be reached in time."""


def fallback_reason(attempt: Attempt) -> str | None:
    """Why this attempt calls for a fallback (`429`, `503`, `unreachable`, `timeout`), or None."""
    if isinstance(attempt, UpstreamTimeout):
        return "timeout"
    if isinstance(attempt, UpstreamUnavailable):
        return "unreachable"
    if attempt.status == 429 or attempt.status >= 500:
        return str(attempt.status)
    return None


def discard(attempt: Attempt) -> None:
    """Drop a failed answer's connection: the client will see the fallback's answer instead."""
    if not isinstance(attempt, UpstreamUnavailable | UpstreamTimeout):
        attempt.close()


def for_model(chat: ChatRequest, model: str) -> ChatRequest:
    return replace(chat, model=model, body={**chat.body, "model": model})

"""A chat completions request as the turn needs it, parsed and validated by the HTTP edge."""

from __future__ import annotations

from dataclasses import dataclass

from proxy.types import JSONObject, Message


@dataclass(frozen=True)
class ChatRequest:
    body: JSONObject
    raw: bytes
    model: str
    messages: list[Message]
    stream: bool
    include_usage: bool

    @property
    def max_output_tokens(self) -> int:
        value = self.body.get("max_completion_tokens") or self.body.get("max_tokens")
        return int(value) if isinstance(value, int) else 0

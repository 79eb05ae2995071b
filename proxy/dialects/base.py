"""What a dialect is: one request written in its API, one answer read back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Protocol

from proxy.context.model import ChatRequest
from proxy.types import frozen
from proxy.upstream import Answer, UpstreamResponse


@frozen
class Outgoing:
    path: str
    """The upstream path under its base URL, as `/v1/...`."""
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    """Comma-separated tokens the request needs in these headers, beside the client's own
    (the `anthropic-beta` features its body uses)."""


class Dialect(Protocol):
    def request(
        self, chat: ChatRequest, messages_json: bytes, *, default_max_tokens: int, unmarked: bool = False
    ) -> Outgoing:
        """The composed request (`chat` with its messages serialized as `messages_json`) in this API;
        `default_max_tokens`: the output limit to send when the API requires one and the request has none;
        `unmarked`: the messages are known to hold none of the core's marks for other APIs."""
        ...

    def answer(self, response: UpstreamResponse) -> Answer:
        """The upstream's answer (unread), read as a Chat Completions answer: a completion, a stream
        of chunks ending with a usage-only chunk and `[DONE]`, or OpenAI's error JSON."""
        ...

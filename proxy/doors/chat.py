"""The Chat Completions door: the core's own API, so the answer goes out as it came.

A JSON answer is relayed byte for byte; a stream event by event, less the usage-only chunk
the proxy always asks for unless the client asked for it too, and with the upstream's
`[DONE]` held back until the turn is journaled. A stream that cannot end well ends with
OpenAI's error event, on which the SDKs raise.
"""

from __future__ import annotations

import orjson

from proxy.errors import ProxyError
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject
from proxy.upstream import SSEEvent, is_usage_only

_DONE = b"data: [DONE]\n\n"


class ChatDoor:
    name = "chat"

    def __init__(self, *, include_usage: bool) -> None:
        self._include_usage = include_usage

    async def body(self, body: bytes, outcome: Outcome) -> bytes:
        return body

    def error_body(self, status: int, body: bytes) -> bytes:
        return body

    def stream(self) -> ChatStream:
        return ChatStream(include_usage=self._include_usage)


class ChatStream:
    def __init__(self, *, include_usage: bool) -> None:
        self._include_usage = include_usage
        self._done = b""
        """The upstream's `[DONE]` event, held back until the turn is journaled."""

    def start(self) -> bytes:
        return b""

    def event(self, event: SSEEvent, chunk: JSONObject | None) -> bytes:
        if event.done:
            self._done = event.raw
            return b""
        if chunk is not None and not self._include_usage and is_usage_only(chunk):
            return b""
        return event.raw

    async def end(self, outcome: Outcome) -> bytes:
        return self._done or _DONE

    def error(self, exc: ProxyError) -> bytes:
        return b"data: " + orjson.dumps(exc.body()) + b"\n\n"

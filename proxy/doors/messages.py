"""The Messages door: the core's answer written as Anthropic's Messages API answers.

The request's translation is `anthropic_codec.py`'s; here the answer: a completion becomes
a Message, a stream Anthropic's events (`message_start` ... `message_stop`), an error
Anthropic's error JSON. A stream that cannot end well ends with an `error` event and no
`message_stop`, so the SDKs raise rather than return half an answer.
"""

from __future__ import annotations

import orjson

from proxy.doors.anthropic_codec import MessageStream, error_body, message_from_completion, message_id
from proxy.errors import ProxyError
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject
from proxy.upstream import SSEEvent


class MessagesDoor:
    name = "messages"

    def __init__(self, *, model: str, input_tokens: int) -> None:
        self._model = model
        self._input_tokens = input_tokens
        """The proxy's count of what it sent: `message_start`'s figure until the upstream's usage comes."""

    async def body(self, body: bytes, outcome: Outcome) -> bytes:
        return orjson.dumps(message_from_completion(orjson.loads(body), model=self._model))

    def error_body(self, status: int, body: bytes) -> bytes:
        return anthropic_error(status, body)

    def stream(self) -> MessagesStream:
        return MessagesStream(
            MessageStream(model=self._model, message_id=message_id(), input_tokens=self._input_tokens)
        )


class MessagesStream:
    def __init__(self, stream: MessageStream) -> None:
        self._stream = stream

    def start(self) -> bytes:
        return self._stream.start()

    def event(self, event: SSEEvent, chunk: JSONObject | None) -> bytes:
        return self._stream.feed(chunk) if chunk is not None and "error" not in chunk else b""

    async def end(self, outcome: Outcome) -> bytes:
        if outcome.status != "completed":
            error = outcome.error or {}
            return self._stream.error(int(error.get("status") or 502), str(error.get("message") or "upstream error"))
        return self._stream.finish(outcome.usage, outcome.finish_reason)

    def error(self, exc: ProxyError) -> bytes:
        return self._stream.error(exc.status, exc.message)


def anthropic_error(status: int, body: bytes) -> bytes:
    """An error body (OpenAI's shape, or anything) in Anthropic's shape."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = {"error": {"message": body[:500].decode(errors="replace")}}
    if not isinstance(parsed, dict):
        parsed = {"error": {"message": str(parsed)[:500]}}
    return orjson.dumps(error_body(status, parsed))

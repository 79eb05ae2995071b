"""The Responses door: the core's Chat Completions answer written as a Response, or its events.

A JSON answer becomes the Response object (`incomplete` when the upstream stopped at the
output limit or a content filter); a stream becomes the Responses event stream, opened with
`response.created` / `response.in_progress` and ended, once the turn is journaled, with
`response.completed` (or `.incomplete`), or with `response.failed` when the turn did not
complete, so that the SDK never takes half an answer for a whole one. Errors keep OpenAI's
shape, which is the Responses API's too. A completed answer's Response object is handed to
`keep` (the handler stores it, so that it can be retrieved and continued).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson

from proxy.doors.responses_codec import (
    INCOMPLETE_REASONS,
    ResponsesCall,
    ResponseStream,
    output_items,
    response_object,
    usage_of,
)
from proxy.errors import ProxyError
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject
from proxy.upstream import SSEEvent

Keep = Callable[[JSONObject, Outcome], Awaitable[None]]
"""Called with a completed turn's Response object and its outcome, before the client sees its end."""

_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})
"""The `ResponseErrorCode` values the proxy's own errors map onto; any other is `server_error`."""


def _error_code(code: object) -> str:
    return code if isinstance(code, str) and code in _ERROR_CODES else "server_error"


class ResponsesDoor:
    name = "responses"

    def __init__(self, call: ResponsesCall, *, response_id: str, created_at: int, keep: Keep) -> None:
        self._call = call
        self._id = response_id
        self._created_at = created_at
        self._keep = keep

    async def body(self, body: bytes, outcome: Outcome) -> bytes:
        choice = orjson.loads(body)["choices"][0]  # the relay read it as a completion
        incomplete = INCOMPLETE_REASONS.get(outcome.finish_reason or "")
        response = response_object(
            self._call,
            response_id=self._id,
            created_at=self._created_at,
            status="incomplete" if incomplete else "completed",
            output=output_items(choice["message"], response_id=self._id),
            usage=usage_of(outcome.usage),
            incomplete_reason=incomplete,
        )
        await self._keep(response, outcome)
        return orjson.dumps(response)

    def error_body(self, status: int, body: bytes) -> bytes:
        return body

    def stream(self) -> ResponsesStreamWriter:
        return ResponsesStreamWriter(
            ResponseStream(self._call, response_id=self._id, created_at=self._created_at), self._keep
        )


class ResponsesStreamWriter:
    def __init__(self, stream: ResponseStream, keep: Keep) -> None:
        self._stream = stream
        self._keep = keep

    def start(self) -> bytes:
        return self._stream.start()

    def event(self, event: SSEEvent, chunk: JSONObject | None) -> bytes:
        return self._stream.feed(chunk) if chunk is not None else b""

    async def end(self, outcome: Outcome) -> bytes:
        if outcome.status != "completed":
            error = outcome.error or {}
            return self._stream.fail(_error_code(error.get("code")), str(error.get("message") or "the turn failed"))
        closing = self._stream.complete(outcome.usage, outcome.finish_reason)
        await self._keep(self._stream.response, outcome)
        return closing

    def error(self, exc: ProxyError) -> bytes:
        return self._stream.fail(_error_code(exc.code), exc.message)

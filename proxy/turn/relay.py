"""Relay an upstream chat answer to the client, streamed or not, and learn what it said.

Both paths produce an `Outcome` (the status the turn is journaled with, the assembled
assistant message and the usage): `relay_json` returns it with the response to send,
`StreamRelay` hands it to its `before_end` callback before the stream's final event.
Upstream error answers are relayed unchanged (their
status, headers and body) and make the turn `failed`. A client that goes away
cancels the upstream request and makes the turn `canceled`; an upstream that stalls
makes it `interrupted` (see `status.py`).

Streaming: the upstream is always asked for `include_usage`; its usage-only final
chunk is dropped on the way back unless the client asked for it. Events are parsed
incrementally and forwarded as soon as each one is complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import orjson
from aiohttp import web

from proxy.errors import ProxyError, UpstreamUnavailable
from proxy.turn.status import ended_by
from proxy.types import JSONObject, Message
from proxy.upstream import Answer, SSEEvent, SSEParser, StreamAssembler, is_usage_only, parse_chunk
from proxy.upstream.completion import NotACompletion, error_of, parse_completion

_DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Outcome:
    status: str
    output: Message | None = None
    usage: JSONObject | None = None
    error: JSONObject | None = None


RESPONSE_STARTED = web.RequestKey("response_started", bool)
"""Set once a response's headers have gone out: an error after that cannot become a response."""
PROXY_ERROR = web.RequestKey("proxy_error", str)
"""The code of an error the proxy answered with, or ended a started stream with."""


async def start_stream(request: web.Request, response: web.StreamResponse) -> None:
    """Send the headers of a streamed response, and say so on the request."""
    request[RESPONSE_STARTED] = True
    await response.prepare(request)


def _headers(answer: Answer, extra: Mapping[str, str]) -> dict[str, str]:
    headers = {k: v for k, v in answer.relay_headers().items() if k.lower() != "content-encoding"}
    headers.update(extra)
    return headers


async def relay_json(request: web.Request, answer: Answer, extra: Mapping[str, str]) -> tuple[web.Response, Outcome]:
    try:
        body = await answer.read()
    except asyncio.CancelledError:
        answer.close()
        raise
    except ProxyError as exc:
        outcome = Outcome(ended_by(exc), error={"status": exc.status, "message": exc.message})
        return _error_response(request, exc), outcome
    response = web.Response(status=answer.status, body=body, headers=_headers(answer, extra))
    if answer.status >= 400:
        return response, Outcome("failed", error=error_of(body, answer.status))
    try:
        completion = parse_completion(body)
    except NotACompletion as exc:
        if isinstance(exc.__cause__, orjson.JSONDecodeError):  # a cut body: never relay it as an answer
            cut = UpstreamUnavailable("the upstream answer was cut or is not JSON")
            outcome = Outcome("failed", error={"status": cut.status, "message": cut.message})
            return _error_response(request, cut), outcome
        return response, Outcome("failed", error={"status": answer.status, "message": str(exc)})
    return response, Outcome("completed", completion.message, completion.usage)


async def _end_with_error(request: web.Request, response: web.StreamResponse, exc: ProxyError) -> web.StreamResponse:
    """End a stream with an OpenAI error event: the SDKs raise on it rather than return a short answer."""
    note_error(request, exc)
    await response.write(b"data: " + orjson.dumps(exc.body()) + b"\n\n")
    await response.write_eof()
    return response


def note_error(request: web.Request, exc: ProxyError) -> None:
    """Say on the request which error the proxy answered with (the access log and metrics read it)."""
    request[PROXY_ERROR] = exc.code or exc.type


def _error_response(request: web.Request, exc: ProxyError) -> web.Response:
    note_error(request, exc)
    return web.Response(status=exc.status, body=orjson.dumps(exc.body()), content_type="application/json")


class StreamRelay:
    """Relays one SSE answer as it arrives, and assembles what it said."""

    def __init__(self, answer: Answer, *, include_usage: bool) -> None:
        self.answer = answer
        self.include_usage = include_usage
        self.assembler = StreamAssembler()
        self._parser = SSEParser()
        self._done = b""
        """The `[DONE]` event, held back until the turn is journaled."""

    async def run(
        self, request: web.Request, extra: Mapping[str, str], *, before_end: Callable[[Outcome], Awaitable[None]]
    ) -> web.StreamResponse:
        """Relay the stream; `before_end(outcome)` runs before the final `[DONE]` is sent."""
        answer = self.answer
        if answer.status >= 400 or "text/event-stream" not in answer.headers.get("Content-Type", ""):
            relayed, outcome = await relay_json(request, answer, extra)
            if outcome.status == "completed":
                outcome = Outcome("failed", error={"status": answer.status, "message": "expected an event stream"})
            await before_end(outcome)
            return relayed
        response = web.StreamResponse(status=answer.status, headers=_headers(answer, extra))
        try:
            await start_stream(request, response)
            async for chunk in answer.iter_chunks():
                out = self._forwardable(self._parser.feed(chunk))
                if out:
                    await response.write(out)
            tail = self._forwardable(self._parser.flush())
            if tail:
                await response.write(tail)
        except ProxyError as exc:
            # Cut or stalled: end with an error event, never as if the answer were whole.
            answer.close()
            await before_end(
                Outcome(ended_by(exc), self.assembler.message(), error={"status": exc.status, "message": exc.message})
            )
            return await _end_with_error(request, response, exc)
        except (asyncio.CancelledError, ConnectionResetError):
            answer.close()
            await before_end(Outcome("canceled", self.assembler.message(), self.assembler.usage))
            raise
        a = self.assembler
        outcome = Outcome("completed", a.message(), a.usage)
        if a.error is not None:
            outcome = Outcome("failed", a.message(), a.usage, {"status": answer.status, **a.error})
        cut = None
        if not self._done and a.finish_reason is None and a.error is None:
            cut = UpstreamUnavailable("the upstream ended the stream before the answer was complete")
            outcome = Outcome("failed", a.message(), a.usage, {"status": 502, "message": cut.message})
        try:
            await before_end(outcome)
        except ProxyError as exc:
            # The turn could not be journaled: the stream ends with an error event instead
            # of [DONE], so the client does not take an answer the session will not have.
            return await _end_with_error(request, response, exc)
        if cut is not None:
            return await _end_with_error(request, response, cut)
        await response.write(self._done or _DONE)
        await response.write_eof()
        return response

    def _forwardable(self, events: list[SSEEvent]) -> bytes:
        out = []
        for event in events:
            if event.done:
                self._done = event.raw
                continue
            if event.data is not None:
                chunk = parse_chunk(event.data)
                if isinstance(chunk, dict):
                    self.assembler.add(chunk)
                    if not self.include_usage and is_usage_only(chunk):
                        continue
            out.append(event.raw)
        return b"".join(out)

"""Relay a turn's answer to the client through its door, streamed or not, and learn what it said.

Both paths produce an `Outcome` (the status the turn is journaled with, the assembled
assistant message and the usage), and the turn is journaled before the client sees the
end of its answer: `relay_json` records it before the body is written, a stream before
its final events. What the client sees is written by the request's `Door`, from the
core's answer (a Chat Completions answer, whatever the upstream spoke). Upstream error
answers keep their status and headers (their body in the door's error shape) and make
the turn `failed`. A client that goes away cancels the upstream request and makes the
turn `canceled`; an upstream that stalls makes it `interrupted` (`proxy/turn/status.py`).

Streaming: events are parsed incrementally and each is handed to the door as soon as it
is complete; a stream cut before its end (no finish reason and no `[DONE]`), stalled or
not journaled ends with the door's error event, never as if the answer were whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy.doors.base import Door, StreamWriter
from proxy.errors import ProxyError, UpstreamUnavailable
from proxy.handlers.request_keys import PROXY_ERROR, RESPONSE_STARTED
from proxy.turn import ActiveTurn
from proxy.turn.outcome import Outcome
from proxy.turn.status import ended_by
from proxy.upstream import Answer, SSEEvent, SSEParser, StreamAssembler, parse_chunk
from proxy.upstream.completion import NotACompletion, error_of, parse_completion

Record = Callable[[Outcome], Awaitable[None]]


async def relay_turn(request: web.Request, turn: ActiveTurn, door: Door) -> web.StreamResponse:
    """Relay `turn`'s answer through `door`; the turn is journaled before the client sees its end."""
    try:
        if turn.stream:
            relay = StreamRelay(turn.answer, door)
            response = await relay.run(request, turn.response_headers(), record=turn.record)
        else:
            response = await relay_json(request, turn.answer, turn.response_headers(), door=door, record=turn.record)
    finally:
        await turn.record(Outcome("canceled"))
    turn.finished()
    return response


async def relay_unmanaged(request: web.Request, answer: Answer, door: Door, *, stream: bool) -> web.StreamResponse:
    """Relay an answer no turn is journaled for (a pass-through through a door that translates)."""
    if stream:
        return await StreamRelay(answer, door).run(request, {}, record=_forget)
    return await relay_json(request, answer, {}, door=door, record=_forget)


async def _forget(outcome: Outcome) -> None:
    """Nothing is journaled for an unmanaged answer."""


async def start_stream(request: web.Request, response: web.StreamResponse) -> None:
    """Send the headers of a streamed response, and say so on the request."""
    request[RESPONSE_STARTED] = True
    await response.prepare(request)


def note_error(request: web.Request, exc: ProxyError) -> None:
    """Say on the request which error the proxy answered with (the access log and metrics read it)."""
    request[PROXY_ERROR] = exc.code or exc.type


def _headers(answer: Answer, extra: Mapping[str, str]) -> CIMultiDict[str]:
    headers = answer.relay_headers()
    headers.popall("Content-Encoding", None)
    headers.update(extra)
    return headers


async def read_answer(answer: Answer) -> tuple[bytes, Outcome]:
    """A JSON answer read whole, and what it came to; a cut body or an unreachable upstream raises."""
    try:
        body = await answer.read()
    except asyncio.CancelledError:
        answer.close()
        raise
    if answer.status >= 400:
        return body, Outcome("failed", error=error_of(body, answer.status))
    try:
        completion = parse_completion(body)
    except NotACompletion as exc:
        if isinstance(exc.__cause__, orjson.JSONDecodeError):  # a cut body: never relay it as an answer
            raise UpstreamUnavailable("the upstream answer was cut or is not JSON") from exc
        return body, Outcome("failed", error={"status": answer.status, "message": str(exc)})
    return body, Outcome("completed", completion.message, completion.usage, finish_reason=completion.finish_reason)


async def relay_json(
    request: web.Request, answer: Answer, extra: Mapping[str, str], *, door: Door, record: Record
) -> web.Response:
    try:
        body, outcome = await read_answer(answer)
    except ProxyError as exc:
        await record(Outcome(ended_by(exc), error={"status": exc.status, "message": exc.message}))
        return _error_response(request, exc, door)
    await record(outcome)
    if outcome.status == "completed":
        body = await door.body(body, outcome)
    elif answer.status >= 400:
        body = door.error_body(answer.status, body)
    return web.Response(status=answer.status, body=body, headers=_headers(answer, extra))


def _error_response(request: web.Request, exc: ProxyError, door: Door) -> web.Response:
    note_error(request, exc)
    body = door.error_body(exc.status, orjson.dumps(exc.body()))
    return web.Response(status=exc.status, body=body, content_type="application/json")


class StreamRelay:
    """Relays one SSE answer as it arrives, through the door's writer, and assembles what it said."""

    def __init__(self, answer: Answer, door: Door) -> None:
        self.answer = answer
        self.door = door
        self.writer: StreamWriter = door.stream()
        self.assembler = StreamAssembler()
        self._parser = SSEParser()
        self._done = False

    async def run(self, request: web.Request, extra: Mapping[str, str], *, record: Record) -> web.StreamResponse:
        """Relay the stream; `record(outcome)` runs before the door's final events are sent."""
        answer = self.answer
        if answer.status >= 400 or "text/event-stream" not in answer.headers.get("Content-Type", ""):
            return await self._not_a_stream(request, extra, record)
        response = web.StreamResponse(status=answer.status, headers=_headers(answer, extra))
        response.content_type = "text/event-stream"
        try:
            await start_stream(request, response)
            head = self.writer.start()
            if head:
                await response.write(head)
            async for chunk in answer.iter_chunks():
                out = self._forwardable(chunk)
                if out:
                    await response.write(out)
            tail = self._flush()
            if tail:
                await response.write(tail)
        except ProxyError as exc:
            # Cut or stalled: end with an error event, never as if the answer were whole.
            answer.close()
            message = self.assembler.message()
            await record(Outcome(ended_by(exc), message, error={"status": exc.status, "message": exc.message}))
            return await self._end_with_error(request, response, exc)
        except (asyncio.CancelledError, ConnectionResetError):
            answer.close()
            await record(Outcome("canceled", self.assembler.message(), self.assembler.usage))
            raise
        a = self.assembler
        outcome = Outcome("completed", a.message(), a.usage, finish_reason=a.finish_reason)
        if a.error is not None:
            outcome = Outcome("failed", a.message(), a.usage, {"status": answer.status, **a.error})
        cut = None
        if not self._done and a.finish_reason is None and a.error is None:
            cut = UpstreamUnavailable("the upstream ended the stream before the answer was complete")
            outcome = Outcome("failed", a.message(), a.usage, {"status": 502, "message": cut.message})
        try:
            await record(outcome)
        except ProxyError as exc:
            # The turn could not be journaled: the stream ends with an error event instead
            # of its end, so the client does not take an answer the session will not have.
            return await self._end_with_error(request, response, exc)
        if cut is not None:
            return await self._end_with_error(request, response, cut)
        try:
            end = await self.writer.end(outcome)
        except ProxyError as exc:  # the door could not keep what it answers with (a stored response)
            return await self._end_with_error(request, response, exc)
        await response.write(end)
        await response.write_eof()
        return response

    async def _not_a_stream(self, request: web.Request, extra: Mapping[str, str], record: Record) -> web.Response:
        """An error answer (or a JSON one where a stream was asked for): relayed as JSON, the turn failed."""
        answer = self.answer
        try:
            body, outcome = await read_answer(answer)
        except ProxyError as exc:
            await record(Outcome(ended_by(exc), error={"status": exc.status, "message": exc.message}))
            return _error_response(request, exc, self.door)
        if outcome.status == "completed":  # a whole answer where a stream was asked for
            unasked = UpstreamUnavailable("the upstream answered without the event stream asked for")
            await record(Outcome("failed", error={"status": unasked.status, "message": unasked.message}))
            return _error_response(request, unasked, self.door)
        await record(outcome)
        if answer.status >= 400:
            body = self.door.error_body(answer.status, body)
        return web.Response(status=answer.status, body=body, headers=_headers(answer, extra))

    async def _end_with_error(
        self, request: web.Request, response: web.StreamResponse, exc: ProxyError
    ) -> web.StreamResponse:
        note_error(request, exc)
        await response.write(self.writer.error(exc))
        await response.write_eof()
        return response

    def _forwardable(self, data: bytes) -> bytes:
        return self._write(self._parser.feed(data))

    def _flush(self) -> bytes:
        return self._write(self._parser.flush())

    def _write(self, events: list[SSEEvent]) -> bytes:
        out = []
        writer = self.writer
        for event in events:
            chunk = None
            if event.done:
                self._done = True
            elif event.data is not None:
                parsed = parse_chunk(event.data)
                if isinstance(parsed, dict):
                    chunk = parsed
                    self.assembler.add(parsed)
            written = writer.event(event, chunk)
            if written:
                out.append(written)
        return b"".join(out)

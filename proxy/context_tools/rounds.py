"""The proxy's tool rounds: several upstream answers, presented to the relay as one.

A request that offers the proxy's tools has its answer read through `ToolRounds`
(an `Answer`, like an upstream response). When the model calls one of the proxy's
tools, the proxy answers the call itself and asks the model again, with the call and
its result appended to the same composed messages, at most `max_rounds` times per
client request; the request after the last round offers no proxy tools, so the model
must answer. The client sees one answer: the content of every round in order, only
its own tool calls, and the usage summed over the rounds (it pays for them).

An answer that calls both a proxy tool and a client tool ends the rounds: the proxy
answers its own call (the call still takes effect and is recorded), and the client
gets the answer with its own calls only, so no later context holds a dangling call.
The rounds (each call message, its results and its usage) are journaled with the
turn (`rounds`) but are never part of a later context.

Streaming: content deltas are relayed as they arrive, so a plain answer streams as
before. Tool-call deltas are held until the round's end, since a call's name may make
it the proxy's: the proxy's calls are then dropped and the next round is streamed into
the same response (one chunk id throughout); the client's calls go out whole, each in
one delta, just before the finish chunk. Each round's usage chunk is dropped and one
summed usage chunk ends the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import orjson
from multidict import CIMultiDict

from proxy.context_tools.resolver import ToolResolver
from proxy.context_tools.tools import ProxyTools, add_usage, client_message, round_messages, split_calls
from proxy.types import JSONObject, Message
from proxy.upstream import Answer, SSEEvent, SSEParser, StreamAssembler, is_usage_only, parse_chunk
from proxy.upstream.completion import assistant_message, error_of

Send = Callable[[list[Message], bool], Awaitable[Answer]]
"""(the messages the rounds added so far, offer the proxy's tools?) -> the next upstream answer."""
OnRound = Callable[[int, tuple[str, ...]], None]
"""Told each round's number and the names of the calls the proxy answered in it."""

_HEAD_KEYS = ("id", "object", "created", "model", "system_fingerprint")


class ToolRounds:
    def __init__(
        self, first: Answer, *, send: Send, tools: ProxyTools, resolver: ToolResolver, on_round: OnRound
    ) -> None:
        self._first = first
        self._answer = first
        self._send = send
        self._tools = tools
        self._resolver = resolver
        self._on_round = on_round
        self.status: int = first.status
        self.headers: Mapping[str, str] = first.headers
        self.seconds: float = first.seconds
        self.rounds: list[JSONObject] = []
        """The journal's view: per round, the call message, the results and the usage."""
        self.first_usage: JSONObject | None = None
        """The first answer's usage: the one that measured the composed context."""
        self._answers = 0
        self._usage: JSONObject | None = None
        self._added: list[Message] = []
        self._content: list[str] = []
        self._head: JSONObject | None = None
        self._role_sent = False

    def relay_headers(self) -> CIMultiDict[str]:
        return self._first.relay_headers()

    def close(self) -> None:
        self._answer.close()

    async def _settle(self, message: Message, usage: JSONObject | None) -> Message | None:
        """The client's message when this answer is final; None when the proxy answered its
        own calls and the next round's answer is on its way."""
        self._answers += 1
        if self._answers == 1:
            self.first_usage = usage
        self._usage = add_usage(self._usage, usage)
        calls = split_calls(message, self._tools.names)
        offered = len(self.rounds) < self._tools.max_rounds
        if not calls.proxy:
            return message
        if not offered:  # a call of a tool this request did not offer: nothing to answer
            return client_message(message, calls.client)
        results = [await self._resolver.answer(call) for call in calls.proxy]
        added = round_messages(assistant_message(message), calls.proxy, results)
        self.rounds.append({"message": added[0], "results": added[1:], "usage": usage})
        self._on_round(len(self.rounds), tuple(str(c["function"]["name"]) for c in calls.proxy))
        if calls.client:
            return client_message(message, calls.client)
        self._added.extend(added)
        if message.get("content"):
            self._content.append(str(message["content"]))
        self._answer = await self._send(list(self._added), len(self.rounds) < self._tools.max_rounds)
        return None

    async def read(self) -> bytes:
        """The final completion: every round's content, the client's calls, summed usage."""
        while True:
            answer = self._answer
            body = await answer.read()
            self.status, self.headers = answer.status, answer.headers
            completion = _completion(body) if answer.status < 400 else None
            if completion is None:
                return body
            choice = completion["choices"][0]
            final = await self._settle(choice["message"], completion.get("usage"))
            if final is not None:
                content = "".join([*self._content, str(final.get("content") or "")])
                choice["message"] = {**final, "content": content or final.get("content")}
                choice["finish_reason"] = _finish(final, choice.get("finish_reason"))
                completion["usage"] = self._usage
                return orjson.dumps(completion)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The rounds as one event stream (the first answer's status the relay already checked)."""
        while True:
            answer = self._answer
            if answer.status >= 400 or "text/event-stream" not in answer.headers.get("Content-Type", ""):
                error = error_of(await answer.read(), answer.status)
                yield b"data: " + orjson.dumps({"error": error}) + b"\n\n"
                return
            assembler, parser = StreamAssembler(), SSEParser()
            async for raw in answer.iter_chunks():
                out = b"".join(self._visible(event, assembler) for event in parser.feed(raw))
                if out:
                    yield out
            tail = b"".join(self._visible(event, assembler) for event in parser.flush())
            if tail:
                yield tail
            if assembler.error is not None:
                return
            final = await self._settle(assembler.message(), assembler.usage)
            if final is not None:
                yield self._ending(final, assembler.finish_reason)
                return

    def _visible(self, event: SSEEvent, assembler: StreamAssembler) -> bytes:
        """What the client sees of one upstream event while the round may still turn out
        to be the proxy's: content and refusal deltas; no tool calls, finish or usage."""
        if event.done or event.data is None:
            return b""
        chunk = parse_chunk(event.data)
        if not isinstance(chunk, dict):
            return b""
        assembler.add(chunk)
        if "error" in chunk:
            return event.raw
        if self._head is None:
            self._head = {k: chunk[k] for k in _HEAD_KEYS if k in chunk}
        if is_usage_only(chunk):
            return b""
        original = chunk.get("choices") or []
        choices = [c for c in map(self._visible_choice, original) if c is not None]
        if not choices:
            return b""
        if choices == original and chunk.get("id") == self._head.get("id"):
            return event.raw  # nothing held back: relayed byte for byte
        return _event({**chunk, **self._head, "choices": choices})

    def _visible_choice(self, choice: JSONObject) -> JSONObject | None:
        delta = {k: v for k, v in (choice.get("delta") or {}).items() if k != "tool_calls"}
        if "role" in delta:
            if self._role_sent:
                del delta["role"]
            else:
                self._role_sent = True
                return {**choice, "delta": delta, "finish_reason": None}
        if not any(delta.values()):
            return None
        return {**choice, "delta": delta, "finish_reason": None}

    def _ending(self, final: Message, reason: str | None) -> bytes:
        """The client's calls (whole), the finish chunk, the summed usage, `[DONE]`."""
        head = self._head or {"object": "chat.completion.chunk"}
        delta: JSONObject = {} if self._role_sent else {"role": "assistant"}
        calls = final.get("tool_calls") or []
        if calls:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(calls)]
        events = []
        if delta:
            events.append(_event({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
        finish = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": _finish(final, reason)}
        events.append(_event({**head, "choices": [finish]}))
        if self._usage is not None:
            events.append(_event({**head, "choices": [], "usage": self._usage}))
        events.append(b"data: [DONE]\n\n")
        return b"".join(events)


def _event(chunk: JSONObject) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _finish(final: Message, reason: object) -> str:
    if final.get("tool_calls"):
        return "tool_calls"
    return "stop" if reason in (None, "tool_calls") else str(reason)


def _completion(body: bytes) -> JSONObject | None:
    """The body as a completion whose first choice holds a message, else None (relayed as is)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return parsed if isinstance(choices[0].get("message"), dict) else None

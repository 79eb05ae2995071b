"""Anthropic's Messages API as an upstream: the request written by `anthropic.py`'s mapping,
the answer read back through `Translated`, as a Chat Completions answer.

The request's system block becomes `system`, tool calls `tool_use` blocks, tool results
`tool_result` blocks, `max_tokens` is always set (the request's, else the model's
configured `max_tokens`), and the core's Anthropic marks (`cache_control`, thinking blocks,
`anthropic` parameters) are sent as they are. A body that carries `context_management` needs
the `anthropic-beta` header of each of its edits (`betas_for`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import orjson
from multidict import CIMultiDict

from proxy.config.checks import CONTEXT_EDIT_BETAS
from proxy.context.model import ChatRequest
from proxy.dialects import anthropic
from proxy.dialects.base import Outgoing
from proxy.types import JSONObject
from proxy.upstream import Answer, SSEParser, UpstreamResponse, parse_chunk

_DONE = b"data: [DONE]\n\n"


class AnthropicMessages:
    def request(
        self, chat: ChatRequest, messages_json: bytes, *, default_max_tokens: int, unmarked: bool = False
    ) -> Outgoing:
        core = {**chat.body, "messages": orjson.loads(messages_json)}
        body = anthropic.to_messages_body(core, default_max_tokens=default_max_tokens)
        betas = betas_for(body)
        headers = {"anthropic-beta": ",".join(betas)} if betas else {}
        return Outgoing(anthropic.MESSAGES_PATH, orjson.dumps(body), headers)

    def answer(self, response: UpstreamResponse) -> Answer:
        return Translated(response)


def betas_for(body: JSONObject) -> list[str]:
    """The `anthropic-beta` names a Messages body needs, in order, once each: the betas of its
    `context_management` edits (an edit the proxy does not know is Anthropic's to judge)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    kinds = [edit.get("type") for edit in edits or () if isinstance(edit, dict)] if isinstance(edits, list) else []
    return list(dict.fromkeys(CONTEXT_EDIT_BETAS[k] for k in kinds if k in CONTEXT_EDIT_BETAS))


class Translated:
    """A Messages answer read as a Chat Completions one: a message as a completion, an event
    stream as chunks (then `[DONE]` once `message_stop` came), an error as OpenAI's error JSON."""

    def __init__(self, response: UpstreamResponse) -> None:
        self._response = response
        self.status = response.status
        self.seconds = response.seconds

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    def relay_headers(self) -> CIMultiDict[str]:
        headers = self._response.relay_headers()
        if self.status >= 400:
            headers["Content-Type"] = "application/json"
        return headers

    async def read(self) -> bytes:
        body = await self._response.read()
        if self.status >= 400:
            return anthropic.error_from_anthropic(self.status, body)
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body  # a cut body: the relay reads it as one
        if not isinstance(message, dict):
            return body
        return orjson.dumps(anthropic.completion_from_message(message))

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        if self.status >= 400 or "text/event-stream" not in self.headers.get("Content-Type", ""):
            yield await self.read()
            return
        parser, translator = SSEParser(), anthropic.ChunkTranslator()
        async for raw in self._response.iter_chunks():
            out: list[bytes] = []
            for event in parser.feed(raw):
                data = parse_chunk(event.data) if event.data is not None else None
                if not isinstance(data, dict) or not isinstance(data.get("type"), str):
                    continue
                out.extend(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in translator.feed(data["type"], data))
                if data["type"] == "message_stop":
                    out.append(_DONE)
            if out:
                yield b"".join(out)

    def close(self) -> None:
        self._response.close()

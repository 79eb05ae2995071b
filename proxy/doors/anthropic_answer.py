"""The core's answer in Anthropic's shapes: a Message, a Messages event stream, an error.

`message_from_completion` turns a `chat.completion` into a Message; `MessageStream`
turns a chat.completion.chunk stream into Messages SSE events.

`MessageStream` is a small state machine: at most one content block is open at a time;
a delta of another kind closes it (`content_block_stop`) and opens the next
(`content_block_start`), so the client sees Anthropic's order: `message_start`, `ping`,
blocks, `message_delta` (stop reason, usage), `message_stop`. An `error` event ends a
stream without `message_stop`, which is what makes the anthropic SDK raise.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from proxy.types import JSONObject

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}
_STOP_REASONS["content_filter"] = "refusal"
_ANTHROPIC_STOP_REASONS = frozenset(
    {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "model_context_window_exceeded"}
)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error type for a status: its documented table, 503 as overloaded (so
    clients back off and retry), 504 as timeout; other 4xx invalid_request_error, other
    statuses api_error."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def stop_reason(finish_reason: object, stop_sequence: str | None = None) -> str:
    """Chat's finish_reason as Anthropic's stop_reason; `stop` with a named sequence is
    `stop_sequence`; a reason already in Anthropic's words is kept; none is `end_turn`."""
    if finish_reason == "stop" and stop_sequence:
        return "stop_sequence"
    if isinstance(finish_reason, str) and finish_reason in _ANTHROPIC_STOP_REASONS:
        return finish_reason
    return _STOP_REASONS.get(finish_reason, "end_turn") if isinstance(finish_reason, str) else "end_turn"


def anthropic_usage(usage: JSONObject) -> JSONObject:
    """OpenAI usage as Anthropic's: `input_tokens` are the prompt tokens neither read from
    nor written to the cache (never negative). Cache reads are Anthropic's own figure when
    the usage carries it, else OpenAI's `cached_tokens`."""
    details = usage.get("prompt_tokens_details")
    read = usage.get("cache_read_input_tokens")
    if not _count(read) and isinstance(details, dict):
        read = details.get("cached_tokens")
    read = _count(read)
    created = _count(usage.get("cache_creation_input_tokens"))
    return {
        "input_tokens": max(_count(usage.get("prompt_tokens")) - read - created, 0),
        "output_tokens": _count(usage.get("completion_tokens")),
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def message_id(completion_id: object = None) -> str:
    """An Anthropic message id: the completion's own when it is one (`msg_...`), derived
    from a `chatcmpl-...` id, else a fresh one."""
    if isinstance(completion_id, str) and completion_id:
        if completion_id.startswith("msg_"):
            return completion_id
        return "msg_" + completion_id.removeprefix("chatcmpl-")
    return f"msg_{uuid.uuid4().hex[:24]}"


def message_from_completion(completion: JSONObject, *, model: str) -> JSONObject:
    """A core `chat.completion` as an Anthropic Message.

    Blocks come thinking first (`thinking_blocks` verbatim; else a `reasoning_content`
    becomes one thinking block with an empty signature, which `parse_request` takes back
    as reasoning only), then text, then tool_use (arguments that do not parse to a JSON
    object give `input: {}`). An OpenAI `refusal` with no text becomes the text.
    """
    choices = completion.get("choices")
    choice: JSONObject = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    raw = choice.get("message")
    message: JSONObject = raw if isinstance(raw, dict) else {}
    content: list[JSONObject] = []
    blocks = message.get("thinking_blocks")
    reasoning = message.get("reasoning_content")
    if isinstance(blocks, list) and blocks:
        content.extend(dict(block) for block in blocks if isinstance(block, dict))
    elif isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = message.get("content")
    if isinstance(text, list):
        text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict) and p.get("type") == "text")
    refusal = message.get("refusal")
    if not text and isinstance(refusal, str) and refusal:
        text = refusal
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for call in _items(message.get("tool_calls")):
        if isinstance(call, dict):
            content.append(_tool_use(call))
    sequence = choice.get("stop_sequence") if isinstance(choice.get("stop_sequence"), str) else None
    reason = "refusal" if text and text == refusal else stop_reason(choice.get("finish_reason"), sequence)
    usage = completion.get("usage")
    return {
        "id": message_id(completion.get("id")),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence if reason == "stop_sequence" else None,
        "usage": anthropic_usage(usage if isinstance(usage, dict) else {}),
    }


def _tool_use(call: JSONObject) -> JSONObject:
    raw = call.get("function")
    function: JSONObject = raw if isinstance(raw, dict) else {}
    try:
        arguments = orjson.loads(function.get("arguments") or "{}")
    except (orjson.JSONDecodeError, TypeError):
        arguments = {}
    call_id = call.get("id") if isinstance(call.get("id"), str) else f"toolu_{uuid.uuid4().hex[:24]}"
    name = function.get("name") if isinstance(function.get("name"), str) else ""
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments if isinstance(arguments, dict) else {}}


def error_body(status: int, openai_error: JSONObject) -> JSONObject:
    """An error (OpenAI's shape, the proxy's own or an upstream's) in Anthropic's shape.

    The type follows the status (`error_type`); an error already in Anthropic's shape
    keeps its type.
    """
    error = openai_error.get("error")
    error = error if isinstance(error, dict) else {}
    message = error.get("message")
    kind = error.get("type") if openai_error.get("type") == "error" and isinstance(error.get("type"), str) else None
    text = message if isinstance(message, str) and message else f"HTTP {status}"
    return {"type": "error", "error": {"type": kind or error_type(status), "message": text}}


def _items(value: object) -> list[Any]:
    """A list field of the core's answer; anything else is read as no items."""
    return value if isinstance(value, list) else []


def _event(kind: str, data: JSONObject) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


class MessageStream:
    """Turns one core stream into Anthropic events: `start()`, `feed(chunk)` per chunk,
    then `finish(...)` or `error(...)`. Each call returns the bytes to write, possibly none.

    Block state: `_open` is the kind of the open block (`text`, `thinking`, `tool`) or
    None; `_blocks` counts blocks started (the next block's index); `_tools` maps a chat
    tool call index to its block index. A delta for a tool call whose block was already
    closed (upstreams send calls one after another, so this is rare) is written to that
    block's index without reopening it.
    """

    def __init__(self, *, model: str, message_id: str, input_tokens: int) -> None:
        self._model = model
        self._id = message_id
        self._input_tokens = input_tokens
        self._open: str | None = None
        self._blocks = 0
        self._tools: dict[int, int] = {}
        self._usage: JSONObject | None = None
        self._finish_reason: str | None = None
        self._stop_sequence: str | None = None

    def __repr__(self) -> str:
        return f"<MessageStream {self._id} open={self._open} blocks={self._blocks}>"

    def start(self) -> bytes:
        message: JSONObject = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._input_tokens, "output_tokens": 0},
        }
        return _event("message_start", {"message": message}) + _event("ping", {})

    def feed(self, chunk: JSONObject) -> bytes:
        """One chat.completion.chunk: its deltas as events; its usage and finish reason
        are remembered for `finish`."""
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return b""
        choice = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self._finish_reason = choice["finish_reason"]
        if isinstance(choice.get("stop_sequence"), str):
            self._stop_sequence = choice["stop_sequence"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return b""
        out: list[bytes] = []
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.append(self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""}))
            out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
        for block in _items(delta.get("thinking_blocks")):
            if isinstance(block, dict):
                out.append(self._thinking_block(block))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(self._open_block("text", {"type": "text", "text": ""}))
            out.append(self._delta({"type": "text_delta", "text": content}))
        for position, call in enumerate(_items(delta.get("tool_calls"))):
            if isinstance(call, dict):
                out.append(self._tool_delta(call, position))
        return b"".join(out)

    def finish(self, usage: JSONObject | None, finish_reason: str | None) -> bytes:
        """Closes the open block and the message. `usage` and `finish_reason` default to
        what the stream carried; without any usage only `output_tokens: 0` is sent, so the
        client keeps `message_start`'s input figure."""
        usage = usage if usage is not None else self._usage
        reason = stop_reason(finish_reason or self._finish_reason, self._stop_sequence)
        figures = anthropic_usage(usage) if usage is not None else {"output_tokens": 0}
        delta = {"stop_reason": reason, "stop_sequence": self._stop_sequence if reason == "stop_sequence" else None}
        return self._close() + _event("message_delta", {"delta": delta, "usage": figures}) + _event("message_stop", {})

    def error(self, status: int, message: str) -> bytes:
        """An `error` event (its type by `error_type(status)`); nothing may follow it."""
        return _event("error", {"error": {"type": error_type(status), "message": message}})

    def _open_block(self, kind: str, block: JSONObject) -> bytes:
        if self._open == kind and kind != "tool":
            return b""
        closed = self._close()
        self._open = kind
        self._blocks += 1
        return closed + _event("content_block_start", {"index": self._blocks - 1, "content_block": block})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return _event("content_block_stop", {"index": self._blocks - 1})

    def _delta(self, delta: JSONObject, index: int | None = None) -> bytes:
        at = self._blocks - 1 if index is None else index
        return _event("content_block_delta", {"index": at, "delta": delta})

    def _thinking_block(self, block: JSONObject) -> bytes:
        """A complete block: it ends the streamed thinking block (its signature), or stands alone."""
        if block.get("type") == "redacted_thinking":
            return (
                self._open_block("redacted", {"type": "redacted_thinking", "data": block.get("data", "")})
                + self._close()
            )
        out = b""
        if self._open != "thinking":
            out = self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            if isinstance(block.get("thinking"), str) and block["thinking"]:
                out += self._delta({"type": "thinking_delta", "thinking": block["thinking"]})
        signature = block.get("signature") if isinstance(block.get("signature"), str) else ""
        return out + self._delta({"type": "signature_delta", "signature": signature}) + self._close()

    def _tool_delta(self, call: JSONObject, position: int) -> bytes:
        index = call["index"] if isinstance(call.get("index"), int) else position
        function: Any = call.get("function") if isinstance(call.get("function"), dict) else {}
        out = b""
        if index not in self._tools:
            call_id = call["id"] if isinstance(call.get("id"), str) else f"toolu_{uuid.uuid4().hex[:24]}"
            name = function["name"] if isinstance(function.get("name"), str) else ""
            out = self._open_block("tool", {"type": "tool_use", "id": call_id, "name": name, "input": {}})
            self._tools[index] = self._blocks - 1
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out += self._delta({"type": "input_json_delta", "partial_json": arguments}, self._tools[index])
        return out

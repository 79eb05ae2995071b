"""Incremental server-sent events parsing and assembly of streamed chat completions.

`SSEParser.feed` takes bytes as they arrive (an event may split across reads, or a
read may hold several) and returns the complete events, each with its raw bytes so
the relay can forward it unchanged. `StreamAssembler` folds chat completion chunks
into the final assistant message (content, refusal, tool calls) and the usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.types import JSONObject, Message, frozen


@frozen
class SSEEvent:
    raw: bytes
    data: bytes | None
    """The joined `data:` lines, None for a comment-only event."""

    @property
    def done(self) -> bool:
        return self.data == b"[DONE]"


class SSEParser:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += chunk
        if b"\r" in self._buffer:
            self._buffer = self._buffer.replace(b"\r\n", b"\n")
        events: list[SSEEvent] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return events
            raw, self._buffer = self._buffer[: end + 2], self._buffer[end + 2 :]
            events.append(SSEEvent(raw, _data_of(raw)))

    def flush(self) -> list[SSEEvent]:
        """A final event the upstream did not terminate with a blank line."""
        raw, self._buffer = self._buffer, b""
        if not raw.strip():
            return []
        raw = raw.rstrip(b"\n") + b"\n\n"
        return [SSEEvent(raw, _data_of(raw))]


def _data_of(raw: bytes) -> bytes | None:
    lines = [line[5:].lstrip(b" ") for line in raw.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


@dataclass
class _ToolCall:
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Accumulates choice 0 of a chat completion stream."""

    def __init__(self) -> None:
        self.role = "assistant"
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, _ToolCall] = {}
        self.usage: JSONObject | None = None
        self.finish_reason: str | None = None
        self.error: JSONObject | None = None
        self.thinking_blocks: list[JSONObject] = []
        """Anthropic's thinking blocks, each whole (a dialect sends one when it ends)."""

    def add(self, chunk: JSONObject) -> None:
        if "error" in chunk and isinstance(chunk["error"], dict):
            self.error = chunk["error"]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            self._add_delta(choice.get("delta") or {})

    def _add_delta(self, delta: JSONObject) -> None:
        if delta.get("role"):
            self.role = delta["role"]
        if delta.get("content"):
            self.content.append(delta["content"])
        if delta.get("refusal"):
            self.refusal.append(delta["refusal"])
        if delta.get("thinking_blocks"):
            self.thinking_blocks.extend(delta["thinking_blocks"])
        for call in delta.get("tool_calls") or ():
            slot = self.tool_calls.setdefault(int(call.get("index", 0)), _ToolCall())
            slot.id = call.get("id") or slot.id
            slot.type = call.get("type") or slot.type
            function = call.get("function") or {}
            slot.name = function.get("name") or slot.name
            if function.get("arguments"):
                slot.arguments.append(function["arguments"])

    def message(self) -> Message:
        message: Message = {"role": self.role, "content": "".join(self.content) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.thinking_blocks:
            message["thinking_blocks"] = self.thinking_blocks
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": "".join(c.arguments)}}
                for _, c in sorted(self.tool_calls.items())
            ]
        return message


def parse_chunk(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def is_usage_only(chunk: Any) -> bool:
    """The final chunk `include_usage` adds: no choices, only usage."""
    return isinstance(chunk, dict) and not chunk.get("choices") and chunk.get("usage") is not None

"""Core `chat.completion.chunk`s -> Responses server-sent events, and the Response they build.

Every event is `event: <type>\\ndata: <json>\\n\\n`, its data carrying `type` and a
`sequence_number` counted from 0. Items open as the chunks need them: reasoning (from
`reasoning_content`), then the message (output_text, then a refusal part), then one
function call per tool-call index, and an item opened is never reopened: text that follows a
tool call starts a new message item. The stream ends exactly once, with `complete` (the `.done`
events of every open part and item, then `response.completed` or `response.incomplete`) or
with `fail` (`response.failed` alone: no `.done` event, no `response.completed`); OpenAI's
separate `error` event is not used, `response.failed` carries the error.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.doors.responses_codec._output import (
    call_item,
    item_id,
    message_item,
    reasoning_item,
    response_object,
    text_part,
    usage_of,
)
from proxy.doors.responses_codec._request import ResponsesCall
from proxy.types import JSONObject

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""Chat finish reasons that end a response as `incomplete`, and the reason it then gives."""


class ResponseStream:
    """One streamed response: `start`, `feed` per core chunk, then `complete` or `fail`; each returns SSE bytes."""

    def __init__(self, call: ResponsesCall, *, response_id: str, created_at: int) -> None:
        self._call = call
        self._id = response_id
        self._created_at = created_at
        self._sequence = 0
        self._items: list[JSONObject] = []
        self._ranks: dict[str, int] = {}
        self._reasoning: int | None = None
        self._message: int | None = None
        self._calls: dict[Any, int] = {}
        """Chat tool-call index -> output index of its function_call item (all stay open to the end)."""
        self._usage: JSONObject | None = None
        self._status = "in_progress"
        self._error: JSONObject | None = None
        self._incomplete: str | None = None

    @property
    def response(self) -> JSONObject:
        """The Response object as it stands (as it ended, once `complete` or `fail` ran)."""
        return response_object(
            self._call,
            response_id=self._id,
            created_at=self._created_at,
            status=self._status,
            output=list(self._items),
            usage=usage_of(self._usage) if self._status != "in_progress" else None,
            error=self._error,
            incomplete_reason=self._incomplete,
        )

    def start(self) -> bytes:
        return self._event("response.created", response=self.response) + self._event(
            "response.in_progress", response=self.response
        )

    def feed(self, chunk: JSONObject) -> bytes:
        """One core chunk -> its events; a usage chunk (with or without choices) is remembered for the end."""
        self._check_open()
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        choices = chunk.get("choices") or []
        delta = (choices[0].get("delta") or {}) if choices else {}
        out = b""
        if delta.get("reasoning_content"):
            out += self._reasoning_delta(str(delta["reasoning_content"]))
        if delta.get("content"):
            out += self._text_delta("output_text", str(delta["content"]))
        if delta.get("refusal"):
            out += self._text_delta("refusal", str(delta["refusal"]))
        for call in delta.get("tool_calls") or []:
            out += self._call_delta(call)
        return out

    def complete(self, usage: JSONObject | None, finish_reason: str | None) -> bytes:
        """Close every open part and item, then `response.completed`, or `response.incomplete` when the
        finish reason was `length` (max_output_tokens) or `content_filter`. `usage` is the core's (chat)
        usage; None means the one a usage chunk brought."""
        self._check_open()
        out = self._close_reasoning() + self._close_message()
        for index in sorted(self._calls.values()):
            item = self._items[index]
            item["status"] = "completed"
            out += self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
            out += self._event("response.output_item.done", output_index=index, item=item)
        if "msg" not in self._ranks and not self._calls:
            out += self._text_delta("output_text", "") + self._close_message()
        if usage is not None:
            self._usage = usage
        self._incomplete = INCOMPLETE_REASONS.get(finish_reason or "")
        self._status = "incomplete" if self._incomplete else "completed"
        return out + self._event(f"response.{self._status}", response=self.response)

    def fail(self, code: str, message: str) -> bytes:
        """`response.failed` with error {code, message} (code: one of OpenAI's ResponseErrorCode values,
        such as `server_error`); items still open are left `incomplete`."""
        self._check_open()
        for item in self._items:
            if item.get("status") == "in_progress":
                item["status"] = "incomplete"
        self._status = "failed"
        self._error = {"code": code, "message": message}
        return self._event("response.failed", response=self.response)

    def _check_open(self) -> None:
        if self._status != "in_progress":
            raise RuntimeError(f"the response stream already ended ({self._status})")

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = orjson.dumps({"type": kind, "sequence_number": self._sequence, **fields})
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def _open(self, prefix: str, item: JSONObject) -> tuple[int, bytes]:
        """Add an item (its id from its kind's rank) and announce it."""
        rank = self._ranks.get(prefix, 0)
        self._ranks[prefix] = rank + 1
        item["id"] = item_id(prefix, self._id, rank)
        self._items.append(item)
        index = len(self._items) - 1
        return index, self._event("response.output_item.added", output_index=index, item=item)

    def _reasoning_delta(self, text: str) -> bytes:
        out = b""
        if self._reasoning is None:
            out += self._close_message()
            self._reasoning, added = self._open("rs", reasoning_item("", []))
            part = {"type": "summary_text", "text": ""}
            self._items[self._reasoning]["summary"].append(part)
            out += added + self._summary_event("response.reasoning_summary_part.added", part=part)
        self._items[self._reasoning]["summary"][0]["text"] += text
        return out + self._summary_event("response.reasoning_summary_text.delta", delta=text)

    def _summary_event(self, kind: str, **fields: Any) -> bytes:
        assert self._reasoning is not None
        item = self._items[self._reasoning]
        return self._event(kind, item_id=item["id"], output_index=self._reasoning, summary_index=0, **fields)

    def _close_reasoning(self) -> bytes:
        if self._reasoning is None:
            return b""
        part = self._items[self._reasoning]["summary"][0]
        out = self._summary_event("response.reasoning_summary_text.done", text=part["text"])
        out += self._summary_event("response.reasoning_summary_part.done", part=part)
        out += self._event("response.output_item.done", output_index=self._reasoning, item=self._items[self._reasoning])
        self._reasoning = None
        return out

    def _text_delta(self, kind: str, text: str) -> bytes:
        """Text or refusal: into the open message's last part when it is of this kind, else a new part."""
        out = self._close_reasoning()
        if self._message is None:
            self._message, added = self._open("msg", message_item("", [], status="in_progress"))
            out += added
        parts = self._items[self._message]["content"]
        if not parts or parts[-1]["type"] != kind:
            out += self._close_part()
            parts.append(text_part("") if kind == "output_text" else {"type": "refusal", "refusal": ""})
            out += self._part_event("response.content_part.added", part=parts[-1])
        field = "text" if kind == "output_text" else "refusal"
        parts[-1][field] += text
        if kind == "output_text":
            return out + self._part_event("response.output_text.delta", delta=text, logprobs=[])
        return out + self._part_event("response.refusal.delta", delta=text)

    def _part_event(self, kind: str, **fields: Any) -> bytes:
        assert self._message is not None
        item = self._items[self._message]
        index = len(item["content"]) - 1
        return self._event(kind, item_id=item["id"], output_index=self._message, content_index=index, **fields)

    def _close_part(self) -> bytes:
        assert self._message is not None
        parts = self._items[self._message]["content"]
        if not parts:
            return b""
        part = parts[-1]
        if part["type"] == "output_text":
            out = self._part_event("response.output_text.done", text=part["text"], logprobs=[])
        else:
            out = self._part_event("response.refusal.done", refusal=part["refusal"])
        return out + self._part_event("response.content_part.done", part=part)

    def _close_message(self) -> bytes:
        if self._message is None:
            return b""
        out = self._close_part()
        item = self._items[self._message]
        item["status"] = "completed"
        out += self._event("response.output_item.done", output_index=self._message, item=item)
        self._message = None
        return out

    def _call_delta(self, call: Any) -> bytes:
        if not isinstance(call, dict):
            return b""
        function = call.get("function") or {}
        key = call.get("index", len(self._calls))
        out = b""
        if key not in self._calls:
            out += self._close_reasoning() + self._close_message()
            rank = self._ranks.get("fc", 0)
            call_id = str(call.get("id") or item_id("call", self._id, rank))
            name = str(function.get("name") or "")
            self._calls[key], added = self._open("fc", call_item("", call_id, name, "", status="in_progress"))
            out += added
        else:
            self._items[self._calls[key]]["name"] += str(function.get("name") or "")
        index = self._calls[key]
        item = self._items[index]
        arguments = function.get("arguments")
        if not arguments:
            return out
        item["arguments"] += str(arguments)
        return out + self._event(
            "response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=str(arguments)
        )

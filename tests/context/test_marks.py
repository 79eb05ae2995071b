"""Anthropic's marks in the core's messages: `has_marks` finds every one `strip_marks` removes,
so the OpenAI dialect may skip stripping whatever it does not find."""

from __future__ import annotations

import orjson
import pytest

from proxy.context.model import MESSAGE_MARKS, has_marks, strip_marks

CACHE = {"type": "ephemeral"}
MARKED = [
    *({"role": "assistant", "content": "x", mark: "y"} for mark in MESSAGE_MARKS),
    {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": CACHE}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "cache_control": CACHE}
    ]},
    *({"role": "user", "content": [{"type": kind}, {"type": "text", "text": "x"}]}
      for kind in ("thinking", "redacted_thinking", "document")),
]  # fmt: skip
PLAIN = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "a cache_control of thinking"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"type": "document"}'}}
    ]},
    {"role": "tool", "tool_call_id": "c", "content": "is_error: no"},
]  # fmt: skip


@pytest.mark.parametrize("message", MARKED)
def test_every_mark_strip_marks_removes_is_found(message: dict) -> None:
    assert strip_marks([message]) != [message]
    assert has_marks(orjson.dumps([*PLAIN, message]))


def test_messages_without_a_mark_are_not_found_and_strip_to_themselves() -> None:
    assert not has_marks(orjson.dumps(PLAIN))
    assert strip_marks(PLAIN) == PLAIN

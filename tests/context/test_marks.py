"""Anthropic's marks in the core's messages: `has_marks` finds every one `strip_marks` removes,
so the OpenAI dialect may skip stripping whatever it does not find."""

from __future__ import annotations

import orjson
import pytest

from proxy.context.compose import build_history, compose_screened, extend_history
from proxy.context.model import MESSAGE_MARKS, has_marks, strip_marks
from proxy.context.window import Window
from tests.context.factories import turn

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


def test_a_mark_in_a_settled_turn_or_in_what_is_new_is_known_to_the_composed_json() -> None:
    marked_answer = {"role": "assistant", "content": "a0", "reasoning_content": "thought"}
    plain = build_history(Window(), [turn(i, f"u{i}", f"a{i}") for i in range(4)])
    settled_mark = build_history(Window(), [turn(0, "u0", marked_answer), *(turn(i, f"u{i}") for i in range(1, 4))])
    extended = extend_history(plain, [turn(4, "u4", marked_answer), turn(5, "u5"), turn(6, "u6")])
    new = [{"role": "user", "content": "next"}]
    assert compose_screened(plain, new)[1] is True
    assert compose_screened(settled_mark, new)[1] is False, "screened once, as the turn settled"
    assert compose_screened(extended, new)[1] is False, "and as a later extension settled"
    assert compose_screened(plain, [{"role": "user", "content": [{"type": "document"}]}])[1] is False
    for h in (plain, settled_mark, extended):
        json, unmarked = compose_screened(h, new)
        assert unmarked is not has_marks(json)

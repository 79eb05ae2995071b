"""The OpenAI dialect: a marked request (one that came through the Messages door) loses Anthropic's
`cache_control` on parts, tool calls and tools; an unmarked one (the chat door) keeps what it sent."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.context.model import ChatRequest
from proxy.dialects.openai import OpenAIChat

CACHE = {"type": "ephemeral"}
CALL = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "cache_control": CACHE}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}, "cache_control": CACHE}
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": CACHE}]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "t1", "content": "ok", "is_error": True},
]


def sent(*, marked: bool) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "tools": [TOOL]}
    chat = ChatRequest(body, b"", "gpt-4o-mini", MESSAGES, False, False, marked=marked)
    outgoing = OpenAIChat().request(chat, orjson.dumps(MESSAGES), default_max_tokens=100)
    return orjson.loads(outgoing.body)  # type: ignore[no-any-return]


def test_a_marked_request_loses_every_cache_control() -> None:
    out = sent(marked=True)
    assert b"cache_control" not in orjson.dumps(out)
    assert out["messages"][1]["tool_calls"] == [{k: v for k, v in CALL.items() if k != "cache_control"}]
    assert out["tools"] == [{k: v for k, v in TOOL.items() if k != "cache_control"}]
    assert "is_error" not in out["messages"][2]


def test_an_unmarked_request_keeps_its_own_fields_but_no_message_marks() -> None:
    out = sent(marked=False)
    assert out["messages"][0] == MESSAGES[0] and out["messages"][1] == MESSAGES[1] and out["tools"] == [TOOL]
    assert "is_error" not in out["messages"][2]

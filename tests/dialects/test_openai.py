"""The OpenAI dialect: no message an OpenAI-compatible upstream gets carries Anthropic's marks (a
session may hold turns the Messages door journaled with them); a marked request (one that came
through the Messages door) loses `cache_control` on its tools too, an unmarked one keeps its tools."""

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


def test_an_unmarked_request_keeps_its_tools_but_no_message_marks() -> None:
    out = sent(marked=False)
    assert out["tools"] == [TOOL]
    assert out["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    assert out["messages"][1]["tool_calls"] == [{k: v for k, v in CALL.items() if k != "cache_control"}]
    assert "is_error" not in out["messages"][2]


def test_a_messages_turn_in_the_history_reaches_a_chat_request_unmarked() -> None:
    history = [{"role": "user", "content": [{"type": "document", "source": {}}, {"type": "text", "text": "hi"}]}]
    chat = ChatRequest({"model": "m", "messages": history}, b"", "m", history, False, False)
    out = orjson.loads(OpenAIChat().request(chat, orjson.dumps(history), default_max_tokens=1).body)
    assert out["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]

"""The Anthropic dialect: core (Chat Completions) requests to Messages bodies, Messages answers,
streams and errors back to Chat Completions shapes. Pure: no HTTP, no Redis."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.dialects.anthropic import (
    OPENING_USER_TEXT,
    ChunkTranslator,
    completion_from_message,
    error_from_anthropic,
    to_messages_body,
)
from proxy.errors import BadRequest
from proxy.upstream.sse import StreamAssembler

CACHE = {"type": "ephemeral"}
PNG = "data:image/png;base64,iVBORw0KGgo="
THOUGHT = {"type": "thinking", "thinking": "Two cities: look both up.", "signature": "sig-1"}
REDACTED = {"type": "redacted_thinking", "data": "opaque=="}


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return to_messages_body({"model": "claude-sonnet-4-5", "messages": messages, **extra}, default_max_tokens=4096)


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_system_and_developer_messages_become_one_system_string_in_order() -> None:
    out = body([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]}])  # fmt: skip
    assert out["system"] == "Be brief.\n\nUse metric units."
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_a_system_part_with_cache_control_keeps_text_blocks() -> None:
    system = [{"type": "text", "text": "Long rules.", "cache_control": CACHE}, {"type": "text", "text": "More."}]
    out = body([{"role": "system", "content": system}, {"role": "user", "content": "hi"}])
    assert out["system"] == [{"type": "text", "text": "Long rules.", "cache_control": CACHE},
                             {"type": "text", "text": "More."}]  # fmt: skip


def test_a_multi_turn_conversation_with_thinking_and_parallel_tool_calls() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "Looking both up.", "thinking_blocks": [THOUGHT, REDACTED],
         "reasoning_content": THOUGHT["thinking"],
         "tool_calls": [call("toolu_1", "weather", '{"city": "Paris"}'), call("toolu_2", "weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "no such station", "is_error": True},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "Sunny in both."},
        {"role": "user", "content": "Thanks"},
    ]  # fmt: skip
    assert body(messages)["messages"] == [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": [
            THOUGHT, REDACTED, {"type": "text", "text": "Looking both up."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such station", "is_error": True},
            {"type": "text", "text": "And tomorrow?"}]},
        {"role": "assistant", "content": "Sunny in both."},
        {"role": "user", "content": "Thanks"},
    ]  # fmt: skip


def test_tool_results_come_before_a_user_text_that_preceded_them() -> None:
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None,
                "tool_calls": [call("t1", "f", "{}")]}, {"role": "user", "content": "also this"},
                {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "done", "cache_control": CACHE}]}]  # fmt: skip
    assert body(messages)["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "done", "cache_control": CACHE},
        {"type": "text", "text": "also this"},
    ]  # fmt: skip


def test_consecutive_same_role_messages_share_one_turn_and_empty_ones_vanish() -> None:
    messages = [{"role": "user", "content": "one"}, {"role": "user", "content": ""}, {"role": "user", "content": "two"},
                {"role": "assistant", "content": ""}, {"role": "assistant", "content": "three"}]  # fmt: skip
    assert body(messages)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "three"},
    ]


def test_a_conversation_opening_with_the_assistant_gets_a_user_turn_first() -> None:
    out = body([{"role": "system", "content": "s"}, {"role": "assistant", "content": "How can I help?"},
                {"role": "user", "content": "hi"}])  # fmt: skip
    assert out["messages"][0] == {"role": "user", "content": OPENING_USER_TEXT}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_unparsable_tool_arguments_become_an_empty_input() -> None:
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None,
                "tool_calls": [call("t1", "f", '{"cut": '), call("t2", "f", "[1]")]}]  # fmt: skip
    inputs = [block["input"] for block in body(messages)["messages"][1]["content"]]
    assert inputs == [{}, {}]


def test_images_documents_files_and_cache_control_on_parts() -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}, "title": "t"}
    parts = [
        {"type": "text", "text": "Compare", "cache_control": CACHE},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}, "cache_control": CACHE},
        document,
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
    ]
    assert body([{"role": "user", "content": parts}])["messages"][0]["content"] == [
        {"type": "text", "text": "Compare", "cache_control": CACHE},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}, "cache_control": CACHE},
        document,
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
    ]


@pytest.mark.parametrize(
    ("part", "param"),
    [
        ({"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}, "messages[0].content[0]"),
        ({"type": "image_url", "image_url": {"url": "ftp://host/cat.png"}}, "messages[0].content[0]"),
        ({"type": "file", "file": {"file_id": "file-1"}}, "messages[0].content[0]"),
    ],
)
def test_parts_messages_cannot_carry_are_refused(part: dict[str, Any], param: str) -> None:
    with pytest.raises(BadRequest) as refused:
        body([{"role": "user", "content": [part]}])
    assert refused.value.param == param


def test_tools_and_tool_choice() -> None:
    tools = [
        {"type": "function", "function": {"name": "weather", "description": "Weather now",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": True}},
        {"type": "function", "function": {"name": "noargs"}, "cache_control": CACHE},
    ]  # fmt: skip
    out = body([{"role": "user", "content": "hi"}], tools=tools, tool_choice="required", parallel_tool_calls=False)
    assert out["tools"] == [
        {"name": "weather", "description": "Weather now",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": True},
        {"name": "noargs", "input_schema": {"type": "object", "properties": {}}, "cache_control": CACHE},
    ]  # fmt: skip
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", False, {"type": "none"}),
        ({"type": "function", "function": {"name": "weather"}}, None, {"type": "tool", "name": "weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice_mapping(choice: Any, parallel: Any, expected: dict[str, Any] | None) -> None:
    tools = [{"type": "function", "function": {"name": "weather"}}]
    out = body([{"role": "user", "content": "hi"}], tools=tools, tool_choice=choice, parallel_tool_calls=parallel)
    assert out.get("tool_choice") == expected


def test_tool_choice_without_tools_is_not_sent_and_other_tool_types_are_refused() -> None:
    assert "tool_choice" not in body([{"role": "user", "content": "hi"}], tool_choice="required")
    with pytest.raises(BadRequest):
        body([{"role": "user", "content": "hi"}], tools=[{"type": "custom", "custom": {"name": "x"}}])


def test_sampling_fields_limits_and_dropped_fields() -> None:
    out = body(
        [{"role": "user", "content": "hi"}],
        max_tokens=50, max_completion_tokens=70, stop="END", temperature=1.7, top_p=0.9, stream=True, user="u-1",
        n=2, logprobs=True, response_format={"type": "json_object"}, stream_options={"include_usage": True},
        frequency_penalty=0.5, seed=3, metadata={"k": "v"}, service_tier="flex",
    )  # fmt: skip
    assert out == {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 70,
                   "stop_sequences": ["END"], "temperature": 1.0, "top_p": 0.9, "stream": True,
                   "metadata": {"user_id": "u-1"}}  # fmt: skip
    assert body([{"role": "user", "content": "hi"}], max_tokens=50, stop=["a", "b"])["stop_sequences"] == ["a", "b"]
    assert body([{"role": "user", "content": "hi"}])["max_tokens"] == 4096


def test_anthropic_extras_are_merged_last() -> None:
    extras = {"top_k": 5, "metadata": {"user_id": "from-extras"}, "context_management": {"edits": []},
              "thinking": {"type": "adaptive"}}  # fmt: skip
    out = body([{"role": "user", "content": "hi"}], user="u-1", reasoning_effort="high", anthropic=extras)
    assert out["top_k"] == 5 and out["context_management"] == {"edits": []}
    assert out["metadata"] == {"user_id": "from-extras"} and out["thinking"] == {"type": "adaptive"}
    assert "anthropic" not in out


def test_no_thinking_for_a_tool_round_begun_without_it() -> None:
    unthought = {"role": "assistant", "content": None, "tool_calls": [call("t1", "f", "{}")]}
    messages = [{"role": "user", "content": "go"}, unthought, {"role": "tool", "tool_call_id": "t1", "content": "ok"}]
    assert "thinking" not in body(messages, reasoning_effort="high")
    thought = {**unthought, "thinking_blocks": [THOUGHT]}
    messages = [messages[0], thought, messages[2]]
    assert body(messages, reasoning_effort="high")["thinking"] == {"type": "enabled", "budget_tokens": 24576}


@pytest.mark.parametrize(
    ("fields", "thinking", "max_tokens"),
    [
        ({"reasoning_effort": "medium"}, {"type": "enabled", "budget_tokens": 8192}, 4096 + 8192),
        ({"reasoning_effort": "high", "max_completion_tokens": 10000}, {"type": "enabled", "budget_tokens": 9999}, 10000),
        ({"reasoning_effort": "low", "max_tokens": 20000}, {"type": "enabled", "budget_tokens": 2048}, 20000),
        ({"reasoning_effort": "low", "max_tokens": 1000}, None, 1000),
        ({"reasoning_effort": "none"}, None, 4096),
        ({"reasoning_effort": "high", "tool_choice": "required"}, None, 4096),
    ],
)  # fmt: skip
def test_reasoning_effort_becomes_a_thinking_budget(
    fields: dict[str, Any], thinking: dict[str, Any] | None, max_tokens: int
) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    out = body([{"role": "user", "content": "hi"}], tools=tools, **fields)
    assert out.get("thinking") == thinking
    assert out["max_tokens"] == max_tokens


MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        THOUGHT,
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000,
              "output_tokens": 42, "output_tokens_details": {"thinking_tokens": 12}},
}  # fmt: skip
USAGE = {"prompt_tokens": 1210, "completion_tokens": 42, "total_tokens": 1252,
         "prompt_tokens_details": {"cached_tokens": 1000}, "completion_tokens_details": {"reasoning_tokens": 12},
         "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000}  # fmt: skip


def test_a_message_becomes_a_chat_completion_in_normal_form() -> None:
    completion = completion_from_message(MESSAGE)
    assert completion["id"] == "msg_01" and completion["object"] == "chat.completion"
    assert isinstance(completion["created"], int) and completion["model"] == "claude-sonnet-4-5"
    (choice,) = completion["choices"]
    assert choice["finish_reason"] == "tool_calls" and "stop_sequence" not in choice
    assert choice["message"] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [call("toolu_1", "weather", '{"city":"Paris"}'), call("toolu_2", "weather", '{"city":"Oslo"}')],
        "thinking_blocks": [THOUGHT],
        "reasoning_content": THOUGHT["thinking"],
    }
    assert completion["usage"] == USAGE


def test_text_content_is_a_list_for_several_blocks_and_null_for_none() -> None:
    two = {**MESSAGE, "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert completion_from_message(two)["choices"][0]["message"]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    none = completion_from_message({**MESSAGE, "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}})
    assert none["choices"][0]["message"] == {"role": "assistant", "content": None}
    assert none["usage"]["prompt_tokens"] == 3 and none["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"), ("max_tokens", "length"),
     ("tool_use", "tool_calls"), ("refusal", "content_filter"), ("model_context_window_exceeded", "length")],
)  # fmt: skip
def test_stop_reasons_become_finish_reasons(stop_reason: str, finish: str) -> None:
    assert completion_from_message({**MESSAGE, "stop_reason": stop_reason})["choices"][0]["finish_reason"] == finish


def test_the_stop_sequence_is_kept_on_the_choice() -> None:
    completion = completion_from_message({**MESSAGE, "stop_reason": "stop_sequence", "stop_sequence": "END"})
    assert completion["choices"][0]["stop_sequence"] == "END"


def _events() -> list[tuple[str, dict[str, Any]]]:
    """A full Messages stream: thinking with a signature, redacted thinking, text, two tool uses."""
    start = {**MESSAGE, "content": [], "stop_reason": None,
             "usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000,
                       "output_tokens": 1}}  # fmt: skip
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "Two cities: "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "look both up."}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": "sig-1"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": REDACTED}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Check"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "ing."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        ("content_block_start", {"type": "content_block_start", "index": 3,
                                 "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 3}),
        ("content_block_start", {"type": "content_block_start", "index": 4,
                                 "content_block": {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 4, "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 4}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 42, "output_tokens_details": {"thinking_tokens": 12}}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def test_a_full_stream_translates_and_reassembles() -> None:
    translator = ChunkTranslator()
    chunks = [chunk for event, data in _events() for chunk in translator.feed(event, data)]
    assert {(c["id"], c["object"], c["model"], c["created"]) for c in chunks} == {
        ("msg_01", "chat.completion.chunk", "claude-sonnet-4-5", chunks[0]["created"])
    }
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d["reasoning_content"] for d in deltas if "reasoning_content" in d] == ["Two cities: ", "look both up."]
    assert [d["thinking_blocks"] for d in deltas if "thinking_blocks" in d] == [[THOUGHT], [REDACTED]]
    calls = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert calls[0] == [
        {"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    ]
    assert calls[1:3] == [[{"index": 0, "function": {"arguments": '{"city": '}}],
                          [{"index": 0, "function": {"arguments": '"Paris"}'}}]]  # fmt: skip
    assert calls[3][0]["index"] == calls[4][0]["index"] == 1
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == USAGE
    assembler = StreamAssembler()
    for chunk in chunks:
        assembler.add(chunk)
    expected = completion_from_message(MESSAGE)["choices"][0]["message"]
    assert assembler.message()["content"] == expected["content"]
    assert [orjson.loads(c["function"]["arguments"]) for c in assembler.message()["tool_calls"]] == [
        {"city": "Paris"},
        {"city": "Oslo"},
    ]
    assert [c["id"] for c in assembler.message()["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert assembler.finish_reason == "tool_calls" and assembler.usage == USAGE


def test_stream_stop_sequence_ping_and_error_events() -> None:
    translator = ChunkTranslator()
    translator.feed("message_start", _events()[0][1])
    assert translator.feed("ping", {"type": "ping"}) == []
    (finish,) = translator.feed("", {"type": "message_delta", "delta": {"stop_reason": "stop_sequence",
                                      "stop_sequence": "END"}, "usage": {"output_tokens": 5}})  # fmt: skip
    assert finish["choices"][0]["finish_reason"] == "stop" and finish["choices"][0]["stop_sequence"] == "END"
    (usage,) = translator.feed("message_stop", {"type": "message_stop"})
    assert usage["usage"]["completion_tokens"] == 5 and usage["usage"]["prompt_tokens"] == 1210
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert translator.feed("error", error) == [
        {"error": {"message": "Overloaded", "type": "overloaded_error", "code": None, "param": None}}
    ]


@pytest.mark.parametrize(
    ("status", "raw", "expected"),
    [
        (400, {"type": "error", "error": {"type": "invalid_request_error",
                                          "message": "prompt is too long: 250000 tokens > 200000 maximum"}},
         {"type": "invalid_request_error", "code": "context_length_exceeded",
          "message": "prompt is too long: 250000 tokens > 200000 maximum"}),
        (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
         {"type": "authentication_error", "code": "invalid_api_key", "message": "invalid x-api-key"}),
        (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}, "request_id": "req_1"},
         {"type": "rate_limit_error", "code": "rate_limit_exceeded", "message": "slow down"}),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         {"type": "overloaded_error", "code": None, "message": "Overloaded"}),
    ],
)  # fmt: skip
def test_anthropic_errors_become_openai_errors(status: int, raw: dict[str, Any], expected: dict[str, Any]) -> None:
    assert orjson.loads(error_from_anthropic(status, orjson.dumps(raw))) == {"error": {**expected, "param": None}}


def test_a_body_that_is_not_anthropics_error_keeps_its_text() -> None:
    bad_gateway = orjson.loads(error_from_anthropic(502, b"<html>Bad Gateway</html>"))
    assert bad_gateway == {"error": {"message": "<html>Bad Gateway</html>", "type": "api_error", "param": None,
                                     "code": None}}  # fmt: skip
    empty = orjson.loads(error_from_anthropic(404, b""))["error"]
    assert empty["type"] == "not_found_error" and "404" in empty["message"]

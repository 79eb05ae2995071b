"""The Responses codec: a Responses request as a core (chat) request, and back, without I/O.

The openai SDK's own models are the judge of every object and event the codec produces."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from openai.types.responses import Response

from proxy.doors.responses_codec import (
    ResponsesCall,
    output_items,
    parse_request,
    response_object,
    usage_of,
)
from proxy.errors import BadRequest
from proxy.sessions.messages import canonical

RID = "resp_0123abcd"


def call_of(**fields: Any) -> ResponsesCall:
    return parse_request({"model": "gpt-4o-mini", **fields})


def messages_of(input_: Any, **fields: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = call_of(input=input_, **fields).chat_body["messages"]
    return messages


def refused(body: Any) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_request(body)
    return caught.value


def sdk_response(obj: dict[str, Any]) -> Response:
    return Response.model_validate(orjson.loads(orjson.dumps(obj)))


# --- the request ---


def test_every_request_field_maps_to_the_core_request() -> None:
    call = call_of(
        instructions="Be brief.",
        input="Hi",
        tools=[{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}],
        tool_choice={"type": "function", "name": "f"},
        parallel_tool_calls=False,
        max_output_tokens=100,
        temperature=0.5,
        top_p=0.9,
        text={"format": {"type": "json_object"}, "verbosity": "low"},
        reasoning={"effort": "high", "summary": "auto"},
        user="u",
        safety_identifier="s",
        prompt_cache_key="k",
        prompt_cache_retention="24h",
        service_tier="flex",
        stream=True,
        store=False,
        truncation="disabled",
        metadata={"a": "b"},
        include=["reasoning.encrypted_content"],
        stream_options={"include_obfuscation": False},
        top_logprobs=2,
        max_tool_calls=3,
        background=False,
        context_management=[{"type": "compaction", "compact_threshold": 5000}],
        prompt_cache_options={"ttl": "30m", "mode": "implicit"},
    )
    assert call.chat_body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True},
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": False,
        "max_completion_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "response_format": {"type": "json_object"},
        "verbosity": "low",
        "reasoning_effort": "high",
        "user": "u",
        "safety_identifier": "s",
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "service_tier": "flex",
        "stream": True,
    }
    assert (call.model, call.stream, call.store, call.truncation, call.instructions) == (
        "gpt-4o-mini",
        True,
        False,
        "disabled",
        "Be brief.",
    )
    assert call.echo["tool_choice"] == {"type": "function", "name": "f"}
    assert call.echo["metadata"] == {"a": "b"} and call.echo["top_logprobs"] == 2 and call.echo["max_tool_calls"] == 3
    assert call.echo["reasoning"] == {"effort": "high", "summary": "auto"}


def test_defaults() -> None:
    call = call_of(input="Hi")
    assert call.chat_body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    assert (call.stream, call.store, call.truncation, call.previous_response_id, call.conversation) == (
        False,
        True,
        "auto",
        None,
        None,
    )
    assert call.compactions == () and call.instructions is None
    assert call.echo["tools"] == [] and call.echo["tool_choice"] == "auto" and call.echo["parallel_tool_calls"] is True
    assert call.echo["text"] == {"format": {"type": "text"}} and call.echo["metadata"] == {}


def test_no_input_is_no_message() -> None:
    assert messages_of(None) == [] and call_of().chat_body["messages"] == []


def test_parallel_tool_calls_reach_the_core_only_with_tools() -> None:
    assert "parallel_tool_calls" not in call_of(input="x", parallel_tool_calls=True).chat_body


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ({"type": "text"}, {"type": "text"}),
        ({"type": "json_object"}, {"type": "json_object"}),
        (
            {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": True, "description": "d"},
            {
                "type": "json_schema",
                "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": True, "description": "d"},
            },
        ),
        (
            {"type": "json_schema", "name": "n", "schema": {}},
            {"type": "json_schema", "json_schema": {"name": "n", "schema": {}}},
        ),
    ],
)
def test_text_format_becomes_response_format(fmt: dict[str, Any], expected: dict[str, Any]) -> None:
    call = call_of(input="x", text={"format": fmt})
    assert call.chat_body["response_format"] == expected
    assert sdk_response(response_object(call, response_id=RID, created_at=1, status="completed", output=[], usage=None))


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"type": "function", "name": "f"}, {"type": "function", "function": {"name": "f"}}),
        (
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "f"}]},
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "f"}}]},
            },
        ),
    ],
)
def test_tool_choice(choice: Any, expected: Any) -> None:
    call = call_of(input="x", tools=[{"type": "function", "name": "f"}], tool_choice=choice)
    assert call.chat_body["tool_choice"] == expected and call.echo["tool_choice"] == choice


def test_a_tool_choice_must_name_a_function_tool() -> None:
    error = refused(
        {"model": "m", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}}
    )
    assert error.param == "tool_choice.name"
    assert refused({"model": "m", "tool_choice": {"type": "web_search_preview"}}).param == "tool_choice.type"
    assert refused({"model": "m", "tool_choice": "sometimes"}).param == "tool_choice"


def test_tools_echo_in_the_responses_shape_and_the_sdk_parses_them() -> None:
    call = call_of(input="x", tools=[{"type": "function", "name": "f"}])
    assert call.chat_body["tools"] == [{"type": "function", "function": {"name": "f"}}]
    assert call.echo["tools"] == [
        {"type": "function", "name": "f", "description": None, "parameters": None, "strict": None}
    ]
    parsed = sdk_response(
        response_object(call, response_id=RID, created_at=1, status="completed", output=[], usage=None)
    )
    assert parsed.tools[0].type == "function" and parsed.tools[0].name == "f"


@pytest.mark.parametrize(
    "kind",
    ["web_search", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview", "mcp",
     "image_generation", "local_shell", "custom", "shell", "apply_patch"],
)  # fmt: skip
def test_built_in_and_custom_tools_are_refused_by_name(kind: str) -> None:
    error = refused({"model": "m", "tools": [{"type": "function", "name": "f"}, {"type": kind}]})
    assert error.param == "tools[1]" and kind in error.message


def test_duplicate_function_names_are_refused() -> None:
    error = refused({"model": "m", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]})
    assert error.param == "tools[1].name"


@pytest.mark.parametrize(
    ("field", "value"),
    [("background", True), ("prompt", {"id": "pmpt_1"}), ("moderation", {"model": "omni-moderation-latest"})],
)
def test_what_needs_openai_itself_is_refused(field: str, value: Any) -> None:
    error = refused({"model": "m", field: value})
    assert error.param == field and error.status == 400


def test_unknown_parameters_are_refused_as_openai_does() -> None:
    error = refused({"model": "m", "input": "x", "frobnicate": 1})
    assert (error.param, error.code, error.message) == (
        "frobnicate",
        "unknown_parameter",
        "Unknown parameter: 'frobnicate'.",
    )
    assert refused({"model": "m", "input": [{"role": "user", "content": "x", "extra": 1}]}).param == "input[0].extra"


def test_model_is_required() -> None:
    error = refused({"input": "x"})
    assert (error.param, error.code) == ("model", "missing_required_parameter")


def test_previous_response_id_and_conversation_exclude_each_other() -> None:
    error = refused({"model": "m", "previous_response_id": "resp_1", "conversation": "conv_1"})
    assert error.code == "mutually_exclusive_parameters"
    assert call_of(conversation={"id": "conv_1"}).conversation == "conv_1"
    assert call_of(conversation="conv_2").echo["conversation"] == {"id": "conv_2"}
    assert call_of(previous_response_id="resp_1").previous_response_id == "resp_1"


def test_include_values_are_checked() -> None:
    assert refused({"model": "m", "include": ["everything"]}).param == "include[0]"


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_output_tokens", 15), ("temperature", 2.5), ("top_p", -0.1), ("top_logprobs", 21), ("temperature", True)],
)
def test_numbers_out_of_range_are_refused(field: str, value: Any) -> None:
    assert refused({"model": "m", field: value}).param == field


# --- input items ---


def test_message_items_with_and_without_type() -> None:
    assert messages_of(
        [
            {"role": "developer", "content": "rules"},
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "more"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
            {"type": "message", "role": "assistant", "content": "said", "id": "msg_1", "status": "completed"},
        ]
    ) == [
        {"role": "developer", "content": "rules"},
        {"role": "system", "content": "more"},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "said"},
    ]


def test_images_and_inline_files_become_chat_parts() -> None:
    content = [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
        {"type": "input_image", "image_url": "https://example.test/cat.png"},
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,AAAA"},
    ]
    assert messages_of([{"role": "user", "content": content}]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}},
                {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,AAAA"}},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("part", "param"),
    [
        ({"type": "input_image", "file_id": "file-1"}, "input[0].content[0].file_id"),
        ({"type": "input_file", "file_id": "file-1"}, "input[0].content[0].file_id"),
        ({"type": "input_file", "file_url": "https://example.test/a.pdf"}, "input[0].content[0].file_url"),
        ({"type": "output_text", "text": "x"}, "input[0].content[0].type"),
        ({"type": "input_audio"}, "input[0].content[0].type"),
        ({"text": "x"}, "input[0].content[0].type"),
        ({"type": "input_text"}, "input[0].content[0].text"),
    ],
)
def test_user_parts_that_cannot_reach_a_chat_upstream_are_refused(part: dict[str, Any], param: str) -> None:
    assert refused({"model": "m", "input": [{"role": "user", "content": [part]}]}).param == param


def test_system_messages_take_text_only() -> None:
    error = refused(
        {"model": "m", "input": [{"role": "system", "content": [{"type": "input_image", "image_url": "u"}]}]}
    )
    assert error.param == "input[0].content[0].type"


def test_assistant_parts_are_output_text_and_refusal() -> None:
    assert messages_of(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "a", "annotations": []},
                    {"type": "refusal", "refusal": "no"},
                ],
            }
        ]
    ) == [{"role": "assistant", "content": "a", "refusal": "no"}]
    error = refused({"model": "m", "input": [{"role": "assistant", "content": [{"type": "input_text", "text": "a"}]}]})
    assert error.param == "input[0].content[0].type"


def test_function_calls_join_the_assistant_message_before_them() -> None:
    assert messages_of(
        [
            {"role": "user", "content": "weather?"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"city":"Oslo"}'},
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "w",
                "arguments": "{}",
                "id": "fc_2",
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "sun"}]},
            {"type": "function_call", "call_id": "c3", "name": "w", "arguments": "{}"},
        ]
    ) == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city":"Oslo"}'}},
                {"id": "c2", "type": "function", "function": {"name": "w", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "tool", "tool_call_id": "c2", "content": "sun"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
        },
    ]


def test_a_tool_output_takes_text_only() -> None:
    item = {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "image_url": "u"}]}
    assert refused({"model": "m", "input": [item]}).param == "input[0].output[0].type"


def test_compaction_items_are_set_apart_with_their_position() -> None:
    call = call_of(
        instructions="sys",
        input=[
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "SECRET"},
            {"role": "user", "content": "next"},
            {"type": "compaction", "encrypted_content": "MORE"},
        ],
    )
    assert call.chat_body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "next"}]
    assert call.compactions == ((1, "SECRET"), (2, "MORE"))


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "item_reference", "id": "msg_1"}, "input[0].type"),
        ({"type": "web_search_call", "id": "ws_1"}, "input[0].type"),
        ({"type": "computer_call_output"}, "input[0].type"),
        ({"type": "compaction"}, "input[0].encrypted_content"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "input[0].call_id"),
        ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}, "input[0].arguments"),
        ({"type": "function_call_output", "call_id": "c"}, "input[0].output"),
        ({"role": "user"}, "input[0].content"),
        ({"content": "x"}, "input[0].role"),
        ({"role": "tool", "content": "x"}, "input[0].role"),
        ({"type": 7, "role": "user", "content": "x"}, "input[0].type"),
    ],
)
def test_bad_items_are_refused_by_path(item: dict[str, Any], param: str) -> None:
    assert refused({"model": "m", "input": [item]}).param == param


# --- the answer ---

ANSWER = {
    "role": "assistant",
    "content": "It rains.",
    "reasoning_content": "Look it up.",
    "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "w", "arguments": '{"city":"Oslo"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "t", "arguments": "{}"}},
    ],
}
CHAT_USAGE = {
    "prompt_tokens": 30,
    "completion_tokens": 12,
    "total_tokens": 42,
    "prompt_tokens_details": {"cached_tokens": 10},
    "completion_tokens_details": {"reasoning_tokens": 4},
}


def test_output_items_of_an_answer() -> None:
    assert output_items(ANSWER, response_id=RID) == [
        {"type": "reasoning", "id": "rs_0123abcd_0", "summary": [{"type": "summary_text", "text": "Look it up."}]},
        {
            "type": "message",
            "id": "msg_0123abcd_0",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It rains.", "annotations": [], "logprobs": []}],
        },
        {"type": "function_call", "id": "fc_0123abcd_0", "call_id": "call_a", "name": "w", "arguments": '{"city":"Oslo"}', "status": "completed"},
        {"type": "function_call", "id": "fc_0123abcd_1", "call_id": "call_b", "name": "t", "arguments": "{}", "status": "completed"},
    ]  # fmt: skip


def test_a_refusal_is_a_refusal_part_and_an_empty_answer_an_empty_message() -> None:
    [item] = output_items({"role": "assistant", "content": None, "refusal": "No."}, response_id=RID)
    assert item["content"] == [{"type": "refusal", "refusal": "No."}]
    [item] = output_items({"role": "assistant", "content": None}, response_id=RID)
    assert item["content"][0]["text"] == ""
    assert [i["type"] for i in output_items({**ANSWER, "content": None}, response_id=RID)] == [
        "reasoning",
        "function_call",
        "function_call",
    ]


def test_usage_of_chat_usage() -> None:
    assert usage_of(CHAT_USAGE) == {
        "input_tokens": 30,
        "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 42,
    }
    assert usage_of(None) is None
    assert usage_of({"prompt_tokens": 1, "completion_tokens": 2})["total_tokens"] == 3  # type: ignore[index]


def test_the_sdk_parses_the_response_object_and_its_output_text() -> None:
    call = call_of(input="weather?", tools=[{"type": "function", "name": "w"}, {"type": "function", "name": "t"}])
    obj = response_object(
        call,
        response_id=RID,
        created_at=1700000000,
        status="completed",
        output=output_items(ANSWER, response_id=RID),
        usage=usage_of(CHAT_USAGE),
    )
    parsed = sdk_response(obj)
    assert parsed.output_text == "It rains."
    assert parsed.usage is not None and parsed.usage.input_tokens_details.cached_tokens == 10
    assert (parsed.id, parsed.status, parsed.model, parsed.store, parsed.truncation) == (
        RID,
        "completed",
        "gpt-4o-mini",
        True,
        "auto",
    )
    assert [o.type for o in parsed.output] == ["reasoning", "message", "function_call", "function_call"]


def test_an_incomplete_and_a_failed_response_parse() -> None:
    call = call_of(input="x", conversation="conv_1", metadata={"k": "v"})
    incomplete = response_object(
        call,
        response_id=RID,
        created_at=1,
        status="incomplete",
        output=[],
        usage=None,
        incomplete_reason="max_output_tokens",
    )
    parsed = sdk_response(incomplete)
    assert parsed.incomplete_details is not None and parsed.incomplete_details.reason == "max_output_tokens"
    assert parsed.conversation is not None and parsed.conversation.id == "conv_1" and parsed.metadata == {"k": "v"}
    failed = response_object(
        call,
        response_id=RID,
        created_at=1,
        status="failed",
        output=[],
        usage=None,
        error={"code": "server_error", "message": "m"},
    )
    assert sdk_response(failed).error.code == "server_error"  # type: ignore[union-attr]


def test_an_answer_sent_back_as_input_is_the_message_the_journal_recorded() -> None:
    for answer in (
        ANSWER,
        {"role": "assistant", "content": "Just text."},
        {"role": "assistant", "content": None, "tool_calls": ANSWER["tool_calls"]},
        {"role": "assistant", "content": None, "refusal": "No."},
    ):
        items = output_items(answer, response_id=RID)
        # the SDK's own objects, dumped as a client would resend them
        resent = [o.model_dump(exclude_none=True) for o in sdk_response(
            response_object(call_of(), response_id=RID, created_at=1, status="completed", output=items, usage=None)
        ).output]  # fmt: skip
        [message] = messages_of(resent)
        recorded = {k: v for k, v in answer.items() if k != "reasoning_content"}
        assert message == recorded
        assert canonical(message) == canonical(answer)


def test_function_tools_round_trip() -> None:
    first = call_of(
        input="weather in Oslo?", tools=[{"type": "function", "name": "w", "parameters": {"type": "object"}}]
    )
    answer = {"role": "assistant", "content": None, "tool_calls": ANSWER["tool_calls"][:1]}
    items = output_items(answer, response_id=RID)
    follow = messages_of(
        [*items, {"type": "function_call_output", "call_id": items[0]["call_id"], "output": "rain"}],
        tools=[{"type": "function", "name": "w"}],
    )
    assert first.chat_body["tools"][0]["function"]["name"] == "w"
    assert follow == [answer, {"role": "tool", "tool_call_id": "call_a", "content": "rain"}]

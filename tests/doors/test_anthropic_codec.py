"""The Messages door's translation: requests to the core, the core's answers back, errors, side requests."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.doors.anthropic_codec import (
    MessagesCall,
    MessageStream,
    error_body,
    message_from_completion,
    message_id,
    parse_request,
    session_hint,
    side_request,
)
from proxy.errors import BadRequest

SESSION = "34832e57-9b65-4df6-9604-60b9fc786bcb"
LEGACY_USER_ID = f"user_19f2f4ee153d47fb_account_a929b7ef-d758-4a98-b88e-07166e6c8537_session_{SESSION}"
EPHEMERAL = {"type": "ephemeral"}
SIGNATURE = "EqQBCkYIBxgCKkDsig"


def claude_code_body() -> dict[str, Any]:
    """A Claude Code turn as it arrives: billing header and cached system blocks, tools, a tool round with thinking."""
    return {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "stream": True,
        "metadata": {"user_id": LEGACY_USER_ID},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.83.c50; cc_entrypoint=cli;"},
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": EPHEMERAL,
            },
            {"type": "text", "text": "You are an interactive CLI tool.", "cache_control": EPHEMERAL},
        ],
        "tools": [
            {
                "name": "Bash",
                "description": "Run a command",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
            {
                "name": "Read",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
                "cache_control": EPHEMERAL,
            },
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in README?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Read it.", "signature": SIGNATURE},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "README.md"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "# context-proxy"},
                    {"type": "text", "text": "Summarize it.", "cache_control": EPHEMERAL},
                ],
            },
        ],
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "output_config": {"effort": "high"},
        "temperature": 1,
    }


def test_a_claude_code_turn_becomes_the_core_request() -> None:
    call = parse_request(claude_code_body())

    assert call.model == "claude-sonnet-4-5-20250929"
    assert call.stream is True
    assert call.session_hint == SESSION
    assert call.breakpoints == 4
    assert call.max_tokens == 32000
    assert call.chat_body == {
        "model": "claude-sonnet-4-5-20250929",
        "max_completion_tokens": 32000,
        "stream": True,
        "temperature": 1,
        "user": LEGACY_USER_ID,
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.83.c50; cc_entrypoint=cli;"},
                    {
                        "type": "text",
                        "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                        "cache_control": EPHEMERAL,
                    },
                    {"type": "text", "text": "You are an interactive CLI tool.", "cache_control": EPHEMERAL},
                ],
            },
            {"role": "user", "content": "What is in README?"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "toolu_01",
                        "type": "function",
                        "function": {"name": "Read", "arguments": '{"file_path":"README.md"}'},
                    }
                ],
                "thinking_blocks": [{"type": "thinking", "thinking": "Read it.", "signature": SIGNATURE}],
                "reasoning_content": "Read it.",
            },
            {"role": "tool", "tool_call_id": "toolu_01", "content": "# context-proxy"},
            {"role": "user", "content": [{"type": "text", "text": "Summarize it.", "cache_control": EPHEMERAL}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "Bash",
                    "description": "Run a command",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "Read",
                    "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}},
                },
                "cache_control": EPHEMERAL,
            },
        ],
        "anthropic": {
            "thinking": {"type": "enabled", "budget_tokens": 31999},
            "output_config": {"effort": "high"},
            "metadata": {"user_id": LEGACY_USER_ID},
        },
    }
    assert side_request(call) is None


def minimal(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **fields}


def messages_of(**fields: Any) -> list[dict[str, Any]]:
    return list(parse_request(minimal(**fields)).chat_body["messages"])


def test_system_string_and_blocks() -> None:
    assert messages_of(system="Be brief.")[0] == {"role": "system", "content": "Be brief."}
    assert messages_of(system=[{"type": "text", "text": "Be brief."}])[0] == {"role": "system", "content": "Be brief."}
    two = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert messages_of(system=two)[0] == {"role": "system", "content": two}
    assert messages_of(system="")[0] == {"role": "user", "content": "hi"}


def test_a_system_role_inside_messages_stays_in_place() -> None:
    turns = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "Now be brief."}]},
        {"role": "user", "content": "go"},
    ]
    assert messages_of(messages=turns)[1] == {"role": "system", "content": "Now be brief."}


def test_images_become_image_url_parts() -> None:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}, "cache_control": EPHEMERAL},
        {"type": "text", "text": "What are these?"},
    ]
    call = parse_request(minimal(messages=[{"role": "user", "content": content}]))
    assert call.chat_body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}, "cache_control": EPHEMERAL},
                {"type": "text", "text": "What are these?"},
            ],
        }
    ]
    assert call.breakpoints == 1


def test_a_document_is_kept_verbatim() -> None:
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The grass is green."},
        "title": "Facts",
        "citations": {"enabled": True},
        "cache_control": EPHEMERAL,
    }
    content = [document, {"type": "text", "text": "Colour?"}]
    call = parse_request(minimal(messages=[{"role": "user", "content": content}]))
    assert call.chat_body["messages"][0]["content"] == [document, {"type": "text", "text": "Colour?"}]
    assert call.breakpoints == 1


def test_tool_results_become_tool_messages_before_the_users_text() -> None:
    content = [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "is_error": True,
            "content": [
                {"type": "text", "text": "failed"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/s.png"}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "t3", "is_error": False},
        {"type": "text", "text": "Go on."},
    ]
    assert messages_of(messages=[{"role": "user", "content": content}]) == [
        {"role": "tool", "tool_call_id": "t1", "content": "ok"},
        {
            "role": "tool",
            "tool_call_id": "t2",
            "is_error": True,
            "content": [
                {"type": "text", "text": "failed"},
                {"type": "image_url", "image_url": {"url": "https://example.com/s.png"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t3", "content": ""},
        {"role": "user", "content": "Go on."},
    ]


def test_a_tool_results_cache_control_goes_on_its_last_part() -> None:
    as_string = {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": EPHEMERAL}
    as_blocks = {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "cache_control": EPHEMERAL,
    }
    empty = {"type": "tool_result", "tool_use_id": "t3", "cache_control": EPHEMERAL}
    call = parse_request(minimal(messages=[{"role": "user", "content": [as_string, as_blocks, empty]}]))
    assert [m["content"] for m in call.chat_body["messages"]] == [
        [{"type": "text", "text": "ok", "cache_control": EPHEMERAL}],
        [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": EPHEMERAL}],
        [{"type": "text", "text": "", "cache_control": EPHEMERAL}],
    ]
    assert call.breakpoints == 3


def test_a_tool_uses_cache_control_rides_on_its_tool_call() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}, "cache_control": EPHEMERAL}
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use]}]
    assistant = messages_of(messages=turns)[1]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "t1",
                "type": "function",
                "function": {"name": "Bash", "arguments": "{}"},
                "cache_control": EPHEMERAL,
            }
        ],
    }


def test_thinking_blocks_are_kept_verbatim_and_in_order() -> None:
    content = [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
        {"type": "thinking", "thinking": "First.", "signature": SIGNATURE},
        {"type": "thinking", "thinking": " Unsigned.", "signature": ""},
        {"type": "text", "text": "A"},
        {"type": "text", "text": "B"},
    ]
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}]
    assert messages_of(messages=turns)[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
        "thinking_blocks": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
            {"type": "thinking", "thinking": "First.", "signature": SIGNATURE},
        ],
        "reasoning_content": "First. Unsigned.",
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, {"tool_choice": "auto"}),
        ({"type": "any"}, {"tool_choice": "required"}),
        ({"type": "none"}, {"tool_choice": "none"}),
        ({"type": "tool", "name": "Bash"}, {"tool_choice": {"type": "function", "function": {"name": "Bash"}}}),
        ({"type": "auto", "disable_parallel_tool_use": True}, {"tool_choice": "auto", "parallel_tool_calls": False}),
        ({"type": "any", "disable_parallel_tool_use": False}, {"tool_choice": "required", "parallel_tool_calls": True}),
    ],
)
def test_tool_choice(choice: dict[str, Any], expected: dict[str, Any]) -> None:
    body = parse_request(minimal(tool_choice=choice)).chat_body
    assert {k: body[k] for k in ("tool_choice", "parallel_tool_calls") if k in body} == expected


def test_sampling_fields_and_extras() -> None:
    body = parse_request(
        minimal(
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            stop_sequences=["\n\nHuman:"],
            service_tier="auto",
            context_management={"edits": [{"type": "clear_tool_uses_20250919"}]},
            cache_control=EPHEMERAL,
            metadata={"user_id": None},
        )
    ).chat_body
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["stop"] == ["\n\nHuman:"]
    assert "user" not in body
    assert body["anthropic"] == {
        "top_k": 40,
        "service_tier": "auto",
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "cache_control": EPHEMERAL,
        "metadata": {"user_id": None},
    }
    assert parse_request(minimal(cache_control=EPHEMERAL)).breakpoints == 1
    assert "anthropic" not in parse_request(minimal()).chat_body


def test_custom_tool_fields() -> None:
    tool = {
        "type": "custom",
        "name": "Bash",
        "input_schema": {"type": "object"},
        "strict": True,
        "eager_input_streaming": True,
        "defer_loading": False,
        "input_examples": [{"command": "ls"}],
    }
    assert parse_request(minimal(tools=[tool])).chat_body["tools"] == [
        {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}, "strict": True}}
    ]


@pytest.mark.parametrize(
    ("user_id", "hint"),
    [
        (LEGACY_USER_ID, SESSION),
        (f"user_abc_account__session_{SESSION}", SESSION),
        (orjson.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SESSION}).decode(), SESSION),
        ('{"device_id": "d"}', '{"device_id": "d"}'),
        ("{not json", "{not json"),
        ("alice", "alice"),
        ("", None),
        (None, None),
    ],
)
def test_session_hint(user_id: str | None, hint: str | None) -> None:
    assert session_hint(user_id) == hint


def test_count_tokens_bodies_have_no_max_tokens() -> None:
    call = parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, count_tokens=True)
    assert call.count_tokens is True
    assert call.max_tokens is None
    assert "max_completion_tokens" not in call.chat_body
    assert side_request(call) == "count_tokens"
    with pytest.raises(BadRequest) as refused:
        parse_request(minimal(), count_tokens=True)
    assert refused.value.param == "max_tokens"


# -- refusals --------------------------------------------------------------------------------------------------------


def refusal(body: Any, **options: Any) -> BadRequest:
    with pytest.raises(BadRequest) as refused:
        parse_request(body, **options)
    return refused.value


def test_unknown_fields_are_refused_as_anthropic_does() -> None:
    error = refusal(minimal(frequency_penalty=1))
    assert (error.message, error.param, error.status, error.type) == (
        "frequency_penalty: Extra inputs are not permitted",
        "frequency_penalty",
        400,
        "invalid_request_error",
    )
    text = {"type": "tool_use", "id": "t", "name": "n", "input": {}, "text": "x"}
    error = refusal(minimal(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": [text]}]))
    assert error.message == "messages[1].content[0].text: Extra inputs are not permitted"


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
        {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    ],
)
def test_server_tools_are_refused_naming_the_tool(tool: dict[str, Any]) -> None:
    error = refusal(minimal(tools=[{"name": "ok", "input_schema": {"type": "object"}}, tool]))
    assert error.param == "tools[1]"
    assert tool["type"] in error.message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (minimal(mcp_servers=[{"type": "url", "url": "https://mcp.example", "name": "x"}]), "mcp_servers"),
        (minimal(container="c_1"), "container"),
        (minimal(tools=[{"name": "n", "input_schema": {}, "defer_loading": True}]), "tools[0].defer_loading"),
        (
            minimal(
                messages=[
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}],
                    },
                ]
            ),
            "messages[1].content[0].type",
        ),
        (
            minimal(
                messages=[
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [{"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}],
                    },
                ]
            ),
            "messages[1].content[0].type",
        ),
        (
            minimal(
                messages=[{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]
            ),
            "messages[0].content[0].type",
        ),
        (
            minimal(
                messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]
            ),
            "messages[0].content[0].source.type",
        ),
        (
            minimal(messages=[{"role": "user", "content": [{"type": "text", "text": "x", "citations": [{}]}]}]),
            "messages[0].content[0].citations",
        ),
        (
            minimal(
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "tool_reference", "tool_name": "x"}],
                            }
                        ],
                    }
                ]
            ),
            "messages[0].content[0].content[0].type",
        ),
        (minimal(messages=[]), "messages"),
        (minimal(messages=[{"role": "user", "content": []}]), "messages[0].content"),
        (minimal(messages=[{"role": "tool", "content": "x"}]), "messages[0].role"),
        (minimal(max_tokens=0), "max_tokens"),
        (minimal(model=""), "model"),
        (minimal(temperature=1.5), "temperature"),
        (minimal(tool_choice={"type": "function"}), "tool_choice.type"),
        (
            minimal(tool_choice={"type": "none", "disable_parallel_tool_use": True}),
            "tool_choice.disable_parallel_tool_use",
        ),
        (minimal(metadata={"user_id": "u", "session": "s"}), "metadata.session"),
        (minimal(system=[{"type": "text", "text": "x", "cache_control": {}}]), "system[0].cache_control.type"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
    ],
)
def test_what_the_core_cannot_carry_or_anthropic_refuses(body: dict[str, Any], param: str) -> None:
    assert refusal(body).param == param


JSON_VALUES: list[Any] = [None, True, 0, -3, 2.5, "", "text", [], [1], {}, {"k": 1}]

# Each field of a valid body, and the JSON values it accepts (every other value must be refused naming it).
FIELDS: list[tuple[str, tuple[Any, ...], str]] = [
    ("model", ("text",), "model"),
    ("max_tokens", (), "max_tokens"),
    ("stream", (True,), "stream"),
    ("temperature", (0,), "temperature"),
    ("top_p", (0,), "top_p"),
    ("top_k", (0,), "top_k"),
    ("system", ("", "text", []), "system"),
    ("messages", (), "messages"),
    ("tools", ([],), "tools"),
    ("tool_choice", (), "tool_choice"),
    ("stop_sequences", ([],), "stop_sequences"),
    ("metadata", ({},), "metadata"),
    ("thinking", (), "thinking"),
    ("service_tier", ("", "text"), "service_tier"),
    ("output_config", ({}, {"k": 1}), "output_config"),
    ("context_management", (None, {}, {"k": 1}), "context_management"),
    ("cache_control", (None,), "cache_control"),
    ("messages.0", (), "messages[0]"),
    ("messages.0.role", (), "messages[0].role"),
    ("messages.0.content", ("", "text"), "messages[0].content"),
    ("messages.1.content.0", (), "messages[1].content[0]"),
    ("messages.1.content.0.type", (), "messages[1].content[0]"),
    ("messages.1.content.0.id", ("", "text"), "messages[1].content[0].id"),
    ("messages.1.content.0.name", ("", "text"), "messages[1].content[0].name"),
    ("messages.1.content.0.input", ({}, {"k": 1}), "messages[1].content[0].input"),
    ("messages.1.content.0.cache_control", (None,), "messages[1].content[0].cache_control"),
    ("messages.1.content.1.thinking", ("", "text"), "messages[1].content[1].thinking"),
    ("messages.1.content.1.signature", ("", "text"), "messages[1].content[1].signature"),
    ("messages.2.content.0.tool_use_id", ("", "text"), "messages[2].content[0].tool_use_id"),
    ("messages.2.content.0.content", ("", "text", []), "messages[2].content[0].content"),
    ("messages.2.content.0.is_error", (True,), "messages[2].content[0].is_error"),
    ("messages.2.content.1.text", ("", "text"), "messages[2].content[1].text"),
    ("messages.2.content.2.source", (), "messages[2].content[2].source"),
    ("messages.2.content.2.source.data", ("", "text"), "messages[2].content[2].source.data"),
    ("tools.0", (), "tools[0]"),
    ("tools.0.name", ("text",), "tools[0].name"),
    ("tools.0.description", ("", "text"), "tools[0].description"),
    ("tools.0.input_schema", ({}, {"k": 1}), "tools[0].input_schema"),
    ("tools.0.strict", (True,), "tools[0].strict"),
    ("tool_choice.type", (), "tool_choice.type"),
    ("tool_choice.disable_parallel_tool_use", (True,), "tool_choice.disable_parallel_tool_use"),
    ("stop_sequences.0", ("", "text"), "stop_sequences[0]"),
    ("metadata.user_id", (None, "", "text"), "metadata.user_id"),
    ("system.0.text", ("", "text"), "system[0].text"),
]


def full_body() -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 5,
        "stream": False,
        "temperature": 0.5,
        "top_p": 0.5,
        "top_k": 5,
        "system": [{"type": "text", "text": "s"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "n", "input": {}, "cache_control": EPHEMERAL},
                    {"type": "thinking", "thinking": "th", "signature": "sig"},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "r", "is_error": False},
                    {"type": "text", "text": "x"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
                ],
            },
        ],
        "tools": [{"name": "n", "description": "d", "input_schema": {"type": "object"}, "strict": False}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
        "stop_sequences": ["end"],
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "service_tier": "auto",
        "output_config": {"effort": "high"},
        "context_management": {"edits": []},
        "cache_control": EPHEMERAL,
    }


def put(body: Any, path: str, value: Any) -> Any:
    *parents, last = path.split(".")
    target = body
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = value
    return body


def test_the_full_body_is_valid() -> None:
    assert parse_request(full_body()).breakpoints == 2


@pytest.mark.parametrize(("path", "accepted", "param"), FIELDS, ids=[f[0] for f in FIELDS])
def test_every_field_refuses_every_wrong_json_type(path: str, accepted: tuple[Any, ...], param: str) -> None:
    for value in JSON_VALUES:
        body = put(full_body(), path, copy.deepcopy(value))
        if any(value == ok and type(value) is type(ok) for ok in accepted):
            parse_request(body)
            continue
        with pytest.raises(BadRequest) as refused:
            parse_request(body)
        assert refused.value.param is not None and refused.value.param.startswith(param), (path, value)


def test_a_body_that_is_not_an_object_is_refused() -> None:
    for value in JSON_VALUES:
        if not isinstance(value, dict):
            assert refusal(value).param == "body"


json_values = st.recursive(  # integers as a parsed body holds them: orjson reads larger ones as floats
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from([f[0] for f in FIELDS]), value=json_values)
def test_any_json_anywhere_is_a_bad_request_or_a_valid_call(path: str, value: Any) -> None:
    try:
        call = parse_request(put(full_body(), path, value))
    except BadRequest as refused:
        assert refused.param
    else:
        assert isinstance(call, MessagesCall)


# -- answers ---------------------------------------------------------------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str = "stop", **choice: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, **choice}],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "total_tokens": 1050,
            "prompt_tokens_details": {"cached_tokens": 600},
            "cache_read_input_tokens": 600,
            "cache_creation_input_tokens": 300,
        },
    }


ANSWER = {
    "role": "assistant",
    "content": "Let me look.",
    "tool_calls": [
        {"id": "toolu_02", "type": "function", "function": {"name": "Read", "arguments": '{"file_path":"a.py"}'}}
    ],
    "thinking_blocks": [
        {"type": "thinking", "thinking": "Look.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwK"},
    ],
    "reasoning_content": "Look.",
}


def test_a_completion_becomes_a_message() -> None:
    assert message_from_completion(completion(ANSWER, "tool_calls"), model="claude-x") == {
        "id": "msg_abc123",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "Look.", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": "EmwK"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_02", "name": "Read", "input": {"file_path": "a.py"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 600,
        },
    }


@pytest.mark.parametrize(
    ("finish", "choice", "reason", "sequence"),
    [
        ("stop", {}, "end_turn", None),
        ("stop", {"stop_sequence": "END"}, "stop_sequence", "END"),
        ("length", {}, "max_tokens", None),
        ("tool_calls", {}, "tool_use", None),
        ("content_filter", {}, "refusal", None),
        ("pause_turn", {}, "pause_turn", None),
    ],
)
def test_stop_reasons(finish: str, choice: dict[str, Any], reason: str, sequence: str | None) -> None:
    message = message_from_completion(completion({"role": "assistant", "content": "x"}, finish, **choice), model="m")
    assert (message["stop_reason"], message["stop_sequence"]) == (reason, sequence)


def test_answer_edge_cases() -> None:
    unsigned = message_from_completion(
        completion({"role": "assistant", "content": None, "reasoning_content": "hmm"}), model="m"
    )
    assert unsigned["content"] == [{"type": "thinking", "thinking": "hmm", "signature": ""}]
    bad_arguments = {"id": "t", "type": "function", "function": {"name": "n", "arguments": "{oops"}}
    listed = [{"id": "u", "type": "function", "function": {"name": "n", "arguments": "[1]"}}]
    message = message_from_completion(
        completion({"role": "assistant", "content": None, "tool_calls": [bad_arguments, *listed]}), model="m"
    )
    assert [b["input"] for b in message["content"]] == [{}, {}]
    refused = message_from_completion(completion({"role": "assistant", "content": None, "refusal": "No."}), model="m")
    assert (refused["content"], refused["stop_reason"]) == ([{"type": "text", "text": "No."}], "refusal")
    lean = message_from_completion({"usage": {"prompt_tokens": 5, "completion_tokens": 1}}, model="m")
    assert lean["usage"] == {
        "input_tokens": 5,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert lean["id"].startswith("msg_") and lean["content"] == []
    openai_cached = {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 12}}
    assert message_from_completion({"usage": openai_cached}, model="m")["usage"]["input_tokens"] == 0


@pytest.mark.parametrize("answer", [ANSWER, {"role": "assistant", "content": "Only text."}])
def test_an_answer_sent_back_is_the_journaled_message(answer: dict[str, Any]) -> None:
    message = message_from_completion(completion(answer), model="m")
    later = minimal(
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": "more"},
        ]
    )
    assert parse_request(later).chat_body["messages"][1] == answer


def test_unsigned_reasoning_sent_back_is_the_journaled_message() -> None:
    answer = {"role": "assistant", "content": "x", "reasoning_content": "hmm"}
    message = message_from_completion(completion(answer), model="m")
    later = minimal(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": message["content"]}])
    assert parse_request(later).chat_body["messages"][1] == answer


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (409, "invalid_request_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_bodies(status: int, kind: str) -> None:
    openai = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
    assert error_body(status, openai) == {"type": "error", "error": {"type": kind, "message": "boom"}}


def test_error_bodies_of_other_shapes() -> None:
    assert error_body(502, {"detail": "?"}) == {"type": "error", "error": {"type": "api_error", "message": "HTTP 502"}}
    anthropic_shaped = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert error_body(500, anthropic_shaped) == anthropic_shaped


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"choices": "x", "usage": 5},
        {"choices": [[]]},
        {"choices": [{"message": [], "finish_reason": 3}]},
        {"choices": [{"message": {"content": 5, "tool_calls": 5, "thinking_blocks": "x", "reasoning_content": 1}}]},
        {"choices": [{"message": {"tool_calls": [1, {"function": 2, "id": 3}]}}], "usage": {"prompt_tokens": "9"}},
    ],
)
def test_a_malformed_answer_still_gives_a_message(answer: dict[str, Any]) -> None:
    message = message_from_completion(answer, model="m")
    assert message["type"] == "message" and message["stop_reason"] == "end_turn"
    stream = MessageStream(model="m", message_id="msg_1", input_tokens=0)
    for bad in (answer, {"choices": [{"delta": {"tool_calls": 5, "thinking_blocks": 1, "content": 2}}]}):
        stream.feed(bad)
    assert stream.finish(None, None).endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def test_message_ids() -> None:
    assert message_id("chatcmpl-xyz") == "msg_xyz"
    assert message_id("msg_01abc") == "msg_01abc"
    assert message_id(None).startswith("msg_") and message_id(None) != message_id(None)


# -- streams ---------------------------------------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice], **extra}


STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "Think"}),
    chunk({"reasoning_content": "ing."}),
    chunk({"thinking_blocks": [{"type": "thinking", "thinking": "Thinking.", "signature": SIGNATURE}]}),
    chunk({"thinking_blocks": [{"type": "redacted_thinking", "data": "EmwK"}]}),
    chunk({"content": "Let me "}),
    chunk({"content": "look."}),
    chunk({"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "Read"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"file_path":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "toolu_2", "function": {"name": "Bash", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"command":"ls"}'}}]}),
    chunk({}, "tool_calls"),
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": completion({})["usage"]},
]


def translate(chunks: list[dict[str, Any]]) -> bytes:
    stream = MessageStream(model="claude-x", message_id="msg_1", input_tokens=1000)
    return stream.start() + b"".join(stream.feed(c) for c in chunks) + stream.finish(None, None)


def sdk_client(sse: bytes) -> anthropic.Anthropic:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    return anthropic.Anthropic(api_key="k", base_url="http://proxy.test", http_client=http, max_retries=0)


def sdk_stream(sse: bytes) -> anthropic.lib.streaming.MessageStream[Any]:
    return (
        sdk_client(sse)
        .messages.stream(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        .__enter__()
    )


def test_a_whole_stream_reads_back_with_the_sdks_accumulator() -> None:
    stream = sdk_stream(translate(STREAM))
    events = [event.type for event in stream]
    final = stream.get_final_message()

    assert final.id == "msg_1" and final.model == "claude-x"
    assert [block.to_dict() for block in final.content] == [
        {"type": "thinking", "thinking": "Thinking.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "ls"}},
    ]
    assert final.stop_reason == "tool_use" and final.stop_sequence is None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (100, 50)
    assert (final.usage.cache_creation_input_tokens, final.usage.cache_read_input_tokens) == (300, 600)
    assert events.count("content_block_start") == events.count("content_block_stop") == 5
    assert events[0] == "message_start" and events[-1] == "message_stop"


def test_stream_events_one_by_one() -> None:
    stream = MessageStream(model="m", message_id="msg_1", input_tokens=7)
    assert stream.start() == (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":7,"output_tokens":0}}}\n\n'
        b'event: ping\ndata: {"type":"ping"}\n\n'
    )
    assert stream.feed(chunk({"role": "assistant", "content": ""})) == b""
    assert stream.feed(chunk({"content": "Hi"})) == (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    )
    assert stream.feed(chunk({}, "stop", stop_sequence=None)) == b""
    stop = next(iter([chunk({}, "stop")]))
    stop["choices"][0]["stop_sequence"] = "END"
    assert stream.feed(stop) == b""
    assert stream.finish({"prompt_tokens": 7, "completion_tokens": 2}, None) == (
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"stop_sequence",'
        b'"stop_sequence":"END"},"usage":{"input_tokens":7,"output_tokens":2,'
        b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )


def test_a_stream_without_usage_keeps_the_start_figures() -> None:
    final = sdk_stream(translate([chunk({"content": "Hi"})])).get_final_message()
    assert (final.usage.input_tokens, final.usage.output_tokens, final.stop_reason) == (1000, 0, "end_turn")


def test_a_thinking_block_that_was_not_streamed_is_written_whole() -> None:
    blocks = [{"type": "thinking", "thinking": "All at once.", "signature": SIGNATURE}]
    final = sdk_stream(translate([chunk({"thinking_blocks": blocks}), chunk({"content": "x"})])).get_final_message()
    assert final.content[0].to_dict() == blocks[0]


def test_a_stream_error_makes_the_sdk_raise() -> None:
    stream = MessageStream(model="m", message_id="msg_1", input_tokens=1)
    sse = stream.start() + stream.feed(chunk({"content": "partial"})) + stream.error(529, "Overloaded")
    assert b"message_stop" not in sse
    with pytest.raises(anthropic.APIStatusError) as raised:
        sdk_stream(sse).get_final_message()
    assert raised.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


# -- side requests ---------------------------------------------------------------------------------------------------


def side(body: dict[str, Any]) -> str | None:
    return side_request(parse_request(body))


def test_claude_codes_side_requests() -> None:
    quota = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "quota"}],
        "metadata": {"user_id": LEGACY_USER_ID},
    }
    assert side(quota) == "probe"
    topic = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 512,
        "system": [
            {
                "type": "text",
                "text": "Analyze if this message indicates a new conversation topic. If it does, extract a 2-3 word "
                "title that captures the new topic. Format your response as a JSON object with two fields: "
                "'isNewTopic' (boolean) and 'title' (string, or null if isNewTopic is false).",
            }
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "fix the login bug"}]}],
        "temperature": 0,
        "metadata": {"user_id": LEGACY_USER_ID},
        "stream": True,
    }
    assert side(topic) == "title"
    title = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 512,
        "messages": [
            {"role": "user", "content": "Please write a 5-10 word title for the following conversation:\n\nUser: hi"}
        ],
    }
    assert side(title) == "title"
    prefix = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 512,
        "system": 'Extract the command prefix. Return "command_injection_detected" if command injection is present.',
        "messages": [{"role": "user", "content": "Command: git status"}],
    }
    assert side(prefix) == "command_prefix"
    warmup = {**claude_code_body(), "messages": [{"role": "user", "content": [{"type": "text", "text": "Warmup"}]}]}
    assert side(warmup) == "warmup"
    compact = claude_code_body()
    compact["messages"].append({"role": "assistant", "content": "Done."})
    compact["messages"].append(
        {
            "role": "user",
            "content": "Your task is to create a detailed summary of the conversation so far, paying close attention "
            "to the user's explicit requests and your previous actions.",
        }
    )
    assert side(compact) == "compact"


def test_conversations_are_not_side_requests() -> None:
    assert side(minimal()) is None
    with_title_words = claude_code_body()
    with_title_words["messages"][0]["content"] = [{"type": "text", "text": "write a 5-10 word title for my post"}]
    assert side(with_title_words) is None
    assert side(minimal(max_tokens=2, messages=[{"role": "user", "content": "Warmup"}])) == "warmup"
    chatty = minimal(
        messages=[
            {"role": "user", "content": "Warmup"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go"},
        ]
    )
    assert side(chatty) is None

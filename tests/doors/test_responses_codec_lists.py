"""The Responses codec's lists and Conversations bodies, and its refusal of bad input of any JSON type."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.conversations import Conversation, ConversationItemList
from openai.types.responses.response_item_list import ResponseItemList

from proxy.doors.responses_codec import (
    conversation_object,
    input_items_of,
    item_list,
    parse_conversation_create,
    parse_conversation_items,
    parse_request,
)
from proxy.errors import BadRequest

RID = "resp_list"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "rules"},
    {
        "role": "user",
        "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:,"}}],
    },
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "rain"},
    {"role": "assistant", "content": None, "refusal": "No."},
]


def test_core_messages_as_items_the_sdk_parses() -> None:
    items = input_items_of(MESSAGES, response_id=RID)
    assert [(i["type"], i["id"]) for i in items] == [
        ("message", "msg_list_in0"),
        ("message", "msg_list_in1"),
        ("message", "msg_list_in2"),
        ("function_call", "fc_list_in2_0"),
        ("function_call_output", "fco_list_in3"),
        ("message", "msg_list_in4"),
    ]
    assert items[1]["content"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": "data:,", "detail": "auto"},
    ]
    page = item_list(items, limit=None, after=None, order="asc")
    assert ResponseItemList.model_validate(page).data[3].type == "function_call"
    assert ConversationItemList.model_validate(page).last_id == "msg_list_in4"


def test_items_sent_back_give_the_same_messages() -> None:
    items = input_items_of(MESSAGES[2:], response_id=RID)
    assert parse_conversation_items({"items": items}) == MESSAGES[2:]


def test_paging() -> None:
    items = [{"id": f"i{n}"} for n in range(5)]
    newest = item_list(items, limit="2", after=None, order=None)
    assert [i["id"] for i in newest["data"]] == ["i4", "i3"] and newest["has_more"] is True
    assert (newest["first_id"], newest["last_id"]) == ("i4", "i3")
    rest = item_list(items, limit=2, after="i3", order="desc")
    assert [i["id"] for i in rest["data"]] == ["i2", "i1"]
    tail = item_list(items, limit=10, after="i2", order="asc")
    assert [i["id"] for i in tail["data"]] == ["i3", "i4"] and tail["has_more"] is False
    empty = item_list([], limit=None, after=None, order=None)
    assert (empty["data"], empty["first_id"], empty["has_more"]) == ([], None, False)


@pytest.mark.parametrize(
    ("limit", "after", "order", "param"),
    [
        (0, None, None, "q.limit"),
        (101, None, None, "q.limit"),
        ("ten", None, None, "q.limit"),
        (True, None, None, "q.limit"),
        (None, "nope", None, "q.after"),
        (None, 3, None, "q.after"),
        (None, None, "up", "q.order"),
    ],
)
def test_bad_paging_is_refused(limit: object, after: object, order: object, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        item_list([{"id": "a"}], limit=limit, after=after, order=order, param_prefix="q.")
    assert caught.value.param == param


def test_a_conversation_object_the_sdk_parses() -> None:
    parsed = Conversation.model_validate(conversation_object("conv_1", created_at=5, metadata=None))
    assert (parsed.id, parsed.created_at, parsed.metadata) == ("conv_1", 5, {})


def test_conversation_create() -> None:
    assert parse_conversation_create(None) == ([], None)
    messages, metadata = parse_conversation_create(
        {
            "items": [{"type": "message", "role": "user", "content": "hi"}, {"type": "reasoning", "summary": []}],
            "metadata": {"k": "v"},
        }
    )
    assert messages == [{"role": "user", "content": "hi"}] and metadata == {"k": "v"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"items": [{"role": "user", "content": "x"}] * 21}, "items"),
        ({"items": [{"type": "compaction", "encrypted_content": "e"}]}, "items[0].type"),
        ({"metadata": {str(n): "v" for n in range(17)}}, "metadata"),
        ({"metadata": {"k" * 65: "v"}}, "metadata." + "k" * 65),
        ({"metadata": {"k": "v" * 513}}, "metadata.k"),
        ({"metadata": {"k": 1}}, "metadata.k"),
        ({"title": "x"}, "title"),
        ([], "body"),
    ],
)
def test_bad_conversation_bodies_are_refused(body: Any, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_conversation_create(body)
    assert caught.value.param == param


@pytest.mark.parametrize(("body", "param"), [({}, "items"), ({"items": "x"}, "items"), ("x", "body")])
def test_conversation_items_need_a_list(body: Any, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_conversation_items(body)
    assert caught.value.param == param


# --- every field, any JSON type ---

TEMPLATE: dict[str, Any] = {
    "model": "m",
    "instructions": "sys",
    "input": [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "a"},
            {"type": "input_image", "image_url": "data:,", "detail": "auto"},
            {"type": "input_file", "filename": "f.pdf", "file_data": "data:,"},
        ]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "b", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "r"},
        ]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "id": "fc_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "o"}]},
        {"type": "compaction", "encrypted_content": "e"},
    ],
    "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": False}],
    "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]},
    "text": {"format": {"type": "json_schema", "name": "n", "schema": {}, "strict": True, "description": "d"}, "verbosity": "low"},
    "reasoning": {"effort": "low", "summary": "auto", "generate_summary": "auto", "mode": "standard", "context": "auto"},
    "metadata": {"k": "v"},
    "include": ["reasoning.encrypted_content"],
    "stream_options": {"include_obfuscation": True},
    "prompt_cache_options": {"ttl": "30m", "mode": "implicit"},
    "context_management": [{"type": "compaction", "compact_threshold": 1000}],
    "conversation": {"id": "conv_1"},
    "max_output_tokens": 100, "temperature": 1, "top_p": 1, "top_logprobs": 0, "max_tool_calls": 1,
    "parallel_tool_calls": True, "store": True, "stream": False, "background": False, "truncation": "auto",
    "user": "u", "safety_identifier": "s", "prompt_cache_key": "k", "prompt_cache_retention": "24h", "service_tier": "auto",
}  # fmt: skip
"""A request that uses every field the codec reads; each of its values is swapped for other JSON below."""


def _paths(value: Any, path: str = "") -> list[tuple[str, tuple[str | int, ...]]]:
    """Every value's path, as OpenAI writes it and as the keys that reach it."""
    out: list[tuple[str, tuple[str | int, ...]]] = []

    def walk(node: Any, shown: str, keys: tuple[str | int, ...]) -> None:
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            label = f"{shown}[{key}]" if isinstance(key, int) else (f"{shown}.{key}" if shown else key)
            out.append((label, (*keys, key)))
            walk(child, label, (*keys, key))

    walk(value, path, ())
    return out


PATHS = _paths(TEMPLATE)
SAMPLES: list[Any] = [None, True, 0, -1, 2.5, "", "zz", [], [1], {}, {"x": 1}]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _swapped(keys: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(TEMPLATE)
    node: Any = body
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return body


def _related(param: str | None, path: str) -> bool:
    """The refusal names the swapped field, the object holding it, or a field inside either (a
    changed `type` changes which fields its object may have)."""
    holder = path[: max(path.rfind("."), path.rfind("["))] if path.rfind(".") > 0 or path.rfind("[") > 0 else path
    return param is not None and (param.startswith(holder) or path.startswith(param))


def test_the_template_is_valid() -> None:
    call = parse_request(TEMPLATE)
    assert call.compactions == ((4, "e"),) and len(PATHS) > 100


@pytest.mark.parametrize(("path", "keys"), PATHS, ids=[p for p, _ in PATHS])
def test_any_json_in_any_field_is_taken_or_refused_naming_it(path: str, keys: tuple[str | int, ...]) -> None:
    for value in SAMPLES:
        try:
            parse_request(_swapped(keys, value))
        except BadRequest as error:
            assert _related(error.param, path) or error.param in ("conversation", "tool_choice.tools[0].name"), (
                value,
                error.param,
            )


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATHS), JSON)
def test_random_json_anywhere_is_never_a_crash(entry: tuple[str, tuple[str | int, ...]], value: Any) -> None:
    try:
        parse_request(_swapped(entry[1], value))
    except BadRequest as error:
        assert error.param


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_random_bodies_and_items_are_never_a_crash(value: Any) -> None:
    for attempt in (lambda: parse_request(value), lambda: parse_request({"model": "m", "input": [value]}),
                    lambda: parse_conversation_items({"items": [value]}), lambda: parse_conversation_create(value)):  # fmt: skip
        try:
            attempt()
        except BadRequest as error:
            assert error.status == 400

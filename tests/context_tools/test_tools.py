"""The context tools' pure parts: what to offer, whose calls an answer holds, the notice."""

from __future__ import annotations

from typing import Any

from proxy.config import HandoffSettings, ToolSettings
from proxy.context_tools import handoff
from proxy.context_tools.tools import (
    NEW_CONTEXT,
    RECALL,
    add_usage,
    client_message,
    offer,
    round_messages,
    split_calls,
    with_tools,
)


def call(name: str, id_: str = "c1") -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def test_recall_is_offered_only_once_the_session_has_an_archive() -> None:
    settings = ToolSettings()
    assert offer(settings, {}, "win_0").names == ()
    assert offer(settings, {}, "win_1").names == (RECALL,)
    assert offer(ToolSettings(recall=False), {}, "win_3").names == ()
    both = offer(ToolSettings(new_context=True, max_rounds=5), {}, "win_1")
    assert both.names == (RECALL, NEW_CONTEXT) and both.max_rounds == 5
    assert offer(ToolSettings(new_context=True), {}, "win_0").names == (NEW_CONTEXT,)


def test_a_client_tool_of_the_same_name_shadows_the_proxys() -> None:
    body = {"tools": [tool(RECALL), tool("lookup")]}
    offered = offer(ToolSettings(new_context=True), body, "win_2")
    assert offered.names == (NEW_CONTEXT,) and offered.shadowed == (RECALL,)
    assert [t["function"]["name"] for t in with_tools(body, offered)["tools"]] == [RECALL, "lookup", NEW_CONTEXT]


def test_no_tools_for_several_choices_or_legacy_functions() -> None:
    assert not offer(ToolSettings(), {"n": 2}, "win_1")
    assert not offer(ToolSettings(), {"functions": [{"name": "f"}]}, "win_1")
    assert offer(ToolSettings(), {"n": 1}, "win_1")


def test_with_tools_leaves_a_body_alone_when_nothing_is_offered() -> None:
    body = {"model": "m"}
    assert with_tools(body, offer(ToolSettings(), body, "win_0")) is body
    schema = with_tools(body, offer(ToolSettings(), body, "win_1"))["tools"][0]["function"]
    assert schema["parameters"]["required"] == ["uri"] and "context://archive/" in schema["description"]


def test_an_answer_is_split_into_the_proxys_calls_and_the_clients() -> None:
    message = {"role": "assistant", "content": "x", "tool_calls": [call("lookup", "a"), call(RECALL, "b")]}
    split = split_calls(message, (RECALL,))
    assert [c["id"] for c in split.proxy] == ["b"] and [c["id"] for c in split.client] == ["a"]
    assert client_message(message, split.client)["tool_calls"] == [call("lookup", "a")]
    assert "tool_calls" not in client_message(message, [])
    assert split_calls({"role": "assistant", "content": "hi"}, (RECALL,)).proxy == []


def test_a_round_adds_the_proxys_calls_and_one_result_each() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [call("lookup", "a"), call(RECALL, "b")]}
    added = round_messages(message, [call(RECALL, "b")], ["span text"])
    assert added == [
        {"role": "assistant", "content": None, "tool_calls": [call(RECALL, "b")]},
        {"role": "tool", "tool_call_id": "b", "content": "span text"},
    ]


def test_usage_is_summed_over_rounds() -> None:
    first = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "prompt_tokens_details": {"cached": 4}}
    second = {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35, "prompt_tokens_details": {"cached": 8}}
    total = add_usage(add_usage(None, first), second)
    assert total == {
        "prompt_tokens": 40,
        "completion_tokens": 7,
        "total_tokens": 47,
        "prompt_tokens_details": {"cached": 12},
    }
    assert add_usage(first, None) is first


def test_the_notice_is_due_within_the_budget_and_rounded_and_clamped() -> None:
    settings = HandoffSettings(budget_tokens=100, prompt="{n_remaining} left; {n_remaining}!")
    assert handoff.due(settings, 100) and not handoff.due(settings, 101) and not handoff.due(None, -5)
    assert handoff.notice_text(settings.prompt, 42.6) == "43 left; 43!"
    assert handoff.notice_text(settings.prompt, -7) == "0 left; 0!"
    assert handoff.headroom(2100, 2000) == 100


def test_the_notice_goes_to_the_last_user_message() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    ]
    out = handoff.with_notice(messages, "NOTE")
    assert out[2]["content"] == [{"type": "text", "text": "look"}, {"type": "text", "text": "NOTE"}]
    assert out[1] == messages[1] and out[3] == messages[3]
    assert messages[2]["content"] == [{"type": "text", "text": "look"}], "the input is not changed"
    assert handoff.with_notice([{"role": "user", "content": "hi"}], "NOTE")[0]["content"] == "hi\n\nNOTE"
    assert handoff.with_notice([{"role": "system", "content": "s"}], "NOTE") == [{"role": "system", "content": "s"}]

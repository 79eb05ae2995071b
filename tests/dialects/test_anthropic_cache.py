"""Prompt-cache breakpoints on the Messages bodies the Anthropic dialect writes: the client's stay on
their blocks, the window's summary gets one, never more than four. Pure."""

from __future__ import annotations

import copy
from typing import Any

from proxy.dialects.anthropic import to_messages_body
from proxy.dialects.anthropic_cache import MAX_BREAKPOINTS

CACHE = {"type": "ephemeral"}
SUMMARY = (
    "This session is being continued.\n\nIt was about X.\n\n(The full text is archived at context://archive/win_1.)"
)


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return to_messages_body({"model": "claude-sonnet-4-5", "messages": messages, **extra}, default_max_tokens=4096)


def marked(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": CACHE}]}


def breakpoints(sent: dict[str, Any]) -> list[str]:
    """Where the breakpoints are: `tools[i]`, `system[i]`, `messages[i][j]` (`[j][k]` inside a tool_result)."""
    found = [f"tools[{i}]" for i, tool in enumerate(sent.get("tools") or ()) if "cache_control" in tool]
    system = sent.get("system")
    found += [f"system[{i}]" for i, b in enumerate(system if isinstance(system, list) else ()) if "cache_control" in b]
    for i, turn in enumerate(sent["messages"]):
        for j, block in enumerate(turn["content"] if isinstance(turn["content"], list) else ()):
            inner = block.get("content") if isinstance(block.get("content"), list) else ()
            found += [f"messages[{i}][{j}][{k}]" for k, part in enumerate(inner) if "cache_control" in part]
            found += [f"messages[{i}][{j}]"] if "cache_control" in block else []
    return found


def test_tool_call_and_tool_marks_go_back_on_their_blocks() -> None:
    call = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "cache_control": CACHE}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}, "cache_control": CACHE}]
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "t1", "content": "ok"}]  # fmt: skip
    sent = body(messages, tools=tools)
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}, "cache_control": CACHE}
    ]
    assert sent["tools"][0]["cache_control"] == CACHE
    assert breakpoints(sent) == ["tools[0]", "messages[1][0]"]


def test_a_tool_results_last_part_mark_goes_on_the_result_and_others_stay_inside() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}, "cache_control": CACHE}
    parts = [image, {"type": "text", "text": "seen", "cache_control": CACHE}]
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None,
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": parts}]  # fmt: skip
    result = body(messages)["messages"][2]["content"][0]
    assert result["cache_control"] == CACHE
    assert result["content"][0]["cache_control"] == CACHE and "cache_control" not in result["content"][1]


def test_the_summary_gets_a_breakpoint_and_the_text_stays_byte_for_byte() -> None:
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": SUMMARY},
                {"role": "user", "content": "next"}]  # fmt: skip
    sent = body(messages)
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": SUMMARY, "cache_control": CACHE},
        {"type": "text", "text": "next"},
    ]
    assert breakpoints(sent) == ["messages[0][0]"]


def test_no_summary_no_proxy_breakpoint() -> None:
    cited_later = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
                   {"role": "user", "content": "see context://archive/win_1"}]  # fmt: skip
    assert breakpoints(body(cited_later)) == []
    assert breakpoints(body([{"role": "user", "content": "hello"}])) == []


def test_over_four_keeps_the_latest_the_summary_the_systems_then_the_tools_then_older_ones() -> None:
    system = {"role": "system", "content": [{"type": "text", "text": "A", "cache_control": CACHE},
                                            {"type": "text", "text": "B", "cache_control": CACHE}]}  # fmt: skip
    tools = [{"type": "function", "function": {"name": "f"}, "cache_control": CACHE}]
    history: list[dict[str, Any]] = [system, {"role": "user", "content": SUMMARY}]
    for n in range(4):
        history += [marked(f"q{n}"), {"role": "assistant", "content": f"a{n}"}]
    history.append(marked("latest"))
    sent = body(history, tools=tools)
    assert breakpoints(sent) == ["system[0]", "system[1]", "messages[0][0]", "messages[8][0]"]
    assert sent["messages"][0]["content"][0]["text"] == SUMMARY
    assert "cache_control" not in sent["tools"][0]
    without_summary = body([system, *history[2:]], tools=tools)
    assert breakpoints(without_summary) == ["tools[0]", "system[0]", "system[1]", "messages[8][0]"]


def test_a_top_level_cache_control_takes_one_of_the_four() -> None:
    history = [marked(f"q{n}") if n % 2 == 0 else {"role": "assistant", "content": f"a{n}"} for n in range(9)]
    sent = body(history, anthropic={"cache_control": CACHE})
    assert len(breakpoints(sent)) == MAX_BREAKPOINTS - 1
    assert breakpoints(sent) == ["messages[4][0]", "messages[6][0]", "messages[8][0]"]


def test_the_breakpoints_taken_off_are_taken_off_copies_not_the_clients_blocks() -> None:
    system = [{"type": "text", "text": f"rule {n}", "cache_control": CACHE} for n in range(4)]
    history = [marked("q0"), {"role": "assistant", "content": "a0"}, marked("q1")]
    request = {"model": "claude-sonnet-4-5", "messages": history, "anthropic": {"system": system}}
    kept = copy.deepcopy(request)
    sent = to_messages_body(request, default_max_tokens=4096)
    assert breakpoints(sent) == ["system[1]", "system[2]", "system[3]", "messages[2][0]"]
    assert request == kept

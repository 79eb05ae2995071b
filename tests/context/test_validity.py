"""ensure_valid_history: what the API requires of a message list."""

from __future__ import annotations

from proxy.context.validity import CONTINUATION, MISSING_RESULT, ensure_valid_history

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}


def test_orphan_tool_result_is_dropped() -> None:
    messages = [{"role": "user", "content": "u"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}]
    assert ensure_valid_history(messages) == [{"role": "user", "content": "u"}]


def test_missing_result_gets_a_placeholder() -> None:
    out = ensure_valid_history([{"role": "user", "content": "u"}, CALL, {"role": "user", "content": "next"}])
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT}
    assert out[3]["content"] == "next"


def test_first_non_system_message_is_a_user_message() -> None:
    out = ensure_valid_history([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}])
    assert out[1] == {"role": "user", "content": CONTINUATION}


def test_valid_history_is_unchanged() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    assert ensure_valid_history(messages) == messages


def test_orphans_only_become_one_placeholder_user_message() -> None:
    orphans = [
        {"role": "tool", "tool_call_id": "a", "content": "r"},
        {"role": "tool", "tool_call_id": "b", "content": "s"},
    ]
    assert ensure_valid_history(orphans) == [{"role": "user", "content": CONTINUATION}]
    assert ensure_valid_history([]) == []


def test_edges_of_user_first() -> None:
    system = {"role": "system", "content": "s"}
    assert ensure_valid_history([system]) == [system], "a system-only list has nothing to fix"
    with_orphan = ensure_valid_history([system, {"role": "tool", "tool_call_id": "z", "content": "r"}])
    assert with_orphan == [system], "the system message remains, so no placeholder is added"
    out = ensure_valid_history([system, CALL, {"role": "tool", "tool_call_id": "c1", "content": "r"}])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool"]

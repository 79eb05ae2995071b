"""Mechanical clearing, pure: which tool results and reasoning leave what is sent."""

from __future__ import annotations

from typing import Any

from proxy.config import ClearTarget, CompactSettings
from proxy.context.clearing import CLEARED, ClearRules, ToolResultRule, clear_history, clear_new_input
from proxy.context.compose import build_history, compose_messages
from proxy.context.window import Window
from proxy.sessions import Turn


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_history(names: list[str], *, pinned_at: int | None = None) -> Any:
    """One user turn per tool call: the assistant calls `name`, the next turn carries its result."""
    turns = []
    for n, name in enumerate(names):
        user = {"role": "user", "content": f"u{n}", **({"pinned": True} if n == pinned_at else {})}
        calling = {"role": "assistant", "content": None, "tool_calls": [call(f"c{n}", name)]}
        turns.append(Turn(2 * n, "completed", (user,), calling, (10, 10)))
        result = {"role": "tool", "tool_call_id": f"c{n}", "content": f"output of {name} number {n} " * 20}
        turns.append(Turn(2 * n + 1, "completed", (result,), {"role": "assistant", "content": f"a{n}"}, (80, 10)))
    return build_history(Window(), turns)


def rules(*targets: ClearTarget | str) -> ClearRules:
    parsed = tuple(ClearTarget(target=t) if isinstance(t, str) else t for t in targets)
    built = ClearRules.from_settings(CompactSettings(clear=parsed))
    assert built is not None
    return built


def tool_contents(history: Any) -> list[str]:
    return [m["content"] for m in compose_messages(history, []) if m["role"] == "tool"]


def count(message: dict[str, Any]) -> int:
    return len(str(message.get("content") or "")) // 4 + 3


def test_keep_recent_counts_within_the_clearable_set_and_exempt_wins() -> None:
    history = tool_history(["run_bash", "read_file", "run_bash", "search", "run_bash", "read_file"])
    rule = ClearTarget(keep_recent=1, tool_filter=("run_bash", "read_file"), exempt_tools=("read_file",))
    cleared = clear_history(history, rules(rule), count)
    contents = tool_contents(cleared)
    assert [c == CLEARED for c in contents] == [True, False, True, False, False, False]
    ids = [m["tool_call_id"] for m in compose_messages(cleared, []) if m["role"] == "tool"]
    assert ids == [f"c{n}" for n in range(6)], "a cleared result keeps its tool_call_id"
    assert cleared.total < history.total, "the budget sees the cleared size"
    assert tool_contents(history)[0] != CLEARED, "the history it came from is untouched"


def test_keep_recent_minimum_is_one_and_no_keep_recent_clears_all() -> None:
    history = tool_history(["a", "b", "c"])
    assert [c == CLEARED for c in tool_contents(clear_history(history, rules("tool-result"), count))] == [True] * 3
    low = ClearRules((ToolResultRule(0, frozenset(), frozenset()),))
    assert [c == CLEARED for c in tool_contents(clear_history(history, low, count))] == [True, True, False]


def test_pinned_units_are_never_cleared() -> None:
    history = tool_history(["a", "b", "c"], pinned_at=0)
    contents = tool_contents(clear_history(history, rules("tool-result"), count))
    assert [c == CLEARED for c in contents] == [False, True, True]


def test_clearing_is_deterministic_and_older_bytes_stay_when_the_history_grows() -> None:
    shorter = clear_history(tool_history(["a"] * 4), rules(ClearTarget(keep_recent=2)), count)
    longer = clear_history(tool_history(["a"] * 5), rules(ClearTarget(keep_recent=2)), count)
    again = clear_history(tool_history(["a"] * 4), rules(ClearTarget(keep_recent=2)), count)
    assert b",".join(shorter.settled_json) == b",".join(again.settled_json)
    before, after = compose_messages(shorter, []), compose_messages(longer, [])
    changed = [i for i, (x, y) in enumerate(zip(before, after, strict=False)) if x != y]
    assert changed == [before.index(next(m for m in before if m.get("tool_call_id") == "c2"))], (
        "growing by one result clears exactly one more, the newest one keep_recent let go of"
    )


def test_thinking_and_reasoning_tags_are_stripped_from_assistant_messages_only() -> None:
    answer = {"role": "assistant", "content": "<THINK>plan</think>\nHello", "reasoning_content": "plan"}
    user = {"role": "user", "content": "<think>not mine to strip</think> hi"}
    history = build_history(Window(), [Turn(0, "completed", (user,), answer, (5, 9))])
    sent = compose_messages(clear_history(history, rules("thinking", "reasoning-tags"), count), [])
    assert sent == [user, {"role": "assistant", "content": "Hello"}]
    only_thinking = compose_messages(clear_history(history, rules("thinking"), count), [])
    assert only_thinking[1] == {"role": "assistant", "content": "<THINK>plan</think>\nHello"}
    new = clear_new_input([answer, {"role": "tool", "tool_call_id": "x", "content": "y"}], rules("reasoning-tags"))
    assert new[0]["content"] == "Hello" and new[0]["reasoning_content"] == "plan" and new[1]["content"] == "y"


def test_nothing_to_clear_returns_the_same_history() -> None:
    history = tool_history(["a"])
    assert clear_history(history, rules("thinking"), count) is history

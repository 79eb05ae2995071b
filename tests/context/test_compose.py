"""Composition and units, pure."""

from __future__ import annotations

from proxy.context.compose import build_history, group_units
from proxy.context.window import Window
from tests.context.factories import history, turn


def test_full_composition_is_leading_then_turns_in_order() -> None:
    h = history(3)
    assert [m["content"] for m in h.messages()] == ["sys", "u0", "a0", "u1", "a1", "u2", "a2"]
    assert h.window.leading == ({"role": "system", "content": "sys"},)
    assert h.total == 70


def test_only_completed_turns_enter_the_context() -> None:
    turns = [turn(0, "u0"), turn(1, "lost", status="failed"), turn(2, "u2")]
    assert [m["content"] for m in build_history(Window(), turns).messages()] == ["u0", "ok", "u2", "ok"]


def test_tool_results_stay_in_the_unit_of_their_call() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    turns = [
        turn(0, "u0", call),
        turn(1, {"role": "tool", "tool_call_id": "c1", "content": "r"}, "done"),
        turn(2, "u2"),
    ]
    units = group_units(turns)
    assert [[t.seq for t in u.turns] for u in units] == [[0, 1], [2]]


def test_window_with_summary_and_pinned() -> None:
    window = Window(
        current="win_1", boundary=5, summary={"role": "user", "content": "S"}, summary_tokens=5,
        leading=({"role": "system", "content": "sys"},), leading_tokens=(4,),
        pinned=({"role": "user", "content": "P", "pinned": True},), pinned_tokens=(3,),
    )  # fmt: skip
    h = build_history(window, [turn(6, "u6")])
    assert [m["content"] for m in h.messages()] == ["sys", "S", "P", "u6", "ok"]
    assert h.total == 4 + 5 + 3 + 20


def test_window_json_round_trip_and_lineage() -> None:
    window = Window().advance(boundary=3, summary={"role": "user", "content": "s"})
    assert (window.first, window.previous, window.current) == ("win_0", "win_0", "win_1")
    assert Window.from_json(window.to_json()) == window
    assert window.advance().current == "win_2"

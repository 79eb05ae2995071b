"""Composition and units, pure."""

from __future__ import annotations

import orjson

from proxy.context.compose import (
    build_history,
    compose_json,
    compose_messages,
    extend_history,
    group_units,
    json_array,
)
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
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
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


def _call(call_id: str) -> dict:  # type: ignore[type-arg]
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }


def _histories() -> list[tuple[object, list[dict]]]:  # type: ignore[type-arg]
    tool = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    summary_window = Window(
        current="win_1",
        boundary=0,
        summary={"role": "user", "content": "S"},
        leading=({"role": "system", "content": "sys"},),
    )
    assistant_first = Window(current="win_1", boundary=0, leading=({"role": "system", "content": "sys"},))
    return [
        (history(4), [{"role": "user", "content": "new"}]),
        (build_history(Window(), [turn(0, "u0", _call("c1"))]), [tool]),  # a delta client answering the call
        (
            build_history(Window(), [turn(0, "u0", _call("c1")), turn(1, "u1")]),
            [{"role": "user", "content": "n"}],
        ),  # unanswered
        (
            build_history(
                Window(), [turn(0, {"role": "tool", "tool_call_id": "zz", "content": "orphan"}), turn(1, "u1")]
            ),
            [],
        ),
        (
            build_history(summary_window, [turn(3, {"role": "user", "content": "p", "pinned": True})]),
            [{"role": "user", "content": "x"}],
        ),
        (
            build_history(assistant_first, [turn(2, {"role": "assistant", "content": "a"}, "b")]),
            [{"role": "user", "content": "x"}],
        ),
        (build_history(Window(), []), [{"role": "system", "content": "s"}, {"role": "user", "content": "first"}]),
    ]


def test_compose_json_equals_compose_messages() -> None:
    for h, new in _histories():
        assert orjson.loads(compose_json(h, new)) == compose_messages(h, new)  # type: ignore[arg-type]
    h, new = _histories()[1]
    assert compose_messages(h, new)[-1] == {"role": "tool", "tool_call_id": "c1", "content": "r"}  # type: ignore[arg-type]


def test_json_array_joins_serialized_parts() -> None:
    assert json_array([]) == b"[]"
    assert json_array([b'{"a":1}']) == b'[{"a":1}]'
    assert orjson.loads(json_array([b'{"a":1}', b'{"b":2},{"c":3}'])) == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_settled_units_are_serialized_once() -> None:
    h = history(5)
    first = compose_json(h, [{"role": "user", "content": "a"}])
    assert h.settled_json and b",".join(h.settled_json) in first
    second = compose_json(h, [{"role": "user", "content": "b"}])
    assert first[: first.index(b'"a"')] == second[: second.index(b'"b"')]


def test_extending_a_history_equals_building_it_whole() -> None:
    call = _call("c9")
    turns = [turn(0, "u0", lead=({"role": "system", "content": "sys"},)), turn(1, "u1", call),
             turn(2, {"role": "tool", "tool_call_id": "c9", "content": "r"}, "done"), turn(3, "u3"), turn(4, "u4")]  # fmt: skip
    whole = build_history(Window(), turns)
    for split in range(1, len(turns)):
        grown = build_history(Window(), turns[:split])
        for t in turns[split:]:
            grown = extend_history(grown, [t])
        assert grown.units == whole.units
        assert (grown.units_tokens, grown.message_count, b",".join(grown.settled_json)) == (
            whole.units_tokens,
            whole.message_count,
            b",".join(whole.settled_json),
        )
        assert compose_json(grown, []) == compose_json(whole, [])


def test_a_long_session_keeps_few_settled_chunks() -> None:
    turns = [turn(n, f"u{n}") for n in range(300)]
    grown = build_history(Window(), turns[:1])
    most = 0
    for t in turns[1:]:
        grown = extend_history(grown, [t])
        sizes = [len(chunk) for chunk in grown.settled_json]
        each_smaller = all(a > b for a, b in zip(sizes, sizes[1:]))
        assert each_smaller
        most = max(most, len(sizes))
    assert most <= 9  # log2(299 settled units) + 1
    whole = build_history(Window(), turns)
    assert b",".join(grown.settled_json) == b",".join(whole.settled_json)
    assert compose_json(grown, []) == compose_json(whole, [])

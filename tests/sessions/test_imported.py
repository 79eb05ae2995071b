"""Which messages of a request's new input are earlier exchanges, and which are its own turn."""

from __future__ import annotations

from proxy.sessions.imported import Exchange, earlier_exchanges, own_turn_start

U, A = {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}
CALL = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "r"}


def test_the_last_user_turn_is_the_request_own_and_each_answered_exchange_before_it_is_one_turn() -> None:
    new_input = [U, A, U, U, CALL, RESULT, A, U]
    assert own_turn_start(new_input) == 7
    assert earlier_exchanges(new_input) == [Exchange(0, 1), Exchange(2, 6)]


def test_a_trailing_tool_exchange_stays_with_the_request_own_turn() -> None:
    assert earlier_exchanges([U, A, U, CALL, RESULT]) == [Exchange(0, 1)]


def test_nothing_is_imported_without_a_finished_exchange_before_the_last_user_turn() -> None:
    assert earlier_exchanges([U]) == []
    assert earlier_exchanges([RESULT]) == []
    assert earlier_exchanges([U, CALL, RESULT, U]) == [], "an answer never came: the input stays one turn"

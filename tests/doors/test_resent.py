"""A resent conversation recognised in a body's bytes: whatever the next body holds, parsing it
with the remembered bodies gives what parsing it whole gives, the same request or the same 400."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.doors.resent import ResentBodies
from proxy.errors import BadRequest
from proxy.handlers.request import parse_chat_request


def _outcome(raw: bytes, bodies: ResentBodies | None = None) -> Any:
    try:
        chat = parse_chat_request(raw, bodies)
    except BadRequest as exc:
        return ("400", exc.message, exc.param, exc.code)
    return (chat.body, chat.model, chat.messages, chat.stream, chat.include_usage)


def _sdk_body(messages: list[dict[str, Any]], **fields: Any) -> bytes:
    """As the openai SDK writes it: `messages` first, compact JSON."""
    return orjson.dumps({"messages": messages, "model": "gpt-4o-mini", **fields})


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer in one short sentence, in the language of the question."}
    ]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}"})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


def _same(raw: bytes, bodies: ResentBodies) -> None:
    assert _outcome(raw, bodies) == _outcome(raw)


def test_a_growing_conversation_is_parsed_from_its_last_request_on() -> None:
    bodies = ResentBodies(1 << 20)
    for turns in range(1, 12):
        messages = [*_conversation(turns - 1), {"role": "user", "content": f"question {turns - 1}"}]
        _same(_sdk_body(messages, stream=True, stream_options={"include_usage": True}), bodies)
    assert bodies.hits == 10


def test_members_before_messages_are_kept_from_the_remembered_body() -> None:
    bodies = ResentBodies(1 << 20)
    for turns in range(1, 5):
        messages = [*_conversation(turns - 1), {"role": "user", "content": f"question {turns - 1}"}]
        _same(orjson.dumps({"model": "gpt-4o", "temperature": 0.5, "messages": messages, "stream": False}), bodies)
    assert bodies.hits == 3


def test_a_question_asked_again_or_edited_reuses_the_messages_before_it() -> None:
    bodies = ResentBodies(1 << 20)
    base = _conversation(3)
    _same(_sdk_body([*base, {"role": "user", "content": "first try"}]), bodies)
    _same(_sdk_body([*base, {"role": "user", "content": "first try"}]), bodies)
    _same(_sdk_body([*base, {"role": "user", "content": "an edited question"}]), bodies)
    assert bodies.hits == 2


def test_an_agents_turn_with_parallel_tool_results_reuses_the_last_request() -> None:
    bodies = ResentBodies(1 << 20)
    messages = [*_conversation(2), {"role": "user", "content": "look three things up"}]
    _same(_sdk_body(messages), bodies)
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "get", "arguments": "{}"}} for n in range(5)]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    messages.extend({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"} for n in range(5))
    _same(_sdk_body(messages), bodies)
    assert bodies.hits == 1


def test_a_tenants_bodies_serve_that_tenant_only() -> None:
    bodies = ResentBodies(1 << 20)
    first = _sdk_body([*_conversation(2), {"role": "user", "content": "q"}])
    parse_chat_request(first, bodies, "team-a")
    grown = _sdk_body([*_conversation(2), {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    assert parse_chat_request(grown, bodies, "team-b").messages == parse_chat_request(grown).messages
    assert bodies.hits == 0
    parse_chat_request(grown, bodies, "team-a")
    assert bodies.hits == 1


def test_a_body_with_spaces_is_parsed_whole() -> None:
    bodies = ResentBodies(1 << 20)
    for turns in range(1, 4):
        messages = [*_conversation(turns - 1), {"role": "user", "content": "hi"}]
        _same(json.dumps({"messages": messages, "model": "m"}).encode(), bodies)
    assert bodies.hits == 0


def test_what_follows_the_resent_part_decides_as_in_a_whole_parse() -> None:
    bodies = ResentBodies(1 << 20)
    base = [*_conversation(2), {"role": "user", "content": "q"}]
    _same(_sdk_body(base), bodies)
    prefix = _sdk_body(base)[: -len(b'],"model":"gpt-4o-mini"}')]
    tails = [
        b',{"role":"assistant","content":"a"},{"role":"user","content":"q2"}],"model":"gpt-4o-mini"}',
        b',{"role":"wizard","content":"a"}],"model":"gpt-4o-mini"}',
        b',{"role":"user","content":"q2"}],"model":"other","model":"gpt-4o"}',
        b',{"role":"user","content":"q2"}],"model":"m","messages":[{"role":"user","content":"x"}]}',
        b',{"role":"user","content":"q2"}],"model":"m","messag\\u0065s":[{"role":"user","content":"x"}]}',
        b',{"role":"user","content":"q2"}],"model":"m","temperature":1E0}',
        b',{"role":"user","content":"q2"}],"model":"m","stream":"yes"}',
        b',{"role":"user","content":"q2"}],"model":"m"',
        b',{"role":"user","content":"q2"}]}',
        b',{"role":"user","content":"q2"}],"model":"m"} trailing',
        b',{"role":"user","content":"q2"}' + b"[" * 2000 + b"]" * 2000 + b'],"model":"m"}',
        b"]",
    ]
    for tail in tails:
        _same(_sdk_body(base), bodies)  # a used place is forgotten: remembered again for each tail
        _same(prefix + tail, bodies)
    assert bodies.hits >= 5


def test_a_body_with_a_member_twice_is_not_remembered() -> None:
    """Only its last `messages` array counts, and what lies between is not `before`."""
    bodies = ResentBodies(1 << 20)
    one = b'{"role":"user","content":"question 0"}'
    first = orjson.dumps(_conversation(1))[1:-1]
    for between in (b'"model":"m"', b'"temperature":0'):
        remembered = b'{"messages":[' + one + b"]," + between + b',"messages":[' + first + b'],"model":"m"}'
        _same(remembered, bodies)
        _same(remembered[: -len(b'],"model":"m"}')] + b',{"role":"user","content":"question 1"}]}', bodies)
    assert bodies.hits == 0


def test_a_conversation_holds_the_places_of_its_latest_body_only() -> None:
    bodies = ResentBodies(1 << 20)
    for turns in range(1, 30):
        _same(_sdk_body([*_conversation(turns - 1), {"role": "user", "content": f"question {turns - 1}"}]), bodies)
    assert bodies.hits == 28
    assert len(bodies._places) == 2


def test_the_bodies_remembered_stay_within_their_bound() -> None:
    bodies = ResentBodies(40_000)
    for conversation in range(20):  # conversations of 12 messages, about 10 KB each
        first = {"role": "system", "content": f"conversation {conversation}: answer in one short sentence."}
        messages = [first, *_conversation(5)[1:], {"role": "user", "content": "and then?"}]
        _same(_sdk_body(messages), bodies)
        assert bodies._bytes <= 40_000
    held = [place.raw for place in bodies._places.values()]
    assert 2 <= len(set(held)) < 20 and _sdk_body(messages) in held  # the latest, oldest first out
    assert all(held.count(raw) == 2 for raw in held)  # a body goes with both its places


def test_a_body_given_up_goes_with_both_its_places() -> None:
    small, large = (
        _sdk_body([{"role": "system", "content": f"conversation {turns}"}, *_conversation(turns)[1:]])
        for turns in (2, 4)
    )
    cost = {raw: len(raw) + 768 * len(orjson.loads(raw)["messages"]) for raw in (small, large)}
    bodies = ResentBodies(cost[large] + cost[small] // 2)  # room for one place of the small body beside
    _same(small, bodies)
    _same(large, bodies)  # another conversation
    assert bodies.hits == 0
    assert [place.raw for place in bodies._places.values()] == [large, large]
    assert bodies._bytes == cost[large] // 2 * 2


messages_st = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", "wizard"])},
        optional={
            "content": st.one_of(st.text(max_size=12), st.none(), st.integers(-1000, 1000)),
            "name": st.text(max_size=4),
            "tool_call_id": st.text(max_size=4),
        },
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    base=messages_st,
    added=messages_st,
    cut=st.integers(0, 400),
    noise=st.binary(max_size=12),
    model_first=st.booleans(),
)
def test_any_next_body_parses_as_it_would_whole(
    base: list[dict[str, Any]], added: list[dict[str, Any]], cut: int, noise: bytes, model_first: bool
) -> None:
    bodies = ResentBodies(1 << 20)
    base = [{"role": "system", "content": "s" * 70}, *base]
    fields = {"model": "m", "messages": base} if model_first else {"messages": base, "model": "m"}
    first = orjson.dumps(fields)
    _same(first, bodies)
    grown = orjson.dumps({**fields, "messages": [*base, *added]})
    _same(grown, bodies)
    spliced = grown[: len(grown) - cut] + noise + grown[len(grown) - cut :] if cut <= len(grown) else grown
    _same(spliced, bodies)


@pytest.mark.parametrize("bound", [0, 100])
def test_a_body_over_the_bound_is_not_remembered(bound: int) -> None:
    bodies = ResentBodies(bound)
    for turns in range(1, 4):
        _same(_sdk_body([*_conversation(turns - 1), {"role": "user", "content": "hi"}]), bodies)
    assert bodies.hits == 0

"""Reading a chat request: whatever JSON a client puts in whatever field, the answer is the
request or a 400 naming the field, never an exception of another kind (a 500)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.handlers.request import parse_chat_request

json_value = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
        st.sampled_from(["user", "assistant", "tool", "system", "function", "text"]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6,
)
MESSAGE_FIELDS = ("role", "content", "name", "tool_call_id", "pinned", "tool_calls", "refusal")
BODY_FIELDS = ("model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "tools")


def _parse(body: Any) -> str:
    """ "ok", or the param of the 400; anything else raised fails the test."""
    try:
        parse_chat_request(orjson.dumps(body))
    except BadRequest as exc:
        return str(exc.param)
    return "ok"


@pytest.mark.parametrize("role", [{"a": 1}, ["user"], [], {}, 1, 1.5, True, None])
def test_a_role_of_any_other_type_is_a_400(role: Any) -> None:
    """The fast path for plain messages hashed the role before checking it was a string."""
    assert _parse({"model": "m", "messages": [{"role": role, "content": "hi"}]}) == "messages[0].role"


def test_a_huge_role_is_shown_short_in_the_error() -> None:
    with pytest.raises(BadRequest) as refused:
        parse_chat_request(orjson.dumps({"model": "m", "messages": [{"role": ["x" * 100_000], "content": "hi"}]}))
    assert len(str(refused.value)) < 200 and str(refused.value).endswith("got ['xxxxxxx" + "x" * 51 + "…")


@pytest.mark.parametrize("tools", [1, True, "f", {"type": "function"}])
def test_tools_that_are_not_an_array_are_a_400(tools: Any) -> None:
    """The proxy may add its own tools to the client's: they must be an array."""
    assert _parse({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}) == "tools"


DEEP_PLACES = {
    "metadata": '{"model":"m","metadata":DEEP,"messages":[{"role":"user","content":"hi"}]}',
    "refusal": '{"model":"m","messages":[{"role":"assistant","content":"x","refusal":DEEP}]}',
    "content part": '{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","x":DEEP}]}]}',
}


@pytest.mark.parametrize("place", list(DEEP_PLACES))
@pytest.mark.parametrize("depth", [255, 1000])
def test_a_body_too_deep_to_forward_is_a_400(place: str, depth: int) -> None:
    """orjson reads 1024 levels but writes 254: a body between was a 500 wherever it was next serialized."""
    raw = DEEP_PLACES[place].replace("DEEP", "[" * depth + "]" * depth).encode()
    with pytest.raises(BadRequest, match="nested too deeply"):
        parse_chat_request(raw)


@settings(max_examples=400, deadline=None)
@given(message=st.dictionaries(st.sampled_from(MESSAGE_FIELDS), json_value, max_size=4), value=json_value)
def test_any_json_in_a_message_is_the_request_or_a_400(message: dict[str, Any], value: Any) -> None:
    for sent in (message, value, {**message, "role": "user"}, {**message, "role": "assistant", "tool_calls": [value]}):
        _parse({"model": "m", "messages": [sent]})


@settings(max_examples=300, deadline=None)
@given(
    call=st.dictionaries(st.sampled_from(("id", "type", "function")), json_value, max_size=3),
    function=st.dictionaries(st.sampled_from(("name", "arguments")), json_value, max_size=2),
)
def test_any_json_in_a_tool_call_is_the_request_or_a_400(call: dict[str, Any], function: dict[str, Any]) -> None:
    for sent in (call, {**call, "function": function}, {"id": "c", "type": "function", "function": function}):
        _parse({"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [sent]}]})


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(BODY_FIELDS), value=json_value, body=json_value)
def test_any_json_in_a_body_field_is_the_request_or_a_400(field: str, value: Any, body: Any) -> None:
    _parse(body)
    _parse({"model": "m", "messages": [{"role": "user", "content": "hi"}], field: value})


@settings(max_examples=300, deadline=None)
@given(role=json_value, content=json_value)
def test_the_fast_path_accepts_only_what_the_full_check_accepts(role: Any, content: Any) -> None:
    """A two-field message takes the fast path; one with a third field takes the full check:
    the answer is the same either way."""
    fast = _parse({"model": "m", "messages": [{"role": role, "content": content}]})
    full = _parse({"model": "m", "messages": [{"role": role, "content": content, "name": "n"}]})
    assert fast == full

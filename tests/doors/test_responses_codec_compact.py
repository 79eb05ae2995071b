"""The compact request, the compacted object, and compaction items restored in their places (pure)."""

from __future__ import annotations

import pytest

from proxy.doors.responses_codec import compacted_object, compaction_item, parse_compact, restore
from proxy.errors import BadRequest


def test_the_compact_request_becomes_core_messages_with_the_compactions_apart() -> None:
    call = parse_compact(
        {
            "model": "m",
            "instructions": "be brief",
            "input": [
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "A"},
                {"role": "user", "content": "hi"},
            ],
            "prompt_cache_key": "agent-7",
            "service_tier": "auto",
        }
    )
    assert call.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert call.compactions == ((1, "A"),)
    assert call.prompt_cache_key == "agent-7" and call.previous_response_id is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": ""}, "model"),
        ({"model": "m", "stream": True}, "stream"),
        ({"model": "m", "input": {"role": "user"}}, "input"),
        ({"model": "m", "service_tier": "fastest"}, "service_tier"),
        ({"model": "m", "prompt_cache_options": {"ttl": "1h"}}, "prompt_cache_options.ttl"),
        ({"model": "m", "input": [{"type": "compaction"}]}, "input[0].encrypted_content"),
    ],
)
def test_a_bad_compact_request_names_its_param(body: object, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_compact(body)
    assert caught.value.param == param


def test_restore_puts_each_summary_in_its_place_in_order() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    summaries = [{"role": "user", "content": f"S{i}"} for i in range(3)]
    restored = restore(messages, ((0, "x"), (0, "y"), (2, "z")), summaries)
    assert [m["content"] for m in restored] == ["S0", "S1", "a", "b", "S2"]


def test_the_compacted_object_puts_the_compaction_after_the_leading_block() -> None:
    item = compaction_item("cmp_1", "ref")
    body = compacted_object(
        "resp_1",
        created_at=5,
        before=[{"role": "developer", "content": "rules"}],
        compaction=item,
        after=[{"role": "user", "content": "recent"}, {"role": "assistant", "content": "reply"}],
        usage={"input_tokens": 0},
    )
    assert body["object"] == "response.compaction" and body["created_at"] == 5
    assert [i["type"] for i in body["output"]] == ["message", "compaction", "message", "message"]
    assert [i.get("role") for i in body["output"]] == ["developer", None, "user", "assistant"]
    ids = [i["id"] for i in body["output"]]
    assert len(set(ids)) == 4 and ids[1] == "cmp_1"

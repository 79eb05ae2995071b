"""`POST /v1/responses/compact` with the openai SDK: the compacted items, and those items sent back as input."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from proxy.compaction.prompts import SUMMARY_PREFIX
from tests.conftest import Proxy, ProxyFactory

LONG = "lorem ipsum dolor sit amet " * 40


async def _conversation(proxy: Proxy, turns: int) -> tuple[list[dict[str, Any]], str]:
    """A stateless client's items after `turns` exchanges, and the session they were journaled in."""
    client = proxy.client()
    history: list[dict[str, Any]] = []
    sessions = set()
    for turn in range(turns):
        history.append({"role": "user", "content": f"turn {turn}: the code is {turn * 7}. {LONG}"})
        raw = await client.responses.with_raw_response.create(model="small-model", input=history)
        sessions.add(raw.headers["X-Session-Id"])
        history.extend(item.model_dump(exclude_none=True) for item in raw.parse().output)
    assert len(sessions) == 1
    return history, sessions.pop()


@pytest.fixture
async def summarizing(start_proxy: ProxyFactory) -> Proxy:
    return await start_proxy(strategy="summarize")


def _items(output: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in output]


def _made_up(turns: int) -> list[dict[str, Any]]:
    """A conversation the proxy never saw (another gateway's, or older than the journal)."""
    items: list[dict[str, Any]] = []
    for turn in range(turns):
        items.append({"role": "user", "content": f"turn {turn}: the code is {turn * 7}. {LONG}"})
        items.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"ok {turn}"}]}
        )
    return items


async def test_compact_then_the_compacted_items_sent_back(summarizing: Proxy) -> None:
    proxy, client = summarizing, summarizing.client()
    history = _made_up(4)
    compacted = await client.responses.compact(model="small-model", input=history)  # type: ignore[arg-type]
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    assert [item.type for item in compacted.output] == ["compaction", "message", "message"]
    item = compacted.output[0].model_dump()
    assert item["created_by"] == "context-proxy" and "turn 0" not in item["encrypted_content"]
    assert [m["content"][0]["text"] for m in _items(compacted.output[1:])] == [history[-2]["content"], "ok 3"]
    assert len(proxy.fake.summaries) == 1 and proxy.fake.chats == []
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0  # the compression call's

    follow = [*_items(compacted.output), {"role": "user", "content": "what was the first code?"}]
    answer = await client.responses.create(model="small-model", input=follow)  # type: ignore[arg-type]
    assert answer.status == "completed"
    sent = proxy.fake.chats[-1]["messages"]
    assert sent[0]["role"] == "user" and sent[0]["content"].startswith(SUMMARY_PREFIX)
    assert "turn 0: the code is 0" in sent[0]["content"]  # the fake's summary repeats the user lines
    assert [m["content"] for m in sent[1:]] == [history[-2]["content"], "ok 3", "what was the first code?"]


async def test_compacted_items_of_a_journaled_conversation_continue_its_session(summarizing: Proxy) -> None:
    """The journal holds what the summary stands for: the core takes the items as a trimming
    client's (the summary is the client's own, neither journaled nor sent) and composes the
    session's context, in the same session, without repeating a message."""
    proxy, client = summarizing, summarizing.client()
    history, session = await _conversation(proxy, 3)
    compacted = await client.responses.compact(model="small-model", input=history)  # type: ignore[arg-type]
    follow = [*_items(compacted.output), {"role": "user", "content": "and now?"}]
    raw = await client.responses.with_raw_response.create(model="small-model", input=follow)  # type: ignore[arg-type]
    assert raw.headers["X-Session-Id"] == session
    sent = [m["content"] for m in proxy.fake.chats[-1]["messages"]]
    assert sent[-3:] == [history[-2]["content"], history[-1]["content"][0]["text"], "and now?"]
    assert len(sent) == len(set(sent)) and not any(str(m).startswith(SUMMARY_PREFIX) for m in sent)


async def test_a_compaction_item_of_another_key_is_refused(summarizing: Proxy) -> None:
    history = _made_up(3)
    compacted = await summarizing.client().responses.compact(model="small-model", input=history)  # type: ignore[arg-type]
    asked = len(summarizing.fake.received)
    follow = [*_items(compacted.output), {"role": "user", "content": "go on"}]
    with pytest.raises(openai.BadRequestError) as caught:
        await summarizing.client("sk-other").responses.create(model="small-model", input=follow)  # type: ignore[arg-type]
    assert caught.value.body["param"] == "input"  # type: ignore[index]
    forged = [{**follow[0], "encrypted_content": follow[0]["encrypted_content"] + "x"}, *follow[1:]]
    with pytest.raises(openai.BadRequestError):
        await summarizing.client().responses.create(model="small-model", input=forged)  # type: ignore[arg-type]
    assert len(summarizing.fake.received) == asked


async def test_compact_continues_a_stored_response(summarizing: Proxy) -> None:
    client = summarizing.client()
    previous: str | None = None
    for turn in range(3):
        response = await client.responses.create(
            model="small-model", input=f"turn {turn}: {LONG}", previous_response_id=previous
        )
        previous = response.id
    compacted = await client.responses.compact(
        model="small-model", previous_response_id=previous, input="and one more", instructions="be brief"
    )
    kinds = [item.type for item in compacted.output]
    assert kinds == ["compaction", "message"]
    assert _items(compacted.output)[1]["content"][0]["text"] == "and one more"
    summary_request = summarizing.fake.summaries[-1]["messages"][-1]["content"]
    assert "turn 0" in summary_request and "be brief" not in summary_request


async def test_a_strategy_that_does_not_summarize_gives_the_items_back(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full")
    history, _ = await _conversation(proxy, 3)
    compacted = await proxy.client().responses.compact(model="small-model", input=history)  # type: ignore[arg-type]
    assert [item.type for item in compacted.output] == ["message"] * 6
    assert proxy.fake.summaries == [] and compacted.usage.total_tokens == 0


async def test_compact_refuses_bad_input_naming_the_param(summarizing: Proxy) -> None:
    client = summarizing.client()
    for fields, param in (
        ({"model": "small-model", "input": 3}, "input"),
        ({"model": "small-model", "input": [{"type": "web_search_call"}]}, "input[0].type"),
        ({"model": "small-model", "tools": []}, "tools"),
        ({"model": "small-model"}, "input"),
        ({"input": "x"}, "model"),
    ):
        async with (
            aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http,
            http.post(f"{summarizing.url}/v1/responses/compact", json=fields) as answer,
        ):
            assert answer.status == 400, fields
            assert (await answer.json())["error"]["param"] == param
    with pytest.raises(openai.NotFoundError):
        await client.responses.compact(model="small-model", previous_response_id="resp_nope", input="x")
    assert summarizing.fake.received == []

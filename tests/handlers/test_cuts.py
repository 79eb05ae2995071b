"""An answer the upstream cuts or stalls never reaches the client as if it were complete.

The fake upstream drops the connection after n chunks ("cut after n") or stops sending
("stall after n"); the official SDK must raise, and the turn is journaled `failed`.
"""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import openai
import pytest

from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI


@pytest.fixture
async def quick(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> Proxy:
    """A proxy whose upstream read timeout (a stall) fires after half a second."""
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    upstream = dataclasses.replace(settings.upstream, read_timeout_s=0.5)
    return await start_proxy(dataclasses.replace(settings, upstream=upstream))


async def _statuses(proxy: Proxy, session: str) -> list[str]:
    url, headers = f"{proxy.url}/v1/sessions/{session}", {"Authorization": "Bearer sk-test"}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        return [turn["status"] for turn in (await response.json())["turns"]]


@pytest.mark.parametrize("steer", ["cut after 3", "stall after 3"])
async def test_a_broken_stream_raises_in_the_sdk(quick: Proxy, steer: str) -> None:
    client = quick.client(default_headers={"X-Session-Id": "broken"})
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"a long answer please, {steer}"}], stream=True
    )
    seen: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        async for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")
    assert seen, "the chunks before the break reach the client"
    assert "upstream" in raised.value.message
    assert await _statuses(quick, "broken") == ["interrupted" if steer.startswith("stall") else "failed"]


async def test_a_broken_sync_stream_raises(quick: Proxy) -> None:
    client = quick.sync_client()

    def call() -> None:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "sync cut after 2"}], stream=True
        )
        for _ in stream:
            pass

    with pytest.raises(openai.APIError):
        await asyncio.to_thread(call)


async def test_a_stream_ending_without_done_or_finish_is_an_error(quick: Proxy) -> None:
    """The upstream closes cleanly after the first chunk: still not a whole answer."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "end after 1"}], "stream": True}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{quick.url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-test"}
        ) as response,
    ):
        text = await response.text()
    assert "[DONE]" not in text
    assert '"error"' in text.strip().split("\n\n")[-1]


@pytest.mark.parametrize("steer", ["cut after 1", "drop after 1", "stall after 1"])
async def test_a_broken_json_answer_raises_in_the_sdk(quick: Proxy, steer: str) -> None:
    client = quick.client(default_headers={"X-Session-Id": "broken-json"})
    with pytest.raises(openai.APIStatusError) as raised:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": steer}])
    assert raised.value.status_code in (502, 504)
    assert raised.value.body["code"] in ("upstream_unavailable", "upstream_timeout")  # type: ignore[index]
    if not steer.startswith("stall"):  # a stall before the headers fails before any turn starts
        assert await _statuses(quick, "broken-json") == ["failed"]


async def test_a_whole_stream_still_ends_with_done(quick: Proxy) -> None:
    client = quick.client()
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "all of it"}], stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
    assert "all of it" in text

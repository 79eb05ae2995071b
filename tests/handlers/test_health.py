"""Health, readiness while Redis is away, and metrics."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import openai
import pytest

from proxy.store import EmbeddedRedis
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI


async def test_readyz_follows_redis(start_proxy: ProxyFactory, fake: FakeOpenAI, tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    url = await server.start()
    proxy = await start_proxy(make_settings(url, fake.url))  # type: ignore[attr-defined]
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/readyz") as r:
            assert r.status == 200
        await server.stop()
        async with http.get(proxy.url + "/readyz") as r:
            assert r.status == 503
        async with http.get(proxy.url + "/healthz") as r:
            assert r.status == 200
    with pytest.raises(openai.APIStatusError) as info:
        await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 503 and info.value.body["code"] == "store_unavailable"  # type: ignore[index]
    await server.start()
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/readyz") as r:
        assert r.status == 200
    answer = await proxy.client().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "y"}]
    )
    assert answer.choices[0].message.content, "the journal's connection is opened again by itself"
    await server.stop()


async def test_metrics_count_requests_by_route_model_status(proxy: Proxy) -> None:
    await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "m"}])
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as r:
        text = await r.text()
    assert 'context_proxy_requests_total{route="/v1/chat/completions",model="gpt-4o-mini",status="200"} 1' in text
    assert 'context_proxy_request_seconds_bucket{route="/v1/chat/completions",le="+Inf"} 1' in text
    assert "context_proxy_upstream_seconds_count" in text
    assert "context_proxy_in_flight_requests 1" in text  # the /metrics request itself


async def test_unknown_route_is_openai_shaped_404(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/nowhere") as r:
        assert r.status == 404
        assert (await r.json())["error"]["code"] == "not_found"


async def test_a_turn_that_cannot_be_journaled_is_not_delivered_as_complete(
    start_proxy: ProxyFactory, fake: FakeOpenAI, tmp_path: Path
) -> None:
    server = EmbeddedRedis(tmp_path)
    url = await server.start()
    proxy = await start_proxy(make_settings(url, fake.url))  # type: ignore[attr-defined]
    client = proxy.client(default_headers={"X-Session-Id": "lost-store"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "warm"}])
    fake.chunk_delay_s = 0.05
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "w " * 30}], stream=True
    )
    await stream.__anext__()
    await server.stop()  # Redis goes away while the answer streams
    with pytest.raises(openai.APIError, match="session store unavailable"):
        async for _ in stream:
            pass
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 503

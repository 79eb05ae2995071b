"""Limits across replicas: rpm and tpm in the rolling minute, budgets, OpenAI's 429s and headers."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis

from proxy.errors import QuotaExceeded
from proxy.gateway.limits import Admission, Limiter, duration
from proxy.gateway.metrics import GatewayMetrics
from proxy.gateway.policy import KeyPolicy
from proxy.store import Store
from proxy.store.gateway import GatewayStore
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import admin, gateway_settings

RESET = re.compile(r"(\d+ms|\d+s|\d+m\d+s)")


async def replicas(start_proxy: ProxyFactory, fake: FakeOpenAI, redis_url: str, **limits: Any) -> list[Proxy]:
    settings = gateway_settings(redis_url, fake.url, keys=[{"name": "team", "key": "sk-team", **limits}])  # type: ignore[attr-defined]
    return [await start_proxy(settings), await start_proxy(settings)]


async def test_rpm_holds_in_total_across_two_replicas(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxies = await replicas(start_proxy, fake, flushed_redis, rpm=30)
    clients = [proxy.client("sk-team") for proxy in proxies]

    async def one(n: int) -> Any:
        client = clients[n % 2]
        try:
            return await client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"request {n}"}]
            )
        except openai.RateLimitError as exc:
            return exc

    started = time.monotonic()
    results = await asyncio.gather(*(one(n) for n in range(100)))
    assert time.monotonic() - started < 60, "the test must run within one rolling minute"
    admitted = [r for r in results if not isinstance(r, openai.RateLimitError)]
    refused = [r for r in results if isinstance(r, openai.RateLimitError)]
    print(f"rpm 30, two replicas, 100 requests: {len(admitted)} admitted, {len(refused)} refused")
    assert (len(admitted), len(refused)) == (30, 70), "one count for both replicas (each alone would admit 30)"
    assert len(fake.chats) == 30
    for exc in refused:
        assert exc.code == "rate_limit_exceeded" and exc.body["type"] == "requests"  # type: ignore[index]
        assert 1 <= int(exc.response.headers["Retry-After"]) <= 60
        assert exc.response.headers["x-ratelimit-remaining-requests"] == "0"
    remaining = sorted(int(r.headers["x-ratelimit-remaining-requests"]) for r in admitted)
    assert remaining == list(range(30))
    assert all(r.headers["x-ratelimit-limit-requests"] == "30" for r in admitted)
    assert all(RESET.fullmatch(r.headers["x-ratelimit-reset-requests"]) for r in admitted)
    assert "x-ratelimit-limit-tokens" not in admitted[0].headers


async def test_tpm_holds_in_total_across_two_replicas_and_is_corrected_by_usage(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    tpm = 1000
    proxies = await replicas(start_proxy, fake, flushed_redis, tpm=tpm)
    used, refused, n = 0, None, 0
    while refused is None:
        client = proxies[n % 2].client("sk-team")
        try:
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"question {n}"}], max_tokens=300
            )
        except openai.RateLimitError as exc:
            refused = exc
            break
        answer = raw.parse()
        assert answer.usage is not None
        used += answer.usage.total_tokens
        assert raw.headers["x-ratelimit-limit-tokens"] == str(tpm)
        assert int(raw.headers["x-ratelimit-remaining-tokens"]) <= tpm - used
        n += 1
    assert n >= 3, "reservations are corrected by usage, so more calls fit than max_tokens alone allows"
    assert used <= tpm
    assert refused.code == "rate_limit_exceeded" and refused.body["type"] == "tokens"  # type: ignore[index]
    assert int(refused.response.headers["Retry-After"]) >= 1
    _, listed = await admin("GET", proxies[1].url + "/admin/keys")
    assert listed["data"][0]["usage"]["day"]["tokens"] == used, "usage is the answers' usage, not the reservations"
    assert listed["data"][0]["usage"]["day"]["refused"] == 1


async def test_budget_is_refused_as_insufficient_quota(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxies = await replicas(start_proxy, fake, flushed_redis, budget_tokens=100)
    spent = 0
    with pytest.raises(openai.RateLimitError) as info:
        for n in range(20):
            answer = (
                await proxies[n % 2]
                .client("sk-team")
                .chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"tell me {n}"}])
            )
            assert answer.usage is not None
            spent += answer.usage.total_tokens
    assert 100 <= spent < 200
    assert info.value.code == "insufficient_quota" and info.value.body["type"] == "insufficient_quota"  # type: ignore[index]
    retry = int(info.value.response.headers["Retry-After"])
    assert 0 < retry <= 86400
    with pytest.raises(openai.RateLimitError):
        await proxies[0].client("sk-team").embeddings.create(model="text-embedding-3-small", input="x")


async def test_budget_turns_with_the_utc_period(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    now = [1_764_460_000.0]  # 2025-11-29 23:46:40 UTC
    limiter = Limiter(GatewayStore(store), GatewayMetrics(), lambda: now[0])
    for period, turn in (("day", 86_400.0), ("month", 32 * 86_400.0)):
        policy = KeyPolicy(name=f"budget-{period}", sha256="0" * 64, budget_tokens=50, budget_period=period)
        _, first = await limiter.admit(policy, 60)
        assert isinstance(first, Admission)
        headers, refused = await limiter.admit(policy, 1)
        assert isinstance(refused, QuotaExceeded)
        assert int(headers["Retry-After"]) <= turn
        now[0] += turn
        _, again = await limiter.admit(policy, 1)
        assert isinstance(again, Admission), f"a new {period} admits again"
        now[0] -= turn
    await store.close()


async def test_limited_keys_get_headers_on_every_response_and_unlimited_keys_none(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    keys = [{"name": "team", "key": "sk-team", "rpm": 50, "tpm": 100000}, {"name": "free", "key": "sk-free"}]
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url, keys=keys))  # type: ignore[attr-defined]
    client = proxy.client("sk-team", default_headers={"X-Session-Id": "h1"})
    calls = [
        client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}]
        ),
        client.models.with_raw_response.list(),
        client.embeddings.with_raw_response.create(model="text-embedding-3-small", input="x"),
    ]
    for raw in [await c for c in calls]:
        for kind in ("requests", "tokens"):
            assert {f"x-ratelimit-{p}-{kind}" for p in ("limit", "remaining", "reset")} <= set(raw.headers)
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "b"}], stream=True
    ) as response:
        assert response.headers["x-ratelimit-limit-requests"] == "50"
        assert int(response.headers["x-ratelimit-remaining-requests"]) == 50 - 4
    free = await proxy.client("sk-free").models.with_raw_response.list()
    assert not any(h.startswith("x-ratelimit") for h in free.headers)


def test_reset_durations_read_as_openai_writes_them() -> None:
    assert [duration(ms) for ms in (0, 250, 1000, 1001, 59_000, 60_000, 90_500)] == [
        "0ms", "250ms", "1s", "2s", "59s", "1m0s", "1m31s",
    ]  # fmt: skip


async def test_counters_carry_one_hash_tag_per_key(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    limiter = Limiter(GatewayStore(store), GatewayMetrics(), time.time)
    policy = KeyPolicy(name="tagged", sha256="0" * 64, rpm=5, tpm=500, budget_tokens=1000)
    await limiter.admit(policy, 10)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = sorted(k.decode() for k in await client.keys("cp:gw:*"))
    await client.aclose()
    await store.close()
    assert keys and all(k.startswith("cp:gw:{tagged}:") for k in keys)

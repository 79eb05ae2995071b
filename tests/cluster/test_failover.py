"""A failover under load: the primary of a busy session's slot is killed.

Two clients keep one session busy. When its primary dies, requests get 503 in OpenAI's
shape (never a 500, never a hang), until a replica is promoted; then service resumes
with no restart of the proxy. The dead node comes back as a replica of the promoted
one (as an operator's supervisor would bring it back). With `redis.wait_replicas: 1`
every turn a client was answered for is in the journal afterwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import openai
import pytest

from proxy.errors import StoreUnavailable
from proxy.sessions import tenant_of
from proxy.store import SessionKeys, Store
from tests.cluster.servers import LocalCluster
from tests.conftest import ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI
from tests.handlers.test_sessions import session_json

SESSION = "failover"
KEY = "sk-test"


@dataclass
class Tally:
    """What the clients saw: answered turns, statuses, the slowest answer, and when."""

    acknowledged: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    slowest_s: float = 0.0
    last_failure_at: float = 0.0
    answered_since: int = 0
    """Answers since the last failure: service is back once these keep coming."""


async def _client_loop(client: openai.AsyncOpenAI, tag: str, tally: Tally, stop: asyncio.Event) -> None:
    n = 0
    while not stop.is_set():
        content = f"{tag}-{n}"
        n += 1
        started = time.monotonic()
        try:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": content}])
            status = 200
            tally.acknowledged.append(content)
            tally.answered_since += 1
        except openai.APIStatusError as exc:
            status = exc.status_code
            assert exc.body["code"] == "store_unavailable", exc.body  # type: ignore[index]
            tally.last_failure_at = time.monotonic()
            tally.answered_since = 0
        tally.statuses[status] += 1
        tally.slowest_s = max(tally.slowest_s, time.monotonic() - started)
        await asyncio.sleep(0.03)


async def _until(check: object, timeout_s: float) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("wait_replicas", [0, 1])
async def test_killing_the_primary_of_a_busy_session(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str, cluster: LocalCluster, wait_replicas: int
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    redis = dataclasses.replace(settings.redis, wait_replicas=wait_replicas, wait_timeout_ms=500)
    proxy = await start_proxy(dataclasses.replace(settings, redis=redis))
    key = SessionKeys(tenant_of(f"Bearer {KEY}", ""), SESSION).meta
    victim = cluster.primary_for(key)
    client = proxy.client(KEY, default_headers={"X-Session-Id": SESSION})
    tally, stop = Tally(), asyncio.Event()
    loops = [asyncio.create_task(_client_loop(client, f"c{i}", tally, stop)) for i in range(2)]
    try:
        await _until(lambda: _true(len(tally.acknowledged) >= 10), 20)
        await asyncio.to_thread(victim.kill)
        killed_at = time.monotonic()
        await _until(lambda: asyncio.to_thread(lambda: cluster.primary_for(key) is not victim), 20)
        await asyncio.to_thread(victim.start)  # the dead node returns, as a replica of the promoted one
        await _until(lambda: _true(tally.last_failure_at > killed_at and tally.answered_since >= 10), 30)
    finally:
        stop.set()
        await asyncio.gather(*loops)
    await asyncio.to_thread(cluster.wait_ok)
    status, journal = await session_json(proxy, SESSION, KEY)
    assert status == 200
    journaled = {t["input"][0]["content"] for t in journal["turns"] if t["status"] == "completed"}
    lost = [content for content in tally.acknowledged if content not in journaled]
    print(
        f"\nfailover wait_replicas={wait_replicas}: last 503 {tally.last_failure_at - killed_at:.2f} s after the kill, "
        f"statuses {dict(tally.statuses)}, slowest answer {tally.slowest_s:.2f} s, "
        f"acknowledged {len(tally.acknowledged)}, journaled {len(journaled)}, lost {len(lost)}"
    )
    assert set(tally.statuses) == {200, 503}, "only 503s while the slot had no primary, never a 500"
    assert tally.answered_since >= 10, "service resumed without a restart of the proxy"
    assert tally.slowest_s < 8, "no request waits on the dead node for more than a few seconds"
    if wait_replicas:
        assert lost == [], "no acknowledged turn is lost"
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/readyz") as r:
        assert r.status == 200 and (await r.json())["cluster"]["state"] == "ok"


async def _true(value: bool) -> bool:
    return value


async def test_pipelined_reads_alone_recover_from_a_failover(flushed_redis: str, cluster: LocalCluster) -> None:
    """The session API reads a journal in one pipeline; with no other traffic it still finds
    the promoted replica (a pipeline does not re-read the slots by itself, as a command does)."""
    store = await Store.connect(cluster.seeds, cluster=True)
    keys = SessionKeys("p" * 32, "read-only")
    await store.append_turn(
        keys, {"status": "completed"}, parent=None, completed=True, hashes=["h"], ttl_s=60, usage=None
    )
    victim = cluster.primary_for(keys.meta)
    await asyncio.to_thread(victim.kill)
    try:

        async def readable() -> bool:
            try:
                return await store.read_session(keys) is not None
            except StoreUnavailable:
                return False

        await _until(readable, 20)
    finally:
        await store.close()
        await asyncio.to_thread(victim.start)
        await asyncio.to_thread(cluster.wait_ok)

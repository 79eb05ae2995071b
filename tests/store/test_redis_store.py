"""The store on a single server: the hot path's commands, the lock, the session index, WAIT."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ClusterDownError, ConnectionError, ReadOnlyError, ResponseError, TryAgainError

from proxy.errors import StoreUnavailable
from proxy.store import SessionKeys, Store
from proxy.store.connection import mapped
from proxy.store.names import LEGACY_SESSION_INDEX, TenantKeys

TENANT = "t" * 32


async def append(store: Store, keys: SessionKeys, text: str = "x") -> tuple[int, int, int]:
    record = {"input": [{"role": "user", "content": text}], "status": "completed"}
    return await store.append_turn(keys, record, parent=None, completed=True, hashes=[text], ttl_s=600, usage=None)


async def command_calls(client: aioredis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


async def test_a_turn_on_a_single_server_is_one_script_call(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = SessionKeys(TENANT, "hot")
    await append(store, keys)  # scripts loaded
    before = await command_calls(client)
    await append(store, keys, "y")
    after = await command_calls(client)
    changed = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    assert changed["evalsha"] == 1 and changed["zadd"] == 1, "the script itself updates the tenant's index"
    assert not {"multi", "exec", "wait"} & set(changed)
    assert await client.zscore(keys.index, "hot") is not None
    await client.aclose()
    await store.close()


async def test_the_lock_is_released_only_by_its_holder(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    lock = SessionKeys(TENANT, "locked").compaction_lock
    assert await store.acquire_lock(lock, "mine", 5)
    assert not await store.acquire_lock(lock, "theirs", 5)
    assert await store.release_lock(lock, "theirs") is False
    assert not await store.acquire_lock(lock, "theirs", 5), "still held by its holder"
    assert await store.release_lock(lock, "mine") is True
    assert await store.acquire_lock(lock, "theirs", 5)
    await store.close()


async def test_the_global_index_of_earlier_versions_is_adopted(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    await append(store, SessionKeys(TENANT, "old:one"))
    await store.close()
    client = aioredis.Redis.from_url(flushed_redis)
    await client.delete(TenantKeys(TENANT).sessions)
    await client.zadd(LEGACY_SESSION_INDEX, {f"{TENANT}:old:one": time.time()})
    store = await Store.connect(flushed_redis)
    page = await store.page_sessions(TENANT, after=None, limit=10)
    assert page is not None and [s.session for s in page.sessions] == ["old:one"]
    assert not await client.exists(LEGACY_SESSION_INDEX)
    await client.aclose()
    await store.close()


async def test_a_session_whose_keys_expired_is_not_listed(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    for name in ("alive", "expired"):
        await append(store, SessionKeys(TENANT, name))
    client = aioredis.Redis.from_url(flushed_redis)
    await client.delete(*SessionKeys(TENANT, "expired").all())
    page = await store.page_sessions(TENANT, after=None, limit=1)
    assert page is not None and [s.session for s in page.sessions] == ["alive"] and not page.has_more
    await client.aclose()
    await store.close()


async def test_a_turn_no_replica_confirmed_is_an_error_but_journaled(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis, wait_replicas=1, wait_timeout_ms=50)
    keys = SessionKeys(TENANT, "unconfirmed")
    with pytest.raises(
        StoreUnavailable,
        match=r"a turn of session unconfirmed was written but confirmed by 0 of 1 replicas within 50 ms",
    ):
        await append(store, keys)
    dump = await store.read_session(keys)
    assert dump is not None and len(dump.turns) == 1, "WAIT does not undo a write: the turn is in the journal"
    await store.close()


@pytest.mark.parametrize(
    "error",
    [ClusterDownError("CLUSTERDOWN"), TryAgainError("TRYAGAIN"), ReadOnlyError("READONLY"), ConnectionError("gone")],
)
def test_the_clusters_transient_states_are_store_unavailable(error: Exception) -> None:
    with pytest.raises(StoreUnavailable), mapped():
        raise error


def test_a_scripts_own_error_stays_a_bug() -> None:
    with pytest.raises(ResponseError), mapped():
        raise ResponseError("parent turn 7 does not exist")


async def test_a_connection_torn_down_mid_command_is_unavailable_not_a_bug() -> None:
    from redis.asyncio.connection import Connection

    from proxy.errors import StoreUnavailable
    from proxy.store.connection import mapped

    torn = Connection()  # never connected: no writer, as after a failover tore it down
    with pytest.raises(StoreUnavailable), mapped():
        await torn._send_packed_command([b"PING"])
    with pytest.raises(AttributeError), mapped():
        _ = None.missing  # type: ignore[attr-defined]  # the proxy's own bug stays one


async def test_keys_a_turn_creates_between_ttl_refreshes_expire_all_the_same(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = SessionKeys(TENANT, "ttl")
    failed = {"input": [{"role": "user", "content": "x"}], "status": "failed"}
    await store.append_turn(keys, failed, parent=None, completed=False, hashes=["x"], ttl_s=600, usage=None)
    assert not await client.exists(keys.chain, keys.ends), "a failed turn enters no index"
    await client.expire(keys.meta, 590)  # the TTLs were set 10 s ago: the next turn does not refresh them
    await append(store, keys, "y")
    assert await client.ttl(keys.meta) <= 590, "refreshed at most once a minute"
    for key in (keys.turns, keys.links, keys.chain, keys.ends):
        assert 0 < await client.ttl(key) <= 600, f"{key} was created after the last refresh and still expires"
    await client.aclose()
    await store.close()


async def test_a_ttl_shorter_than_the_refresh_step_is_refreshed_every_half_ttl(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = SessionKeys(TENANT, "short-ttl")
    record = {"input": [{"role": "user", "content": "x"}], "status": "completed"}
    await store.append_turn(keys, record, parent=None, completed=True, hashes=["x"], ttl_s=2, usage=None)
    await asyncio.sleep(1.1)
    await store.append_turn(keys, record, parent=None, completed=True, hashes=["y"], ttl_s=2, usage=None)
    for key in (keys.meta, keys.turns, keys.links):
        assert await client.pttl(key) > 1500, f"{key}: the session lives on"
    await client.aclose()
    await store.close()

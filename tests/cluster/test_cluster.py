"""What only a cluster has: slots, several primaries, and the cluster's own state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio.cluster import RedisCluster

from proxy.errors import StoreUnavailable
from proxy.store import SessionKeys, Store
from tests.cluster.servers import LocalCluster, Node, free_ports
from tests.conftest import Proxy

TENANTS = [f"{n:032x}" for n in range(5)]


async def test_readyz_says_every_slot_is_served(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/readyz") as r:
        body = await r.json()
    assert r.status == 200
    assert body == {"status": "ready", "redis": "ok", "cluster": {"state": "ok", "slots_ok": 16384, "primaries": 3}}


async def test_sessions_spread_over_the_primaries_and_all_are_listed(flushed_redis: str, cluster: LocalCluster) -> None:
    store = await Store.connect(cluster.seeds, cluster=True)
    names = {(tenant, f"s{n}") for tenant in TENANTS for n in range(6)}
    for tenant, session in names:
        record = {"input": [{"role": "user", "content": session}], "status": "completed"}
        await store.append_turn(
            SessionKeys(tenant, session), record, parent=None, completed=True, hashes=["h"], ttl_s=600, usage=None
        )
    assert {(tenant, session) async for tenant, session, _ in store.iter_sessions()} == names
    await store.close()
    client = await RedisCluster.from_url(cluster.nodes[0].url).initialize()
    sizes = [await client.dbsize(target_nodes=node) for node in client.get_primaries()]
    slots = {client.keyslot(key) for key in SessionKeys(TENANTS[0], "s0").all()}
    await client.aclose()
    assert len(sizes) == 3 and all(size > 0 for size in sizes), sizes
    assert len(slots) == 1, "a session's keys share one slot"


async def test_a_server_without_cluster_mode_is_refused_at_start(tmp_path: Path) -> None:
    plain = Node(free_ports(1)[0], 0, tmp_path, cluster=False)
    await asyncio.to_thread(plain.start)
    try:
        with pytest.raises(StoreUnavailable, match="cannot reach redis"):
            await Store.connect(plain.url, cluster=True, attempts=1)
    finally:
        plain.kill()

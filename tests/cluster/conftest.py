"""The proxy on a real 3-primary, 3-replica cluster: the same fixtures as the rest of the
suite, with `redis.cluster: true` and the cluster's seed nodes as `redis.url`."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from redis.asyncio.cluster import RedisCluster

from proxy.config import Settings
from tests.cluster.servers import LocalCluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"))
    try:
        local.start()
        yield local
    finally:
        local.stop()


@pytest.fixture
async def flushed_redis(cluster: LocalCluster) -> AsyncIterator[str]:
    await asyncio.to_thread(cluster.wait_ok)
    client = RedisCluster.from_url(cluster.nodes[0].url)
    await client.flushall()
    await client.aclose()
    yield cluster.nodes[0].url  # make_settings takes one URL; on_store gives the proxy both seeds


@pytest.fixture
def on_store(cluster: LocalCluster) -> Callable[[Settings], Settings]:
    def clustered(settings: Settings) -> Settings:
        return dataclasses.replace(settings, redis=dataclasses.replace(settings.redis, url=cluster.seeds, cluster=True))

    return clustered

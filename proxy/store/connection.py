"""Opening the store's client, and the one place redis-py's errors become the proxy's.

`redis.url` names one server, or with `redis.cluster: true` one or more seed nodes of a
Redis/Valkey Cluster (comma-separated URLs; the client discovers the rest). The cluster
client follows MOVED and ASK redirections itself. It never retries a command after a
connection error, a timeout or CLUSTERDOWN: a turn's journal write is not idempotent,
so a write that may have landed is reported (503), not repeated. The client re-reads
the cluster's topology on the next command instead, which is how service resumes by
itself once a replica has been promoted. Socket timeouts are bounded, so a request
never waits on a dead or unreachable node for more than a few seconds.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from proxy.errors import StoreUnavailable
from proxy.types import JSONObject, frozen

Client = aioredis.Redis | RedisCluster

CLUSTER_CONNECT_TIMEOUT_S = 1.0
CLUSTER_SOCKET_TIMEOUT_S = 2.0
CLUSTER_SLOTS = 16384

_UNAVAILABLE = (ClusterDownError, TryAgainError, AskError, ReadOnlyError, ClusterError, RedisClusterException)
"""Replies that mean "not now" (a failover, a slot being moved, a demoted primary), not a bug."""


class _Mapped:
    """`mapped()`: a class, not a generator, since every store call passes through it."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None:
            return
        if isinstance(exc, _UNAVAILABLE):
            raise StoreUnavailable(f"session store unavailable: {exc}") from exc
        if isinstance(exc, ResponseError):
            return  # any other error reply (a script's own) is a bug and stays what it is
        if isinstance(exc, (RedisError, OSError)):
            raise StoreUnavailable(f"session store unavailable: {exc}") from exc
        if isinstance(exc, AttributeError) and torn_down(exc):
            raise StoreUnavailable("session store unavailable: the connection was lost") from exc


_MAPPED = _Mapped()


def mapped() -> _Mapped:
    """Translate redis-py's errors into the proxy's at this boundary.

    Unreachable nodes, timeouts and the cluster's transient states become
    `StoreUnavailable` (503); any other error reply (a script's own error) is a bug
    and stays what it is.
    """
    return _MAPPED


def torn_down(exc: AttributeError) -> bool:
    """redis-py's asyncio connection, torn down mid-failover, has no writer (or reader) left: the
    command fails with an AttributeError raised inside redis-py itself, a lost connection."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and "redis" in Path(frame.tb_frame.f_code.co_filename).parts


_NODE_LOST = (ConnectionError, TimeoutError, ClusterDownError, SlotNotCoveredError)


class _MappedPipeline:
    """`mapped_pipeline(client)`, a class for the same reason as `_Mapped`."""

    __slots__ = ("_client",)

    def __init__(self, client: Client) -> None:
        self._client = client

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            return
        try:
            _MAPPED.__exit__(kind, exc, tb)
        except StoreUnavailable as unavailable:
            await self._recover(unavailable)
            raise
        if isinstance(exc, StoreUnavailable):  # raised inside, by a lower layer
            await self._recover(exc)

    async def _recover(self, exc: StoreUnavailable) -> None:
        if isinstance(self._client, RedisCluster) and isinstance(exc.__cause__, _NODE_LOST):
            with suppress(RedisError, RedisClusterException, OSError):
                await self._client.nodes_manager.initialize()


def mapped_pipeline(client: Client) -> _MappedPipeline:
    """`mapped()` around a pipeline. A single command that cannot reach a node makes the
    cluster client re-read the cluster's slots before the next one; a pipeline does not, so
    here a lost node does it: pipelined reads recover from a failover by themselves too."""
    return _MappedPipeline(client)


def open_client(url: str, *, cluster: bool, wait_timeout_ms: int) -> Client:
    """A client for one server, or for the cluster that the seed URLs belong to."""
    if not cluster:
        return aioredis.Redis.from_url(url, socket_connect_timeout=5, max_connections=512)
    first, *others = [part.strip() for part in url.split(",")]
    seeds = []
    for seed in others:
        parts = urlsplit(seed)
        seeds.append(ClusterNode(parts.hostname or "localhost", parts.port or 6379))
    return RedisCluster.from_url(
        first,
        startup_nodes=seeds,
        retry=Retry(NoBackoff(), 0),
        socket_connect_timeout=CLUSTER_CONNECT_TIMEOUT_S,
        socket_timeout=CLUSTER_SOCKET_TIMEOUT_S + wait_timeout_ms / 1000,
        max_connections=512,
    )


@frozen
class ClusterState:
    """What one node of the cluster says about the whole: `ok` means every slot is served."""

    state: str
    slots_ok: int
    primaries: int

    @property
    def ok(self) -> bool:
        return self.state == "ok" and self.slots_ok == CLUSTER_SLOTS


async def cluster_state(client: RedisCluster) -> ClusterState:
    """CLUSTER INFO from the first known node that answers, primaries first."""
    nodes = client.get_primaries() + client.get_replicas()
    problem: Exception | None = None
    for node in nodes:
        try:
            info = await client.cluster_info(target_nodes=node)
        except (RedisError, OSError) as exc:
            problem = exc
            continue
        return ClusterState(
            state=str(info.get("cluster_state", "unknown")),
            slots_ok=int(info.get("cluster_slots_ok", 0)),
            primaries=int(info.get("cluster_size", 0)),
        )
    raise StoreUnavailable(f"no cluster node answers: {problem}")


@frozen
class Readiness:
    """Whether the store can serve requests now, with what `/readyz` reports."""

    ready: bool
    detail: JSONObject


async def readiness(client: Client) -> Readiness:
    """A single server answers PING; a cluster says (through any node) every slot is served."""
    if not isinstance(client, RedisCluster):
        try:
            await client.ping()
        except (RedisError, OSError):
            return Readiness(False, {"redis": "unreachable"})
        return Readiness(True, {"redis": "ok"})
    try:
        state = await cluster_state(client)
    except StoreUnavailable:
        return Readiness(False, {"redis": "unreachable"})
    cluster: JSONObject = {"state": state.state, "slots_ok": state.slots_ok, "primaries": state.primaries}
    return Readiness(state.ok, {"redis": "ok" if state.ok else "cluster_down", "cluster": cluster})

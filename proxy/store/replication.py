"""A journal write that replicas confirmed: the script, then `WAIT`, on one connection.

`WAIT` counts the writes of the connection it is sent on, so it is pipelined right after
the script on the same connection, to the primary that serves the session's slot. A
write that fewer replicas than asked confirmed in time is reported as `StoreUnavailable`
(it stays in the primary's journal: WAIT undoes nothing): the client is not told that a
turn is safe which a failover could still lose. So is a write that was redirected to
another node meanwhile (a failover or a slot move), since `WAIT` then ran on the wrong node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError, NoScriptError

from proxy.errors import StoreUnavailable
from proxy.store.connection import Client
from proxy.store.scripts import Arg, Script


async def write_confirmed(
    client: Client,
    script: Script,
    *,
    keys: Sequence[str],
    args: Sequence[Arg],
    replicas: int,
    timeout_ms: int,
    what: str,
) -> Any:
    """Run `script` on `keys` (one slot) and wait for `replicas` to confirm it; its result."""
    for attempt in (1, 2):
        node = client.get_node_from_key(keys[0]) if isinstance(client, RedisCluster) else None
        async with client.pipeline(transaction=False) as pipe:
            pipe.execute_command(*script.command(keys, args))
            pipe.execute_command("WAIT", replicas, timeout_ms, **({"target_nodes": node} if node else {}))
            try:
                written, acked = await pipe.execute(raise_on_error=False)
            except AttributeError as exc:  # redis-py: a connection torn down mid-failover has no writer
                raise ConnectionError(f"{what}: the connection to the primary was lost") from exc
        if isinstance(written, NoScriptError) and attempt == 1:
            await script.load()
            continue
        if isinstance(written, Exception):
            raise written
        moved = isinstance(client, RedisCluster) and client.get_node_from_key(keys[0]) != node
        confirmed = 0 if isinstance(acked, Exception) or moved else int(acked)
        if confirmed < replicas:
            raise StoreUnavailable(
                f"{what} was written but confirmed by {confirmed} of {replicas} replicas "
                f"within {timeout_ms} ms (redis.wait_replicas)"
            )
        return written
    raise AssertionError("unreachable")

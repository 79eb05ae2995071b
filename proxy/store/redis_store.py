"""The only code that speaks Redis. Callers use typed methods, never raw commands.

Each Lua script in `lua/` is registered once and called through one method that
names its KEYS and ARGV. Multi-key writes are atomic (Lua); callers shield the
writes that must land from client-disconnect cancellation.

On a single server a turn is one script call, session index included. On a cluster
every script touches the keys of one session (one slot), and the tenant's session index,
in a slot of its own, is updated by a second call sent at the same time. With
`redis.wait_replicas: N` the journal write is followed, on the same connection to the
session's primary, by `WAIT N timeout`: a turn that fewer replicas confirmed is
reported as a store failure (503), so no client is told of a turn a failover may lose.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import orjson
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from proxy.errors import StoreUnavailable
from proxy.store import index, records
from proxy.store.connection import Client, Readiness, mapped, mapped_pipeline, open_client, readiness
from proxy.store.index import SessionPage
from proxy.store.line import Line
from proxy.store.names import FORCE_COMPACTION, HANDOFF_PREFIX, SessionKeys, TenantKeys
from proxy.store.replication import write_confirmed
from proxy.store.scripts import Arg, Execute, Script
from proxy.types import JSONObject, frozen

log = logging.getLogger("context_proxy.store")

DERIVED_INDEX_SIZE = 100_000
"""Most turn ends a tenant's derived-session index keeps (oldest out first)."""


@frozen
class StoredTurn:
    """One journal turn as stored: its place in the tree and its JSON record."""

    seq: int
    parent: int
    depth: int
    record: JSONObject


@frozen
class LoadedSession:
    """What `load_context.lua` returned: where the request attaches and the path to it."""

    head: int
    parent: int
    matched: int
    found: bool
    """Some of the request is in the journal: a prefix (a full-history client) or, with
    `trimmed`, a run that a trimming client's window starts with."""
    trimmed: bool
    window_applies: bool
    window: JSONObject | None
    usage: JSONObject | None
    breaker: str
    version: str
    """"<epoch>:<window id>": what a cached path is valid for (a recreated session has a new
    epoch, a compaction a new window)."""
    extends: bool
    """True when `turns` continue the caller's cached path (only the new ones are sent)."""
    turns: list[tuple[int, JSONObject]]


@frozen
class SessionDump:
    """Everything stored for one session, for the session API and the CLI."""

    meta: dict[str, str]
    turns: list[StoredTurn]
    events: list[JSONObject]


@frozen
class Archive:
    """The span a landed compaction evicted, kept under the id its summary cites."""

    id: str
    span: list[Any]


class Store:
    """A Redis (or Redis Cluster) connection pool plus the registered scripts."""

    def __init__(
        self, client: Client, *, wait_replicas: int = 0, wait_timeout_ms: int = 1000, line: Line | None = None
    ) -> None:
        self._redis = client
        self._cluster = isinstance(client, RedisCluster)
        self._wait_replicas = wait_replicas
        self._wait_timeout_ms = wait_timeout_ms
        self._line = line
        self.execute: Execute = line.call if line is not None else client.execute_command
        """One command that may be pipelined behind others (no WATCH, no WAIT): on the line where
        the store has one (`line.py`), else through redis-py."""
        self._append_turn = Script(client, "append_turn", self.execute)
        self._touch_index = Script(client, "touch_index")
        self._load_context = Script(client, "load_context", self.execute)
        self._save_window = Script(client, "save_window", self.execute)
        self._release_lock = Script(client, "release_lock", self.execute)
        self._claim_compaction = Script(client, "claim_compaction", self.execute)
        self._index_turn_end = Script(client, "index_turn_end", self.execute)
        self._add_feedback = Script(client, "add_feedback", self.execute)

    @classmethod
    async def connect(
        cls, url: str, *, cluster: bool = False, wait_replicas: int = 0, wait_timeout_ms: int = 1000, attempts: int = 5
    ) -> Store:
        """Open the pool and PING with bounded retries, so a bad URL fails at start."""
        client = open_client(url, cluster=cluster, wait_timeout_ms=wait_timeout_ms)
        for attempt in range(1, attempts + 1):
            try:
                await client.ping()
                line = None if cluster or wait_replicas else Line.for_url(url)  # see line.py
                store = cls(client, wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms, line=line)
                if not cluster:
                    await store._adopt_legacy_index()
                return store
            except (RedisError, RedisClusterException, OSError) as exc:
                if attempt == attempts:
                    await client.aclose()
                    raise StoreUnavailable(f"cannot reach redis at {url}: {exc}") from exc
                await asyncio.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._line is not None:
            self._line.close()
        await self._redis.aclose()

    async def readiness(self) -> Readiness:
        """A single server answers PING; a cluster says every slot is served."""
        return await readiness(self._redis)

    async def load_context(
        self, keys: SessionKeys, offset: int, prefix_hashes: list[str], *, known: int = -1, known_version: str = ""
    ) -> LoadedSession:
        """Where a request attaches, by the longest prefix of its conversation the journal holds
        (`prefix_hashes`: chain hashes, 40 characters each, the first covering `offset + 1`
        messages), and the path to it; only the turns after `known` if it is on that path."""
        return await self._load(keys, ["prefix", known, known_version, offset, "".join(prefix_hashes)])

    async def load_overlap(
        self, keys: SessionKeys, message_hashes: list[str], *, known: int = -1, known_version: str = ""
    ) -> LoadedSession:
        """Where a trimming client's conversation attaches: the turn that ends the run of the
        session's path its window starts with (see `load_context.lua`), and the path to it."""
        return await self._load(keys, ["overlap", known, known_version, 0, *message_hashes])

    async def _load(self, keys: SessionKeys, args: list[str | int]) -> LoadedSession:
        with mapped():
            raw = await self._load_context(keys=[keys.meta, keys.turns, keys.links, keys.chain, keys.ends], args=args)
        head, parent, matched, found, applies, window, usage, breaker, version, extends = raw[:10]
        rest = raw[10:]
        turns = [(int(rest[i]), records.decode(rest[i + 1])) for i in range(0, len(rest), 2)]
        return LoadedSession(
            head=int(head),
            parent=int(parent),
            matched=int(matched),
            found=int(found) > 0,
            trimmed=int(found) == 2,
            window_applies=bool(applies),
            window=orjson.loads(window) if window else None,
            usage=orjson.loads(usage) if usage else None,
            breaker=breaker.decode() if isinstance(breaker, bytes) else str(breaker),
            version=version.decode() if isinstance(version, bytes) else str(version),
            extends=bool(extends),
            turns=turns,
        )

    async def append_turn(
        self,
        keys: SessionKeys,
        record: JSONObject,
        *,
        parent: int | None,
        completed: bool,
        hashes: list[str],
        ttl_s: int,
        usage: JSONObject | None,
    ) -> tuple[int, int, int]:
        """Journal one turn; `parent=None` attaches it to the head at commit time.

        Raises `StoreUnavailable` when the store cannot be reached, and with
        `wait_replicas` also when fewer replicas than asked confirmed the write in time.
        """
        now = f"{time.time():.3f}"
        args: list[Arg] = [
            records.encode(record),
            "head" if parent is None else parent,
            "1" if completed else "0",
            ttl_s,
            " ".join(hashes),
            now,
            keys.session,
            orjson.dumps(usage) if usage else "",
            os.urandom(8).hex(),
        ]
        script_keys = keys.all() if self._cluster else [*keys.all(), keys.index]
        async with mapped_pipeline(self._redis):
            if self._wait_replicas:
                write = write_confirmed(
                    self._redis, self._append_turn, keys=script_keys, args=args, replicas=self._wait_replicas,
                    timeout_ms=self._wait_timeout_ms, what=f"a turn of session {keys.session}",
                )  # fmt: skip
            else:
                write = self._append_turn(keys=script_keys, args=args)
            raw = await (self._indexed(write, keys, now, ttl_s) if self._cluster else write)
        seq, real_parent, depth = raw
        return int(seq), int(real_parent), int(depth)

    async def _indexed(self, write: Awaitable[Any], keys: SessionKeys, now: str, ttl_s: int) -> Any:
        """On a cluster: the journal write and the index update (another slot) at the same time.

        A turn that was journaled but not indexed is still answered: the session's next
        turn indexes it, and only the listing misses it meanwhile.
        """
        results: tuple[Any, Any] = await asyncio.gather(
            write, self._touch_index(keys=[keys.index], args=[now, keys.session, ttl_s]), return_exceptions=True
        )
        raw, indexed = results
        if isinstance(raw, BaseException):
            raise raw
        if isinstance(indexed, Exception):
            log.warning("session %s journaled but not indexed: %s", keys.session, indexed)
        return raw

    async def save_window(
        self,
        keys: SessionKeys,
        *,
        expected_window: str,
        window: JSONObject,
        boundary: int,
        event: JSONObject,
        archive: Archive,
        ttl_s: int,
        on_path_seq: int | None = None,
    ) -> bool:
        """Land a compaction if the window is still `expected_window` (and `on_path_seq`, if
        given, is on the head's path), with the span it evicted archived; False if it is stale."""
        args: list[bytes | str | int] = [
            expected_window,
            orjson.dumps(window),
            boundary,
            orjson.dumps(event),
            archive.id,
            orjson.dumps(archive.span),
            ttl_s,
            "" if on_path_seq is None else on_path_seq,
        ]
        with mapped():
            landed = await self._save_window(keys=keys.all(), args=args)
        return bool(landed)

    async def find_derived(self, keys: TenantKeys, output_hashes: list[str]) -> str | None:
        """The derived session whose turn ended with the first of `output_hashes` found."""
        with mapped():
            found = await self._redis.hmget(keys.derived_ends, output_hashes)
        for session in found:
            if session is not None:
                return session.decode() if isinstance(session, bytes) else str(session)
        return None

    async def index_derived(self, keys: TenantKeys, output_hash: str, session: str, *, ttl_s: int) -> None:
        """Remember that a derived session's turn ended with this output (bounded, expiring)."""
        args: list[Arg] = [output_hash, session, int(time.time()), ttl_s, DERIVED_INDEX_SIZE]
        with mapped():
            await self._index_turn_end(keys=[keys.derived_ends, keys.derived_ages], args=args)

    async def record_event(self, keys: SessionKeys, event: JSONObject, *, breaker: str | None, ttl_s: int) -> None:
        """Journal a non-turn entry (a failed compaction) and set the breaker count."""
        async with mapped_pipeline(self._redis), self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(keys.events, orjson.dumps(event))
            if breaker is not None:
                pipe.hset(keys.meta, "breaker", breaker)
            pipe.expire(keys.events, ttl_s)
            await pipe.execute()

    async def add_feedback(self, keys: SessionKeys, seq: int, entry: JSONObject) -> bool:
        """Append feedback to turn `seq`; False when the session has no such turn."""
        preferred = entry.get("preferred")
        args: list[Arg] = [seq, orjson.dumps(entry), preferred if isinstance(preferred, str) else ""]
        with mapped():
            added = await self._add_feedback(keys=[keys.meta, keys.turns], args=args)
        return bool(added)

    async def preferred_replies(self, keys: SessionKeys) -> dict[int, str]:
        """The latest preferred reply of each turn that has one (seq -> text)."""
        with mapped():
            raw = await self._redis.hget(keys.meta, "preferred")
        return {int(seq): str(text) for seq, text in orjson.loads(raw).items()} if raw else {}

    async def read_archive(self, keys: SessionKeys, archive_id: str) -> list[Any] | None:
        with mapped():
            raw = await self._redis.hget(keys.archive, archive_id)
        return orjson.loads(raw) if raw else None

    async def request_compaction(self, keys: SessionKeys, window_id: str) -> None:
        """Ask for a forced compaction on the session's next request (valid while `window_id` is current)."""
        with mapped():
            await self._redis.hset(keys.meta, FORCE_COMPACTION, window_id)

    async def requested_compaction(self, keys: SessionKeys) -> str | None:
        """The window id in which a forced compaction was asked for, if one is pending."""
        with mapped():
            raw = await self._redis.hget(keys.meta, FORCE_COMPACTION)
        return raw.decode() if isinstance(raw, bytes) else raw

    async def clear_compaction_request(self, keys: SessionKeys) -> None:
        with mapped():
            await self._redis.hdel(keys.meta, FORCE_COMPACTION)

    async def claim_handoff(self, keys: SessionKeys, window_id: str) -> bool:
        """True once per window (atomically, across replicas and restarts): this request
        carries the handoff notice."""
        with mapped():
            return bool(await self._redis.hsetnx(keys.meta, HANDOFF_PREFIX + window_id, "1"))

    async def read_session(self, keys: SessionKeys) -> SessionDump | None:
        async with mapped_pipeline(self._redis), self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.meta)
            pipe.hgetall(keys.links)
            pipe.hgetall(keys.turns)
            pipe.lrange(keys.events, 0, -1)
            meta, links, turns, events = await pipe.execute()
        if not meta:
            return None
        stored = []
        for seq_raw, link in links.items():
            seq = int(seq_raw)
            parent, depth = bytes(link).split(b" ", 2)[:2]  # the rest may be binary (append_turn.lua)
            stored.append(StoredTurn(seq, int(parent), int(depth), records.decode(turns[seq_raw])))
        stored.sort(key=lambda t: t.seq)
        return SessionDump(
            meta={k.decode(): v.decode() for k, v in meta.items()},
            turns=stored,
            events=[orjson.loads(e) for e in events],
        )

    async def turn_ending_with(self, keys: SessionKeys, output_hash: str) -> int | None:
        """The session's latest completed turn whose answer has this hash (its `ends` entry), if any."""
        with mapped():
            raw = await self.execute("HGET", keys.ends, output_hash)
        return int(raw) if raw is not None else None

    async def session_exists(self, keys: SessionKeys) -> bool:
        with mapped():
            return bool(await self.execute("EXISTS", keys.meta))

    async def delete_session(self, keys: SessionKeys) -> bool:
        """Every key of the session, and its entry in the tenant's index (another slot on a cluster)."""
        async with mapped_pipeline(self._redis), self._redis.pipeline(transaction=not self._cluster) as pipe:
            pipe.delete(*keys.all(), keys.compaction_lock)
            pipe.zrem(keys.index, keys.session)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def reset_breaker(self, keys: SessionKeys, closed: str) -> None:
        """Store `closed` (the breaker's closed state) as the session's breaker."""
        with mapped():
            await self._redis.hset(keys.meta, "breaker", closed)

    async def page_sessions(self, tenant: str, *, after: str | None, limit: int) -> SessionPage | None:
        """The tenant's sessions, most recently used first, `limit` after the session `after`.

        None when `after` is not in the tenant's index. Sessions whose keys expired
        before the index forgot them are skipped.
        """
        async with mapped_pipeline(self._redis):
            return await index.page(self._redis, TenantKeys(tenant).sessions, after=after, limit=limit)

    async def iter_sessions(self) -> AsyncIterator[tuple[str, str, float]]:
        """(tenant, session, last used) for every session of every tenant, newest first.

        Scans every primary for the tenants' indexes: an operator's command, not a request's.
        """
        with mapped():
            found = await index.everything(self._redis)
        for tenant, session, used in found:
            yield tenant, session, used

    async def acquire_lock(self, key: str, token: str, ttl_s: float) -> bool:
        with mapped():
            return bool(await self._redis.set(key, token, nx=True, px=int(ttl_s * 1000)))

    async def claim_compaction(
        self, keys: SessionKeys, token: str, ttl_s: float, *, window_id: str, first_window: str
    ) -> bool:
        """Take the session's compaction lock if it is free and the stored window is still
        `window_id` (`first_window` when none was stored yet; one atomic step); False when
        another holds it or the window moved on."""
        with mapped():
            taken = await self._claim_compaction(
                keys=[keys.compaction_lock, keys.meta], args=[token, int(ttl_s * 1000), window_id, first_window]
            )
        return bool(taken)

    async def release_lock(self, key: str, token: str) -> bool:
        """Delete the lock if it still holds `token`; False when it expired or another holds it."""
        with mapped():
            return bool(await self._release_lock(keys=[key], args=[token]))

    async def _adopt_legacy_index(self) -> None:
        with mapped():
            await index.adopt_legacy(self._redis)

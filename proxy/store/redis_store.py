"""The only code that speaks Redis. Callers use typed methods, never raw commands.

Each Lua script in `lua/` is registered once and called through one method that
names its KEYS and ARGV. Multi-key writes are atomic (Lua); callers shield the
writes that must land from client-disconnect cancellation.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, RedisError, ResponseError

from proxy.errors import StoreUnavailable
from proxy.store.keys import FORCE_COMPACTION, HANDOFF_PREFIX, SESSION_INDEX, SessionKeys, TenantKeys
from proxy.types import JSONObject

log = logging.getLogger("context_proxy.store")

DERIVED_INDEX_SIZE = 100_000
"""Most turn ends a tenant's derived-session index keeps (oldest out first)."""


@dataclass(frozen=True)
class StoredTurn:
    """One journal turn as stored: its place in the tree and its JSON record."""

    seq: int
    parent: int
    depth: int
    record: JSONObject


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class SessionDump:
    """Everything stored for one session, for the session API and the CLI."""

    meta: dict[str, str]
    turns: list[StoredTurn]
    events: list[JSONObject]


@dataclass(frozen=True)
class SessionInfo:
    """One line of a tenant's session list: what its meta hash and head turn say."""

    session: str
    created: int
    last_used: int
    turns: int
    window: str
    usage: JSONObject | None
    model: str | None


@contextmanager
def _mapped() -> Iterator[None]:
    """Translate redis-py's errors into the proxy's at this boundary."""
    try:
        yield
    except ResponseError:
        raise
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(f"session store unavailable: {exc}") from exc


class _Script:
    """One Lua script of `lua/`, called by its SHA; loaded again if the server lost it."""

    def __init__(self, client: aioredis.Redis, name: str) -> None:
        self._client = client
        self._source = resources.files("proxy.store").joinpath("lua", f"{name}.lua").read_text()
        self._sha = hashlib.sha1(self._source.encode()).hexdigest()

    async def __call__(self, *, keys: list[str], args: Sequence[bytes | str | int]) -> Any:
        try:
            return await self._client.execute_command("EVALSHA", self._sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
        except NoScriptError:
            await self._client.script_load(self._source)
            return await self._client.execute_command("EVALSHA", self._sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]


class Store:
    """A Redis connection pool plus the registered scripts."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._append_turn = _Script(client, "append_turn")
        self._load_context = _Script(client, "load_context")
        self._save_window = _Script(client, "save_window")
        self._index_turn_end = _Script(client, "index_turn_end")
        self._add_feedback = _Script(client, "add_feedback")

    @classmethod
    async def connect(cls, url: str, *, attempts: int = 5) -> Store:
        """Open the pool and PING with bounded retries, so a bad URL fails at start."""
        client = aioredis.Redis.from_url(url, socket_connect_timeout=5, max_connections=512)
        for attempt in range(1, attempts + 1):
            try:
                await client.ping()
                return cls(client)
            except (RedisError, OSError) as exc:
                if attempt == attempts:
                    await client.aclose()
                    raise StoreUnavailable(f"cannot reach redis at {url}: {exc}") from exc
                await asyncio.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self._redis.aclose()

    async def ping(self) -> bool:
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def load_context(
        self, keys: SessionKeys, offset: int, prefix_hashes: list[str], *, known: int = -1, known_version: str = ""
    ) -> LoadedSession:
        """Where a request attaches, by the longest prefix of its conversation the journal holds
        (`prefix_hashes`: chain hashes, the first covering `offset + 1` messages), and the path
        to it; only the turns after `known` if it is on that path."""
        return await self._load(keys, ["prefix", known, known_version, offset, *prefix_hashes])

    async def load_overlap(
        self, keys: SessionKeys, message_hashes: list[str], *, known: int = -1, known_version: str = ""
    ) -> LoadedSession:
        """Where a trimming client's conversation attaches: the turn that ends the run of the
        session's path its window starts with (see `load_context.lua`), and the path to it."""
        return await self._load(keys, ["overlap", known, known_version, 0, *message_hashes])

    async def _load(self, keys: SessionKeys, args: list[str | int]) -> LoadedSession:
        with _mapped():
            raw = await self._load_context(keys=[keys.meta, keys.turns, keys.links, keys.chain, keys.ends], args=args)
        head, parent, matched, found, applies, window, usage, breaker, version, extends = raw[:10]
        rest = raw[10:]
        turns = [(int(rest[i]), orjson.loads(rest[i + 1])) for i in range(0, len(rest), 2)]
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
        """Journal one turn; `parent=None` attaches it to the head at commit time."""
        args: list[bytes | str | int] = [
            orjson.dumps(record),
            "head" if parent is None else parent,
            "1" if completed else "0",
            ttl_s,
            " ".join(hashes),
            int(time.time()),
            keys.index_member,
            orjson.dumps(usage) if usage else "",
            os.urandom(8).hex(),
        ]
        with _mapped():
            seq, real_parent, depth = await self._append_turn(keys=[*keys.all(), SESSION_INDEX], args=args)
        return int(seq), int(real_parent), int(depth)

    async def save_window(
        self,
        keys: SessionKeys,
        *,
        expected_window: str,
        window: JSONObject,
        boundary: int,
        event: JSONObject,
        archive_id: str,
        span: list[Any],
        ttl_s: int,
        on_path_seq: int | None = None,
    ) -> bool:
        """Land a compaction if the window is still `expected_window` (and `on_path_seq`, if
        given, is on the head's path); False if it is stale."""
        args: list[bytes | str | int] = [
            expected_window,
            orjson.dumps(window),
            boundary,
            orjson.dumps(event),
            archive_id,
            orjson.dumps(span),
            ttl_s,
            "" if on_path_seq is None else on_path_seq,
        ]
        with _mapped():
            landed = await self._save_window(keys=keys.all(), args=args)
        return bool(landed)

    async def find_derived(self, keys: TenantKeys, output_hashes: list[str]) -> str | None:
        """The derived session whose turn ended with the first of `output_hashes` found."""
        with _mapped():
            found = await self._redis.hmget(keys.derived_ends, output_hashes)
        for session in found:
            if session is not None:
                return session.decode() if isinstance(session, bytes) else str(session)
        return None

    async def index_derived(self, keys: TenantKeys, output_hash: str, session: str, *, ttl_s: int) -> None:
        """Remember that a derived session's turn ended with this output (bounded, expiring)."""
        args: list[bytes | str | int] = [output_hash, session, int(time.time()), ttl_s, DERIVED_INDEX_SIZE]
        with _mapped():
            await self._index_turn_end(keys=[keys.derived_ends, keys.derived_ages], args=args)

    async def record_event(self, keys: SessionKeys, event: JSONObject, *, breaker: str | None, ttl_s: int) -> None:
        """Journal a non-turn entry (a failed compaction) and set the breaker count."""
        with _mapped():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(keys.events, orjson.dumps(event))
                if breaker is not None:
                    pipe.hset(keys.meta, "breaker", breaker)
                pipe.expire(keys.events, ttl_s)
                await pipe.execute()

    async def add_feedback(self, keys: SessionKeys, seq: int, entry: JSONObject) -> bool:
        """Append feedback to turn `seq`; False when the session has no such turn."""
        preferred = entry.get("preferred")
        args: list[bytes | str | int] = [seq, orjson.dumps(entry), preferred if isinstance(preferred, str) else ""]
        with _mapped():
            added = await self._add_feedback(keys=[keys.meta, keys.turns], args=args)
        return bool(added)

    async def preferred_replies(self, keys: SessionKeys) -> dict[int, str]:
        """The latest preferred reply of each turn that has one (seq -> text)."""
        with _mapped():
            raw = await self._redis.hget(keys.meta, "preferred")
        return {int(seq): str(text) for seq, text in orjson.loads(raw).items()} if raw else {}

    async def read_archive(self, keys: SessionKeys, archive_id: str) -> list[Any] | None:
        with _mapped():
            raw = await self._redis.hget(keys.archive, archive_id)
        return orjson.loads(raw) if raw else None

    async def request_compaction(self, keys: SessionKeys, window_id: str) -> None:
        """Ask for a forced compaction on the session's next request (valid while `window_id` is current)."""
        with _mapped():
            await self._redis.hset(keys.meta, FORCE_COMPACTION, window_id)

    async def requested_compaction(self, keys: SessionKeys) -> str | None:
        """The window id in which a forced compaction was asked for, if one is pending."""
        with _mapped():
            raw = await self._redis.hget(keys.meta, FORCE_COMPACTION)
        return raw.decode() if isinstance(raw, bytes) else raw

    async def clear_compaction_request(self, keys: SessionKeys) -> None:
        with _mapped():
            await self._redis.hdel(keys.meta, FORCE_COMPACTION)

    async def claim_handoff(self, keys: SessionKeys, window_id: str) -> bool:
        """True once per window (atomically, across replicas and restarts): this request
        carries the handoff notice."""
        with _mapped():
            return bool(await self._redis.hsetnx(keys.meta, HANDOFF_PREFIX + window_id, "1"))

    async def read_session(self, keys: SessionKeys) -> SessionDump | None:
        with _mapped():
            async with self._redis.pipeline(transaction=False) as pipe:
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
            parent, depth = bytes(link).decode().split(" ")[:2]
            stored.append(StoredTurn(seq, int(parent), int(depth), orjson.loads(turns[seq_raw])))
        stored.sort(key=lambda t: t.seq)
        return SessionDump(
            meta={k.decode(): v.decode() for k, v in meta.items()},
            turns=stored,
            events=[orjson.loads(e) for e in events],
        )

    async def session_exists(self, keys: SessionKeys) -> bool:
        with _mapped():
            return bool(await self._redis.exists(keys.meta))

    async def delete_session(self, keys: SessionKeys) -> bool:
        with _mapped():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(*keys.all(), keys.compaction_lock)
                pipe.zrem(SESSION_INDEX, keys.index_member)
                deleted, _ = await pipe.execute()
        return bool(deleted)

    async def reset_breaker(self, keys: SessionKeys) -> None:
        with _mapped():
            await self._redis.hset(keys.meta, "breaker", "0")

    async def iter_sessions(self) -> AsyncIterator[tuple[str, str, float]]:
        """(tenant, session, last used) for every session, newest first."""
        with _mapped():
            members: list[Any] = await self._redis.zrevrange(SESSION_INDEX, 0, -1, withscores=True)
        for member, score in members:
            tenant, _, session = member.decode().partition(":")
            yield tenant, session, float(score)

    async def list_sessions(self, tenant: str, *, limit: int, after: str | None) -> tuple[list[SessionInfo], bool]:
        """A page of the tenant's sessions, newest first, after the session `after`; and whether more follow.

        It reads the whole session index and keeps the tenant's members: work in proportion
        to all sessions of all tenants, fine for a gateway's thousands.
        """
        ids = [session async for owner, session, _ in self.iter_sessions() if owner == tenant]
        start = ids.index(after) + 1 if after in ids else 0
        page = ids[start : start + limit]
        with _mapped():
            async with self._redis.pipeline(transaction=False) as pipe:
                for session in page:
                    pipe.hmget(
                        SessionKeys(tenant, session).meta, "created", "updated", "seq", "window_id", "usage", "head"
                    )
                metas = await pipe.execute()
            async with self._redis.pipeline(transaction=False) as pipe:
                for session, meta in zip(page, metas, strict=True):
                    pipe.hget(SessionKeys(tenant, session).turns, meta[5] or b"-1")
                heads = await pipe.execute()
        infos = []
        for session, meta, head in zip(page, metas, heads, strict=True):
            created, updated, seq, window, usage, _ = meta
            if updated is None:
                continue  # expired since the index last pruned it
            infos.append(
                SessionInfo(
                    session=session,
                    created=int(created or 0),
                    last_used=int(updated),
                    turns=int(seq or 0),
                    window=window.decode() if window else "win_0",
                    usage=orjson.loads(usage) if usage else None,
                    model=orjson.loads(head).get("model") if head else None,
                )
            )
        return infos, start + limit < len(ids)

    async def acquire_lock(self, key: str, token: str, ttl_s: float) -> bool:
        with _mapped():
            return bool(await self._redis.set(key, token, nx=True, px=int(ttl_s * 1000)))

    async def release_lock(self, key: str, token: str) -> None:
        with _mapped():
            async with self._redis.pipeline(transaction=True) as pipe:
                await pipe.watch(key)
                if await pipe.get(key) == token.encode():
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.delete(key)
                    await pipe.execute()

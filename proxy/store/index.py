"""The tenants' session indexes: a page of one tenant's sessions, every session, and the
adoption of the single global index that earlier versions kept.

Each tenant's index is a sorted set (session id -> last used) under the hash tag
`{t:tenant}` (see `names.py`). A listing reads the index, then each listed session's
meta hash; on a cluster those sit on several nodes and are read in one pipeline.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.store import records
from proxy.store.connection import Client
from proxy.store.names import LEGACY_SESSION_INDEX, TENANT_INDEX_PATTERN, SessionKeys, TenantKeys, tenant_of_index
from proxy.types import JSONObject, frozen

_FIELDS = ("created", "updated", "seq", "window_id", "usage", "head")


@frozen
class ListedSession:
    """One session as a listing shows it, from its meta hash."""

    session: str
    created: int
    last_used: int
    turns: int
    window: str | None
    """None: the session's first window (none was stored yet)."""
    usage: JSONObject | None
    """The last answer's usage feedback: `prompt` (reported) and `local` (the proxy's count)."""
    model: str | None
    """The model of its head turn."""
    savings: JSONObject | None = None
    """The savings totals of the path to its head turn (`path_savings`; None before they were kept)."""


@frozen
class SessionPage:
    sessions: list[ListedSession]
    has_more: bool


async def page(client: Client, key: str, *, after: str | None, limit: int) -> SessionPage | None:
    """Up to `limit` sessions of the index `key`, newest first, after `after`; None if `after` is unknown."""
    start = 0
    if after is not None:
        rank: Any = await client.zrevrank(key, after)
        if rank is None:
            return None
        start = int(rank) + 1
    tenant = tenant_of_index(key)
    found: list[ListedSession] = []
    while len(found) <= limit:
        members: list[Any] = await client.zrevrange(key, start, start + limit)
        if not members:
            break
        start += len(members)
        found += await _describe(client, tenant, [m.decode() for m in members])
    return SessionPage(found[:limit], has_more=len(found) > limit)


async def _describe(client: Client, tenant: str, sessions: list[str]) -> list[ListedSession]:
    async with client.pipeline(transaction=False) as pipe:
        for session in sessions:
            pipe.hmget(SessionKeys(tenant, session).meta, _FIELDS)
        metas: list[list[Any]] = await pipe.execute()
    async with client.pipeline(transaction=False) as pipe:
        for session, meta in zip(sessions, metas, strict=True):
            pipe.hget(SessionKeys(tenant, session).turns, meta[5] or b"-1")
        heads: list[Any] = await pipe.execute()
    listed = []
    for session, (created, updated, seq, window, usage, _), head in zip(sessions, metas, heads, strict=True):
        if updated is None:
            continue
        record = records.decode(head) if head else {}
        listed.append(
            ListedSession(
                session=session,
                created=int(created or 0),
                last_used=int(updated),
                turns=int(seq or 0),
                window=window.decode() if window else None,
                usage=orjson.loads(usage) if usage else None,
                model=record.get("model"),
                savings=record.get("path_savings"),
            )
        )
    return listed


async def everything(client: Client) -> list[tuple[str, str, float]]:
    """(tenant, session, last used) from every tenant's index on every primary, newest first."""
    found = []
    async for raw in client.scan_iter(match=TENANT_INDEX_PATTERN, count=1000, _type="ZSET"):
        key = raw.decode()
        tenant = tenant_of_index(key)
        entries: list[Any] = await client.zrange(key, 0, -1, withscores=True)
        for member, score in entries:
            found.append((tenant, member.decode(), float(score)))
    found.sort(key=lambda entry: entry[2], reverse=True)
    return found


async def adopt_legacy(client: Client) -> None:
    """Move the members of the old global index (`tenant:session`) into their tenants' indexes."""
    members: list[Any] = await client.zrange(LEGACY_SESSION_INDEX, 0, -1, withscores=True)
    if not members:
        return
    async with client.pipeline(transaction=True) as pipe:
        for member, score in members:
            tenant, _, session = member.decode().partition(":")
            pipe.zadd(TenantKeys(tenant).sessions, {session: score}, gt=True)
        pipe.delete(LEGACY_SESSION_INDEX)
        await pipe.execute()

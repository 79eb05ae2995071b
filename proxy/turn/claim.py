"""One compaction of a session at a time, across requests and replicas.

Two requests that find the same session over budget at the same moment would both call
the summarizer, and only one result could land. The first to claim the session's
compaction lock (a key in the store with a TTL, so a crashed holder cannot block it for
long) computes; the others wait until they can claim it themselves, then reload the
session, whose window the first has advanced, and usually find nothing left to do.
"""

from __future__ import annotations

import asyncio
import uuid

from proxy.store import Store

POLL_S = 0.05


class CompactionClaim:
    def __init__(self, store: Store, key: str, ttl_s: float) -> None:
        self._store = store
        self._key = key
        self._ttl_s = ttl_s
        self._token = uuid.uuid4().hex
        self.held = False

    async def acquire(self) -> bool:
        """Take the claim if it is free (True also when this request holds it already)."""
        if not self.held:
            self.held = await self._store.acquire_lock(self._key, self._token, self._ttl_s)
        return self.held

    async def wait(self, timeout_s: float) -> bool:
        """Wait (bounded) until the claim can be taken, and take it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not await self.acquire():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    async def release(self) -> None:
        if self.held:
            self.held = False
            await self._store.release_lock(self._key, self._token)

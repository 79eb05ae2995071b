"""One compaction of a session at a time, across requests and replicas, from the stored window.

Two requests that find the same session over budget at the same moment would both call
the summarizer, and only one result could land. The first to claim the session's
compaction lock (a key in the store with a TTL, so a crashed holder cannot block it for
long) computes; the others wait until they can claim it themselves, then reload the
session, whose window the first has advanced, and usually find nothing left to do.

A claim made for the window a request loaded (`LoadedWindow`) carries that window: it is
taken only while that window is still the stored one, in the same atomic step. A request
that loaded the session before another landed its compaction would otherwise find the
claim free again and compact its stale view a second time; it finds the claim refused
instead, and waits and reloads like any other.
"""

from __future__ import annotations

import asyncio
import os
from functools import cached_property

from proxy.context.window import FIRST_WINDOW
from proxy.store import SessionKeys, Store
from proxy.types import frozen

POLL_S = 0.05


@frozen
class LoadedWindow:
    """The session and the window id a request loaded it in."""

    keys: SessionKeys
    window_id: str


class CompactionClaim:
    def __init__(self, store: Store, key: str, ttl_s: float, *, window: LoadedWindow | None = None) -> None:
        self._store = store
        self._key = key
        self._ttl_s = ttl_s
        self._window = window
        self.held = False

    @cached_property
    def _token(self) -> str:
        """The holder's token, made only when the claim is first taken (most turns never do)."""
        return os.urandom(16).hex()

    @classmethod
    def for_window(cls, store: Store, window: LoadedWindow, ttl_s: float) -> CompactionClaim:
        """The claim of `window`'s session, taken only while `window` is its stored one."""
        return cls(store, window.keys.compaction_lock, ttl_s, window=window)

    async def acquire(self) -> bool:
        """Take the claim if it is free, and (with a `window`) only while that window is still
        the stored one; True also when this request holds it already."""
        if not self.held:
            if self._window is None:
                self.held = await self._store.acquire_lock(self._key, self._token, self._ttl_s)
            else:
                window = self._window
                self.held = await self._store.claim_compaction(
                    window.keys, self._token, self._ttl_s, window_id=window.window_id, first_window=FIRST_WINDOW
                )
        return self.held

    async def wait(self, timeout_s: float) -> bool:
        """Wait (bounded) until the claim is free, and take it whatever the stored window is:
        the caller reloads the session under it, so the window it then fits is the stored one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.held:
            self.held = await self._store.acquire_lock(self._key, self._token, self._ttl_s)
            if not self.held:
                if loop.time() >= deadline:
                    return False
                await asyncio.sleep(POLL_S)
        return True

    async def release(self) -> None:
        if self.held:
            self.held = False
            await self._store.release_lock(self._key, self._token)

"""Which gateway keys exist: the static ones from the config and the run-time ones in Redis.

The hot path only hashes the presented secret and looks it up in memory. Each replica
follows the registry's version counter in the background (every `REFRESH_S`) and
re-reads the registry when it moved, so a key created or revoked on any replica takes
effect everywhere within that interval plus one round trip. While Redis is unreachable
the last copy stays in use.
"""

from __future__ import annotations

import asyncio
import logging

from proxy.errors import StoreUnavailable
from proxy.gateway.policy import KeyPolicy, hash_secret
from proxy.store.gateway import GatewayStore

log = logging.getLogger("context_proxy.gateway")

REFRESH_S = 0.5


class KeyRegistry:
    def __init__(self, static: tuple[KeyPolicy, ...], store: GatewayStore) -> None:
        self.static = {policy.name: policy for policy in static}
        self._static_by_hash = {policy.sha256: policy for policy in static}
        self._store = store
        self._runtime_by_hash: dict[str, KeyPolicy] = {}
        self._version = -1

    @property
    def active(self) -> bool:
        """Gateway mode: at least one gateway key exists."""
        return bool(self._static_by_hash or self._runtime_by_hash)

    def lookup(self, secret: str) -> KeyPolicy | None:
        digest = hash_secret(secret)
        return self._static_by_hash.get(digest) or self._runtime_by_hash.get(digest)

    async def refresh(self) -> None:
        """Re-read the run-time keys if the registry changed since the last read."""
        if await self._store.registry_version() == self._version:
            return
        version, entries = await self._store.read_registry()
        runtime: dict[str, KeyPolicy] = {}
        for name, raw in entries.items():
            if name in self.static:
                log.warning("gateway key %s is defined in the config and in redis; the config's wins", name)
                continue
            policy = KeyPolicy.from_json(name, raw)
            runtime[policy.sha256] = policy
        self._runtime_by_hash, self._version = runtime, version

    async def follow(self) -> None:
        """Refresh until cancelled; an unreachable store is logged once per outage.

        A cancellation that a store call swallowed (redis-py can return normally from a
        command that was cancelled) still ends the loop: the task stays marked as cancelling."""
        task = asyncio.current_task()
        assert task is not None, "follow() runs as a task of its own"
        failing = False
        while not task.cancelling():
            await asyncio.sleep(REFRESH_S)
            try:
                await self.refresh()
                failing = False
            except StoreUnavailable as exc:
                if not failing:
                    log.warning("gateway keys not refreshed, keeping the last copy: %s", exc)
                failing = True

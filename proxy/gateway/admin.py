"""Creating, listing and revoking gateway keys: one service for the CLI and `/admin/keys`.

A created key's secret is returned once and only its hash is stored. Names are unique
across the config and Redis; keys from the config are changed in the config. A change
takes effect at once on the replica that made it, on the others at their next refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from proxy.errors import Conflict, NotFound
from proxy.gateway.limits import periods_at
from proxy.gateway.policy import KeyPolicy, new_policy, new_secret
from proxy.gateway.registry import KeyRegistry
from proxy.store.gateway import GatewayStore
from proxy.types import JSONObject


class KeyAdmin:
    def __init__(self, registry: KeyRegistry, store: GatewayStore, clock: Callable[[], float]) -> None:
        self._static = registry.static
        self._registry = registry
        self._store = store
        self._clock = clock

    async def create(self, fields: Mapping[str, Any]) -> tuple[KeyPolicy, str]:
        """A new run-time key and its secret (shown this once); 409 when the name exists."""
        secret = new_secret()
        policy = new_policy(fields, secret)
        if policy.name in self._static or not await self._store.create_key(policy.name, policy.to_json()):
            where = "in the config" if policy.name in self._static else "in redis"
            raise Conflict(f"a gateway key named {policy.name!r} already exists ({where})", code="key_exists")
        await self._registry.refresh()
        return policy, secret

    async def revoke(self, name: str) -> None:
        if name in self._static:
            raise Conflict(f"gateway key {name!r} comes from the config file: remove it there", code="key_in_config")
        if not await self._store.revoke_key(name):
            raise NotFound(f"no gateway key named {name!r}")
        await self._registry.refresh()

    async def list(self) -> list[JSONObject]:
        """Every key (config first, then run-time by name) with its limits and this day's and month's usage."""
        _, entries = await self._store.read_registry()
        runtime = [KeyPolicy.from_json(name, raw) for name, raw in sorted(entries.items()) if name not in self._static]
        policies = [*self._static.values(), *runtime]
        periods = periods_at(self._clock())
        usage = await self._store.usage([policy.name for policy in policies], periods)
        return [
            {
                **policy.public(),
                "usage": {
                    "day": {"period": periods.day, **asdict(usage[policy.name][0])},
                    "month": {"period": periods.month, **asdict(usage[policy.name][1])},
                },
            }
            for policy in policies
        ]

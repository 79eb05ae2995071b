"""The team gateway's Redis side: the registry of run-time keys, limits, usage.

Every call is one script or one single-slot read (see `gateway_keys`). The limits
scripts take the server's clock, so replicas with drifting clocks still share one
rolling minute; UTC days and months are named by the caller.
"""

from __future__ import annotations

from typing import Any

from proxy.store.connection import mapped, mapped_pipeline
from proxy.store.gateway_names import REGISTRY, REGISTRY_VERSION, GatewayKeys
from proxy.store.redis_store import Store
from proxy.store.scripts import Script
from proxy.types import frozen

_DAY_TTL_S = 40 * 86400
_MONTH_TTL_S = 400 * 86400


@frozen
class Periods:
    """The UTC day (`2026-11-30`) and month (`2026-11`) a request is counted in."""

    day: str
    month: str


@frozen
class Verdict:
    """What `gateway_admit.lua` decided; counts include the request when it was admitted."""

    outcome: str
    """admitted | rate_limited | quota"""
    limit: str
    """requests | tokens (rate_limited), budget (quota), empty when admitted"""
    requests: int
    requests_reset_ms: int
    tokens: int
    tokens_reset_ms: int
    retry_ms: int
    second: int
    """The tpm bucket the reservation went to (what `settle` corrects)."""


@frozen
class Usage:
    requests: int = 0
    tokens: int = 0
    refused: int = 0
    saved_tokens: int = 0
    """What composing saved in the period (negative: history supplied; `docs/savings.md`)."""
    saved_usd: float = 0.0


_OUTCOMES = ("admitted", "rate_limited", "quota")


class GatewayStore:
    """Typed calls over the gateway's scripts; shares the session store's connection pool."""

    def __init__(self, store: Store) -> None:
        self._redis = store._redis
        self._admit = Script(self._redis, "gateway_admit")
        self._settle = Script(self._redis, "gateway_settle")
        self._register = Script(self._redis, "gateway_register")

    async def admit(
        self, name: str, *, rpm: int, tpm: int, reserve: int, budget: int, period: str, periods: Periods, member: str
    ) -> Verdict:
        keys = GatewayKeys(name)
        args: list[str | int] = [rpm, tpm, reserve, budget, period, member, _DAY_TTL_S, _MONTH_TTL_S]
        with mapped():
            raw = await self._admit(
                keys=[keys.rpm, keys.tpm, keys.day(periods.day), keys.month(periods.month)], args=args
            )
        verdict, limit, *numbers = raw
        requests, requests_reset, tokens, tokens_reset, retry, second = (int(n) for n in numbers)
        return Verdict(
            outcome=_OUTCOMES[int(verdict)],
            limit=limit.decode() if isinstance(limit, bytes) else str(limit),
            requests=requests,
            requests_reset_ms=requests_reset,
            tokens=tokens,
            tokens_reset_ms=tokens_reset,
            retry_ms=retry,
            second=second,
        )

    async def settle(
        self, name: str, *, second: int, periods: Periods, delta: int, saved: tuple[int, float] = (0, 0.0)
    ) -> None:
        """Correct an admission's reservation by `delta` tokens (actual - reserved), and count
        its turn's `saved` (tokens, US dollars) in its periods."""
        keys = GatewayKeys(name)
        with mapped():
            await self._settle(
                keys=[keys.tpm, keys.day(periods.day), keys.month(periods.month)],
                args=[second, delta, saved[0], repr(saved[1])],
            )

    async def create_key(self, name: str, policy: bytes) -> bool:
        """Register a run-time key; False when the name is taken."""
        with mapped():
            return bool(await self._register(keys=[REGISTRY, REGISTRY_VERSION], args=["create", name, policy]))

    async def revoke_key(self, name: str) -> bool:
        """Forget a run-time key; False when there was none of that name."""
        with mapped():
            return bool(await self._register(keys=[REGISTRY, REGISTRY_VERSION], args=["revoke", name]))

    async def registry_version(self) -> int:
        with mapped():
            return int(await self._redis.get(REGISTRY_VERSION) or 0)

    async def read_registry(self) -> tuple[int, dict[str, bytes]]:
        """The version and every run-time key's policy JSON, in that order: a change landing
        in between is read with the older version, so the next refresh reads it again."""
        async with mapped_pipeline(self._redis), self._redis.pipeline(transaction=False) as pipe:
            pipe.get(REGISTRY_VERSION)
            pipe.hgetall(REGISTRY)
            version, entries = await pipe.execute()
        return int(version or 0), {k.decode(): v for k, v in entries.items()}

    async def usage(self, names: list[str], periods: Periods) -> dict[str, tuple[Usage, Usage]]:
        """(this day's, this month's) usage of each key."""
        async with mapped_pipeline(self._redis), self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(GatewayKeys(name).day(periods.day))
                pipe.hgetall(GatewayKeys(name).month(periods.month))
            raw = await pipe.execute()
        return {name: (_usage(raw[2 * i]), _usage(raw[2 * i + 1])) for i, name in enumerate(names)}


def _usage(fields: dict[Any, Any]) -> Usage:
    values = {k.decode(): v for k, v in fields.items()}
    counts = {k: int(values.get(k, 0)) for k in ("requests", "tokens", "refused", "saved_tokens")}
    return Usage(**counts, saved_usd=float(values.get("saved_usd", 0)))

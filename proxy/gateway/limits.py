"""Admitting a gateway key's request against its rpm, tpm and budget, and settling it.

Admission is one script (`gateway_admit.lua`): budget, then requests, then tokens, all
in the rolling minute of the Redis server's clock, shared by every replica. A request
reserves the local count of its prompt plus its `max_tokens`; once the answer's usage
is known, `settle` corrects the reservation to what was really used.

Headers follow OpenAI's: `x-ratelimit-limit|remaining|reset-requests|tokens` on every
response for a key with rpm or tpm; a refusal adds `Retry-After` (whole seconds). Here
`reset` is when the oldest request (or tokens) in the window leaves it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from proxy.errors import ProxyError, QuotaExceeded, RateLimited
from proxy.gateway.metrics import GatewayMetrics
from proxy.gateway.policy import KeyPolicy
from proxy.store.gateway import GatewayStore, Periods, Verdict
from proxy.types import JSONObject


def periods_at(now: float) -> Periods:
    moment = datetime.fromtimestamp(now, UTC)
    return Periods(day=moment.strftime("%Y-%m-%d"), month=moment.strftime("%Y-%m"))


def duration(ms: int) -> str:
    """OpenAI's reset format: `250ms`, `12s`, `1m30s`."""
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    minutes, seconds = divmod(math.ceil(ms / 1000), 60)
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


class Admission:
    """One admitted request's token reservation; settled exactly once."""

    def __init__(
        self, store: GatewayStore, metrics: GatewayMetrics, name: str, reserved: int, second: int, periods: Periods
    ) -> None:
        self._store = store
        self._metrics = metrics
        self.name = name
        self.reserved = reserved
        self._second = second
        self._periods = periods
        self._settled = False

    async def settle(self, actual: int | None, saved: tuple[int, float] = (0, 0.0)) -> None:
        """Replace the reservation by `actual` tokens (None: keep it) and count what the turn
        saved (tokens, US dollars) in the key's periods; later calls do nothing."""
        if self._settled:
            return
        self._settled = True
        used = self.reserved if actual is None else actual
        self._metrics.used(self.name, used)
        if used != self.reserved or saved != (0, 0.0):
            await self._store.settle(
                self.name, second=self._second, periods=self._periods, delta=used - self.reserved, saved=saved
            )


Gate = Callable[[int], Awaitable["Admission | None"]]
"""Admits one turn, reserving that many tokens of its gateway key's tpm; None without a key."""


async def no_gate(tokens: int) -> Admission | None:
    """The gate of a caller the gateway does not limit."""
    return None


async def settle(
    admission: Admission | None, status: str, usage: JSONObject | None, saved: tuple[int, float] = (0, 0.0)
) -> None:
    """Correct a turn's reservation by its answer: its usage, nothing for an upstream error,
    the reservation itself when the answer was cut off before its usage came; and count what
    the turn saved (tokens, US dollars)."""
    if admission is None:
        return
    total = (usage or {}).get("total_tokens")
    if isinstance(total, int):
        await admission.settle(total, saved)
    else:
        await admission.settle(0 if status == "failed" else None, saved)


class Limiter:
    def __init__(self, store: GatewayStore, metrics: GatewayMetrics, clock: Callable[[], float]) -> None:
        self._store = store
        self._metrics = metrics
        self._clock = clock

    async def admit(self, policy: KeyPolicy, tokens: int) -> tuple[dict[str, str], Admission | ProxyError]:
        """The rate-limit headers, and the admission or the 429 to answer."""
        periods = periods_at(self._clock())
        verdict = await self._store.admit(
            policy.name,
            rpm=policy.rpm or 0,
            tpm=policy.tpm or 0,
            reserve=tokens,
            budget=policy.budget_tokens or 0,
            period=policy.budget_period,
            periods=periods,
            member=os.urandom(8).hex(),
        )
        self._metrics.request(policy.name, verdict.outcome)
        headers = rate_headers(policy, verdict)
        if verdict.outcome == "admitted":
            return headers, Admission(self._store, self._metrics, policy.name, tokens, verdict.second, periods)
        headers["Retry-After"] = str(max(1, math.ceil(_retry_ms(policy, verdict, self._clock()) / 1000)))
        return headers, _refusal(policy, verdict, tokens)


def rate_headers(policy: KeyPolicy, verdict: Verdict) -> dict[str, str]:
    headers: dict[str, str] = {}
    for kind, limit, used, reset in (
        ("requests", policy.rpm, verdict.requests, verdict.requests_reset_ms),
        ("tokens", policy.tpm, verdict.tokens, verdict.tokens_reset_ms),
    ):
        if limit:
            headers[f"x-ratelimit-limit-{kind}"] = str(limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(limit - used, 0))
            headers[f"x-ratelimit-reset-{kind}"] = duration(reset)
    return headers


def _retry_ms(policy: KeyPolicy, verdict: Verdict, now: float) -> int:
    """Until the limit admits again; for a spent budget, until the UTC day or month turns."""
    if verdict.outcome != "quota":
        return verdict.retry_ms
    moment = datetime.fromtimestamp(now, UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if policy.budget_period == "month":
        turn = day.replace(day=1, year=day.year + day.month // 12, month=day.month % 12 + 1)
    else:
        turn = datetime.fromtimestamp(day.timestamp() + 86400, UTC)
    return int((turn.timestamp() - now) * 1000)


def _refusal(policy: KeyPolicy, verdict: Verdict, tokens: int) -> ProxyError:
    if verdict.outcome == "quota":
        return QuotaExceeded(
            f"gateway key {policy.name!r} has used its budget of {policy.budget_tokens} tokens for this "
            f"{policy.budget_period} (UTC); it resets when the {policy.budget_period} turns"
        )
    if verdict.limit == "requests":
        detail = f"requests per min (RPM): Limit {policy.rpm}, Used {verdict.requests}, Requested 1"
    else:
        detail = f"tokens per min (TPM): Limit {policy.tpm}, Used {verdict.tokens}, Requested {tokens}"
    wait = duration(verdict.retry_ms)
    return RateLimited(
        f"Rate limit reached for gateway key {policy.name!r} on {detail}. Please try again in {wait}.",
        limit=verdict.limit,
    )

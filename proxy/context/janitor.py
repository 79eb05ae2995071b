"""The runner (ContextChef's Janitor): decide whether to compact, run the strategy, gate it.

Pure apart from awaiting the summarizer it is given: it reads the budget, holds the
circuit breaker's verdict, runs the strategy, and returns what to send plus the
compaction to land (the caller writes it). A failed compaction leaves the history
unchanged; the request still goes out if it fits the hard window.

Circuit breaker: after `BREAKER_LIMIT` consecutive failures on a session, compaction
is skipped for `BREAKER_COOLDOWN_S`; then one attempt is allowed (half-open), and a
success closes it. `context-proxy sessions reset-breaker` closes it at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from proxy.context.budget import Budget, effective_tokens
from proxy.context.compose import History
from proxy.context.strategies import (
    CompactionInput,
    CompactionResult,
    Strategy,
    StrategyError,
    Summarizer,
    is_background,
)
from proxy.types import JSONObject

BREAKER_LIMIT = 3
BREAKER_COOLDOWN_S = 300.0


@dataclass(frozen=True)
class Breaker:
    failures: int = 0
    last_failure: float = 0.0

    @classmethod
    def parse(cls, raw: str) -> Breaker:
        count, _, at = raw.partition(":")
        return cls(int(count or 0), float(at or 0))

    def is_open(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.failures >= BREAKER_LIMIT and now - self.last_failure < BREAKER_COOLDOWN_S

    def failed(self, now: float | None = None) -> str:
        return f"{self.failures + 1}:{time.time() if now is None else now}"


@dataclass(frozen=True)
class Fitted:
    history: History
    tokens: int
    """Local count of the history that will be sent, without the new input."""
    result: CompactionResult | None = None
    failure: str | None = None
    deferred: bool = False
    skipped: str | None = None


async def fit(
    history: History,
    *,
    new_tokens: int,
    budget: Budget,
    strategy: Strategy,
    summarizer: Summarizer,
    archive_uri: str,
    count_text: Callable[[str], int],
    breaker: Breaker,
    usage: JSONObject | None,
    preference: str,
) -> Fitted:
    local = history.total + new_tokens
    size = effective_tokens(local, usage, window_id=history.window.current, preference=preference)
    if not strategy.due(history, budget, size):
        budget.require_fit(local)
        return Fitted(history, history.total)
    if breaker.is_open():
        budget.require_fit(local)
        return Fitted(history, history.total, skipped="circuit breaker open")
    if is_background(strategy) and budget.fits(size):
        return Fitted(history, history.total, deferred=True)
    data = CompactionInput(history, budget, new_tokens, summarizer, archive_uri, count_text)
    try:
        result = await strategy.compact(data)
    except StrategyError as exc:
        budget.require_fit(local)
        return Fitted(history, history.total, failure=str(exc))
    if not result.changed:
        budget.require_fit(local)
        return Fitted(history, history.total, skipped=result.reason)
    compacted = result.history
    budget.require_fit(compacted.total + new_tokens)
    return Fitted(compacted, compacted.total, result=result)

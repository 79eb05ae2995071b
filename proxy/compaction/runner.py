"""The runner (ContextChef's Janitor): decide whether to compact, run the strategy, gate it.

Pure apart from awaiting the summarizer it is given: it reads the budget, holds the
circuit breaker's verdict, runs the strategy, and returns what to send plus the
compaction to land (the caller writes it, see `landing.py`). A failed compaction
leaves the history unchanged; the request still goes out if it fits the hard window
(else `ContextTooLarge`). A server-managed strategy (`server(x)`) is never run and no
window is checked: the upstream owns the context. A `before_overflow` hook, when
configured, may veto a compaction about to run or replace the history for this request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from proxy.compaction.breaker import Breaker
from proxy.compaction.hooks import BeforeOverflow
from proxy.compaction.strategies import (
    CompactionInput,
    CompactionResult,
    Strategy,
    StrategyError,
    Summarizer,
    is_background,
    server_params,
)
from proxy.context.budget import Budget, effective_tokens
from proxy.context.compose import History
from proxy.types import JSONObject

VETOED = "vetoed by context.hooks.before_overflow"
REPLACED = "history replaced by context.hooks.before_overflow"


@dataclass(frozen=True)
class Fitted:
    history: History
    tokens: int
    """Local count of the history that will be sent, without the new input."""
    result: CompactionResult | None = None
    failure: str | None = None
    deferred: bool = False
    skipped: str | None = None
    seconds: float = 0.0
    """How long the strategy ran (0 when it did not)."""
    contended: bool = False
    """Compaction was due but the claim was refused: another request holds it, or the
    window this request loaded is no longer the stored one (its view is stale)."""
    forced: bool = False
    """The model asked for this compaction (`new_context`); the budget did not."""


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
    claim: Callable[[], Awaitable[bool]] | None = None,
    before: BeforeOverflow | None = None,
    forced: bool = False,
) -> Fitted:
    """What to send for one request, compacting first if the strategy says so.

    A server-managed strategy is never run and no window is checked. `before` (the
    `before_overflow` hook) may veto a compaction that is due or replace the history for
    this request. `claim` is asked just before a strategy runs: False means another
    request (on this replica or another) is compacting the session, or has landed a
    compaction since `history` was loaded, and nothing runs (`contended`): the caller
    waits for the claim, reloads and fits the history that results.

    `forced`: the model asked for a new context; the strategy runs whatever the budget
    says (inline, even a background one), unless the breaker is open, the hook vetoes it,
    the strategy is server-managed or the window holds a single unit."""
    if server_params(strategy) is not None:
        skipped = "forced by new_context, but the strategy is server-managed" if forced else None
        return Fitted(history, history.total, skipped=skipped, forced=forced)
    local = history.total + new_tokens
    size = effective_tokens(local, usage, window_id=history.window.current, preference=preference)
    if not forced and not strategy.due(history, budget, size):
        budget.require_fit(local)
        return Fitted(history, history.total)
    if breaker.is_open():
        budget.require_fit(local)
        return Fitted(history, history.total, skipped="circuit breaker open", forced=forced)
    if forced and len(history.units) < 2:
        budget.require_fit(local)
        reason = "forced by new_context, but the window holds one turn only: nothing to compact"
        return Fitted(history, history.total, skipped=reason, forced=True)
    if not forced and is_background(strategy) and budget.fits(size):
        return Fitted(history, history.total, deferred=True)
    verdict = True if before is None else await before(history, budget, size)
    if verdict is False:
        budget.require_fit(local)
        return Fitted(history, history.total, skipped=VETOED, forced=forced)
    if isinstance(verdict, History):
        budget.require_fit(verdict.total + new_tokens)
        return Fitted(verdict, verdict.total, skipped=REPLACED, forced=forced)
    if claim is not None and not await claim():
        return Fitted(history, history.total, contended=True, forced=forced)
    data = CompactionInput(history, budget, new_tokens, summarizer, archive_uri, count_text, forced)
    started = time.perf_counter()
    try:
        result = await strategy.compact(data)
    except StrategyError as exc:
        budget.require_fit(local)
        failure = str(exc)
        return Fitted(history, history.total, failure=failure, seconds=time.perf_counter() - started, forced=forced)
    seconds = time.perf_counter() - started
    if not result.changed:
        budget.require_fit(local)
        return Fitted(history, history.total, skipped=result.reason, seconds=seconds, forced=forced)
    compacted = result.history
    budget.require_fit(compacted.total + new_tokens)
    return Fitted(compacted, compacted.total, result=result, seconds=seconds, forced=forced)

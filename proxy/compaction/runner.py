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
from typing import Literal

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
from proxy.types import JSONObject, frozen

VETOED = "vetoed by context.hooks.before_overflow"
REPLACED = "history replaced by context.hooks.before_overflow"


Fit = Literal["none", "compacted", "failed", "deferred", "skipped", "contended"]
"""What fitting did: nothing was due; a compaction ran and changed the history (`result`);
it failed (`reason`); it is left to a background job; it was due but not run (`reason`);
it was due but another request holds the session's claim, or landed one since this request
loaded the session (its view is stale)."""


@frozen
class Fitted:
    history: History
    tokens: int
    """Local count of the history that will be sent, without the new input."""
    what: Fit = "none"
    reason: str | None = None
    """Why it failed or was skipped."""
    result: CompactionResult | None = None
    """The compaction, when `what` is `compacted`."""
    seconds: float = 0.0
    """How long the strategy ran (0 when it did not)."""
    forced: bool = False
    """The model asked for this compaction (`new_context`); the budget did not."""


@frozen
class Overflow:
    """How a session's history is compacted when it must be: the strategy and what it works
    with, the state it reads (breaker, fed-back usage), and the gates around it.

    `claim` is asked just before a strategy runs: False means another request (on this
    replica or another) is compacting the session, or has landed a compaction since the
    history was loaded, and nothing runs (`contended`). `before` is the `before_overflow`
    hook. `forced`: the model asked for a new context."""

    strategy: Strategy
    summarizer: Summarizer
    count_text: Callable[[str], int]
    breaker: Breaker
    usage: JSONObject | None
    preference: str
    claim: Callable[[], Awaitable[bool]] | None = None
    before: BeforeOverflow | None = None
    forced: bool = False


async def fit(history: History, *, new_tokens: int, budget: Budget, archive_uri: str, overflow: Overflow) -> Fitted:
    """What to send for one request, compacting first if the strategy says so.

    A server-managed strategy is never run and no window is checked. `before` (the
    `before_overflow` hook) may veto a compaction that is due or replace the history for
    this request. A `contended` fit runs nothing: the caller waits for the claim, reloads
    and fits the history that results.

    `forced`: the model asked for a new context; the strategy runs whatever the budget
    says (inline, even a background one), unless the breaker is open, the hook vetoes it,
    the strategy is server-managed or the window holds a single unit."""
    o = overflow
    strategy, forced = o.strategy, o.forced
    if server_params(strategy) is not None:
        skipped = "forced by new_context, but the strategy is server-managed" if forced else None
        return Fitted(history, history.total, "skipped" if skipped else "none", skipped, forced=forced)
    local = history.total + new_tokens
    size = effective_tokens(local, o.usage, window_id=history.window.current, preference=o.preference)
    if not forced and not strategy.due(history, budget, size):
        budget.require_fit(local)
        return Fitted(history, history.total)
    if o.breaker.is_open():
        budget.require_fit(local)
        return Fitted(history, history.total, "skipped", "circuit breaker open", forced=forced)
    if forced and len(history.units) < 2:
        budget.require_fit(local)
        reason = "forced by new_context, but the window holds one turn only: nothing to compact"
        return Fitted(history, history.total, "skipped", reason, forced=True)
    if not forced and is_background(strategy) and budget.fits(size):
        return Fitted(history, history.total, "deferred")
    verdict = True if o.before is None else await o.before(history, budget, size)
    if verdict is False:
        budget.require_fit(local)
        return Fitted(history, history.total, "skipped", VETOED, forced=forced)
    if isinstance(verdict, History):
        budget.require_fit(verdict.total + new_tokens)
        return Fitted(verdict, verdict.total, "skipped", REPLACED, forced=forced)
    if o.claim is not None and not await o.claim():
        return Fitted(history, history.total, "contended", forced=forced)
    data = CompactionInput(history, budget, new_tokens, o.summarizer, archive_uri, o.count_text, forced)
    started = time.perf_counter()
    try:
        result = await strategy.compact(data)
    except StrategyError as exc:
        budget.require_fit(local)
        seconds = time.perf_counter() - started
        return Fitted(history, history.total, "failed", str(exc), seconds=seconds, forced=forced)
    seconds = time.perf_counter() - started
    if not result.changed:
        budget.require_fit(local)
        return Fitted(history, history.total, "skipped", result.reason, seconds=seconds, forced=forced)
    compacted = result.history
    budget.require_fit(compacted.total + new_tokens)
    return Fitted(compacted, compacted.total, "compacted", result=result, seconds=seconds, forced=forced)

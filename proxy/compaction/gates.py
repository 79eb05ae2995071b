"""Quality gates: a bad summary never replaces good history.

Each gate raises `StrategyError` with the reason; the runner counts it towards the
circuit breaker and leaves the history unchanged.
"""

from __future__ import annotations

from proxy.compaction.prompts import span_chars
from proxy.compaction.strategies.base import StrategyError, Validator
from proxy.plugins import call, import_callable
from proxy.types import Message

SHRINK_GUARD_MIN_CHARS = 2000


def check_summary(summary: str, evicted: list[Message], *, min_shrink_ratio: float, carried: str | None = None) -> None:
    """Refuse an empty summary, and one that does not shrink what it was made from (the
    evicted span plus the summary or anchor it was folded into) by `min_shrink_ratio`."""
    if not summary.strip():
        raise StrategyError("the compression model returned an empty summary")
    span = span_chars(evicted) + len(carried or "")
    if min_shrink_ratio > 0 and span >= SHRINK_GUARD_MIN_CHARS and len(summary) > span * (1 - min_shrink_ratio):
        raise StrategyError(
            f"shrink guard: the summary ({len(summary)} chars) does not shrink the span ({span} chars) "
            f"by at least {min_shrink_ratio:.0%}"
        )


async def run_validator(validator: Validator | None, summary: str, evicted: list[Message], kept: list[Message]) -> None:
    if validator is None:
        return
    try:
        accepted = await validator(summary, evicted, kept)
    except Exception as exc:  # a user-supplied callable may raise anything
        raise StrategyError(f"the validator raised {exc.__class__.__name__}: {exc}") from exc
    if not accepted:
        raise StrategyError("the validator rejected the summary")


def load_validator(path: str | None) -> Validator | None:
    """`package.module:function` (or dotted) -> an async validator; sync callables are wrapped."""
    if not path:
        return None
    fn = import_callable(path, "context.validator")

    async def validator(summary: str, evicted: list[Message], kept: list[Message]) -> bool:
        return bool(await call(fn, summary, evicted, kept))

    return validator

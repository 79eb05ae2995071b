"""`turns` (june's summaryContext): counts completed turns, not tokens.

Up to `compact_after` turns it is `full`. Past that, the oldest turns are replaced by
one summary message beginning "Summary of the earlier conversation:", and the recent
ones are sent verbatim. The boundary moves in steps of `compact_after - keep_recent`
turns, so one summary serves several turns, and the same count always gives the
same boundary.
"""

from __future__ import annotations

from proxy.context.budget import Budget
from proxy.context.compose import History
from proxy.context.strategies.base import CompactionInput, CompactionResult, Validator
from proxy.context.strategies.prompts import TURNS_PREFIX, summarize_request
from proxy.context.strategies.summarizing import previous_summary, summarize_span


def boundary_for(total: int, *, keep_recent: int, compact_after: int) -> int:
    """How many turns (units) of `total` belong in the summary."""
    if total <= compact_after:
        return 0
    step = compact_after - keep_recent
    return ((total - keep_recent) // step) * step


class Turns:
    name = "turns"

    def __init__(
        self, *, keep_recent: int, compact_after: int, min_shrink_ratio: float, validator: Validator | None
    ) -> None:
        self.keep_recent = keep_recent
        self.compact_after = compact_after
        self.min_shrink_ratio = min_shrink_ratio
        self.validator = validator

    def _cut(self, history: History) -> int:
        summarized = history.window.evicted_turns
        total = summarized + len(history.units)
        return boundary_for(total, keep_recent=self.keep_recent, compact_after=self.compact_after) - summarized

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return self._cut(history) > 0

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(
            data, strategy=self.name, cut=self._cut(data.history), build_request=summarize_request,
            carried=previous_summary(data), prefix=TURNS_PREFIX,
            min_shrink_ratio=self.min_shrink_ratio, validator=self.validator,
        )  # fmt: skip

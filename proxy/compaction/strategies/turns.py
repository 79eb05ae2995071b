"""`turns` (june's summaryContext): counts conversation turns, not tokens.

A conversation turn is a unit: a user message and everything that answers it (with
tool calls, several journal turns). Counting units, on the window (`evicted_units`)
and in the history alike, keeps the arithmetic in one measure: the same turns always
give the same boundary, tool calls or not.

Up to `compact_after` turns it is `full`. Past that, the oldest turns are replaced by
one summary message beginning "Summary of the earlier conversation:", and the recent
ones are sent verbatim. The boundary moves in steps of `compact_after - keep_recent`
turns, so one summary serves several turns.
"""

from __future__ import annotations

from proxy.compaction.prompts import DEFAULT_PROMPT, TURNS_PREFIX, CompressionPrompt, summarize_request
from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Validator
from proxy.compaction.strategies.split import forced_cut
from proxy.compaction.strategies.summarizing import Style, previous_summary, summarize_span
from proxy.context.budget import Budget
from proxy.context.compose import History


def boundary_for(total: int, *, keep_recent: int, compact_after: int) -> int:
    """How many turns (units) of `total` belong in the summary."""
    if total <= compact_after:
        return 0
    step = compact_after - keep_recent
    return ((total - keep_recent) // step) * step


_STYLE = Style(summarize_request, TURNS_PREFIX)


class Turns:
    name = "turns"

    def __init__(
        self,
        *,
        keep_recent: int,
        compact_after: int,
        min_shrink_ratio: float,
        validator: Validator | None,
        prompt: CompressionPrompt = DEFAULT_PROMPT,
    ) -> None:
        self.keep_recent = keep_recent
        self.compact_after = compact_after
        self.min_shrink_ratio = min_shrink_ratio
        self.validator = validator
        self.prompt = prompt

    def _cut(self, history: History) -> int:
        summarized = history.window.evicted_units
        total = summarized + len(history.units)
        return boundary_for(total, keep_recent=self.keep_recent, compact_after=self.compact_after) - summarized

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return self._cut(history) > 0

    async def compact(self, data: CompactionInput) -> CompactionResult:
        cut = forced_cut(data.history.units) if data.forced else self._cut(data.history)
        return await summarize_span(data, self, cut=cut, carried=previous_summary(data), style=_STYLE)

"""`summarize` (ContextChef): old turns leave, one model-written summary stands in.

The split keeps the newest turns that fit `trigger x preserve_ratio` (split `ratio`,
net of the pinned messages and the new input) or the last `preserve_recent_messages`
turns (split `recent-turns`). The previous summary is folded into the new one.
"""

from __future__ import annotations

from proxy.context.budget import Budget
from proxy.context.compose import History
from proxy.context.strategies.base import CompactionInput, CompactionResult, Validator
from proxy.context.strategies.prompts import SUMMARY_PREFIX, summarize_request
from proxy.context.strategies.split import split_ratio, split_recent
from proxy.context.strategies.summarizing import previous_summary, summarize_span


def fixed_tokens(data: CompactionInput) -> int:
    w = data.history.window
    return sum(w.leading_tokens) + sum(w.pinned_tokens) + data.new_tokens


class Summarize:
    name = "summarize"

    def __init__(
        self,
        *,
        split: str,
        preserve_ratio: float,
        preserve_recent: int,
        min_shrink_ratio: float,
        validator: Validator | None,
    ) -> None:
        self.split = split
        self.preserve_ratio = preserve_ratio
        self.preserve_recent = preserve_recent
        self.min_shrink_ratio = min_shrink_ratio
        self.validator = validator

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return budget.over_trigger(tokens)

    def cut(self, data: CompactionInput) -> int:
        units = data.history.units
        if self.split == "recent-turns":
            return split_recent(units, self.preserve_recent)
        keep_budget = int(data.budget.trigger * self.preserve_ratio) - fixed_tokens(data)
        return split_ratio(units, keep_budget)

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(
            data, strategy=self.name, cut=self.cut(data), build_request=summarize_request,
            carried=previous_summary(data), prefix=SUMMARY_PREFIX,
            min_shrink_ratio=self.min_shrink_ratio, validator=self.validator,
        )  # fmt: skip

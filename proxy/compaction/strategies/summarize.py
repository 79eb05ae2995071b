"""`summarize` (ContextChef's default): the oldest units leave for one summary message.

The cut keeps the newest units that fit `preserve_ratio` of the trigger (after the
pinned messages and the new input) or the last `preserve_recent_messages` units (split
`recent-turns`). The previous summary is folded into the new one.
"""

from __future__ import annotations

from proxy.compaction.prompts import DEFAULT_PROMPT, SUMMARY_PREFIX, CompressionPrompt, summarize_request
from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Validator
from proxy.compaction.strategies.split import SpanCut
from proxy.compaction.strategies.summarizing import previous_summary, summarize_span
from proxy.context.budget import Budget
from proxy.context.compose import History


class Summarize:
    name = "summarize"

    def __init__(
        self,
        *,
        cut: SpanCut,
        min_shrink_ratio: float,
        validator: Validator | None,
        prompt: CompressionPrompt = DEFAULT_PROMPT,
    ) -> None:
        self.cut = cut
        self.min_shrink_ratio = min_shrink_ratio
        self.validator = validator
        self.prompt = prompt

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return budget.over_trigger(tokens)

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(
            data, strategy=self.name, cut=self.cut(data), build_request=summarize_request, prompt=self.prompt,
            carried=previous_summary(data), prefix=SUMMARY_PREFIX,
            min_shrink_ratio=self.min_shrink_ratio, validator=self.validator,
        )  # fmt: skip

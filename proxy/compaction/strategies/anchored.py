"""`anchored`: a persistent anchor document absorbs each newly evicted span.

Only the span leaving the window now is sent, together with the current anchor; the
model returns the merged anchor. Cheaper than re-summarizing, and it drifts less. It
cuts where `summarize` does. The shrink guard applies as for every summary: the merged
anchor must be smaller than what it was made from (the old anchor plus the span) by
`min_shrink_ratio`.
"""

from __future__ import annotations

from proxy.compaction.prompts import ANCHOR_PREFIX, DEFAULT_PROMPT, CompressionPrompt, anchor_request
from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Validator
from proxy.compaction.strategies.split import SpanCut
from proxy.compaction.strategies.summarizing import summarize_span
from proxy.context.budget import Budget
from proxy.context.compose import History


class Anchored:
    name = "anchored"

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
            data, strategy=self.name, cut=self.cut(data), build_request=anchor_request, prompt=self.prompt,
            carried=data.history.window.anchor, prefix=ANCHOR_PREFIX,
            min_shrink_ratio=self.min_shrink_ratio, validator=self.validator, anchored=True,
        )  # fmt: skip

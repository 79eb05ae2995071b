"""`anchored`: a persistent anchor document absorbs each newly evicted span.

Only the span leaving the window now is sent, together with the current anchor; the
model returns the merged anchor. Cheaper than re-summarizing, and it drifts less. It
cuts where `summarize` does. The shrink guard applies as for every summary: the merged
anchor must be smaller than what it was made from (the old anchor plus the span) by
`min_shrink_ratio`.
"""

from __future__ import annotations

from proxy.compaction.prompts import ANCHOR_PREFIX, anchor_request
from proxy.compaction.strategies.base import CompactionInput, CompactionResult
from proxy.compaction.strategies.summarizing import CutSummarizer, summarize_span


class Anchored(CutSummarizer):
    name = "anchored"

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(
            data, strategy=self.name, cut=self.cut(data), build_request=anchor_request, prompt=self.prompt,
            carried=data.history.window.anchor, prefix=ANCHOR_PREFIX,
            min_shrink_ratio=self.min_shrink_ratio, validator=self.validator, anchored=True,
        )  # fmt: skip

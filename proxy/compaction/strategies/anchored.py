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
from proxy.compaction.strategies.summarizing import CutSummarizer, Style, summarize_span

_STYLE = Style(anchor_request, ANCHOR_PREFIX, anchored=True)


class Anchored(CutSummarizer):
    name = "anchored"

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(data, self, cut=self.cut(data), carried=data.history.window.anchor, style=_STYLE)

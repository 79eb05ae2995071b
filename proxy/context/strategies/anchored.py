"""`anchored`: a persistent anchor document absorbs each newly evicted span.

Only the span leaving the window now is sent, together with the current anchor; the
model returns the merged anchor. Cheaper than re-summarizing, and it drifts less.
"""

from __future__ import annotations

from proxy.context.strategies.base import CompactionInput, CompactionResult
from proxy.context.strategies.prompts import ANCHOR_PREFIX, anchor_request
from proxy.context.strategies.summarize import Summarize
from proxy.context.strategies.summarizing import summarize_span


class Anchored(Summarize):
    name = "anchored"

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(
            data, strategy=self.name, cut=self.cut(data), build_request=anchor_request,
            carried=data.history.window.anchor, prefix=ANCHOR_PREFIX,
            min_shrink_ratio=0.0, validator=self.validator, anchored=True,
        )  # fmt: skip

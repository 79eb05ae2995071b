"""`summarize` (ContextChef's default): the oldest units leave for one summary message.

The cut keeps the newest units that fit `preserve_ratio` of the trigger (after the
pinned messages and the new input) or the last `preserve_recent_messages` units (split
`recent-turns`). The previous summary is folded into the new one.
"""

from __future__ import annotations

from proxy.compaction.prompts import SUMMARY_PREFIX, summarize_request
from proxy.compaction.strategies.base import CompactionInput, CompactionResult
from proxy.compaction.strategies.summarizing import CutSummarizer, Style, previous_summary, summarize_span

_STYLE = Style(summarize_request, SUMMARY_PREFIX)


class Summarize(CutSummarizer):
    name = "summarize"

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await summarize_span(data, self, cut=self.cut(data), carried=previous_summary(data), style=_STYLE)

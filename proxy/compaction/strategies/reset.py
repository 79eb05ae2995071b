"""`reset`: everything but the pinned messages leaves, replaced by a notice. No model call.

The evicted span is archived like any other, and the notice cites it.
"""

from __future__ import annotations

from proxy.compaction.strategies.base import CompactionInput, CompactionResult, lift_pinned
from proxy.context.budget import Budget
from proxy.context.compose import History


class Reset:
    name = "reset"

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return budget.over_trigger(tokens)

    async def compact(self, data: CompactionInput) -> CompactionResult:
        units = data.history.units
        if not units:
            return CompactionResult.unchanged(self.name, data, "nothing to evict")
        window = lift_pinned(data.history.window, units)
        notice = (
            f"[The earlier conversation (window {window.current}) was cleared to fit the context window. "
            f"Its full text is archived at {data.archive_uri}.]"
        )
        message = {"role": "user", "content": notice}
        window = window.advance(
            boundary=units[-1].last_seq,
            summary=message,
            summary_tokens=data.count_text(notice),
            anchor=None,
            evicted_units=window.evicted_units + len(units),
        )
        return CompactionResult(self.name, window, (), units, changed=True)

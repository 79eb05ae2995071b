"""`background(x)`: run strategy x after the answer instead of before the request.

The over-budget request goes as it is while it fits the hard window; the runner then
compacts off the hot path, one job per session across replicas, and the result
lands only if the window it was computed from is still the session's window and its
boundary turn is still on the session's path (checked when it is written).
"""

from __future__ import annotations

from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Strategy
from proxy.context.budget import Budget
from proxy.context.compose import History


class Background:
    def __init__(self, inner: Strategy) -> None:
        self.inner = inner
        self.name = f"background({inner.name})"

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return self.inner.due(history, budget, tokens)

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return await self.inner.compact(data)

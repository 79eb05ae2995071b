"""`full`: no compaction; the whole history is sent every time."""

from __future__ import annotations

from proxy.compaction.strategies.base import CompactionInput, CompactionResult
from proxy.context.budget import Budget
from proxy.context.compose import History


class Full:
    name = "full"

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return False

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return CompactionResult.unchanged(self.name, data, "strategy full never compacts")

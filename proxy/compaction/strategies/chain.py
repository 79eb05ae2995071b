"""`chain` (a list in config): a fallback sequence of strategies.

Each strategy runs on the original history; the chain moves on when one changed
nothing, failed, or left the context above the trigger, and stops at the first that
brings it under. When none does, the smallest changed result is returned (it may
still fit the hard window); when all failed, the last failure is raised.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Strategy, StrategyError
from proxy.context.budget import Budget
from proxy.context.compose import History


class Chain:
    def __init__(self, strategies: Sequence[Strategy]) -> None:
        self.strategies = tuple(strategies)
        self.name = "chain(" + ",".join(s.name for s in self.strategies) + ")"

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return any(s.due(history, budget, tokens) for s in self.strategies)

    async def compact(self, data: CompactionInput) -> CompactionResult:
        best: CompactionResult | None = None
        failure: StrategyError | None = None
        for strategy in self.strategies:
            try:
                result = await strategy.compact(data)
            except StrategyError as exc:
                failure = exc
                continue
            if not result.changed:
                continue
            size = result.history.total + data.new_tokens
            if not data.budget.over_trigger(size):
                return result
            if best is None or size < best.history.total + data.new_tokens:
                best = result
        if best is not None:
            return best
        if failure is not None:
            raise failure
        return CompactionResult.unchanged(self.name, data, "no strategy in the chain changed anything")

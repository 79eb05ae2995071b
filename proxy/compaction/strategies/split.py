"""Where a summarizing strategy cuts: always between units, never inside one."""

from __future__ import annotations

from proxy.compaction.strategies.base import CompactionInput
from proxy.context.compose import Unit
from proxy.types import frozen

SPLITS = ("ratio", "recent-turns")


def split_ratio(units: tuple[Unit, ...], keep_budget: int) -> int:
    """Index of the first kept unit: the newest units whose tokens fit `keep_budget`."""
    total = 0
    cut = len(units)
    for index in range(len(units) - 1, -1, -1):
        total += units[index].total
        if total > keep_budget:
            break
        cut = index
    return cut


def split_recent(units: tuple[Unit, ...], keep: int) -> int:
    """Index of the first kept unit: the last `keep` units, whatever they cost."""
    return max(0, len(units) - keep)


def forced_cut(units: tuple[Unit, ...]) -> int:
    """Index of the first kept unit of a forced compaction: only the most recent stays."""
    return max(0, len(units) - 1)


def fixed_tokens(data: CompactionInput) -> int:
    """What stays whatever the cut: the leading block, pinned messages, the new input."""
    w = data.history.window
    return sum(w.leading_tokens) + sum(w.pinned_tokens) + data.new_tokens


@frozen
class SpanCut:
    """`context.split`: keep the newest units that fit `preserve_ratio` of the trigger
    (`ratio`), or the last `preserve_recent` units (`recent-turns`)."""

    split: str
    preserve_ratio: float
    preserve_recent: int

    def __call__(self, data: CompactionInput) -> int:
        units = data.history.units
        if data.forced:
            return forced_cut(units)
        if self.split == "recent-turns":
            return split_recent(units, self.preserve_recent)
        keep_budget = int(data.budget.trigger * self.preserve_ratio) - fixed_tokens(data)
        return split_ratio(units, keep_budget)

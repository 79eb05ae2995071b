"""Where a summarizing strategy cuts: always between units, never inside one."""

from __future__ import annotations

from proxy.context.compose import Unit


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

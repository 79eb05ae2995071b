"""turns (june's summaryContext): boundaries by count, in steps."""

from __future__ import annotations

from proxy.context.compose import build_history
from proxy.context.strategies import Turns
from proxy.context.strategies.turns import boundary_for
from tests.context.factories import FakeSummarizer, budget, compaction_input, history, turn


def test_boundary_moves_in_steps() -> None:
    boundaries = [boundary_for(n, keep_recent=8, compact_after=20) for n in range(18, 46)]
    assert boundaries[:3] == [0, 0, 0]  # 18, 19, 20 turns
    assert set(boundaries[3:]) == {12, 24, 36}
    assert boundary_for(32, keep_recent=8, compact_after=20) == 24


async def test_turns_strategy_summarizes_with_the_june_marker() -> None:
    strategy = Turns(keep_recent=2, compact_after=5, min_shrink_ratio=0.5, validator=None)
    h = history(6)
    assert strategy.due(h, budget(), 0)
    result = await strategy.compact(compaction_input(h, budget(), FakeSummarizer()))
    assert len(result.evicted) == 3 and len(result.kept) == 3
    assert result.window.summary["content"].startswith("Summary of the earlier conversation:")  # type: ignore[index]
    assert result.window.evicted_turns == 3
    later = build_history(result.window, [turn(i, f"u{i}") for i in range(3, 7)])
    assert not strategy.due(later, budget(), 0), "one summary serves several turns"
    assert not strategy.due(history(5), budget(), 0)

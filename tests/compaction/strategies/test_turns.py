"""turns (june's summaryContext): boundaries by count, in steps."""

from __future__ import annotations

from proxy.compaction.strategies import Turns
from proxy.compaction.strategies.turns import boundary_for
from proxy.context.compose import History, build_history
from proxy.context.window import Window
from proxy.sessions import Turn
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
    assert result.window.evicted_units == 3
    later = build_history(result.window, [turn(i, f"u{i}") for i in range(3, 7)])
    assert not strategy.due(later, budget(), 0), "one summary serves several turns"
    assert not strategy.due(history(5), budget(), 0)


def _tool_exchange(seq: int, n: int) -> list[Turn]:
    """One conversation turn in two journal turns: a tool call, then its result and the answer."""
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": f"c{n}", "content": "r"}
    return [turn(seq, f"u{n}", call), turn(seq + 1, result, f"a{n}")]


def _tool_history(units: int, window: Window | None = None, first_seq: int = 0) -> History:
    turns = [t for n in range(units) for t in _tool_exchange(first_seq + 2 * n, first_seq // 2 + n)]
    return build_history(window or Window(), turns)


async def test_units_with_several_turns_keep_the_boundary_in_steps() -> None:
    """Each unit holds two journal turns: the boundary still counts conversation turns."""
    strategy = Turns(keep_recent=2, compact_after=5, min_shrink_ratio=0.5, validator=None)
    h = _tool_history(6)
    assert len(h.units) == 6 and all(len(u.turns) == 2 for u in h.units)
    result = await strategy.compact(compaction_input(h, budget(), FakeSummarizer()))
    assert len(result.evicted) == 3 and result.window.evicted_units == 3
    for total in range(4, 9):  # the conversation goes on: 3 kept + 1..5 new units
        later = build_history(result.window, [t for u in result.kept for t in u.turns] + [
            t for n in range(6, 6 + total - 3) for t in _tool_exchange(2 * n, n)])  # fmt: skip
        assert len(later.units) == total
        expected = boundary_for(3 + total, keep_recent=2, compact_after=5) - 3
        assert strategy.due(later, budget(), 0) == (expected > 0), total

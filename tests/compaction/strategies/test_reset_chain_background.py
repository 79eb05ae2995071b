"""reset, chain order and fallbacks, background wrapping."""

from __future__ import annotations

import pytest

from proxy.compaction.strategies import Background, Chain, Full, Reset, StrategyError, Summarize
from proxy.compaction.strategies.base import CompactionInput, CompactionResult
from tests.context.factories import FakeSummarizer, budget, compaction_input, history, summarizing


async def test_reset_keeps_only_pinned_and_leaves_a_notice() -> None:
    result = await Reset().compact(compaction_input(history(5), budget(), FakeSummarizer()))
    contents = [m["content"] for m in result.history.messages()]
    assert contents[0] == "sys" and "archived at context://archive/win_1" in contents[1] and len(contents) == 2


class Recorder:
    def __init__(self, name: str, outcome: str) -> None:
        self.name, self.outcome, self.ran = name, outcome, False

    def due(self, *args: object) -> bool:
        return True

    async def compact(self, data: CompactionInput) -> CompactionResult:
        self.ran = True
        if self.outcome == "fail":
            raise StrategyError(self.name + " failed")
        if self.outcome == "nothing":
            return CompactionResult.unchanged(self.name, data, "nothing")
        return await Reset().compact(data)


async def test_chain_moves_on_when_one_fails_or_changes_nothing() -> None:
    first, second, third = Recorder("a", "fail"), Recorder("b", "nothing"), Recorder("c", "reset")
    result = await Chain([first, second, third]).compact(compaction_input(history(5), budget(), FakeSummarizer()))
    assert first.ran and second.ran and third.ran and result.changed


async def test_chain_stops_at_the_first_that_fits() -> None:
    summarize = summarizing(Summarize)
    after = Recorder("after", "reset")
    result = await Chain([summarize, after]).compact(compaction_input(history(10), budget(), FakeSummarizer()))
    assert result.strategy == "summarize" and not after.ran


async def test_chain_of_failures_raises_the_last() -> None:
    with pytest.raises(StrategyError, match="b failed"):
        await Chain([Recorder("a", "fail"), Recorder("b", "fail")]).compact(
            compaction_input(history(3), budget(), FakeSummarizer())
        )


async def test_full_never_compacts_and_background_delegates() -> None:
    data = compaction_input(history(3), budget(), FakeSummarizer())
    assert not Full().due(data.history, data.budget, 10**9)
    assert not (await Full().compact(data)).changed
    wrapped = Background(Reset())
    assert wrapped.name == "background(reset)" and (await wrapped.compact(data)).changed

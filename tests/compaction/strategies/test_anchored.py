"""anchored: only the newly evicted span goes to the model, with the current anchor."""

from __future__ import annotations

import pytest

from proxy.compaction.strategies import Anchored, StrategyError
from proxy.context.compose import build_history
from proxy.context.window import Window
from tests.context.factories import FakeSummarizer, budget, compaction_input, summarizing, turn


async def test_only_the_new_span_is_sent_with_the_current_anchor() -> None:
    strategy = summarizing(Anchored, preserve_recent=2)
    window = Window(current="win_1", boundary=4, summary={"role": "user", "content": "ANCHOR v1"}, anchor="ANCHOR v1")
    h = build_history(window, [turn(i, f"u{i}") for i in range(5, 10)])
    summarizer = FakeSummarizer("<summary>ANCHOR v2</summary>")
    result = await strategy.compact(compaction_input(h, budget(), summarizer))
    sent = summarizer.calls[0][1]["content"]
    assert "ANCHOR v1" in sent and "[user]: u5" in sent and "[user]: u7" in sent
    assert "[user]: u8" not in sent and "[user]: u0" not in sent, "kept turns and older spans are not re-sent"
    assert result.window.anchor == "ANCHOR v2" and result.window.current == "win_2" and result.window.boundary == 7
    assert "ANCHOR v2" in result.window.summary["content"]  # type: ignore[index]


async def test_the_shrink_guard_weighs_the_merged_anchor_against_anchor_plus_span() -> None:
    strategy = summarizing(Anchored, preserve_recent=1)
    anchor = "A" * 3000
    window = Window(current="win_1", boundary=4, summary={"role": "user", "content": anchor}, anchor=anchor)
    h = build_history(window, [turn(i, "x" * 400) for i in range(5, 10)])
    grown = FakeSummarizer("<summary>" + "B" * 4000 + "</summary>")
    with pytest.raises(StrategyError, match="shrink guard"):
        await strategy.compact(compaction_input(h, budget(), grown))
    merged = FakeSummarizer("<summary>" + "B" * 2000 + "</summary>")
    result = await strategy.compact(compaction_input(h, budget(), merged))
    assert result.changed, "an anchor that absorbed a span yet shrank what it was made from lands"

"""Quality gates: shrink guard, empty summaries, validators."""

from __future__ import annotations

import pytest

from proxy.compaction.gates import check_summary, load_validator
from proxy.compaction.strategies import StrategyError, Summarize
from proxy.context.compose import build_history
from proxy.context.window import Window
from proxy.errors import ConfigError
from tests.context.factories import FakeSummarizer, budget, compaction_input, summarizing, turn


def long_history() -> object:
    return build_history(Window(), [turn(i, "x" * 400) for i in range(8)])


def test_shrink_guard_applies_to_large_spans_only() -> None:
    big = [{"role": "user", "content": "x" * 3000}]
    with pytest.raises(StrategyError, match="shrink guard"):
        check_summary("y" * 2000, big, min_shrink_ratio=0.5)
    check_summary("y" * 1000, big, min_shrink_ratio=0.5)
    check_summary("y" * 1500, [{"role": "user", "content": "x" * 1500}], min_shrink_ratio=0.5)
    check_summary("y" * 5000, big, min_shrink_ratio=0.0)


def test_empty_summary_is_refused() -> None:
    with pytest.raises(StrategyError, match="empty"):
        check_summary("  ", [], min_shrink_ratio=0.5)


def always_no(summary: str, evicted: list, kept: list) -> bool:  # type: ignore[type-arg]
    return False


async def test_validator_can_reject_and_history_is_unchanged() -> None:
    validator = load_validator("tests.compaction.strategies.test_gates:always_no")
    strategy = summarizing(Summarize, validator=validator)
    h = long_history()
    with pytest.raises(StrategyError, match="validator rejected"):
        await strategy.compact(compaction_input(h, budget(), FakeSummarizer()))  # type: ignore[arg-type]


async def test_summarizer_failure_is_a_strategy_error() -> None:
    strategy = summarizing(Summarize)
    with pytest.raises(StrategyError, match="summarizer down"):
        await strategy.compact(compaction_input(long_history(), budget(), FakeSummarizer(fail=True)))  # type: ignore[arg-type]


def test_bad_validator_path_is_reported() -> None:
    with pytest.raises(ConfigError, match="context.validator"):
        load_validator("no.such.module:fn")

"""Budget arithmetic and usage feedback."""

from __future__ import annotations

import pytest

from proxy.context.budget import ContextTooLarge, effective_tokens, make_budget


def test_trigger_and_reserve() -> None:
    budget = make_budget(context_window=1000, trigger_ratio=0.7, max_output_tokens=100, overhead=3)
    assert (budget.trigger, budget.reserve) == (700, 103)
    assert budget.fits(897) and not budget.fits(898)
    with pytest.raises(ContextTooLarge, match="1 tokens too many"):
        budget.require_fit(898)


def test_calibration_scales_limits_into_local_units() -> None:
    budget = make_budget(context_window=1000, trigger_ratio=0.5, max_output_tokens=0, overhead=0, calibration=1.25)
    assert (budget.context_window, budget.trigger) == (800, 400)


@pytest.mark.parametrize(
    ("preference", "expected"),
    [("max", 620), ("feed_first", 620), ("tokenizer_first", 500)],
)
def test_usage_preference(preference: str, expected: int) -> None:
    usage = {"prompt": 520, "local": 400, "window": "win_0"}
    assert effective_tokens(500, usage, window_id="win_0", preference=preference) == expected


def test_feedback_from_an_older_window_is_ignored() -> None:
    usage = {"prompt": 5000, "local": 400, "window": "win_0"}
    assert effective_tokens(500, usage, window_id="win_1", preference="max") == 500


def test_max_prefers_the_local_count_when_it_is_larger() -> None:
    usage = {"prompt": 300, "local": 400, "window": "win_0"}
    assert effective_tokens(500, usage, window_id="win_0", preference="max") == 500
    assert effective_tokens(500, usage, window_id="win_0", preference="feed_first") == 400

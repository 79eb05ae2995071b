"""`proxy/context/cost.py`: a usage priced, cached prompt tokens at the cached price."""

from __future__ import annotations

import pytest

from proxy.config import DEFAULT_PRICES, PriceSettings, settings_from_mapping
from proxy.context.cost import saved_cost, turn_costs, usage_cost
from proxy.errors import ConfigError

PRICE = PriceSettings(input=2.0, cached_input=0.5, output=8.0)


def test_cached_prompt_tokens_are_priced_as_cached() -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 600}}
    assert usage_cost(PRICE, usage) == pytest.approx((400 * 2.0 + 600 * 0.5 + 100 * 8.0) / 1e6)
    assert usage_cost(PRICE, {"prompt_tokens": 1000, "completion_tokens": 100}) == pytest.approx(
        (1000 * 2.0 + 800) / 1e6
    )


def test_no_cached_price_means_the_input_price_and_no_usage_means_no_cost() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 10}}
    assert usage_cost(PriceSettings(input=3.0, output=1.0), usage) == pytest.approx(30 / 1e6)
    assert usage_cost(PRICE, None) is None and usage_cost(None, usage) is None
    assert usage_cost(PRICE, {"prompt_tokens": 10}) is None, "a usage cut off before its completion count"


def test_saved_tokens_are_priced_at_the_input_price_and_may_be_negative() -> None:
    assert saved_cost(PRICE, 1_000_000) == 2.0 and saved_cost(PRICE, -500_000) == -1.0
    assert turn_costs(PRICE, {"prompt_tokens": 1, "completion_tokens": 1}, 10) == pytest.approx((10e-6, 20e-6))
    assert turn_costs(PRICE, None, 10) is None


def test_a_configured_price_replaces_the_default_and_a_bad_one_is_refused() -> None:
    settings = settings_from_mapping({"context": {"models": {"gpt-4o": {"price": {"input": 1, "output": 2}}}}})
    assert settings.context.price_for("gpt-4o") == PriceSettings(input=1.0, output=2.0)
    assert settings.context.price_for("gpt-4o-mini") == DEFAULT_PRICES["gpt-4o-mini"]
    assert settings.context.price_for("my-local-model") is None
    with pytest.raises(ConfigError, match=r"context\.models\.m\.price\.input: must be >= 0"):
        settings_from_mapping({"context": {"models": {"m": {"price": {"input": -1, "output": 2}}}}})
    with pytest.raises(ConfigError, match=r"context\.models\.m\.price\.output: required"):
        settings_from_mapping({"context": {"models": {"m": {"price": {"input": 1}}}}})

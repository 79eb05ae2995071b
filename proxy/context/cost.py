"""What tokens cost, by a model's price (`proxy/config/prices.py`); pure.

A turn's cost as sent is its answer's usage: uncached prompt tokens at the input price,
the prompt tokens the usage reports as cached (`prompt_tokens_details.cached_tokens`) at
the cached price, completion tokens at the output price. What composing saved is priced
at the input price: the tokens the client's request would have added (negative for a
delta client, whose history the proxy supplied). A summarizer call is priced by its own
usage and its own model. See `docs/savings.md` for what the figures leave out.
"""

from __future__ import annotations

from proxy.config.prices import PriceSettings
from proxy.types import JSONObject

PER_MILLION = 1_000_000


def usage_cost(price: PriceSettings | None, usage: JSONObject | None) -> float | None:
    """US dollars for one answer's `usage`; None without a price or a usage that counts both sides."""
    if price is None or not usage:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = min(cached, prompt) if isinstance(cached, int) and cached > 0 else 0
    return ((prompt - cached) * price.input + cached * price.cached + completion * price.output) / PER_MILLION


def saved_cost(price: PriceSettings | None, saved_tokens: int) -> float | None:
    """US dollars of the prompt tokens composing saved (negative: history supplied), at the input price."""
    return None if price is None else saved_tokens * price.input / PER_MILLION


def turn_costs(price: PriceSettings | None, usage: JSONObject | None, saved_tokens: int) -> tuple[float, float] | None:
    """(cost as sent, cost saved) of one turn, None when its usage or the price is unknown."""
    sent = usage_cost(price, usage)
    saved = saved_cost(price, saved_tokens)
    return None if sent is None or saved is None else (sent, saved)

"""Model prices: what `context.models.<m>.price` configures, and the defaults for a few models.

US dollars per million tokens: `input` (uncached prompt tokens), `cached_input` (prompt
tokens the upstream's usage reports as served from its prompt cache; the input price when
not given) and `output` (completion tokens). A configured price replaces the default; a
model with neither has no cost figures.

The defaults, checked 2026-12-02 (prices change: configure your own to be sure):
- OpenAI: the standard tier of the pricing page (developers.openai.com/api/docs/pricing),
  as 2026 write-ups quoting it agree (gpt-4o, gpt-4o-mini, gpt-4.1, gpt-4.1-mini).
- Anthropic: the model pricing table of platform.claude.com/docs/en/about-claude/pricing
  (base input, "cache hits and refreshes", output; cache writes are not priced apart).
"""

from __future__ import annotations

from proxy.config import checks
from proxy.types import frozen


@frozen
class PriceSettings:
    """`context.models.<m>.price`: US dollars per million tokens."""

    input: float = checks.checked(checks.non_negative)
    output: float = checks.checked(checks.non_negative)
    cached_input: float | None = checks.checked(checks.non_negative, None)

    @property
    def cached(self) -> float:
        """The price of a cached prompt token (the input price when none is set)."""
        return self.input if self.cached_input is None else self.cached_input


DEFAULT_PRICES: dict[str, PriceSettings] = {
    "gpt-4o": PriceSettings(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4o-mini": PriceSettings(input=0.15, cached_input=0.075, output=0.60),
    "gpt-4.1": PriceSettings(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4.1-mini": PriceSettings(input=0.40, cached_input=0.10, output=1.60),
    "claude-opus-4-5": PriceSettings(input=5.00, cached_input=0.50, output=25.00),
    "claude-opus-4-6": PriceSettings(input=5.00, cached_input=0.50, output=25.00),
    "claude-sonnet-4-5": PriceSettings(input=3.00, cached_input=0.30, output=15.00),
    "claude-sonnet-4-6": PriceSettings(input=3.00, cached_input=0.30, output=15.00),
    "claude-haiku-4-5": PriceSettings(input=1.00, cached_input=0.10, output=5.00),
}

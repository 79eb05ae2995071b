"""Every overflow strategy, listed once, and the registry that builds them from config.

`full`, `turns`, `summarize`, `anchored` and `reset` are policies; `chain` (a list in
config) and `background(x)` wrap others. `X-Context-Strategy` picks one per request
with the same syntax (comma-separated for a chain), or `off` for a pure pass-through.
"""

from __future__ import annotations

from proxy.compaction.gates import load_validator
from proxy.compaction.strategies.anchored import Anchored
from proxy.compaction.strategies.background import Background
from proxy.compaction.strategies.base import (
    CompactionInput,
    CompactionResult,
    Strategy,
    StrategyError,
    Summarizer,
    Summary,
)
from proxy.compaction.strategies.chain import Chain
from proxy.compaction.strategies.full import Full
from proxy.compaction.strategies.reset import Reset
from proxy.compaction.strategies.split import SpanCut
from proxy.compaction.strategies.summarize import Summarize
from proxy.compaction.strategies.turns import Turns
from proxy.config import STRATEGY_NAMES, ContextSettings, parse_strategy_spec

__all__ = [
    "Anchored",
    "Background",
    "Chain",
    "CompactionInput",
    "CompactionResult",
    "Full",
    "Reset",
    "Strategy",
    "StrategyError",
    "StrategyRegistry",
    "Summarize",
    "Summarizer",
    "Summary",
    "Turns",
    "UnknownStrategy",
]

OFF = "off"


class UnknownStrategy(ValueError):
    """A per-request strategy spec names no strategy (the HTTP edge answers 400)."""


_MAX_SPECS = 256


class StrategyRegistry:
    """Builds the policies once from settings; `resolve` turns a spec into a strategy."""

    def __init__(self, policies: dict[str, Strategy], default: tuple[str, ...], per_model: dict[str, tuple[str, ...]]):
        self.policies = policies
        self.default = default
        self.per_model = per_model
        self._built: dict[tuple[str, ...], Strategy] = {}

    @classmethod
    def from_settings(cls, context: ContextSettings) -> StrategyRegistry:
        validator = load_validator(context.validator)
        cut = SpanCut(context.split, context.preserve_ratio, context.preserve_recent_messages)
        policies: dict[str, Strategy] = {
            "full": Full(),
            "turns": Turns(
                keep_recent=context.keep_recent,
                compact_after=context.compact_after,
                min_shrink_ratio=context.min_shrink_ratio,
                validator=validator,
            ),
            "summarize": Summarize(cut=cut, min_shrink_ratio=context.min_shrink_ratio, validator=validator),
            "anchored": Anchored(cut=cut, min_shrink_ratio=context.min_shrink_ratio, validator=validator),
            "reset": Reset(),
        }
        per_model = {name: m.strategy for name, m in context.models.items() if m.strategy}
        return cls(policies, context.strategy, per_model)

    def spec_for(self, model: str, header: str | None) -> tuple[str, ...] | None:
        """The strategy spec of one request; None means `off` (pure pass-through)."""
        if header is not None:
            parts = tuple(p.strip() for p in header.split(",") if p.strip())
            if parts == (OFF,):
                return None
            for part in parts:
                if parse_strategy_spec(part)[0] not in STRATEGY_NAMES:
                    allowed = ", ".join((*STRATEGY_NAMES, OFF))
                    raise UnknownStrategy(
                        f"X-Context-Strategy: unknown strategy {part!r}; allowed: {allowed}, background(<name>), "
                        "or a comma-separated chain"
                    )
            if parts:
                return parts
        return self.per_model.get(model, self.default)

    def build(self, spec: tuple[str, ...]) -> Strategy:
        """The strategy for a spec; built once per distinct spec (strategies hold no state)."""
        built = self._built.get(spec)
        if built is None:
            built = self._build(spec)
            if len(self._built) < _MAX_SPECS:
                self._built[spec] = built
        return built

    def _build(self, spec: tuple[str, ...]) -> Strategy:
        strategies: list[Strategy] = []
        for part in spec:
            name, background = parse_strategy_spec(part)
            policy = self.policies[name]
            strategies.append(Background(policy) if background else policy)
        if len(strategies) == 1:
            return strategies[0]
        return Chain(strategies)


def is_background(strategy: Strategy) -> bool:
    return isinstance(strategy, Background) or (
        isinstance(strategy, Chain) and any(isinstance(s, Background) for s in strategy.strategies)
    )

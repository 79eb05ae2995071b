"""Every overflow strategy, listed once, and the registry that builds them from config.

`full`, `turns`, `summarize`, `anchored` and `reset` are policies; `chain` (a list in
config) and `background(x)` wrap others. `X-Context-Strategy` picks one per request
with the same syntax (comma-separated for a chain), or `off` for a pure pass-through.
"""

from __future__ import annotations

from proxy.config import STRATEGY_NAMES, ContextSettings, parse_strategy_spec
from proxy.context.strategies.anchored import Anchored
from proxy.context.strategies.background import Background
from proxy.context.strategies.base import (
    CompactionInput,
    CompactionResult,
    Strategy,
    StrategyError,
    Summarizer,
    Summary,
)
from proxy.context.strategies.chain import Chain
from proxy.context.strategies.full import Full
from proxy.context.strategies.gates import load_validator
from proxy.context.strategies.reset import Reset
from proxy.context.strategies.summarize import Summarize
from proxy.context.strategies.turns import Turns
from proxy.errors import BadRequest

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
]

OFF = "off"
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
        summarize_options = dict(
            split=context.split,
            preserve_ratio=context.preserve_ratio,
            preserve_recent=context.preserve_recent_messages,
            min_shrink_ratio=context.min_shrink_ratio,
            validator=validator,
        )
        policies: dict[str, Strategy] = {
            "full": Full(),
            "turns": Turns(
                keep_recent=context.keep_recent,
                compact_after=context.compact_after,
                min_shrink_ratio=context.min_shrink_ratio,
                validator=validator,
            ),
            "summarize": Summarize(**summarize_options),  # type: ignore[arg-type]
            "anchored": Anchored(**summarize_options),  # type: ignore[arg-type]
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
                    raise BadRequest(
                        f"X-Context-Strategy: unknown strategy {part!r}; allowed: {allowed}, background(<name>), "
                        "or a comma-separated chain",
                        param="X-Context-Strategy",
                        code="invalid_strategy",
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

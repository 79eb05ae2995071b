"""Every overflow strategy, listed once, and the registry that builds them from config.

`full`, `turns`, `summarize`, `anchored` and `reset` are policies; `chain` (a list in
config), `background(x)` and `server(x)` wrap others. The summarizing policies are built
once per distinct set of compression options (`context` and `context.models.<name>`). `X-Context-Strategy` picks one per request
with the same syntax (comma-separated for a chain), or `off` for a pure pass-through.
"""

from __future__ import annotations

from proxy.compaction.gates import load_validator
from proxy.compaction.prompts import CompressionPrompt
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
from proxy.compaction.strategies.server import Server, server_params, without_server
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
    "Server",
    "Strategy",
    "StrategyError",
    "StrategyRegistry",
    "Summarize",
    "Summarizer",
    "Summary",
    "Turns",
    "UnknownStrategy",
    "server_params",
    "without_server",
]

OFF = "off"


class UnknownStrategy(ValueError):
    """A per-request strategy spec names no strategy (the HTTP edge answers 400)."""


_MAX_SPECS = 256


class StrategyRegistry:
    """Builds the policies from settings; `build` turns a spec and a model into a strategy."""

    def __init__(self, context: ContextSettings) -> None:
        self.context = context
        self.default = context.strategy
        self.per_model = {name: m.strategy for name, m in context.models.items() if m.strategy}
        self._validator = load_validator(context.validator)
        self._policies: dict[CompressionPrompt, dict[str, Strategy]] = {}
        self._built: dict[tuple[tuple[str, ...], CompressionPrompt], Strategy] = {}
        self._by_model: dict[tuple[tuple[str, ...], str], Strategy] = {}

    @classmethod
    def from_settings(cls, context: ContextSettings) -> StrategyRegistry:
        return cls(context)

    def prompt_for(self, model: str) -> CompressionPrompt:
        """The compression options of one model: its own, else the `context` defaults."""
        c, m = self.context, self.context.for_model(model)
        return CompressionPrompt(
            guidelines=m.compression_guidelines if m.compression_guidelines is not None else c.compression_guidelines,
            custom_instructions=m.custom_compression_instructions or c.custom_compression_instructions,
            stub_threshold=m.tool_result_stub_threshold or c.tool_result_stub_threshold,
        )

    def policies(self, prompt: CompressionPrompt) -> dict[str, Strategy]:
        built = self._policies.get(prompt)
        if built is None:
            built = self._make_policies(prompt)
            if len(self._policies) < _MAX_SPECS:
                self._policies[prompt] = built
        return built

    def _make_policies(self, prompt: CompressionPrompt) -> dict[str, Strategy]:
        c, validator = self.context, self._validator
        cut = SpanCut(c.split, c.preserve_ratio, c.preserve_recent_messages)
        shrink = c.min_shrink_ratio
        return {
            "full": Full(),
            "turns": Turns(
                keep_recent=c.keep_recent, compact_after=c.compact_after, min_shrink_ratio=shrink,
                validator=validator, prompt=prompt,
            ),
            "summarize": Summarize(cut=cut, min_shrink_ratio=shrink, validator=validator, prompt=prompt),
            "anchored": Anchored(cut=cut, min_shrink_ratio=shrink, validator=validator, prompt=prompt),
            "reset": Reset(),
        }  # fmt: skip

    def spec_for(self, model: str, header: str | None) -> tuple[str, ...] | None:
        """The strategy spec of one request; None means `off` (pure pass-through)."""
        if header is not None:
            parts = tuple(p.strip() for p in header.split(",") if p.strip())
            if parts == (OFF,):
                return None
            for part in parts:
                if parse_strategy_spec(part).name not in STRATEGY_NAMES:
                    allowed = ", ".join((*STRATEGY_NAMES, OFF))
                    raise UnknownStrategy(
                        f"X-Context-Strategy: unknown strategy {part!r}; allowed: {allowed}, background(<name>), "
                        "server(<name>), or a comma-separated chain"
                    )
            if parts:
                return parts
        return self.per_model.get(model, self.default)

    def build(self, spec: tuple[str, ...], model: str = "") -> Strategy:
        """The strategy for a spec and a model; built once per distinct spec and compression options
        (strategies hold no state); remembered by spec and model, so a known pair costs one lookup."""
        known = self._by_model.get((spec, model))
        if known is not None:
            return known
        prompt = self.prompt_for(model)
        built = self._built.get((spec, prompt))
        if built is None:
            built = self._build(spec, self.policies(prompt))
            if len(self._built) < _MAX_SPECS:
                self._built[(spec, prompt)] = built
        if len(self._by_model) < _MAX_SPECS:
            self._by_model[(spec, model)] = built
        return built

    def _build(self, spec: tuple[str, ...], policies: dict[str, Strategy]) -> Strategy:
        strategies: list[Strategy] = []
        for part in spec:
            parsed = parse_strategy_spec(part)
            strategy = policies[parsed.name]
            if parsed.server:
                strategy = Server(strategy, self.context.server.params)
            strategies.append(Background(strategy) if parsed.background else strategy)
        if len(strategies) == 1:
            return strategies[0]
        return Chain(strategies)


def is_background(strategy: Strategy) -> bool:
    return isinstance(strategy, Background) or (
        isinstance(strategy, Chain) and any(isinstance(s, Background) for s in strategy.strategies)
    )

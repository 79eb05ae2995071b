"""A model's context window and trigger, resolved in one place.

Live turns, fallbacks, the Responses API's compaction and the inspector all ask here: the
configured window (the model's `context.models.<m>.context_window`, else
`context.context_window`), made smaller by what an upstream said when it refused a prompt
as too long (learned for this process, `proxy/context/refusals.py` reads the refusal), the
trigger ratio, and the calibration of the local count for a model counted with a tokenizer
not its own.
"""

from __future__ import annotations

from proxy.config import ContextSettings
from proxy.context.budget import Budget, make_budget
from proxy.context.refusals import Refusal, refused_window
from proxy.context.tokens import Encoder, TokenCounter

_MAX_MODELS = 1024


class ModelWindows:
    def __init__(self, context: ContextSettings, tokens: TokenCounter) -> None:
        self._context = context
        self._tokens = tokens
        self._learned: dict[str, int] = {}

    def configured(self, model: str) -> int:
        return self._context.for_model(model).context_window or self._context.context_window

    def window(self, model: str) -> int:
        """The window in use: the configured one, or the smaller one an upstream named."""
        configured = self.configured(model)
        return min(configured, self._learned.get(model, configured))

    def trigger_ratio(self, model: str) -> float:
        return self._context.for_model(model).trigger_ratio or self._context.trigger_ratio

    def budget(self, model: str, encoder: Encoder, *, max_output_tokens: int = 0, overhead: int = 0) -> Budget:
        """The model's budget in the local count's units."""
        return make_budget(
            context_window=self.window(model),
            trigger_ratio=self.trigger_ratio(model),
            max_output_tokens=max_output_tokens,
            overhead=overhead,
            calibration=self._tokens.calibration(model, encoder),
        )

    def learn(self, model: str, refusal: Refusal) -> int | None:
        """Remember the window a refusal names; that window when it is smaller than the one in
        use, else None."""
        window = refused_window(refusal)
        if window is None or window <= 0 or window >= self.window(model):
            return None
        if model not in self._learned and len(self._learned) >= _MAX_MODELS:
            return None
        self._learned[model] = window
        return window

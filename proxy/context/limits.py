"""Context windows learned from the upstream, for models the config does not size right.

An OpenAI-compatible server that refuses a prompt as too long says how long its window
is ("This model's maximum context length is 4096 tokens. ..." from OpenAI and vLLM
alike). The proxy remembers the smaller of that and the configured window for the
model, so the next attempt, and every later request, compacts to fit it.
"""

from __future__ import annotations

import re

_MAXIMUM = re.compile(r"maximum context length is (\d+) tokens")
_MAX_MODELS = 1024


class ModelLimits:
    def __init__(self) -> None:
        self._learned: dict[str, int] = {}

    def window(self, model: str, configured: int) -> int:
        return min(configured, self._learned.get(model, configured))

    def learn(self, model: str, message: str, configured: int) -> int | None:
        """Remember the window a refusal names; that window when it is smaller than the one
        in use, else None."""
        match = _MAXIMUM.search(message)
        if match is None:
            return None
        window = int(match.group(1))
        if window <= 0 or window >= self.window(model, configured):
            return None
        if model not in self._learned and len(self._learned) >= _MAX_MODELS:
            return None
        self._learned[model] = window
        return window

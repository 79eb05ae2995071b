"""Context windows learned from the upstream, for models the config does not size right.

An OpenAI-compatible server that refuses a prompt as too long says how long its window
is ("This model's maximum context length is 4096 tokens. ..." from OpenAI and vLLM
alike). The proxy remembers the smaller of that and the configured window for the
model, so the next attempt, and every later request, compacts to fit it.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("context_proxy.limits")

_MAXIMUM = re.compile(r"maximum context length is (\d+) tokens")
_MAX_MODELS = 1024


class ModelLimits:
    def __init__(self) -> None:
        self._learned: dict[str, int] = {}

    def window(self, model: str, configured: int) -> int:
        return min(configured, self._learned.get(model, configured))

    def learn(self, model: str, message: str, configured: int) -> bool:
        """Remember the window a refusal names; True when it is smaller than the one in use."""
        match = _MAXIMUM.search(message)
        if match is None:
            return False
        window = int(match.group(1))
        if window <= 0 or window >= self.window(model, configured):
            return False
        if model not in self._learned and len(self._learned) >= _MAX_MODELS:
            return False
        self._learned[model] = window
        log.warning("model %s refused a prompt: its window is %d tokens, not %d; using that", model, window, configured)
        return True

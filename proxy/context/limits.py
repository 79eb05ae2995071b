"""Context windows learned from the upstream, for models the config does not size right.

A server that refuses a prompt as too long says, in its own words, how long its window
is. The proxy remembers the smaller of that and the configured window for the model,
so the next attempt, and every later request, compacts to fit it. The refusals it reads
(each test in `tests/context/test_limits.py` carries the server's real text):

- OpenAI and vLLM: "This model's maximum context length is 4096 tokens. ..."; vLLM's
  input processor: "The decoder prompt (length 5000) is longer than the maximum model
  length of 4096. ...".
- SGLang: "The input (5000 tokens) is longer than the model's context length (4096
  tokens)." and "Requested token count exceeds the model's maximum context length of
  4096 tokens. ...", in a body without the "error" wrapper.
- llama.cpp's server: "request (5000 tokens) exceeds the available context size (4096
  tokens), try increasing it"; builds before that say only "the request exceeds the
  available context size, try increasing it", and the window is the error object's
  `n_ctx` (its `n_prompt_tokens` is the prompt's size).
- Hugging Face TGI (a 422 whose "error" is a string): "Input validation error: `inputs`
  tokens + `max_new_tokens` must be <= 4096. Given: ..." and "`inputs` must have less
  than 4096 tokens. Given: ...".
- LM Studio ("error" a string): "The number of tokens to keep from the initial prompt
  is greater than the context length (n_keep: 5000>= n_ctx: 4096). ...", "Trying to keep
  the first 5000 tokens when context the overflows. However, the model is loaded with
  context length of only 4096 tokens, ...", and llama.cpp's "Cannot truncate prompt with
  n_keep (5000) >= n_ctx (4096)".
- Anthropic: "prompt is too long: 210000 tokens > 200000 maximum".
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_MAX_MODELS = 1024
_WINDOWS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"maximum context length is (\d{1,12}) tokens",
        r"longer than the maximum model length of (\d{1,12})",
        r"longer than the model's context length \((\d{1,12}) tokens\)",
        r"maximum context length of (\d{1,12}) tokens",
        r"available context size \((\d{1,12}) tokens\)",
        r"larger than the max context size \((\d{1,12}) tokens\)",
        r"`?inputs?`? tokens \+ `?max_new_tokens`? must be <= (\d{1,12})",
        r"`?inputs`? must have less than (\d{1,12}) tokens",
        r"n_ctx: (\d{1,12})\)",
        r"n_ctx \((\d{1,12})\)",
        r"context length of only (\d{1,12}) tokens",
        r"prompt is too long: \d+ tokens > (\d{1,12}) maximum",
    )
)

Refusal = str | Mapping[str, object]
"""An upstream's refusal: its message, or its parsed JSON body (or that body's error object)."""


def refusal_text(refusal: Refusal) -> str:
    """The message of a refusal, whichever shape its body has: `{"error": {"message"}}`
    (OpenAI, vLLM, llama.cpp, Anthropic), `{"error": "<message>"}` (TGI, LM Studio) or
    `{"message"}` (SGLang)."""
    if isinstance(refusal, str):
        return refusal
    error = refusal.get("error")
    if isinstance(error, Mapping):
        return refusal_text(error)
    text = error if isinstance(error, str) else refusal.get("message")
    return text if isinstance(text, str) else ""


def refused_window(refusal: Refusal) -> int | None:
    """The window a too-long refusal names, if it names one."""
    if not isinstance(refusal, str):
        error = refusal.get("error")
        fields = error if isinstance(error, Mapping) else refusal
        n_ctx = fields.get("n_ctx")  # llama.cpp's error object
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            return n_ctx
    text = refusal_text(refusal)
    for pattern in _WINDOWS:
        match = pattern.search(text)
        if match is not None:
            return int(match.group(1))
    return None


class ModelLimits:
    def __init__(self) -> None:
        self._learned: dict[str, int] = {}

    def window(self, model: str, configured: int) -> int:
        return min(configured, self._learned.get(model, configured))

    def learn(self, model: str, refusal: Refusal, configured: int) -> int | None:
        """Remember the window a refusal names; that window when it is smaller than the one
        in use, else None."""
        window = refused_window(refusal)
        if window is None or window <= 0 or window >= self.window(model, configured):
            return None
        if model not in self._learned and len(self._learned) >= _MAX_MODELS:
            return None
        self._learned[model] = window
        return window

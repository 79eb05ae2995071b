"""Reading a refusal that names the model's window: pure, a body in, a number out.

A server that refuses a prompt as too long says, in its own words, how long its window
is; `proxy/turn/windows.py` remembers it. The refusals read here (each test in
`tests/context/test_refusals.py` carries the server's real text):

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

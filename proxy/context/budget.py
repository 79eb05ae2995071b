"""The token budget of one request (ContextChef's runner arithmetic), pure.

trigger = context_window x trigger_ratio. The request's size is the local count, or
the last answer's reported `usage.prompt_tokens` plus the local count of what was
added since, as `usage_preference` says: `max` (the larger; the default),
`feed_first` (the reported figure when there is one) or `tokenizer_first`.
"""

from __future__ import annotations

from proxy.types import JSONObject, frozen


class ContextTooLarge(Exception):
    """Even a compacted context cannot fit the model's window (the HTTP edge answers 400
    `context_length_exceeded`)."""


@frozen
class Budget:
    context_window: int
    trigger: int
    reserve: int
    """Tokens the request needs beyond its messages: the output it may produce, the primer, tools."""

    def fits(self, tokens: int) -> bool:
        return tokens + self.reserve <= self.context_window

    def over_trigger(self, tokens: int) -> bool:
        return tokens > self.trigger

    def require_fit(self, tokens: int) -> None:
        if not self.fits(tokens):
            over = tokens + self.reserve - self.context_window
            raise ContextTooLarge(
                f"This model's maximum context length is {self.context_window} tokens. However, even after "
                f"compaction the messages need {tokens} tokens and {self.reserve} are reserved for the output "
                f"and the request overhead: {over} tokens too many. Shorten the new input or lower max_tokens."
            )


def make_budget(
    *, context_window: int, trigger_ratio: float, max_output_tokens: int, overhead: int, calibration: float = 1.0
) -> Budget:
    """`calibration` = reported / local tokens for this model; the limits are scaled into local units."""
    scale = 1.0 / calibration if calibration > 0 else 1.0
    return Budget(
        context_window=int(context_window * scale),
        trigger=int(context_window * trigger_ratio * scale),
        reserve=int(max_output_tokens * scale) + overhead,
    )


def effective_tokens(local: int, usage: JSONObject | None, *, window_id: str, preference: str) -> int:
    """The size the trigger compares against, from the local count and the fed-back usage.

    `usage` is what the last completed turn reported: {"prompt", "local", "window"}; it
    applies only while the window it was measured in is still the current one.
    """
    if preference == "tokenizer_first" or not usage or usage.get("window") != window_id:
        return local
    fed = int(usage["prompt"]) + (local - int(usage["local"]))
    if preference == "feed_first":
        return fed
    return max(local, fed)

"""What one managed turn was, for the access log, the metrics and the request's trace.

`ActiveTurn.facts()` builds it once the turn is relayed and recorded; the chat handler
puts it on the request (`keys.TURN_FACTS`), and the access middleware reads it.
"""

from __future__ import annotations

from proxy.compaction import Fitted
from proxy.types import JSONObject, frozen


@frozen
class TurnFacts:
    session: str
    tenant: str
    window: str
    strategy: str
    status: str
    """The journal status: completed, failed, interrupted."""
    sent_tokens: int
    """The prompt tokens the proxy sent, by its own count."""
    client_tokens: int
    """The prompt tokens the client's request would have cost as it sent it, by the same count."""
    mode: str
    """`managed`, or `shadow` (the client's own messages went; `composed_tokens` is the estimate)."""
    composed_tokens: int | None
    """What managed mode sends: `sent_tokens`, or a shadow turn's estimate (None: it would not fit)."""
    costs: tuple[float, float] | None
    """(cost as sent, cost saved) in US dollars; None without a usage or a price (`context/cost.py`)."""
    prompt_tokens: int | None
    completion_tokens: int | None
    compaction: str
    """What fitting under budget did: none, compacted, failed, deferred, or skipped."""
    upstream_s: float

    @property
    def saved_tokens(self) -> int | None:
        """What composing saved (or, in shadow mode, would have): negative for a delta client
        (the history the proxy supplied)."""
        return None if self.composed_tokens is None else self.client_tokens - self.composed_tokens

    @staticmethod
    def usage_of(usage: JSONObject | None) -> tuple[int | None, int | None]:
        """(prompt, completion) tokens of an answer's usage, None where it says nothing."""
        usage = usage or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return (
            prompt if isinstance(prompt, int) else None,
            completion if isinstance(completion, int) else None,
        )


def fitting(fitted: Fitted) -> str:
    """What fitting under budget did, in one word (a claim that stayed contended sent the history as it was)."""
    return "none" if fitted.what == "contended" else fitted.what

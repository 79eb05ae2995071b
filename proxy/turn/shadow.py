"""Shadow mode (`context.mode: shadow`, also per model): what managed mode would have done.

A shadow turn forwards the client's own messages (as `X-Context-Strategy: off` does), and
the proxy still journals it, reconciles it, and fits the history it would have sent under
the budget with the session's strategy, without a summarizer call: an estimating
summarizer answers with a summary of `SUMMARY_SHARE` of the span's tokens (at most the
compression model's `max_tokens`), and its usage is that estimate. Nothing lands: the
session's stored window is untouched, so switching to managed mode keeps the session and
compacts it for real at its first managed turn. The window managed mode would have had is
carried from turn to turn in each turn record's `shadow` (its boundary and its summary's
size), so the compactions reported are the ones managed mode would have made, in steps.
"""

from __future__ import annotations

from dataclasses import replace

from proxy.compaction import Fitted
from proxy.compaction.strategies import Strategy, Summarizer, without_server
from proxy.compaction.strategies.background import Background
from proxy.compaction.strategies.base import Summary
from proxy.context.compose import History
from proxy.context.tokens import Encoder, count_messages
from proxy.types import JSONObject, Message, frozen

SUMMARY_SHARE = 0.2
"""The estimated summary's size, as a share of the messages the summarizer would be sent."""


@frozen
class ShadowTurn:
    """A shadow turn's figures, journaled as its record's `shadow`."""

    composed_tokens: int | None
    """What managed mode would have sent (None: its composition would not fit the window)."""
    boundary: int
    summary_tokens: int
    compacted: bool
    summarizer_usage: JSONObject | None
    summarizer_model: str | None

    def to_json(self) -> JSONObject:
        return {
            "composed_tokens": self.composed_tokens,
            "boundary": self.boundary,
            "summary_tokens": self.summary_tokens,
            "compacted": self.compacted,
            "summarizer_usage": self.summarizer_usage,
            "summarizer_model": self.summarizer_model,
        }


def shadow_history(history: History, state: JSONObject | None) -> History:
    """`history` as managed mode would have it after the compactions earlier shadow turns
    simulated (`state`: the last one's record `shadow`): the turns past the simulated
    boundary, under a summary of the simulated size."""
    if not state or int(state.get("boundary", -1)) <= history.window.boundary:
        return history
    boundary, tokens = int(state["boundary"]), int(state.get("summary_tokens") or 0)
    summary: Message | None = {"role": "user", "content": _filler(tokens)} if tokens else None
    window = replace(history.window, boundary=boundary, summary=summary, summary_tokens=tokens)
    kept = tuple(u for u in history.units if u.turns[0].seq > boundary or u.pinned)  # pinned ones stay, lifted
    return History.of(window, kept)


def simulated(strategy: Strategy) -> Strategy:
    """The strategy whose compaction managed mode would make now: a server-managed one's own
    fallback, a background one's inner strategy (as if it landed at once)."""
    strategy = without_server(strategy)
    return strategy.inner if isinstance(strategy, Background) else strategy


def last_state(history: History) -> JSONObject | None:
    """The simulated window the turn the history ends with left (None: no shadow turn yet)."""
    return history.units[-1].turns[-1].shadow if history.units else None


def estimating_summarizer(encoder: Encoder, *, model: str, max_tokens: int) -> Summarizer:
    """A summarizer that calls nothing: a summary of the estimated size, its usage the estimate."""

    async def summarize(messages: list[Message]) -> Summary:
        prompt = sum(count_messages(encoder, messages))
        completion = max(1, min(max_tokens, int(prompt * SUMMARY_SHARE)))
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return Summary(text=f"<summary>\n{_filler(completion)}\n</summary>", usage=usage, model=model)

    return summarize


def shadow_turn(fitted: Fitted | None, composed: int | None, state: JSONObject | None) -> ShadowTurn:
    """This turn's figures: the compaction it would have made, or the window it carries on."""
    result = fitted.result if fitted is not None else None
    if result is not None:
        window, summary = result.window, result.summary
        return ShadowTurn(
            composed,
            window.boundary,
            window.summary_tokens,
            True,
            summary.usage if summary else None,
            summary.model if summary else None,
        )
    state = state or {}
    return ShadowTurn(
        composed, int(state.get("boundary", -1)), int(state.get("summary_tokens") or 0), False, None, None
    )


def _filler(tokens: int) -> str:
    """Text of about `tokens` tokens (" x" is one token in the encodings the proxy uses)."""
    return " x" * tokens

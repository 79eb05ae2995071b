"""What a client's request would have cost as it sent it, counted cheaply (`docs/savings.md`).

The proxy sends `ActiveTurn.sent_tokens`; the client sent its own leading block, its
conversation and its request overhead (reply primer, its own tool schemas; not the
proxy's context tools). A full-history client's conversation is the journal's path
through the turn it attaches to (reconcile rule 2) plus its new input. Every turn record
keeps `path_tokens`, that path's tokens through its own end, so the matched part costs a
lookup on the turn the history ends with, and only the new input is tokenized (it is,
for the budget, already). Where that figure is missing (a turn journaled before it was
kept, a parent outside the loaded history) or the client's part differs from the path (a
trimming client, rule 3), the matched messages are tokenized once; the turn recorded then
carries the figure again. A delta client sent only its new input: its `saved` is negative,
the history the proxy supplied.

Each record also keeps `path_savings`, the running totals of the counted turns on its path
(client tokens, tokens sent, cost, saved cost), so a session listing reads a session's
totals from its head turn alone.
"""

from __future__ import annotations

from proxy.context.compose import History
from proxy.context.tokens import Encoder, TokenCounter, request_overhead
from proxy.sessions.reconcile import ROOT
from proxy.turn.conversation import Conversation
from proxy.types import JSONObject, Message, frozen

NO_SAVINGS: JSONObject = {"client_tokens": 0, "sent_tokens": 0, "cost_usd": 0.0, "saved_cost_usd": 0.0}


@frozen
class ClientCount:
    """A request's prompt as its client sent it, by the proxy's tokenizer."""

    tokens: int
    """Leading block + conversation + request overhead, as the client's request carried them."""
    path_before: int | None
    """The tokens of the session's path through the turn the new input follows (None: unknown)."""
    savings_before: JSONObject | None = None
    """`Turn.path_savings` of the turn the new input follows (None: unknown)."""


def savings_through(history: History, parent: int | None, *, from_root: bool) -> JSONObject | None:
    """`Turn.path_savings` of the turn the new input follows, when the history ends with it
    (one journaled before they were kept starts them); none from the root; else None."""
    if from_root or parent == ROOT:
        return NO_SAVINGS
    if not history.units:  # no completed turn on the path yet, unless a compaction evicted them all
        return NO_SAVINGS if history.window.boundary < 0 else None
    last = history.units[-1].turns[-1]
    if parent is not None and last.seq != parent:
        return None
    return last.path_savings or NO_SAVINGS


def with_turn(before: JSONObject, client: int, sent: int, costs: tuple[float, float] | None) -> JSONObject:
    """Running totals `before` plus one counted turn."""
    cost, saved_cost = costs or (0.0, 0.0)
    return {
        "client_tokens": int(before["client_tokens"]) + client,
        "sent_tokens": int(before["sent_tokens"]) + sent,
        "cost_usd": float(before["cost_usd"]) + cost,
        "saved_cost_usd": float(before["saved_cost_usd"]) + saved_cost,
    }


def path_through(history: History, parent: int | None, *, from_root: bool) -> int | None:
    """`Turn.path_tokens` of the turn the new input follows (the head for a delta client's
    None), when the history ends with it; 0 from the root or on a path with no turn yet; else None."""
    if from_root or parent == ROOT:
        return 0
    if not history.units:  # no completed turn on the path yet, unless a compaction evicted them all
        return 0 if history.window.boundary < 0 else None
    last = history.units[-1].turns[-1]
    return last.path_tokens if parent is None or last.seq == parent else None


async def count_client(
    counter: TokenCounter,
    encoder: Encoder,
    conversation: Conversation,
    request: tuple[list[Message], list[Message], JSONObject],
    new_tokens: list[int],
) -> ClientCount:
    """The client's count for `request` (its leading block, its conversation and its body, as
    sent) after `conversation` reconciled it and its new input was counted as `new_tokens`."""
    leading, messages, body = request
    reconciled, history = conversation.reconciled, conversation.history
    before = path_through(history, reconciled.parent, from_root=reconciled.from_root)
    matched = len(messages) - len(reconciled.new_input)
    if matched <= 0:
        matched_tokens = 0
    elif before is not None and reconciled.parent is not None and not reconciled.trimmed:
        matched_tokens = before
    else:
        matched_tokens = sum(await counter.count_messages(encoder, messages[:matched]))
        if not reconciled.trimmed and reconciled.parent is not None:
            before = matched_tokens
    lead = sum(history.window.leading_tokens) if leading else 0
    overhead = request_overhead(encoder, body.get("tools"))
    savings = savings_through(history, reconciled.parent, from_root=reconciled.from_root)
    return ClientCount(lead + matched_tokens + sum(new_tokens) + overhead, before, savings)

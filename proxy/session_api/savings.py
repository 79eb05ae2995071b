"""A session's savings figures: per turn, and totals over its turns and its compactions.

A turn counts when the proxy sent it upstream with a count of the client's request
(`client_tokens`, kept since the savings figures were added); imported turns and turns
that failed before they went upstream count nothing. Costs are what the turn recorded
(its usage by its model's price); a compaction's summarizer call is priced here, by its
own usage and model, since the journal keeps its usage. A shadow turn (`turn/shadow.py`)
counts what managed mode would have sent, and the compaction it would have made with its
estimated summarizer usage. See `docs/savings.md`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

from proxy.config import PriceSettings
from proxy.context.cost import usage_cost
from proxy.types import JSONObject

Prices = Callable[[str], PriceSettings | None]
"""A model's price (`ContextSettings.price_for`)."""


def composed_tokens(record: JSONObject) -> int | None:
    """What managed mode sent (a shadow turn's: would have sent); None when unknown."""
    shadow = record.get("shadow")
    sent = shadow.get("composed_tokens") if isinstance(shadow, dict) else record.get("context_tokens")
    return sent if isinstance(sent, int) and sent > 0 else None


def counted(record: JSONObject) -> bool:
    """Whether the turn went upstream with both counts kept."""
    return isinstance(record.get("client_tokens"), int) and composed_tokens(record) is not None


def saved_tokens(record: JSONObject) -> int | None:
    """Client tokens less those sent upstream (negative: the history the proxy supplied)."""
    composed = composed_tokens(record)
    if composed is None or not isinstance(record.get("client_tokens"), int):
        return None
    return int(record["client_tokens"]) - composed


@dataclass
class Savings:
    """Totals of counted turns and of compactions; `add` them up, `as_json` shows them."""

    turns: int = 0
    client_tokens: int = 0
    sent_tokens: int = 0
    cost_usd: float = 0.0
    saved_cost_usd: float = 0.0
    compactions: int = 0
    summarizer_tokens: int = 0
    summarizer_cost_usd: float = 0.0

    @property
    def saved_tokens(self) -> int:
        return self.client_tokens - self.sent_tokens

    def add_turn(self, record: JSONObject, prices: Prices) -> None:
        """A counted turn; a shadow turn's simulated compaction counts as a compaction."""
        composed = composed_tokens(record)
        if composed is None or not isinstance(record.get("client_tokens"), int):
            return
        self.turns += 1
        self.client_tokens += int(record["client_tokens"])
        self.sent_tokens += composed
        self.cost_usd += float(record.get("cost_usd") or 0.0)
        self.saved_cost_usd += float(record.get("saved_cost_usd") or 0.0)
        shadow = record.get("shadow")
        if isinstance(shadow, dict) and shadow.get("compacted"):
            self._add_summarizer(shadow.get("summarizer_model"), shadow.get("summarizer_usage"), prices)

    def add_compaction(self, event: JSONObject, prices: Prices) -> None:
        """A landed compaction: its summarizer call's tokens and cost count against what it saved."""
        if event.get("type") != "compaction":
            return
        self._add_summarizer(event.get("model"), event.get("usage"), prices)

    def _add_summarizer(self, model: object, usage: JSONObject | None, prices: Prices) -> None:
        usage = usage or {}
        self.compactions += 1
        self.summarizer_tokens += int(usage.get("total_tokens") or 0)
        self.summarizer_cost_usd += (usage_cost(prices(model), usage) if isinstance(model, str) else None) or 0.0

    def add(self, records: Iterable[JSONObject], events: Iterable[JSONObject], prices: Prices) -> Savings:
        for record in records:
            self.add_turn(record, prices)
        for event in events:
            self.add_compaction(event, prices)
        return self

    def merge(self, other: Savings) -> None:
        """Add `other`'s totals to these."""
        for spec in fields(self):
            setattr(self, spec.name, getattr(self, spec.name) + getattr(other, spec.name))

    def as_json(self) -> JSONObject:
        return {
            "client_tokens": self.client_tokens,
            "sent_tokens": self.sent_tokens,
            "saved_tokens": self.saved_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "saved_cost_usd": round(self.saved_cost_usd, 6),
            "compactions": self.compactions,
            "summarizer_tokens": self.summarizer_tokens,
            "summarizer_cost_usd": round(self.summarizer_cost_usd, 6),
        }


def listed_savings(totals: JSONObject | None) -> JSONObject:
    """A session listing's savings fields, from its head turn's `path_savings` (the counted
    turns of the path to its head; null before any was counted)."""
    if not totals:
        return {"client_tokens": None, "saved_tokens": None, "cost_usd": None, "saved_cost_usd": None}
    client, sent = int(totals["client_tokens"]), int(totals["sent_tokens"])
    return {
        "client_tokens": client,
        "saved_tokens": client - sent,
        "cost_usd": round(float(totals["cost_usd"]), 6),
        "saved_cost_usd": round(float(totals["saved_cost_usd"]), 6),
    }

"""`context-proxy report`: the savings figures of every session, by tenant (gateway key) and model.

A turn counts in the period when it was created in it, under the tenant of its session
(a gateway key's name; a hash of the client's own key outside gateway mode) and the
model it was answered by. A landed compaction counts under the model of the turn that
triggered it (its request id; a background one, under its summarizer's model), and its
summarizer call's cost counts against what it saved (`net saved`). Shadow turns
(`turn/shadow.py`) are a row of their own, `<model> (shadow)`: what managed mode would
have sent and saved, and the compactions it would have made at their estimated cost.
See `docs/savings.md`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from proxy.session_api.savings import Prices, Savings
from proxy.store import SessionDump
from proxy.types import frozen

_SPAN = re.compile(r"(\d+)([dhm])")
_SECONDS = {"d": 86400, "h": 3600, "m": 60}


def since_seconds(text: str) -> float:
    """`7d`, `24h`, `90m` as seconds; ValueError for anything else."""
    match = _SPAN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"--since: expected a number and d, h or m (7d, 24h, 90m), got {text!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]


@frozen
class Scope:
    """Which turns the report counts: created at or after `since` (a Unix time), of `key` only if set."""

    since: float
    key: str | None = None


class Report:
    """Savings by (tenant, model), one session at a time (`add`), for the turns in `scope`."""

    def __init__(self, scope: Scope, prices: Prices) -> None:
        self.scope = scope
        self._prices = prices
        self.rows: dict[tuple[str, str], Savings] = defaultdict(Savings)

    def add(self, tenant: str, dump: SessionDump) -> None:
        scope = self.scope
        if scope.key is not None and tenant != scope.key:
            return
        models: dict[str, str] = {}
        for turn in dump.turns:
            record = turn.record
            model = record.get("model")
            if not isinstance(model, str) or float(record.get("created") or 0) < scope.since:
                continue
            models[str(record.get("request_id"))] = model
            label = f"{model} (shadow)" if record.get("shadow") else model
            self.rows[(tenant, label)].add_turn(record, self._prices)
        for event in dump.events:
            if event.get("type") != "compaction" or float(event.get("created") or 0) < scope.since:
                continue
            model = models.get(str(event.get("request_id"))) or str(event.get("model") or "")
            self.rows[(tenant, model)].add_compaction(event, self._prices)


def report_table(rows: Mapping[tuple[str, str], Savings]) -> list[str]:
    """The report as lines of a fixed-width table, a total line last."""
    header = (
        f"{'key':24} {'model':22} {'turns':>6} {'client tok':>11} {'sent tok':>11} {'saved tok':>11} "
        f"{'cost $':>10} {'saved $':>10} {'compact':>7} {'summ. $':>9} {'net saved $':>11}"
    )
    total = Savings()
    lines = [header]
    for (tenant, model), row in sorted(rows.items()):
        lines.append(_line(tenant, model, row))
        total.merge(row)
    lines.append(_line("total", "", total))
    return lines


def _line(tenant: str, model: str, row: Savings) -> str:
    net = row.saved_cost_usd - row.summarizer_cost_usd
    return (
        f"{tenant[:24]:24} {model[:22]:22} {row.turns:>6} {row.client_tokens:>11} {row.sent_tokens:>11} "
        f"{row.saved_tokens:>11} {row.cost_usd:>10.4f} {row.saved_cost_usd:>10.4f} {row.compactions:>7} "
        f"{row.summarizer_cost_usd:>9.4f} {net:>11.4f}"
    )

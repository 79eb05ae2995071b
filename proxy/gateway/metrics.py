"""Per-process gateway counters in Prometheus text, appended to `/metrics`.

Requests by key and outcome (admitted, rate_limited, quota) and tokens by key (each
request's usage once it is known, else its reservation); managed turns' client prompt
tokens, saved tokens, cost and saved cost by key; fallbacks by model, fallback
model and reason, from the turn's events. Totals across replicas are Prometheus's sum;
the per-period usage the budgets use lives in Redis.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from proxy.events import Event, FallbackUsed
from proxy.metrics import escape, number


class GatewayMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)
        self.fallbacks: dict[tuple[str, str, str], int] = defaultdict(int)
        self.client_tokens: dict[tuple[str, str], int] = defaultdict(int)
        self.saved_tokens: dict[tuple[str, str], int] = defaultdict(int)
        self.cost: dict[tuple[str, str], float] = defaultdict(float)
        self.saved_cost: dict[tuple[str, str], float] = defaultdict(float)

    def request(self, key: str, outcome: str) -> None:
        self.requests[(key, outcome)] += 1

    def used(self, key: str, tokens: int) -> None:
        self.tokens[key] += tokens

    def savings(
        self, key: tuple[str, str], *, client: int, saved: int | None, costs: tuple[float, float] | None
    ) -> None:
        """A managed turn's prompt as its client sent it, what composing saved of it (or would
        have, in shadow mode), and its costs; by (gateway key, mode)."""
        self.client_tokens[key] += client
        if saved is not None:
            self.saved_tokens[key] += saved
        if costs is not None:
            self.cost[key] += costs[0]
            self.saved_cost[key] += costs[1]

    def observe(self, event: Event) -> None:
        if isinstance(event, FallbackUsed):
            self.fallbacks[(event.model, event.fallback, event.reason)] += 1

    def render(self) -> str:
        lines = [
            "# HELP context_proxy_gateway_requests_total Requests by gateway key and admission outcome.",
            "# TYPE context_proxy_gateway_requests_total counter",
        ]
        lines += [
            f'context_proxy_gateway_requests_total{{key="{escape(key)}",outcome="{outcome}"}} {n}'
            for (key, outcome), n in sorted(self.requests.items())
        ]
        lines += [
            "# HELP context_proxy_gateway_tokens_total Tokens (prompt + completion) by gateway key.",
            "# TYPE context_proxy_gateway_tokens_total counter",
        ]
        lines += [
            f'context_proxy_gateway_tokens_total{{key="{escape(key)}"}} {n}' for key, n in sorted(self.tokens.items())
        ]
        lines += _by_key(
            "context_proxy_gateway_client_prompt_tokens_total",
            "Prompt tokens of managed turns as their clients sent them, by gateway key and mode.",
            self.client_tokens,
        )
        lines += _by_key(
            "context_proxy_gateway_saved_tokens_total",
            "Client prompt tokens less those sent upstream (or, in shadow mode, would be), by gateway key and mode.",
            self.saved_tokens,
        )
        lines += _by_key(
            "context_proxy_gateway_cost_usd_total",
            "US dollars of managed turns as sent, by gateway key and mode.",
            self.cost,
        )
        lines += _by_key(
            "context_proxy_gateway_saved_cost_usd_total",
            "US dollars of the saved prompt tokens at the model's input price, by gateway key and mode.",
            self.saved_cost,
        )
        lines += [
            "# HELP context_proxy_fallbacks_total Turns sent to a fallback model, by model, fallback and reason.",
            "# TYPE context_proxy_fallbacks_total counter",
        ]
        lines += [
            f'context_proxy_fallbacks_total{{model="{escape(model)}",fallback="{escape(fallback)}",reason="{reason}"}} {n}'
            for (model, fallback, reason), n in sorted(self.fallbacks.items())
        ]
        return "\n".join(lines) + "\n"


def _by_key(name: str, help_text: str, values: Mapping[tuple[str, str], float]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
    return lines + [
        f'{name}{{key="{escape(key)}",mode="{mode}"}} {number(n)}' for (key, mode), n in sorted(values.items())
    ]

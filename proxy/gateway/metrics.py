"""Per-process gateway counters in Prometheus text, appended to `/metrics`.

Requests by key and outcome (admitted, rate_limited, quota) and tokens by key (each
request's usage once it is known, else its reservation); fallbacks by model, fallback
model and reason, from the turn's events. Totals across replicas are Prometheus's sum;
the per-period usage the budgets use lives in Redis.
"""

from __future__ import annotations

from collections import defaultdict

from proxy.events import Event, FallbackUsed
from proxy.metrics import escape


class GatewayMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)
        self.fallbacks: dict[tuple[str, str, str], int] = defaultdict(int)

    def request(self, key: str, outcome: str) -> None:
        self.requests[(key, outcome)] += 1

    def used(self, key: str, tokens: int) -> None:
        self.tokens[key] += tokens

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
        lines += [
            "# HELP context_proxy_fallbacks_total Turns sent to a fallback model, by model, fallback and reason.",
            "# TYPE context_proxy_fallbacks_total counter",
        ]
        lines += [
            f'context_proxy_fallbacks_total{{model="{escape(model)}",fallback="{escape(fallback)}",reason="{reason}"}} {n}'
            for (model, fallback, reason), n in sorted(self.fallbacks.items())
        ]
        return "\n".join(lines) + "\n"

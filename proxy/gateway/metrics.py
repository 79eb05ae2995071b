"""Per-process gateway counters in Prometheus text, appended to `/metrics`.

Requests by key and outcome (admitted, rate_limited, quota) and tokens by key (each
request's usage once it is known, else its reservation). Totals across replicas are
Prometheus's sum; the per-period usage the budgets use lives in Redis.
"""

from __future__ import annotations

from collections import defaultdict


class GatewayMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)

    def request(self, key: str, outcome: str) -> None:
        self.requests[(key, outcome)] += 1

    def used(self, key: str, tokens: int) -> None:
        self.tokens[key] += tokens

    def render(self) -> str:
        lines = [
            "# HELP context_proxy_gateway_requests_total Requests by gateway key and admission outcome.",
            "# TYPE context_proxy_gateway_requests_total counter",
        ]
        lines += [
            f'context_proxy_gateway_requests_total{{key="{key}",outcome="{outcome}"}} {n}'
            for (key, outcome), n in sorted(self.requests.items())
        ]
        lines += [
            "# HELP context_proxy_gateway_tokens_total Tokens (prompt + completion) by gateway key.",
            "# TYPE context_proxy_gateway_tokens_total counter",
        ]
        lines += [f'context_proxy_gateway_tokens_total{{key="{key}"}} {n}' for key, n in sorted(self.tokens.items())]
        return "\n".join(lines) + "\n"

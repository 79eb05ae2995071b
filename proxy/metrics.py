"""Process metrics in Prometheus text format, with no client library.

Requests by route, model and status; latency histograms of whole requests and of
upstream calls; an in-flight gauge; compaction outcomes. Updating is a dict lookup
and an add, cheap enough for the hot path.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from proxy.events import CompactionFailed, CompactionLanded, CompactionStale, Event, ToolRound, UpstreamAnswered

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

Labels = tuple[tuple[str, str], ...]


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_BUCKETS, value)] += 1
        self.total += value
        self.n += 1


def _fmt(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = (*labels, *extra)
    if not pairs:
        return ""
    escaped = (f'{k}="{v}"'.replace("\n", " ") for k, v in pairs)
    return "{" + ",".join(escaped) + "}"


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[Labels, int] = defaultdict(int)
        self.compactions: dict[Labels, int] = defaultdict(int)
        self.tool_calls: dict[Labels, int] = defaultdict(int)
        self.request_latency: dict[Labels, _Histogram] = defaultdict(_Histogram)
        self.upstream_latency: dict[Labels, _Histogram] = defaultdict(_Histogram)
        self.in_flight = 0

    def request_done(self, route: str, model: str, status: int, seconds: float) -> None:
        self.requests[(("route", route), ("model", model), ("status", str(status)))] += 1
        self.request_latency[(("route", route),)].observe(seconds)

    def upstream_done(self, route: str, seconds: float) -> None:
        self.upstream_latency[(("route", route),)].observe(seconds)

    def compaction(self, strategy: str, outcome: str) -> None:
        self.compactions[(("strategy", strategy), ("outcome", outcome))] += 1

    def observe(self, event: Event) -> None:
        """The metrics' view of a turn's events."""
        match event:
            case CompactionLanded():
                self.compaction(event.strategy, "landed")
            case CompactionStale():
                self.compaction(event.strategy, "stale")
            case CompactionFailed():
                self.compaction(event.strategy, "failed")
            case UpstreamAnswered():
                self.upstream_done(event.path, event.seconds)
            case ToolRound():
                for tool in event.tools:
                    self.tool_calls[(("tool", tool),)] += 1

    def render(self) -> str:
        lines = [
            "# HELP context_proxy_requests_total Requests answered, by route, model and status.",
            "# TYPE context_proxy_requests_total counter",
        ]
        lines += [f"context_proxy_requests_total{_fmt(k)} {v}" for k, v in sorted(self.requests.items())]
        lines += [
            "# HELP context_proxy_compactions_total Compaction attempts by strategy and outcome.",
            "# TYPE context_proxy_compactions_total counter",
        ]
        lines += [f"context_proxy_compactions_total{_fmt(k)} {v}" for k, v in sorted(self.compactions.items())]
        lines += [
            "# HELP context_proxy_tool_calls_total Calls of the proxy's own context tools it answered, by tool.",
            "# TYPE context_proxy_tool_calls_total counter",
        ]
        lines += [f"context_proxy_tool_calls_total{_fmt(k)} {v}" for k, v in sorted(self.tool_calls.items())]
        lines += [
            "# HELP context_proxy_in_flight_requests Requests being served now.",
            "# TYPE context_proxy_in_flight_requests gauge",
            f"context_proxy_in_flight_requests {self.in_flight}",
        ]
        for name, series, help_text in (
            ("context_proxy_request_seconds", self.request_latency, "Whole request latency."),
            ("context_proxy_upstream_seconds", self.upstream_latency, "Upstream latency to response headers."),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
            for labels, hist in sorted(series.items()):
                running = 0
                for bound, count in zip((*_BUCKETS, float("inf")), hist.counts, strict=True):
                    running += count
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    lines.append(f"{name}_bucket{_fmt(labels, (('le', le),))} {running}")
                lines.append(f"{name}_sum{_fmt(labels)} {hist.total}")
                lines.append(f"{name}_count{_fmt(labels)} {hist.n}")
        return "\n".join(lines) + "\n"

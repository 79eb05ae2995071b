"""Process metrics in the Prometheus text exposition format, written by hand.

Requests by route, model and status; request and upstream latency histograms; upstream
answers by status class; prompt and completion tokens by model; client prompt tokens,
saved tokens, cost and saved cost by model; compactions by strategy
and outcome with their latency; the proxy's own tool calls by tool; Redis errors; path-cache hits and misses; the process's
memory, CPU time and open descriptors. Updating is a dict lookup and an add (about a
microsecond a request; `prometheus_client` costs five times that and 12 MB of RSS).

No client can grow or corrupt the output: label values are escaped as the format
says (backslash, double quote, newline), a model outside the configured ones is
counted as `other`, routes are the router's canonical patterns, and any other label
keeps at most `_MAX_VALUES` distinct values before it folds into `other`.
"""

from __future__ import annotations

import bisect
import os
import resource
import time
from collections.abc import Iterable, Iterator
from typing import Protocol

from proxy.events import CompactionFailed, CompactionLanded, CompactionStale, Event, ToolRound, UpstreamAnswered

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_BOUNDS = (*(repr(b) for b in _BUCKETS), "+Inf")
_MAX_VALUES = 32
OTHER = "other"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

Values = tuple[str, ...]


class CacheCounts(Protocol):
    """What the path cache reports: lookups that found an entry, and those that did not."""

    hits: int
    misses: int


def escape(value: str) -> str:
    """A label value as the exposition format spells it inside double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Bounded:
    """A label's values: the allowed ones as they are, the first `_MAX_VALUES` others, then `other`."""

    def __init__(self, allowed: Iterable[str] = (), *, open_slots: int = _MAX_VALUES) -> None:
        self._seen = set(allowed)
        self._slots = open_slots

    def allow(self, names: Iterable[str]) -> None:
        self._seen.update(names)

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if self._slots <= 0:
            return OTHER
        self._slots -= 1
        self._seen.add(value)
        return value


class _Histogram:
    __slots__ = ("counts", "n", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_BUCKETS, value)] += 1
        self.total += value
        self.n += 1


class _Family:
    """One metric name with its help, type, label names and series."""

    def __init__(self, name: str, kind: str, help_text: str, labels: tuple[str, ...]) -> None:
        self.name, self.kind, self.help, self.labels = name, kind, help_text, labels
        self.values: dict[Values, float] = {}
        self.histograms: dict[Values, _Histogram] = {}

    def inc(self, values: Values, amount: float = 1) -> None:
        self.values[values] = self.values.get(values, 0) + amount

    def observe(self, values: Values, seconds: float) -> None:
        histogram = self.histograms.get(values)
        if histogram is None:
            histogram = self.histograms[values] = _Histogram()
        histogram.observe(seconds)

    def lines(self) -> Iterator[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"
        for values, value in sorted(self.values.items()):
            yield f"{self.name}{self._labels(values)} {number(value)}"
        for values, histogram in sorted(self.histograms.items()):
            running = 0
            for bound, count in zip(_BOUNDS, histogram.counts, strict=True):
                running += count
                yield f"{self.name}_bucket{self._labels(values, bound)} {running}"
            yield f"{self.name}_sum{self._labels(values)} {number(histogram.total)}"
            yield f"{self.name}_count{self._labels(values)} {histogram.n}"

    def _labels(self, values: Values, le: str | None = None) -> str:
        pairs = [f'{k}="{escape(v)}"' for k, v in zip(self.labels, values, strict=True)]
        if le is not None:
            pairs.append(f'le="{le}"')
        return "{" + ",".join(pairs) + "}" if pairs else ""


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Metrics:
    def __init__(self, models: Iterable[str] = ()) -> None:
        self.model = _Bounded(models, open_slots=0)
        """Configured models (and, later, routes by name) keep their name; any other is `other`."""
        self._strategy = _Bounded()
        self._tool = _Bounded()
        self.in_flight = 0
        self.cache: CacheCounts | None = None
        self._started = time.time()
        f = _Family
        self.requests = f("context_proxy_requests_total", "counter", "Requests answered, by route, model and status.",
                          ("route", "model", "status"))  # fmt: skip
        self.request_seconds = f("context_proxy_request_seconds", "histogram", "Whole request latency.", ("route",))
        self.upstream_seconds = f("context_proxy_upstream_seconds", "histogram",
                                  "Upstream latency to response headers.", ("route",))  # fmt: skip
        self.upstream_answers = f("context_proxy_upstream_responses_total", "counter",
                                  "Upstream answers to managed requests, by status class.", ("class",))  # fmt: skip
        self.prompt_tokens = f("context_proxy_prompt_tokens_total", "counter",
                               "Prompt tokens the upstream reported, by model.", ("model",))  # fmt: skip
        self.completion_tokens = f("context_proxy_completion_tokens_total", "counter",
                                   "Completion tokens the upstream reported, by model.", ("model",))  # fmt: skip
        self.client_prompt_tokens = f("context_proxy_client_prompt_tokens_total", "counter",
                                      "Prompt tokens of managed turns as their clients sent them, by model and mode.",
                                      ("model", "mode"))  # fmt: skip
        self.saved_tokens = f("context_proxy_saved_tokens_total", "counter",
                              "Client prompt tokens less those sent upstream (mode shadow: that managed mode would "
                              "have sent), by model and mode (negative: history supplied).", ("model", "mode"))  # fmt: skip
        self.cost = f("context_proxy_cost_usd_total", "counter",
                      "US dollars of managed turns as sent, by their usage and the model's price, by model and mode.",
                      ("model", "mode"))  # fmt: skip
        self.saved_cost = f("context_proxy_saved_cost_usd_total", "counter",
                            "US dollars of the saved prompt tokens at the model's input price, by model and mode.",
                            ("model", "mode"))  # fmt: skip
        self.compactions = f("context_proxy_compactions_total", "counter",
                             "Compaction attempts by strategy and outcome.", ("strategy", "outcome"))  # fmt: skip
        self.compaction_seconds = f("context_proxy_compaction_seconds", "histogram",
                                    "Compaction latency (the strategy's work, summarizer calls included).",
                                    ("strategy",))  # fmt: skip
        self.tool_calls = f("context_proxy_tool_calls_total", "counter",
                            "Calls of the proxy's own context tools it answered, by tool.", ("tool",))  # fmt: skip
        self.redis_errors = f("context_proxy_redis_errors_total", "counter",
                              "Requests that failed because Redis could not be reached.", ())  # fmt: skip
        self.redis_errors.inc((), 0)

    def request_done(self, route: str, model: str, status: int, seconds: float) -> None:
        self.requests.inc((route, self.model(model) if model else "", str(status)))
        self.request_seconds.observe((route,), seconds)

    def tokens(self, model: str, *, prompt: int, completion: int) -> None:
        label = (self.model(model),)
        self.prompt_tokens.inc(label, prompt)
        self.completion_tokens.inc(label, completion)

    def savings(
        self, model: str, mode: str, *, client: int, saved: int | None, costs: tuple[float, float] | None
    ) -> None:
        """A managed turn's prompt as its client sent it, what composing saved of it (in shadow
        mode: would have), and (with a price) what the turn cost as sent and what it saved."""
        label = (self.model(model), mode)
        self.client_prompt_tokens.inc(label, client)
        if saved is not None:
            self.saved_tokens.inc(label, saved)
        if costs is not None:
            self.cost.inc(label, costs[0])
            self.saved_cost.inc(label, costs[1])

    def redis_error(self) -> None:
        self.redis_errors.inc(())

    def observe(self, event: Event) -> None:
        """The metrics' view of a turn's events."""
        match event:
            case CompactionLanded() | CompactionStale() | CompactionFailed():
                strategy = self._strategy(event.strategy)
                outcome = {CompactionLanded: "landed", CompactionStale: "stale"}.get(type(event), "failed")
                self.compactions.inc((strategy, outcome))
                self.compaction_seconds.observe((strategy,), event.seconds)
            case ToolRound():
                for tool in event.tools:
                    self.tool_calls.inc((self._tool(tool),))
            case UpstreamAnswered():
                self.upstream_seconds.observe((event.path,), event.seconds)
                self.upstream_answers.inc((f"{event.status // 100}xx",))

    def render(self) -> str:
        families = (
            self.requests, self.request_seconds, self.upstream_seconds, self.upstream_answers, self.prompt_tokens,
            self.completion_tokens, self.client_prompt_tokens, self.saved_tokens, self.cost,
            self.saved_cost, self.compactions, self.compaction_seconds, self.tool_calls, self.redis_errors,
        )  # fmt: skip
        lines = [line for family in families for line in family.lines()]
        lines += _gauge("context_proxy_in_flight_requests", "Requests being served now.", self.in_flight)
        if self.cache is not None:
            lines += _counter("context_proxy_path_cache_hits_total", "Session loads that found a cached path.",
                              self.cache.hits)  # fmt: skip
            lines += _counter("context_proxy_path_cache_misses_total", "Session loads with no cached path.",
                              self.cache.misses)  # fmt: skip
        lines += self._process()
        return "\n".join(lines) + "\n"

    def _process(self) -> list[str]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        lines = _counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                         usage.ru_utime + usage.ru_stime)  # fmt: skip
        lines += _gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                        self._started)  # fmt: skip
        try:
            with open("/proc/self/statm") as statm:
                rss = int(statm.read().split()[1]) * _PAGE
            fds = len(os.listdir("/proc/self/fd"))
        except OSError:  # no /proc (not Linux): the two are left out
            return lines
        lines += _gauge("process_resident_memory_bytes", "Resident memory size in bytes.", rss)
        lines += _gauge("process_open_fds", "Number of open file descriptors.", fds)
        return lines


def _gauge(name: str, help_text: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {number(value)}"]


def _counter(name: str, help_text: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name} {number(value)}"]

"""An asyncio load generator: keep-alive, fixed concurrency, warm-up, then a fixed duration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import aiohttp

RequestFactory = Callable[[int], tuple[bytes, dict[str, str]]]
CpuMeter = Callable[[], dict[str, int]]
"""Cumulative CPU nanoseconds by process name (see `bench.procs.cpu_ns`)."""
CacheCounts = Callable[[], Awaitable[tuple[float, float]]]
"""The proxy's path-cache hits and misses so far."""
Target = tuple[str, RequestFactory, bool]
"""(URL, request factory, streamed?)"""
SETTLE_S = 0.002
"""The pause before a slice's closing CPU reading: the work a server does after its last answer
(a journal write once the body is sent) lands in the slice that caused it."""


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """CPU per measured request, ms, by process (when a meter was given)."""
    cache_misses: float | None = None
    """The share of the proxy's session loads that found no cached path (its metrics), if read."""

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def add(self, timing: Timing, *, stream: bool) -> None:
        if timing is None:
            self.errors += 1
            return
        self.latencies.append(timing[0])
        if stream and timing[1] is not None:
            self.ttfb.append(timing[1])

    def percentile(self, p: float, series: str = "latencies") -> float:
        values = sorted(getattr(self, series))
        if not values:
            return float("nan")
        return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def run_load(
    url: str,
    make_request: RequestFactory,
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    stream: bool = False,
    meter: CpuMeter | None = None,
) -> Result:
    """Requests that complete within the window (after the warm-up, for `duration`) are measured,
    and CPU over the same window: the ones still in flight at its end finish unmeasured (counting
    them would favour a slow target, whose window holds fewer requests)."""
    result = Result()
    cpu_from: dict[str, int] = {}
    cpu_to: dict[str, int] = {}
    counter = 0
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as http:
        loop = asyncio.get_running_loop()
        start = loop.time()
        measure_from = start + warmup
        stop = measure_from + duration
        if meter is not None:
            loop.call_at(measure_from, lambda: cpu_from.update(meter()))
            loop.call_at(stop, lambda: cpu_to.update(meter()))

        async def worker() -> None:
            nonlocal counter
            while loop.time() < stop:
                counter += 1
                timing = await _post(http, url, *make_request(counter))
                if measure_from <= loop.time() < stop:
                    result.add(timing, stream=stream)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.seconds = duration
        if cpu_from and cpu_to and result.latencies:
            result.cpu_ms = _per_request(cpu_from, cpu_to, len(result.latencies) + result.errors)
    return result


async def run_each(
    url: str,
    make_request: RequestFactory,
    count: int,
    *,
    concurrency: int,
    stream: bool = False,
    meter: CpuMeter | None = None,
) -> Result:
    """`count` requests (`make_request(0)` to `make_request(count - 1)`), each measured, with CPU
    over the whole run: a fixed set rather than a duration (a pool's sessions each served once)."""
    result = Result()
    pending = iter(range(count))
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def worker() -> None:
            for i in pending:
                result.add(await _post(http, url, *make_request(i)), stream=stream)

        cpu_from = meter() if meter is not None else {}
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.seconds = time.perf_counter() - started
        if meter is not None and count:
            result.cpu_ms = _per_request(cpu_from, meter(), count)
    return result


async def run_interleaved(
    targets: Mapping[str, Target],
    *,
    duration: float,
    slice_s: float,
    meter: CpuMeter,
    cache_counts: CacheCounts | None = None,
) -> dict[str, Result]:
    """One client, the targets taking turns in slices of `slice_s` until each has had `duration`
    of measured time, so that a drift of the machine's speed over the run (what runs on the core's
    sibling, the clock) hits them all alike and their ratios hold. Target by target in a row of
    its own, a c=1 CPU figure moved by up to a third from round to round.

    A first round of slices warms every connection up, unmeasured. In each slice the first request
    takes what the previous target left behind and is not measured; CPU and the cache counts are
    read after it and, `SETTLE_S` after its last answer, at the slice's end."""
    results = {name: Result() for name in targets}
    processes = meter()
    cpu = {name: dict.fromkeys(processes, 0) for name in targets}
    cache = {name: [0.0, 0.0] for name in targets}
    counter = 0
    https = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for name in targets}
    try:
        for slice_no in range(1 + max(1, round(duration / slice_s))):
            for name, (url, make_request, stream) in targets.items():
                http, result = https[name], results[name]
                counter += 1
                await _post(http, url, *make_request(counter))
                counts_from = await cache_counts() if cache_counts else (0.0, 0.0)
                cpu_from, started = meter(), time.perf_counter()
                while (ended := time.perf_counter()) - started < slice_s:
                    counter += 1
                    timing = await _post(http, url, *make_request(counter))
                    if slice_no:
                        result.add(timing, stream=stream)
                await asyncio.sleep(SETTLE_S)
                cpu_to = meter()
                counts_to = await cache_counts() if cache_counts else (0.0, 0.0)
                if slice_no:
                    result.seconds += ended - started
                    for process, ns in cpu_to.items():
                        cpu[name][process] += ns - cpu_from[process]
                    cache[name] = [
                        total + to - since for total, to, since in zip(cache[name], counts_to, counts_from, strict=True)
                    ]
    finally:
        for http in https.values():
            await http.close()
    for name, result in results.items():
        served = len(result.latencies) + result.errors
        result.cpu_ms = {process: ns / served / 1e6 for process, ns in cpu[name].items()} if served else {}
        hits, misses = cache[name]
        result.cache_misses = misses / (hits + misses) if hits + misses else None
    return results


def _per_request(cpu_from: dict[str, int], cpu_to: dict[str, int], count: int) -> dict[str, float]:
    """CPU ms per request, by process, between two readings of a `CpuMeter`."""
    return {name: (cpu_to[name] - cpu_from[name]) / count / 1e6 for name in cpu_to}


Timing = tuple[float, float | None] | None
"""(latency, time to the first byte) of a request answered 200; None for an error."""


async def _post(http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]) -> Timing:
    t0 = time.perf_counter()
    first = None
    try:
        async with http.post(url, data=body, headers=headers) as response:
            async for _ in response.content.iter_any():
                if first is None:
                    first = time.perf_counter()
            ok = response.status == 200
    except aiohttp.ClientError:
        return None
    return (time.perf_counter() - t0, None if first is None else first - t0) if ok else None

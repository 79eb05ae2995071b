"""An asyncio load generator: keep-alive, fixed concurrency, warm-up, then a fixed duration."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

RequestFactory = Callable[[int], tuple[bytes, dict[str, str]]]
CpuMeter = Callable[[], dict[str, int]]
"""Cumulative CPU nanoseconds by process name (see `bench.procs.cpu_ns`)."""


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

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

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def percentile(self, p: float, series: str = "latencies") -> float:
        values = sorted(getattr(self, series))
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


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
    """Requests that complete after the warm-up are measured; so is CPU, from then to the end."""
    result = Result()
    cpu_from: dict[str, int] = {}
    counter = 0
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as http:
        loop = asyncio.get_running_loop()
        start = loop.time()
        measure_from = start + warmup
        stop = measure_from + duration
        if meter is not None:
            loop.call_at(measure_from, lambda: cpu_from.update(meter()))

        async def worker() -> None:
            nonlocal counter
            while True:
                now = loop.time()
                if now >= stop:
                    return
                counter += 1
                body, headers = make_request(counter)
                t0 = time.perf_counter()
                first = None
                try:
                    async with http.post(url, data=body, headers=headers) as response:
                        async for _ in response.content.iter_any():
                            if first is None:
                                first = time.perf_counter()
                        ok = response.status == 200
                except aiohttp.ClientError:
                    ok = False
                t1 = time.perf_counter()
                if loop.time() < measure_from:
                    continue
                if not ok:
                    result.errors += 1
                    continue
                result.latencies.append(t1 - t0)
                if stream and first is not None:
                    result.ttfb.append(first - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.seconds = duration
        if meter is not None and cpu_from and result.latencies:
            cpu_to = meter()
            count = len(result.latencies) + result.errors
            result.cpu_ms = {name: (cpu_to[name] - cpu_from[name]) / count / 1e6 for name in cpu_to}
    return result

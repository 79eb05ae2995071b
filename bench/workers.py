"""`python -m bench --workers N`: the proxy as one process against `serve --workers N`, at c=32.

Starts the lean fake upstream, one embedded Redis, and two proxies on that Redis: one
worker and N workers. Round after round, interleaved so machine noise hits both alike:
(c) X-Context-Strategy: off, (d) a delta client on a fresh pool of 50-turn sessions,
(f-d) streaming through the proxy; req/s medians and the ratio N workers / 1 worker.
While each target runs, the CPU time of every process is sampled, to show where the
cores went (the proxy's processes, the load generator, which is this process, the
upstream, Redis) and what a request costs the proxy; each pair of figures is 1 / N workers.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.common import HEADERS, chat_body, free_port, stop_all, wait_up
from bench.load import run_load
from bench.sessions import populate, user_message
from proxy.store import EmbeddedRedis, Store

Factory = Callable[[int], tuple[bytes, dict[str, str]]]
PARTS = ("proxy", "load generator", "upstream", "redis")


@dataclass
class Runs:
    throughput: list[float] = field(default_factory=list)
    cores: dict[str, list[float]] = field(default_factory=dict)


class Machine:
    """The processes of the comparison, and the CPU seconds each part has used so far."""

    def __init__(self, workdir: Path, workers: int) -> None:
        self.workdir = workdir
        self.up_port = free_port()
        self.proxy_ports = {1: free_port(), workers: free_port()}
        self.children: list[subprocess.Popen[bytes]] = []
        self.redis = EmbeddedRedis(workdir / "data")

    async def start(self) -> str:
        url = await self.redis.start()
        self._launch(url)
        await wait_up(f"http://127.0.0.1:{self.up_port}/v1/models")
        for port in self.proxy_ports.values():
            await wait_up(f"http://127.0.0.1:{port}/readyz")
        return url

    def _launch(self, redis_url: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        commands = [["-m", "bench.upstream", "--port", str(self.up_port)]]
        for workers, port in self.proxy_ports.items():
            config = self.workdir / f"proxy-{workers}.yaml"
            config.write_text(
                f"server:\n  port: {port}\nupstream:\n  base_url: http://127.0.0.1:{self.up_port}/v1\n"
                f"redis:\n  url: {redis_url}\n"
            )
            commands.append(["-m", "proxy", "serve", "--config", str(config), "--workers", str(workers)])
        for command in commands:
            self.children.append(
                subprocess.Popen(
                    [sys.executable, *command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) of each part, its child processes included."""
        upstream, *proxies = (psutil.Process(child.pid) for child in self.children)
        redis_pid = int((self.workdir / "data" / "redis.pid").read_text())
        return {
            "proxy": sum(_cpu(p) + sum(_cpu(c) for c in p.children(recursive=True)) for p in proxies),
            "load generator": _cpu(psutil.Process()),
            "upstream": _cpu(upstream),
            "redis": _cpu(psutil.Process(redis_pid)),
        }

    async def stop(self) -> None:
        stop_all(self.children)
        await self.redis.stop()


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def compare_workers(workers: int, *, quick: bool, rounds: int, pool: int) -> None:
    duration, warmup = (1.0, 0.3) if quick else (3.0, 0.5)
    with tempfile.TemporaryDirectory(prefix="cpbench") as tmp:
        machine = Machine(Path(tmp), workers)
        try:
            url = await machine.start()
            store = await Store.connect(url)
            print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; c=32, {rounds} rounds")
            results: dict[tuple[str, int], Runs] = {}
            for round_no in range(rounds):
                for count, port in machine.proxy_ports.items():
                    names = [f"w{count}-r{round_no}-{i}" for i in range(pool)]
                    await populate(store, url, names, 50)
                    for name, factory, stream in _targets(names):
                        before, started = machine.cpu_seconds(), asyncio.get_running_loop().time()
                        result = await run_load(
                            f"http://127.0.0.1:{port}/v1/chat/completions",
                            factory,
                            concurrency=32,
                            duration=duration,
                            warmup=warmup,
                            stream=stream,
                        )
                        wall = asyncio.get_running_loop().time() - started
                        after = machine.cpu_seconds()
                        runs = results.setdefault((name, count), Runs())
                        runs.throughput.append(result.throughput)
                        for part in PARTS:
                            runs.cores.setdefault(part, []).append((after[part] - before[part]) / wall)
                        print(
                            f"  round {round_no + 1} workers={count} {name:18} {result.throughput:8.0f} req/s"
                            f"  errors={result.errors}",
                            file=sys.stderr,
                        )
            await store.close()
            print(_table(results, workers))
        finally:
            await machine.stop()


def _targets(names: list[str]) -> list[tuple[str, Factory, bool]]:
    one = chat_body([user_message(0)])

    def delta(i: int, *, stream: bool = False) -> tuple[bytes, dict[str, str]]:
        body = chat_body([user_message(1000 + i)], stream=stream)
        return body, {**HEADERS, "X-Session-Id": names[i % len(names)]}

    return [
        ("c proxy off", lambda i: (one, {**HEADERS, "X-Context-Strategy": "off"}), False),
        ("d proxy delta 50", delta, False),
        ("f-d stream proxy", lambda i: delta(i, stream=True), True),
    ]


def _table(results: dict[tuple[str, int], Runs], workers: int) -> str:
    """req/s, the ratio, the proxy's CPU per request, and the cores each part used (1 worker / N)."""
    lines = [
        f"\n| scenario (c=32) | 1 worker req/s | {workers} workers req/s | ratio | proxy CPU ms/request | "
        + " | ".join(f"cores: {part}" for part in PARTS)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(PARTS),
    ]
    for name in dict.fromkeys(name for name, _ in results):
        one, many = results[(name, 1)], results[(name, workers)]
        rps = [statistics.median(runs.throughput) for runs in (one, many)]
        cores = {part: [statistics.median(runs.cores[part]) for runs in (one, many)] for part in PARTS}
        cpu = " / ".join(f"{1000 * used / rate:.2f}" for used, rate in zip(cores["proxy"], rps, strict=True))
        used = " | ".join(f"{a:.2f} / {b:.2f}" for a, b in cores.values())
        lines.append(f"| {name} | {rps[0]:.0f} | {rps[1]:.0f} | {rps[1] / rps[0]:.2f} | {cpu} | {used} |")
    return "\n".join(lines)

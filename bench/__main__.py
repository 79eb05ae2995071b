"""`python -m bench [--quick]`: the proxy against the upstream directly, in one run.

Targets (one client: every row at once, taking turns in slices of 0.1 s so that machine noise
hits all alike, `bench.load.run_interleaved`; 32 clients: row after row; both round after round):
  (a) direct to the upstream          (b) a bare aiohttp relay
  (g) the floor relay: parse, one script before and one after (bench/floor.py)
  (c) proxy, X-Context-Strategy: off  (d) proxy, delta client, 50-turn sessions
  (e) proxy, full-history client, 50 turns
  (f) streaming, 20 chunks: direct (f-a) and through the proxy (f-d)
  (h) the Responses door and (i) the Messages door, delta clients on fresh pools like (d)'s
  (k) an agent: (d) with 16 tool schemas (27 KB) in every request, on a fresh pool like (d)'s
  (j) cold loads: (d)'s request on a fresh pool, each session served once (its first turn
      in this process: its 50 turns loaded from Redis)
at concurrency 1 and 32; medians over rounds, with each process's CPU per request (the
serving process and the Redis server apart). Then per-turn proxy CPU at 10, 100 and
1,000 turns of history, RSS idle and under c=64, Redis memory per turn of text
(bench/memory.py), and issue 25's targets, each with its figure.

`python -m bench --workers N [--quick]` runs only the comparison of one worker with N
workers instead (bench/workers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial

import aiohttp
import psutil

from bench.common import AGENT_TOOLS, HEADERS, chat_body, messages_body, responses_body
from bench.load import RequestFactory, Result, Target, run_each, run_interleaved, run_load
from bench.memory import short_turns_memory
from bench.procs import Processes, cpu_ns, running
from bench.report import Growth, growth_table, table, targets
from bench.sessions import history, populate, user_message
from bench.workers import compare_workers
from proxy.store import Store

OWN_POOL = ("h proxy responses 50", "i proxy messages 50", "k proxy tools 50")
"""The doors' and the agent's rows, compared with (d): each on a fresh pool of its own."""
PRIMED = ("d proxy delta 50", "e proxy full 50", "f-d stream proxy", *OWN_POOL)
"""Rows of warm turns: each serves every session of its pool once before its warm-up, so what
it measures is an ongoing conversation's turn, whatever the run's length (the cold loads are (j))."""
COLD = "j proxy delta 50 cold"
MANY = 32
"""The concurrency of the rows that do not interleave: each row runs alone, one after the other."""
SLICE_S = 0.1
"""One client's rows take turns in slices this long (`bench.load.run_interleaved`)."""
ONE_CLIENT_POOL = 64
"""Sessions per pool for one client: its six rows of warm turns on pools of their own interleave,
and all of them must stay in the proxy's path cache (`CACHE_MESSAGES`) through a round: 6 pools
of 64 sessions of 50 turns is 38,400 messages, and a full run's 3 s a row at about 500 req/s
adds 18,000."""
PRIMER_OFFSET = 10**6
"""The primers' request numbers start here (a multiple of any pool size up to a million, so
request i of either reaches the same session)."""


def _shifted(
    factory: Callable[[int], tuple[bytes, dict[str, str]]], offset: int, i: int
) -> tuple[bytes, dict[str, str]]:
    return factory(offset + i)


class Bench:
    def __init__(self, procs: Processes, store: Store, redis_url: str, *, quick: bool, pool_size: int) -> None:
        self.procs = procs
        self.store = store
        self.redis_url = redis_url
        self.quick = quick
        self.duration = 1.0 if quick else 3.0
        self.warmup = 0.3 if quick else 0.5
        self.pool_size = pool_size
        self.pool_round = 0

    def url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    async def fresh_pool(self, depth: int, size: int) -> list[str]:
        self.pool_round += 1
        names = [f"pool{self.pool_round}-{depth}-{i}" for i in range(size)]
        await populate(self.store, self.redis_url, names, depth)
        return names

    def targets(self, pool: list[str]) -> dict[str, Target]:
        p = self.procs
        one = chat_body([user_message(0)])
        full = history(50)
        streamed = chat_body([user_message(0)], stream=True)
        return {
            "a direct": (self.url(p.up_port), lambda i: (one, HEADERS), False),
            "b bare relay": (self.url(p.relay_port), lambda i: (one, HEADERS), False),
            "g floor relay": (
                self.url(p.floor_port),
                lambda i: (chat_body([user_message(1000 + i)]), {**HEADERS, "X-Session-Id": pool[i % len(pool)]}),
                False,
            ),
            "c proxy off": (self.url(p.proxy_port), lambda i: (one, {**HEADERS, "X-Context-Strategy": "off"}), False),
            "d proxy delta 50": (
                self.url(p.proxy_port),
                lambda i: (chat_body([user_message(1000 + i)]), {**HEADERS, "X-Session-Id": pool[i % len(pool)]}),
                False,
            ),
            "e proxy full 50": (
                self.url(p.proxy_port),
                lambda i: (
                    chat_body([*full, user_message(1000 + i)]),
                    {**HEADERS, "X-Session-Id": pool[i % len(pool)]},
                ),
                False,
            ),
            "h proxy responses 50": (
                f"http://127.0.0.1:{p.proxy_port}/v1/responses",
                lambda i: (
                    responses_body(user_message(1000 + i)["content"]),
                    {**HEADERS, "X-Session-Id": pool[i % len(pool)]},
                ),
                False,
            ),
            "i proxy messages 50": (
                f"http://127.0.0.1:{p.proxy_port}/v1/messages",
                lambda i: (
                    messages_body(user_message(1000 + i)["content"]),
                    {**HEADERS, "X-Session-Id": pool[i % len(pool)]},
                ),
                False,
            ),
            "k proxy tools 50": (
                self.url(p.proxy_port),
                lambda i: (
                    chat_body([user_message(1000 + i)], tools=AGENT_TOOLS),
                    {**HEADERS, "X-Session-Id": pool[i % len(pool)]},
                ),
                False,
            ),
            "f-a stream direct": (self.url(p.up_port), lambda i: (streamed, HEADERS), True),
            "f-d stream proxy": (
                self.url(p.proxy_port),
                lambda i: (
                    chat_body([user_message(1000 + i)], stream=True),
                    {**HEADERS, "X-Session-Id": pool[i % len(pool)]},
                ),
                True,
            ),
        }

    async def rounds(self, count: int) -> dict[tuple[str, int], list[Result]]:
        results: dict[tuple[str, int], list[Result]] = {}
        for round_no in range(count):
            one_client = await run_interleaved(
                await self.one_client_rows(), duration=self.duration, slice_s=SLICE_S, meter=self.procs.cpu,
                cache_counts=self.cache_counts,
            )  # fmt: skip
            for name, result in one_client.items():
                self.note(results, name, 1, round_no, result)
            await self.cold(results, 1, round_no)
            pool = await self.fresh_pool(50, self.pool_size)
            for name, (url, factory, stream) in self.targets(pool).items():
                if name in OWN_POOL:  # the same sessions as (d) had, not the ones (d) and (e) grew
                    url, factory, stream = self.targets(await self.fresh_pool(50, self.pool_size))[name]
                if name in PRIMED:  # other messages than the measured requests'
                    await self.prime(url, factory, stream, self.pool_size, MANY)
                result = await self.with_misses(run_load(
                    url, factory, concurrency=MANY, duration=self.duration, warmup=self.warmup,
                    stream=stream, meter=self.procs.cpu,
                ))  # fmt: skip
                self.note(results, name, MANY, round_no, result)
            await self.cold(results, MANY, round_no)
        return results

    async def one_client_rows(self) -> dict[str, Target]:
        """Every target for one client; each row of warm turns on a fresh pool of its own (the slices
        interleave the rows, so no two may write one session), served once before it is measured."""
        size = min(self.pool_size, ONE_CLIENT_POOL)
        rows = self.targets(await self.fresh_pool(50, size))
        for name in PRIMED:
            if name != "d proxy delta 50":  # (d) keeps the first pool; (g) uses its names, not its keys
                rows[name] = self.targets(await self.fresh_pool(50, size))[name]
            await self.prime(*rows[name], size, 1)
        return rows

    @staticmethod
    async def prime(url: str, factory: RequestFactory, stream: bool, size: int, concurrency: int) -> None:
        """Serve each session of a pool once, with other messages than the measured requests'."""
        primer = partial(_shifted, factory, PRIMER_OFFSET)
        await run_each(url, primer, size, concurrency=concurrency, stream=stream)

    async def cold(self, results: dict[tuple[str, int], list[Result]], concurrency: int, round_no: int) -> None:
        """(j): (d)'s request on a fresh pool, each session served once."""
        url, factory, _ = self.targets(await self.fresh_pool(50, self.pool_size))["d proxy delta 50"]
        cold = await self.with_misses(
            run_each(url, factory, self.pool_size, concurrency=concurrency, meter=self.procs.cpu)
        )
        self.note(results, COLD, concurrency, round_no, cold)

    async def with_misses(self, run: Awaitable[Result]) -> Result:
        """`run`'s result, with the share of the proxy's session loads meanwhile that missed its cache."""
        before = await self.cache_counts()
        result = await run
        hits, misses = (now - then for now, then in zip(await self.cache_counts(), before, strict=True))
        result.cache_misses = misses / (hits + misses) if hits + misses else None
        return result

    async def cache_counts(self) -> tuple[float, float]:
        """The proxy's path-cache hits and misses so far (`/metrics`)."""
        counts = {"context_proxy_path_cache_hits_total": 0.0, "context_proxy_path_cache_misses_total": 0.0}
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{self.procs.proxy_port}/metrics") as r:
            for line in (await r.text()).splitlines():
                name, _, value = line.partition(" ")
                if name in counts:
                    counts[name] = float(value)
        return counts["context_proxy_path_cache_hits_total"], counts["context_proxy_path_cache_misses_total"]

    @staticmethod
    def note(
        results: dict[tuple[str, int], list[Result]], name: str, concurrency: int, round_no: int, result: Result
    ) -> None:
        results.setdefault((name, concurrency), []).append(result)
        print(
            f"  round {round_no + 1} c={concurrency:<2} {name:20} {result.throughput:8.0f} req/s  errors={result.errors}",
            file=sys.stderr,
        )

    async def cpu_growth(self) -> Growth:
        """Per-turn proxy CPU for each (history depth, full-history?), one sample per interleaved round."""
        rounds, count = (3, 15) if self.quick else (5, 40)
        samples: Growth = {}
        pools = {depth: await self.fresh_pool(depth, rounds * count * 2) for depth in (10, 100, 1000)}
        for round_no in range(rounds):
            for depth, pool in pools.items():
                for full_history in (False, True):
                    offset = (round_no * 2 + full_history) * count
                    sessions = pool[offset : offset + count]
                    samples.setdefault((depth, full_history), []).append(
                        await self.cpu_per_turn(depth, sessions, full_history=full_history)
                    )
        return samples

    async def cpu_per_turn(self, depth: int, pool: list[str], *, full_history: bool) -> float:
        """Proxy CPU of one more turn in an ongoing conversation that has `depth` turns.

        Each session takes one turn unmeasured (its first after a restart), then one
        measured; CPU is the proxy process's run time, in nanoseconds."""
        count = len(pool)
        conversation = history(depth)
        proxy = self.procs.pid("proxy")
        total = 0
        async with aiohttp.ClientSession() as http:
            for i, session in enumerate(pool):
                for step in (0, 1):
                    messages = (
                        [*conversation, user_message(5000 + i)] if full_history else [user_message(5000 + i + step)]
                    )
                    before = cpu_ns(proxy)
                    async with http.post(
                        self.url(self.procs.proxy_port),
                        data=chat_body(messages),
                        headers={**HEADERS, "X-Session-Id": session},
                    ) as r:
                        await r.read()
                        assert r.status == 200, await r.text()
                    if step:
                        total += cpu_ns(proxy) - before
        return total / count / 1e6

    async def idle_rss(self) -> float:
        """RSS after start and one request (the tokenizer loaded), before any load."""
        async with aiohttp.ClientSession() as http:
            await http.post(self.url(self.procs.proxy_port), data=chat_body([user_message(0)]), headers=HEADERS)
        return self.procs.rss_mb("proxy")

    async def peak_rss(self) -> dict[str, float]:
        """Peak RSS of the proxy and of its embedded server under c=64 delta clients."""
        peak = {name: self.procs.rss_mb(name) for name in ("proxy", "redis")}
        pool = await self.fresh_pool(50, self.pool_size)
        url, factory, _ = self.targets(pool)["d proxy delta 50"]
        task = asyncio.create_task(run_load(url, factory, concurrency=64, duration=self.duration * 2, warmup=0.2))
        while not task.done():
            peak = {name: max(peak[name], self.procs.rss_mb(name)) for name in peak}
            await asyncio.sleep(0.05)
        await task
        return peak


async def main_async(quick: bool, rounds: int, pool: int) -> None:
    async with running("cpbench") as (procs, url):
        store = await Store.connect(url)
        bench = Bench(procs, store, url, quick=quick, pool_size=pool)
        idle = await bench.idle_rss()
        started = time.time()
        print(
            f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, Python {sys.version.split()[0]}"
        )
        print(
            f"c=1: the rows interleaved in slices of {SLICE_S} s; (d), (e), (f-d), (h), (i), (k) each on a fresh "
            f"pool of {min(pool, ONE_CLIENT_POOL)} sessions of 50 turns a round ((g) on (d)'s names). c=32: row "
            f"after row; (d), (e), (f-d), (g) on one fresh pool of {pool} a round, (h), (i), (k) on their own. "
            "Each session served once before a row of warm turns is measured; (j): the cold loads"
        )
        results = await bench.rounds(rounds)
        print("\n" + table(results))
        peak = await bench.peak_rss()
        print(
            f"\nRSS: proxy idle after start {idle:.0f} MB; under c=64 (delta clients, {pool} sessions) "
            f"proxy {peak['proxy']:.0f} MB, embedded server {peak['redis']:.0f} MB"
        )
        growth = await bench.cpu_growth()
        print("\n" + growth_table(growth))
        memory = await short_turns_memory(f"http://127.0.0.1:{procs.proxy_port}", url)
        print("\n" + targets(results, growth, peak, memory))
        print(f"(run took {time.time() - started:.0f} s)")
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short runs, two rounds: under a minute")
    parser.add_argument("--rounds", type=int, help="rounds of interleaved targets (default 3, quick 2)")
    parser.add_argument("--pool", type=int, default=200, help="sessions per pool (and the cold loads of (j) a round)")
    parser.add_argument(
        "--workers", type=int, help="instead: the proxy with 1 worker against this many, at c=32 (see bench/workers.py)"
    )
    args = parser.parse_args()
    if args.workers is not None and args.workers < 2:
        parser.error("--workers: compare one worker with 2 or more")
    rounds = args.rounds or (2 if args.quick else 3)
    if args.workers:
        asyncio.run(compare_workers(args.workers, quick=args.quick, rounds=rounds, pool=args.pool))
    else:
        asyncio.run(main_async(args.quick, rounds, args.pool))


if __name__ == "__main__":
    main()

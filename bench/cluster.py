"""`python -m bench.cluster`: the managed path on one Redis node against a Redis/Valkey Cluster.

Targets, one proxy process each, all on one lean upstream:
  embedded      the default: a private server on a unix socket
  node          one valkey-server over TCP on loopback (`redis.url: redis://...`)
  cluster       3 primaries + 3 replicas on loopback (`redis.cluster: true`)
  cluster+wait  the same cluster with `redis.wait_replicas: 1`
Delta clients on fresh sessions (a pool of 200 per run), at c=1 (latency) and c=32
(throughput), interleaved round after round; medians are reported. CPU per request is
the proxy's main thread's run time over a run divided by the requests it answered.
Then what `redis.wait_replicas: 1` costs a journal write: sequential `append_turn`
calls on the cluster with and without WAIT, from this process; and the store client's
own CPU for one turn's two store calls (`load_context`, `append_turn`), on one node and
on the cluster: the only part of the managed path that differs between them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import HEADERS, chat_body, free_port, wait_up
from bench.load import Result, run_load
from bench.sessions import TENANT, user_message
from proxy.store import SessionKeys, Store
from tests.cluster.servers import LocalCluster, Node

POOL = 200


@dataclass
class Target:
    name: str
    port: int
    process: subprocess.Popen[bytes]

    def cpu_ns(self) -> int:
        with open(f"/proc/{self.process.pid}/schedstat") as handle:
            return int(handle.read().split()[0])


def _start_proxy(workdir: Path, name: str, upstream: str, redis: str) -> Target:
    port = free_port()
    config = workdir / f"{name}.yaml"
    config.write_text(f"server:\n  port: {port}\nupstream:\n  base_url: {upstream}/v1\nredis:\n{redis}")
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / f"{name}.log").open("w"),
    )
    return Target(name, port, process)


def _start_upstream(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(port)])


async def _run(target: Target, run: str, concurrency: int, duration: float) -> tuple[Result, float]:
    """One measured run on fresh sessions; returns the load's result and CPU ms per answered request."""

    def request(i: int) -> tuple[bytes, dict[str, str]]:
        return chat_body([user_message(i)]), {**HEADERS, "X-Session-Id": f"{run}-{i % POOL}"}

    url = f"http://127.0.0.1:{target.port}/v1/chat/completions"
    before = target.cpu_ns()
    result = await run_load(url, request, concurrency=concurrency, duration=duration, warmup=0.0)
    cpu_ms = (target.cpu_ns() - before) / 1e6
    return result, cpu_ms / max(1, len(result.latencies) + result.errors)


async def _append_latency(seeds: str, wait_replicas: int, count: int = 400) -> tuple[float, float]:
    """p50 and p99 (ms) of one journal write, sequential, on a session of its own each time."""
    store = await Store.connect(seeds, cluster=True, wait_replicas=wait_replicas)
    record = {"input": [user_message(0)], "status": "completed"}
    timings = []
    for n in range(count):
        keys = SessionKeys(TENANT, f"wait{wait_replicas}-{n % 50}")
        started = time.perf_counter()
        await store.append_turn(keys, record, parent=None, completed=True, hashes=["h"], ttl_s=600, usage=None)
        timings.append(time.perf_counter() - started)
    await store.close()
    timings.sort()
    return timings[len(timings) // 2] * 1000, timings[int(len(timings) * 0.99)] * 1000


async def _store_cpu(url: str, *, cluster: bool, count: int = 600) -> float:
    """This thread's CPU (ms) for one turn's store calls, median of 3 batches of `count`."""
    store = await Store.connect(url, cluster=cluster)
    record = {"input": [user_message(0)], "status": "completed"}
    batches = []
    for batch in range(3):
        started = time.thread_time()
        for n in range(count):
            keys = SessionKeys(TENANT, f"cpu{batch}-{n % 50}")
            await store.load_context(keys, 0, ["h"])
            await store.append_turn(keys, record, parent=None, completed=True, hashes=["h"], ttl_s=600, usage=None)
        batches.append((time.thread_time() - started) / count * 1000)
    await store.close()
    return statistics.median(batches)


async def main_async(rounds: int, duration: float) -> None:
    with tempfile.TemporaryDirectory(prefix="cpcluster") as tmp:
        workdir = Path(tmp)
        cluster = LocalCluster(workdir / "cluster")
        node_port = free_port()
        up_port = free_port()
        upstream = f"http://127.0.0.1:{up_port}"
        upstream_process = _start_upstream(up_port)
        node = Node(node_port, 0, workdir / "node", cluster=False)
        targets: list[Target] = []
        try:
            await asyncio.to_thread(node.start)
            await asyncio.to_thread(cluster.start)
            seeds = cluster.seeds
            targets = [
                _start_proxy(workdir, "embedded", upstream, f"  url: embedded\n  data_dir: {workdir / 'data'}\n"),
                _start_proxy(workdir, "node", upstream, f"  url: redis://127.0.0.1:{node_port}/0\n"),
                _start_proxy(workdir, "cluster", upstream, f"  url: {seeds}\n  cluster: true\n"),
                _start_proxy(
                    workdir, "cluster+wait", upstream, f"  url: {seeds}\n  cluster: true\n  wait_replicas: 1\n"
                ),
            ]
            await wait_up(f"{upstream}/v1/models")
            for target in targets:
                await wait_up(f"http://127.0.0.1:{target.port}/healthz")
                await _run(target, f"warm-{target.name.replace('+', '-')}", 4, 0.5)
            samples: dict[tuple[str, int], list[tuple[Result, float]]] = {}
            for round_no in range(rounds):
                for concurrency in (1, 32):
                    for target in targets:
                        run = f"r{round_no}-c{concurrency}-{target.name.replace('+', '-')}"
                        outcome = await _run(target, run, concurrency, duration)
                        samples.setdefault((target.name, concurrency), []).append(outcome)
                        print(f"  {run}: {outcome[0].throughput:.0f} req/s errors={outcome[0].errors}", file=sys.stderr)
            print(
                f"machine: {os.cpu_count()} cores; {rounds} rounds of {duration:.0f} s; delta clients, fresh sessions"
            )
            print("| target | c | req/s | p50 ms | p99 ms | proxy CPU ms/request | errors |")
            print("|---|---|---|---|---|---|---|")
            for (name, concurrency), runs in samples.items():
                rps = statistics.median(r.throughput for r, _ in runs)
                p50 = statistics.median(r.percentile(50) for r, _ in runs) * 1000
                p99 = statistics.median(r.percentile(99) for r, _ in runs) * 1000
                cpu = statistics.median(c for _, c in runs)
                errors = sum(r.errors for r, _ in runs)
                print(f"| {name} | {concurrency} | {rps:.0f} | {p50:.2f} | {p99:.2f} | {cpu:.2f} | {errors} |")
            print("\n| store client CPU per turn (load + append) | ms |\n|---|---|")
            for name, url, clustered in (("node", node.url, False), ("cluster", seeds, True)) * 2:
                print(f"| {name} | {await _store_cpu(url, cluster=clustered):.3f} |")
            print("\n| journal write on the cluster | p50 ms | p99 ms |\n|---|---|---|")
            for wait in (0, 1, 0, 1):
                p50, p99 = await _append_latency(seeds, wait)
                print(f"| wait_replicas: {wait} | {p50:.3f} | {p99:.3f} |")
        finally:
            if os.environ.get("BENCH_LOGS"):
                for target in targets:
                    print((workdir / f"{target.name}.log").read_text()[-3000:], file=sys.stderr)
            for process in [t.process for t in targets] + [upstream_process]:
                process.terminate()
            for process in [t.process for t in targets] + [upstream_process]:
                process.wait(timeout=20)
            node.kill()
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    args = parser.parse_args()
    asyncio.run(main_async(args.rounds, args.duration))


if __name__ == "__main__":
    main()

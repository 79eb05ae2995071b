"""The benchmark's processes: the fake upstream, the two relays, the proxy and its Redis.

CPU is read per process from `/proc/<pid>/task/*/schedstat` (nanoseconds of run time,
every thread: the proxy's tokenizer threads, the server's I/O threads), so each process
is reported apart: the proxy's own cost is never mixed with its embedded server's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import psutil

from bench.common import free_port, stop_all, wait_up
from proxy.store import running_server_url

CACHE_MESSAGES = 60_000
"""The proxy's path cache, sized for a warm row's pool as it grows: 200 sessions of 50 turns
grow by 30-50 turns each in a full run's 3.5 s at c=32, past the default 25,000 messages, and an
LRU cache that a pool cycles through loses every entry just before its next turn (21-33% of a
full run's c=32 loads missed with the default)."""


def cpu_ns(pid: int) -> int:
    """Run time of every thread of the process, in nanoseconds (threads that ended are lost)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        except FileNotFoundError:
            continue
    return total


class Processes:
    def __init__(
        self, workdir: Path, *, under: Mapping[str, Sequence[str]] | None = None, wait_s: float = 10.0
    ) -> None:
        self.workdir = workdir
        self.under = under or {}
        """A command to run some children under, by name (`bench/instructions.py`: valgrind)."""
        self.wait_s = wait_s
        self.up_port, self.relay_port, self.floor_port, self.proxy_port = (free_port() for _ in range(4))
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.redis_pid = 0

    @property
    def upstream(self) -> str:
        return f"http://127.0.0.1:{self.up_port}"

    async def start(self) -> None:
        """Upstream, bare relay and proxy; then the floor relay on the proxy's embedded server."""
        config = self.workdir / "bench.yaml"
        config.write_text(
            f"server:\n  port: {self.proxy_port}\n  cache_messages: {CACHE_MESSAGES}\n"
            f"upstream:\n  base_url: {self.upstream}/v1\n"
            f"redis:\n  url: embedded\n  data_dir: {self.data_dir}\n"
        )
        self._spawn("upstream", "bench.upstream", "--port", str(self.up_port))
        self._spawn("relay", "bench.relay", "--port", str(self.relay_port), "--upstream", self.upstream)
        self._spawn("proxy", "proxy", "serve", "--config", str(config))
        await wait_up(f"{self.upstream}/v1/models", self.wait_s)
        await wait_up(f"http://127.0.0.1:{self.proxy_port}/healthz", self.wait_s)
        self.redis_pid = int((self.data_dir / "redis.pid").read_text().strip())
        sock = str(self.data_dir / "redis.sock")
        self._spawn("floor", "bench.floor", "--port", str(self.floor_port), "--upstream", self.upstream, "--sock", sock)
        await wait_up(f"http://127.0.0.1:{self.floor_port}/v1/models", self.wait_s)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def _spawn(self, name: str, module: str, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [*self.under.get(name, ()), sys.executable, "-m", module, *args]
        self.children[name] = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def pid(self, name: str) -> int:
        return self.redis_pid if name == "redis" else self.children[name].pid

    def cpu(self) -> dict[str, int]:
        """Cumulative CPU ns of each process (a `bench.load.CpuMeter`)."""
        return {name: cpu_ns(self.pid(name)) for name in ("upstream", "relay", "floor", "proxy", "redis")}

    def rss_mb(self, name: str) -> float:
        return float(psutil.Process(self.pid(name)).memory_info().rss / 2**20)

    def stop(self) -> None:
        stop_all(list(self.children.values()))


@asynccontextmanager
async def running(
    prefix: str, *, under: Callable[[Path], Mapping[str, Sequence[str]]] | None = None, wait_s: float = 10.0
) -> AsyncIterator[tuple[Processes, str]]:
    """The benchmark's processes in a fresh directory, and the URL of the proxy's embedded server;
    `under(directory)`: the commands some of them run under."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        procs = Processes(Path(tmp), under=under(Path(tmp)) if under else None, wait_s=wait_s)
        try:
            await procs.start()
            url = running_server_url(procs.data_dir)
            assert url, "the proxy's embedded redis is not running"
            yield procs, url
        finally:
            procs.stop()

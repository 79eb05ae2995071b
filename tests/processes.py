"""Running `context-proxy serve` as a real process in tests: a free port, start, wait until ready."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import aiohttp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start(config: Path, *args: str, env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy", "serve", "--config", str(config), *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
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


def server_pid(data_dir: Path) -> int:
    """The pid of the embedded server a proxy runs on `data_dir`, from the server's pidfile."""
    return int((data_dir / "redis.pid").read_text())


def is_running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return ") Z " not in stat

"""What every benchmark run shares: ports, waiting for a server, the request body and headers."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from typing import Any

import aiohttp
import orjson

from bench.sessions import API_KEY

MODEL = "bench-model"
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_up(url: str, seconds: float = 10.0) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(int(seconds / 0.05)):
            try:
                async with http.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


AGENT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"Tool {i}: " + " ".join(f"reads part {j} of file {i * j} when asked" for j in range(40)),
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string", "description": "The absolute path to the file"}},
                "required": ["file_path"],
            },
        },
    }
    for i in range(16)
]
"""An agent's tool list: 16 schemas, about 27 KB of JSON, sent with every turn."""


def chat_body(
    messages: list[Any], *, stream: bool = False, user: str | None = None, tools: list[Any] | None = None
) -> bytes:
    extra = {**({"user": user} if user else {}), **({"tools": tools} if tools else {})}
    return orjson.dumps({"model": MODEL, "messages": messages, "stream": stream, **extra})


def responses_body(text: str) -> bytes:
    """A Responses API request (a delta client: the session names the rest)."""
    return orjson.dumps({"model": MODEL, "input": text})


def messages_body(text: str) -> bytes:
    """An Anthropic Messages request (a delta client: the session names the rest)."""
    return orjson.dumps({"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": text}]})


def stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each (last started first), then wait; kill what has not stopped in 30 s."""
    for child in reversed(children):
        child.terminate()
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()

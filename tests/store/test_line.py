"""The journal's pipelined connection (`proxy/store/line.py`) on a real server, and on one that stops answering."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from proxy.store.embedded import find_server_binary
from proxy.store.line import Line


async def test_concurrent_calls_get_their_own_replies_in_order(redis_url: str) -> None:
    line = Line.for_url(redis_url)
    assert line is not None
    replies = await asyncio.gather(*(line.call("ECHO", f"call {n}") for n in range(50)))
    assert replies == [f"call {n}".encode() for n in range(50)]
    with pytest.raises(NoScriptError):
        await line.call("EVALSHA", "0" * 40, 0)
    with pytest.raises(ResponseError, match="unknown command"):
        await line.call("NO-SUCH-COMMAND")
    assert await line.call("PING") == b"PONG", "an error reply leaves the connection usable"
    line.close()


async def test_a_server_that_stops_answering_fails_the_call_and_the_next_connects_again(tmp_path: Path) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # reads nothing, answers nothing

    server = await asyncio.start_unix_server(silent, path=str(tmp_path / "silent.sock"))
    line = Line({"path": str(tmp_path / "silent.sock")}, timeout_s=0.2)
    with pytest.raises(TimeoutError):
        await line.call("PING")
    with pytest.raises(TimeoutError):
        await line.call("PING")
    assert len(accepted) == 2, "a call with no reply in time closes its connection; the next opens another"
    first = asyncio.create_task(line.call("PING"))
    await asyncio.sleep(0.1)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ConnectionError):
        await line.call("PING")  # on the same connection: fails when the first call gives up on it
    assert asyncio.get_running_loop().time() - started < 0.18, "not after a timeout of its own"
    with pytest.raises(TimeoutError):
        await first
    server.close()
    await server.wait_closed()


async def test_a_tcp_server_with_a_password_and_a_database(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(  # noqa: ASYNC220 (returns at once)
        [find_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--requirepass", "s3cret",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        check = aioredis.Redis(port=port, password="s3cret", db=3)
        for _ in range(100):
            with contextlib.suppress(ConnectionError):
                await check.ping()
                break
            await asyncio.sleep(0.05)
        line = Line.for_url(f"redis://:s3cret@127.0.0.1:{port}/3")
        assert line is not None
        assert await line.call("SET", "k", "v") == b"OK"
        assert await check.get("k") == b"v", "on the URL's database, authenticated"
        line.close()
        wrong = Line.for_url(f"redis://:wrong@127.0.0.1:{port}/3")
        assert wrong is not None
        with pytest.raises(ConnectionError):  # redis-py's AuthenticationError: a 503, not a 500
            await wrong.call("PING")
        await check.aclose()
    finally:
        server.kill()
        server.wait()

"""The embedded server: start, persistence, a crashed run's leftovers, one owner per data dir."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from proxy.store import EmbeddedRedis, EmbeddedServerError, running_server_url
from proxy.store.embedded import find_server_binary


def test_a_real_server_binary_is_available() -> None:
    assert Path(find_server_binary()).name in ("valkey-server", "redis-server")


async def test_start_persist_stop_restart(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(await server.start())
    await client.set("k", "v")
    await client.aclose()
    await server.stop()
    assert any(tmp_path.rglob("*.aof")), "AOF persistence is on"
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(await server.start())
    assert await client.get("k") == b"v"
    await client.aclose()
    await server.stop()


async def test_second_owner_of_a_data_dir_is_refused_and_cli_attaches(tmp_path: Path) -> None:
    first = EmbeddedRedis(tmp_path)
    url = await first.start()
    try:
        assert running_server_url(tmp_path) == url
        with pytest.raises(EmbeddedServerError, match="in use by another running context-proxy"):
            await EmbeddedRedis(tmp_path).start()
    finally:
        await first.stop()
    assert running_server_url(tmp_path) is None


async def test_leftover_server_from_a_crashed_run_is_replaced(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(await server.start())
    await client.set("kept", "1")
    await client.aclose()
    orphan_pid = int((tmp_path / "redis.pid").read_text())
    server._unlock()  # the proxy "crashed": its lock is gone, its server is still running
    server._process = None
    fresh = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(await fresh.start())
    try:
        assert await client.get("kept") == b"1", "the orphan flushed its AOF before it stopped"
        new_pid = int((tmp_path / "redis.pid").read_text())
        assert new_pid != orphan_pid
        for _ in range(100):
            try:
                os.kill(orphan_pid, 0)
            except ProcessLookupError:
                break
            os.waitpid(orphan_pid, os.WNOHANG)
            time.sleep(0.02)
        else:
            pytest.fail("the orphaned server is still running")
    finally:
        await client.aclose()
        await fresh.stop()


def test_stale_pidfile_of_another_process_is_ignored(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "redis.pid").write_text(str(sleeper.pid))
        from proxy.store.embedded import _stop_orphan

        _stop_orphan(tmp_path / "redis.pid")
        assert sleeper.poll() is None, "a process that is not a redis server is never killed"
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()


async def test_scripts_are_loaded_again_after_a_script_flush(redis_url: str) -> None:
    from proxy.store import SessionKeys, Store

    store = await Store.connect(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    await client.script_flush()
    await client.aclose()
    loaded = await store.load_context(SessionKeys("t", "flushed"), 0, [])
    assert loaded.head == -1 and loaded.turns == []
    await store.close()

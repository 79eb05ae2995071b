"""The command line: config errors at start, and the operators' `sessions` commands."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis

from proxy.app_state import SETTINGS
from proxy.cli import main
from proxy.store.names import TenantKeys
from tests.conftest import Proxy


def test_bad_config_is_refused_at_start_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("context:\n  trigger_ratio: 1.5\n")
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "context-proxy: context.trigger_ratio: must be > 0 and <= 1, got 1.5"


async def test_sessions_commands(proxy: Proxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    client = proxy.client("sk-operator-test", default_headers={"X-Session-Id": "cli-sess"})
    await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "for the operator"}]
    )
    config = tmp_path / "c.yaml"
    redis = proxy.app[SETTINGS].redis
    config.write_text(f"redis:\n  url: {redis.url}\n  cluster: {str(redis.cluster).lower()}\n")

    async def cli(*args: str) -> tuple[int, str]:
        code = await asyncio.to_thread(main, ["--config", str(config), "sessions", *args])
        return code, capsys.readouterr().out

    code, out = await cli("list")
    assert code == 0 and "cli-sess" in out
    code, out = await cli("show", "cli-sess")
    assert code == 0 and "turns: 1 (1 completed)" in out
    code, out = await cli("export", "cli-sess", "--api-key", "sk-operator-test")
    assert code == 0 and orjson.loads(out)["turns"][0]["input"] == [{"role": "user", "content": "for the operator"}]
    code, out = await cli("clear", "cli-sess")
    assert code == 0 and "window win_1, 1 turns" in out
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "after"}])
    assert proxy.fake.chats[-1]["messages"] == [{"role": "user", "content": "after"}]
    code, out = await cli("delete", "cli-sess")
    assert code == 0
    code, _ = await cli("clear", "cli-sess", "--tenant", "nobody")
    assert code == 1
    code = await asyncio.to_thread(main, ["--config", str(config), "sessions", "show", "cli-sess"])
    assert code == 1 and capsys.readouterr().err == "context-proxy: no such session: cli-sess\n"


async def test_sessions_list_into_a_closed_pipe_stops_quietly(proxy: Proxy, tmp_path: Path) -> None:
    """`sessions list | head`: the reader leaves early; no traceback, no broken-pipe message."""
    redis = proxy.app[SETTINGS].redis
    client = aioredis.Redis.from_url(redis.url)
    await client.zadd(TenantKeys("f" * 32).sessions, {f"listed-{n}": 1e9 + n for n in range(3000)})
    await client.aclose()
    config = tmp_path / "c.yaml"
    config.write_text(f"redis:\n  url: {redis.url}\n")
    command = f"{sys.executable} -m proxy --config {config} sessions list | head -n 2"
    result = await asyncio.to_thread(
        subprocess.run, ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=60
    )
    assert result.stderr == "" and result.returncode == 0
    assert result.stdout.splitlines()[1].split()[-1] == "listed-2999"

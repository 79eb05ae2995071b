"""Run-time keys: the admin API and the CLI, hashed in Redis, live on every replica within 2 s."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from proxy.cli import main
from proxy.gateway.policy import hash_secret
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import ADMIN_KEY, admin, call, gateway_settings

PROPAGATION_LIMIT_S = 2.0


async def _until_status(url: str, key: str, status: int) -> float:
    """Seconds until GET `url` with `key` answers `status` (polled every 20 ms, at most 5 s)."""
    started = time.monotonic()
    while time.monotonic() - started < 5:
        if (await call("GET", url, key=key))[0] == status:
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise AssertionError(f"{url} never answered {status}")


@pytest.fixture
async def replicas(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> tuple[Proxy, Proxy]:
    settings = gateway_settings(flushed_redis, fake.url)  # type: ignore[attr-defined]
    return await start_proxy(settings), await start_proxy(settings)


async def test_created_and_revoked_keys_take_effect_on_another_replica_within_2s(
    replicas: tuple[Proxy, Proxy], redis_url: str
) -> None:
    first, second = replicas
    status, created = await admin("POST", first.url + "/admin/keys", json={"name": "dave", "rpm": 100})
    assert status == 201 and created["name"] == "dave" and created["key"].startswith("cp-")
    assert (await call("GET", first.url + "/v1/models", key=created["key"]))[0] == 200
    took_effect = await _until_status(second.url + "/v1/models", created["key"], 200)

    client = aioredis.Redis.from_url(redis_url)
    stored = b"".join(v for v in (await client.hgetall("cp:gw:{registry}:keys")).values())
    await client.aclose()
    assert created["key"].encode() not in stored and hash_secret(created["key"]).encode() in stored

    assert (await admin("DELETE", first.url + "/admin/keys/dave"))[0] == 200
    assert (await call("GET", first.url + "/v1/models", key=created["key"]))[0] == 401
    stopped = await _until_status(second.url + "/v1/models", created["key"], 401)
    print(f"run-time key: live on the second replica after {took_effect:.3f} s, revoked after {stopped:.3f} s")
    assert took_effect < PROPAGATION_LIMIT_S and stopped < PROPAGATION_LIMIT_S


async def test_admin_api_refuses_duplicates_bad_fields_and_wrong_keys(replicas: tuple[Proxy, Proxy]) -> None:
    url = replicas[0].url + "/admin/keys"
    assert (await admin("POST", url, json={"name": "erin"}))[0] == 201
    for name in ("erin", "alice"):
        status, body = await admin("POST", url, json={"name": name})
        assert (status, body["error"]["code"]) == (409, "key_exists")
    for fields, param in (({"name": "bad name"}, "name"), ({"name": "x", "rpm": 0}, "rpm"),
                          ({"name": "x", "models": "gpt-*"}, "models"), ({"name": "x", "budget_period": "week"},
                          "budget_period"), ({"name": "x", "colour": "red"}, "colour")):  # fmt: skip
        status, body = await admin("POST", url, json=fields)
        assert (status, body["error"]["param"]) == (400, param)
    status, body = await admin("DELETE", url + "/alice")
    assert (status, body["error"]["code"]) == (409, "key_in_config")
    assert (await admin("DELETE", url + "/nobody"))[0] == 404
    status, body = await admin("GET", url, key="not-the-admin-key")
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")
    status, listed = await admin("GET", url)
    assert status == 200 and [k["name"] for k in listed["data"]] == ["alice", "bob", "erin"]
    assert all("key" not in k and "sha256" not in k for k in listed["data"])


async def test_admin_api_is_off_without_an_admin_key(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url, admin_key=""))  # type: ignore[attr-defined]
    status, body = await admin("POST", proxy.url + "/admin/keys", json={"name": "x"}, key="")
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_cli_creates_lists_and_revokes(
    replicas: tuple[Proxy, Proxy], tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"redis:\n  url: {redis_url}\ngateway:\n  keys:\n    - {{name: alice, key: sk-a}}\n")

    async def cli(*args: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["--config", str(config), "keys", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, out, _ = await cli("create", "frank", "--rpm", "5", "--budget-tokens", "1000", "--models", "gpt-4o*", "x-*")
    secret = out.strip()
    assert code == 0 and secret.startswith("cp-")
    await _until_status(replicas[0].url + "/v1/models", secret, 200)
    await (
        replicas[0]
        .client(secret)
        .chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    )
    code, out, _ = await cli("list")
    frank = next(line for line in out.splitlines() if line.startswith("frank"))
    assert code == 0 and secret not in out
    assert frank.split()[:5] == ["frank", "runtime", "5", "-", "1000/day"] and frank.split()[-2:] == ["gpt-4o*", "x-*"]
    assert int(frank.split()[6]) == 2 and int(frank.split()[7]) > 0  # /v1/models, then the chat turn
    code, _, err = await cli("create", "alice")
    assert code == 1 and err.strip() == "context-proxy: a gateway key named 'alice' already exists (in the config)"
    code, _, err = await cli("revoke", "frank")
    assert code == 0
    await _until_status(replicas[1].url + "/v1/models", secret, 401)
    code, _, err = await cli("revoke", "frank")
    assert code == 1 and err.strip() == "context-proxy: no gateway key named 'frank'"
    assert ADMIN_KEY not in out

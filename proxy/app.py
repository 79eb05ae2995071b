"""The application factory: routes, middlewares, and one lifecycle per resource.

`create_app(settings)` does nothing at import time and is what both `serve` and the
tests call. Resources start in registration order and stop in reverse: the
(embedded) Redis server and its client, then the gateway (its keys, and the refusal
to expose an upstream key to anyone), then the upstream sessions (one per route), then
the turn service with its background compaction jobs. Shutdown drains the journal writes still
running before the store closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from proxy.app_state import (
    EMBEDDED,
    GATEWAY,
    METRICS,
    PAST_CONTEXTS,
    RESENT,
    ROUTES,
    SESSIONS,
    SETTINGS,
    STORE,
    TURNS,
)
from proxy.compaction import BackgroundJobs
from proxy.compaction.hooks import Hooks
from proxy.compaction.strategies import StrategyRegistry
from proxy.config import Settings
from proxy.context.tokens import TokenCounter
from proxy.doors.resent import BYTES_PER_MESSAGE, ResentBodies
from proxy.errors import ConfigError
from proxy.events import EventBus, log_event
from proxy.gateway import Gateway, exposure_problem
from proxy.handlers import admin_keys, chat, health, messages, passthrough, responses, session_list, sessions, ui
from proxy.handlers.access import access_middleware
from proxy.handlers.gateway import add_rate_headers, gateway_middleware
from proxy.handlers.middleware import error_middleware
from proxy.metrics import Metrics
from proxy.serving import await_within, cleanup_bound_s
from proxy.session_api import PastContexts, SessionAPI
from proxy.sessions.derived import DerivedSessions
from proxy.store import EmbeddedRedis, Store
from proxy.turn import PendingWrites, TurnDeps, TurnService
from proxy.turn.builder import Builders
from proxy.turn.paths import PathCache
from proxy.turn.windows import ModelWindows
from proxy.upstream import Routes

CleanupContext = Callable[[web.Application], AsyncIterator[None]]


def _redis_ctx(writes: PendingWrites) -> CleanupContext:
    async def redis_ctx(app: web.Application) -> AsyncIterator[None]:
        settings = app[SETTINGS]
        url = settings.redis.url
        embedded: EmbeddedRedis | None = None
        if url == "embedded":
            embedded = EmbeddedRedis(settings.redis.data_dir)
            url = await embedded.start()
            app[EMBEDDED] = embedded
        try:
            redis = settings.redis
            app[STORE] = await Store.connect(
                url, cluster=redis.cluster, wait_replicas=redis.wait_replicas, wait_timeout_ms=redis.wait_timeout_ms
            )
        except BaseException:
            if embedded is not None:
                await embedded.stop(cleanup_bound_s(settings))
            raise
        yield
        step_s = cleanup_bound_s(settings)
        try:
            await writes.drain(step_s)
            await await_within(step_s, app[STORE].close(), "closing the store")
        finally:
            if embedded is not None:
                await embedded.stop(step_s)

    return redis_ctx


async def _gateway_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    gateway = Gateway(settings, app[STORE])
    await gateway.registry.refresh()
    problem = exposure_problem(settings, keys_exist=gateway.registry.active)
    if problem:
        raise ConfigError(problem)
    app[GATEWAY] = gateway
    follower = asyncio.create_task(gateway.registry.follow())
    yield
    follower.cancel()
    await await_within(cleanup_bound_s(settings), follower, "the gateway keys' follower")


async def _upstream_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    app[ROUTES] = Routes.create(settings.upstream, settings.routes)
    yield
    await await_within(cleanup_bound_s(settings), app[ROUTES].close(), "closing the upstream sessions")


def _turns_ctx(writes: PendingWrites, strategies: StrategyRegistry, hooks: Hooks, builders: Builders) -> CleanupContext:
    """The turn service, once the store and the upstream client exist."""

    async def turns_ctx(app: web.Application) -> AsyncIterator[None]:
        settings = app[SETTINGS]
        overrides = {name: m.encoding for name, m in settings.context.models.items() if m.encoding}
        tokens = TokenCounter(overrides)
        deps = TurnDeps(
            settings=settings,
            store=app[STORE],
            routes=app[ROUTES],
            tokens=tokens,
            strategies=strategies,
            paths=PathCache(settings.server.cache_messages),
            windows=ModelWindows(settings.context, tokens),
            writes=writes,
            jobs=BackgroundJobs(),
            events=EventBus([log_event, app[METRICS].observe, app[GATEWAY].metrics.observe]),
            derived=DerivedSessions(app[STORE]),
            hooks=hooks,
            builders=builders,
        )
        app[METRICS].cache = deps.paths
        app[TURNS] = TurnService(deps)
        app[SESSIONS] = SessionAPI(deps.store, deps.paths, deps.tokens, settings=settings, events=deps.events)
        app[PAST_CONTEXTS] = PastContexts(deps.store, deps.tokens, deps.windows, settings.context)
        yield
        await deps.jobs.close(cleanup_bound_s(settings))

    return turns_ctx


async def _stop_accepting(writes: PendingWrites) -> None:
    writes.stop_accepting()


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        client_max_size=settings.server.max_body_bytes,
        middlewares=[access_middleware, error_middleware, gateway_middleware],
        handler_args={"auto_decompress": False},  # bodies are decoded by handlers/encoding.py
    )
    app[SETTINGS] = settings
    app[METRICS] = Metrics(settings.context.models)
    app[RESENT] = ResentBodies(settings.server.cache_messages * BYTES_PER_MESSAGE)
    strategies = StrategyRegistry.from_settings(settings.context)  # a bad validator path fails here
    hooks, builders = Hooks(settings.context.hooks), Builders(settings.context)  # so do hooks and builders
    writes = PendingWrites()
    app.on_shutdown.append(lambda _: _stop_accepting(writes))
    app.cleanup_ctx.extend(
        [_redis_ctx(writes), _gateway_ctx, _upstream_ctx, _turns_ctx(writes, strategies, hooks, builders)]
    )
    app.on_response_prepare.append(add_rate_headers)

    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/metrics", health.metrics)
    app.router.add_post("/v1/chat/completions", chat.chat_completions)
    app.router.add_post("/s/{session}/v1/chat/completions", chat.chat_completions)
    for prefix in ("", "/s/{session}"):
        app.router.add_post(prefix + "/v1/messages", messages.create_message)
        app.router.add_post(prefix + "/v1/messages/count_tokens", messages.count_tokens)
    responses.add_routes(app)
    app.router.add_get("/ui", ui.redirect)
    app.router.add_get("/ui/", ui.index)
    app.router.add_get("/ui/{asset}", ui.asset)
    app.router.add_get("/v1/sessions", session_list.list_sessions)
    app.router.add_get("/v1/sessions/{id}/turns/{seq}/context", sessions.show_turn_context)
    app.router.add_get("/v1/sessions/{id}", sessions.show_session)
    app.router.add_get("/v1/sessions/{id}/context", sessions.show_context)
    app.router.add_get("/v1/sessions/{id}/archive/{archive}", sessions.show_archive)
    app.router.add_delete("/v1/sessions/{id}", sessions.delete_session)
    app.router.add_post("/v1/sessions/{id}/clear", sessions.clear_session)
    app.router.add_post("/v1/sessions/{id}/turns/{turn}/feedback", sessions.add_feedback)
    app.router.add_get("/admin/keys", admin_keys.list_keys)
    app.router.add_post("/admin/keys", admin_keys.create_key)
    app.router.add_delete("/admin/keys/{name}", admin_keys.revoke_key)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough.passthrough)
    app.router.add_route("*", "/s/{session}/v1/{tail:.*}", passthrough.passthrough)
    return app

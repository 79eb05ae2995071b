"""Liveness, readiness and metrics endpoints."""

from __future__ import annotations

from aiohttp import web

from proxy.keys import METRICS, STORE


async def healthz(request: web.Request) -> web.Response:
    """The process is up and serving HTTP."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Config loaded and Redis answering PING (on a cluster: every slot served); else 503."""
    store = request.app.get(STORE)
    if store is None:
        return web.json_response({"status": "unavailable", "redis": "unreachable"}, status=503)
    readiness = await store.readiness()
    if not readiness.ready:
        return web.json_response({"status": "unavailable", **readiness.detail}, status=503)
    return web.json_response({"status": "ready", **readiness.detail})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(text=request.app[METRICS].render(), content_type="text/plain", charset="utf-8")

"""Liveness, readiness and metrics endpoints."""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import GATEWAY, METRICS, PEERS, STORE


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
    """This process's metrics; with several workers, the totals over all of them."""
    text = exposition(request.app)
    peers = request.app.get(PEERS)
    if peers is not None:
        text = await peers.totals(text)
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


def exposition(app: web.Application) -> str:
    """This process's own exposition: the proxy's metrics, then the gateway's."""
    return app[METRICS].render() + app[GATEWAY].metrics.render()

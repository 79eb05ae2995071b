"""The one place exceptions become responses, and where every request is measured.

`ProxyError`s become OpenAI error JSON with their status. aiohttp's own HTTP errors
(unknown route, wrong method, body too large) get the same shape. Anything else is
logged with the request path and answered 500, unless the response had already
started streaming, in which case the connection is dropped (there is no way left to
tell the client) and the error re-raised for the server's log.
"""

from __future__ import annotations

import logging
import time

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.errors import ProxyError
from proxy.keys import METRICS, ROUTE_MODEL

log = logging.getLogger("context_proxy")

_HTTP_TYPES = {404: ("invalid_request_error", "not_found"), 405: ("invalid_request_error", "method_not_allowed"),
               413: ("invalid_request_error", "request_too_large")}  # fmt: skip


def error_response(status: int, body: object) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    metrics.in_flight += 1
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except ProxyError as exc:
        status = exc.status
        return error_response(exc.status, exc.body())
    except web.HTTPException as exc:
        status = exc.status
        if exc.status < 400:
            raise
        kind, code = _HTTP_TYPES.get(exc.status, ("invalid_request_error", None))
        message = exc.text or exc.reason
        return error_response(exc.status, {"error": {"message": message, "type": kind, "param": None, "code": code}})
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        body = {"error": {"message": "internal proxy error", "type": "server_error", "param": None, "code": None}}
        return error_response(500, body)
    finally:
        metrics.in_flight -= 1
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
        metrics.request_done(route, request.get(ROUTE_MODEL, ""), status, time.perf_counter() - started)

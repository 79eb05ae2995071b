"""The outermost middleware: every request gets an id, a span, its metrics and one access line.

It runs around `error_middleware`, so it sees each request's final status, and reads
what the inner layers left on the request: the model (`ROUTE_MODEL`), a managed
turn's facts (`TURN_FACTS`), and the code of an error the proxy answered with
(`PROXY_ERROR`). Upstream failures and Redis outages are logged once more at WARNING,
with the request id. A request whose client left is logged with status 499. Every
answer not already streaming carries `X-Request-Id`, errors included.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy import tracing
from proxy.app_state import GATEWAY, METRICS, PRINCIPAL, REQUEST_ID, ROUTE_MODEL, TURN_FACTS
from proxy.handlers.request_keys import PROXY_ERROR
from proxy.logs import Fields, log_info, short_tenant
from proxy.turn.facts import TurnFacts

access_log = logging.getLogger("context_proxy.access")
log = logging.getLogger("context_proxy")

_WARN_CODES = frozenset({"upstream_unavailable", "upstream_timeout", "store_unavailable"})
_CLIENT_LEFT = 499


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    request_id = request[REQUEST_ID] = "req_" + os.urandom(12).hex()
    resource = request.match_info.route.resource
    route = resource.canonical if resource else "unmatched"
    metrics.in_flight += 1
    started = time.perf_counter()
    status = 500
    with tracing.span(f"{request.method} {route}", parent=request.headers, request_id=request_id) as span:
        try:
            response = await handler(request)
            status = response.status
            if not response.prepared:
                response.headers.setdefault("X-Request-Id", request_id)
            return response
        except asyncio.CancelledError:
            status = _CLIENT_LEFT
            raise
        finally:
            seconds = time.perf_counter() - started
            metrics.in_flight -= 1
            model = request.get(ROUTE_MODEL, "")
            metrics.request_done(route, model, status, seconds)
            _account(request, request_id, route, model, status, seconds, span)


def _account(
    request: web.Request, request_id: str, route: str, model: str, status: int, seconds: float, span: tracing.Span
) -> None:
    """Metrics, warnings, the span's attributes and the access line of one finished request."""
    metrics = request.app[METRICS]
    facts = request.get(TURN_FACTS)
    error = request.get(PROXY_ERROR)
    if error == "store_unavailable":
        metrics.redis_error()
    if error in _WARN_CODES:
        log.warning("%s request=%s path=%s", error, request_id, route)
    fields = {
        "request_id": request_id,
        "method": request.method,
        "path": request.path,
        "status": status,
        "ms": round(seconds * 1000, 2),
        "upstream_ms": round(facts.upstream_s * 1000, 2) if facts else None,
        "model": model or None,
    }
    if facts is not None:
        if facts.prompt_tokens is not None or facts.completion_tokens is not None:
            metrics.tokens(model, prompt=facts.prompt_tokens or 0, completion=facts.completion_tokens or 0)
        _count_savings(request, model, facts)
        fields.update(
            session=facts.session,
            tenant=short_tenant(facts.tenant),
            tokens_sent=facts.sent_tokens,
            client_tokens=facts.client_tokens,
            saved_tokens=facts.saved_tokens,
            cost_usd=_dollars(facts.costs[0]) if facts.costs else None,
            saved_cost_usd=_dollars(facts.costs[1]) if facts.costs else None,
            prompt_tokens=facts.prompt_tokens,
            completion_tokens=facts.completion_tokens,
            strategy=facts.strategy,
            window=facts.window,
            compaction=facts.compaction,
            turn=facts.status,
        )
        if facts.mode != "managed":
            fields["mode"] = facts.mode
        span.set("session.id", facts.session)
        span.set("context.strategy", facts.strategy)
        span.set("context.tokens_sent", facts.sent_tokens)
        span.set("gen_ai.usage.input_tokens", facts.prompt_tokens)
        span.set("gen_ai.usage.output_tokens", facts.completion_tokens)
    fields["error"] = error
    span.set("http.response.status_code", status)
    span.set("gen_ai.request.model", model or None)
    log_info(access_log, Fields("access", fields))


def _count_savings(request: web.Request, model: str, facts: TurnFacts) -> None:
    """A managed turn's client and saved tokens, by model and (for a gateway key) by key."""
    client, saved, costs = facts.client_tokens, facts.saved_tokens, facts.costs
    request.app[METRICS].savings(model, facts.mode, client=client, saved=saved, costs=costs)
    principal = request.get(PRINCIPAL)
    if principal is not None and principal.key is not None:
        request.app[GATEWAY].metrics.savings((principal.key.name, facts.mode), client=client, saved=saved, costs=costs)


def _dollars(value: float) -> str:
    """US dollars as the access line shows them: to a millionth of a dollar (a float's text
    form would round it to a tenth)."""
    return f"{value:.6f}"

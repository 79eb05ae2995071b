"""The one place exceptions become responses, and the one place requests are measured.

`error_middleware`: `ProxyError`s become OpenAI error JSON with their status; the
domain errors of the core (`ContextTooLarge`, `UnknownStrategy`, `SessionNotFound`)
become the `ProxyError` that fits them; aiohttp's own HTTP errors (unknown route,
wrong method, body too large) get the same shape. Anything else is logged with the
request path and answered 500, unless the response had already started streaming:
then there is no way left to tell the client, and the error is re-raised so that the
server drops the connection and logs it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.compaction.strategies import UnknownStrategy
from proxy.context.budget import ContextTooLarge
from proxy.doors.messages import anthropic_error
from proxy.errors import BadRequest, BudgetExceeded, NotFound, ProxyError
from proxy.handlers.relay import note_error
from proxy.handlers.request_keys import RESPONSE_STARTED
from proxy.session_api import SessionNotFound

log = logging.getLogger("context_proxy")

_MESSAGES_PATH = re.compile(r"^(/s/[^/]+)?/v1/messages(/count_tokens)?$")

_HTTP_TYPES = {404: ("invalid_request_error", "not_found"), 405: ("invalid_request_error", "method_not_allowed"),
               413: ("invalid_request_error", "request_too_large")}  # fmt: skip

_DOMAIN_ERRORS: dict[type[Exception], Callable[[Exception], ProxyError]] = {
    ContextTooLarge: lambda exc: BudgetExceeded(str(exc), param="messages"),
    UnknownStrategy: lambda exc: BadRequest(str(exc), param="X-Context-Strategy", code="invalid_strategy"),
    SessionNotFound: lambda exc: NotFound(str(exc)),
}


def error_response(status: int, body: object, request: web.Request | None = None) -> web.Response:
    """An error in the shape of the caller's door: Anthropic's on the Messages routes, else OpenAI's."""
    payload = orjson.dumps(body)
    if request is not None and _MESSAGES_PATH.search(request.path):
        payload = anthropic_error(status, payload)
    return web.Response(status=status, body=payload, content_type="application/json")


def _as_proxy_error(exc: Exception) -> ProxyError | None:
    if isinstance(exc, ProxyError):
        return exc
    for kind in type(exc).__mro__:
        translate = _DOMAIN_ERRORS.get(kind)
        if translate is not None:
            return translate(exc)
    return None


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind, code = _HTTP_TYPES.get(exc.status, ("invalid_request_error", None))
        message = exc.text or exc.reason
        return error_response(
            exc.status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, request
        )
    except Exception as exc:
        error = _as_proxy_error(exc)
        if error is not None and not request.get(RESPONSE_STARTED):
            note_error(request, error)
            return error_response(error.status, error.body(), request)
        log.exception("unhandled error on %s %s", request.method, request.path)
        if request.get(RESPONSE_STARTED):
            raise
        body = {"error": {"message": "internal proxy error", "type": "server_error", "param": None, "code": None}}
        return error_response(500, body, request)

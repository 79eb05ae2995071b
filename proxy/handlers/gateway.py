"""The gateway at the HTTP edge: who is calling, may they use this model, within their limits.

`gateway_middleware` runs on every request under `/v1/` and `/s/` (health, metrics and
the admin API are not guarded by it). It puts the `Principal` on the request, which is
how handlers learn the tenant and which Authorization may go upstream. For a gateway
key it checks the allow-list and admits the request; a managed chat turn is admitted by
the turn itself, once its prompt is counted, through the `gate` it is handed. Whatever
admitted a request, the middleware settles what the turn did not: an error keeps
nothing, a pass-through keeps its reservation. `add_rate_headers` puts the key's
rate-limit headers on every response, answers and errors alike.
"""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.app_state import ADMISSION, GATEWAY, PRINCIPAL, RATE_HEADERS, REQUEST_ID, SETTINGS, TURNS
from proxy.context.model import ChatRequest
from proxy.context.tokens import request_overhead
from proxy.errors import ModelNotAllowed, ProxyError
from proxy.gateway.limits import Admission, Gate
from proxy.handlers.encoding import decode_body
from proxy.turn import Caller

_GUARDED = ("/v1/", "/s/")
_TURN_ROUTES = frozenset(
    prefix + path
    for prefix in ("", "/s/{session}")
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/responses/compact", "/v1/messages")
)


@web.middleware
async def gateway_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith(_GUARDED):
        return await handler(request)
    principal = request.app[GATEWAY].identify(authorization_of(request))
    request[PRINCIPAL] = principal
    if principal.key is None:
        return await handler(request)
    turn = _admitted_by_turn(request)
    if principal.key.models is not None and not turn:  # a turn checks the model it parsed (`check_model`)
        model, raw = await read_model(request)
        if model is None and raw is not None and _encoded(request):
            raise ModelNotAllowed(
                f"gateway key {principal.key.name!r} has a model allow-list, and this body's encoding hides its model",
                param="model",
            )
        check_model(request, model)
    if not turn:
        await admit(request, 0)
    try:
        response = await handler(request)
    except Exception:
        await _settle(request, 0)
        raise
    await _settle(request, None)
    return response


def authorization_of(request: web.Request) -> str | None:
    """The caller's key as `Authorization`: its own header, else Anthropic's `x-api-key` as a bearer."""
    authorization = request.headers.get("Authorization")
    if authorization is None and request.headers.get("x-api-key"):
        return "Bearer " + request.headers["x-api-key"]
    return authorization


async def admit(request: web.Request, tokens: int) -> Admission | None:
    """Admit the request against its gateway key's limits, reserving `tokens`; once per request.

    None for a caller without a gateway key. Over a limit or the budget: the 429 is
    raised, its headers already on the request."""
    principal = request[PRINCIPAL]
    if principal.key is None or ADMISSION in request:
        return request.get(ADMISSION)
    headers, outcome = await request.app[GATEWAY].limiter.admit(principal.key, tokens)
    request[RATE_HEADERS] = headers
    if isinstance(outcome, ProxyError):
        raise outcome
    request[ADMISSION] = outcome
    return outcome


def gate(request: web.Request) -> Gate:
    """`admit` for this request, as the turn package calls it (it knows no HTTP)."""

    async def admit_request(tokens: int) -> Admission | None:
        return await admit(request, tokens)

    return admit_request


def caller_of(
    request: web.Request, session: str | None, *, door: str = "chat", door_id: str | None = None, keep: bool = True
) -> Caller:
    """Who asks, as the turn needs it: the principal's tenant and upstream key, the request's
    headers and id, its gateway admission, and the door it came through."""
    principal = request[PRINCIPAL]
    return Caller(
        principal.tenant, session, principal.upstream_authorization, request.headers, request[REQUEST_ID],
        gate(request), door=door, door_id=door_id, mode=principal.key.mode if principal.key else None, keep=keep,
    )  # fmt: skip


async def admit_unmanaged(request: web.Request, chat: ChatRequest) -> None:
    """A request the proxy does not manage (`off`, a side request) still counts against its
    gateway key's limits, by the proxy's count of what it sends."""
    if request[PRINCIPAL].key is None:
        return
    deps = request.app[TURNS].deps
    encoder = await deps.tokens.encoder_for(chat.model)
    prompt = sum(await deps.tokens.count_messages(encoder, chat.messages))
    await admit(request, prompt + request_overhead(encoder, chat.body.get("tools")) + chat.max_output_tokens)


async def add_rate_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the key's rate-limit headers, on answers and errors alike."""
    headers = request.get(RATE_HEADERS)
    if headers:
        response.headers.update(headers)


def check_model(request: web.Request, model: str | None) -> None:
    """Refuse a model outside the caller's gateway key's allow-list (403 `model_not_allowed`)."""
    key = request[PRINCIPAL].key
    if key is not None and not key.allows(model):
        raise ModelNotAllowed(f"gateway key {key.name!r} may not use the model {model!r}", param="model")


async def read_model(request: web.Request) -> tuple[str | None, bytes | None]:
    """For a JSON body: its `model` (when a string; read through a gzip or deflate
    Content-Encoding) and its bytes as they came; else (None, None), the body unread."""
    if not request.body_exists or request.content_type != "application/json":
        return None, None
    raw = await request.read()
    limit = request.app[SETTINGS].server.max_body_bytes
    try:
        body = orjson.loads(decode_body(raw, request.headers.get("Content-Encoding"), limit))
    except (orjson.JSONDecodeError, ProxyError):
        return None, raw
    model = body.get("model") if isinstance(body, dict) else None
    return (model if isinstance(model, str) else None), raw


def _encoded(request: web.Request) -> bool:
    return request.headers.get("Content-Encoding", "identity").strip().lower() != "identity"


def _admitted_by_turn(request: web.Request) -> bool:
    resource = request.match_info.route.resource
    return request.method == "POST" and resource is not None and resource.canonical in _TURN_ROUTES


async def _settle(request: web.Request, actual: int | None) -> None:
    admission = request.get(ADMISSION)
    if admission is not None:
        await admission.settle(actual)

"""Every `/v1/...` route the proxy does not manage: sent upstream as it is.

Method, query, headers (less hop-by-hop ones) and body go out streamed (a JSON body
is read first: its `model` picks the route); status, headers and body come back
streamed, unchanged. The client's Authorization is kept outside gateway mode; a client
with none, and every client in gateway mode, gets the route's key.

A body goes up in the `Content-Encoding` it came in, whatever that is: the upstream
judges it, as it would without the proxy (an upstream that reads zstd gets zstd). The
proxy reads gzip and deflate itself only to find a JSON body's model. When routes are
configured and the encoding hides the model (one the proxy cannot read, or data that
is not what its encoding says), the body is refused in OpenAI's shape (415
`unsupported_content_encoding`, 400 `invalid_content_encoding`) rather than sent to
the default upstream, with its key, when its model may belong to another route.
"""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import PRINCIPAL, ROUTE_MODEL, ROUTES, SETTINGS
from proxy.handlers.encoding import decode_body
from proxy.handlers.gateway import read_model
from proxy.handlers.relay import start_stream
from proxy.upstream import UpstreamResponse


async def passthrough(request: web.Request) -> web.StreamResponse:
    model, raw = await read_model(request)
    settings = request.app[SETTINGS]
    if model is not None:
        request[ROUTE_MODEL] = model
    elif raw is not None and settings.routes:  # refused if its encoding is what hides its model
        decode_body(raw, request.headers.get("Content-Encoding"), settings.server.max_body_bytes)
    upstream = request.app[ROUTES].client_for(model)
    headers = upstream.headers_for(
        request.headers,
        session_header=settings.sessions.header,
        authorization=request[PRINCIPAL].upstream_authorization,
    )
    body = raw if raw is not None else request.content.iter_any() if request.body_exists else None
    answer = await upstream.send(
        request.method, _raw_v1_path(request), headers=headers, body=body, query=request.rel_url.raw_query_string
    )
    return await relay_raw(request, answer)


def _raw_v1_path(request: web.Request) -> str:
    """The path from `/v1/` on, still percent-encoded as the client sent it (`match_info` is decoded)."""
    raw = request.rel_url.raw_path
    if "session" in request.match_info:
        raw = raw[raw.index("/", len("/s/")) :]  # past /s/{session}: a segment holds no slash
    return raw


async def relay_raw(request: web.Request, answer: UpstreamResponse) -> web.StreamResponse:
    """Stream an upstream answer back byte for byte; a client that leaves closes it."""
    response = web.StreamResponse(status=answer.status, headers=answer.relay_headers())
    if answer.content_length is not None:
        response.content_length = answer.content_length
    try:
        await start_stream(request, response)
        async for chunk in answer.iter_chunks():
            await response.write(chunk)
        await response.write_eof()
    finally:
        answer.close()
    return response

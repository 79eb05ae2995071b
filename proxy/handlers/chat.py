"""`POST /v1/chat/completions`: the Chat Completions door's HTTP edge.

Parse and validate the body, pick the strategy, identify the caller, then hand the
turn to `TurnService` (load, fit, forward) and relay it through the chat door.
`X-Context-Strategy: off` skips all of it: a pure pass-through, not journaled.
"""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import PRINCIPAL, RESENT, ROUTE_MODEL, SETTINGS, TURN_FACTS, TURNS
from proxy.dialects import CHAT_PATH
from proxy.doors.chat import ChatDoor
from proxy.handlers.gateway import admit_unmanaged, caller_of, check_model
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.relay import relay_turn, relay_unmanaged
from proxy.handlers.request import parse_chat_request, read_body
from proxy.sessions import requested_session
from proxy.turn import STRATEGY_HEADER, ChatRequest
from proxy.turn.forward import send_as_is


async def chat_completions(request: web.Request) -> web.StreamResponse:
    settings, turns = request.app[SETTINGS], request.app[TURNS]
    raw = await read_body(request, settings.server.max_body_bytes)
    chat = parse_chat_request(raw, request.app[RESENT], request[PRINCIPAL].tenant)
    request[ROUTE_MODEL] = chat.model
    check_model(request, chat.model)
    spec = turns.deps.strategies.spec_for(chat.model, request.headers.get(STRATEGY_HEADER))
    if spec is None:
        return await _pass_through(request, chat)
    session = requested_session(
        path_session=request.match_info.get("session"),
        header_session=request.headers.get(settings.sessions.header),
        header_name=settings.sessions.header,
    )
    turn = await turns.begin(chat, caller_of(request, session), spec)
    response = await relay_turn(request, turn, ChatDoor(include_usage=chat.include_usage))
    request[TURN_FACTS] = turn.facts()
    return response


async def _pass_through(request: web.Request, chat: ChatRequest) -> web.StreamResponse:
    """`X-Context-Strategy: off`: the body goes as the client sent it; nothing is journaled."""
    deps, principal = request.app[TURNS].deps, request[PRINCIPAL]
    await admit_unmanaged(request, chat)
    upstream = deps.routes.client_for(chat.model)
    if upstream.api != "openai":  # another API cannot take the client's body as it is: translated, not composed
        answer = await send_as_is(upstream, chat, caller_of(request, None), settings=deps.settings)
        return await relay_unmanaged(request, answer, ChatDoor(include_usage=chat.include_usage), stream=chat.stream)
    headers = upstream.headers_for(
        request.headers,
        session_header=deps.settings.sessions.header,
        authorization=principal.upstream_authorization,
    )
    headers.popall("Content-Encoding", None)  # chat.raw is the decoded body
    answer = await upstream.send(
        "POST", CHAT_PATH, headers=headers, body=chat.raw, query=request.rel_url.raw_query_string
    )
    return await relay_raw(request, answer)

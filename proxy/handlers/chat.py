"""`POST /v1/chat/completions`: the Chat Completions door's HTTP edge.

Parse and validate the body, pick the strategy, identify the caller, then hand the
turn to `TurnService` (load, fit, forward) and relay it through the chat door.
`X-Context-Strategy: off` skips all of it: a pure pass-through, not journaled.
"""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import PRINCIPAL, REQUEST_ID, ROUTE_MODEL, SETTINGS, TURN_FACTS, TURNS
from proxy.context.tokens import request_overhead
from proxy.dialects import CHAT_PATH
from proxy.doors.chat import ChatDoor
from proxy.handlers.gateway import admit, check_model, gate
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.relay import relay_turn, relay_unmanaged
from proxy.handlers.request import parse_chat_request, read_body
from proxy.sessions import requested_session
from proxy.turn import STRATEGY_HEADER, Caller, ChatRequest
from proxy.turn.forward import send_as_is


async def chat_completions(request: web.Request) -> web.StreamResponse:
    settings, turns = request.app[SETTINGS], request.app[TURNS]
    chat = parse_chat_request(await read_body(request, settings.server.max_body_bytes))
    request[ROUTE_MODEL] = chat.model
    check_model(request, chat.model)
    spec = turns.deps.strategies.spec_for(chat.model, request.headers.get(STRATEGY_HEADER))
    if spec is None:
        return await _pass_through(request, chat)
    principal = request[PRINCIPAL]
    session = requested_session(
        path_session=request.match_info.get("session"),
        header_session=request.headers.get(settings.sessions.header),
        header_name=settings.sessions.header,
    )
    caller = Caller(
        principal.tenant, session, principal.upstream_authorization, request.headers, request[REQUEST_ID], gate(request)
    )
    turn = await turns.begin(chat, caller, spec)
    response = await relay_turn(request, turn, ChatDoor(include_usage=chat.include_usage))
    request[TURN_FACTS] = turn.facts()
    return response


async def _pass_through(request: web.Request, chat: ChatRequest) -> web.StreamResponse:
    """`X-Context-Strategy: off`: the body goes as the client sent it; nothing is journaled."""
    deps, principal = request.app[TURNS].deps, request[PRINCIPAL]
    if principal.key is not None:
        encoder = await deps.tokens.encoder_for(chat.model)
        prompt = sum(await deps.tokens.count_messages(encoder, chat.messages))
        await admit(request, prompt + request_overhead(encoder, chat.body.get("tools")) + chat.max_output_tokens)
    upstream = deps.routes.client_for(chat.model)
    if upstream.api != "openai":  # another API cannot take the client's body as it is: translated, not composed
        caller = Caller(principal.tenant, None, principal.upstream_authorization, request.headers, request[REQUEST_ID])
        answer = await send_as_is(upstream, chat, caller, settings=deps.settings)
        return await relay_unmanaged(request, answer, ChatDoor(include_usage=chat.include_usage), stream=chat.stream)
    headers = upstream.headers_for(
        request.headers,
        session_header=deps.settings.sessions.header,
        authorization=principal.upstream_authorization,
    )
    headers.popall("Content-Encoding", None)  # chat.raw is the decoded body
    answer = await upstream.send("POST", CHAT_PATH, headers=headers, body=chat.raw, query=request.query)
    return await relay_raw(request, answer)

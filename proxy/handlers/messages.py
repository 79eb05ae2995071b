"""`POST /v1/messages` and `/v1/messages/count_tokens`: the Messages door's HTTP edge.

The body is Anthropic's (`doors/anthropic_codec.py` translates it to the core's request);
the turn runs as a chat turn does and is relayed through the Messages door. The session is
the one the caller names (path or header), else the one Claude Code names in
`metadata.user_id`, else the one the conversation continues. Claude Code's side requests
(quota probes, titles, warm-ups, its own compaction prompt: `side_request`) are answered
without a session: sent as they are, in the route's dialect, and not journaled. So is
everything with `X-Context-Strategy: off`. Errors on these routes are in Anthropic's shape
(`handlers/middleware.py`).
"""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import PRINCIPAL, ROUTE_MODEL, SETTINGS, TURN_FACTS, TURNS
from proxy.context.compose import compose_messages
from proxy.context.model import ChatRequest
from proxy.context.tokens import Encoder, request_overhead
from proxy.doors.anthropic_codec import MessagesCall, parse_request, side_request
from proxy.doors.messages import MessagesDoor
from proxy.errors import BadRequest
from proxy.handlers.gateway import admit_unmanaged, caller_of, check_model
from proxy.handlers.relay import relay_turn, relay_unmanaged
from proxy.handlers.request import parse_json, read_body
from proxy.sessions import Identity, message_hash, requested_session
from proxy.sessions.identity import validate_session_id
from proxy.sessions.reconcile import split_leading
from proxy.turn import STRATEGY_HEADER
from proxy.turn.conversation import load_conversation
from proxy.turn.forward import send_as_is
from proxy.turn.projection import sent_history, sent_input
from proxy.types import Message


async def create_message(request: web.Request) -> web.StreamResponse:
    settings, turns = request.app[SETTINGS], request.app[TURNS]
    raw = await read_body(request, settings.server.max_body_bytes)
    call = parse_request(parse_json(raw))
    request[ROUTE_MODEL] = call.model
    check_model(request, call.model)
    chat = ChatRequest(call.chat_body, raw, call.model, call.chat_body["messages"], call.stream, False, marked=True)
    spec = turns.deps.strategies.spec_for(call.model, request.headers.get(STRATEGY_HEADER))
    if spec is None or side_request(call) is not None:
        await admit_unmanaged(request, chat)
        answer = await send_as_is(
            turns.deps.routes.client_for(chat.model), chat, caller_of(request, None, door="messages"), settings=settings
        )
        door = MessagesDoor(model=call.model, input_tokens=0)
        return await relay_unmanaged(request, answer, door, stream=chat.stream)
    turn = await turns.begin(chat, caller_of(request, _session(request, call), door="messages"), spec)
    door = MessagesDoor(model=call.model, input_tokens=turn.sent_tokens)
    response = await relay_turn(request, turn, door)
    request[TURN_FACTS] = turn.facts()
    return response


async def count_tokens(request: web.Request) -> web.Response:
    """The input tokens of what the proxy would send for this request, by its count (the model's
    own tokenizer where it has one), system and tools included: the session's context as it
    stands (its window's summary, the recent turns, the request's system block) plus the new
    input the request adds to it, as `_managed_messages` composes it. A compaction the next
    turn would run first is not anticipated."""
    settings, deps = request.app[SETTINGS], request.app[TURNS].deps
    call = parse_request(parse_json(await read_body(request, settings.server.max_body_bytes)), count_tokens=True)
    request[ROUTE_MODEL] = call.model
    check_model(request, call.model)
    encoder = await deps.tokens.encoder_for(call.model)
    messages = await _managed_messages(request, call, encoder)
    tokens = sum(await deps.tokens.count_messages(encoder, messages))
    return web.json_response({"input_tokens": tokens + request_overhead(encoder, call.chat_body.get("tools"))})


async def _managed_messages(request: web.Request, call: MessagesCall, encoder: Encoder) -> list[Message]:
    """The messages a turn would compose for `call`: reconciled with the session it names (path or
    header), else the one its conversation continues; with no such session, its own messages."""
    deps = request.app[TURNS].deps
    sent: list[Message] = call.chat_body["messages"]
    leading, messages = split_leading(sent)
    tenant, session = request[PRINCIPAL].tenant, _session(request, call)
    derived = session is None
    if session is None:
        session = await deps.derived.find(tenant, messages)
    if session is None:
        return sent
    conversation = await load_conversation(deps.store, deps.paths, Identity(tenant, session, derived), messages)
    history = await sent_history(
        conversation.history, store=deps.store, keys=conversation.keys, context=deps.settings.context,
        model=call.model, encoder=encoder,
    )  # fmt: skip
    if leading:
        tokens = await deps.tokens.count_messages(encoder, leading)
        history = history.with_leading(leading, tokens, [message_hash(m) for m in leading])
    return compose_messages(history, sent_input(conversation.reconciled.new_input, deps.settings.context))


def _session(request: web.Request, call: MessagesCall) -> str | None:
    header = request.app[SETTINGS].sessions.header
    named = requested_session(
        path_session=request.match_info.get("session"), header_session=request.headers.get(header), header_name=header
    )
    if named is not None or call.session_hint is None:
        return named
    try:
        return validate_session_id(call.session_hint, "metadata.user_id")
    except BadRequest:
        return None  # not a usable session id: the conversation names its session instead

"""`POST /v1/responses` and the Conversations API: the Responses door's HTTP edge and its state.

A response is a turn. Its request reaches the core as a full-history chat client's would:
the conversation it continues (a stored response named by `previous_response_id`, or a
conversation's latest response and the items added since), then its own input, after its
own `instructions` (never carried over). The core's reconcile finds that conversation in
the journal, so a response id that is not its session's head starts a branch there. With
neither, the input is the whole conversation (a stateless client) and the session is the
one it names (`/s/{session}/...`, the session header) or the one the core derives. Input
that repeats the whole conversation it continues is not sent twice.

A completed response is stored (`proxy/store/responses.py`) unless `store: false`; its turn
is journaled either way. `X-Context-Strategy: off` sends the request upstream untouched.
`add_routes` registers every route and the store's start-up.
"""

from __future__ import annotations

import secrets
import time

import orjson
from aiohttp import web

from proxy.doors.responses import ResponsesDoor
from proxy.doors.responses_codec import (
    ResponsesCall,
    conversation_object,
    input_items_of,
    item_list,
    parse_conversation_create,
    parse_conversation_items,
    parse_conversation_update,
    parse_request,
)
from proxy.errors import BadRequest, NotFound
from proxy.handlers.gateway import admit, check_model, gate
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.relay import relay_turn
from proxy.handlers.request import read_body
from proxy.keys import PRINCIPAL, REQUEST_ID, ROUTE_MODEL, SETTINGS, STORE, TURN_FACTS, TURNS
from proxy.sessions import message_hash, requested_session
from proxy.store.responses import ResponseStore, StoredConversation, StoredResponse
from proxy.turn import STRATEGY_HEADER, Caller, ChatRequest
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject, Message

RESPONSES = web.AppKey("responses", ResponseStore)
RESPONSES_PATH = "/v1/responses"


def add_routes(app: web.Application) -> None:
    """The Responses and Conversations routes (before the `/v1/` pass-through), and their store."""
    app.on_startup.append(_open_store)
    app.router.add_post(RESPONSES_PATH, create_response)
    app.router.add_post("/s/{session}" + RESPONSES_PATH, create_response)
    app.router.add_get(RESPONSES_PATH + "/{id}", get_response)
    app.router.add_delete(RESPONSES_PATH + "/{id}", delete_response)
    app.router.add_get(RESPONSES_PATH + "/{id}/input_items", list_input_items)
    app.router.add_post("/v1/conversations", create_conversation)
    app.router.add_get("/v1/conversations/{id}", get_conversation)
    app.router.add_post("/v1/conversations/{id}", update_conversation)
    app.router.add_delete("/v1/conversations/{id}", delete_conversation)
    app.router.add_get("/v1/conversations/{id}/items", list_conversation_items)
    app.router.add_post("/v1/conversations/{id}/items", add_conversation_items)


async def _open_store(app: web.Application) -> None:
    """Runs after every cleanup context has started, so the session store exists."""
    app[RESPONSES] = ResponseStore(app[STORE], ttl_s=app[SETTINGS].sessions.ttl_s)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


async def _json(request: web.Request) -> object:
    """The body as JSON (None when empty); bad JSON, or JSON nested too deep to send on, is a 400."""
    raw = await read_body(request, int(request.app[SETTINGS].server.max_body_mb * 1024 * 1024))
    return _parsed(raw) if raw.strip() else None


def _parsed(raw: bytes) -> object:
    try:
        body = orjson.loads(raw)
        orjson.dumps(body)  # orjson reads 1024 levels of nesting but writes only 254
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"We could not parse the JSON body of your request: {exc}", code="invalid_json") from exc
    except orjson.JSONEncodeError as exc:
        raise BadRequest(f"request body is nested too deeply to forward: {exc}", code="invalid_json") from exc
    return body


# POST /v1/responses


async def create_response(request: web.Request) -> web.StreamResponse:
    settings, turns = request.app[SETTINGS], request.app[TURNS]
    raw = await read_body(request, int(settings.server.max_body_mb * 1024 * 1024))
    strategy = request.headers.get(STRATEGY_HEADER)
    if turns.deps.strategies.spec_for("", strategy) is None:
        return await _pass_through(request, raw)
    call = parse_request(_parsed(raw))
    if call.compactions:
        raise BadRequest(
            "'input' holds a compaction item, which this proxy did not make.",
            param="input",
            code="invalid_value",
        )
    request[ROUTE_MODEL] = call.model
    check_model(request, call.model)
    spec = ("full",) if call.truncation == "disabled" else turns.deps.strategies.spec_for(call.model, strategy)
    assert spec is not None  # `off` was answered above
    tenant = request[PRINCIPAL].tenant
    store = request.app[RESPONSES]
    session, prior = await _continued(store, tenant, call)
    lead, own = _own_input(call)
    if len(own) >= len(prior) and [message_hash(m) for m in own[: len(prior)]] == [message_hash(m) for m in prior]:
        own = own[len(prior) :]  # the client repeated the conversation it continues
    if not own and (not prior or prior[-1].get("role") == "assistant"):
        raise BadRequest("Missing required parameter: 'input'.", param="input", code="missing_required_parameter")
    conversation = [*prior, *own]
    messages = [*lead, *conversation]
    chat = ChatRequest(
        body={**call.chat_body, "messages": messages},
        raw=raw,
        model=call.model,
        messages=messages,
        stream=call.stream,
        include_usage=False,
    )
    if session is None:
        session = requested_session(
            path_session=request.match_info.get("session"),
            header_session=request.headers.get(settings.sessions.header),
            header_name=settings.sessions.header,
        )
    principal = request[PRINCIPAL]
    caller = Caller(
        tenant, session, principal.upstream_authorization, request.headers, request[REQUEST_ID], gate(request)
    )
    turn = await turns.begin(chat, caller, spec)
    response_id = _new_id("resp")

    async def keep(response: JSONObject, outcome: Outcome) -> None:
        if not call.store:
            return
        assert outcome.output is not None  # a completed turn has its answer
        stored = StoredResponse(turn.session, turn.seq, conversation, len(prior), outcome.output, response)
        await store.save_response(tenant, response_id, stored)
        if call.conversation is not None:
            record = await store.conversation(tenant, call.conversation)
            if record is not None:
                updated = StoredConversation(record.created_at, record.metadata, last=response_id)
                await store.save_conversation(tenant, call.conversation, updated)

    door = ResponsesDoor(call, response_id=response_id, created_at=int(time.time()), keep=keep)
    response = await relay_turn(request, turn, door)
    request[TURN_FACTS] = turn.facts()
    return response


def _own_input(call: ResponsesCall) -> tuple[list[Message], list[Message]]:
    """(the instructions as the leading system message, or nothing; the request's own input)."""
    messages = call.chat_body["messages"]
    lead = 1 if call.instructions is not None else 0
    return messages[:lead], messages[lead:]


async def _continued(store: ResponseStore, tenant: str, call: ResponsesCall) -> tuple[str | None, list[Message]]:
    """(the session, the conversation so far) that `previous_response_id` or `conversation` names."""
    if call.previous_response_id is not None:
        stored = await store.response(tenant, call.previous_response_id)
        if stored is None:
            raise NotFound(
                f"Previous response with id '{call.previous_response_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return stored.session, stored.conversation
    if call.conversation is not None:
        record = await _conversation(store, tenant, call.conversation, param="conversation")
        return call.conversation, await _history(store, tenant, record)
    return None, []


async def _pass_through(request: web.Request, raw: bytes) -> web.StreamResponse:
    """`X-Context-Strategy: off`: the body goes upstream as the client sent it; nothing is journaled or stored."""
    body = _parsed(raw)
    model = body.get("model") if isinstance(body, dict) else None
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a non-empty string", param="model", code="invalid_type")
    request[ROUTE_MODEL] = model
    check_model(request, model)
    deps, principal = request.app[TURNS].deps, request[PRINCIPAL]
    if principal.key is not None:  # the body's tokens stand in for its prompt's
        encoder = await deps.tokens.encoder_for(model)
        await admit(request, len(encoder.encode_ordinary(raw.decode(errors="replace"))))
    upstream = deps.routes.client_for(model)
    headers = upstream.headers_for(
        request.headers, session_header=deps.settings.sessions.header, authorization=principal.upstream_authorization
    )
    headers.popall("Content-Encoding", None)  # raw is the decoded body
    answer = await upstream.send("POST", RESPONSES_PATH, headers=headers, body=raw, query=request.query)
    return await relay_raw(request, answer)


# GET / DELETE /v1/responses/{id}, input items


async def _stored(request: web.Request) -> StoredResponse:
    response_id = request.match_info["id"]
    stored = await request.app[RESPONSES].response(request[PRINCIPAL].tenant, response_id)
    if stored is None:
        raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
    return stored


async def get_response(request: web.Request) -> web.Response:
    return web.json_response((await _stored(request)).response, dumps=_dumps)


async def list_input_items(request: web.Request) -> web.Response:
    stored = await _stored(request)
    items = input_items_of(stored.input[stored.own :], response_id=request.match_info["id"])
    return _list(request, items)


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["id"]
    if not await request.app[RESPONSES].delete_response(request[PRINCIPAL].tenant, response_id):
        raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
    return web.json_response({"id": response_id, "object": "response", "deleted": True})


def _list(request: web.Request, items: list[JSONObject]) -> web.Response:
    query = request.query
    page = item_list(items, limit=query.get("limit"), after=query.get("after"), order=query.get("order"))
    return web.json_response(page, dumps=_dumps)


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


# /v1/conversations


async def _conversation(store: ResponseStore, tenant: str, conversation_id: str, *, param: str) -> StoredConversation:
    record = await store.conversation(tenant, conversation_id)
    if record is None:
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param=param)
    return record


async def _history(store: ResponseStore, tenant: str, record: StoredConversation) -> list[Message]:
    """The conversation's messages: its latest response's conversation (even if that response was
    deleted from view), then the items added since."""
    last = await store.response(tenant, record.last, deleted=True) if record.last is not None else None
    return [*(last.conversation if last is not None else []), *record.pending]


async def create_conversation(request: web.Request) -> web.Response:
    items, metadata = parse_conversation_create(await _json(request))
    conversation_id = _new_id("conv")
    record = StoredConversation(int(time.time()), metadata or {}, pending=items)
    await request.app[RESPONSES].save_conversation(request[PRINCIPAL].tenant, conversation_id, record)
    return web.json_response(conversation_object(conversation_id, created_at=record.created_at, metadata=metadata))


async def get_conversation(request: web.Request) -> web.Response:
    conversation_id = request.match_info["id"]
    record = await _conversation(request.app[RESPONSES], request[PRINCIPAL].tenant, conversation_id, param="id")
    return web.json_response(
        conversation_object(conversation_id, created_at=record.created_at, metadata=record.metadata)
    )


async def update_conversation(request: web.Request) -> web.Response:
    metadata = parse_conversation_update(await _json(request))
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    record = await _conversation(store, tenant, conversation_id, param="id")
    record = StoredConversation(record.created_at, metadata, record.last, record.pending)
    await store.save_conversation(tenant, conversation_id, record)
    return web.json_response(conversation_object(conversation_id, created_at=record.created_at, metadata=metadata))


async def delete_conversation(request: web.Request) -> web.Response:
    conversation_id = request.match_info["id"]
    if not await request.app[RESPONSES].delete_conversation(request[PRINCIPAL].tenant, conversation_id):
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="id")
    return web.json_response({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


async def list_conversation_items(request: web.Request) -> web.Response:
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    record = await _conversation(store, tenant, conversation_id, param="id")
    return _list(request, input_items_of(await _history(store, tenant, record), response_id=conversation_id))


async def add_conversation_items(request: web.Request) -> web.Response:
    added = parse_conversation_items(await _json(request))
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    record = await _conversation(store, tenant, conversation_id, param="id")
    before = input_items_of(await _history(store, tenant, record), response_id=conversation_id)
    record = StoredConversation(record.created_at, record.metadata, record.last, [*record.pending, *added])
    await store.save_conversation(tenant, conversation_id, record)
    items = input_items_of(await _history(store, tenant, record), response_id=conversation_id)[len(before) :]
    return web.json_response(item_list(items, limit=100, after=None, order="asc"), dumps=_dumps)

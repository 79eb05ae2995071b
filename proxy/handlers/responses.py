"""`POST /v1/responses` (and `.../compact`), the Conversations API: the Responses door's HTTP edge and state.

A response is a turn. Its request reaches the core as a full-history chat client's would:
the conversation it continues (a stored response named by `previous_response_id`, or a
conversation's messages), then its own input, after its own `instructions` (never carried
over). The core's reconcile finds that conversation in the journal, so a response id that
is not its session's head, or a conversation an item was deleted from, starts a branch
there. With neither, the input is the whole conversation (a stateless client) and the
session is the one it names (`/s/{session}/...`, the session header, else
`prompt_cache_key`) or the one the core derives. Input that repeats the whole conversation
it continues is not sent twice; a `compaction` item of the input is restored to the summary
it stands for.

A completed response is stored (`proxy/store/responses.py`: a reference to its turn, its own
input and its answer) unless `store: false`; its turn is journaled either way.
`X-Context-Strategy: off` sends the request upstream untouched. `add_routes` registers every
route and the store's start-up.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import replace

import orjson
from aiohttp import web

from proxy.app_state import PRINCIPAL, ROUTE_MODEL, SETTINGS, STORE, TURN_FACTS, TURNS
from proxy.compaction import make_summarizer
from proxy.compaction.strategies import CompactionInput, CompactionResult, StrategyError, without_server
from proxy.context.compose import History, build_history
from proxy.context.window import Window, archive_uri
from proxy.doors.responses import ResponsesDoor
from proxy.doors.responses_codec import (
    CompactCall,
    compacted_object,
    compaction_item,
    conversation_object,
    input_items_of,
    item_list,
    parse_compact,
    parse_conversation_create,
    parse_conversation_items,
    parse_conversation_update,
    parse_request,
    restore,
    usage_of,
    without_item,
)
from proxy.errors import BadRequest, NotFound, UpstreamUnavailable
from proxy.handlers.gateway import admit, caller_of, check_model
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.relay import relay_turn
from proxy.handlers.request import parse_json, read_body
from proxy.sessions import Turn, message_hash, requested_session
from proxy.sessions.identity import validate_session_id
from proxy.sessions.reconcile import split_leading
from proxy.store.responses import ResponseStore, StoredCompaction, StoredConversation, StoredResponse
from proxy.turn import STRATEGY_HEADER, ChatRequest, TurnService
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject, Message

RESPONSES = web.AppKey("responses", ResponseStore)
RESPONSES_PATH = "/v1/responses"
COMPACT_PATH = RESPONSES_PATH + "/compact"


def add_routes(app: web.Application) -> None:
    """The Responses and Conversations routes (before the `/v1/` pass-through), and their store."""
    app.on_startup.append(_open_store)
    app.router.add_post(RESPONSES_PATH, create_response)
    app.router.add_post("/s/{session}" + RESPONSES_PATH, create_response)
    app.router.add_post(COMPACT_PATH, compact)
    app.router.add_get(RESPONSES_PATH + "/{id}", get_response)
    app.router.add_delete(RESPONSES_PATH + "/{id}", delete_response)
    app.router.add_get(RESPONSES_PATH + "/{id}/input_items", list_input_items)
    app.router.add_post("/v1/conversations", create_conversation)
    app.router.add_get("/v1/conversations/{id}", get_conversation)
    app.router.add_post("/v1/conversations/{id}", update_conversation)
    app.router.add_delete("/v1/conversations/{id}", delete_conversation)
    app.router.add_get("/v1/conversations/{id}/items", list_conversation_items)
    app.router.add_post("/v1/conversations/{id}/items", add_conversation_items)
    app.router.add_get("/v1/conversations/{id}/items/{item_id}", get_conversation_item)
    app.router.add_delete("/v1/conversations/{id}/items/{item_id}", delete_conversation_item)


async def _open_store(app: web.Application) -> None:
    """Runs after every cleanup context has started, so the session store exists."""
    app[RESPONSES] = ResponseStore(app[STORE], ttl_s=app[SETTINGS].sessions.ttl_s)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


async def _json(request: web.Request) -> object:
    """The body as JSON (None when empty); bad JSON, or JSON nested too deep to send on, is a 400."""
    raw = await read_body(request, request.app[SETTINGS].server.max_body_bytes)
    return parse_json(raw) if raw.strip() else None


# POST /v1/responses


async def create_response(request: web.Request) -> web.StreamResponse:
    settings, turns = request.app[SETTINGS], request.app[TURNS]
    raw = await read_body(request, int(settings.server.max_body_mb * 1024 * 1024))
    strategy = request.headers.get(STRATEGY_HEADER)
    if turns.deps.strategies.spec_for("", strategy) is None:
        return await _pass_through(request, raw, RESPONSES_PATH)
    call = parse_request(parse_json(raw))
    request[ROUTE_MODEL] = call.model
    check_model(request, call.model)
    spec = ("full",) if call.truncation == "disabled" else turns.deps.strategies.spec_for(call.model, strategy)
    assert spec is not None  # `off` was answered above
    tenant = request[PRINCIPAL].tenant
    store = request.app[RESPONSES]
    session, prior = await _continued(store, tenant, call.previous_response_id, call.conversation)
    messages = await _restored(store, tenant, call.chat_body["messages"], call.compactions)
    lead = 1 if call.instructions is not None else 0
    conversation = _conversation_of(prior, messages[lead:])
    messages = [*messages[:lead], *conversation]
    chat = ChatRequest(
        body={**call.chat_body, "messages": messages},
        raw=raw,
        model=call.model,
        messages=messages,
        stream=call.stream,
        include_usage=False,
        own_system=True,  # `instructions` are the request's own, never carried over
    )
    if session is None:
        session = _named_session(request, call.prompt_cache_key)
    response_id = _new_id("resp")
    kept = call.store or request.app[SETTINGS].responses.store_false == "manage"
    caller = caller_of(request, session, door=ResponsesDoor.name, door_id=response_id, keep=kept)
    turn = await turns.begin(chat, caller, spec)

    async def keep(response: JSONObject, outcome: Outcome) -> None:
        if not call.store:
            return
        assert outcome.output is not None  # a completed turn has its answer
        own, lead = conversation[len(prior) :], split_leading(conversation)[0]
        earlier = conversation[: len(prior)] if turn.seq is None else None
        stored = StoredResponse(turn.session, turn.seq, own, outcome.output, response, lead, earlier)
        await store.save_response(tenant, response_id, stored, [*conversation, outcome.output])
        if call.conversation is not None:  # items added or deleted meanwhile stay so
            added = [*own, outcome.output]
            await store.update_conversation(tenant, call.conversation, lambda record: record.extended(added))

    door = ResponsesDoor(call, response_id=response_id, created_at=int(time.time()), keep=keep)
    response = await relay_turn(request, turn, door)
    request[TURN_FACTS] = turn.facts()
    return response


def _conversation_of(prior: list[Message], own: list[Message]) -> list[Message]:
    """The conversation continued (`prior`), then the request's own input, less any repeat of
    `prior` at its start; a request that adds nothing to answer is a 400 naming `input`."""
    if len(own) >= len(prior) and [message_hash(m) for m in own[: len(prior)]] == [message_hash(m) for m in prior]:
        own = own[len(prior) :]  # the client repeated the conversation it continues
    if not own and (not prior or prior[-1].get("role") == "assistant"):
        raise BadRequest("Missing required parameter: 'input'.", param="input", code="missing_required_parameter")
    return [*prior, *own]


def _named_session(request: web.Request, prompt_cache_key: str | None) -> str | None:
    """The session the path or the session header names, else the one `prompt_cache_key` names
    (itself when it is a valid session id, else a digest of it); None: the core derives one."""
    header = request.app[SETTINGS].sessions.header
    named = requested_session(
        path_session=request.match_info.get("session"),
        header_session=request.headers.get(header),
        header_name=header,
    )
    if named is not None or prompt_cache_key is None:
        return named
    try:
        return validate_session_id(prompt_cache_key, "prompt_cache_key")
    except BadRequest:  # any string is a cache key; a session id is not
        return "cache-" + hashlib.sha256(prompt_cache_key.encode()).hexdigest()[:40]


async def _continued(
    store: ResponseStore, tenant: str, previous_response_id: str | None, conversation: str | None
) -> tuple[str | None, list[Message]]:
    """(the session, the conversation so far) that `previous_response_id` or `conversation` names."""
    if previous_response_id is not None:
        stored = await store.response(tenant, previous_response_id)
        continued = (
            await store.continued(tenant, previous_response_id, stored, output_hash=message_hash(stored.output))
            if stored
            else None
        )
        if stored is None or continued is None:
            gone = "" if stored is None else ": its session no longer holds it (deleted, or expired)"
            raise NotFound(
                f"Previous response with id '{previous_response_id}' not found{gone}.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return stored.session, continued
    if conversation is not None:
        record = await _conversation(store, tenant, conversation, param="conversation")
        return conversation, record.messages
    return None, []


async def _restored(
    store: ResponseStore, tenant: str, messages: list[Message], compactions: tuple[tuple[int, str], ...]
) -> list[Message]:
    """`messages` with the summary of each compaction item in its place; an item this tenant's
    `/v1/responses/compact` did not make (or that expired) is a 400 naming `input`."""
    summaries = []
    for _, reference in compactions:
        stored = await store.compaction(tenant, reference)
        if stored is None:
            raise BadRequest(
                "'input' holds a compaction item that this proxy did not make for this key (or that expired).",
                param="input",
                code="invalid_value",
            )
        summaries.append(stored.summary)
    return restore(messages, compactions, summaries)


async def _pass_through(request: web.Request, raw: bytes, path: str) -> web.StreamResponse:
    """`X-Context-Strategy: off`: the body goes upstream as the client sent it; nothing is journaled or stored."""
    body = parse_json(raw)
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
    answer = await upstream.send("POST", path, headers=headers, body=raw, query=request.rel_url.raw_query_string)
    return await relay_raw(request, answer)


# POST /v1/responses/compact


async def compact(request: web.Request) -> web.StreamResponse:
    """Compact the conversation (the response `previous_response_id` names, then `input`) with the
    session's strategy, forced as `new_context` forces it: what it evicts leaves for one summary,
    kept under a random reference per tenant, which the answer's `compaction` item carries; the
    rest comes back verbatim. Nothing is journaled: the session's own window is untouched, and the
    next request that sends these items back is reconciled as any other."""
    turns = request.app[TURNS]
    raw = await read_body(request, request.app[SETTINGS].server.max_body_bytes)
    spec = turns.deps.strategies.spec_for("", request.headers.get(STRATEGY_HEADER))
    if spec is None:
        return await _pass_through(request, raw, COMPACT_PATH)
    call = parse_compact(parse_json(raw))
    request[ROUTE_MODEL] = call.model
    check_model(request, call.model)
    tenant, store = request[PRINCIPAL].tenant, request.app[RESPONSES]
    _, prior = await _continued(store, tenant, call.previous_response_id, None)
    messages = await _restored(store, tenant, call.messages, call.compactions)
    conversation = _conversation_of(prior, messages[1 if call.instructions is not None else 0 :])
    result = await _compacted(request, turns, call, conversation)
    created_at = int(time.time())
    compacted_id = _new_id("resp")
    if result is None or not result.changed:
        body = compacted_object(compacted_id, created_at=created_at, before=conversation, compaction=None, after=[],
                                usage=_no_usage())  # fmt: skip
        return web.json_response(body, dumps=_dumps)
    window = result.window
    item = None
    if window.summary is not None:
        reference = "cpx_" + secrets.token_urlsafe(32)
        evicted = [m for unit in result.evicted for m in unit.messages]
        await store.save_compaction(
            tenant, reference, StoredCompaction(window.summary, evicted, call.model, created_at)
        )
        item = compaction_item(_new_id("cmp"), reference)
    kept = [*window.pinned, *(m for unit in result.kept for m in unit.messages)]
    usage = usage_of(result.summary.usage if result.summary is not None else None) or _no_usage()
    body = compacted_object(
        compacted_id, created_at=created_at, before=list(window.leading), compaction=item, after=kept, usage=usage
    )
    return web.json_response(body, dumps=_dumps)


def _no_usage() -> JSONObject:
    usage = usage_of({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    assert usage is not None
    return usage


async def _compacted(
    request: web.Request, turns: TurnService, call: CompactCall, conversation: list[Message]
) -> CompactionResult | None:
    """The session's strategy run over `conversation` (a server-managed one as its inner strategy);
    None when `conversation` holds a single unit. A failed compaction is a 502."""
    deps, context = turns.deps, turns.deps.settings.context
    encoder = await deps.tokens.encoder_for(call.model)
    tokens = await deps.tokens.count_messages(encoder, conversation)
    await admit(request, sum(tokens))
    history = _history_of(conversation, tokens)
    if len(history.units) < 2:
        return None
    spec = deps.strategies.spec_for(call.model, request.headers.get(STRATEGY_HEADER))
    assert spec is not None  # `off` was passed through
    strategy = without_server(deps.strategies.build(spec, call.model))
    budget = deps.windows.budget(call.model, encoder)
    compression_model = context.compression_model or call.model
    summarizer = make_summarizer(
        deps.routes.client_for(compression_model),
        model=compression_model,
        authorization=request[PRINCIPAL].upstream_authorization,
        timeout_s=context.compression_timeout_s,
        max_tokens=context.max_tokens_for(compression_model),
    )
    data = CompactionInput(
        history, budget, 0, summarizer, archive_uri(_new_id("cmp")),
        lambda text: len(encoder.encode_ordinary(text)), forced=True,
    )  # fmt: skip
    try:
        return await strategy.compact(data)
    except StrategyError as exc:
        raise UpstreamUnavailable(f"the compaction failed: {exc}") from exc


def _history_of(conversation: list[Message], tokens: list[int]) -> History:
    """`conversation` as a history of turns, one per user message and all that follows it (so a
    tool call and its results stay together); its leading system/developer block as the window's."""
    starts = [i for i, m in enumerate(conversation) if i == 0 or m.get("role") == "user"]
    ends = [*starts[1:], len(conversation)]
    turns = [
        Turn(seq, "completed", tuple(conversation[start:end]), None, tuple(tokens[start:end]))
        for seq, (start, end) in enumerate(zip(starts, ends, strict=True))
    ]
    return build_history(Window(), turns)


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
    items = input_items_of(stored.own, response_id=request.match_info["id"])
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


async def create_conversation(request: web.Request) -> web.Response:
    items, metadata = parse_conversation_create(await _json(request))
    conversation_id = _new_id("conv")
    record = StoredConversation(int(time.time()), metadata or {}).extended(items)
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
    record = await store.update_conversation(tenant, conversation_id, lambda record: replace(record, metadata=metadata))
    if record is None:
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="id")
    return web.json_response(conversation_object(conversation_id, created_at=record.created_at, metadata=metadata))


async def delete_conversation(request: web.Request) -> web.Response:
    conversation_id = request.match_info["id"]
    if not await request.app[RESPONSES].delete_conversation(request[PRINCIPAL].tenant, conversation_id):
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="id")
    return web.json_response({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


async def list_conversation_items(request: web.Request) -> web.Response:
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    record = await _conversation(store, tenant, conversation_id, param="id")
    return _list(request, _items_of(record, conversation_id))


def _items_of(record: StoredConversation, conversation_id: str) -> list[JSONObject]:
    return input_items_of(record.messages, response_id=conversation_id, numbers=record.numbers)


async def add_conversation_items(request: web.Request) -> web.Response:
    added = parse_conversation_items(await _json(request))
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    updated = await store.update_conversation(tenant, conversation_id, lambda record: record.extended(added))
    if updated is None:
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="id")
    items = input_items_of(
        added, response_id=conversation_id, numbers=updated.numbers[len(updated.numbers) - len(added) :]
    )
    return web.json_response(item_list(items, limit=100, after=None, order="asc"), dumps=_dumps)


async def get_conversation_item(request: web.Request) -> web.Response:
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    record = await _conversation(store, tenant, conversation_id, param="conversation_id")
    item_id = request.match_info["item_id"]
    for item in _items_of(record, conversation_id):
        if item["id"] == item_id:
            return web.json_response(item, dumps=_dumps)
    raise NotFound(f"Item with id '{item_id}' not found.", param="item_id")


async def delete_conversation_item(request: web.Request) -> web.Response:
    """The conversation less that item (OpenAI answers with the conversation object); the next
    response made in it continues the conversation as it is now (a branch in its journal)."""
    store, tenant, conversation_id = request.app[RESPONSES], request[PRINCIPAL].tenant, request.match_info["id"]
    item_id = request.match_info["item_id"]

    def without(record: StoredConversation) -> StoredConversation:
        remaining = without_item(record.messages, record.numbers, item_id, response_id=conversation_id)
        if remaining is None:
            raise NotFound(f"Item with id '{item_id}' not found.", param="item_id")
        return replace(record, messages=remaining[0], numbers=remaining[1])

    record = await store.update_conversation(tenant, conversation_id, without)
    if record is None:
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="conversation_id")
    return web.json_response(
        conversation_object(conversation_id, created_at=record.created_at, metadata=record.metadata)
    )

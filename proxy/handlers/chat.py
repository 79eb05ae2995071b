"""`POST /v1/chat/completions`: the managed path, told as the request's story.

identify -> load and reconcile -> count the new input -> fit under budget (maybe
compact) -> compose -> forward -> relay -> record the turn -> feed usage back.
`X-Context-Strategy: off` skips all of it: a pure pass-through, not journaled.
"""

from __future__ import annotations

import asyncio
import logging
import os

import orjson
from aiohttp import web

from proxy.context.budget import Budget, make_budget
from proxy.context.compose import compose_json
from proxy.context.janitor import fit
from proxy.context.tokens import Encoder, request_overhead
from proxy.handlers.compaction import CompactionContext, archive_uri, background_job, exclusive, make_summarizer, settle
from proxy.handlers.conversation import load_conversation
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.recording import TurnRecorder
from proxy.handlers.relay import Outcome, StreamRelay, relay_json
from proxy.handlers.validation import ChatRequest, parse_chat_request, read_body
from proxy.keys import METRICS, PATHS, ROUTE_MODEL, RUNNER, SETTINGS, STORE, STRATEGIES, TOKENS, UPSTREAM
from proxy.sessions import TurnDraft, identify, tenant_of

log = logging.getLogger("context_proxy.chat")

STRATEGY_HEADER = "X-Context-Strategy"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    app = request.app
    settings = app[SETTINGS]
    chat = parse_chat_request(await read_body(request, int(settings.server.max_body_mb * 1024 * 1024)))
    request[ROUTE_MODEL] = chat.model
    spec = app[STRATEGIES].spec_for(chat.model, request.headers.get(STRATEGY_HEADER))
    if spec is None:
        return await _pass_through(request, chat)
    request_id = "req_" + os.urandom(12).hex()
    authorization = request.headers.get("Authorization")

    identity = identify(
        tenant=tenant_of(authorization, settings.upstream.api_key),
        path_session=request.match_info.get("session"),
        header_session=request.headers.get(settings.sessions.header),
        header_name=settings.sessions.header,
        messages=chat.messages,
    )
    conversation = await load_conversation(app[STORE], app[PATHS], identity, chat.messages)
    new_input = conversation.reconciled.new_input

    encoder = await app[TOKENS].encoder_for(chat.model)
    new_tokens = await app[TOKENS].count_messages(encoder, new_input)
    overhead = request_overhead(encoder, chat.body.get("tools"))
    budget = _budget(app, chat, encoder, overhead)
    strategy = app[STRATEGIES].build(spec)
    summarizer = make_summarizer(
        app[UPSTREAM],
        model=settings.context.compression_model or chat.model,
        authorization=authorization,
        timeout_s=settings.context.compression_timeout_s,
    )
    fitted = await fit(
        conversation.history,
        new_tokens=sum(new_tokens),
        budget=budget,
        strategy=strategy,
        summarizer=summarizer,
        archive_uri=archive_uri(conversation.history.window),
        count_text=lambda text: len(encoder.encode_ordinary(text)),
        breaker=conversation.breaker,
        usage=conversation.usage,
        preference=settings.context.usage_preference,
    )
    compaction = CompactionContext(app[STORE], conversation.keys, settings, app[METRICS])
    await settle(
        compaction, fitted, conversation.stored_window, conversation.breaker, strategy.name, request_id=request_id
    )

    messages = compose_json(fitted.history, new_input)
    sent_tokens = fitted.tokens + sum(new_tokens) + overhead
    window_id = fitted.history.window.current
    extra = {
        "X-Session-Id": identity.session,
        "X-Context-Window-Id": window_id,
        "X-Context-Tokens": str(sent_tokens),
        STRATEGY_HEADER: strategy.name,
        "X-Request-Id": request_id,
    }
    draft = TurnDraft(
        model=chat.model,
        input=new_input,
        input_tokens=new_tokens,
        input_hashes=conversation.reconciled.new_hashes,
        encoding=encoder.name,
        request_id=request_id,
        window=window_id,
        stream=chat.stream,
    )
    recorder = TurnRecorder(app, conversation, draft, sent_tokens=sent_tokens, encoder=encoder)
    try:
        response = await _forward_and_relay(request, chat, messages, extra, recorder)
    finally:
        await recorder.record(Outcome("interrupted"))
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "chat request=%s session=%s window=%s strategy=%s sent_tokens=%d new_messages=%d parent=%s compaction=%s",
            request_id, identity.session, window_id, strategy.name, sent_tokens, len(new_input),
            conversation.reconciled.parent, fitted.result.strategy if fitted.result else fitted.failure or fitted.skipped,
        )  # fmt: skip
    if fitted.deferred:
        job = background_job(compaction, app[PATHS], conversation, strategy, summarizer, budget, encoder, request_id)
        app[RUNNER].submit(conversation.keys.index_member, lambda: exclusive(compaction, job))
    return response


def _budget(app: web.Application, chat: ChatRequest, encoder: Encoder, overhead: int) -> Budget:
    context = app[SETTINGS].context
    model = context.for_model(chat.model)
    return make_budget(
        context_window=model.context_window or context.context_window,
        trigger_ratio=model.trigger_ratio or context.trigger_ratio,
        max_output_tokens=chat.max_output_tokens,
        overhead=overhead,
        calibration=app[TOKENS].calibration(chat.model, encoder),
    )


def upstream_body(chat: ChatRequest, messages_json: bytes) -> bytes:
    """The client's body with the composed messages spliced in; streams always ask for usage."""
    rest = {k: v for k, v in chat.body.items() if k != "messages"}
    if chat.stream:
        rest["stream_options"] = {**(chat.body.get("stream_options") or {}), "include_usage": True}
    others = orjson.dumps(rest)
    if others == b"{}":
        return b'{"messages":' + messages_json + b"}"
    return b'{"messages":' + messages_json + b"," + others[1:]


async def _forward_and_relay(
    request: web.Request, chat: ChatRequest, messages_json: bytes, extra: dict[str, str], recorder: TurnRecorder
) -> web.StreamResponse:
    app = request.app
    upstream = app[UPSTREAM]
    headers = upstream.headers_for(request.headers, session_header=app[SETTINGS].sessions.header)
    headers["Content-Type"] = "application/json"
    headers["Accept-Encoding"] = "identity"
    started = asyncio.get_running_loop().time()
    answer = await upstream.send(
        "POST", "/v1/chat/completions", headers=headers, body=upstream_body(chat, messages_json)
    )
    app[METRICS].upstream_done("/v1/chat/completions", asyncio.get_running_loop().time() - started)
    if not chat.stream:
        response, outcome = await relay_json(request, answer, extra)
        await recorder.record(outcome)
        return response
    return await StreamRelay(answer, include_usage=chat.include_usage).run(request, extra, before_end=recorder.record)


async def _pass_through(request: web.Request, chat: ChatRequest) -> web.StreamResponse:
    """`X-Context-Strategy: off`: the body goes as the client sent it; nothing is journaled."""
    app = request.app
    upstream = app[UPSTREAM]
    headers = upstream.headers_for(request.headers, session_header=app[SETTINGS].sessions.header)
    answer = await upstream.send("POST", "/v1/chat/completions", headers=headers, body=chat.raw, query=request.query)
    return await relay_raw(request, answer)

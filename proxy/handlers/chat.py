"""`POST /v1/chat/completions`: the managed path, told as the request's story.

identify -> load and reconcile -> count the new input -> fit under budget (maybe
compact) -> compose -> forward (once more, compacted, if the upstream names a smaller
window than the proxy assumed) -> relay -> record the turn -> feed usage back.
`X-Context-Strategy: off` skips all of it: a pure pass-through, not journaled.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

import orjson
from aiohttp import web

from proxy.context.budget import Budget, make_budget
from proxy.context.compose import compose_json
from proxy.context.janitor import Fitted, fit
from proxy.context.strategies import Strategy, Summarizer
from proxy.context.tokens import Encoder, request_overhead
from proxy.errors import ProxyError
from proxy.handlers.compaction import CompactionContext, archive_uri, background_job, exclusive, make_summarizer, settle
from proxy.handlers.conversation import Conversation, load_conversation
from proxy.handlers.passthrough import relay_raw
from proxy.handlers.recording import TurnRecorder
from proxy.handlers.relay import Outcome, StreamRelay, relay_json
from proxy.handlers.validation import ChatRequest, parse_chat_request, read_body
from proxy.keys import LIMITS, METRICS, PATHS, ROUTE_MODEL, RUNNER, SETTINGS, STORE, STRATEGIES, TOKENS, UPSTREAM
from proxy.sessions import TurnDraft, identify, tenant_of
from proxy.upstream import UpstreamResponse

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
    call = _Call(
        chat=chat,
        conversation=conversation,
        encoder=encoder,
        new_tokens=sum(new_tokens),
        overhead=request_overhead(encoder, chat.body.get("tools")),
        strategy=app[STRATEGIES].build(spec),
        summarizer=make_summarizer(
            app[UPSTREAM],
            model=settings.context.compression_model or chat.model,
            authorization=authorization,
            timeout_s=settings.context.compression_timeout_s,
        ),
        compaction=CompactionContext(app[STORE], conversation.keys, settings, app[METRICS]),
        request_id=request_id,
    )
    fitted, budget = await _fit_under_budget(app, call)
    answer = await _forward(request, chat, compose_json(fitted.history, new_input))
    if fitted.result is None and await _window_learned(app, chat.model, answer):
        answer.close()
        fitted, budget = await _fit_under_budget(app, call)
        answer = await _forward(request, chat, compose_json(fitted.history, new_input))

    sent_tokens = fitted.tokens + call.new_tokens + call.overhead
    window_id = fitted.history.window.current
    extra = {
        "X-Session-Id": identity.session,
        "X-Context-Window-Id": window_id,
        "X-Context-Tokens": str(sent_tokens),
        STRATEGY_HEADER: call.strategy.name,
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
        response = await _relay(request, chat, answer, extra, recorder)
    finally:
        await recorder.record(Outcome("interrupted"))
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "chat request=%s session=%s window=%s strategy=%s sent_tokens=%d new_messages=%d parent=%s compaction=%s",
            request_id, identity.session, window_id, call.strategy.name, sent_tokens, len(new_input),
            conversation.reconciled.parent, fitted.result.strategy if fitted.result else fitted.failure or fitted.skipped,
        )  # fmt: skip
    if fitted.deferred:
        job = background_job(
            call.compaction, app[PATHS], conversation, call.strategy, call.summarizer, budget, encoder, request_id
        )
        app[RUNNER].submit(conversation.keys.index_member, lambda: exclusive(call.compaction, job))
    return response


@dataclass(frozen=True)
class _Call:
    """What the budget and compaction steps of one managed request need."""

    chat: ChatRequest
    conversation: Conversation
    encoder: Encoder
    new_tokens: int
    overhead: int
    strategy: Strategy
    summarizer: Summarizer
    compaction: CompactionContext
    request_id: str


async def _fit_under_budget(app: web.Application, call: _Call) -> tuple[Fitted, Budget]:
    """Check the budget, compact if the strategy says so, and journal what happened."""
    budget = _budget(app, call.chat, call.encoder, call.overhead)
    conversation = call.conversation
    fitted = await fit(
        conversation.history,
        new_tokens=call.new_tokens,
        budget=budget,
        strategy=call.strategy,
        summarizer=call.summarizer,
        archive_uri=archive_uri(conversation.history.window),
        count_text=lambda text: len(call.encoder.encode_ordinary(text)),
        breaker=conversation.breaker,
        usage=conversation.usage,
        preference=app[SETTINGS].context.usage_preference,
    )
    await settle(
        call.compaction,
        fitted,
        conversation.stored_window,
        conversation.breaker,
        call.strategy.name,
        request_id=call.request_id,
    )
    return fitted, budget


def _configured_window(app: web.Application, model: str) -> int:
    context = app[SETTINGS].context
    return context.for_model(model).context_window or context.context_window


def _budget(app: web.Application, chat: ChatRequest, encoder: Encoder, overhead: int) -> Budget:
    context = app[SETTINGS].context
    return make_budget(
        context_window=app[LIMITS].window(chat.model, _configured_window(app, chat.model)),
        trigger_ratio=context.for_model(chat.model).trigger_ratio or context.trigger_ratio,
        max_output_tokens=chat.max_output_tokens,
        overhead=overhead,
        calibration=app[TOKENS].calibration(chat.model, encoder),
    )


async def _window_learned(app: web.Application, model: str, answer: UpstreamResponse) -> bool:
    """Whether the upstream refused the prompt as too long, naming a smaller window than assumed."""
    if answer.status != 400:
        return False
    try:
        body = orjson.loads(await answer.read())
    except (orjson.JSONDecodeError, ProxyError):
        return False
    if not isinstance(body, dict):
        return False
    nested = body.get("error")
    error = nested if isinstance(nested, dict) else body  # some servers answer without the "error" wrapper
    return app[LIMITS].learn(model, str(error.get("message", "")), _configured_window(app, model))


def upstream_body(chat: ChatRequest, messages_json: bytes) -> bytes:
    """The client's body with the composed messages spliced in; streams always ask for usage."""
    rest = {k: v for k, v in chat.body.items() if k != "messages"}
    if chat.stream:
        rest["stream_options"] = {**(chat.body.get("stream_options") or {}), "include_usage": True}
    others = orjson.dumps(rest)
    if others == b"{}":
        return b'{"messages":' + messages_json + b"}"
    return b'{"messages":' + messages_json + b"," + others[1:]


async def _forward(request: web.Request, chat: ChatRequest, messages_json: bytes) -> UpstreamResponse:
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
    return answer


async def _relay(
    request: web.Request, chat: ChatRequest, answer: UpstreamResponse, extra: dict[str, str], recorder: TurnRecorder
) -> web.StreamResponse:
    """Relay the answer; the turn is journaled before the client sees its end."""
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

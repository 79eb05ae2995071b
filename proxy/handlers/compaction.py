"""Landing compactions: the summarizer call, the journal entries, background jobs.

The strategies decide; this module does the I/O around them: the compression request
goes to the upstream with the client's own key and a bounded timeout; a result lands
with one atomic store call (new window, boundary, archived span, journal event) only
if the window is still the one it was computed from; a failure is journaled and
counted towards the breaker.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

from proxy.config import Settings
from proxy.context.budget import Budget
from proxy.context.cache import PathCache
from proxy.context.janitor import Breaker, Fitted
from proxy.context.strategies import CompactionInput, CompactionResult, Strategy, StrategyError, Summarizer, Summary
from proxy.context.tokens import Encoder
from proxy.context.window import Window
from proxy.handlers.conversation import Conversation, load_conversation
from proxy.metrics import Metrics
from proxy.sessions import Identity
from proxy.store import SessionKeys, Store
from proxy.upstream import UpstreamClient

log = logging.getLogger("context_proxy.compaction")


class CompressionFailed(Exception):
    """The compression call did not return a usable answer."""


def make_summarizer(upstream: UpstreamClient, *, model: str, authorization: str | None, timeout_s: float) -> Summarizer:
    async def summarize(messages: list[dict[str, object]]) -> Summary:
        body = orjson.dumps({"model": model, "messages": messages})
        answer = await upstream.post_json(
            "/v1/chat/completions", body, authorization=authorization, timeout_s=timeout_s
        )
        raw = await answer.read()
        if answer.status != 200:
            raise CompressionFailed(f"upstream answered {answer.status}: {raw[:300].decode(errors='replace')}")
        try:
            parsed = orjson.loads(raw)
            text = parsed["choices"][0]["message"]["content"] or ""
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise CompressionFailed("the compression answer was not a chat completion") from exc
        return Summary(text=text, usage=parsed.get("usage"), model=model)

    return summarize


def archive_uri(window: Window) -> str:
    return f"context://archive/{window.next_id}"


@dataclass(frozen=True)
class CompactionContext:
    store: Store
    keys: SessionKeys
    settings: Settings
    metrics: Metrics


async def land(ctx: CompactionContext, base: Window, result: CompactionResult, *, request_id: str) -> bool:
    """Write a compaction; False when another one changed the window first (ours is dropped)."""
    window = result.window
    archive_id = window.current
    span = [m for unit in result.evicted for m in unit.messages]
    event = {
        "type": "compaction",
        "strategy": result.strategy,
        "from_window": base.current,
        "window": window.current,
        "evicted_turns": [t.seq for unit in result.evicted for t in unit.turns],
        "kept_turns": [t.seq for unit in result.kept for t in unit.turns],
        "archive": f"context://archive/{archive_id}",
        "summary": window.summary.get("content") if window.summary else None,
        "model": result.summary.model if result.summary else None,
        "usage": result.summary.usage if result.summary else None,
        "request_id": request_id,
        "created": time.time(),
    }
    landed = await ctx.store.save_window(
        ctx.keys,
        expected_window=base.current,
        window=window.to_json(),
        boundary=window.boundary,
        event=event,
        archive_id=archive_id,
        span=span,
        ttl_s=ctx.settings.sessions.ttl_s,
    )
    ctx.metrics.compaction(result.strategy, "landed" if landed else "stale")
    log.info(
        "compaction %s session=%s window=%s->%s landed=%s",
        result.strategy,
        ctx.keys.session,
        base.current,
        window.current,
        landed,
    )
    return landed


async def record_failure(
    ctx: CompactionContext, breaker: Breaker, strategy: str, reason: str, *, request_id: str
) -> None:
    event = {
        "type": "compaction_failed",
        "strategy": strategy,
        "reason": reason,
        "request_id": request_id,
        "created": time.time(),
    }
    await ctx.store.record_event(ctx.keys, event, breaker=breaker.failed(), ttl_s=ctx.settings.sessions.ttl_s)
    ctx.metrics.compaction(strategy, "failed")
    log.warning("compaction %s failed session=%s: %s", strategy, ctx.keys.session, reason)


async def settle(
    ctx: CompactionContext, fitted: Fitted, base: Window, breaker: Breaker, strategy: str, *, request_id: str
) -> None:
    """Journal what the janitor did for this request: a landed result or a failure."""
    if fitted.result is not None:
        await land(ctx, base, fitted.result, request_id=request_id)
    elif fitted.failure is not None:
        await record_failure(ctx, breaker, strategy, fitted.failure, request_id=request_id)


async def exclusive(ctx: CompactionContext, job: Callable[[], Awaitable[None]]) -> None:
    """Run a background job under the session's compaction lock: one per session across replicas."""
    token = uuid.uuid4().hex
    lock = ctx.keys.compaction_lock
    if not await ctx.store.acquire_lock(lock, token, ctx.settings.context.compression_timeout_s * 2):
        return
    try:
        await job()
    finally:
        await ctx.store.release_lock(lock, token)


def background_job(
    ctx: CompactionContext,
    paths: PathCache,
    conversation: Conversation,
    strategy: Strategy,
    summarizer: Summarizer,
    budget: Budget,
    encoder: Encoder,
    request_id: str,
) -> Callable[[], Awaitable[None]]:
    """The deferred compaction: reload the session (it now has this turn) and compact it."""
    identity = Identity(conversation.identity.tenant, conversation.identity.session, derived=False)

    async def job() -> None:
        current = await load_conversation(ctx.store, paths, identity, [])
        history = current.history
        data = CompactionInput(
            history, budget, 0, summarizer, archive_uri(history.window), lambda text: len(encoder.encode_ordinary(text))
        )
        try:
            result = await strategy.compact(data)
        except StrategyError as exc:
            await record_failure(ctx, current.breaker, strategy.name, str(exc), request_id=request_id)
            return
        if result.changed:
            await land(ctx, current.stored_window, result, request_id=request_id)

    return job

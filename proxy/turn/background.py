"""Background compaction (`background(x)`): run after the answer, one job per session.

The job reloads the session (it now holds the turn that found it over budget),
compacts it with the inner strategy, and lands the result only if the window is still
the one it was computed from and its boundary turn is still on the session's path.
Across replicas a lock in the store makes one job per session at a time; in this
process `BackgroundJobs` does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial

from proxy.compaction import Landing
from proxy.compaction.strategies import CompactionInput, Strategy, StrategyError, Summarizer
from proxy.context.budget import Budget
from proxy.context.tokens import Encoder, count_text
from proxy.context.window import archive_uri
from proxy.sessions import Identity
from proxy.store import Store
from proxy.turn.claim import CompactionClaim
from proxy.turn.conversation import load_conversation
from proxy.turn.paths import PathCache

Job = Callable[[], Awaitable[None]]


def background_job(
    *,
    landing: Landing,
    paths: PathCache,
    identity: Identity,
    strategy: Strategy,
    summarizer: Summarizer,
    budget: Budget,
    encoder: Encoder,
    lock_ttl_s: float,
) -> Job:
    """The deferred compaction of one session, under the session's compaction lock."""
    identity = Identity(identity.tenant, identity.session, derived=False)

    async def job() -> None:
        current = await load_conversation(landing.store, paths, identity, [])
        history = current.history
        data = CompactionInput(
            history, budget, 0, summarizer, archive_uri(history.window.next_id),
            partial(count_text, encoder),
        )  # fmt: skip
        started = time.perf_counter()
        try:
            result = await strategy.compact(data)
        except StrategyError as exc:
            await landing.fail(current.breaker, strategy.name, str(exc), seconds=time.perf_counter() - started)
            return
        if result.changed:
            boundary = result.evicted[-1].last_seq if result.evicted else None
            await landing.land(
                current.stored_window, result, seconds=time.perf_counter() - started, on_path_seq=boundary
            )

    return _exclusive(landing.store, landing.keys.compaction_lock, lock_ttl_s, job)


def _exclusive(store: Store, lock: str, ttl_s: float, job: Job) -> Job:
    """`job` under the session's compaction claim: a replica that finds it taken skips its run."""

    async def claimed() -> None:
        claim = CompactionClaim(store, lock, ttl_s)
        if not await claim.acquire():
            return
        try:
            await job()
        finally:
            await claim.release()

    return claimed

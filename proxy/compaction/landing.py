"""Landing what the runner decided: a new window, or a failure counted towards the breaker.

A result lands with one atomic store call (new window, boundary, archived span,
journal entry) only if the session's window is still the one it was computed from
(and, for a background job, its boundary turn is still on the session's path); else it
is stale and dropped. A failure is journaled and bumps the breaker. Each outcome is
one event value that the journal entry, the log and the metrics are made from; a landed
one is also told to the `after_overflow` hook.
"""

from __future__ import annotations

from proxy.compaction.breaker import LIMIT, Breaker
from proxy.compaction.hooks import Hooks
from proxy.compaction.runner import Fitted
from proxy.compaction.strategies import CompactionResult
from proxy.context.window import Window, archive_uri
from proxy.events import (
    BreakerOpened,
    CompactionFailed,
    CompactionLanded,
    CompactionSkipped,
    CompactionStale,
    EventBus,
)
from proxy.store import Archive, SessionKeys, Store
from proxy.types import frozen


@frozen
class Landing:
    """Where one session's compaction outcomes go."""

    store: Store
    keys: SessionKeys
    events: EventBus
    ttl_s: int
    request_id: str
    hooks: Hooks | None = None

    async def land(
        self, base: Window, result: CompactionResult, *, seconds: float, on_path_seq: int | None = None
    ) -> bool:
        """Write a compaction; False when the window changed first (ours is dropped).

        `on_path_seq`: a turn that must still be on the session's current path (a
        background job's boundary), checked in the same atomic step."""
        window = result.window
        event = CompactionLanded(
            session=self.keys.session,
            request_id=self.request_id,
            strategy=result.strategy,
            from_window=base.current,
            window=window.current,
            evicted_seqs=tuple(t.seq for unit in result.evicted for t in unit.turns),
            kept_seqs=tuple(t.seq for unit in result.kept for t in unit.turns),
            archive=archive_uri(window.current),
            summary=str(window.summary.get("content")) if window.summary else None,
            model=result.summary.model if result.summary else None,
            usage=result.summary.usage if result.summary else None,
            seconds=seconds,
        )
        landed = await self.store.save_window(
            self.keys,
            expected_window=base.current,
            window=window.to_json(),
            boundary=window.boundary,
            event=event.journal_entry(),
            archive=Archive(window.current, [m for unit in result.evicted for m in unit.messages]),
            ttl_s=self.ttl_s,
            on_path_seq=on_path_seq,
        )
        if landed:
            self.events.emit(event)
            if self.hooks is not None:
                await self.hooks.after_overflow(event, self.events)
        else:
            self.events.emit(
                CompactionStale(self.keys.session, self.request_id, result.strategy, base.current, seconds)
            )
        return landed

    async def fail(self, breaker: Breaker, strategy: str, reason: str, *, seconds: float) -> None:
        after = breaker.after_failure()
        event = CompactionFailed(self.keys.session, self.request_id, strategy, reason, after.failures, seconds)
        await self.store.record_event(self.keys, event.journal_entry(), breaker=after.dump(), ttl_s=self.ttl_s)
        self.events.emit(event)
        if after.failures == LIMIT:
            self.events.emit(BreakerOpened(self.keys.session, self.request_id, strategy))

    async def settle(self, fitted: Fitted, base: Window, breaker: Breaker, strategy: str) -> None:
        """Journal what the runner did for one request: a landed result, a failure, or a skip."""
        if fitted.result is not None:
            await self.land(base, fitted.result, seconds=fitted.seconds)
        elif fitted.what == "failed":
            await self.fail(breaker, strategy, fitted.reason or "", seconds=fitted.seconds)
        elif fitted.what == "skipped":
            event = CompactionSkipped(self.keys.session, self.request_id, strategy, fitted.reason or "", fitted.forced)
            if fitted.forced:
                await self.store.record_event(self.keys, event.journal_entry(), breaker=None, ttl_s=self.ttl_s)
            self.events.emit(event)

"""What happens during a turn, as values; the journal, the log and the metrics consume them.

A step that does something worth telling (a compaction landed, the breaker opened, a
model's window was learned) builds one event and hands it to the `EventBus`; it never
calls a logger and a metric and the journal one by one. Each class's docstring says
exactly when it fires. `journal_entry()` is the form a compaction event takes in the
session's journal (the `events` list the session API shows).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import field

from proxy.types import JSONObject, frozen


@frozen
class CompactionLanded:
    """A compaction's new window was written: it replaces the window it was computed from."""

    session: str
    request_id: str
    strategy: str
    from_window: str
    window: str
    evicted_seqs: tuple[int, ...]
    kept_seqs: tuple[int, ...]
    archive: str
    summary: str | None
    model: str | None
    usage: JSONObject | None
    seconds: float
    created: float = field(default_factory=time.time)

    def journal_entry(self) -> JSONObject:
        return {
            "type": "compaction",
            "strategy": self.strategy,
            "from_window": self.from_window,
            "window": self.window,
            "evicted_turns": list(self.evicted_seqs),
            "kept_turns": list(self.kept_seqs),
            "archive": self.archive,
            "summary": self.summary,
            "model": self.model,
            "usage": self.usage,
            "request_id": self.request_id,
            "created": self.created,
        }


@frozen
class CompactionStale:
    """A compaction was computed, but another one changed the window first; ours was dropped."""

    session: str
    request_id: str
    strategy: str
    from_window: str
    seconds: float


@frozen
class CompactionFailed:
    """The strategy raised (the summarizer failed, a gate refused); history is unchanged.

    `failures` is the breaker's count including this failure."""

    session: str
    request_id: str
    strategy: str
    reason: str
    failures: int
    seconds: float
    created: float = field(default_factory=time.time)

    def journal_entry(self) -> JSONObject:
        return {
            "type": "compaction_failed",
            "strategy": self.strategy,
            "reason": self.reason,
            "request_id": self.request_id,
            "created": self.created,
        }


@frozen
class CompactionSkipped:
    """Compaction was due but did not run or changed nothing (breaker open, nothing to evict).

    A skipped *forced* compaction (the model called `new_context`) is journaled, so the
    session says why no new window opened."""

    session: str
    request_id: str
    strategy: str
    reason: str
    forced: bool = False
    created: float = field(default_factory=time.time)

    def journal_entry(self) -> JSONObject:
        return {
            "type": "compaction_skipped",
            "strategy": self.strategy,
            "reason": self.reason,
            "forced": self.forced,
            "request_id": self.request_id,
            "created": self.created,
        }


@frozen
class BreakerOpened:
    """A failure brought a session's breaker to its limit: compaction pauses for the cooldown."""

    session: str
    request_id: str
    strategy: str


@frozen
class WindowLearned:
    """The upstream refused a prompt as too long and named a window smaller than assumed."""

    model: str
    window: int
    configured: int
    request_id: str


@frozen
class UpstreamAnswered:
    """The upstream sent the headers of its answer to a managed request (any status)."""

    path: str
    status: int
    seconds: float
    request_id: str


@frozen
class FallbackUsed:
    """A turn's model failed before anything was relayed (`reason`: 429, a 5xx, timeout,
    unreachable); the turn goes to `fallback` instead, re-fitted to its window."""

    model: str
    fallback: str
    reason: str
    request_id: str


@frozen
class HookFailed:
    """A user function (an overflow hook) raised; the proxy went on as if it changed nothing."""

    hook: str
    error: str
    session: str
    request_id: str


@frozen
class ContextCleared:
    """A session's context was cleared (`POST /v1/sessions/{id}/clear`): a fresh lineage starts."""

    session: str
    from_window: str
    window: str
    cleared_seqs: tuple[int, ...]
    archive: str | None
    """Where the cleared span is archived (None when nothing was cleared)."""
    created: float = field(default_factory=time.time)

    def journal_entry(self) -> JSONObject:
        return {
            "type": "clear",
            "strategy": "clear",
            "summary": None,
            "from_window": self.from_window,
            "window": self.window,
            "evicted_turns": list(self.cleared_seqs),
            "archive": self.archive,
            "created": self.created,
        }


@frozen
class ToolRound:
    """The proxy answered its own tool calls (`recall_context`, `new_context`) in a model's
    answer; the model is asked again unless the answer also held calls of the client's."""

    session: str
    request_id: str
    round: int
    """1 for the first round of a client request."""
    tools: tuple[str, ...]
    """The name of each call the proxy answered, in order."""


@frozen
class ToolsShadowed:
    """A client sent its own tool under the name of one of the proxy's: the proxy neither
    offers nor intercepts its own under that name (fired once per process and name)."""

    names: tuple[str, ...]
    request_id: str


@frozen
class HandoffNoticed:
    """A request carries the handoff notice: the headroom before compaction is at most
    `handoff.budget_tokens` (once per window)."""

    session: str
    request_id: str
    window: str
    remaining: int


Event = (
    CompactionLanded
    | CompactionStale
    | CompactionFailed
    | CompactionSkipped
    | BreakerOpened
    | WindowLearned
    | UpstreamAnswered
    | FallbackUsed
    | HookFailed
    | ContextCleared
    | ToolRound
    | ToolsShadowed
    | HandoffNoticed
)
Consumer = Callable[[Event], None]

_log = logging.getLogger("context_proxy.events")


def log_event(event: Event) -> None:
    """The log's view of an event: one line, at WARNING when something went wrong."""
    match event:
        case UpstreamAnswered():  # every upstream call's: first, so that a call that went well is matched once
            if event.status >= 500:
                _log.warning("upstream answered %d request=%s", event.status, event.request_id)
        case CompactionLanded():
            _log.info(
                "compaction %s landed session=%s window=%s->%s evicted=%d request=%s",
                event.strategy, event.session, event.from_window, event.window, len(event.evicted_seqs),
                event.request_id,
            )  # fmt: skip
        case CompactionStale():
            _log.info("compaction %s stale session=%s window=%s", event.strategy, event.session, event.from_window)
        case CompactionFailed():
            _log.warning(
                "compaction %s failed session=%s request=%s: %s",
                event.strategy, event.session, event.request_id, event.reason,
            )  # fmt: skip
        case CompactionSkipped() if event.forced:
            _log.info("forced compaction %s skipped session=%s: %s", event.strategy, event.session, event.reason)
        case CompactionSkipped():
            _log.debug("compaction %s skipped session=%s: %s", event.strategy, event.session, event.reason)
        case BreakerOpened():
            _log.warning("compaction breaker opened session=%s request=%s", event.session, event.request_id)
        case FallbackUsed():
            _log.warning(
                "model %s failed (%s); falling back to %s (request=%s)",
                event.model, event.reason, event.fallback, event.request_id,
            )  # fmt: skip
        case HookFailed():
            _log.warning("%s raised (ignored) session=%s request=%s: %s", event.hook, event.session,
                         event.request_id, event.error)  # fmt: skip
        case ContextCleared():
            _log.info("context cleared session=%s window=%s->%s", event.session, event.from_window, event.window)
        case ToolRound():
            _log.info(
                "tool round %d session=%s request=%s: answered %s",
                event.round, event.session, event.request_id, ", ".join(event.tools),
            )  # fmt: skip
        case ToolsShadowed():
            _log.info(
                "the client sends its own tool named %s: the proxy does not offer or intercept its own (request=%s)",
                ", ".join(event.names), event.request_id,
            )  # fmt: skip
        case HandoffNoticed():
            _log.info(
                "handoff notice session=%s window=%s remaining=%d request=%s",
                event.session, event.window, event.remaining, event.request_id,
            )  # fmt: skip
        case WindowLearned():
            _log.warning(
                "model %s refused a prompt: its window is %d tokens, not %d; using that (request=%s)",
                event.model, event.window, event.configured, event.request_id,
            )  # fmt: skip


class EventBus:
    """Hands each event to every consumer, in the order they were added."""

    def __init__(self, consumers: list[Consumer]) -> None:
        self._consumers = tuple(consumers)

    def emit(self, event: Event) -> None:
        for consume in self._consumers:
            consume(event)

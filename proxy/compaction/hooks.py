"""Overflow hooks (`context.hooks`): user functions told when an overflow runs and lands.

- `before_overflow(history, budget)` is called once the runner has decided that a
  compaction will run (it is due and the breaker is closed), before the strategy, with
  the history as it would be sent (a list of messages) and the budget (a dict:
  `context_window`, `trigger`, `tokens`, `reserve`). Returning `False` vetoes the
  compaction (the request goes as it is if it fits the window); returning a list of
  messages sends that list instead, for this request only (nothing is landed; it is
  made valid, counted and must fit the window); anything else lets the strategy run.
- `after_overflow(record)` is called after a compaction landed, with a dict: `session`,
  `strategy`, `from_window`, `window`, `evicted` (how many journal turns left),
  `evicted_turns`, `summary`, `archive`.

Both are loaded like `validator`, may be sync or async, and never fail a request: an
exception is reported as a `HookFailed` event and treated as "no change".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from proxy.config import HookSettings
from proxy.context.budget import Budget
from proxy.context.compose import History
from proxy.context.custom import check_messages, given_history, lineage_only
from proxy.context.tokens import Encoder, count_messages
from proxy.events import CompactionLanded, EventBus, HookFailed
from proxy.plugins import call, import_callable
from proxy.sessions import wire

BeforeOverflow = Callable[[History, Budget, int], Awaitable[bool | History]]
"""(history, budget, tokens) -> True (compact), False (veto) or a replacement history."""


class Hooks:
    def __init__(self, settings: HookSettings) -> None:
        self._before = _loaded(settings.before_overflow, "context.hooks.before_overflow")
        self._after = _loaded(settings.after_overflow, "context.hooks.after_overflow")

    def before_for(self, *, session: str, request_id: str, encoder: Encoder, events: EventBus) -> BeforeOverflow | None:
        """The `before_overflow` gate of one request, or None when no hook is configured."""
        hook = self._before
        if hook is None:
            return None

        async def before(history: History, budget: Budget, tokens: int) -> bool | History:
            messages = orjson.loads(orjson.dumps([wire(m) for m in history.messages()]))  # the hook's own copy
            figures = {"context_window": budget.context_window, "trigger": budget.trigger, "tokens": tokens,
                       "reserve": budget.reserve}  # fmt: skip
            try:
                verdict = await call(hook, messages, figures)
                if isinstance(verdict, list):
                    replacement = check_messages(verdict, "context.hooks.before_overflow")
                    window = lineage_only(history.window, keep_leading=False)
                    return given_history(window, replacement, count_messages(encoder, replacement))
            except Exception as exc:  # noqa: BLE001 (a user-supplied function may raise anything)
                events.emit(_failed("before_overflow", exc, session, request_id))
                return True
            return verdict is not False

        return before

    async def after_overflow(self, event: CompactionLanded, events: EventBus) -> None:
        if self._after is None:
            return
        record: dict[str, Any] = {
            "session": event.session, "strategy": event.strategy, "from_window": event.from_window,
            "window": event.window, "evicted": len(event.evicted_seqs), "evicted_turns": list(event.evicted_seqs),
            "summary": event.summary, "archive": event.archive,
        }  # fmt: skip
        try:
            await call(self._after, record)
        except Exception as exc:  # noqa: BLE001 (a user-supplied function may raise anything)
            events.emit(_failed("after_overflow", exc, event.session, event.request_id))


def _loaded(path: str | None, key: str) -> Callable[..., Any] | None:
    return import_callable(path, key) if path else None


def _failed(hook: str, exc: Exception, session: str, request_id: str) -> HookFailed:
    return HookFailed(f"context.hooks.{hook}", f"{exc.__class__.__name__}: {exc}", session, request_id)

"""What every overflow strategy implements, and what it is given and returns.

A strategy is handed the history that is over budget and returns a new window plus
the units it kept and evicted; it never writes anything (the runner lands results).
It raises `StrategyError` when it cannot produce a usable result (the summarizer
failed, a quality gate refused the summary); history then stays unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from proxy.context.budget import Budget
from proxy.context.compose import History, Unit
from proxy.context.window import Window
from proxy.types import JSONObject, Message, frozen


class StrategyError(Exception):
    """The strategy could not compact; the history is left as it was."""


@frozen
class Summary:
    text: str
    usage: JSONObject | None = None
    model: str = ""


Summarizer = Callable[[list[Message]], Awaitable[Summary]]
"""Sends messages to the compression model and returns its answer text."""

Validator = Callable[[str, list[Message], list[Message]], Awaitable[bool]]
"""(summary, evicted messages, kept messages) -> accept?"""


@frozen
class CompactionInput:
    history: History
    budget: Budget
    new_tokens: int
    """Tokens of the request's new input, which is never evicted."""
    summarizer: Summarizer
    archive_uri: str
    """Where the evicted span will be archived; strategies cite it."""
    count_text: Callable[[str], int]
    forced: bool = False
    """The model asked for a new context (`new_context`): cut every unit but the most
    recent, whatever the budget and the `preserve_*` options say."""


@frozen
class CompactionResult:
    strategy: str
    window: Window
    kept: tuple[Unit, ...]
    evicted: tuple[Unit, ...]
    changed: bool
    reason: str = ""
    summary: Summary | None = None

    @property
    def history(self) -> History:
        return History.of(self.window, self.kept)

    @classmethod
    def unchanged(cls, strategy: str, data: CompactionInput, reason: str) -> CompactionResult:
        h = data.history
        return cls(strategy, h.window, h.units, (), changed=False, reason=reason)


class Strategy(Protocol):
    name: str

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        """Whether this request should try to compact (over the trigger, or a turn count)."""
        ...

    async def compact(self, data: CompactionInput) -> CompactionResult:
        """A new window, or `CompactionResult.unchanged`; raises StrategyError on failure."""
        ...


def lift_pinned(window: Window, evicted: tuple[Unit, ...]) -> Window:
    """Evicted units holding a `pinned: true` message stay verbatim after the summary, in order."""
    pinned = list(window.pinned)
    tokens = list(window.pinned_tokens)
    for unit in evicted:
        if unit.pinned:
            pinned.extend(unit.messages)
            tokens.extend(unit.tokens)
    return replace(window, pinned=tuple(pinned), pinned_tokens=tuple(tokens))

"""The part `summarize`, `anchored` and `turns` share: cut, ask, gate, build the window.

A span too large for one compression request (over `CHUNK_SHARE` of the window) is
compressed in parts, each folded into the summary of the parts before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from proxy.compaction.gates import check_summary, run_validator
from proxy.compaction.prompts import DEFAULT_PROMPT, CompressionPrompt, clean_summary, flatten, summary_message
from proxy.compaction.strategies.base import (
    CompactionInput,
    CompactionResult,
    StrategyError,
    Summary,
    Validator,
    lift_pinned,
)
from proxy.compaction.strategies.split import SpanCut
from proxy.context.budget import Budget
from proxy.context.compose import History, Unit
from proxy.types import Message, frozen

CHUNK_SHARE = 0.6

RequestBuilder = Callable[[list[Message], str | None, CompressionPrompt], list[Message]]
"""(span to compress, the summary or anchor so far, the compression options) -> the compression request."""


class Gated(Protocol):
    """A summarizing strategy: its name, its compression options and its quality gates."""

    name: str
    prompt: CompressionPrompt
    min_shrink_ratio: float
    validator: Validator | None


@frozen
class Style:
    """How a strategy's summary is asked for and shown."""

    build_request: RequestBuilder
    prefix: str
    """The summary message's opening line."""
    anchored: bool = False
    """The summary is the window's anchor (`anchored`), folded into the next one."""


class CutSummarizer:
    """What `summarize` and `anchored` share: a token-triggered policy that cuts where `cut`
    says and summarizes what leaves with the given gates and compression options."""

    def __init__(
        self,
        *,
        cut: SpanCut,
        min_shrink_ratio: float,
        validator: Validator | None,
        prompt: CompressionPrompt = DEFAULT_PROMPT,
    ) -> None:
        self.cut = cut
        self.min_shrink_ratio = min_shrink_ratio
        self.validator = validator
        self.prompt = prompt

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return budget.over_trigger(tokens)


async def summarize_span(
    data: CompactionInput, gated: Gated, *, cut: int, carried: str | None, style: Style
) -> CompactionResult:
    """Evict `units[:cut]`; the compression model folds them into `carried` (the previous
    summary or anchor) and its answer stands in for them."""
    strategy, prompt, validator = gated.name, gated.prompt, gated.validator
    units = data.history.units
    if cut <= 0:
        return CompactionResult.unchanged(strategy, data, "nothing to evict: every turn is kept")
    evicted, kept = units[:cut], units[cut:]
    evicted_messages = _messages(evicted)
    limit = int(data.budget.context_window * CHUNK_SHARE)
    body = carried
    for chunk in chunks(prompt.stubbed(evicted_messages, data.count_text), limit, data.count_text):
        answer = await _ask(data, style.build_request(chunk, body, prompt))
        body = clean_summary(answer.text)
    body = body or ""
    check_summary(body, evicted_messages, min_shrink_ratio=gated.min_shrink_ratio, carried=carried)
    await run_validator(validator, body, evicted_messages, _messages(kept))
    message = summary_message(style.prefix, body, data.archive_uri)
    window = lift_pinned(data.history.window, evicted)
    window = window.advance(
        boundary=evicted[-1].last_seq,
        summary=message,
        summary_tokens=data.count_text(message["content"]),
        anchor=body if style.anchored else None,
        evicted_units=window.evicted_units + len(evicted),
    )
    return CompactionResult(strategy, window, kept, evicted, changed=True, summary=replace(answer, text=body))


async def _ask(data: CompactionInput, request: list[Message]) -> Summary:
    try:
        return await data.summarizer(request)
    except StrategyError:
        raise
    except Exception as exc:  # the summarizer is I/O: any failure leaves history unchanged
        raise StrategyError(f"the compression call failed: {exc.__class__.__name__}: {exc}") from exc


def chunks(messages: list[Message], limit: int, count_text: Callable[[str], int]) -> list[list[Message]]:
    """Consecutive parts whose transcripts stay within `limit` tokens (a message larger
    than that is a part of its own)."""
    parts: list[list[Message]] = [[]]
    size = 0
    for message in messages:
        tokens = count_text(flatten([message]))
        if parts[-1] and size + tokens > limit:
            parts.append([])
            size = 0
        parts[-1].append(message)
        size += tokens
    return parts


def _messages(units: tuple[Unit, ...]) -> list[Message]:
    return [m for unit in units for m in unit.messages]


def previous_summary(data: CompactionInput) -> str | None:
    summary = data.history.window.summary
    return str(summary["content"]) if summary else None

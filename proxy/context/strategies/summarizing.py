"""The part `summarize`, `anchored` and `turns` share: cut, ask, gate, build the window."""

from __future__ import annotations

from dataclasses import replace

from proxy.context.compose import Unit
from proxy.context.strategies.base import (
    CompactionInput,
    CompactionResult,
    StrategyError,
    Validator,
    evicted_turn_count,
    lift_pinned,
)
from proxy.context.strategies.gates import check_summary, run_validator
from proxy.context.strategies.prompts import clean_summary, summary_message
from proxy.types import Message


async def summarize_span(
    data: CompactionInput,
    *,
    strategy: str,
    cut: int,
    request: list[Message],
    prefix: str,
    min_shrink_ratio: float,
    validator: Validator | None,
    anchored: bool = False,
) -> CompactionResult:
    """Evict `units[:cut]`, replace them by what the compression model makes of `request`."""
    units = data.history.units
    if cut <= 0:
        return CompactionResult.unchanged(strategy, data, "nothing to evict: every turn is kept")
    evicted, kept = units[:cut], units[cut:]
    evicted_messages = _messages(evicted)
    try:
        answer = await data.summarizer(request)
    except StrategyError:
        raise
    except Exception as exc:  # the summarizer is I/O: any failure leaves history unchanged
        raise StrategyError(f"the compression call failed: {exc.__class__.__name__}: {exc}") from exc
    body = clean_summary(answer.text)
    check_summary(body, evicted_messages, min_shrink_ratio=min_shrink_ratio)
    await run_validator(validator, body, evicted_messages, _messages(kept))
    message = summary_message(prefix, body, data.archive_uri)
    window = lift_pinned(data.history.window, evicted)
    window = window.advance(
        boundary=evicted[-1].last_seq,
        summary=message,
        summary_tokens=data.count_text(message["content"]),
        anchor=body if anchored else None,
        evicted_turns=window.evicted_turns + evicted_turn_count(evicted),
    )
    return CompactionResult(strategy, window, kept, evicted, changed=True, summary=replace(answer, text=body))


def _messages(units: tuple[Unit, ...]) -> list[Message]:
    return [m for unit in units for m in unit.messages]


def previous_summary(data: CompactionInput) -> str | None:
    summary = data.history.window.summary
    return str(summary["content"]) if summary else None


def evicted_messages(data: CompactionInput, cut: int) -> list[Message]:
    return _messages(data.history.units[:cut])

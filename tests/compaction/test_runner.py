"""The runner: trigger, breaker, background deferral, failures leave history unchanged."""

from __future__ import annotations

import time

import pytest

from proxy.compaction.breaker import COOLDOWN_S, Breaker
from proxy.compaction.hooks import Hooks
from proxy.compaction.runner import Overflow, fit
from proxy.compaction.strategies import Background, Full, Reset, Summarize, Turns
from proxy.config import HookSettings
from proxy.context.budget import ContextTooLarge
from proxy.context.tokens import TokenCounter
from proxy.events import EventBus, HookFailed
from tests.context.factories import FakeSummarizer, budget, history, summarizing

SUMMARIZE = summarizing(Summarize, preserve_recent=2)


async def run(h, b, strategy=SUMMARIZE, breaker=Breaker(), summarizer=None, usage=None, new_tokens=10, forced=False):  # type: ignore[no-untyped-def]
    overflow = Overflow(
        strategy, summarizer or FakeSummarizer(), count_text=len, breaker=breaker, usage=usage, preference="max",
        forced=forced,
    )  # fmt: skip
    return await fit(h, new_tokens=new_tokens, budget=b, archive_uri="context://archive/win_1", overflow=overflow)


async def test_under_the_trigger_nothing_happens() -> None:
    fitted = await run(history(3), budget(1000, 700))
    assert fitted.result is None and fitted.history.total == 70


async def test_over_the_trigger_compacts() -> None:
    fitted = await run(history(40), budget(1000, 700))
    assert fitted.result is not None and fitted.history.total < 700


async def test_fed_back_usage_can_trigger_compaction() -> None:
    h = history(10)  # 210 local tokens
    usage = {"prompt": 800, "local": 200, "window": "win_0"}
    fitted = await run(h, budget(1000, 700), usage=usage)
    assert fitted.result is not None


async def test_failure_leaves_history_unchanged_but_request_goes() -> None:
    h = history(40)
    fitted = await run(h, budget(1000, 700), summarizer=FakeSummarizer(fail=True))
    assert fitted.what == "failed" and fitted.reason and fitted.history is h


async def test_failure_with_no_room_is_context_length_exceeded() -> None:
    with pytest.raises(ContextTooLarge):
        await run(history(60), budget(1000, 700), summarizer=FakeSummarizer(fail=True))


async def test_open_breaker_skips_compaction_then_half_opens() -> None:
    now = time.time()
    assert Breaker(3, now).is_open(now + 1)
    assert not Breaker(3, now).is_open(now + COOLDOWN_S + 1)
    assert not Breaker(2, now).is_open(now)
    assert Breaker.parse(Breaker(2, 5.0).after_failure(now).dump()) == Breaker(3, now)
    summarizer = FakeSummarizer()
    fitted = await run(history(40), budget(1000, 700), breaker=Breaker(3, now), summarizer=summarizer)
    assert (fitted.what, fitted.reason) == ("skipped", "circuit breaker open") and summarizer.calls == []


async def test_background_defers_while_the_request_fits() -> None:
    summarizer = FakeSummarizer()
    fitted = await run(history(40), budget(1000, 700), strategy=Background(SUMMARIZE), summarizer=summarizer)
    assert fitted.what == "deferred" and fitted.result is None and summarizer.calls == []
    fitted = await run(history(60), budget(1000, 700), strategy=Background(Reset()))
    assert fitted.what == "compacted" and fitted.result is not None, (
        "runs in the foreground when the request cannot fit"
    )


async def test_before_overflow_replacement_is_sent_instead_and_nothing_lands() -> None:
    events: list[object] = []
    hooks = Hooks(HookSettings(before_overflow=f"{__name__}:keep_last_two"))
    encoder = await TokenCounter({}).encoder_for("gpt-4o-mini")
    before = hooks.before_for(session="s", request_id="r", encoder=encoder, events=EventBus([events.append]))
    h = history(40)
    overflow = Overflow(
        SUMMARIZE, FakeSummarizer(), count_text=len, breaker=Breaker(), usage=None, preference="max", before=before
    )
    fitted = await fit(
        h, new_tokens=10, budget=budget(1000, 700), archive_uri="context://archive/win_1", overflow=overflow
    )
    assert fitted.result is None and fitted.what == "skipped" and "replaced" in (fitted.reason or "")
    assert [m["content"] for m in fitted.history.messages()] == ["u39", "a39"]
    assert fitted.history.window.current == "win_0"
    assert not events
    raising = Hooks(HookSettings(before_overflow=f"{__name__}:raises"))
    before = raising.before_for(session="s", request_id="r", encoder=encoder, events=EventBus([events.append]))
    assert before is not None and await before(h, budget(1000, 700), 800) is True
    assert isinstance(events[0], HookFailed) and "boom" in events[0].error


def keep_last_two(history: list[dict[str, str]], budget: dict[str, int]) -> list[dict[str, str]]:
    assert budget["tokens"] > budget["trigger"]
    return history[-2:]


def raises(history: object, budget: object) -> None:
    raise ValueError("boom")


@pytest.mark.parametrize(
    "strategy",
    [SUMMARIZE, summarizing(Summarize, split="ratio", preserve_ratio=0.9), Turns(
        keep_recent=8, compact_after=20, min_shrink_ratio=0.5, validator=None), Background(SUMMARIZE)],
    ids=["recent-turns", "ratio", "turns", "background"],
)  # fmt: skip
async def test_a_forced_compaction_keeps_only_the_most_recent_turn_whatever_the_budget(strategy: object) -> None:
    h = history(5)
    assert (await run(h, budget(1000, 700), strategy=strategy)).result is None, "not due by the budget"
    fitted = await run(h, budget(1000, 700), strategy=strategy, forced=True)
    assert fitted.forced and fitted.result is not None
    assert [u.last_seq for u in fitted.result.kept] == [4] and len(fitted.result.evicted) == 4
    assert fitted.history.window.current == "win_1"


async def test_a_forced_compaction_with_one_turn_or_an_open_breaker_does_nothing() -> None:
    summarizer = FakeSummarizer()
    fitted = await run(history(1), budget(1000, 700), summarizer=summarizer, forced=True)
    assert fitted.forced and fitted.result is None and "one turn" in (fitted.reason or "")
    fitted = await run(history(5), budget(1000, 700), breaker=Breaker(3, time.time()), forced=True)
    assert (fitted.what, fitted.reason) == ("skipped", "circuit breaker open") and summarizer.calls == []
    fitted = await run(history(5), budget(1000, 700), strategy=Full(), forced=True)
    assert fitted.result is None and fitted.reason == "strategy full never compacts"
    fitted = await run(history(5), budget(1000, 700), summarizer=FakeSummarizer(fail=True), forced=True)
    assert fitted.what == "failed", "the breaker counts a failed forced compaction as any other"

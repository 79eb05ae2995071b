"""The session's compaction claim: one summarizer call per compaction, and never a request over the window."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import openai
import pytest

from proxy.app_state import STORE
from proxy.context.window import Window
from proxy.sessions import tenant_of
from proxy.store import Archive, SessionKeys
from proxy.turn.claim import CompactionClaim, LoadedWindow
from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_overflow import filler

WINDOW = 3000  # tiny-model
TRIGGER = 2100  # 0.7 of it
LATE_S = 0.3
"""How much later the second of two requests reaches the claim: the first has landed by then."""
ROUNDS = 10

_arrivals = itertools.count()


async def second_arrives_late(messages: list[dict[str, Any]], figures: dict[str, int]) -> bool:
    """`before_overflow` (runs just before the claim is asked): of two requests that find a
    session over budget together, the second reaches the claim after the first landed its
    compaction and let the claim go, with the session as it loaded it before that."""
    if next(_arrivals) % 2:
        await asyncio.sleep(LATE_S)
    return True


async def grow(proxy: Proxy, session: str, until: int) -> int:
    """Turns on `session` (strategy full: nothing compacts) until the last prompt passed `until` tokens."""
    client = proxy.client(default_headers={"X-Session-Id": session, "X-Context-Strategy": "full"})
    sent, n = 0, 0
    while sent < until:
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[{"role": "user", "content": filler(n) + " " + filler(n + 1000)}]
        )
        sent, n = int(raw.headers["X-Context-Tokens"]), n + 1
    return sent


async def held_elsewhere(proxy: Proxy, session: str) -> None:
    """Another replica holds the session's compaction claim (and keeps it past the wait)."""
    keys = SessionKeys(tenant_of("Bearer sk-test", ""), session)
    assert await proxy.app[STORE].acquire_lock(keys.compaction_lock, "another-replica", 30)


async def test_a_request_that_cannot_get_the_claim_in_time_goes_as_it_is_when_that_fits(
    start_proxy: ProxyFactory,
) -> None:
    proxy = await start_proxy(strategy="summarize", compression_timeout_s=0.3)
    await grow(proxy, "busy", TRIGGER + 100)
    await held_elsewhere(proxy, "busy")
    client = proxy.client(default_headers={"X-Session-Id": "busy"})
    raw = await client.chat.completions.with_raw_response.create(
        model="tiny-model", messages=[{"role": "user", "content": "short"}]
    )
    assert raw.headers["X-Context-Window-Id"] == "win_0", "nothing was compacted: another holds the claim"
    assert proxy.fake.summaries == []
    assert TRIGGER < proxy.fake.prompt_tokens(proxy.fake.chats[-1]["messages"]) <= WINDOW


async def test_a_request_that_cannot_get_the_claim_in_time_and_does_not_fit_is_refused(
    start_proxy: ProxyFactory,
) -> None:
    proxy = await start_proxy(strategy="summarize", compression_timeout_s=0.3)
    await grow(proxy, "full-up", TRIGGER + 100)
    await held_elsewhere(proxy, "full-up")
    client = proxy.client(default_headers={"X-Session-Id": "full-up"})
    upstream_before = len(proxy.fake.received)
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "word " * 900}])
    assert info.value.body["code"] == "context_length_exceeded"  # type: ignore[index]
    assert "X-Fake-Upstream" not in info.value.response.headers, "the proxy refused it; it never went upstream"
    assert len(proxy.fake.received) == upstream_before


async def test_two_replicas_make_one_summarizer_call_for_one_compaction(start_proxy: ProxyFactory) -> None:
    """Two replicas on one store, one over-budget turn on each at once, the second reaching the
    claim only after the first landed: it must not compact the window it loaded a second time."""
    hooks = {"before_overflow": f"{__name__}:second_arrives_late"}
    first = await start_proxy(strategy="summarize", hooks=hooks)
    second = await start_proxy(strategy="summarize", hooks=hooks)
    calls = []
    for n in range(ROUNDS):
        session = f"race-{n}"
        await grow(first, session, TRIGGER - 100)
        before = len(first.fake.summaries)
        both = await asyncio.gather(*(
            proxy.client(default_headers={"X-Session-Id": session}).chat.completions.with_raw_response.create(
                model="tiny-model", messages=[{"role": "user", "content": f"over {k} " + "word " * 150}]
            )
            for k, proxy in enumerate((first, second))
        ))  # fmt: skip
        calls.append(len(first.fake.summaries) - before)
        assert {raw.headers["X-Context-Window-Id"] for raw in both} == {"win_1"}
    print(f"summarizer calls per round: {calls}")
    assert calls == [1] * ROUNDS, "one summarizer call for each compaction"


async def test_a_claim_is_taken_only_for_the_stored_window(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    store, keys = proxy.app[STORE], SessionKeys("t", "moved")
    landed = await store.save_window(
        keys, expected_window="win_0", window=Window().advance(boundary=0).to_json(), boundary=0,
        event={"type": "compaction"}, archive=Archive("win_1", []), ttl_s=60,
    )  # fmt: skip
    assert landed
    stale = CompactionClaim.for_window(store, LoadedWindow(keys, "win_0"), 30)
    current = CompactionClaim.for_window(store, LoadedWindow(keys, "win_1"), 30)
    assert not await stale.acquire(), "a compaction landed since win_0 was loaded"
    assert await current.acquire()
    assert not await stale.wait(0.1), "the other request holds it"
    await current.release()
    assert await stale.wait(0.1), "free again: taken, so that its holder reloads under it"
    await stale.release()

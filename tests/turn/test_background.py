"""background(x): compaction after the answer, one job per session across replicas, stale results dropped."""

from __future__ import annotations

import asyncio

from proxy.app_state import STORE
from proxy.context.window import Window
from proxy.sessions import tenant_of
from proxy.store import Archive, SessionKeys
from tests.conftest import ProxyFactory
from tests.handlers.test_overflow import delta_turn, filler


async def test_background_compaction_lands_on_a_later_request(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="background(summarize)")
    client = proxy.client(default_headers={"X-Session-Id": "bg"})
    windows = []
    for n in range(35):
        messages = delta_turn(n)
        raw = await client.chat.completions.with_raw_response.create(model="tiny-model", messages=messages)
        windows.append(raw.headers["X-Context-Window-Id"])
        await proxy.idle()
    first_change = next(i for i in range(1, len(windows)) if windows[i] != windows[i - 1])
    over = proxy.fake.prompt_tokens(proxy.fake.chats[first_change - 1]["messages"])
    assert over > 2100, "the over-budget request went as it was (above the trigger, inside the window)"
    assert proxy.fake.prompt_tokens(proxy.fake.chats[first_change]["messages"]) < over
    assert proxy.fake.summaries, "the summary was written off the hot path"


async def test_one_job_per_session_across_replicas(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="background(summarize)")
    keys = SessionKeys(tenant_of("Bearer sk-test", ""), "locked")
    store = proxy.app[STORE]
    assert await store.acquire_lock(keys.compaction_lock, "another-replica", 30)
    client = proxy.client(default_headers={"X-Session-Id": "locked"})
    for n in range(32):
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": filler(n)}])
        await proxy.idle()
    assert proxy.fake.summaries == [], "the other replica holds the session's job"
    await store.release_lock(keys.compaction_lock, "another-replica")
    await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": filler(99)}])
    await proxy.idle()
    assert len(proxy.fake.summaries) == 1


async def test_a_result_computed_on_a_stale_window_does_not_land(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    store = proxy.app[STORE]
    keys = SessionKeys("t", "stale")
    window = Window().advance(boundary=0)
    kwargs = {
        "window": window.to_json(),
        "boundary": 0,
        "event": {"type": "compaction"},
        "archive": Archive("win_1", []),
        "ttl_s": 60,
    }
    assert await store.save_window(keys, expected_window="win_0", **kwargs)  # type: ignore[arg-type]
    assert not await store.save_window(keys, expected_window="win_0", **kwargs), "someone else moved the window first"  # type: ignore[arg-type]


async def test_a_background_result_whose_span_left_the_path_does_not_land(start_proxy: ProxyFactory) -> None:
    """A branch moved the head away from the turn the job compacted up to: the job is stale."""
    proxy = await start_proxy(strategy="summarize")
    store = proxy.app[STORE]
    client = proxy.client()
    first = [{"role": "user", "content": "one"}]
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=first)
    answer = raw.parse()
    path = [*first, {"role": "assistant", "content": answer.choices[0].message.content}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=[*path, {"role": "user", "content": "two"}])
    await client.chat.completions.create(model="gpt-4o-mini", messages=[*path, {"role": "user", "content": "edited"}])
    keys = SessionKeys(tenant_of("Bearer sk-test", ""), raw.headers["X-Session-Id"])
    kwargs = {"window": Window().advance(boundary=1).to_json(), "boundary": 1, "event": {"type": "compaction"},
              "archive": Archive("win_1", []), "ttl_s": 60}  # fmt: skip
    assert not await store.save_window(keys, expected_window="win_0", on_path_seq=1, **kwargs), "turn 1 left the path"
    assert await store.save_window(keys, expected_window="win_0", on_path_seq=2, **kwargs), "turn 2 is the head"


async def test_two_replicas_compacting_one_session_at_once_call_the_summarizer_once(
    start_proxy: ProxyFactory,
) -> None:
    """The second replica waits for the first one's compaction and composes after it."""
    first, second = await start_proxy(strategy="summarize"), await start_proxy(strategy="summarize")
    a = first.client(default_headers={"X-Session-Id": "contended"})
    b = second.client(default_headers={"X-Session-Id": "contended"})
    sent, n = 0, 0
    while sent < 2300:  # past the trigger (2,100 of 3,000), without compacting: strategy full
        raw = await a.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[{"role": "user", "content": filler(n)}],
            extra_headers={"X-Context-Strategy": "full"},
        )  # fmt: skip
        sent, n = int(raw.headers["X-Context-Tokens"]), n + 1
    assert not first.fake.summaries
    first.fake.summary_delay_s = 0.5
    both = await asyncio.gather(
        a.chat.completions.with_raw_response.create(model="tiny-model", messages=[{"role": "user", "content": "x"}]),
        b.chat.completions.with_raw_response.create(model="tiny-model", messages=[{"role": "user", "content": "y"}]),
    )
    assert len(first.fake.summaries) == 1, "one summarizer call for one compaction"
    windows = {raw.headers["X-Context-Window-Id"] for raw in both}
    assert windows == {"win_1"}, "both requests were composed against the new window"

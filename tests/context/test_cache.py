"""The per-process path cache: bounded, and extended by the turns this process journals."""

from __future__ import annotations

from proxy.context.window import Window
from proxy.sessions import digest
from proxy.store import SessionKeys
from proxy.turn.paths import CachedPath, PathCache
from tests.context.factories import history, turn

KEY = SessionKeys("tenant", "session")


def cached(head: int, turns: int) -> CachedPath:
    return CachedPath(head, "e:win_0", Window(), True, history(turns), digest([]))


def test_a_completed_turn_on_the_cached_head_extends_the_entry() -> None:
    cache = PathCache(1000)
    cache.put(KEY, cached(2, 3))
    cache.extend(KEY, 2, turn(7, "next", "answer"))
    entry = cache.get(KEY)
    assert entry is not None and entry.head == 7
    assert [m["content"] for m in entry.history.messages()][-2:] == ["next", "answer"]
    assert entry.history.message_count == 8


def test_a_turn_elsewhere_or_not_completed_leaves_the_entry() -> None:
    cache = PathCache(1000)
    cache.put(KEY, cached(2, 3))
    cache.extend(KEY, 1, turn(7, "a branch"))
    cache.extend(KEY, 2, turn(8, "failed", status="failed"))
    cache.extend(SessionKeys("tenant", "other"), 2, turn(9, "another session"))
    entry = cache.get(KEY)
    assert entry is not None and entry.head == 2 and entry.history.message_count == 6
    assert cache.get(SessionKeys("tenant", "other")) is None


def test_an_extended_entry_still_counts_against_the_bound() -> None:
    cache = PathCache(8)
    cache.put(KEY, cached(2, 3))
    cache.extend(KEY, 2, turn(3, "more", "and more"))  # 9 messages: over the bound, dropped
    assert cache.get(KEY) is None


def test_sessions_taking_turns_in_a_cycle_larger_than_the_cache_keep_most_of_it() -> None:
    cache = PathCache(90)  # ten sessions of 4 turns (9 messages each)
    keys = [SessionKeys("tenant", f"s{i}") for i in range(12)]
    hits = 0
    for _ in range(20):
        for key in keys:
            hits += cache.get(key) is not None
            cache.put(key, cached(3, 4))
    assert hits >= 20 * 12 * 0.6  # least recently used first out alone: none after the first round


def test_a_full_cache_admits_a_new_session_at_the_hot_end_now_and_then() -> None:
    cache = PathCache(18)  # two sessions
    resident = [SessionKeys("tenant", "a"), SessionKeys("tenant", "b")]
    for key in resident:
        cache.put(key, cached(3, 4))
    newcomers = [SessionKeys("tenant", f"new{i}") for i in range(32)]
    for key in newcomers:
        cache.put(key, cached(3, 4))
    assert cache.get(newcomers[-1]) is not None  # the 32nd went in hot, evicting the oldest
    assert [cache.get(key) is not None for key in resident] == [False, True]
    assert all(cache.get(key) is None for key in newcomers[:-1])

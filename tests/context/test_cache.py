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

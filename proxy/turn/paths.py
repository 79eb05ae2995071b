"""A per-process cache of each session's recent path, so a turn loads only what is new.

Turns and their parent links never change once written, so a cached path stays exact
for as long as the session's window is the same: the store is asked only for the
turns after the cached head (`load_context.lua` checks that the head is on the path
and the window unchanged). Any other case is a full load that replaces the entry.
A delta client's turn this process journaled extends the entry it was composed from
(`extend`), so its next turn is told only that nothing is new.
Every replica keeps its own cache; Redis stays the only source of truth.
Bounded by the number of cached messages (`server.cache_messages`, about 0.8 KB
each), least recently used first out; 0 turns the cache off.
"""

from __future__ import annotations

from collections import OrderedDict

from proxy.context.compose import History, extend_history
from proxy.context.window import Window
from proxy.sessions import Digests, Turn
from proxy.store import SessionKeys
from proxy.types import frozen


@frozen
class CachedPath:
    head: int
    """The last turn of the cached path."""
    version: str
    stored_window: Window
    applies: bool
    history: History
    request: Digests
    """The last request's messages and hashes, so a full-history client's resent part is not hashed again."""

    @property
    def size(self) -> int:
        return self.history.message_count + 1


class PathCache:
    def __init__(self, max_messages: int) -> None:
        self._entries: OrderedDict[str, CachedPath] = OrderedDict()
        """By `SessionKeys.name` (a string hashes and compares in C; the keys' dataclass in Python)."""
        self._sizes: dict[str, int] = {}
        self._total = 0
        self._max = max_messages
        self.hits = 0
        self.misses = 0
        """Lookups that found an entry (the store still confirms it is exact) and those that did not."""

    def get(self, key: SessionKeys) -> CachedPath | None:
        name = key.name
        entry = self._entries.get(name)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(name)
        return entry

    def put(self, key: SessionKeys, entry: CachedPath) -> None:
        self._put(key.name, entry)

    def _put(self, name: str, entry: CachedPath) -> None:
        self._forget(name)
        size = entry.size
        if size > self._max:
            return
        self._entries[name] = entry
        self._sizes[name] = size
        self._total += size
        while self._total > self._max:
            self._forget(next(iter(self._entries)))

    def extend(self, key: SessionKeys, parent: int, turn: Turn) -> None:
        """A completed turn journaled on `parent`: the entry whose head that is now ends at the turn."""
        name = key.name
        entry = self._entries.get(name)
        if entry is None or entry.head != parent or not turn.completed:
            return
        history = extend_history(entry.history, [turn])
        self._put(name, CachedPath(turn.seq, entry.version, entry.stored_window, entry.applies, history, entry.request))

    def discard(self, key: SessionKeys) -> None:
        self._forget(key.name)

    def _forget(self, name: str) -> None:
        if self._entries.pop(name, None) is not None:
            self._total -= self._sizes.pop(name)

    def __len__(self) -> int:
        return len(self._entries)

"""Load a session's conversation for one request: reconcile it, rebuild the history.

One store round trip (`load_context`) returns where the request attaches and the turns
of the path to it that this process has not cached yet; the rest is pure
(`reconcile`, `build_history`, `extend_history`).
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.compaction.breaker import Breaker
from proxy.context.cache import CachedPath, PathCache
from proxy.context.compose import History, build_history, extend_history
from proxy.context.window import Window
from proxy.sessions import Identity, Reconciled, Turn, digest, needs_full_query, prefix_query, reconcile
from proxy.store import SessionKeys, Store
from proxy.types import JSONObject, Message


@dataclass(frozen=True)
class Conversation:
    identity: Identity
    keys: SessionKeys
    history: History
    reconciled: Reconciled
    breaker: Breaker
    usage: JSONObject | None
    stored_window: Window
    """The session's window as stored (the CAS base for landing a compaction)."""


async def load_conversation(
    store: Store, cache: PathCache, identity: Identity, messages: list[Message]
) -> Conversation:
    keys = SessionKeys(identity.tenant, identity.session)
    cache_key = (identity.tenant, identity.session)
    cached = cache.get(cache_key)
    digests = digest(messages, cached.request if cached else None)
    known, known_window = (cached.head, cached.window_id) if cached else (-1, "")
    offset, prefixes = prefix_query(digests.chain, messages, recent_only=True)
    loaded = await store.load_context(keys, offset, prefixes, known=known, known_window=known_window)
    if needs_full_query(loaded, messages):
        offset, prefixes = prefix_query(digests.chain, messages, recent_only=False)
        loaded = await store.load_context(keys, offset, prefixes, known=known, known_window=known_window)
    turns = [Turn.from_record(seq, record) for seq, record in loaded.turns]
    new_conversation = identity.derived and not loaded.found  # it starts from the root
    if cached is not None and loaded.extends:
        stored_window, applies = cached.stored_window, cached.applies
    else:
        stored_window, applies = Window.from_json(loaded.window), loaded.window_applies
    if new_conversation:
        history = build_history(_window_for_path(stored_window, False), [])
    elif cached is not None and loaded.extends:
        history = extend_history(cached.history, turns)
    else:
        history = build_history(_window_for_path(stored_window, applies), turns)
    if loaded.parent >= 0 and not new_conversation:
        cache.put(cache_key, CachedPath(loaded.parent, loaded.window_id, stored_window, applies, history, digests))
    reconciled = reconcile(
        messages, digests.hashes, loaded, derived=identity.derived, session_leading=history.leading_hashes()
    )
    return Conversation(
        identity=identity,
        keys=keys,
        history=history,
        reconciled=reconciled,
        breaker=Breaker.parse(loaded.breaker),
        usage=loaded.usage,
        stored_window=stored_window,
    )


def _window_for_path(stored: Window, applies: bool) -> Window:
    """The stored window, or (for a branch that left before its boundary) a fresh one in its lineage."""
    if applies:
        return stored
    return Window(current=stored.current, first=stored.first, previous=stored.previous)

"""Load a session's conversation for one request: reconcile it, rebuild the history.

One store round trip (`load_context`) returns where the request attaches and the turns
of the path to it that this process has not cached yet; a request whose conversation
matches no prefix and may be a trimmed window takes a second (`load_overlap`). The rest
is pure (`reconcile`, `build_history`, `extend_history`).
"""

from __future__ import annotations

from proxy.compaction.breaker import Breaker
from proxy.context.compose import History, build_history, extend_history
from proxy.context.window import Window
from proxy.sessions import Identity, Reconciled, Turn, digest, needs_full_query, prefix_query, reconcile
from proxy.sessions.messages import Digests
from proxy.sessions.reconcile import ROOT, may_be_trimmed
from proxy.store import LoadedSession, SessionKeys, Store
from proxy.turn.paths import CachedPath, PathCache
from proxy.types import JSONObject, Message, frozen


@frozen
class Conversation:
    identity: Identity
    keys: SessionKeys
    history: History
    reconciled: Reconciled
    breaker: Breaker
    usage: JSONObject | None
    stored_window: Window
    """The session's window as stored (the CAS base for landing a compaction)."""

    @classmethod
    def new(cls, identity: Identity, conversation: list[Message], hashes: list[str]) -> Conversation:
        """A session that has nothing yet: everything is new input, from the root."""
        return cls(
            identity=identity,
            keys=identity.keys,
            history=build_history(Window(), []),
            reconciled=Reconciled(conversation, hashes, parent=ROOT, from_root=True, branched=False),
            breaker=Breaker(),
            usage=None,
            stored_window=Window(),
        )


async def load_conversation(
    store: Store, cache: PathCache, identity: Identity, conversation: list[Message]
) -> Conversation:
    """The session's history and how `conversation` (a request's messages after its leading
    system block) reconciles with it."""
    keys = identity.keys
    cache_key = identity.keys
    cached = cache.get(cache_key)
    digests = digest(conversation, cached.request if cached else None)
    loaded = await _load(store, keys, cached, digests, conversation)
    turns = [Turn.from_record(seq, record) for seq, record in loaded.turns]
    if cached is not None and loaded.extends:
        stored_window, applies = cached.stored_window, cached.applies
        history = extend_history(cached.history, turns)
    else:
        stored_window, applies = Window.from_json(loaded.window), loaded.window_applies
        history = build_history(_window_for_path(stored_window, applies), turns)
    if loaded.parent >= 0:
        cache.put(cache_key, CachedPath(loaded.parent, loaded.version, stored_window, applies, history, digests))
    return Conversation(
        identity=identity,
        keys=keys,
        history=history,
        reconciled=reconcile(conversation, digests.hashes, loaded, derived=identity.derived),
        breaker=Breaker.parse(loaded.breaker),
        usage=loaded.usage,
        stored_window=stored_window,
    )


async def _load(
    store: Store, keys: SessionKeys, cached: CachedPath | None, digests: Digests, conversation: list[Message]
) -> LoadedSession:
    """Reconcile rules 1-3 (see `proxy/sessions/reconcile.py`): the recent prefixes, then all
    of them, then a trimmed window; each step only when the one before found nothing."""
    known, version = (cached.head, cached.version) if cached else (-1, "")
    offset, prefixes = prefix_query(digests.chain, recent_only=True)
    loaded = await store.load_context(keys, offset, prefixes, known=known, known_version=version)
    if needs_full_query(loaded, conversation):
        offset, prefixes = prefix_query(digests.chain, recent_only=False)
        loaded = await store.load_context(keys, offset, prefixes, known=known, known_version=version)
    if not loaded.found and loaded.head >= 0 and may_be_trimmed(conversation):
        loaded = await store.load_overlap(keys, digests.hashes, known=known, known_version=version)
    return loaded


def _window_for_path(stored: Window, applies: bool) -> Window:
    """The stored window, or (for a branch that left before its boundary) a fresh one in its lineage."""
    if applies:
        return stored
    return Window(current=stored.current, first=stored.first, previous=stored.previous)

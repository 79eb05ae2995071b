"""Clearing a session's context (ContextChef's `clearHistory()`): a fresh lineage.

`POST /v1/sessions/{id}/clear` and `context-proxy sessions clear ID`. Every turn of the
session's path up to its head leaves the window (archived under the new window's id,
still in the journal); later requests see only the leading system/developer block and
the pinned messages, then what follows. The lineage starts again at the new window
(`first` = `current`, no `previous`), the breaker is closed (landing a window does
that), and the journal records the clear as an event. It lands like a compaction, only
if the window is still the one it was computed from; a concurrent compaction makes it
try again.
"""

from __future__ import annotations

from proxy.compaction.strategies.base import lift_pinned
from proxy.context.compose import History
from proxy.context.window import Window, archive_uri
from proxy.errors import Conflict
from proxy.events import ContextCleared, EventBus
from proxy.sessions import Identity
from proxy.store import Archive, Store
from proxy.turn.conversation import load_conversation
from proxy.turn.paths import PathCache
from proxy.types import JSONObject

_ATTEMPTS = 3


def fresh_window(history: History) -> Window:
    """The window after a clear: leading block and pinned messages only, a new lineage."""
    window = lift_pinned(history.window, history.units)
    new_id = window.next_id
    boundary = history.units[-1].last_seq if history.units else window.boundary
    return Window(
        current=new_id, first=new_id, previous=None, boundary=boundary,
        leading=window.leading, leading_tokens=window.leading_tokens, leading_hashes=window.leading_hashes,
        pinned=window.pinned, pinned_tokens=window.pinned_tokens,
    )  # fmt: skip


async def clear_context(store: Store, paths: PathCache, identity: Identity, events: EventBus, ttl_s: int) -> JSONObject:
    """Clear an existing session's context; `Conflict` if it kept changing meanwhile."""
    keys = identity.keys
    for _ in range(_ATTEMPTS):
        paths.discard(identity.keys)
        conversation = await load_conversation(store, paths, identity, [])
        history = conversation.history
        window = fresh_window(history)
        seqs = tuple(t.seq for unit in history.units for t in unit.turns)
        base = conversation.stored_window.current
        event = ContextCleared(
            identity.session, base, window.current, seqs, archive_uri(window.current) if seqs else None
        )
        landed = await store.save_window(
            keys,
            expected_window=base,
            window=window.to_json(),
            boundary=window.boundary,
            event=event.journal_entry(),
            archive=Archive(window.current if seqs else "", [m for unit in history.units for m in unit.messages]),
            ttl_s=ttl_s,
        )
        if landed:
            paths.discard(identity.keys)
            events.emit(event)
            return {"id": identity.session, "object": "session.cleared", "window": window.current,
                    "cleared_turns": list(seqs)}  # fmt: skip
    raise Conflict(f"session {identity.session!r} kept changing while it was being cleared; try again")

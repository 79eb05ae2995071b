"""Load a session's conversation for one request: reconcile it, rebuild the history.

One store round trip (`load_context`) returns where the request attaches and the path
of turns to it; the rest is pure (`reconcile`, `build_history`).
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.context.compose import History, build_history
from proxy.context.janitor import Breaker
from proxy.context.window import Window
from proxy.sessions import (
    Identity,
    Reconciled,
    Turn,
    chain_hashes,
    message_hash,
    prefix_query,
    reconcile,
)
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


async def load_conversation(store: Store, identity: Identity, messages: list[Message]) -> Conversation:
    keys = SessionKeys(identity.tenant, identity.session)
    hashes = [message_hash(m) for m in messages]
    offset, prefixes = prefix_query(chain_hashes(hashes), messages)
    loaded = await store.load_context(keys, offset, prefixes)
    stored_window = Window.from_json(loaded.window)
    window = stored_window
    turns = [Turn.from_record(seq, -2, record) for seq, record in loaded.turns]
    if not loaded.window_applies:
        window = Window(current=stored_window.current, first=stored_window.first, previous=stored_window.previous)
    if identity.derived and not loaded.found:
        turns = []
    history = build_history(window, turns)
    reconciled = reconcile(messages, hashes, loaded, derived=identity.derived, session_leading=history.leading_hashes())
    return Conversation(
        identity=identity,
        keys=keys,
        history=history,
        reconciled=reconciled,
        breaker=Breaker.parse(str(loaded.breaker)),
        usage=loaded.usage,
        stored_window=stored_window,
    )

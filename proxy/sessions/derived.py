"""Sessions for clients that send no session id: found by the conversation's own answers.

A request without an id continues the session that journaled one of the assistant
messages it carries. The last such message is looked up first in this process's
memory, then in the tenant's index in the store (`index_turn_end.lua`: a completed
turn's output hash -> its session, bounded and expiring with the session TTL); the
session's own journal then decides how the request reconciles. A request that carries
no known answer starts a new conversation in a new session. Identity is the
conversation's, not its opening's: a changed system prompt or a trimmed window keeps the
session, and two conversations that merely share a message ("Hi") are never merged,
since only a journaled answer links a request to a session.
"""

from __future__ import annotations

import os
from collections import OrderedDict

from proxy.sessions import message_hash
from proxy.sessions.identity import DERIVED_PREFIX
from proxy.store import Store, TenantKeys
from proxy.types import Message

LOOKUP_ANSWERS = 16
"""How many of a request's assistant messages (newest first) are looked up in the store."""


def new_session_id() -> str:
    return DERIVED_PREFIX + os.urandom(16).hex()


class DerivedSessions:
    """The tenant index in the store, with the recent turn ends of this process in front."""

    def __init__(self, store: Store, *, max_entries: int = 50_000) -> None:
        self._store = store
        self._recent: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._max = max_entries

    async def find(self, tenant: str, conversation: list[Message]) -> str | None:
        """The session whose journal holds the newest assistant message of `conversation`."""
        answers = [m for m in reversed(conversation) if m.get("role") == "assistant"][:LOOKUP_ANSWERS]
        if not answers:
            return None
        newest = message_hash(answers[0])
        session = self._recent.get((tenant, newest))
        if session is not None:
            self._recent.move_to_end((tenant, newest))
            return session
        hashes = [newest, *(message_hash(m) for m in answers[1:])]
        session = await self._store.find_derived(TenantKeys(tenant), hashes)
        if session is not None:
            self._remember(tenant, newest, session)
        return session

    async def record(self, tenant: str, output_hash: str, session: str, *, ttl_s: int) -> None:
        """A derived session's turn completed with this output: later requests carry it."""
        self._remember(tenant, output_hash, session)
        await self._store.index_derived(TenantKeys(tenant), output_hash, session, ttl_s=ttl_s)

    def _remember(self, tenant: str, output_hash: str, session: str) -> None:
        self._recent[(tenant, output_hash)] = session
        self._recent.move_to_end((tenant, output_hash))
        while len(self._recent) > self._max:
            self._recent.popitem(last=False)

"""The session API's reads and writes, scoped to one caller's tenant.

Each method takes an `Identity` (tenant and session) and answers with the JSON the
API returns, or raises `SessionNotFound`; the HTTP edge turns that into a 404.
"""

from __future__ import annotations

from proxy.config import Settings
from proxy.context.compose import compose_messages
from proxy.context.tokens import TokenCounter, count_messages
from proxy.context.window import FIRST_WINDOW, archive_uri
from proxy.events import EventBus
from proxy.session_api.clear import clear_context
from proxy.session_api.feedback import parse_feedback
from proxy.session_api.savings import listed_savings
from proxy.session_api.view import session_view
from proxy.sessions import Identity
from proxy.store import Store
from proxy.turn.conversation import load_conversation
from proxy.turn.paths import PathCache
from proxy.turn.projection import sent_history
from proxy.types import JSONObject


class SessionNotFound(LookupError):
    """No such session (or archived span) for this caller."""


class SessionAPI:
    def __init__(
        self, store: Store, paths: PathCache, tokens: TokenCounter, *, settings: Settings, events: EventBus
    ) -> None:
        self._store = store
        self._paths = paths
        self._tokens = tokens
        self._settings = settings
        self._events = events

    async def listing(self, tenant: str, *, after: str | None, limit: int) -> JSONObject | None:
        """The tenant's sessions, most recently used first, in OpenAI's list shape, `limit`
        after the session `after`; None when `after` is not one of them."""
        page = await self._store.page_sessions(tenant, after=after, limit=limit)
        if page is None:
            return None
        data: list[JSONObject] = [
            {"id": s.session, "object": "session", "created": s.created, "last_used": s.last_used,
             "turns": s.turns, "window": s.window or FIRST_WINDOW, "model": s.model,
             "tokens": (s.usage or {}).get("local"), "prompt_tokens": (s.usage or {}).get("prompt"),
             **listed_savings(s.savings)}
            for s in page.sessions
        ]  # fmt: skip
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }

    async def journal(self, identity: Identity) -> JSONObject:
        dump = await self._store.read_session(identity.keys)
        if dump is None:
            raise SessionNotFound(f"no session {identity.session!r} for this API key")
        return session_view(identity.session, dump, self._settings.context.price_for)

    async def next_context(self, identity: Identity, model: str) -> JSONObject:
        """Exactly the messages the next request would send before its new input."""
        await self._require(identity)
        conversation = await load_conversation(self._store, self._paths, identity, [])
        encoder = await self._tokens.encoder_for(model)
        history = await sent_history(
            conversation.history, store=self._store, keys=conversation.keys, context=self._settings.context,
            model=model, encoder=encoder,
        )  # fmt: skip
        messages = compose_messages(history, [])
        return {
            "id": identity.session,
            "object": "session.context",
            "window": conversation.history.window.current,
            "messages": messages,
            "tokens": sum(count_messages(encoder, messages)),
        }

    async def archived_span(self, identity: Identity, archive_id: str) -> JSONObject:
        """An evicted span, as a summary cites it."""
        span = await self._store.read_archive(identity.keys, archive_id)
        if span is None:
            raise SessionNotFound(f"no archive {archive_id!r} in session {identity.session!r} for this API key")
        return {"id": archive_id, "object": "session.archive", "uri": archive_uri(archive_id), "messages": span}

    async def clear(self, identity: Identity) -> JSONObject:
        """Start a fresh context lineage: later requests see only the leading block and pinned messages."""
        await self._require(identity)
        return await clear_context(self._store, self._paths, identity, self._events, self._settings.sessions.ttl_s)

    async def add_feedback(self, identity: Identity, turn: int, body: object) -> JSONObject:
        """Append feedback to one turn of the session (the turn itself is never edited)."""
        entry = parse_feedback(body)
        if not await self._store.add_feedback(identity.keys, turn, entry):
            raise SessionNotFound(f"no turn {turn} in session {identity.session!r} for this API key")
        return {"object": "session.turn.feedback", "session": identity.session, "turn": turn, "feedback": entry}

    async def _require(self, identity: Identity) -> None:
        if not await self._store.session_exists(identity.keys):
            raise SessionNotFound(f"no session {identity.session!r} for this API key")

    async def delete(self, identity: Identity) -> JSONObject:
        deleted = await self._store.delete_session(identity.keys)
        self._paths.discard(identity.keys)
        if not deleted:
            raise SessionNotFound(f"no session {identity.session!r} for this API key")
        return {"id": identity.session, "object": "session.deleted", "deleted": True}

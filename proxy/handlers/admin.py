"""The session API, scoped to the caller's own tenant (the hash of its key)."""

from __future__ import annotations

from aiohttp import web

from proxy.context.compose import compose_messages
from proxy.context.tokens import count_messages
from proxy.errors import NotFound
from proxy.handlers.conversation import load_conversation
from proxy.keys import PATHS, SETTINGS, STORE, TOKENS
from proxy.sessions import Identity, tenant_of
from proxy.sessions.identity import validate_session_id
from proxy.sessions.view import session_view
from proxy.store import SessionKeys


def _identity(request: web.Request) -> Identity:
    session = validate_session_id(request.match_info["id"], "path")
    tenant = tenant_of(request.headers.get("Authorization"), request.app[SETTINGS].upstream.api_key)
    return Identity(tenant, session, derived=False)


async def show_session(request: web.Request) -> web.Response:
    identity = _identity(request)
    dump = await request.app[STORE].read_session(SessionKeys(identity.tenant, identity.session))
    if dump is None:
        raise NotFound(f"no session {identity.session!r} for this API key")
    return web.json_response(session_view(identity.session, dump))


async def show_context(request: web.Request) -> web.Response:
    """Exactly the messages the next request would send before its new input."""
    identity = _identity(request)
    keys = SessionKeys(identity.tenant, identity.session)
    if not await request.app[STORE].session_exists(keys):
        raise NotFound(f"no session {identity.session!r} for this API key")
    conversation = await load_conversation(request.app[STORE], request.app[PATHS], identity, [])
    messages = compose_messages(conversation.history, [])
    model = request.query.get("model", "gpt-4o-mini")
    encoder = await request.app[TOKENS].encoder_for(model)
    return web.json_response(
        {
            "id": identity.session,
            "object": "session.context",
            "window": conversation.history.window.current,
            "messages": messages,
            "tokens": sum(count_messages(encoder, messages)),
        }
    )


async def show_archive(request: web.Request) -> web.Response:
    """An evicted span, as a summary cites it: `context://archive/<archive id>`."""
    identity = _identity(request)
    archive_id = request.match_info["archive"]
    span = await request.app[STORE].read_archive(SessionKeys(identity.tenant, identity.session), archive_id)
    if span is None:
        raise NotFound(f"no archive {archive_id!r} in session {identity.session!r} for this API key")
    return web.json_response(
        {"id": archive_id, "object": "session.archive", "uri": f"context://archive/{archive_id}", "messages": span}
    )


async def delete_session(request: web.Request) -> web.Response:
    identity = _identity(request)
    deleted = await request.app[STORE].delete_session(SessionKeys(identity.tenant, identity.session))
    request.app[PATHS].discard((identity.tenant, identity.session))
    if not deleted:
        raise NotFound(f"no session {identity.session!r} for this API key")
    return web.json_response({"id": identity.session, "object": "session.deleted", "deleted": True})

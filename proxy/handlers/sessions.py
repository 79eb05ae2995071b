"""The session API's HTTP edge, scoped to the caller's own tenant (its gateway key's name, else the hash of its key)."""

from __future__ import annotations

import orjson
from aiohttp import web

from proxy.app_state import PAST_CONTEXTS, PRINCIPAL, SESSIONS
from proxy.errors import BadRequest
from proxy.session_api.past_context import NEXT
from proxy.sessions import Identity
from proxy.sessions.identity import validate_session_id

DEFAULT_COUNT_MODEL = "gpt-4o-mini"


def _identity(request: web.Request) -> Identity:
    session = validate_session_id(request.match_info["id"], "path")
    return Identity(request[PRINCIPAL].tenant, session, derived=False)


async def show_session(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SESSIONS].journal(_identity(request)))


async def show_context(request: web.Request) -> web.Response:
    """Exactly the messages the next request would send before its new input."""
    model = request.query.get("model", DEFAULT_COUNT_MODEL)
    return web.json_response(await request.app[SESSIONS].next_context(_identity(request), model))


async def show_archive(request: web.Request) -> web.Response:
    """An evicted span, as a summary cites it: `context://archive/<archive id>`."""
    archive_id = request.match_info["archive"]
    return web.json_response(await request.app[SESSIONS].archived_span(_identity(request), archive_id))


async def delete_session(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SESSIONS].delete(_identity(request)))


async def clear_session(request: web.Request) -> web.Response:
    """A fresh context lineage: the journal keeps every turn and records the clear."""
    return web.json_response(await request.app[SESSIONS].clear(_identity(request)))


async def add_feedback(request: web.Request) -> web.Response:
    """`{"preferred": "...", "rating": 1|-1, "comment": "..."}` appended to one turn's feedback."""
    raw = request.match_info["turn"]
    if not raw.isdigit():
        raise BadRequest(f"turn must be a turn number (its seq), got {raw!r}", param="turn")
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from exc
    return web.json_response(await request.app[SESSIONS].add_feedback(_identity(request), int(raw), body))


async def show_turn_context(request: web.Request) -> web.Response:
    """The messages a past turn sent upstream (`next`: the next request's), rebuilt from the journal."""
    raw = request.match_info["seq"]
    if raw != NEXT and not raw.isdigit():
        raise BadRequest(f"a turn is its seq number or {NEXT!r}, got {raw!r}", param="seq")
    seq = None if raw == NEXT else int(raw)
    return web.json_response(
        await request.app[PAST_CONTEXTS].context(_identity(request), seq, request.query.get("model"))
    )
